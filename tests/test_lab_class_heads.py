"""lab/class_heads.py, the count behind a rule not built (docs/results/experiments.md, "Set B's other rows, looked at
again"): a name that ends another class's name, and whether the list of compounds that are no kind of their last word
holds the compound."""

from lab.class_heads import heading_names


def test_a_name_ending_another_classs_name_is_found_with_the_lists_word_on_it():
    by_name = {"slug": 0, "sea slug": 1, "pig": 2, "hog": 2, "guinea pig": 3, "sports car": 4, "cat": 5}
    found = heading_names(by_name, frozenset({"sea slug", "guinea pig"}))
    assert found == {"slug": {"class": 0, "compounds": {"sea slug": True}},
                     "pig": {"class": 2, "compounds": {"guinea pig": True}}}
    # no class named 'car'; a compound of one class's own name ending in its other name is no other class's
    assert heading_names({"sea slug": 1, "slug": 1}, frozenset()) == {}
    assert heading_names({"slug": 0, "sea slug": 1}, frozenset()) == {
        "slug": {"class": 0, "compounds": {"sea slug": False}}}
