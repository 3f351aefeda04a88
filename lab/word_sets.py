"""The scored word sets an issue-72 wrapper resolves before and after its change: the own-data query lists of the
two held-out sets and the worked example (scripts/own_photos.score_queries) and the Tiny ImageNet retrieval sets
(scripts/bench_retrieval.phrasing_sets), on the cached bundles of `python -m scripts.bench_words`, with the
resolver as it stands (or as the caller has patched it) when called.

    >>> scored_sets()["heldout"]["groups"]["precision"]                        # doctest: +SKIP
    0.967
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

OWN_SETS = {"heldout": "scripts/heldout_data", "heldout-b": "scripts/heldout_b_data", "worked": "scripts/own_data"}


def scored_sets() -> dict:
    """{set: {kind: {precision, recall, n, chosen: {query: class ids}}, missing: {told, unrelated, n}}} for the
    own sets, and {"tiny-imagenet": {set: {precision, recall}}}."""
    from scripts.bench_retrieval import phrasing_sets
    from scripts.own_photos import score_queries
    from sdk.text.resolver import TaskOptions

    bundles = cached_bundles((*OWN_SETS, "tiny-imagenet"))
    out: dict = {}
    for name, source in OWN_SETS.items():
        scores = score_queries(bundles[name], Path(source))
        out[name] = {k: {"precision": v["precision"], "recall": v["recall"], "n": v["n"],
                         "chosen": {q: r["chosen"] for q, r in v["rows"].items()}}
                     for k, v in scores.items() if isinstance(v, dict) and "precision" in v}
        out[name]["missing"] = {k: scores["missing"][k] for k in ("told", "unrelated", "n")}
    bundle = bundles["tiny-imagenet"]
    sets, _, _ = phrasing_sets(bundle.resolver, bundle, TaskOptions())
    out["tiny-imagenet"] = {k: {"precision": v["precision"], "recall": v["recall"]} for k, v in sets.items()}
    return out


def only(measured: dict, keys: tuple[str, ...] = ("precision", "recall")) -> dict:
    """`scored_sets()` with each figure cut to `keys` and the missing names left out (as the older wrappers wrote)."""
    return {name: {kind: {k: v for k, v in f.items() if k in keys} for kind, f in kinds.items() if kind != "missing"}
            for name, kinds in measured.items()}


def without_answers(measured: dict) -> dict:
    """`scored_sets()` without the classes each query took: its figures only."""
    return {name: {kind: {k: v for k, v in f.items() if k != "chosen"} for kind, f in kinds.items()}
            for name, kinds in measured.items()}


def changed_answers(before: dict, after: dict) -> dict:
    """The own-set queries whose classes differ between two `scored_sets()`: {set/kind/query: [before, after]}."""
    return {f"{name}/{kind}/{query}": [chosen, after[name][kind]["chosen"][query]]
            for name, kinds in before.items() for kind, figures in kinds.items()
            for query, chosen in figures.get("chosen", {}).items() if after[name][kind]["chosen"][query] != chosen}


@contextmanager
def patched(owner: type, attribute: str, replacement):
    """`owner.attribute` replaced while the block runs (None: left as shipped), restored after."""
    shipped = getattr(owner, attribute)
    if replacement is not None:
        setattr(owner, attribute, replacement)
    try:
        yield
    finally:
        setattr(owner, attribute, shipped)


def scored_with(owner: type, attribute: str, replacement) -> dict:
    """`scored_sets()` with `owner.attribute` replaced while it runs (None: as shipped), restored after."""
    with patched(owner, attribute, replacement):
        return scored_sets()


def scored_probe(bundles: dict, probe: dict[str, dict[str, list[str]]]) -> dict:
    """A hand-written probe ({bundle name: {text: expected class ids}}) scored on the loaded bundles as
    scripts/own_photos scores its sets, each row printed; {bundle name: scored rows, "all": the mean over every row}."""
    import numpy as np

    from scripts.own_photos import scored_rows

    out = {name: scored_rows(bundles[name], texts) for name, texts in probe.items()}
    rows = [row for scored in out.values() for row in scored["rows"].values()]
    for name, scored in out.items():
        for text, row in scored["rows"].items():
            print(f"{name} {text!r}: {row['precision']} / {row['recall']} {row['chosen']}")
    out["all"] = {**{k: round(float(np.mean([row[k] for row in rows])), 3) for k in ("precision", "recall")},
                  "n": len(rows)}
    return out


def cached_bundles(names) -> dict:
    """{name: the bundle `python -m scripts.bench_words` cached as <name>.taper, loaded}."""
    import sdk
    from sdk.media.cache import cache_root

    return {name: sdk.load(cache_root() / "words" / f"{name}.taper") for name in names}
