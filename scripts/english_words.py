"""Write sdk/text/english_words.txt.gz: the one-word lemmas of WordNet 3.0, the words the resolver's spelling rule
never corrects beside those of the text encoder's vocabulary.

    python -m scripts.english_words                   # needs Debian's wordnet-base (/usr/share/wordnet)

Rule 3c of sdk/text/resolver/ reads a word the encoder's vocabulary lacks as the name one or two edits away
("insetcs" -> 'insects'). Many real words are missing from that vocabulary, and some lie that near a name: it read
"seahorse" as 'seashore' and "spool" as 'spoon' (docs/results/experiments.md, "Real words are no typos"). A
word is listed when it is a lemma of WordNet's noun, verb, adjective or adverb index, of ASCII lower-case letters
only and at least MIN_CHARS long (rule 3c leaves shorter words alone anyway). The file is gzip-compressed, written
without a time stamp so that the same list gives the same bytes; its first lines, starting with '#', are the header
and WordNet's license.

Both readers load it (sdk/text/english_words.py; the Java core's EnglishWords.java from its class path).
"""

from __future__ import annotations

import gzip
from pathlib import Path

from scripts.wordnet_files import WORDNET, arguments, listing, read_lemmas, read_license
from sdk.text.resolver.spelling import SPELLING_MIN_CHARS

OUT = Path(__file__).resolve().parents[1] / "sdk" / "text" / "english_words.txt.gz"
MIN_CHARS = SPELLING_MIN_CHARS   # shorter words rule 3c never corrects


def english_words(wordnet: Path = WORDNET) -> list[str]:
    """The listed words, sorted."""
    return sorted(w for w in read_lemmas(wordnet)
                  if len(w) >= MIN_CHARS and w.isascii() and w.isalpha() and w.islower())


def main(argv: list[str] | None = None) -> None:
    args = arguments(__doc__.split("\n\n")[0], OUT, argv)
    words, license_text = english_words(args.wordnet), read_license(args.wordnet)
    header = ["WordNet 3.0's one-word lemmas (nouns, verbs, adjectives, adverbs) of 4 or more lower-case letters,",
              "one per line: real words, which rule 3c of sdk/text/resolver/ never corrects as typos. Written by",
              "`python -m scripts.english_words` (see that script); do not edit by hand. WordNet's license,",
              "which asks for its notice on copies:"]
    tmp = args.out.with_name(args.out.name + ".tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as f:
        f.write(listing(header, license_text, words).encode("utf-8"))
    tmp.replace(args.out)
    print(f"wrote {len(words)} words to {args.out} ({args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
