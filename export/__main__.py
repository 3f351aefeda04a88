"""Export CLI.

    python -m export bundle runs/bench --out tiny-imagenet.taper
    python -m export inspect tiny-imagenet.taper
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sdk.errors import SdkError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m export", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    pack = sub.add_parser("bundle", help="pack a finished training run into a .taper bundle")
    pack.add_argument("run_dir", type=Path)
    pack.add_argument("--out", type=Path, required=True)
    pack.add_argument("--variant", default="taper", help="stage-3 variant to pack (default: taper)")
    look = sub.add_parser("inspect", help="validate a bundle and print its manifest summary")
    look.add_argument("bundle", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "bundle":
            from .bundle import bundle_run

            path = bundle_run(args.run_dir, args.out, args.variant)
            print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
        else:
            from sdk.bundle import Bundle

            bundle = Bundle.open(args.bundle)
            m = bundle.manifest
            print(json.dumps({
                "file": str(args.bundle), "bytes": args.bundle.stat().st_size, "version": m["version"],
                "architecture": m["architecture"], "num_bases": m["num_bases"], "mixer": m["mixer"],
                "classes": len(bundle.classes), "supercategories": sorted(bundle.supercategories),
                "members": {k: v["size"] for k, v in m["members"].items()}, "provenance": m["provenance"],
                "checksums": "verified"}, indent=1))
    except (SdkError, ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
