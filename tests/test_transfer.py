"""Transfer (issue 75): an upstream that never sees the classes it is measured on (`--exclude-classes`), and
stage 1 started from a bundle's generic network or a finished run (`--init`), the classifier first
(`stage1_head_epochs`), with the fine-tuning defaults a start takes (trainer.config.FINETUNE)."""

import json

import numpy as np
import pytest
import torch

from trainer.config import FINETUNE, PRESETS, TrainConfig, fit_to_start
from trainer.data.errors import DataError
from trainer.data.holdout import read_class_list
from trainer.models import ResNet18, ResNetConfig
from trainer.pretrained import load_pretrained
from trainer.rundir import RunDir

TINY_SYNTHETIC = {"image_size": 32, "train_per_class": 3, "val_per_class": 1}


def tiny_network(config: TrainConfig, classes: int) -> ResNet18:
    torch.manual_seed(5)
    return ResNet18(ResNetConfig(config.stem, config.width, classes, config.input_size))


def test_a_class_list_is_read_from_text_a_json_list_or_the_own_photos_file(tmp_path):
    (tmp_path / "ids.txt").write_text("n1  # first\n\nn2\nn1\n")
    (tmp_path / "ids.json").write_text('["n3", "n4"]')
    (tmp_path / "own.json").write_text('{"about": "x", "classes": {"bee": "n5", "ant": "n6"}}')
    assert read_class_list(tmp_path / "ids.txt") == ("n1", "n2")
    assert read_class_list(tmp_path / "ids.json") == ("n3", "n4")
    assert read_class_list(tmp_path / "own.json") == ("n5", "n6")
    for name, text, words in [("empty.txt", "# nothing\n", "names no class"), ("bad.json", "{", "not JSON"),
                              ("odd.json", '{"classes": [1]}', "expected a list")]:
        (tmp_path / name).write_text(text)
        with pytest.raises(DataError, match=words):
            read_class_list(tmp_path / name)
    with pytest.raises(DataError, match="not readable"):
        read_class_list(tmp_path / "none.txt")


def test_excluded_classes_never_reach_the_run_and_an_unknown_id_is_refused(tiny_run):
    from trainer.run import open_all_data, open_data

    config = TrainConfig.load(tiny_run / "config.json")
    every = open_all_data(config, progress=False)
    excluded = tuple(every.wnids[::3])
    kept = open_data(config.with_overrides(exclude_classes=excluded), progress=False)
    assert set(kept.wnids).isdisjoint(excluded) and len(kept.wnids) == len(every.wnids) - len(excluded)
    assert set(kept.names).isdisjoint(every.names[i] for i in range(0, len(every.wnids), 3))
    assert kept.train.labels.max() == len(kept.wnids) - 1 and len(kept.train) < len(every.train)
    with pytest.raises(DataError, match="not in the data"):
        open_data(config.with_overrides(exclude_classes=("no-such-class",)), progress=False)


def test_init_from_a_bundle_copies_its_generic_network_and_resizes_the_head(tiny_bundle, tiny_sdk):
    from sdk.fusion.mixer import uniform_alpha

    config = PRESETS["tiny"]
    model = tiny_network(config, 5)
    fresh_head = model.fc.weight.detach().clone()
    (note,) = load_pretrained(model, tiny_bundle)
    generic = tiny_sdk.fused_weights(uniform_alpha(tiny_sdk.bundle.manifest.num_bases))
    state = model.state_dict()
    for key in ("stem.conv1.weight", "layer2.0.bn1.running_var", "layer4.1.conv2.weight"):
        np.testing.assert_array_equal(state[key].numpy(), generic[key])
    assert torch.equal(state["fc.weight"], fresh_head) and "generic network of bundle tiny.taper" in note
    assert "re-sized to 5" in note


def test_init_from_a_finished_run_takes_its_classifier_selection_network(tiny_run):
    from trainer.checkpoints import load_state

    model = tiny_network(PRESETS["tiny"], 4)
    (note,) = load_pretrained(model, tiny_run)
    reference = load_state(RunDir(tiny_run).reference_model())   # the tiny preset trains a baseline
    assert torch.equal(model.state_dict()["layer3.1.conv1.weight"], reference["layer3.1.conv1.weight"])
    assert "run " in note and "width 0.25" in note


def test_a_start_of_another_width_or_an_unfinished_run_is_a_clear_error(tiny_run, tiny_bundle, tmp_path):
    wide = TrainConfig(stem="small", width=0.5, input_size=32)
    with pytest.raises(ValueError, match=r"generic network of bundle.*width 0.25.*--set width"):
        load_pretrained(tiny_network(wide, 4), tiny_bundle)
    (tmp_path / "half").mkdir()
    with pytest.raises(ValueError, match="not a finished run"):
        load_pretrained(tiny_network(PRESETS["tiny"], 4), tmp_path / "half")
    (tmp_path / "broken.taper").write_bytes(b"not a bundle")
    with pytest.raises(ValueError, match="broken.taper"):
        load_pretrained(tiny_network(PRESETS["tiny"], 4), tmp_path / "broken.taper")


def test_a_start_takes_the_fine_tuning_defaults_except_what_the_user_set():
    demo = PRESETS["demo"]
    assert fit_to_start(demo) == (demo, [])
    started = demo.with_overrides(stage1_init="up.taper")
    fitted, notes = fit_to_start(started)
    assert {k: getattr(fitted, k) for k in FINETUNE} == FINETUNE and len(notes) == len(FINETUNE)
    kept, notes = fit_to_start(started.with_overrides(stage1_epochs=3), {"stage1_epochs"})
    assert kept.stage1_epochs == 3 and all("stage1_epochs" not in n for n in notes)
    assert fitted.stage1_learning_rate == FINETUNE["stage1_lr"] and demo.stage1_learning_rate == demo.lr
    with pytest.raises(ValueError, match="needs --init"):
        demo.with_overrides(stage1_head_epochs=1)


