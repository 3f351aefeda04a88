"""Rule 6 of sdk/text/resolver/ (issue 72): a phrase that describes one kind of thing keeps, of the classes its
meaning took, those whose own words share the most of its words; nothing changes where no word tells them apart,
in a list, or for a phrase that is no description. On a hand-made table with a stand-in text encoder (each class
and concept on its own axis), so that the candidates are known."""

import numpy as np
import pytest

from sdk.errors import DescriptionError
from sdk.format.bundle import ClassInfo, Concept
from sdk.text.resolver import TaskOptions, TaskResolver
from sdk.text.resolver.described import content_stems, described, describes_one, letter_words, matches, stem

CLASSES = [ClassInfo("n0", "tabby cat", ["cat", "tabby"], [], "a cat with a striped coat"),
           ClassInfo("n1", "persian cat", ["cat", "persian"], [], "a long-haired breed of cat"),
           ClassInfo("n2", "lion", ["cat", "lion"], [], "large feline of Africa with a shaggy mane"),
           ClassInfo("n3", "cougar", ["cat", "cougar"], ["mountain lion"], "large American feline"),
           ClassInfo("n4", "bee", ["insect", "bee"])]
CONCEPTS = [Concept("c0", ["cat"], [0, 1, 2, 3]), Concept("c1", ["big cats"], [2, 3])]
OPTIONS = TaskOptions(min_classes=1)


def resolver(classes=CLASSES) -> TaskResolver:
    """Every phrase but "bee" embeds on the concept 'cat' (rule 5 takes its four classes); "bee" on the bee."""
    eye = np.eye(len(classes) + len(CONCEPTS), dtype=np.float32)
    cat = eye[len(classes)] * 0.8 + eye[0] * 0.5    # the tabby stands out, the concept is nearer still

    def embed(text: str) -> np.ndarray:
        return eye[4] if text == "bee" else cat / np.linalg.norm(cat)

    return TaskResolver(classes, eye[:len(classes)], {}, embed, CONCEPTS, eye[len(classes):])


def test_words_are_ascii_letter_runs_with_hyphenated_runs_also_joined():
    assert letter_words("A dog-like face") == ["a", "dog", "like", "doglike", "face"]
    assert letter_words("naïve x-y-z") == ["na", "ve", "x", "y", "z", "xyz"]
    assert letter_words("") == [] and letter_words("---") == []
    assert content_stems("the gliding birds glides, with a mane") == ["glid", "bird", "mane"]   # once each, in order


def test_stems_cut_one_suffix_and_match_equal_or_a_long_enough_prefix():
    assert stem("glides") == stem("gliding") == "glid" and stem("ing") == "ing" and stem("bus") == "bus"
    assert matches("antarctic", "antarctica") and matches("swamp", "swampy")
    assert not matches("wood", "wooden")            # a prefix of four letters is no match
    assert not matches("cat", "catapult")


def test_the_rule_reads_only_a_phrase_that_opens_with_an_article_and_two_more_words():
    assert describes_one("a big cat") and describes_one("an insect that stings")
    assert not any(map(describes_one, ("a cat", "the big cat", "big cats", "my big cat")))


def test_a_word_counts_for_the_few_classes_it_fits_more_than_for_the_many():
    # "cat" fits two candidates (1/2 each), "mane" one: the lion
    assert described("a big cat with a mane", [5, 6, 7], [{"cat"}, {"cat"}, {"mane"}]) == ([7], ["mane"])
    assert described("a big cat with a mane", [5, 6, 7], [{"cat"}, {"cat", "mane"}, {"big"}]) == ([6], ["cat", "mane"])
    assert described("a big cat with a mane", [5, 6], [{"cat"}, {"mane"}]) is None     # a tie of all: no change
    assert described("a striped cat", [5, 6], [{"cat"}, {"cat"}]) is None          # fits all, or none: no evidence


def test_a_described_kind_is_narrowed_and_the_resolution_names_the_words():
    task = resolver().resolve("a big cat with a mane", OPTIONS)
    assert task.classes.tolist() == [2]
    assert task.how == ["'a big cat with a mane': concept 'cat' (similarity 0.85 >= best class 0.53); described: kept "
                        "'lion' of those 4, whose words share 'big', 'mane' with it"]
    assert resolver().resolve("a cat with long hair", OPTIONS).classes.tolist() == [1]       # "long-haired"
    assert resolver().resolve("an american feline", OPTIONS).classes.tolist() == [3]         # "American"
    assert resolver().resolve("a striped or plain cat", OPTIONS).classes.tolist() == [0]     # "striped"


def test_the_names_of_concepts_that_hold_some_candidates_are_their_words():
    # 'big cats' holds the lion and the cougar, not every candidate: "big" is theirs
    assert resolver().resolve("a big cat that roars", OPTIONS).classes.tolist() == [2, 3]


@pytest.mark.parametrize("phrase", ["cats with a mane", "the cat with a mane", "a cat", "a plain cat"])
def test_nothing_changes_without_a_described_kind_or_without_evidence(phrase):
    assert resolver().resolve(phrase, OPTIONS).classes.tolist() == [0, 1, 2, 3]


