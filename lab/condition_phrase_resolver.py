"""Can a description's words name its field condition? (issue 50, part 4; a lab measure, not product code)

    python -m lab.condition_phrase_resolver --bundle /tmp/demo.taper --out docs/results/condition_phrases

The protocol and its prediction are in docs/results/experiments.md ("Condition phrasings"), written
before this ran on anything held out. A description is cut into windows of 1 to 6 consecutive words; a
window equal to an in-set phrase (trainer/data/condition_phrases.json) names that condition, otherwise
each window is embedded by the bundle's text encoder and scored by its cosine to every in-set phrase; the
best condition is named when its score reaches tau, chosen on in-set data only (leave-one-out in-set
phrases as positives; scripts/retrieval_phrasings.json and the bundle's class names as negatives). Scored
once on lab/condition_phrases_heldout.json, with the six held-out retrieval sets as negatives.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

import sdk
from trainer.data.conditions import condition_phrases

ROOT = Path(__file__).resolve().parent.parent
HELDOUT = ROOT / "lab" / "condition_phrases_heldout.json"
TUNING_NEGATIVES = ROOT / "scripts" / "retrieval_phrasings.json"
HELDOUT_NEGATIVES = sorted((ROOT / "scripts").glob("retrieval_phrasings_heldout*.json"))
MAX_WINDOW = 6


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+(?:[-'][a-z0-9]+)*", text.lower())


def windows(text: str) -> list[str]:
    """Every run of 1 to MAX_WINDOW consecutive words, as text."""
    w = words(text)
    return [" ".join(w[i:j]) for i in range(len(w)) for j in range(i + 1, min(len(w), i + MAX_WINDOW) + 1)]


class ConditionPhraseResolver:
    """Names the condition a description holds, from in-set phrases and the encoder's similarity."""

    def __init__(self, encoder, phrases: dict[str, list[str]], tau: float = 1.0):
        self.encoder, self.tau = encoder, tau
        self.phrases = [(c, p) for c, ps in phrases.items() for p in ps]
        self.exact = {" ".join(words(p)): c for c, p in self.phrases}
        self.conditions = sorted(phrases)
        self.embedded = encoder.encode([p for _, p in self.phrases])
        self._cache: dict[str, np.ndarray] = {}

    def scores(self, text: str, leave_out: str | None = None, exact: bool = True) -> dict[str, float]:
        """Each condition's best cosine over the text's windows and its phrases (1.0 for an exact phrase);
        `leave_out` drops one in-set phrase from the comparison (leave-one-out)."""
        spans = windows(text)
        best = {c: -1.0 for c in self.conditions}
        if exact:
            for span in spans:
                if span in self.exact:
                    best[self.exact[span]] = 1.0
        new = [s for s in spans if s not in self._cache]
        if new:
            for s, e in zip(new, self.encoder.encode(new), strict=True):
                self._cache[s] = e
        if not spans:
            return best
        sims = np.stack([self._cache[s] for s in spans]) @ self.embedded.T   # [spans, phrases]
        for k, (c, p) in enumerate(self.phrases):
            if p != leave_out:
                best[c] = max(best[c], float(sims[:, k].max()))
        return best

    def decide(self, scores: dict[str, float]) -> str | None:
        condition = max(scores, key=scores.get)
        return condition if scores[condition] >= self.tau else None


def choose_tau(positives: list[tuple[str, dict]], negatives: list[dict]) -> tuple[float, dict]:
    """tau maximising right minus wrong decisions: a positive is right when its best condition is its own
    and reaches tau; a negative is right when nothing reaches tau."""
    candidates = sorted({max(s.values()) for _, s in positives} | {max(s.values()) for s in negatives})
    best = None
    for tau in candidates:
        right = sum(max(s, key=s.get) == c and max(s.values()) >= tau for c, s in positives) \
            + sum(max(s.values()) < tau for s in negatives)
        wrong = len(positives) + len(negatives) - right
        if best is None or right - wrong > best[1]["right"] - best[1]["wrong"]:
            best = (tau, {"right": right, "wrong": wrong})
    return best


