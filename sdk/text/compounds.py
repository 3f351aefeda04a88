"""Two-word nouns that are no kind of their last word ("hot dog", "prairie dog", "teddy bear"): rule 4a of
sdk/text/resolver/ tells them missing instead of taking the group their last word names.

The list (sdk/text/exocentric_compounds.txt, 6,749 compounds) is written from WordNet 3.0 by
`python -m scripts.exocentric_compounds`, which gives the criterion; the Java core reads the same file
(Compounds.java). Lines starting with '#' (the header and WordNet's license) are comments.

>>> "hot dog" in exocentric_compounds(), "sled dog" in exocentric_compounds()
(True, False)
"""

from __future__ import annotations

from functools import cache
from importlib import resources

FILE = "exocentric_compounds.txt"


@cache
def exocentric_compounds() -> frozenset[str]:
    """The shipped compounds, lower case, one space between the two words (as sdk.text.resolver.normalize_name)."""
    text = resources.files(__package__).joinpath(FILE).read_text(encoding="utf-8")
    return frozenset(line for line in text.splitlines() if line and not line.startswith("#"))
