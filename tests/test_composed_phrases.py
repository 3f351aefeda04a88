"""Rule 3b of sdk/text/resolver/: a phrase built from two groups ("small mammals", "non-insect invertebrates")."""

import numpy as np
import pytest

from export.golden import COMPOSED_CLASSES as NAMES
from export.golden import COMPOSED_CONCEPTS, composed_resolver
from sdk.errors import DescriptionError
from sdk.text.resolver import TaskOptions, TaskResolver


def resolver(compose: bool = True, encoded: list | None = None) -> TaskResolver:
    """export.golden's table (classes and concepts on their own axes, as the Java core's golden test reads
    it); every text embeds onto the mouse's axis and is recorded in `encoded`."""
    def embed(text: str) -> np.ndarray:
        if encoded is not None:
            encoded.append(text)
        return np.eye(len(NAMES) + len(COMPOSED_CONCEPTS), dtype=np.float32)[0]

    return composed_resolver(embed, compose)


def names(r: TaskResolver, description: str) -> set[str]:
    return {NAMES[i] for i in r.resolve(description, TaskOptions(min_classes=1)).classes}


def test_a_modifier_keeps_the_classes_of_the_head_group_that_its_own_group_holds():
    r = resolver()
    assert names(r, "small mammals") == {"mouse", "hamster", "weasel"}
    assert names(r, "little mammals") == names(r, "small mammals")          # any name of the modifier's group
    assert names(r, "large carnivores") == {"lion"}                         # the head's plural made singular
    assert names(r, "small flying animals") == {"bee"}                      # the longest head first
    assert names(r, "sea invertebrates") == {"crab", "sea slug"}            # a modifier that is a group itself
    assert names(r, "small mammals, birds") == {"mouse", "hamster", "weasel", "goose", "penguin"}
    assert r.resolve("small mammals").how == ["'small mammals': 'small animals' within group 'mammals'"]


def test_an_exclusion_drops_a_group_a_modifier_or_a_class():
    r = resolver()
    three = {"snail", "crab", "sea slug"}
    for text in ("non-insect invertebrates", "invertebrates except insects", "invertebrates excluding insects",
                 "invertebrates but not insects", "invertebrates other than insects", "invertebrates without insects",
                 "invertebrates that are not insects", "invertebrates which aren't insects"):
        assert names(r, text) == three, text
    assert names(r, "non-flying birds") == {"penguin"}                     # "flying" -> "flying animals"
    assert names(r, "birds except penguins") == {"goose"}                  # a class name, made singular
    assert r.resolve("non-insect invertebrates").how == ["'non-insect invertebrates': group 'invertebrates' "
                                                         "without 'insect'"]


@pytest.mark.parametrize("text", [
    "insect insects",          # the modifier is the head's own group: it says nothing
    "large insects",           # nothing in both
    "purple mammals",          # the modifier names no group
    "non-bird mammals",        # nothing dropped
    "mammals except",          # nothing after the exclusion word ("except mammals" leaves them out: rule 2b)
    "non- mammals",            # "non-" alone
    "mammals but lions",       # "but" excludes only after a quantifier ("every mammal but the lion")
    "predator mammals",        # 'predator' answers the group 'predators' but is no modifier ("drink containers"
    "small animal mammals",    # hold drinks: issue 60)
])
def test_phrases_that_do_not_compose_are_read_as_before(text):
    encoded: list[str] = []
    with_rule = resolver(encoded=encoded).resolve(text, TaskOptions(min_classes=1))
    assert encoded == [text]                                                # it went to the text encoder
    without = resolver(compose=False).resolve(text, TaskOptions(min_classes=1))
    assert with_rule.classes.tolist() == without.classes.tolist() and with_rule.how == without.how


def test_more_exclusion_words_and_a_quantifier_before_them():
    """Each of these had taken the class it leaves out on Tiny ImageNet ("dogs except for chihuahuas", "every dog but
    the chihuahua": experiments.md, "What a phrase leaves out, in more words")."""
    r = resolver()
    for text in ("invertebrates except for insects", "invertebrates apart from insects",
                 "invertebrates aside from insects", "invertebrates besides insects", "invertebrates minus insects",
                 "all invertebrates except the insects", "every invertebrate but the insects",
                 "all the invertebrates except insects", "any invertebrate but insects"):
        assert names(r, text) == {"snail", "crab", "sea slug"}, text
    assert names(r, "every mammal but the lion") == {"mouse", "hamster", "elephant", "weasel"}
    for text in ("mammals but no lions", "mammals not including the lion", "mammals, but no lions"):   # took the lion
        assert names(r, text) == {"mouse", "hamster", "elephant", "weasel"}, text


