"""Export CLI.

    python -m export bundle runs/bench --out tiny-imagenet.taper
    python -m export bundle runs/bench --out compact.taper --mode drop:0.02+lowrank:8+fp16
    python -m export inspect tiny-imagenet.taper
    python -m export golden tiny-imagenet.taper --out golden/ --case "goldfish, tench" --case "insects"
    python -m export executorch tiny-imagenet.taper        # the companion for sdk.load(..., engine="executorch")
    python -m export keygen --out keys/release.key          # private key (0600) + keys/release.key.pub
    python -m export sign tiny-imagenet.taper --key keys/release.key
    python -m export sign tiny-imagenet.taper.xnnpack --key keys/release.key   # a companion, checked against
                                                                               # its bundle beside it
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sdk.errors import SdkError
from sdk.media.report_page import terminal_text


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
                      help="leave out the everyday collections and class facets that the WordNet "
                      "conversion adds (trainer/data/everyday_collections.json): WordNet concepts only")
    pack.add_argument("--no-facets", dest="facets", action="store_false",
                      help="leave out the class facets (trainer/data/class_facets.json), keep the collections")
    pack.add_argument("--no-english", dest="english", action="store_false",
                      help="for one's own classes, leave out what WordNet adds (trainer/data/english.py): the "
                      "kinds above the classes as concepts, their synonyms and glosses, the kinds below the "
                      "concepts; only the vocabulary's words")
    pack.add_argument("--sign", type=Path, default=None, metavar="KEY",
                      help="sign the bundle with this private key (python -m export keygen)")
    keygen = sub.add_parser("keygen", help="make an Ed25519 signing key: KEY (private, mode 0600) and KEY.pub")
    keygen.add_argument("--out", type=Path, required=True, help="the private key's path; never overwritten")
    sign = sub.add_parser("sign", help="sign a bundle (format version 6) or an ExecuTorch companion (its version 3) "
                          "so that apps can require it")
    sign.add_argument("bundle", type=Path, help="a .taper bundle or its .xnnpack companion")
    sign.add_argument("--key", type=Path, required=True, help="the private key (python -m export keygen)")
    sign.add_argument("--out", type=Path, default=None, help="default: replace the file (atomically)")
    sign.add_argument("--for-bundle", type=Path, default=None, metavar="BUNDLE",
                      help="a companion's bundle, which it is checked against (default: its path without .xnnpack)")
    gold = sub.add_parser("golden", help="write golden vectors for the Java mirror (android_demo/core)")
    gold.add_argument("bundle", type=Path)
    gold.add_argument("--out", type=Path, required=True)
    gold.add_argument("--case", action="append", help="a description to personalize for (repeat for several; "
                      "default: the tiny test bundle's cases)")
    xnn = sub.add_parser("executorch", help="write a bundle's ExecuTorch companion (XNNPACK program, external weights)")
    xnn.add_argument("bundle", type=Path)
    xnn.add_argument("--out", type=Path, default=None, help="default: <bundle>.xnnpack")
    xnn.add_argument("--sign", type=Path, default=None, metavar="KEY",
                     help="sign the companion with this private key (python -m export keygen)")
    look = sub.add_parser("inspect", help="validate a bundle and print its manifest summary")
    look.add_argument("bundle", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "bundle":
            from .bundle import bundle_run
            from .compress import Mode

            key = None
            if args.sign is not None:
                from sdk.format.signing import SigningKey

                key = SigningKey.load(args.sign)       # before the minutes of exporting, not after
            path = bundle_run(args.run_dir, args.out, args.variant, Mode.parse(args.mode), args.collections,
                              args.facets, key=key, english=args.english)
            print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB{', signed by key ' + key.key_id if key else ''})")
            from sdk.format.bundle import Bundle

            from .bundle import description_kinds

            for line in description_kinds(Bundle.open(path, verify=False)):
                print(line)
        elif args.command == "keygen":
            from sdk.format.signing import generate_key

            key = generate_key(args.out)
            print(f"wrote {args.out} (private: keep it out of the app and out of version control) and "
                  f"{args.out}.pub (key {key.key_id}: give it to apps as trusted_keys)")
        elif args.command == "sign":
            from sdk.format.signing import SigningKey

            from .sign import is_companion, sign_bundle, sign_companion_file

            key = SigningKey.load(args.key)
            if is_companion(args.bundle):
                signer = sign_companion_file(args.bundle, key, args.for_bundle, args.out)
            else:
                signer = sign_bundle(args.bundle, key, args.out)
            print(f"signed {args.out or args.bundle} with {signer}")
        elif args.command == "golden":
            from .golden import CASES, write_golden

            print(write_golden(args.bundle, args.out, args.case or CASES))
        elif args.command == "executorch":
            from .executorch_program import export_companion

            key = None
            if args.sign is not None:
                from sdk.format.signing import SigningKey

                key = SigningKey.load(args.sign)
            path = export_companion(args.bundle, args.out, key)
            print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB{', signed by key ' + key.key_id if key else ''})")
        else:
            from sdk.format.bundle import Bundle

            bundle = Bundle.open(args.bundle)
            m = bundle.manifest.to_json()
            print(json.dumps({
                "file": str(args.bundle), "bytes": args.bundle.stat().st_size, "version": m["version"],
                "architecture": m["architecture"], "num_bases": m["num_bases"], "mixer": m["mixer"],
                "classes": len(bundle.classes), "supercategories": sorted(bundle.supercategories),
                "concepts": len(bundle.concepts),
                "signer": bundle.signer and {"key_id": bundle.signer.key_id, "public_key": bundle.signer.public_key},
                "members": {k: v["size"] for k, v in m["members"].items()}, "provenance": m["provenance"],
                "checksums": "verified"}, indent=1))
    except (SdkError, ValueError, FileNotFoundError) as e:
        print(f"error: {terminal_text(e)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
