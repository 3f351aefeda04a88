"""What signing costs a load: `sdk.load` of a bundle unsigned, against the same bundle signed and loaded
with `trusted_keys`, in alternated pairs in one process (issue 49: "< 5 ms on the bench bundle").
Writes docs/results/signing.{json,md}.

    .venv/bin/python -m scripts.bench_signing --bundle tiny-imagenet.taper [--pairs 40]

Both loads verify every member's SHA-256 (the default), so the difference is the signature's own cost:
reading the trailer and one Ed25519 verification. The signing key is made for the run and thrown away.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import sdk
from export.sign import sign_bundle
from sdk.format.signing import TRAILER, SigningKey, verify_trailer

OUT = Path("docs/results/signing")


def measure(bundle: Path, pairs: int) -> dict:
    key = SigningKey.generate()
    with tempfile.TemporaryDirectory() as folder:
        signed = Path(folder) / "signed.taper"
        start = time.perf_counter()
        sign_bundle(bundle, key, signed)
        sign_ms = (time.perf_counter() - start) * 1000
        plain, checked = [], []
        for i in range(pairs + 2):                 # the first two pairs warm the page cache and imports
            for which in ((0, 1) if i % 2 else (1, 0)):
                start = time.perf_counter()
                if which == 0:
                    sdk.load(bundle, cache=False)
                else:
                    sdk.load(signed, cache=False, trusted_keys=[key.public_key])
                (plain if which == 0 else checked).append((time.perf_counter() - start) * 1000)
        plain, checked = plain[2:], checked[2:]
        # The signature's own work, alone: read the trailer and verify it (what a load adds), 1,000 times.
        blob = signed.read_bytes()
        header, trailer = blob[:64], blob[-TRAILER.size:]
        verify_us = []
        for _ in range(1000):
            start = time.perf_counter()
            verify_trailer(header, trailer)
            verify_us.append((time.perf_counter() - start) * 1e6)
    differences = [c - p for p, c in zip(plain, checked, strict=True)]
    return {"bundle": str(bundle), "bytes": bundle.stat().st_size, "pairs": pairs,
            "load_unsigned_ms_median": round(statistics.median(plain), 2),
            "load_signed_trusted_ms_median": round(statistics.median(checked), 2),
            "signing_overhead_ms": round(statistics.median(differences), 3),
            "signing_overhead_ms_quartiles": [round(q, 3) for q in statistics.quantiles(differences, n=4)],
            "verify_signature_us_median": round(statistics.median(verify_us), 1),
            "sign_ms": round(sign_ms, 1), "machine": platform.processor() or platform.machine()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench_signing", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", type=Path, required=True, help="a bundle of version 5 (e.g. the bench's)")
    parser.add_argument("--pairs", type=int, default=40, help="alternated (unsigned, signed) loads")
    parser.add_argument("--out", type=Path, default=OUT, help="writes OUT.json and OUT.md")
    args = parser.parse_args(argv)
    result = measure(args.bundle, args.pairs)
    result["command"] = " ".join(["python -m scripts.bench_signing", *(argv if argv is not None else sys.argv[1:])])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    q1, q3 = result["signing_overhead_ms_quartiles"][0], result["signing_overhead_ms_quartiles"][2]
    args.out.with_suffix(".md").write_text(
        f"# What signing costs a load\n\n`{result['command']}` ({result['bytes'] / 1e6:.1f} MB bundle, "
        f"{result['pairs']} alternated pairs, one process, page cache warm).\n\n"
        "| sdk.load | median ms |\n|---|---|\n"
        f"| unsigned | {result['load_unsigned_ms_median']} |\n"
        f"| signed, `trusted_keys` | {result['load_signed_trusted_ms_median']} |\n"
        f"| difference per pair (median, quartiles) | {result['signing_overhead_ms']} ({q1} to {q3}) |\n"
        f"| the signature check alone (trailer + Ed25519 verify) | {result['verify_signature_us_median'] / 1000} |\n\n"
        f"Signing the bundle (`export.sign.sign_bundle`: full validation, rewrite) took {result['sign_ms']} ms.\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
