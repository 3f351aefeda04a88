"""Class retrieval quality of free-language descriptions (issue 14). Writes <out>.json and <out>.md.

    python scripts/bench_retrieval.py --bundle bench.taper --out docs/results/retrieval

Every set is resolved exactly as `sdk.personalize` resolves a description (`TaskResolver.resolve` with
the default TaskOptions), twice: with the bundle's concepts (format 5) and without them (the bundle's
classes, groups and path nodes only, as a format 3/4 bundle resolves):
- glosses: each class's WordNet gloss (needs Debian's `wordnet-base`): is the class in the chosen set
  (recall_at_set) and is it the most similar class (rank1, the class embeddings alone)?
- groups: each super-category's name as typed (underscores as spaces): precision and recall of the
  chosen set against the group's classes (these hit the group rule of sdk/tasks.py by name);
- phrasings: phrasings users type that are not hierarchy names, with the classes each means (chosen by
  hand): precision and recall, means over phrasings. Three files: scripts/retrieval_phrasings.json (27,
  the set the rules and thresholds were chosen on), retrieval_phrasings_heldout.json (23, held out but
  looked at once before one rule change) and retrieval_phrasings_heldout_b.json (21, never used to
  choose anything).
Also the median time to resolve a phrasing and to embed it (text encoder), with concepts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sdk  # noqa: E402
from sdk.errors import DescriptionError  # noqa: E402
from sdk.tasks import TaskOptions, TaskResolver  # noqa: E402

HERE = Path(__file__).parent
PHRASING_SETS = {"phrasings": HERE / "retrieval_phrasings.json",
                 "phrasings_heldout_a": HERE / "retrieval_phrasings_heldout.json",
                 "phrasings_heldout_b": HERE / "retrieval_phrasings_heldout_b.json"}
TITLES = {"phrasings": "user phrasings (tuning set)",
          "phrasings_heldout_a": "user phrasings, held out A (looked at once)",
          "phrasings_heldout_b": "user phrasings, held out B (clean)"}


def precision_recall(chosen: set[int], expected: set[int]) -> tuple[float, float]:
    hits = len(chosen & expected)
    return (hits / len(chosen) if chosen else 0.0), hits / len(expected)


def resolve(resolver: TaskResolver, text: str, options: TaskOptions) -> tuple[set[int], float, float]:
    """The chosen classes ({} if nothing matches), the milliseconds it took and those spent encoding."""
    start = time.perf_counter()
    try:
        task = resolver.resolve(text, options)
    except DescriptionError:
        return set(), (time.perf_counter() - start) * 1000, float("nan")
    return set(task.classes.tolist()), (time.perf_counter() - start) * 1000, task.encode_ms


def mean_pr(rows: dict) -> dict:
    return {"precision": round(float(np.mean([r["precision"] for r in rows.values()])), 3),
            "recall": round(float(np.mean([r["recall"] for r in rows.values()])), 3), "n": len(rows)}


def measure(resolver: TaskResolver, bundle: sdk.TaperBundle, glosses: list[str], options: TaskOptions,
            rank1: float) -> dict:
    classes = bundle.bundle.classes
    index = {c.id: i for i, c in enumerate(classes)}
    out: dict = {}
    in_set = [i in resolve(resolver, gloss, options)[0] for i, gloss in enumerate(glosses)]
    out["glosses"] = {"recall_at_set": round(float(np.mean(in_set)), 3), "rank1": rank1, "n": len(glosses)}
    groups = {name: precision_recall(resolve(resolver, name.replace("_", " "), options)[0], set(members))
              for name, members in bundle.bundle.supercategories.items()}
    out["groups"] = {"precision": round(float(np.mean([p for p, _ in groups.values()])), 3),
                     "recall": round(float(np.mean([r for _, r in groups.values()])), 3), "n": len(groups)}
    times, encodes = [], []
    for key, path in PHRASING_SETS.items():
        phrasings = {k: v for k, v in json.loads(path.read_text()).items() if not k.startswith("_")}
        rows = {}
        for text, wnids in phrasings.items():
            chosen, ms, encode_ms = resolve(resolver, text, options)
            times.append(ms)
            encodes.append(encode_ms)
            p, r = precision_recall(chosen, {index[w] for w in wnids})
            names = [classes[i].name.split(",")[0] for i in sorted(chosen)]
            rows[text] = {"precision": round(p, 3), "recall": round(r, 3), "chosen": len(chosen),
                          "expected": len(wnids), "chosen_classes": names}
        out[key] = {**mean_pr(rows), "rows": rows}
    out["resolve_ms_median"] = round(statistics.median(times), 2)
    out["encode_ms_median"] = round(float(np.nanmedian(encodes)), 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("docs/results/retrieval"))
    args = parser.parse_args()
    bundle = sdk.load(args.bundle).warm_up()
    b = bundle.bundle
    if not b.concepts:
        raise SystemExit(f"{args.bundle} has no concepts (format {b.manifest.version}); export it again")
    from trainer.data.glosses import read_glosses

    glosses = read_glosses([c.id for c in b.classes])
    options = TaskOptions()
    plain = TaskResolver(b.classes, b.class_embeddings, b.supercategories, bundle.embedder)
    for _ in range(3):  # warm the encoder's session before anything is timed
        bundle.embedder("warm up")
    # Rank 1 depends on the class embeddings alone, the same with and without concepts.
    rank1 = round(float(np.mean([int(np.argmax(b.class_embeddings @ bundle.embedder(g))) == i
                                 for i, g in enumerate(glosses)])), 3)
    result = {"bundle": args.bundle.name, "format_version": b.manifest.version, "concepts": len(b.concepts),
              "options": vars(options), **measure(bundle.resolver, bundle, glosses, options, rank1),
              "without_concepts": measure(plain, bundle, glosses, options, rank1),
              "command": "python scripts/bench_retrieval.py " + " ".join(sys.argv[1:])}
    for key in PHRASING_SETS:  # the per-phrasing rows are kept for the bundle's own rules only
        result["without_concepts"][key].pop("rows")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    args.out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))


def markdown(r: dict) -> str:
    w = r["without_concepts"]
    lines = ["# Class retrieval from free-language descriptions", "", f"Command: `{r['command']}`", "",
             f"Bundle `{r['bundle']}` (format {r['format_version']}, {r['concepts']} concepts), resolved as "
             f"`sdk.personalize` does (default TaskOptions: {r['options']}). 'Without concepts' is the same "
             "bundle resolved from its classes, super-categories and path nodes only, as a format 3/4 bundle is "
             "(the and/or rule applies to both).", "",
             "| set | n | measure | with concepts | without concepts |", "|---|---|---|---|---|",
             f"| WordNet glosses | {r['glosses']['n']} | class in the chosen set | {r['glosses']['recall_at_set']} | "
             f"{w['glosses']['recall_at_set']} |",
             f"| WordNet glosses | {r['glosses']['n']} | class ranked first | {r['glosses']['rank1']} | "
             f"{w['glosses']['rank1']} |",
             f"| super-category names | {r['groups']['n']} | precision / recall | {r['groups']['precision']} / "
             f"{r['groups']['recall']} | {w['groups']['precision']} / {w['groups']['recall']} |"]
    for key in PHRASING_SETS:
        lines.append(f"| {TITLES[key]} | {r[key]['n']} | precision / recall | {r[key]['precision']} / "
                     f"{r[key]['recall']} | {w[key]['precision']} / {w[key]['recall']} |")
    lines += ["", f"Median time to resolve a phrasing: {r['resolve_ms_median']} ms with concepts "
              f"({w['resolve_ms_median']} ms without); of which embedding the text: {r['encode_ms_median']} ms.", ""]
    for key in PHRASING_SETS:
        lines += [f"## {TITLES[key]}", "", "| phrasing | expected | chosen | precision | recall | chosen classes |",
                  "|---|---|---|---|---|---|"]
        for text, row in r[key]["rows"].items():
            lines.append(f"| {text} | {row['expected']} | {row['chosen']} | {row['precision']} | {row['recall']} | "
                         f"{', '.join(row['chosen_classes'])} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
