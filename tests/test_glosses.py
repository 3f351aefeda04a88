import pytest

from trainer.data import DataError
from trainer.data.glosses import parse_gloss, read_glosses

LINES = [
    "02124075 05 n 01 Egyptian_cat 0 001 @ 02121808 n 0000 | a domestic cat of Egypt  \n",
    '03443371 06 n 01 goblet 0 001 @ 03438257 n 0000 | a drinking glass with a base and stem; "a crystal goblet"  \n',
]


def test_glosses_are_read_by_synset_offset(tmp_path):
    path = tmp_path / "data.noun"
    path.write_text("  1 This software and database is being provided\n" + "".join(LINES))
    assert read_glosses(["n03443371", "n02124075"], path) == ["a drinking glass with a base and stem",
                                                                "a domestic cat of Egypt"]
    with pytest.raises(DataError, match="n09999999"):
        read_glosses(["n09999999"], path)
    with pytest.raises(DataError, match="wordnet-base"):
        read_glosses(["n02124075"], tmp_path / "missing")
    with pytest.raises(DataError, match="WordNet noun ids"):
        read_glosses(["s00000001"], path)


def test_parse_gloss_drops_examples():
    assert parse_gloss(LINES[1]) == "a drinking glass with a base and stem"
