"""Tiny ImageNet's WordNet files converted into a vocabulary (trainer/data/wordnet.py, issue 60's "one path"):
the converted vocabulary gives the trainer the same names, tree distances and super-categories as WordNet's
files say, and the bundle the same concepts; the file it writes reads back equal."""

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from trainer.data.errors import DataError
from trainer.data.glosses import WORDNET_NOUNS
from trainer.data.vocabulary import Vocabulary
from trainer.data.wordnet import wordnet_vocabulary

ARCHIVE = Path(__file__).resolve().parents[2] / "shared" / "data" / "tiny-imagenet-200.tar.gz"

# Two synsets named 'food' in a row on one path (nutrient > solid food), as in WordNet; 'bread' has 'food'
# (nutrient) only through solid food, 'soup' directly; 'table' is two synsets that the path file names alike.
TSV = ("wnid\tname\tpath\tancestors\n"
       "c1\tbread, staff of life\tentity > matter > food > food > bread\te0,m0,f1,f2\n"
       "c2\tsoup\tentity > matter > food > soup\te0,m0,f1\n"
       "c3\tdesk\tentity > furniture > table > desk\te0,u0,t1\n"
       "c4\tdining table, board\tentity > furniture > table > dining_table\te0,u0,t2\n"
       "c5\tcake\tentity > matter > food > food > cake\te0,m0,f1,f2\n")
WORDS = ("e0\tentity\nm0\tmatter\nf1\tfood, nutrient\nf2\tfood, solid food\nu0\tfurniture\nt1\ttable\n"
         "t2\ttable\nzz\tunused\n")
IDS = ["c1", "c2", "c3", "c4", "c5"]


def convert(tsv=TSV, words=WORDS, supercategories=None, ids=IDS):
    return wordnet_vocabulary(ids, tsv, supercategories, words, glosses=False, collections=False)


def test_names_paths_and_groups_follow_the_first_hypernyms():
    v = convert()
    assert v.classes["c1"].name == "bread" and v.classes["c1"].aliases == ("staff of life",)
    h = v.hierarchy()
    assert h.names[0] == "bread, staff of life"                    # the text a class is embedded by
    # the upper 'food' (nutrient, 3 classes) and the lower (solid food, 2): the path is WordNet's
    assert h.paths[h.index("c1")] == ("entity", "matter", "food", "food", "bread")
    assert v.groups["f2"].members == ("c1", "c5") and "f2" in v.groups["f1"].members
    concepts = {c["id"]: c for c in h.concepts()}
    assert concepts["f1"] == {"id": "f1", "names": ["food", "nutrient"], "members": [0, 1, 4]}
    assert concepts["f2"]["names"] == ["food", "solid food"]
    assert h.distances[h.index("c1"), h.index("c5")] == 2 and h.distances[h.index("c1"), h.index("c2")] == 3
    assert "zz" not in v.groups and "e0" not in concepts            # unnamed by the data / holds every class


def test_a_path_node_two_synsets_share_takes_the_one_most_classes_have():
    v = convert()
    assert v.groups["t1"].members == ("c3", "c4")   # the path's 'table'; the dining table's own 'table' too:
    assert v.groups["t2"].members == ("c4",)        # listed directly, after its first lister
    assert v.hierarchy().paths[3] == ("entity", "furniture", "table", "dining table")
    assert "'table': group 't1', group 't2'" in v.notes[0]   # a shared name holding different classes is said


def test_the_written_file_reads_back_equal_and_keeps_super_categories():
    groups = json.dumps({"supercategories": {"meals": [{"wnid": "c2"}, "c1"], "empty": []}})
    v = convert(supercategories=groups)
    assert Vocabulary.from_text(v.to_text(), IDS) == v
    h = v.hierarchy()
    assert h.supercategories == {"meals": ["c2", "c1"]}   # in the file's order; an empty one is left out
    assert "supercategory/meals" not in {c["id"] for c in h.concepts()}


def test_without_ancestor_ids_the_path_nodes_are_the_groups():
    tsv = "wnid\tname\tpath\nc1\tred disc\tentity > disc > red disc\nc2\tblue disc\tentity > disc > blue disc\n" \
          "c3\tred ring\tentity > ring > red ring\n"
    h = convert(tsv, words=None, ids=["c1", "c2", "c3"]).hierarchy()
    assert h.concepts() == [{"id": "disc", "names": ["disc"], "members": [0, 1]}]
    assert h.distances[0, 1] == 2 and h.distances[0, 2] == 4


