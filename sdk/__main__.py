"""Runtime CLI: personalize a bundle for a description, then classify images; --export also writes the
personalized model (needs the export extra). Prints a readable report, or with --json one JSON object.

    python -m sdk personalize tiny-imagenet.taper "insects" --images photos/ --export insects.onnx
    python -m sdk personalize tiny-imagenet.taper "insects" --images photos/ --json
    python -m sdk personalize tiny-imagenet.taper "insects" --images photos/ --report photos.html   # a contact sheet
    python -m sdk cache list        # the warm-start cache (sdk/engines/device_cache.py): entries, bytes, last use
    python -m sdk cache clear
    python -m sdk --version
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

from sdk._version import __version__
from sdk.errors import ImageError, SdkError
from sdk.media.report_page import BIDI_CONTROL_CHARS, terminal_text
from sdk.runtime import load, personalize
from sdk.text.encoder import primary_name

UNSURE = 0.5  # a contact sheet's summary counts the photos below this probability
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".gif"}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sdk", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"taper-sdk {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("personalize", help="personalize a bundle for a description and classify images")
    run.add_argument("bundle", type=Path)
    run.add_argument("description", help='free text ("insects"), or a comma list of class names')
    run.add_argument("--images", type=Path, help="an image file or a folder of images to classify")
    run.add_argument("--max-classes", type=int, default=20)
    run.add_argument("--precision", choices=("float32", "int8"), default="float32",
                     help="int8: quantized on the device without photos (--export: .onnx only)")
    run.add_argument("--export", type=Path, help="write the personalized model: .onnx, .pte or .mlpackage")
    run.add_argument("--json", action="store_true", help="print one JSON object instead of a readable report")
    run.add_argument("--report", type=Path, metavar="HTML",
                     help="also write a contact sheet of the --images (thumbnail, label, probability; least "
                          "confident first): one self-contained page that opens offline")
    run.add_argument("--trusted-key", action="append", dest="trusted_keys", metavar="KEY",
                     help="accept only a bundle signed by this key (64 hex digits or a .pub file; repeat for several)")
    cache = sub.add_parser("cache", help="list or clear the warm-start cache (device-compiled backbones, "
                                         "text encoder sessions)")
    cache.add_argument("action", choices=("list", "clear"))
    return p


def cache_command(action: str) -> int:
    from sdk.engines import device_cache

    if action == "clear":
        print(f"removed {device_cache.clear()} entries from {device_cache.cache_dir()}")
        return 0
    found = device_cache.entries()
    print(f"{device_cache.cache_dir()}: {len(found)} entries, {sum(e['bytes'] for e in found) / 1e6:.1f} MB "
          f"(cap {device_cache.MAX_BYTES / 1e6:.0f} MB)")
    for e in found:
        print(f"  {e['key']}  {e['kind']:<12}  {e['bytes'] / 1e6:8.2f} MB  last used {e['last_used']}")
    return 0


def image_files(path: Path) -> list[Path]:
    if not path.exists():
        raise ImageError(f"{path}: no such file or folder")
    if path.is_dir():
        return sorted(f for f in path.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES and f.is_file())
    return [path]


def shown(name: str) -> str:
    """A file name as text that prints in UTF-8: bytes that are not UTF-8 (a name from another system,
    which Python holds as surrogate escapes) are written as backslash escapes, not passed through."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def report(result: dict) -> str:
    """The readable form of `result` (what --json prints as JSON): a class by its first name ("ladybug",
    not its five WordNet synonyms); every name stays in --json and `model.classes`. Names, descriptions and
    file names come from the bundle, the user and the disk: each is printed through `terminal_text`."""
    name = lambda label: terminal_text(primary_name(label))  # noqa: E731
    lines = [f"classes ({len(result['classes'])}): {', '.join(map(name, result['classes']))}",
             *(f"  {terminal_text(how)}" for how in result["resolution"]),   # how the description was read
             "timings (ms): " + ", ".join(f"{k} {v:.1f}" for k, v in result["timings_ms"].items())]
    if result.get("predictions"):
        images = [terminal_text(p["image"]) for p in result["predictions"]]
        width = max(map(len, images))
        lines += ["", f"{'image':<{width}}  label  (probability)"]
        lines += [f"{image:<{width}}  {name(p['label'])}  ({p['probability']:.3f})"
                  for image, p in zip(images, result["predictions"], strict=True)]
    if result.get("report"):
        lines.append(f"contact sheet {terminal_text(result['report'])}")
    if result.get("exported"):
        lines.append(f"exported {terminal_text(result['exported'])}")
    return "\n".join(lines)


