"""lab/one_class.py's decisions and labels (the measurement behind sdk.engines.rest)."""

import numpy as np

from lab.one_class import by_bundle_class, decisions


def test_each_way_decides_as_its_rule_says():
    z = np.array([[3.0, 2.5, 0.0, 0.0],     # X just above the padded class, far above the rest
                  [1.0, 0.0, 2.0, 2.0],     # X below two others
                  [0.5, 0.6, -5.0, -5.0]], np.float32)
    said = decisions(z, 0, 1)
    assert said["padded"].tolist() == [True, True, False]
    assert said["argmax"].tolist() == [True, False, False]
    assert said["rest_balanced"].tolist() == [True, False, True]    # 0.5 > log(mean(exp(0.6, -5, -5)))
    assert said["rest_lse"].tolist() == [True, False, False]
    assert said["rest_mean"].tolist() == [True, False, True]


def test_data_labels_become_bundle_classes_and_a_class_it_lacks_minus_one():
    labels = by_bundle_class(["cat", "dog", "owl"], ["owl", "bee", "cat"], np.array([0, 1, 2, 2]))
    assert labels.tolist() == [2, -1, 0, 0]
