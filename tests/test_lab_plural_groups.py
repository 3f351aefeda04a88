"""lab/plural_groups.py: a group name and its singular answering their union, only where they share a class."""

from lab.plural_groups import merged, pairs


def test_a_name_and_its_singular_answer_their_union_where_they_share_a_class():
    assert merged({"timers": [1, 2], "timer": [2, 3]}, {"timers", "timer"}, "overlap") == {
        "timers": [1, 2, 3], "timer": [1, 2, 3]}
    apart = {"crafts": [1], "craft": [2]}
    assert merged(apart, {"crafts", "craft"}, "overlap") == apart
    assert merged(apart, {"crafts", "craft"}, "any") == {"crafts": [1, 2], "craft": [1, 2]}
    assert merged({"timers": [1], "timer": [2]}, {"timers"}, "any") == {"timers": [1], "timer": [2]}  # no concept's
    assert pairs({"timers": [1], "timer": [2], "cats": [3], "cat": [3]}, {"timers", "timer", "cats", "cat"}) == [
        ("timers", "timer")]   # 'cats' and 'cat' hold the same classes
