"""Calibrate the "nothing matches" rule of sdk.tasks: how far the best class's text similarity stands out
from the mean over all classes (the contrast), for descriptions that mean a class and for ones that don't.

    .venv/bin/python scripts/calibrate_descriptions.py --bundle tiny-imagenet.taper

Descriptions that mean a class: each class's WordNet gloss (needs Debian's `wordnet-base`) and each
class's second synonym (from its name). Descriptions that don't: UNRELATED below, written by hand
(abstract words, gibberish, objects that are not in Tiny ImageNet). Writes
docs/results/description_calibration.{md,json}: the share of each set a threshold rejects.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sdk  # noqa: E402
from sdk.tasks import TaskOptions, contrast  # noqa: E402

UNRELATED = ["democracy", "algebra", "tuesday", "happiness", "thunderstorm", "quantum chromodynamics", "tax return",
             "asdfgh", "xqzv", "lorem ipsum", "the", "a feeling of nostalgia", "jazz music", "cryptocurrency",
             "mortgage rates", "poetry", "friendship", "justice", "electricity bill", "ancient philosophy",
             "moths", "bicycle", "pedestrian", "tree", "violin", "airplane", "apple", "zebra", "rose", "castle",
             "smartphone", "sushi", "volcano", "guitar", "spaceship", "cloud computing", "running shoes",
             "qwertyuiop", "12345", "!!!", "how are you", "machine learning", "photosynthesis",
             "the french revolution"]
THRESHOLDS = [0.10, 0.12, 0.13, 0.14, 0.15, 0.16, 0.18, 0.20]


def contrasts(bundle: sdk.TaperBundle, texts: list[str]) -> list[dict]:
    """Per text: the closest class and the contrast, computed as sdk.tasks does."""
    out = []
    for text in texts:
        scores = bundle.bundle.class_embeddings @ bundle.resolver.embed_phrase(text)
        best = int(np.argmax(scores))
        out.append({"text": text, "best": bundle.classes[best], "similarity": round(float(scores[best]), 3),
                    "contrast": round(contrast(scores), 3)})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("docs/results/description_calibration"))
    args = parser.parse_args()
    from trainer.data.glosses import read_glosses

    bundle = sdk.load(args.bundle)
    infos = bundle.bundle.classes
    sets = {"wordnet_gloss": contrasts(bundle, read_glosses([c.id for c in infos])),
            "class_synonym": contrasts(bundle, [c.name.split(",")[1].strip() for c in infos if "," in c.name]),
            "unrelated": contrasts(bundle, UNRELATED)}
    rejected = {name: {str(t): round(float(np.mean([r["contrast"] < t for r in rows])), 3) for t in THRESHOLDS}
                for name, rows in sets.items()}
    result = {"bundle": str(args.bundle), "default_min_contrast": TaskOptions().min_contrast,
              "rejected_share": rejected, "descriptions": sets}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    lines = ["# Calibration of the \"nothing matches\" rule", "",
             f"Command: `python scripts/calibrate_descriptions.py --bundle {args.bundle.name}`. Contrast = best "
             "class similarity minus the mean similarity over all classes (descriptions embedded as the runtime "
             "does: first prompt only; classes: the prompt ensemble).", "",
             "Share of each set that a `min_contrast` threshold rejects:", "",
             "| min_contrast | " + " | ".join(f"{n} ({len(sets[n])})" for n in sets) + " |",
             "|---|" + "---|" * len(sets)]
    for t in THRESHOLDS:
        mark = " (default)" if t == TaskOptions().min_contrast else ""
        lines.append(f"| {t}{mark} | " + " | ".join(str(rejected[n][str(t)]) for n in sets) + " |")
    lines += ["", "Unrelated descriptions (closest class, similarity, contrast):", ""]
    lines += [f"- {r['text']!r}: {r['best']} ({r['similarity']}, {r['contrast']})" for r in sets["unrelated"]]
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:len(THRESHOLDS) + 7]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
