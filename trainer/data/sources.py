"""Where images come from: a Tiny ImageNet archive or folder, or a generic ImageFolder.

Each source is turned into a list of labelled images (file name, class index) plus the class list,
read through a small file-access layer so the same parser works for a .tar.gz and a directory.

Supported layouts:
- Tiny ImageNet (`wnids.txt`, `train/<wnid>/images/*`, `val/images/*` + `val/val_annotations.txt`),
  as the .tar.gz or extracted.
- ImageFolder: `<root>/train/<class>/*.{jpg,png,...}` and `<root>/val/<class>/*`.
The words of either are one vocabulary (trainer/data/vocabulary.py): `<root>/vocabulary.toml` when present,
else WordNet's files (`wordnet_hierarchy.tsv`, `supercategories.json`, `words.txt`) converted into one
(trainer/data/wordnet.py), else the folder names alone (no groups: the run says what that costs). The
cache keeps the vocabulary it used, as vocabulary.toml.
"""

from __future__ import annotations

import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .errors import DataError
from .hierarchy import ClassHierarchy
from .vocabulary import VOCABULARY_FILE, Vocabulary
from .wordnet import HIERARCHY_FILE, SUPERCATEGORIES_FILE, WORDS_FILE, wordnet_vocabulary

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp"}
MAX_MEMBER_BYTES = 64 * 1024 * 1024


class Files:
    """Relative posix paths -> bytes, for a directory or an archive read once into memory."""

    def __init__(self, source: Path):
        self.source = source
        self._blobs: dict[str, bytes] = {}
        if source.is_dir():
            self.paths = sorted(p.relative_to(source).as_posix() for p in source.rglob("*") if p.is_file())
        elif source.is_file():
            self._blobs = _read_archive(source)
            self.paths = sorted(self._blobs)
        else:
            raise DataError(f"{source}: no such file or directory")

    def read(self, rel: str) -> bytes:
        if self._blobs:
            return self._blobs[rel]
        try:
            return (self.source / rel).read_bytes()
        except OSError as e:
            raise DataError(f"{self.source / rel}: {e.strerror}") from None

    def text(self, rel: str) -> str:
        try:
            return self.read(rel).decode("utf-8")
        except UnicodeDecodeError:
            raise DataError(f"{self.source}/{rel}: not UTF-8 text") from None

    def __contains__(self, rel: str) -> bool:
        return rel in self._blobs if self._blobs else (self.source / rel).is_file()


def _read_archive(path: Path) -> dict[str, bytes]:
    """Regular files of a tar archive (any compression), with a single top-level folder stripped."""
    blobs: dict[str, bytes] = {}
    try:
        with tarfile.open(path, "r:*") as tar:
            for member in tar:
                if not member.isfile():
                    continue  # links and devices are never followed
                if member.size > MAX_MEMBER_BYTES:
                    raise DataError(f"{path}: member {member.name} is {member.size} bytes (too large)")
                parts = PurePosixPath(member.name).parts
                if member.name.startswith("/") or ".." in parts:
                    raise DataError(f"{path}: unsafe member path {member.name!r}")
                blobs[member.name] = tar.extractfile(member).read()
    except (tarfile.TarError, EOFError, zlib.error, OSError) as e:
        raise DataError(f"{path}: corrupt or truncated archive ({type(e).__name__}: {e})") from None
    tops = {PurePosixPath(name).parts[0] for name in blobs}
    if len(tops) == 1 and any(len(PurePosixPath(n).parts) > 1 for n in blobs):
        top = tops.pop() + "/"
        blobs = {name[len(top):]: data for name, data in blobs.items()}
    return blobs


@dataclass
class LabelledImages:
    """Everything needed to decode a data set: files, class list, and (path, label) per split."""

    files: Files
    layout: str
    wnids: list[str]
    names: list[str]
    splits: dict[str, list[tuple[str, int]]]
    hierarchy: ClassHierarchy
    extra_files: dict[str, bytes]  # hierarchy files copied into the cache
    notes: list[str] = field(default_factory=list)  # what was done to the layout (a val split made from train)


def open_source(path: str | Path) -> LabelledImages:
    """Detect the layout of `path` and list its labelled images."""
    path = Path(path).expanduser()
    if not path.exists():
        raise DataError(f"{path}: data path does not exist")
    if path.is_dir() and (path / "tiny-imagenet-200").is_dir() and not (path / "wnids.txt").exists():
        path = path / "tiny-imagenet-200"
    files = Files(path)
    if "wnids.txt" in files:
        return _tiny_imagenet(files)
    if path.is_dir():
        return _image_folder(files)
    raise DataError(f"{path}: archive has no wnids.txt (not a Tiny ImageNet archive)")


