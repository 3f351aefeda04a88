"""lab/concept_glosses.py: a WordNet-keyed concept's words gain its gloss's stems; others keep theirs."""

from lab.concept_glosses import with_glosses


def test_only_a_concept_keyed_by_a_sense_gains_its_glosss_stems():
    asked = []
    stems = with_glosses(["wordnet/n02084071", "n02121808", "collection/pets"], [{"dog"}, {"cat"}, {"pet"}],
                         lambda sense: asked.append(sense) or "tame carnivores")
    assert stems == [{"dog", "tame", "carnivor"}, {"cat", "tame", "carnivor"}, {"pet"}]
    assert asked == ["n02084071", "n02121808"]
    assert with_glosses(["n02084071"], [{"dog"}], lambda sense: None) == [{"dog"}]   # a sense WordNet lacks