def test_a_kept_part_that_is_no_group_is_read_as_a_phrase_then_what_follows_is_left_out():
    encoded: list[str] = []
    r = resolver(encoded=encoded)
    task = r.resolve("small mammals except mice", TaskOptions(min_classes=1))
    assert {NAMES[i] for i in task.classes} == {"hamster", "weasel"} and encoded == []
    assert task.how == ["'small mammals except mice': read as 'small mammals', not 'mice': 'small animals' within "
                        "group 'mammals'; left out what 'mice' names"]
    # left out, never padded back, as rule 2b and 6b leave out
    assert "mouse" not in names(r, "small mammals except mice") and "mouse" not in {
        NAMES[i] for i in r.resolve("small mammals except mice", TaskOptions(min_classes=3)).classes}
    # a part after that names nothing narrows by words, as rule 6b's does; here no word tells: the whole kept part
    assert names(r, "invertebrates except purple") == {"bee", "ant", "snail", "crab", "sea slug"}
    for text in ("sea slugs except slugs", "mammals except mammals"):   # refused: what is left out is all of it
        with pytest.raises(DescriptionError, match="nothing is left"):
            r.resolve(text, TaskOptions(min_classes=1))
    assert names(r, "lion except elephants") == names(r, "lion")            # a class alone keeps its look-alikes


def test_after_an_exclusion_a_part_naming_only_what_it_keeps_is_left_out_too():
    """Rule 2c: "all vehicles except cars and buses" had taken the buses (rule 2 cuts at "and" first)."""
    r = resolver()
    assert names(r, "invertebrates except insects and snails") == {"crab", "sea slug"}
    assert names(r, "all invertebrates except the insects or the crabs") == {"snail", "sea slug"}
    assert names(r, "mammals except elephants and lions and birds and mice") == {   # the run ends at 'birds'
        "mouse", "hamster", "weasel", "goose", "penguin"}
    assert names(r, "invertebrates except insects and birds") == {"snail", "crab", "sea slug", "goose", "penguin"}
    assert names(r, "small mammals except mice and hamsters") == {"hamster", "weasel"}   # no name kept: no run
    task = r.resolve("invertebrates except insects and snails", TaskOptions(min_classes=1))
    assert task.how == ["'invertebrates except insects': group 'invertebrates' without 'insects'",
                        "'snails': left out, class name"]


def test_names_joined_by_and_or_or_are_left_out_together():
    """"every bird except the penguin and the goose": rule 2 does not cut an item holding "the" or "for" (a gloss), so
    the negated part is "penguin and the goose", read as two names, not as words."""
    r = resolver()
    assert names(r, "all mammals except for lions and mice") == {"hamster", "elephant", "weasel"}
    assert names(r, "small animals except for insects and snails") == {"mouse", "hamster", "weasel"}
    assert names(r, "a mammal that is not a lion or a mouse") == {"hamster", "elephant", "weasel"}
    task = r.resolve("all mammals except for lions and mice", TaskOptions(min_classes=1))
    assert task.how[0].endswith("left out what 'lions and mice' names")
    # one part that names nothing here: no union, the words narrow as before
    assert "left out what" not in r.resolve("mammals except for lions and owls", TaskOptions(min_classes=1)).how[0]


def test_a_modifier_that_holds_the_whole_head_takes_it_by_name():
    """"small insects": every insect of the table is a small animal, so the phrase is the insects, by name, with no
    text encoder (before, the encoder read it; on Tiny ImageNet "pet dogs" took the concept 'pet animals', cats and
    a goldfish too). A modifier that narrows wins wherever it stands."""
    encoded: list[str] = []
    task = resolver(encoded=encoded).resolve("small insects", TaskOptions(min_classes=1))
    assert encoded == [] and names(resolver(), "small insects") == {"bee", "ant"}
    assert task.how == ["'small insects': 'small animals' within group 'insects': all of it"]


def test_a_class_name_is_never_composed():
    """"sea" x "slug" would be the sea slug alone; a class name alone is answered by name, with its look-alikes
    (none here: each class is on its own axis), and needs no text encoder (issue 72)."""
    encoded: list[str] = []
    with_rule = resolver(encoded=encoded).resolve("sea slug", TaskOptions(min_classes=1))
    assert encoded == [] and with_rule.how == ["'sea slug': class name"]
    assert [NAMES[i] for i in with_rule.classes] == ["sea slug"]
    without = resolver(compose=False).resolve("sea slug", TaskOptions(min_classes=1))
    assert with_rule.classes.tolist() == without.classes.tolist() and with_rule.how == without.how


def test_composed_phrases_need_no_text_encoder_and_the_switch_turns_the_rule_off():
    encoded: list[str] = []
    assert names(resolver(encoded=encoded), "small mammals") == {"mouse", "hamster", "weasel"}
    assert encoded == []
    # Without the rule the phrase is embedded; every text here embeds onto the mouse.
    assert names(resolver(compose=False), "small mammals") != {"mouse", "hamster", "weasel"}