def score(resolver: ConditionPhraseResolver, items: list[tuple[str, str | None]]) -> dict:
    """Precision, recall and every miss over (text, true condition or None)."""
    rows = [{"text": t, "truth": c, "said": resolver.decide(resolver.scores(t))} for t, c in items]
    said = [r for r in rows if r["said"] is not None]
    held = [r for r in rows if r["truth"] is not None]
    right = [r for r in rows if r["truth"] is not None and r["said"] == r["truth"]]
    return {"n": len(rows), "with_condition": len(held), "given_condition": len(said), "right": len(right),
            "precision": round(len(right) / len(said), 3) if said else None,
            "recall": round(len(right) / len(held), 3) if held else None,
            "misses": [r for r in rows if r["said"] != r["truth"]]}


def retrieval_texts(path: Path) -> list[str]:
    """The descriptions of a retrieval phrasing set (its keys; scripts/bench_retrieval.py)."""
    return [text for text in json.loads(path.read_text()) if text != "_about"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("docs/results/condition_phrases"))
    args = parser.parse_args()
    bundle = sdk.load(args.bundle, cache=False)
    phrases = condition_phrases()
    resolver = ConditionPhraseResolver(bundle.encoder, phrases)

    loo = [(c, resolver.scores(p, leave_out=p, exact=False)) for c, ps in phrases.items() for p in ps]
    tuning_negatives = retrieval_texts(TUNING_NEGATIVES) + bundle.classes
    resolver.tau, tuned = choose_tau(loo, [resolver.scores(t) for t in tuning_negatives])
    loo_right = sum(max(s, key=s.get) == c and max(s.values()) >= resolver.tau for c, s in loo)

    heldout = json.loads(HELDOUT.read_text())
    phrasings = [(p, c) for c, ps in heldout.items() if c not in ("_about", "requests") for p in ps]
    requests = [(t, c) for c, ts in heldout["requests"].items() for t in ts]
    negatives = [(t, None) for path in HELDOUT_NEGATIVES for t in retrieval_texts(path)]
    result = {"command": f"python -m lab.condition_phrase_resolver --bundle {args.bundle} --out {args.out}",
              "tau": round(resolver.tau, 4), "tuning": {**tuned, "leave_one_out_right": loo_right,
                                                        "leave_one_out_n": len(loo),
                                                        "negatives_n": len(tuning_negatives)},
              "phrasings": score(resolver, phrasings), "requests": score(resolver, requests),
              "negatives": score(resolver, negatives), "together": score(resolver, phrasings + requests + negatives)}
    neg = result["negatives"]
    result["negatives"]["false_positive_rate"] = round(neg["given_condition"] / neg["n"], 3)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))


def markdown(r: dict) -> str:
    lines = ["# Condition phrasings: does a description's wording name its condition? (issue 50, part 4, lab)", "",
             f"`{r['command']}`; protocol and prediction: docs/results/experiments.md (\"Condition phrasings\"). "
             f"tau = {r['tau']} (chosen on in-set data: {r['tuning']['leave_one_out_right']} of "
             f"{r['tuning']['leave_one_out_n']} in-set phrases right leave-one-out, {r['tuning']['negatives_n']} "
             "in-set negatives).", "",
             "| held-out set | n | with a condition | given one | right | precision | recall |",
             "|---|---|---|---|---|---|---|"]
    for name in ("phrasings", "requests", "negatives", "together"):
        s = r[name]
        lines.append(f"| {name} | {s['n']} | {s['with_condition']} | {s['given_condition']} | {s['right']} | "
                     f"{s['precision']} | {s['recall']} |")
    lines += ["", f"Negatives (the held-out retrieval phrasings, no condition) given a condition: "
              f"{r['negatives']['false_positive_rate']}.", "", "Misses (text: truth -> said):", ""]
    for name in ("phrasings", "requests", "negatives"):
        lines += [f"- {name}: " + ("; ".join(f"'{m['text']}': {m['truth']} -> {m['said']}" for m in r[name]["misses"])
                                   or "none")]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
