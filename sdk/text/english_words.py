"""Real English words beyond the text encoder's vocabulary: WordNet 3.0's one-word lemmas of 4 or more letters
(sdk/text/english_words.txt.gz, 75,962 words, written by `python -m scripts.english_words`, which gives the
criterion). Rule 3c of sdk/text/resolver/ never corrects them as typos: "seahorse" is no 'seashore'. Read on first
use; the Java core reads the same file (EnglishWords.java). Lines starting with '#' (the header and WordNet's
license) are comments.

>>> "seahorse" in english_words(), "insetcs" in english_words()
(True, False)
"""

from __future__ import annotations

import gzip
from functools import cache
from importlib import resources

FILE = "english_words.txt.gz"


@cache
def english_words() -> frozenset[str]:
    """The shipped words, lower case."""
    text = gzip.decompress(resources.files(__package__).joinpath(FILE).read_bytes()).decode("utf-8")
    return frozenset(line for line in text.splitlines() if line and not line.startswith("#"))
