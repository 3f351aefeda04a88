"""The conditions data (issue 50): every image of a decoded data set under each condition, computed once.

Beside the data set's own cache (trainer.data.cache), never in the repository:

    <cache root>/data/<data set folder>-conditions-v1/<condition>/
        meta.json                   condition, counts, severities, seed, build seconds
        train_images.npy            uint8 [N, S, S, 3]: each training image once, at its own severity
        train_severity.npy          int64 [N]: that severity, uniform over 1..5 (seeded per condition)
        val_s3_images.npy, val_s5_images.npy   every val image at the reported severities

`clean` has no folder: its images are the data set's own. Each condition's folder is written atomically;
a chunk's randomness is seeded by (condition, split, severity, chunk), so the bytes do not depend on
the order of the build or on the machine.

    python -m trainer.data.condition_cache ../shared/data/tiny-imagenet-200.tar.gz            # builds what is missing
    python -m trainer.data.condition_cache ../shared/data/tiny-imagenet-200.tar.gz --workers 8  # 8 at once
    python -m trainer.data.condition_cache ../shared/data/tiny-imagenet-200.tar.gz --check    # PSNR per condition
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from sdk.media.cache import atomic_directory

from ..device import host_to
from .cache import DecodedDataset, DeviceSplit, Split, load_dataset
from .conditions import CONDITION_NAMES, REPORT_SEVERITIES, SEVERITIES, apply_condition, psnr

CONDITIONS_VERSION = 1
SEED = 50  # issue 50
CHUNK = 2000  # images per seeded chunk (part of the data's definition: do not change)


def conditions_folder(data: DecodedDataset) -> Path:
    return data.folder.with_name(f"{data.folder.name}-conditions-v{CONDITIONS_VERSION}")


def train_severities(name: str, count: int) -> np.ndarray:
    """Each training image's severity under condition `name`: uniform over 1..5, seeded."""
    rng = np.random.default_rng([SEED, CONDITION_NAMES.index(name), 0])
    return rng.integers(SEVERITIES[0], SEVERITIES[-1] + 1, size=count)


def _transform_split(
    name: str, images: np.ndarray, severity: np.ndarray, out: np.ndarray, split_id: int, bar: tqdm
) -> None:
    for chunk, start in enumerate(range(0, len(images), CHUNK)):
        stop = min(start + CHUNK, len(images))
        seed = [SEED, CONDITION_NAMES.index(name), split_id, chunk]
        out[start:stop] = apply_condition(name, np.array(images[start:stop]), severity[start:stop], seed)
        bar.update(stop - start)


