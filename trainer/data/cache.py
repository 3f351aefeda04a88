"""A decoded uint8 cache of a data set, memory-mapped, so an epoch is not bound by JPEG decoding.

Built once per (source, image size) under `<cache root>/data/`, atomically (temp folder + rename):
    meta.json                        classes, names, counts, image size, source, build time
    {train,val}_images.npy           uint8 [N, S, S, 3]
    {train,val}_labels.npy           int64 [N]
    vocabulary.toml                  the data's words (trainer/data/sources.py; caches built before it keep
                                     WordNet's files, converted when opened)

>>> data = load_dataset("../shared/data/tiny-imagenet-200.tar.gz")   # ~20 s the first time  # doctest: +SKIP
>>> data.train.images.shape                                                                  # doctest: +SKIP
(100000, 64, 64, 3)
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from sdk.errors import ImageError
from sdk.media.cache import atomic_directory, cache_root
from sdk.media.images import decode_image, fit_to_square
from sdk.media.report_page import terminal_text

from ..device import host_to
from .checks import DataReport
from .errors import DataError
from .hierarchy import ClassHierarchy
from .sources import LabelledImages, open_source
from .vocabulary import VOCABULARY_FILE, Vocabulary
from .wordnet import CONCEPT_NAMES_FILE, HIERARCHY_FILE, SUPERCATEGORIES_FILE, wordnet_vocabulary

CACHE_VERSION = 4  # 2: concept_names.tsv (names of the WordNet ancestors) kept beside the hierarchy;
#                   3: an ImageFolder's vocabulary.toml kept, its names read from it (or its folder names);
#                   since, every source's vocabulary.toml (Tiny ImageNet's converted): a version-3 cache
#                   holding WordNet's files instead reads the same, converted when opened;
#                   4: Tiny ImageNet's converted vocabulary has the related kinds' groups (wordnet.py)
TINY_IMAGENET_SIZE = 64


@dataclass
class Split:
    images: np.ndarray  # uint8 [N, S, S, 3], memory-mapped
    labels: np.ndarray  # int64 [N]

    def __len__(self) -> int:
        return len(self.labels)

    def take(self, index: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """(uint8 images [len(index), S, S, 3], int64 labels) on the CPU."""
        return torch.from_numpy(np.ascontiguousarray(self.images[index])), torch.from_numpy(self.labels[index])

    def subset(self, rows: np.ndarray) -> Split:
        """The split's `rows` (sorted indices), copied into memory."""
        return Split(np.asarray(self.images[rows]), np.asarray(self.labels[rows]))


