"""Runtime CLI: prints the chosen classes, how the description was read and the timings, then a
prediction per image; --export also writes the personalized model (needs the export extra).

    python -m sdk personalize tiny-imagenet.taper "insects" --images photos/ --export insects.onnx
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .errors import ImageError, SdkError
from .runtime import load, personalize

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".gif"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sdk", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("personalize", help="personalize a bundle for a description and classify images")
    p.add_argument("bundle", type=Path)
    p.add_argument("description", help='free text ("insects"), or a comma list of class names')
    p.add_argument("--images", type=Path, help="an image file or a folder of images to classify")
    p.add_argument("--max-classes", type=int, default=20)
    p.add_argument("--export", type=Path, help="write the personalized model: .onnx, .pte or .mlpackage")
    args = parser.parse_args(argv)
    try:
        bundle = load(args.bundle)
        model = personalize(bundle, args.description, max_classes=args.max_classes)
        print(json.dumps({"classes": model.classes, "resolution": model.resolution,
                          "timings_ms": model.timings}, indent=1))
        if args.images:
            if not args.images.exists():
                raise ImageError(f"{args.images}: no such file or folder")
            files = sorted(f for f in args.images.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES) \
                if args.images.is_dir() else [args.images]
            for path, (label, prob) in zip(files, model.predict([str(f) for f in files]) if files else [],
                                           strict=True):
                print(f"{path.name}\t{label}\t{prob:.3f}")
        if args.export:
            print(f"exported {model.export(args.export)}")
    except SdkError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