def build_condition(data: DecodedDataset, name: str, progress: bool = True) -> float:
    """Write condition `name`'s folder; returns the seconds it took."""
    start = time.perf_counter()
    n_train, n_val = len(data.train), len(data.val)
    total = n_train + n_val * len(REPORT_SEVERITIES)
    with (
        atomic_directory(conditions_folder(data) / name) as tmp,
        tqdm(total=total, desc=f"condition {name}", unit="img", disable=not progress, mininterval=2.0) as bar,
    ):
        severity = train_severities(name, n_train)
        np.save(tmp / "train_severity.npy", severity)
        shape = data.train.images.shape
        train = np.lib.format.open_memmap(tmp / "train_images.npy", mode="w+", dtype=np.uint8, shape=shape)
        _transform_split(name, data.train.images, severity, train, 0, bar)
        train.flush()
        del train
        for s in REPORT_SEVERITIES:
            val = np.lib.format.open_memmap(
                tmp / f"val_s{s}_images.npy", mode="w+", dtype=np.uint8, shape=data.val.images.shape
            )
            _transform_split(name, data.val.images, np.full(n_val, s), val, s, bar)
            val.flush()
            del val
        seconds = round(time.perf_counter() - start, 1)
        meta = {
            "version": CONDITIONS_VERSION,
            "condition": name,
            "seed": SEED,
            "chunk": CHUNK,
            "train": n_train,
            "val": n_val,
            "val_severities": list(REPORT_SEVERITIES),
            "source": str(data.folder),
            "build_seconds": seconds,
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    return seconds


@dataclass
class ConditionData:
    """The data set under every condition: `train(name)` and `val(name, severity)` are Splits whose labels
    are the data set's own (memory-mapped images)."""

    data: DecodedDataset
    folder: Path

    device: torch.device | None = None   # set by `on`: train() gives DeviceSplits there
    _on_device: dict = field(default_factory=dict, repr=False)

    @classmethod
    def open(cls, data: DecodedDataset, build: bool = True, progress: bool = True, workers: int = 1) -> ConditionData:
        """The conditions of `data`, building the missing ones (`workers` > 1: that many at once, each in
        its own process; the bytes do not depend on it, as every chunk is seeded by itself)."""
        folder = conditions_folder(data)
        missing = [name for name in CONDITION_NAMES[1:] if not (folder / name / "meta.json").is_file()]
        if missing and not build:
            raise FileNotFoundError(
                f"{folder / missing[0]}: condition not built (python -m trainer.data.condition_cache)"
            )
        for name, seconds in _build(data, missing, workers, progress):
            if progress:
                print(f"[conditions] {name} built in {seconds:.0f} s", flush=True)
        return cls(data, folder)

    def on(self, data: DecodedDataset, device: torch.device) -> ConditionData:
        """These conditions with `data` (whose training split is already on `device`, the CUDA path) as
        clean, each other condition's training images copied to `device` when first asked for (1.2 GB each
        for Tiny ImageNet), so batches are gathered there."""
        return ConditionData(data, self.folder, device)

    def train(self, name: str) -> Split | DeviceSplit:
        if name == "clean":
            return self.data.train
        if name not in self._on_device:
            split = Split(np.load(self.folder / name / "train_images.npy", mmap_mode="r"), self.data.train.labels)
            if self.device is None:
                return split
            self._on_device[name] = DeviceSplit.of(split, self.device)
        return self._on_device[name]

    def val(self, name: str, severity: int) -> Split:
        if name == "clean":
            return self.data.val
        if severity not in REPORT_SEVERITIES:
            raise ValueError(f"val images are stored at severities {REPORT_SEVERITIES}, not {severity}")
        return Split(np.load(self.folder / name / f"val_s{severity}_images.npy", mmap_mode="r"), self.data.val.labels)

    def build_seconds(self) -> dict[str, float]:
        return {
            name: json.loads((self.folder / name / "meta.json").read_text())["build_seconds"]
            for name in CONDITION_NAMES[1:]
        }


class MixtureSplit:
    """The training images, each batch drawing every image's condition uniformly from `names` (a Split's
    interface for trainer.batches.plain_batches). The draws come from a generator seeded once, so the
    sequence of batches is deterministic for one uninterrupted run, and the same on either device: the
    conditions' splits are memory-mapped, or on the GPU (`ConditionData.on`), and each gathers its own rows."""

    def __init__(self, conditions: ConditionData, names: tuple[str, ...], seed: int):
        self.splits = [conditions.train(name) for name in names]
        self.labels = conditions.data.train.labels
        self.rng = np.random.default_rng([SEED, seed, 1])

    def __len__(self) -> int:
        return len(self.labels)

    def take(self, index: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        which = self.rng.integers(len(self.splits), size=len(index))
        images = labels = None
        for c in np.unique(which):
            part_images, part_labels = self.splits[c].take(index[which == c])
            if images is None:
                images = part_images.new_empty((len(index), *part_images.shape[1:]))
                labels = part_labels.new_empty(len(index))
            rows = host_to(torch.from_numpy(np.flatnonzero(which == c)), images.device)
            images[rows], labels[rows] = part_images, part_labels
        return images, labels


def _build(data: DecodedDataset, names: list[str], workers: int, progress: bool) -> Iterator[tuple[str, float]]:
    """Build each condition of `names`, one after another or `workers` at once in worker processes;
    (name, seconds) as each is done (in `names`' order)."""
    if workers < 2 or len(names) < 2:
        yield from ((name, build_condition(data, name, progress)) for name in names)
        return
    threads = max(1, (os.cpu_count() or 1) // min(workers, len(names)))
    context = multiprocessing.get_context("spawn")   # no forked torch thread pools
    with ProcessPoolExecutor(min(workers, len(names)), mp_context=context) as pool:
        futures = {name: pool.submit(_build_from_folder, str(data.folder), name, threads) for name in names}
        yield from ((name, future.result()) for name, future in futures.items())


def _build_from_folder(folder: str, name: str, threads: int) -> float:
    """build_condition in a worker process, from the decoded data set's folder (memory maps are not sent)."""
    torch.set_num_threads(threads)
    return build_condition(DecodedDataset.open(folder), name, progress=False)


def check(conditions: ConditionData, count: int = 1000) -> dict:
    """Mean PSNR (dB) of each condition's first `count` val images at each reported severity."""
    clean = np.asarray(conditions.data.val.images[:count])
    return {
        name: {
            f"s{s}": round(psnr(clean, np.asarray(conditions.val(name, s).images[:count])), 2)
            for s in REPORT_SEVERITIES
        }
        for name in CONDITION_NAMES[1:]
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.data.condition_cache",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("data", type=Path, help="the data set (e.g. ../shared/data/tiny-imagenet-200.tar.gz)")
    parser.add_argument("--check", action="store_true", help="print each condition's PSNR against clean")
    parser.add_argument("--workers", type=int, default=1,
                        help="conditions built at once, each in its own process (the same bytes; e.g. 8 on 16 cores)")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    torch.set_num_threads(2)
    conditions = ConditionData.open(load_dataset(args.data), workers=args.workers)
    result = {"folder": str(conditions.folder), "build_seconds": conditions.build_seconds()}
    if args.check:
        result["psnr_db"] = check(conditions)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
