"""Calibrate the "nothing matches" rule of sdk.text.resolver: how far the best class's text similarity stands out
from the mean over all classes (the contrast), for descriptions that mean a class and for ones that don't.

    .venv/bin/python -m scripts.calibrate_descriptions --bundle tiny-imagenet.taper

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

import sdk
from sdk.text.resolver import TaskOptions, contrast

UNRELATED = ["democracy", "algebra", "tuesday", "happiness", "thunderstorm", "quantum chromodynamics", "tax return",
             "asdfgh", "xqzv", "lorem ipsum", "the", "a feeling of nostalgia", "jazz music", "cryptocurrency",
             "mortgage rates", "poetry", "friendship", "justice", "electricity bill", "ancient philosophy",
             "moths", "bicycle", "pedestrian", "tree", "violin", "airplane", "apple", "zebra", "rose", "castle",
             "smartphone", "sushi", "volcano", "guitar", "spaceship", "cloud computing", "running shoes",
             "qwertyuiop", "12345", "!!!", "how are you", "machine learning", "photosynthesis",
             "the french revolution"]
THRESHOLDS = [0.10, 0.12, 0.13, 0.14, 0.15, 0.16, 0.18, 0.20]


def contrasts(bundle: sdk.TaperBundle, texts: list[str]) -> list[dict]:
    """Per text: the closest class and the contrast, computed as sdk.text.resolver does."""
    out = []
    for text in texts:
        scores = bundle.bundle.class_embeddings @ bundle.resolver.embed_phrase(text)
        best = int(np.argmax(scores))
        out.append({"text": text, "best": bundle.classes[best], "similarity": round(float(scores[best]), 3),
                    "contrast": round(contrast(scores), 3)})
    return out


def retrieval(bundle: sdk.TaperBundle, queries: list[tuple[int, str]], prompts: tuple[str, ...]) -> dict:
    """How often a description of a class ranks that class first / in the top 5, embedded with `prompts`."""
    labels = np.array([label for label, _ in queries])
    scores = np.stack([bundle.encoder.embed_class_names([text], prompts)[0] for _, text in queries]) \
        @ bundle.bundle.class_embeddings.T
    rank = (scores > scores[np.arange(len(labels)), labels][:, None]).sum(1)
    return {"top1": round(float(np.mean(rank == 0)) * 100, 1), "top5": round(float(np.mean(rank < 5)) * 100, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("docs/results/description_calibration"))
    args = parser.parse_args()
    from trainer.data.glosses import read_glosses

    bundle = sdk.load(args.bundle)
    infos = bundle.bundle.classes
    meaning = {"wordnet_gloss": list(enumerate(read_glosses([c.id for c in infos]))),
               "class_synonym": [(i, c.name.split(",")[1].strip()) for i, c in enumerate(infos) if "," in c.name]}
    sets = {**{name: contrasts(bundle, [text for _, text in queries]) for name, queries in meaning.items()},
            "unrelated": contrasts(bundle, UNRELATED)}
    # The runtime embeds a description with the first prompt only; is that as good as the whole ensemble?
    found = {f"{name}, {label}": retrieval(bundle, queries, prompts) for name, queries in meaning.items()
             for label, prompts in (("first prompt", bundle.prompts[:1]), ("all prompts", bundle.prompts))}
    rejected = {name: {str(t): round(float(np.mean([r["contrast"] < t for r in rows])), 3) for t in THRESHOLDS}
                for name, rows in sets.items()}
    result = {"bundle": str(args.bundle), "default_min_contrast": TaskOptions().min_contrast,
              "rejected_share": rejected, "class_found_percent": found, "descriptions": sets}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    lines = ["# Calibration of the \"nothing matches\" rule", "",
             f"Command: `python -m scripts.calibrate_descriptions --bundle {args.bundle.name}`. Contrast = best "
             "class similarity minus the mean similarity over all classes (descriptions embedded as the runtime "
             "does: first prompt only; classes: the prompt ensemble).", "",
             "Share of each set that a `min_contrast` threshold rejects:", "",
             "| min_contrast | " + " | ".join(f"{n} ({len(sets[n])})" for n in sets) + " |",
             "|---|" + "---|" * len(sets)]
    for t in THRESHOLDS:
        mark = " (default)" if t == TaskOptions().min_contrast else ""
        lines.append(f"| {t}{mark} | " + " | ".join(str(rejected[n][str(t)]) for n in sets) + " |")
    lines += ["", "Descriptions that mean a class: how often that class ranks first / in the top 5 (percent), "
              "with the description embedded as the runtime does (first prompt) or with the whole ensemble:", "",
              "| descriptions, embedded with | top-1 | top-5 |", "|---|---|---|"]
    lines += [f"| {name} | {r['top1']} | {r['top5']} |" for name, r in found.items()]
    lines += ["", "Unrelated descriptions (closest class, similarity, contrast):", ""]
    lines += [f"- {r['text']!r}: {r['best']} ({r['similarity']}, {r['contrast']})" for r in sets["unrelated"]]
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:len(THRESHOLDS) + 16]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