def json_text(result: dict) -> str:
    """`result` as JSON for a terminal: control characters are JSON escapes already; bidirectional controls
    are written as JSON escapes too (\\u202e), which parse back to the same strings."""
    text = json.dumps(result, indent=1, ensure_ascii=False)
    return text.translate({ord(c): f"\\u{ord(c):04x}" for c in BIDI_CONTROL_CHARS})


def contact_sheet(description: str, result: dict, files: list[Path]) -> str:
    """The --report page: how the description was read, then every photo with its label and probability,
    the least confident first (the ones a person should look at)."""
    from sdk.media.images import read_image_file
    from sdk.media.report_page import THUMBNAIL_PX, Section, Tile, cpu_name, render_page, thumbnail_uri
    from sdk.text.resolver import MISSING

    predictions = result["predictions"]
    order = sorted(range(len(files)), key=lambda i: predictions[i]["probability"])
    # Thumbnails are decoded again at display size: predict() decoded at the model's input size.
    tiles = [Tile(thumbnail_uri(read_image_file(files[i], size=2 * THUMBNAIL_PX)),
                  [predictions[i]["image"], primary_name(predictions[i]["label"]),
                   f"probability {predictions[i]['probability']:.2f}"]) for i in order]
    counts = Counter(primary_name(p["label"]) for p in predictions)
    unsure = sum(p["probability"] < UNSURE for p in predictions)
    summary = [f"{len(files)} photos classified for the description {description!r} "
               f"({len(result['classes'])} classes); the least confident come first.",
               f"{unsure} of {len(files)} have a probability below {UNSURE}: look at those first.",
               f"Personalized in {result['timings_ms'].get('total', 0):.1f} ms on {cpu_name()}."]
    reading = Section("How the description was read", facts=[
        ("classes", ", ".join(map(primary_name, result["classes"]))),
        ("labels given", ", ".join(f"{name} {n}" for name, n in counts.most_common()))],
        reading=[(how, MISSING in how) for how in result["resolution"]])
    return render_page(f"Contact sheet: {description}", summary, [reading, Section("Photos", tiles=tiles)])


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "personalize" and args.report and not args.images:
        parser().error("--report needs --images (the photos to show)")
    if args.command == "cache":
        return cache_command(args.action)
    try:
        bundle = load(args.bundle, trusted_keys=args.trusted_keys)
        model = personalize(bundle, args.description, max_classes=args.max_classes, precision=args.precision)
        result = {"classes": model.classes, "class_ids": model.class_ids,
                  "aliases": [bundle.bundle.classes[i].aliases if i >= 0 else [] for i in model.class_indices],
                  "resolution": model.resolution, "timings_ms": model.timings, "precision": model.precision,
                  "signer": bundle.signer.key_id if bundle.signer else None}
        if args.images:
            files = image_files(args.images)
            result["predictions"] = [{"image": shown(f.name), "label": label, "probability": round(prob, 6)}
                                     for f, (label, prob) in zip(files, model.predict(files) if files else [],
                                                                 strict=True)]
        if args.report:
            from sdk.media.report_page import write_page

            result["report"] = shown(str(write_page(args.report, contact_sheet(args.description, result, files))))
        if args.export:
            result["exported"] = shown(str(model.export(args.export)))
    except SdkError as e:
        print(f"error: {terminal_text(e)}", file=sys.stderr)
        return 2
    print(json_text(result) if args.json else report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
