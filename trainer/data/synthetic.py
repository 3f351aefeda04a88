"""A small synthetic data set with a real class hierarchy, for tests (built in about a second).

Classes are coloured shapes and textures in families: e.g. "red disc", "blue disc" (family "round
shapes"), "red stripes" (family "textures"). The hierarchy is written in the Tiny ImageNet
`wordnet_hierarchy.tsv` format, with a `supercategories.json`, so every code path that reads the
benchmark data reads this too.

>>> root = make_synthetic_dataset(tmp_path / "shapes")   # train/<class>/*.png, val/<class>/*.png  # doctest: +SKIP
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

COLOURS = {"red": (220, 40, 40), "green": (40, 180, 60), "blue": (50, 80, 220), "yellow": (230, 210, 40)}
FAMILIES = {  # family -> (group, shapes)
    "round shape": ("shapes", ("disc", "ring")),
    "angular shape": ("shapes", ("square", "triangle")),
    "texture": ("textures", ("stripes", "checkerboard")),
}


def class_list() -> list[tuple[str, str, str, str, str, str]]:
    """(id, name, family, group, shape, colour) for every class; ids look like WordNet ids."""
    out = []
    for family, (group, shapes) in FAMILIES.items():
        for shape in shapes:
            for colour in COLOURS:
                out.append((f"s{len(out):08d}", f"{colour} {shape}", family, group, shape, colour))
    return out


def draw(shape: str, colour: tuple[int, int, int], size: int, rng: np.random.Generator) -> np.ndarray:
    """One uint8 [size, size, 3] image: a noisy background and the shape at a random place and scale."""
    img = rng.integers(0, 60, (size, size, 3)).astype(np.float32) + rng.integers(0, 100)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    cy, cx = rng.uniform(0.35, 0.65, 2) * size
    r = rng.uniform(0.2, 0.35) * size
    if shape == "disc":
        mask = (yy - cy) ** 2 + (xx - cx) ** 2 < r**2
    elif shape == "ring":
        d = np.sqrt((yy - cy) ** 2 + (xx - cx) ** 2)
        mask = (d < r) & (d > 0.6 * r)
    elif shape == "square":
        mask = (np.abs(yy - cy) < r * 0.8) & (np.abs(xx - cx) < r * 0.8)
    elif shape == "triangle":
        mask = (yy > cy - r) & (yy < cy + r) & (np.abs(xx - cx) < (yy - cy + r) / 2)
    elif shape == "stripes":
        period = rng.uniform(4, 8) * size / 32
        mask = ((xx + yy * rng.uniform(-0.5, 0.5)) // (period / 2)) % 2 == 0
    elif shape == "checkerboard":
        period = rng.uniform(6, 10) * size / 32
        mask = ((xx // (period / 2)) + (yy // (period / 2))) % 2 == 0
    else:
        raise ValueError(f"unknown shape {shape!r}")
    shade = rng.uniform(0.75, 1.1)
    img[mask] = np.asarray(colour, np.float32) * shade + rng.normal(0, 12, (int(mask.sum()), 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def make_synthetic_dataset(root: str | Path, image_size: int = 32, train_per_class: int = 24,
                           val_per_class: int = 8, seed: int = 0) -> Path:
    """Write an ImageFolder (`train/<id>/*.png`, `val/<id>/*.png`) with hierarchy files; returns root."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    classes = class_list()
    for split, count in (("train", train_per_class), ("val", val_per_class)):
        for wnid, _, _, _, shape, colour in classes:
            folder = root / split / wnid
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(count):
                image = draw(shape, COLOURS[colour], image_size, rng)
                Image.fromarray(image).save(folder / f"{wnid}_{i}.png")
    lines = ["wnid\tname\tpath_root_to_leaf(first-hypernym)\tall_ancestor_wnids"]
    for wnid, name, family, group, shape, _ in classes:
        path = ["entity", "pattern", group, family, shape, name]
        lines.append(f"{wnid}\t{name}\t{' > '.join(path)}\t")
    (root / "wordnet_hierarchy.tsv").write_text("\n".join(lines) + "\n")
    groups: dict[str, list[dict]] = {}
    for wnid, name, family, *_ in classes:
        groups.setdefault(family.replace(" ", "_") + "s", []).append({"wnid": wnid, "name": name})
    (root / "supercategories.json").write_text(json.dumps({"supercategories": groups}, indent=1))
    return root