def test_one_item_of_a_list_is_not_narrowed():
    task = resolver().resolve("bee, a big cat with a mane", OPTIONS)
    assert "described" not in " ".join(task.how)


def test_padding_still_follows_a_one_class_answer():
    task = resolver().resolve("a big cat with a mane", TaskOptions(min_classes=2))
    assert len(task.classes) == 2 and 2 in task.classes.tolist() and "added" in task.how[-1]


def test_a_comma_part_that_describes_the_item_before_it_rejoins_it():
    task = resolver().resolve("a cat, with a mane", OPTIONS)     # one described kind, not 'a cat' and 'with a mane'
    assert task.classes.tolist() == [2] and task.how[0].startswith("'a cat, with a mane': concept 'cat'")
    assert resolver().resolve("a big cat, living in africa", OPTIONS).classes.tolist() == [2]   # a participle
    assert len(resolver().resolve("cats, with a mane", OPTIONS).how) == 2     # no article: a list of two items
    assert resolver().index.items("a cat, without a mane") == ["a cat", "without a mane"]   # an exclusion (2b)
    assert resolver().index.items("a cat, bee") == ["a cat", "bee"]


def test_a_negation_cuts_a_described_kind_into_its_rest_and_what_it_is_not():
    from sdk.text.resolver.described import negation

    assert negation("a bird that cannot fly and lives in antarctica") == ("a bird that lives in antarctica", "fly")
    assert negation("a lobster with no pincers") == ("a lobster", "pincers")
    assert negation("a dog that isn't small") == ("a dog", "small")
    assert negation("an ape that is not orange or brown") == ("an ape", "orange or brown")
    assert negation("a big cat") is None and negation("not a bird") is None
    assert negation("a no entry sign") is None                        # a negation among the first two words names
    assert negation("a cat without") is None and negation("a thing that is not a") is None   # nothing negated


def test_a_negated_word_counts_for_the_classes_that_lack_it():
    assert described("", [5, 6], [{"mane", "lion"}, {"cougar"}], negated="a mane") == ([6], ["mane"])
    assert described("a big cat", [5, 6, 7], [{"big"}, {"big", "mane"}, {"small"}], negated="mane") == (
        [5], ["big", "mane"])
    assert described("", [5, 6], [{"mane"}, {"mane"}], negated="mane") is None   # all have it: no evidence


def test_a_described_kind_that_says_what_it_is_not_keeps_the_classes_lacking_it():
    task = resolver().resolve("a big cat without a shaggy mane", OPTIONS)
    assert [CLASSES[i].name for i in task.classes] == ["cougar"]      # before rule 6b: the lion, by "mane"
    assert task.how == ["'a big cat without a shaggy mane': read as 'a big cat', not 'a shaggy mane': group 'big "
                        "cat'; described: kept 'cougar' of those 2, whose words lack 'shaggy', 'mane'"]
    task = resolver().resolve("a cat that is not striped", OPTIONS)   # the rest by meaning: the concept 'cat'
    assert [CLASSES[i].name for i in task.classes] == ["persian cat", "lion", "cougar"]


def test_what_a_negated_name_takes_is_left_out_and_never_padded_back():
    task = resolver().resolve("a large feline that is not a lion", TaskOptions(min_classes=2))
    assert 3 in task.classes and 2 not in task.classes and len(task.classes) == 2   # the cougar, padded: not the lion
    assert task.how[0] == ("'a large feline that is not a lion': read as 'a large feline', not 'a lion': concept 'cat' "
                           "(similarity 0.85 >= best class 0.53); described: kept 'lion', 'cougar' of those 4, whose "
                           "words share 'large', 'feline' with it; left out what 'a lion' names")
    with pytest.raises(DescriptionError, match="nothing is left"):
        resolver().resolve("a large feline that is not a cat", OPTIONS)


def test_a_negated_name_is_read_through_a_typo_and_a_thing_that_is_not_takes_the_rest():
    task = resolver().resolve("a large feline that is not a loin", OPTIONS)
    assert [CLASSES[i].name for i in task.classes] == ["cougar"]
    task = resolver().resolve("a thing that is not a bee", OPTIONS)   # rule 2b, as "things that are not bees"
    assert sorted(task.classes) == [0, 1, 2, 3] and task.how[-1] == "every other class: 4 of 5"


def test_a_class_has_no_word_its_description_says_it_lacks():
    from sdk.text.resolver.described import affirmed

    assert affirmed("crustacean having a spiny carapace but lacking the large pincers; edible") == (
        "crustacean having a spiny carapace but edible")
    assert affirmed("slender-bodied non-stinging insect") == "slender-bodied insect"
    assert affirmed("not highly venomous but hairy") == "but hairy" and affirmed("") == ""
    classes = [ClassInfo("n0", "american lobster", ["lobster"], [], "lobster with big pincers"),
               ClassInfo("n1", "spiny lobster", ["lobster"], [], "lobster lacking the large pincers"),
               *CLASSES[2:]]
    found = resolver(classes).narrowed("a lobster with pincers", [0, 1])
    assert found is not None and found[0] == [0]                      # before: both had 'pincer', a tie: no change