def _vocabulary(files: Files, wnids: list[str]) -> tuple[ClassHierarchy, dict[str, bytes], list[str]]:
    """The data's vocabulary as a hierarchy, the vocabulary.toml the cache keeps, and what to tell the user:
    the source's own vocabulary.toml, else WordNet's files converted."""
    if VOCABULARY_FILE in files:
        text = files.text(VOCABULARY_FILE)
        vocabulary = Vocabulary.from_text(text, wnids, where=f"{files.source}/{VOCABULARY_FILE}")
        return vocabulary.hierarchy(), {VOCABULARY_FILE: text.encode()}, vocabulary.notes
    def text(name: str) -> str | None:
        return files.read(name).decode("utf-8", "replace") if name in files else None
    vocabulary = wordnet_vocabulary(wnids, text(HIERARCHY_FILE), text(SUPERCATEGORIES_FILE), text(WORDS_FILE),
                                    where=str(files.source))
    written = vocabulary.to_text()   # what the cache keeps must read back as what the run trains with
    if Vocabulary.from_text(written, wnids, where=f"{files.source} (converted)") != vocabulary:
        raise DataError(f"{files.source}: its WordNet files convert to a vocabulary that does not read back equal")
    return vocabulary.hierarchy(), {VOCABULARY_FILE: written.encode()}, vocabulary.notes


def _tiny_imagenet(files: Files) -> LabelledImages:
    wnids = sorted({w.strip() for w in files.text("wnids.txt").split() if w.strip()})
    if not wnids:
        raise DataError(f"{files.source}/wnids.txt: no class ids")
    index = {w: i for i, w in enumerate(wnids)}
    train = []
    for rel in files.paths:
        parts = rel.split("/")
        if len(parts) == 4 and parts[0] == "train" and parts[2] == "images" and _is_image(rel):
            if parts[1] not in index:
                raise DataError(f"{files.source}/{rel}: class {parts[1]} is not in wnids.txt")
            train.append((rel, index[parts[1]]))
    val = []
    if "val/val_annotations.txt" in files:
        for lineno, line in enumerate(files.text("val/val_annotations.txt").splitlines(), 1):
            cols = line.split("\t")
            if len(cols) < 2:
                continue
            if cols[1] not in index:
                raise DataError(f"{files.source}/val/val_annotations.txt:{lineno}: unknown class {cols[1]}")
            rel = f"val/images/{cols[0]}"
            if rel not in files:
                raise DataError(f"{files.source}/val/val_annotations.txt:{lineno}: missing image {rel}")
            val.append((rel, index[cols[1]]))
    if not train:
        raise DataError(f"{files.source}: no training images under train/<wnid>/images/")
    hierarchy, extra, notes = _vocabulary(files, wnids)
    return LabelledImages(files, "tiny-imagenet", wnids, hierarchy.names, {"train": train, "val": val}, hierarchy,
                          extra, notes)


def _image_folder(files: Files) -> LabelledImages:
    splits: dict[str, list[tuple[str, str]]] = {"train": [], "val": []}
    ignored = []
    for rel in files.paths:
        parts = rel.split("/")
        if len(parts) == 3 and parts[0] in splits:
            if _is_image(rel):
                splits[parts[0]].append((rel, parts[1]))
            elif not parts[2].startswith("."):   # hidden files (.DS_Store) are a file system's, not the user's
                ignored.append(rel)
    if not splits["train"]:
        raise DataError(f"{files.source}: no images under train/<class>/ (expected an ImageFolder layout "
                        "with train/ and val/, or a Tiny ImageNet folder with wnids.txt)")
    wnids = sorted({c for _, c in splits["train"]})
    index = {w: i for i, w in enumerate(wnids)}
    unknown = sorted({c for _, c in splits["val"]} - set(index))
    if unknown:
        raise DataError(f"{files.source}/val: classes with no training images: {unknown[:5]}")
    if VOCABULARY_FILE in files or HIERARCHY_FILE in files:
        hierarchy, extra, notes = _vocabulary(files, wnids)
    else:
        hierarchy, extra, notes = Vocabulary.default(wnids).hierarchy(), {}, []
    labelled = {s: [(rel, index[c]) for rel, c in items] for s, items in splits.items()}
    if ignored:
        suffixes = ", ".join(sorted(IMAGE_SUFFIXES))
        notes.append(f"ignored {len(ignored)} file(s) whose names are not images' ({suffixes}): "
                     + ", ".join(ignored[:10]) + (f", ... ({len(ignored)} in all)" if len(ignored) > 10 else ""))
    if not labelled["val"]:
        labelled["train"], labelled["val"] = split_off_val(labelled["train"])
        notes.append(f"no val/ folder: {len(labelled['val'])} training images ({VAL_FRACTION:.0%} of each class of "
                     f"at least {2 * MIN_VAL_SOURCE} images, seed 0) are held out as val")
    return LabelledImages(files, "imagefolder", wnids, hierarchy.names, labelled, hierarchy, extra, notes)


VAL_FRACTION, MIN_VAL_SOURCE = 0.1, 5


def split_off_val(train: list[tuple[str, int]], seed: int = 0) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(train, val): a seeded VAL_FRACTION of each class's images (at least one) as val, for classes of at
    least 2 * MIN_VAL_SOURCE images; smaller classes keep all theirs for training."""
    import numpy as np

    rng = np.random.default_rng(seed)
    by_class: dict[int, list[tuple[str, int]]] = {}
    for item in train:
        by_class.setdefault(item[1], []).append(item)
    kept, val = [], []
    for label in sorted(by_class):
        items = by_class[label]
        n = max(1, round(len(items) * VAL_FRACTION)) if len(items) >= 2 * MIN_VAL_SOURCE else 0
        held = set(rng.permutation(len(items))[:n].tolist())
        for i, item in enumerate(items):
            (val if i in held else kept).append(item)
    return kept, val


def _is_image(rel: str) -> bool:
    return PurePosixPath(rel).suffix.lower() in IMAGE_SUFFIXES