@pytest.mark.parametrize("tsv, ids, message", [
    (TSV, IDS + ["c9"], r"classes not in the hierarchy \['c9'\]"),
    (TSV, IDS[:4], r"in the hierarchy but not in the data \['c5'\]"),
    ("header\nonly-one-column\n", ["c1"], "wordnet_hierarchy.tsv:2"),
    (TSV + TSV.splitlines()[1] + "\n", IDS, "listed twice"),
])
def test_faulty_wordnet_files_are_data_errors(tsv, ids, message):
    with pytest.raises(DataError, match=message):
        convert(tsv, ids=ids)
    with pytest.raises(DataError, match="not a super-category file"):
        convert(supercategories="[1, 2]")


def _archive_files(tmp_path: Path, *names: str) -> dict[str, str]:
    """The named files of the archive (system tar: 3 s here, Python's tarfile 15 s over 110,000 members)."""
    subprocess.run(["tar", "-xzf", str(ARCHIVE), "-C", str(tmp_path), *(f"tiny-imagenet-200/{n}" for n in names)],
                   check=True)
    return {n: (tmp_path / "tiny-imagenet-200" / n).read_text() for n in names}


@pytest.mark.skipif(not ARCHIVE.is_file(), reason="the shared Tiny ImageNet archive is not on this machine")
def test_tiny_imagenet_converted_keeps_wordnets_names_distances_groups_and_concepts(tmp_path):
    files = _archive_files(tmp_path, "wnids.txt", "wordnet_hierarchy.tsv", "supercategories.json", "words.txt")
    ids = sorted(files["wnids.txt"].split())
    v = wordnet_vocabulary(ids, files["wordnet_hierarchy.tsv"], files["supercategories.json"], files["words.txt"],
                           glosses=False)
    assert Vocabulary.from_text(v.to_text(), ids) == v
    h = v.hierarchy()
    rows = {r.split("\t")[0]: r.split("\t") for r in files["wordnet_hierarchy.tsv"].splitlines()[1:] if r}
    assert h.names == [rows[c][1] for c in ids]
    # tree distances straight from the file's first-hypernym paths, as the trainer used them before
    paths = [rows[c][2].split(" > ") for c in ids]
    expected = np.array([[len(a) + len(b) - 2 * next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                                                      min(len(a), len(b))) for b in paths] for a in paths])
    np.testing.assert_array_equal(h.distances, expected)
    supercategories = json.loads(files["supercategories.json"])["supercategories"]
    assert {g: sorted(ws) for g, ws in h.supercategories.items()} == \
        {g: sorted(m["wnid"] if isinstance(m, dict) else m for m in ms) for g, ms in supercategories.items()}
    # every named hypernym holding 2..199 classes is a concept with words.txt's names and exactly its classes;
    # the one addition is 'table' n04379243, which the file's path gives the dining table (see docs/training.md)
    names = {line.split("\t")[0]: [n.strip() for n in line.split("\t")[1].split(",")]
             for line in files["words.txt"].splitlines()}
    holders: dict[str, list[int]] = {}
    for i, c in enumerate(ids):
        for a in rows[c][3].split(","):
            holders.setdefault(a, []).append(i)
    expected_concepts = {a: (names[a], members) for a, members in holders.items() if 2 <= len(members) < len(ids)}
    concepts = {c["id"]: (c["names"], c["members"]) for c in h.concepts()
                if not c["id"].startswith(("collection/", "facet/", "related/"))}
    assert len(expected_concepts) == 146
    assert {k: v for k, v in concepts.items() if k != "n04379243"} == expected_concepts
    assert concepts["n04379243"] == (["table"], [ids.index("n03179701"), ids.index("n03201208")])

    # the kinds beyond the hypernyms (trainer/data/related_kinds.py), where WordNet's noun files are installed
    related = {c["id"]: (c["names"], [ids[i] for i in c["members"]]) for c in h.concepts()
               if c["id"].startswith("related/")}
    if WORDNET_NOUNS.is_file():
        lobsters, trains = ["n01983481", "n01984695"], ["n02917067", "n03393912"]   # and the freight car
        assert related["related/n07776866"] == (["seafood"], lobsters)
        assert related["related/n07783210"] == (["shellfish"], lobsters)
        assert related["related/n04468005"] == (["train", "railroad train"], trains)
        assert not any("meat" in names for names, _ in related.values())   # "meat loaf" is a class
