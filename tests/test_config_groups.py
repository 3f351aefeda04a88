"""Configuration groups and the run directory's owner (issue 47): every field in one group, each stage
reads only the fields its output is keyed on (so `--reuse-from` cannot copy a stale stage), removed levers
are refused with the tag that has them, and the stage-3 checkpoint keys are the ones trainer.rundir names."""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict

import pytest

from trainer import run as run_module
from trainer.config import CONFIG_GROUPS, LEVERS_TAG, PRESETS, REMOVED_LEVERS, TrainConfig
from trainer.rundir import OUTPUT_INPUTS, STAGE3_BANK_PARAMS, STAGE3_BANK_STATS, STAGE3_MIXER_PREFIX, RunDir

FIELDS = {f.name for f in dataclasses.fields(TrainConfig)}


def test_every_field_is_in_exactly_one_group():
    grouped = [f for fields in CONFIG_GROUPS.values() for f in fields]
    assert sorted(grouped) == sorted(FIELDS)          # none missing, none twice, none unknown
    for inputs in OUTPUT_INPUTS.values():
        assert all(name in CONFIG_GROUPS or name in FIELDS for name in inputs)


def test_a_removed_lever_loads_at_its_old_default_and_is_refused_otherwise(tmp_path):
    saved = {**PRESETS["tiny"].to_dict(), "stage2_distill": 0.0, "stage3_bases": "each", "gate_penalty": 0.0}
    (tmp_path / "old.json").write_text(json.dumps(saved))
    assert TrainConfig.load(tmp_path / "old.json") == PRESETS["tiny"]   # a run made before the removal
    (tmp_path / "lever.json").write_text(json.dumps({**saved, "stage3_route_entropy": 1.0}))
    with pytest.raises(ValueError, match=f"stage3_route_entropy.*{LEVERS_TAG}"):
        TrainConfig.load(tmp_path / "lever.json")
    assert not set(REMOVED_LEVERS) & FIELDS


class _Recorder:
    """Which configuration fields are read while each stage runs."""

    def __init__(self):
        self.stage: str | None = None
        self.reads: dict[str, set[str]] = defaultdict(set)

    def config_class(self):
        recorder = self

        class RecordingConfig(TrainConfig):
            def __getattribute__(self, name):
                if name in FIELDS and recorder.stage is not None:
                    recorder.reads[recorder.stage].add(name)
                return object.__getattribute__(self, name)
        return RecordingConfig

    def during(self, stage, fn):
        def wrapped(*args, **kwargs):
            outer, self.stage = self.stage, stage(*args) if callable(stage) else stage
            try:
                return fn(*args, **kwargs)
            finally:
                self.stage = outer
        return wrapped


def reads_outside_their_keys(reads: dict[str, set[str]]) -> dict[str, set[str]]:
    """Per stage, the fields it read that its output is not keyed on (trainer.run.output_fields)."""
    allowed_everywhere = set(CONFIG_GROUPS["run"])   # logging, threads, what to train: no output's value
    return {stage: extra for stage, fields in reads.items()
            if (extra := fields - set(run_module.output_fields(stage)) - allowed_everywhere)}


def test_each_stage_reads_only_the_fields_its_reuse_is_keyed_on(tmp_path, monkeypatch):
    recorder = _Recorder()
    recording = recorder.config_class()
    resolve = run_module.resolve_config
    monkeypatch.setattr(run_module, "resolve_config",
                        lambda *a, **k: recording(**dataclasses.asdict(resolve(*a, **k))))
    monkeypatch.setattr(run_module, "train_stage1", recorder.during("stage1", run_module.train_stage1))
    monkeypatch.setattr(run_module, "train_continuation", recorder.during("baseline", run_module.train_continuation))
    monkeypatch.setattr(run_module, "_stage2", recorder.during("stage2", run_module._stage2))
    monkeypatch.setattr(run_module, "_stage3", recorder.during(lambda ctx, run_dir, variant, *rest:
                                                               run_module.stage3_dir(variant), run_module._stage3))
    # Which fields each stage reads does not depend on how long it trains or how wide: one epoch each, few
    # photos, half the preset's width.
    few = {"image_size": 32, "train_per_class": 4, "val_per_class": 2}
    run_module.run(tmp_path / "run", "tiny", {"ablations": ("naive", "bow"), "naive_epochs": 0.5, "width": 0.125,
                                              "stage3_mixer_init": "majority", "stage1_epochs": 1,
                                              "stage3_epochs": 1, "synthetic": few}, progress=False)
    assert set(recorder.reads) == {"stage1", "baseline", "stage2", "stage3", "stage3_naive", "stage3_bow"}
    assert {"stage1_epochs", "lr"} <= recorder.reads["stage1"]          # the recorder sees the stages' reads
    assert {"stage2_lr", "num_bases"} <= recorder.reads["stage2"]
    assert "naive_epochs" in recorder.reads["stage3_naive"]
    assert reads_outside_their_keys(recorder.reads) == {}
    # The check itself fails when a stage's key leaves out a field it reads: stage 2 keyed on stage 1 only.
    monkeypatch.setitem(OUTPUT_INPUTS, "stage2", OUTPUT_INPUTS["stage1"])
    assert "stage2_lr" in reads_outside_their_keys(recorder.reads)["stage2"]


def test_reuse_keys_are_the_groups_the_run_directory_owner_lists():
    stage1 = set(run_module.output_fields("stage1"))
    assert stage1 == {f for g in ("data", "network", "training", "stage1") for f in CONFIG_GROUPS[g]}
    assert set(run_module.output_fields("stage3_naive")) - set(run_module.output_fields("stage3")) == {"naive_epochs"}
    assert {"stage3_epochs", "stage3_lr", "baseline_lr"} <= set(run_module.output_fields("baseline"))
    assert "stage3_seed" not in run_module.output_fields("baseline")


def test_stage3_checkpoint_keys_are_the_ones_the_run_directory_names(tiny_run):
    from trainer.checkpoints import load_state

    state = load_state(RunDir(tiny_run).stage3_model())
    blocks = range(4)
    assert {STAGE3_BANK_PARAMS.format(block=b) for b in blocks} | {STAGE3_BANK_STATS.format(block=b) for b in blocks} \
        == {k for k in state if not k.startswith(STAGE3_MIXER_PREFIX)}
    assert any(k.startswith(STAGE3_MIXER_PREFIX) for k in state)
    assert RunDir(tiny_run).reference_model() == tiny_run / "baseline" / "model.safetensors"