def test_head_epochs_train_the_classifier_alone_on_the_starts_features(tiny_run, tmp_path):
    """A linear probe: stage 1 of head epochs only leaves every body tensor, running statistics included,
    exactly the start's; the classifier moves."""
    from trainer.checkpoints import load_state
    from trainer.run import run

    out = run(tmp_path / "probe", "tiny", {"stage1_init": str(tiny_run), "stage1_epochs": 0,
                                           "stage1_head_epochs": 1, "baseline": False}, progress=False,
              until="stage1")
    config = json.loads((out / "config.json").read_text())
    assert config["stage1_lr"] == FINETUNE["stage1_lr"] and config["stage1_epochs"] == 0   # the user's 0 kept
    start = load_state(RunDir(tiny_run).reference_model())
    probe = load_state(out / "stage1" / "model.safetensors")
    body = [k for k in probe if not k.startswith("fc.") and not k.endswith("num_batches_tracked")]
    assert body and all(torch.equal(probe[k], start[k]) for k in body)
    saved = TrainConfig.load(out / "config.json")
    torch.manual_seed(saved.seed)   # stage 1's fresh classifier, as train_stage1 makes it
    fresh = ResNet18(ResNetConfig(saved.stem, saved.width, len(probe["fc.bias"]), saved.input_size)).state_dict()
    assert not torch.equal(probe["fc.weight"], fresh["fc.weight"])


def test_the_cli_fine_tunes_from_a_bundle_and_says_what_it_changed(tiny_bundle, tmp_path, capsys):
    from trainer.__main__ import main

    out = tmp_path / "mine"
    assert main(["run", "--preset", "tiny", "--out", str(out), "--init", str(tiny_bundle), "--until", "stage1",
                 "--set", "baseline=false", "--set", "stage1_epochs=1",
                 "--set", f"synthetic={json.dumps(TINY_SYNTHETIC)}"]) == 0
    printed = capsys.readouterr().out
    assert "stage 1 starts from the generic network of bundle tiny.taper" in printed
    assert "fine-tuning a start" in printed and "stage1_lr" in printed
    assert (out / "stage1" / "head" / "checkpoint.pt").is_file() and (out / "stage1" / "model.safetensors").is_file()


def test_the_transfer_scorer_agrees_with_the_trainers_evaluator_and_shows_its_photos(tiny_run, tmp_path,
                                                                                     monkeypatch):
    """scripts/bench_transfer.py scores every row with its own loop (per class, for the worst classes): on
    the same tasks it must give the trainer's classifier-selection accuracy; its page shows the photos."""
    from scripts import bench_transfer
    from trainer.checkpoints import load_state

    monkeypatch.setattr(bench_transfer, "EVAL_SEEDS", (0, 1))
    scorer = bench_transfer.Scorer(tiny_run)
    row = scorer.network(tiny_run)
    logits = scorer.evaluator.logits(load_state(RunDir(tiny_run).reference_model()))
    assert row["accuracy"] == pytest.approx(scorer.evaluator.static(logits, scorer.tasks)[0], abs=0.01)
    assert len(row["worst_classes"]) == 3 and min(row["per_class"].values()) == min(row["worst_classes"].values())
    from sdk.text.encoder import primary_name

    monkeypatch.setattr(bench_transfer, "PAGE_CLASSES", tuple(primary_name(n) for n in scorer.names[:2]))
    page = bench_transfer.contact_page(scorer, {"A": tiny_run, "B": tiny_run}, tmp_path / "page.html")
    html = page.read_text()
    shown = sum(min(bench_transfer.PAGE_PHOTOS, int((scorer.labels == c).sum())) for c in (0, 1))
    assert shown > 0 and html.count("<figure") == 2 * shown   # the same photos in each run's section
    assert f"true: {primary_name(scorer.names[0])}" in html and html.count("<h2>") == 2


def test_a_start_or_an_exclusion_that_does_not_fit_is_refused_before_the_run_directory_exists(tiny_bundle, tmp_path,
                                                                                             capsys):
    """A newcomer's mistakes: the preset's width is not the bundle's, a class id is misspelt. Refused up front,
    with what to do, and no half-made run directory that a corrected command would then refuse to resume."""
    from trainer.__main__ import main

    base = ["run", "--preset", "tiny", "--set", f"synthetic={json.dumps(TINY_SYNTHETIC)}"]
    assert main([*base, "--out", str(tmp_path / "wide"), "--init", str(tiny_bundle), "--set", "width=0.5"]) == 2
    assert "--set width" in capsys.readouterr().err and not (tmp_path / "wide").exists()
    (tmp_path / "ids.txt").write_text("no-such-class\n")
    assert main([*base, "--out", str(tmp_path / "typo"), "--exclude-classes", str(tmp_path / "ids.txt")]) == 2
    err = capsys.readouterr().err
    assert "excluded classes not in the data: ['no-such-class']" in err and not (tmp_path / "typo").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("the user's")   # a folder the user made is never removed
    assert main([*base, "--out", str(tmp_path / "mine"), "--exclude-classes", str(tmp_path / "ids.txt")]) == 2
    assert (tmp_path / "mine" / "notes.txt").read_text() == "the user's"
