"""Export CLI.

    python -m export bundle runs/bench --out tiny-imagenet.taper
    python -m export bundle runs/bench --out compact.taper --mode drop:0.02+lowrank:8+fp16
    python -m export inspect tiny-imagenet.taper
    python -m export golden tiny-imagenet.taper --out golden/ --case "goldfish, tench" --case "insects"
    python -m export executorch tiny-imagenet.taper        # the companion for sdk.load(..., engine="executorch")
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
    pack.add_argument("--mode", default="fp32", help="how the bases are stored: fp32 (default), or options joined "
                      "by '+': fp16, delta, int8, lowrank:R, drop:T (see export/compress.py)")
    pack.add_argument("--no-collections", dest="collections", action="store_false",
                      help="leave out the everyday collections (export/everyday_collections.json): "
                      "WordNet concepts only")
    pack.add_argument("--no-facets", dest="facets", action="store_false",
                      help="leave out the class facets (export/class_facets.json), keep the collections")
    gold = sub.add_parser("golden", help="write golden vectors for the Java mirror (android_demo/core)")
    gold.add_argument("bundle", type=Path)
    gold.add_argument("--out", type=Path, required=True)
    gold.add_argument("--case", action="append", help="a description to personalize for (repeat for several; "
                      "default: the tiny test bundle's cases)")
    xnn = sub.add_parser("executorch", help="write a bundle's ExecuTorch companion (XNNPACK program, external weights)")
    xnn.add_argument("bundle", type=Path)
    xnn.add_argument("--out", type=Path, default=None, help="default: <bundle>.xnnpack")
    look = sub.add_parser("inspect", help="validate a bundle and print its manifest summary")
    look.add_argument("bundle", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "bundle":
            from .bundle import bundle_run
            from .compress import Mode

            path = bundle_run(args.run_dir, args.out, args.variant, Mode.parse(args.mode), args.collections,
                              args.facets)
            print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
        elif args.command == "golden":
            from .golden import CASES, write_golden

            print(write_golden(args.bundle, args.out, args.case or CASES))
        elif args.command == "executorch":
            from .executorch_program import export_companion

            path = export_companion(args.bundle, args.out)
            print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
        else:
            from sdk.bundle import Bundle

            bundle = Bundle.open(args.bundle)
            m = bundle.manifest.to_json()
            print(json.dumps({
                "file": str(args.bundle), "bytes": args.bundle.stat().st_size, "version": m["version"],
                "architecture": m["architecture"], "num_bases": m["num_bases"], "mixer": m["mixer"],
                "classes": len(bundle.classes), "supercategories": sorted(bundle.supercategories),
                "concepts": len(bundle.concepts),
                "members": {k: v["size"] for k, v in m["members"].items()}, "provenance": m["provenance"],
                "checksums": "verified"}, indent=1))
    except (SdkError, ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
