"""The README's Results table, written from the results files so that no figure in it is typed by hand.

    python -m scripts.readme_results            # print the table
    python -m scripts.readme_results --write    # put it into README.md between the results markers
    python -m scripts.readme_results --check    # exit 1 if README.md's table differs from the files

Each row names the JSON file in docs/results that holds its figure; the report column links that
file's Markdown report. tests/test_readme.py fails when README.md and the files disagree.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
README = ROOT / "README.md"
BEGIN, END = "<!-- results table: written by scripts/readme_results.py -->", "<!-- end of results table -->"
MAX_ROWS = 15
BENCH_ORACLE = "stage 1 40 epochs (bench preset), lr 0.01-0.03"  # headroom.json: the bench preset's own oracle


@dataclass(frozen=True)
class Row:
    what: str
    source: str                          # a JSON file in docs/results
    figure: Callable[[dict], str]        # its figure, from that file's contents


def _vs(ours: float, theirs: float) -> str:
    return f"{ours:.2f} vs {theirs:.2f} ({ours - theirs:+.2f})"


def _oracle(oracle: dict) -> str:
    return f"{oracle['gain']['mean']:+.2f} points (std {oracle['gain']['std']:.2f}, {len(oracle['tasks'])} tasks)"


def _no_failures(d: dict, kinds: tuple[str, ...] = ("escape", "hang", "crash")) -> str:
    totals = d["totals"]
    return f"{d['cases']:,} cases: " + ", ".join(f"{totals[k]} {k}{'s' if k != 'crash' else 'es'}" for k in kinds)


ROWS = (
    Row("TAPER vs classifier selection, 20-way tasks, width 0.25 (600 tasks)", "bench.json",
        lambda d: _vs(d["accuracy"]["taper"], d["accuracy"]["classifier_selection"])),
    Row("the same at full width, trained on an H200", "bench_w1_h200.json",
        lambda d: _vs(d["accuracy"]["taper"], d["accuracy"]["classifier_selection"])),
    Row("per-task fine-tuning oracle over classifier selection (the headroom any mixer has)", "headroom.json",
        lambda d: _oracle(d["oracles"][BENCH_ORACLE])),
    Row("personalize(), bench size (fp32 bases)", "bundle.json",
        lambda d: f"{d['modes']['fp32']['personalize_ms']:.2f} ms"),
    Row("personalize(), full width, compact bases (subspace:16+fp16)", "bundle.json",
        lambda d: f"{d['full_width']['subspace:16+fp16']['personalize_ms']:.2f} ms "
                  f"(fp32 bases {d['full_width']['fp32']['personalize_ms']:.2f} ms)"),
    Row("inference of a personalized model over a plain onnxruntime session", "runtime.json",
        lambda d: f"{d['inference_ratio']:.3f}x"),
    Row("10 bases stored compactly, over one fp32 network (full width)", "bundle.json",
        lambda d: f"{d['full_width']['subspace:16+fp16']['bases_over_single_fp32']:.3f}x, "
                  f"accuracy {d['modes']['subspace:16+fp16']['minus_fp32']:+.2f} vs fp32 bases"),
    Row("held-out free-language phrasings (set F, 50): precision / recall", "retrieval.json",
        lambda d: f"{d['phrasings_heldout_f']['precision']:.2f} / {d['phrasings_heldout_f']['recall']:.2f}"),
    Row("few-shot: 20 unseen classes, 5 photos each (picked mixer; stage-1 features)", "fewshot_bench_preset.json",
        lambda d: f"{d['unseen_5shot']['proxy_selected']:.2f} ({d['unseen_5shot']['stage1_proto']:.2f})"),
    Row("no description: generic, then after 8 unlabelled batches of 32 (true description)", "self_improvement.json",
        lambda d: f"{d['accuracy'][0]:.2f} -> {d['accuracy'][-1]:.2f} ({d['true_description']:.2f})"),
    Row("damaged and hostile bundles", "reliability.json", _no_failures),
    Row("forged bundles loaded with trusted_keys", "reliability_signed.json",
        lambda d: f"{d['accepted_forged_edits']} of {d['cases']:,} damaged signed bundles accepted"),
    Row("hostile calls through images, examples, adapt, the ExecuTorch companion, exports, CLI", "entry_points.json",
        lambda d: f"{int(d['entry_points']['cases']):,} cases ({d['companion_unsigned']['cases']} re-checksummed "
                  f"unsigned companions): {d['entry_points']['crashes']} crashes, "
                  f"{d['entry_points']['silent_wrong']} silent wrong"),
    Row("Java core vs Python on damaged bundles, formats 5 and 6: agreement", "java_fuzz.json",
        lambda d: f"{d['agreement']:.0%} of {d['cases']:,}"),
    Row("your own photos, 24 plain-named classes: phrasings P / R, missing names told (unrelated classes "
        "returned), data faults reported",
        "own_data.json", lambda d: f"{d['phrasings']['precision']:.2f} / {d['phrasings']['recall']:.2f}, "
        f"{d['missing']['told']:.0%} ({d['missing']['unrelated']}), {d['faults']['reported']} of "
        f"{d['faults']['planted']}"),
)


def table(results: Path = RESULTS) -> str:
    """The Markdown table, each figure read from `results`."""
    lines = [BEGIN, "| what | figure | report |", "|---|---|---|"]
    for row in ROWS:
        data = json.loads((results / row.source).read_text())
        report = row.source.removesuffix(".json") + ".md"
        lines.append(f"| {row.what} | {row.figure(data)} | [{report}](docs/results/{report}) |")
    return "\n".join([*lines, END])


def replaced(readme: str, new_table: str) -> str:
    """`readme` with the text between the markers (inclusive) replaced by `new_table`."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"README.md has no results markers ({BEGIN} ... {END})")
    return readme[:start] + new_table + readme[end + len(END):]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write the table into README.md")
    mode.add_argument("--check", action="store_true", help="exit 1 if README.md's table is not the files'")
    args = parser.parse_args(argv)
    current = table()
    if args.write:
        README.write_text(replaced(README.read_text(), current))
    elif args.check:
        if replaced(README.read_text(), current) != README.read_text():
            print("README.md's results table differs from docs/results: run python -m scripts.readme_results --write",
                  file=sys.stderr)
            return 1
    else:
        print(current)
    return 0


if __name__ == "__main__":
    sys.exit(main())
