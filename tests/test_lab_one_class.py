"""lab/one_class.py's decisions and photo folders (the measurement behind sdk.engines.rest)."""

from types import SimpleNamespace

import numpy as np
from PIL import Image

from lab.one_class import decisions, photo_folders
from sdk.engines.rest import one_against_rest


def test_each_way_decides_as_its_rule_says():
    z = np.array([[3.0, 2.5, 0.0, 0.0],     # X just above the padded class, far above the rest
                  [1.0, 0.0, 2.0, 2.0],     # X below two others
                  [0.5, 0.6, -5.0, -5.0]], np.float32)
    said = decisions(z, 0, 1)
    assert said["padded"].tolist() == [True, True, False]
    assert said["argmax"].tolist() == [True, False, False]
    assert said["rest_balanced"].tolist() == (one_against_rest(z, 0).argmax(1) == 0).tolist()
    assert said["rest_balanced"].tolist() == [True, False, True]    # 0.5 > log(mean(exp(0.6, -5, -5)))
    assert said["rest_lse"].tolist() == [True, False, False]
    assert said["rest_mean"].tolist() == [True, False, True]


def test_photo_folders_label_by_class_id_and_skip_a_class_without_photos(tmp_path):
    for name, count in (("owl", 2), ("cat", 1)):
        (tmp_path / name).mkdir()
        for i in range(count):
            Image.new("RGB", (40, 30), (i * 50, 0, 0)).save(tmp_path / name / f"{i}.png")
    classes = [SimpleNamespace(id=i) for i in ("cat", "dog", "owl")]
    bundle = SimpleNamespace(bundle=SimpleNamespace(classes=classes), preprocessing=SimpleNamespace(input_size=16))
    images, labels = photo_folders(bundle, tmp_path)
    assert images.shape == (3, 16, 16, 3) and labels.tolist() == [0, 2, 2]
