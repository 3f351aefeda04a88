"""Class retrieval quality of free-language descriptions (issue 14). Writes <out>.json and <out>.md.

    python scripts/bench_retrieval.py --bundle bench.taper --out docs/results/retrieval

Three sets, each resolved exactly as `sdk.personalize` resolves a description (`TaskResolver.resolve`
with the default TaskOptions):
- glosses: each class's WordNet gloss (needs Debian's `wordnet-base`): is the class in the chosen set
  (recall_at_set) and is it the most similar class (rank1)?
- groups: each super-category's name as typed (underscores as spaces): precision and recall of the
  chosen set against the group's classes (these hit the group rule of sdk/tasks.py by name);
- phrasings: scripts/retrieval_phrasings.json, phrasings users type that are not hierarchy names, with
  the classes each means (chosen by hand): precision and recall, means over phrasings.
Also the median time to resolve a phrasing (text encoder included).
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
from sdk.tasks import TaskOptions  # noqa: E402

PHRASINGS = Path(__file__).with_name("retrieval_phrasings.json")


def precision_recall(chosen: set[int], expected: set[int]) -> tuple[float, float]:
    hits = len(chosen & expected)
    return (hits / len(chosen) if chosen else 0.0), hits / len(expected)


def resolve(bundle: sdk.TaperBundle, text: str, options: TaskOptions) -> tuple[set[int], float]:
    """The chosen classes ({} if nothing matches) and the milliseconds it took."""
    start = time.perf_counter()
    try:
        chosen = set(bundle.resolver.resolve(text, options).classes.tolist())
    except DescriptionError:
        chosen = set()
    return chosen, (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("docs/results/retrieval"))
    args = parser.parse_args()
    bundle = sdk.load(args.bundle).warm_up()
    options = TaskOptions()
    classes = bundle.bundle.classes
    index = {c.id: i for i, c in enumerate(classes)}
    result: dict = {"bundle": str(args.bundle), "options": vars(options)}

    from trainer.data.glosses import read_glosses

    glosses = read_glosses([c.id for c in classes])
    in_set, rank1 = [], []
    for i, gloss in enumerate(glosses):
        chosen, _ = resolve(bundle, gloss, options)
        in_set.append(i in chosen)
        scores = bundle.bundle.class_embeddings @ bundle.embedder(gloss)
        rank1.append(int(np.argmax(scores)) == i)
    result["glosses"] = {"recall_at_set": round(float(np.mean(in_set)), 3), "rank1": round(float(np.mean(rank1)), 3),
                         "n": len(glosses)}

    group_rows = {}
    for name, members in bundle.bundle.supercategories.items():
        chosen, _ = resolve(bundle, name.replace("_", " "), options)
        group_rows[name] = precision_recall(chosen, set(members))
    result["groups"] = {"precision": round(float(np.mean([p for p, _ in group_rows.values()])), 3),
                        "recall": round(float(np.mean([r for _, r in group_rows.values()])), 3),
                        "n": len(group_rows)}

    phrasings = {k: v for k, v in json.loads(PHRASINGS.read_text()).items() if not k.startswith("_")}
    rows, times = {}, []
    for text, wnids in phrasings.items():
        chosen, ms = resolve(bundle, text, options)
        times.append(ms)
        p, r = precision_recall(chosen, {index[w] for w in wnids})
        rows[text] = {"precision": round(p, 3), "recall": round(r, 3), "chosen": len(chosen), "expected": len(wnids),
                      "chosen_classes": [classes[i].name.split(",")[0] for i in sorted(chosen)]}
    result["phrasings"] = {"precision": round(float(np.mean([r["precision"] for r in rows.values()])), 3),
                           "recall": round(float(np.mean([r["recall"] for r in rows.values()])), 3),
                           "n": len(rows), "rows": rows}
    result["resolve_ms_median"] = round(statistics.median(times), 2)
    result["command"] = "python scripts/bench_retrieval.py " + " ".join(sys.argv[1:])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    args.out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))


def markdown(r: dict) -> str:
    g, gr, ph = r["glosses"], r["groups"], r["phrasings"]
    lines = ["# Class retrieval from free-language descriptions", "", f"Command: `{r['command']}`", "",
             f"Resolved as `sdk.personalize` does (default TaskOptions: {r['options']}).", "",
             "| set | n | measure | value |", "|---|---|---|---|",
             f"| WordNet glosses | {g['n']} | class in the chosen set | {g['recall_at_set']} |",
             f"| WordNet glosses | {g['n']} | class ranked first | {g['rank1']} |",
             f"| super-category names | {gr['n']} | precision / recall | {gr['precision']} / {gr['recall']} |",
             f"| user phrasings | {ph['n']} | precision / recall | {ph['precision']} / {ph['recall']} |", "",
             f"Median time to resolve a phrasing (text encoder included): {r['resolve_ms_median']} ms.", "",
             "| phrasing | expected | chosen | precision | recall | chosen classes |", "|---|---|---|---|---|---|"]
    for text, row in ph["rows"].items():
        lines.append(f"| {text} | {row['expected']} | {row['chosen']} | {row['precision']} | {row['recall']} | "
                     f"{', '.join(row['chosen_classes'])} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