@dataclass
class DeviceSplit:
    """A split copied to a device once (the CUDA path), gathered there batch by batch. `labels` stays a
    numpy array, as in `Split`: the batch samplers draw their indices from it on the CPU."""
    images: torch.Tensor   # uint8 [N, S, S, 3] on the device
    labels: np.ndarray     # int64 [N]
    device_labels: torch.Tensor

    @classmethod
    def of(cls, split: Split, device: torch.device) -> DeviceSplit:
        images = torch.empty(split.images.shape, dtype=torch.uint8, device=device)
        for start in range(0, len(split), 8192):  # in chunks: the memory map is never read whole into RAM
            chunk = np.array(split.images[start:start + 8192])  # a writable copy of the mapped rows
            images[start:start + len(chunk)] = torch.from_numpy(chunk).to(device)
        labels = np.asarray(split.labels)
        return cls(images, labels, torch.from_numpy(labels).to(device))

    def __len__(self) -> int:
        return len(self.labels)

    def take(self, index: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """(uint8 images, int64 labels) of `index`, on the device."""
        rows = host_to(torch.from_numpy(np.asarray(index, dtype=np.int64)), self.images.device)
        return self.images[rows], self.device_labels[rows]

    def subset(self, rows: np.ndarray) -> DeviceSplit:
        """The split's `rows` (sorted indices), gathered on its device."""
        index = host_to(torch.from_numpy(np.asarray(rows, dtype=np.int64)), self.images.device)
        return DeviceSplit(self.images[index], np.asarray(self.labels[rows]), self.device_labels[index])


@dataclass
class DecodedDataset:
    folder: Path
    wnids: list[str]
    names: list[str]
    image_size: int
    hierarchy: ClassHierarchy
    train: Split
    val: Split
    report: list[str] = field(default_factory=list)   # what the cache build found (trainer.data.checks)
    checks: dict = field(default_factory=dict)

    @property
    def num_classes(self) -> int:
        return len(self.wnids)

    @classmethod
    def open(cls, folder: str | Path) -> DecodedDataset:
        folder = Path(folder)
        try:
            meta = json.loads((folder / "meta.json").read_text())
            splits = {s: Split(np.load(folder / f"{s}_images.npy", mmap_mode="r"),
                               np.load(folder / f"{s}_labels.npy")) for s in ("train", "val")}
        except (OSError, ValueError, KeyError) as e:
            raise DataError(f"{folder}: not a decoded data set cache ({e})") from None
        wnids, names = meta["wnids"], meta["names"]
        if (folder / VOCABULARY_FILE).is_file():
            hierarchy = Vocabulary.load(folder / VOCABULARY_FILE, wnids).hierarchy()
        elif meta.get("layout") == "imagefolder" and not (folder / HIERARCHY_FILE).is_file():
            hierarchy = Vocabulary.default(wnids).hierarchy()
        else:   # a cache built before vocabularies: its WordNet files, converted as a new build would
            hierarchy = _legacy_vocabulary(folder, wnids, names).hierarchy()
        if meta.get("layout") == "imagefolder":
            names = hierarchy.names  # the vocabulary's (or the folder names'), whatever the cache recorded
        return cls(folder, wnids, names, meta["image_size"], hierarchy, splits["train"], splits["val"],
                   meta.get("report", []), meta.get("checks", {}))


def _legacy_vocabulary(folder: Path, wnids: list[str], names: list[str]) -> Vocabulary:
    def text(name: str) -> str | None:
        path = folder / name
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
    words = text(CONCEPT_NAMES_FILE) or ""
    if not (folder / HIERARCHY_FILE).is_file():   # no hierarchy: the class names the cache recorded
        words += "".join(f"{w}\t{n}\n" for w, n in zip(wnids, names, strict=True))
    return wordnet_vocabulary(wnids, text(HIERARCHY_FILE), text(SUPERCATEGORIES_FILE), words or None, str(folder))


def load_dataset(source: str | Path, image_size: int | None = None, cache_dir: Path | None = None,
                 progress: bool = True, strict: bool = False) -> DecodedDataset:
    """The decoded data set of `source` (a Tiny ImageNet .tar.gz / folder, or an ImageFolder),
    building the cache on first use. `image_size` defaults to 64 (Tiny ImageNet's size); other images are
    resized and centre-cropped to it. `strict`: DataError instead of skipping a file that is not a readable
    image or keeping a val image that is also a training image (also for a cache built without it)."""
    source = Path(source).expanduser()
    if not source.exists():
        raise DataError(f"{source}: data path does not exist")
    size = image_size or TINY_IMAGENET_SIZE
    folder = (cache_dir or cache_root() / "data") / f"{source.name}-{size}px-{_fingerprint(source, size)}"
    if not (folder / "meta.json").is_file():
        build_cache(open_source(source), folder, size, progress, strict)
    data = DecodedDataset.open(folder)
    if strict and (data.checks.get("skipped") or data.checks.get("duplicates")):
        raise DataError(f"{source}: refused (strict): its cache {folder} was built skipping files or with val "
                        f"images equal to training ones: {'; '.join(data.report)}")
    return data


def list_caches(cache_dir: Path | None = None) -> list[dict]:
    """The decoded caches under the cache root: {folder, source, size_mb}, largest first."""
    root = cache_dir or cache_root() / "data"
    rows = []
    for folder in sorted(root.glob("*/meta.json")) if root.is_dir() else []:
        folder = folder.parent
        try:
            source = json.loads((folder / "meta.json").read_text()).get("source", "?")
        except (OSError, ValueError):
            source = "? (unreadable meta.json)"
        size = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
        rows.append({"folder": str(folder), "source": source, "size_mb": round(size / 1e6, 1)})
    return sorted(rows, key=lambda r: -r["size_mb"])


def clear_caches(cache_dir: Path | None = None) -> int:
    """Remove every decoded cache (folders holding a meta.json, nothing else) under the cache root; their count."""
    import shutil

    rows = list_caches(cache_dir)
    for row in rows:
        shutil.rmtree(row["folder"])
    return len(rows)


def _fingerprint(source: Path, size: int) -> str:
    """Changes when the source's files change (path, size and mtime of each)."""
    h = hashlib.sha256(f"v{CACHE_VERSION}|{size}|{source.resolve()}".encode())
    entries = sorted(source.rglob("*")) if source.is_dir() else [source]
    for p in entries:
        if p.is_file():
            st = p.stat()
            h.update(f"{p.relative_to(source) if source.is_dir() else p.name}|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()[:12]


def build_cache(data: LabelledImages, folder: Path, image_size: int, progress: bool = True,
                strict: bool = False) -> DataReport:
    """Decode every image of `data` into uint8 arrays under `folder` (written atomically), checking them as
    it goes (trainer.data.checks): files that are not readable images are skipped and named, or with
    `strict` the build is refused and nothing is written. Returns what was found (also in meta.json)."""
    start = time.perf_counter()
    report = DataReport(notes=list(data.notes))
    where = str(data.files.source)
    seen: dict[bytes, str] = {}
    with atomic_directory(folder) as tmp:
        for split, items in data.splits.items():
            images = np.lib.format.open_memmap(tmp / f"{split}_images.npy", mode="w+", dtype=np.uint8,
                                               shape=(len(items), image_size, image_size, 3))
            kept: list[int] = []
            bar = tqdm(items, desc=f"decode {split}", unit="img", disable=not progress, mininterval=1.0)
            for i, (rel, _) in enumerate(bar):
                name = f"{split}/{rel.split('/', 1)[-1]}" if data.layout == "imagefolder" else rel
                try:
                    blob = data.files.read(rel)
                    if not blob:
                        raise ImageError(f"{where}/{rel}: zero bytes")
                    images[len(kept)] = fit_to_square(decode_image(blob, f"{where}/{rel}"), image_size)
                except (ImageError, DataError) as e:
                    report.skip(name, str(e).removeprefix(f"{where}/{rel}: "))
                    continue
                report.look(blob, image_size, name)
                digest = hashlib.sha256(blob).digest()
                if split == "train":
                    seen.setdefault(digest, name)
                elif digest in seen:
                    report.duplicates.append((seen[digest], name))
                kept.append(i)
            labels = np.array([items[i][1] for i in kept], dtype=np.int64)
            images.flush()
            if len(kept) < len(items):   # rare: rewrite without the skipped rows' space
                rows = np.array(images[:len(kept)])
                del images
                np.save(tmp / f"{split}_images.npy", rows)
            else:
                del images
            np.save(tmp / f"{split}_labels.npy", labels)
            if split == "train":
                counts = np.bincount(labels, minlength=len(data.wnids))
                report.check_classes({w: int(n) for w, n in zip(data.wnids, counts, strict=True)}, where)
        report.refuse_if_strict(strict, where)
        for name, blob in data.extra_files.items():
            (tmp / name).write_bytes(blob)
        meta = {"version": CACHE_VERSION, "source": str(data.files.source), "layout": data.layout,
                "image_size": image_size, "wnids": data.wnids, "names": data.names,
                "counts": {s: len(items) for s, items in data.splits.items()},
                "checks": report.to_dict(), "report": report.lines(image_size),
                "build_seconds": round(time.perf_counter() - start, 1)}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    if progress:
        for line in report.lines(image_size):
            print(f"[data] {terminal_text(line)}", flush=True)
        print(f"[cache] {folder} built in {time.perf_counter() - start:.1f} s", flush=True)
    return report
