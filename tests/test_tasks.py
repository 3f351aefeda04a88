import numpy as np
import pytest
from conftest import synthetic_hierarchy

from trainer.data import ClassHierarchy, TaskSampler


@pytest.fixture(scope="module")
def hierarchy(synthetic_root):
    return synthetic_hierarchy(synthetic_root)


def test_neighbourhood_tasks_contain_the_label_and_come_from_the_2k_nearest(hierarchy):
    sampler = TaskSampler(hierarchy, k=5)
    rng = np.random.default_rng(0)
    for label in range(len(hierarchy)):
        for _ in range(5):
            task = sampler.sample(label, rng)
            assert label in task and len(task) == 5 and len(set(task)) == 5
            kth = np.sort(hierarchy.distances[label][np.arange(len(hierarchy)) != label])[2 * 5 - 1]
            assert hierarchy.distances[label, task].max() <= kth


def test_tasks_are_deterministic_under_a_seed(hierarchy):
    sampler = TaskSampler(hierarchy, k=6)
    a, b, c = (sampler.evaluation_tasks(seed=s) for s in (1, 1, 2))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))
    assert len(sampler.evaluation_tasks(seed=0, per_class=3)) == 3 * len(hierarchy)


def test_supercategory_tasks_stay_inside_one_group(hierarchy):
    sampler = TaskSampler(hierarchy, k=20, mode="supercategory")
    group = hierarchy.supercategory_of()
    rng = np.random.default_rng(0)
    for label in range(len(hierarchy)):
        task = sampler.sample(label, rng)
        assert label in task and len(set(group[task])) == 1
        assert len(task) == min(20, (group == group[label]).sum())


def test_mixed_tasks_are_both_kinds(hierarchy):
    group = hierarchy.supercategory_of()

    def share_inside_one_group(mode):
        sampler, rng = TaskSampler(hierarchy, k=4, mode=mode), np.random.default_rng(0)
        tasks = [sampler.sample(label, rng) for label in range(len(hierarchy)) for _ in range(10)]
        assert all(label in t and len(t) == len(set(t)) == 4 for label, t in zip(np.repeat(range(len(hierarchy)), 10),
                                                                                  tasks, strict=True))
        return np.mean([len(set(group[t])) == 1 for t in tasks])

    # Neighbourhood tasks of this hierarchy cross groups a third of the time; super-category ones never do.
    neighbourhood = share_inside_one_group("neighbourhood")
    assert neighbourhood + 0.1 < share_inside_one_group("mixed") < 1
    with pytest.raises(ValueError):
        TaskSampler(ClassHierarchy.flat(["a", "b", "c"]), mode="mixed")


def test_dynamic_k_stays_in_range(hierarchy):
    sampler = TaskSampler(hierarchy, k_range=(3, 10))
    rng = np.random.default_rng(0)
    sizes = {len(sampler.sample(0, rng)) for _ in range(200)}
    assert min(sizes) >= 3 and max(sizes) <= 10 and len(sizes) > 4


def test_k_is_clamped_and_bad_settings_rejected(hierarchy):
    task = TaskSampler(hierarchy, k=100).sample(0, np.random.default_rng(0))
    assert len(task) == len(hierarchy)
    with pytest.raises(ValueError):
        TaskSampler(hierarchy, mode="galaxy")
    with pytest.raises(ValueError):
        TaskSampler(ClassHierarchy.flat(["a", "b", "c"]), mode="supercategory")
    with pytest.raises(ValueError):
        TaskSampler(hierarchy, k_range=(10, 5))


def test_a_description_that_no_class_stands_out_for_matches_nothing():
    from sdk.errors import DescriptionError
    from sdk.format.bundle import ClassInfo
    from sdk.text.resolver import TaskOptions, TaskResolver

    classes = [ClassInfo(f"c{i}", f"class {i}", ["root", f"class {i}"]) for i in range(8)]
    embeddings = np.eye(8, dtype=np.float32)
    phrases = {"vague": np.full(8, 8 ** -0.5, np.float32),                      # equally close to all
               "nearly class 3": np.where(np.arange(8) == 3, 0.9, 0.15).astype(np.float32)}
    resolver = TaskResolver(classes, embeddings, {}, lambda text: phrases[text])
    nearest = TaskOptions(missing="nearest")
    with pytest.raises(DescriptionError, match="nothing in this bundle matches 'vague'"):
        resolver.resolve("vague", nearest)
    with pytest.raises(DescriptionError, match="'vague': not a name this bundle knows: nothing taken"):
        resolver.resolve("vague")   # by default a word that is no name takes nothing (issue 60)
    assert 3 in resolver.resolve("nearly class 3").classes
    # The threshold is the caller's: with min_contrast 0 a vague description falls back to all classes.
    assert len(resolver.resolve("vague", TaskOptions(min_contrast=0, max_classes=8, missing="nearest")).classes) == 8


def test_names_compare_alike_in_any_unicode_spelling():
    from sdk.text.resolver import normalize_name

    assert normalize_name("cafe\u0301  latte") == normalize_name(" Caf\u00e9_latte")   # NFD and NFC, case, spaces
