"""Issue 72: the WordNet sense `choose_senses` gives each class of fourteen small vocabularies nobody here wrote
(landscapes, a garden, the sky, the weather, a desk, a kitchen, a face, food, tools, instruments, sea life, a city,
clothes, a group-less mix), one line each: "<vocabulary> <class> <sense> <its gloss's start>", "-- none" where a
class gets none. Run it at two commits and diff the outputs to see what a change to the sense choice does
beyond the three vocabularies the benchmark measures (docs/results/experiments.md, "A class's one sense dropped").

    python -m lab.newcomer_senses > after.txt
"""

from __future__ import annotations

from trainer.data.english import WordNet, choose_senses
from trainer.data.vocabulary import Vocabulary, groups_text

VOCABULARIES = {
    "landscapes": {"landscapes": ["canyon", "glacier", "dune", "geyser", "island", "meadow", "volcano", "waterfall",
                                  "beach", "cliff"]},
    "sky": {"sky": ["cloud", "rainbow", "moon", "sun", "star", "lightning"]},
    "desk": {"desk things": ["mouse", "keyboard", "monitor", "speaker", "lamp", "stapler"]},
    "kitchen": {"kitchen": ["pan", "pot", "kettle", "knife", "fork", "spoon", "plate"]},
    "garden": {"garden": ["rose", "tulip", "daisy", "oak", "fern", "mushroom", "moss"]},
    "body": {"faces": ["eye", "nose", "mouth", "ear", "hand", "foot"]},
    "weather": {"weather": ["rain", "snow", "fog", "hail", "storm", "tornado"]},
    "food": {"food": ["apple", "bread", "cheese", "egg", "pizza", "soup", "steak", "cake"]},
    "mixed": {"a": ["cat", "dog"], "b": ["car", "bus"], "c": ["apple", "chair"]},
    "tools": {"tools": ["hammer", "saw", "drill", "wrench", "screwdriver", "file", "plane", "level"]},
    "music": {"instruments": ["guitar", "drum", "piano", "violin", "flute", "trumpet", "organ", "bass"]},
    "sea": {"sea life": ["seal", "whale", "crab", "shell", "coral", "starfish", "ray", "sole"]},
    "city": {"city": ["bridge", "tower", "church", "park", "street", "square", "bank", "station"]},
    "clothes": {"clothes": ["shirt", "dress", "boot", "cap", "tie", "suit", "jumper", "pants"]},
}


def vocabulary(groups: dict[str, list[str]]) -> Vocabulary:
    """A vocabulary of these groups and nothing else, as a person writes one first."""
    return Vocabulary.from_text(groups_text(groups), sorted({c for members in groups.values() for c in members}))


def main() -> int:
    wordnet = WordNet()
    for name, groups in VOCABULARIES.items():
        v = vocabulary(groups)
        senses = choose_senses(v, wordnet)[0]
        for c in v.classes:
            sense = senses.get(c)
            print(name, c, sense, wordnet.synset(sense).gloss[:50] if sense else "-- none")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
