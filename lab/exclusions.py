"""Issue 72: a phrase that leaves something out in words rule 3b did not read ("dogs except for chihuahuas", "all
dogs except the chihuahua", "small dogs except chihuahuas"). A probe of 24 such phrases on three cached bundles,
written in the thirty-eighth session before the resolver read them (docs/results/experiments.md, "What a phrase
leaves out, in more words"), scored as scripts/own_photos scores its sets: the expected classes are what a person
asking would accept.

    python -m lab.exclusions --out docs/results/exclusions      # the cached bundles of scripts.bench_words; ~10 s
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from scripts.results import write_result

DOGS = ["n02085620", "n02094433", "n02099601", "n02099712", "n02106662", "n02113799"]
CHIHUAHUA, POODLE = "n02085620", "n02113799"
INSECTS = ["n02165456", "n02190166", "n02206856", "n02226429", "n02231487", "n02233338", "n02236044", "n02268443",
           "n02279972", "n02281406"]
PROBE = {   # bundle (as cached by scripts.bench_words) -> phrase -> the class ids it means
    "tiny-imagenet": {
        "dogs except for chihuahuas": [d for d in DOGS if d != CHIHUAHUA],
        "all dogs except the chihuahua": [d for d in DOGS if d != CHIHUAHUA],
        "every dog but the chihuahua": [d for d in DOGS if d != CHIHUAHUA],
        "dogs apart from poodles": [d for d in DOGS if d != POODLE],
        "insects minus bees": [i for i in INSECTS if i != "n02206856"],
        "small dogs except chihuahuas": ["n02094433"],
        "big cats other than lions": ["n02125311"],
        "bridges aside from the viaduct": ["n04311004", "n04366367"],
        "fruit besides bananas": ["n07747607", "n07749582", "n07768694"],
        "butterflies excluding monarchs": ["n02281406"],
        "lobsters without the spiny one": ["n01983481"]},
    "heldout": {
        "all cats except lions": ["tabby_cat", "persian_cat", "egyptian_cat", "cougar"],
        "birds apart from penguins": ["black_stork", "albatross", "goose"],
        "kitchen things except for the wok": ["frying_pan", "teapot", "water_jug", "wooden_spoon", "plate"],
        "big cats but not the lion": ["cougar"],
        "primates besides apes": ["baboon"],
        "sea animals minus lobsters": ["jellyfish", "brain_coral", "sea_slug", "sea_cucumber", "dugong"]},
    "heldout-b": {
        "sports gear except the balls": ["dumbbell", "punching_bag"],
        "every bridge but the viaduct": ["suspension_bridge", "steel_arch_bridge"],
        "furniture other than chairs": ["dining_table", "desk", "chest"],
        "bottles apart from beer bottles": ["pop_bottle", "pill_bottle"],
        "creepy crawlies besides spiders": ["scorpion", "centipede"],
        "gadgets except for the ipod": ["cd_player", "remote_control", "keyboard", "stopwatch"],
        "all the landmarks except bridges": ["triumphal_arch", "obelisk"]},
}
COMMAND = "python -m lab.exclusions --out docs/results/exclusions"


def main(argv: list[str] | None = None) -> int:
    import sdk
    from scripts.own_photos import scored_rows
    from sdk.media.cache import cache_root

    parser = argparse.ArgumentParser(prog="python -m lab.exclusions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="write <OUT>.json")
    args = parser.parse_args(argv)
    result = {name: scored_rows(sdk.load(cache_root() / "words" / f"{name}.taper"), probe)
              for name, probe in PROBE.items()}
    rows = [row for part in result.values() for row in part["rows"].values()]
    for name, part in result.items():
        for text, row in part["rows"].items():
            print(f"{name} {text!r}: {row['precision']} / {row['recall']} {row['chosen']}")
        print(f"{name}: {part['precision']} / {part['recall']} (n={part['n']})")
    result["all"] = {**{k: round(float(np.mean([row[k] for row in rows])), 3) for k in ("precision", "recall")},
                     "n": len(rows)}
    print(f"all: {result['all']}")
    result["command"] = COMMAND
    if args.out:
        write_result(result, args.out.with_suffix(".json"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
