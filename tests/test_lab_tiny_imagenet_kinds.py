"""lab/tiny_imagenet_kinds.py sorts each changed answer by what the export meant to add (a kind's name as a class's
alias, an informal term as a group's name, a kind told missing with its group) and everything else, the side
effects a reader must look at."""

from lab.tiny_imagenet_kinds import kind_of_change


def test_each_change_goes_to_what_it_is():
    assert kind_of_change({"classes": ["brown bear"], "how": ["'grizzly': class name"]}) == "alias"
    assert kind_of_change({"classes": ["brown bear", "bison"],
                           "how": ["'grizzly': class name, with the classes within 0.08 of its similarity"]}) == "alias"
    assert kind_of_change({"classes": ["tabby"], "how": ["'kitty': group 'kitty'"]}) == "informal"
    told = "nothing in this bundle matches any of ['beagle']: 'beagle': ... 'beagle' is a kind of 'hunting dog'"
    assert kind_of_change({"classes": [], "how": [told]}) == "kind"
    # anything else is a side effect: a word read by its nearest classes, a plain refusal, a spelling
    assert kind_of_change({"classes": ["koala"], "how": ["'kodiak': not a name this bundle knows: took"]}) == "other"
    assert kind_of_change({"classes": [], "how": ["nothing in this bundle matches any of ['x']"]}) == "other"
    assert kind_of_change({"classes": ["sock"], "how": ["'sok': read as 'sock' (spelling): class name"]}) == "other"
