"""What the cache build found in a data set's images, said before the first epoch (issue 60, part 3).

Every file is looked at once, while the cache is built (`trainer.data.cache.build_cache`):
- unreadable, zero-byte, truncated, non-image or too large (more than sdk.media.images.MAX_IMAGE_PIXELS) files
  are skipped and named, or, with `strict`, the whole build is refused (nothing is written);
- CMYK, 16-bit, alpha, palette and greyscale images are converted to RGB (named and said);
- images not already `size` x `size` are resized so the shorter side is `size` and centre-cropped
  (counted and said; `--size` / `--set input_size=N` chooses the size);
- the same file bytes in train and in val are named (a val score would count images trained on);
- a class left with fewer than MIN_IMAGES training images is refused, fewer than FEW_IMAGES is said.

>>> report = DataReport()
>>> report.skip("train/cat/a.jpg", "zero bytes")
>>> report.lines(size=64)[0]
'skipped 1 file that is not a readable image (pass strict to refuse instead): train/cat/a.jpg (zero bytes)'
"""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass, field

from PIL import Image

from .errors import DataError

MIN_IMAGES = 2     # a class needs this many training images (one to train on, one more to be a class)
FEW_IMAGES = 10    # fewer training images than this in a class is said
SHOWN = 10         # files named in one line of the report
CONVERTED_MODES = {"CMYK": "CMYK", "I;16": "16-bit", "I;16L": "16-bit", "I;16B": "16-bit", "I;16N": "16-bit",
                   "I": "32-bit integer", "RGBA": "alpha", "LA": "alpha", "PA": "alpha", "P": "palette",
                   "L": "greyscale", "1": "1-bit"}


@dataclass
class DataReport:
    skipped: list[tuple[str, str]] = field(default_factory=list)   # (file, why)
    converted: dict[str, list[str]] = field(default_factory=dict)   # kind -> the images converted
    resized: Counter = field(default_factory=Counter)               # "WxH" -> images not already size x size
    duplicates: list[tuple[str, str]] = field(default_factory=list)  # (train file, val file) with equal bytes
    few: dict[str, int] = field(default_factory=dict)               # class -> training images (< FEW_IMAGES)
    notes: list[str] = field(default_factory=list)                  # from the source (e.g. val split from train)

    def skip(self, name: str, why: str) -> None:
        self.skipped.append((name, why))

    def look(self, data: bytes, size: int, name: str) -> None:
        """Note the image's mode and size from its header (cheap: no pixels decoded)."""
        try:
            with Image.open(io.BytesIO(data)) as image:
                kind = CONVERTED_MODES.get(image.mode)
                if image.mode == "P" and "transparency" in image.info:
                    kind = "alpha"
                if kind is not None:
                    self.converted.setdefault(kind, []).append(name)
                if image.size != (size, size):
                    self.resized[f"{image.width}x{image.height}"] += 1
        except Exception:  # noqa: BLE001 - the decode that follows names the fault
            pass

    def check_classes(self, counts: dict[str, int], where: str) -> None:
        """DataError for a class with fewer than MIN_IMAGES training images; a few more are noted."""
        empty = sorted(c for c, n in counts.items() if n < MIN_IMAGES)
        if empty:
            raise DataError(f"{where}: classes with fewer than {MIN_IMAGES} readable training images: "
                            f"{_shown(empty)} (add photos to train/<class>/, or remove the folder)")
        self.few = {c: n for c, n in sorted(counts.items()) if n < FEW_IMAGES}

    def refuse_if_strict(self, strict: bool, where: str) -> None:
        if strict and (self.skipped or self.duplicates):
            problems = [f"{name} ({why})" for name, why in self.skipped]
            problems += [f"{a} is also {b}" for a, b in self.duplicates]
            raise DataError(f"{where}: refused (strict): {len(problems)} problem(s): {_shown(problems)}")

    def lines(self, size: int) -> list[str]:
        """The report, one line per finding; [] if there is nothing to say."""
        out = list(self.notes)
        if self.skipped:
            n = len(self.skipped)
            out.append(f"skipped {n} file{'s' if n > 1 else ''} that {'are' if n > 1 else 'is'} not a readable "
                       f"image (pass strict to refuse instead): "
                       f"{_shown([f'{name} ({why})' for name, why in self.skipped])}")
        if self.duplicates:
            out.append(f"{len(self.duplicates)} val image(s) are byte-for-byte training images (val accuracy counts "
                       f"them): {_shown([f'{a} = {b}' for a, b in self.duplicates])}")
        for kind, names in sorted(self.converted.items()):
            out.append(f"converted {len(names)} {kind} image(s) to RGB: {_shown(names)}")
        if self.resized:
            total = sum(self.resized.values())
            sizes = ", ".join(f"{k} ({n})" for k, n in self.resized.most_common(3))
            out.append(f"{total} image(s) are not {size}x{size} ({sizes}{', ...' if len(self.resized) > 3 else ''}): "
                       f"resized so the shorter side is {size} and centre-cropped (--set input_size=N to choose)")
        if self.few:
            out.append(f"classes with fewer than {FEW_IMAGES} training images: "
                       + _shown([f"{c} ({n})" for c, n in self.few.items()]))
        return out

    def to_dict(self) -> dict:
        return {"skipped": [list(s) for s in self.skipped],
                "converted": {kind: len(names) for kind, names in self.converted.items()},
                "resized": sum(self.resized.values()), "duplicates": [list(d) for d in self.duplicates],
                "few": self.few, "notes": self.notes}


def _shown(items: list[str]) -> str:
    return ", ".join(items[:SHOWN]) + (f", ... ({len(items)} in all)" if len(items) > SHOWN else "")
