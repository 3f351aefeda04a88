"""The run directory: the one owner of its layout. Every reader and writer of a run (the trainer, its
report, `export bundle`, the benchmarks, the lab) asks a `RunDir` for a path instead of spelling it.

    runs/<name>/
      config.json            the resolved configuration (a rerun with the same --out resumes)
      command.txt            the command that made the run
      log.jsonl              one JSON record per logged step / epoch / stage
      metrics.json           wall time per stage
      classes.safetensors    class-name text embeddings (from the shipped encoder)
      eval.json              `python -m trainer eval`'s result
      stage1/model.safetensors, baseline/model.safetensors
      stage2/shards.json, stage2/basis{q}.safetensors
      stage3/model.safetensors (bank + mixer), stage3_<ablation>/model.safetensors
      oracle.json            `python -m lab oracle`'s result, if it was run

The stage-3 checkpoint is a `trainer.stages.Stage3Model` state dict; `STAGE3_BANK_PARAMS` and
`STAGE3_BANK_STATS` name its bank's per-block tensors and `STAGE3_MIXER_PREFIX` its mixer's (a test
checks them against a Stage3Model's state dict).

>>> run = RunDir(Path("runs/bench"))
>>> run.model("stage1").as_posix(), run.basis(3).as_posix()
('runs/bench/stage1/model.safetensors', 'runs/bench/stage2/basis3.safetensors')
"""

from __future__ import annotations

from pathlib import Path

CONFIG = "config.json"
MODEL = "model.safetensors"
CLASSES = "classes.safetensors"

# Stage-3 checkpoint keys (Stage3Model's state dict): the bank's tensors (block b's weights and running
# statistics), and the mixer's tensors (named as sdk.fusion.mixer.tensor_shapes says after the prefix).
STAGE3_BANK_PREFIX = "bank."
STAGE3_BANK_PARAMS = STAGE3_BANK_PREFIX + "params{block}"
STAGE3_BANK_STATS = STAGE3_BANK_PREFIX + "stats{block}"
STAGE3_MIXER_PREFIX = "mixer."

# What each output of a run depends on: configuration groups (trainer.config.CONFIG_GROUPS) or single
# fields. `--reuse-from` copies an output only when all of these are unchanged; tests/test_trainer.py
# records the fields each stage reads and fails on one outside its list.
_TRAINED = ("data", "network", "training", "stage1")
OUTPUT_INPUTS: dict[str, tuple[str, ...]] = {
    CLASSES: ("data",),
    "stage1": _TRAINED,
    # The baseline continues stage 1 for as many epochs as stages 2 and 3, at stage 3's lr by default.
    "baseline": (*_TRAINED, "baseline", "stage2_epochs", "stage3_epochs", "stage3_lr"),
    "stage2": (*_TRAINED, "stage2"),
    "stage3": (*_TRAINED, "stage2", "stage3"),
}


def stage3_dir(variant: str) -> str:
    """The folder of a stage-3 variant: "stage3" for TAPER, "stage3_<ablation>" for the others."""
    return "stage3" if variant == "taper" else f"stage3_{variant}"


class RunDir:
    """The paths of one run directory (its files are named in the module docstring)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.config, self.classes = self.root / CONFIG, self.root / CLASSES
        self.command, self.log = self.root / "command.txt", self.root / "log.jsonl"
        self.metrics, self.eval = self.root / "metrics.json", self.root / "eval.json"
        self.oracle = self.root / "oracle.json"
        self.shards = self.root / "stage2" / "shards.json"

    def stage(self, name: str) -> Path:
        """A stage's folder: "stage1", "baseline", "stage2", "stage3", "stage3_<ablation>"."""
        return self.root / name

    def model(self, stage: str) -> Path:
        """The final network of a one-model stage ("stage1", "baseline") or a stage-3 folder."""
        return self.root / stage / MODEL

    def stage3_model(self, variant: str = "taper") -> Path:
        return self.model(stage3_dir(variant))

    def basis(self, q: int) -> Path:
        return self.root / "stage2" / f"basis{q}.safetensors"

    def reference_model(self) -> Path:
        """The network classifier selection is scored with: the baseline's, or stage 1's in a run
        trained without one."""
        baseline = self.model("baseline")
        return baseline if baseline.exists() else self.model("stage1")

    def is_done(self, output: str) -> bool:
        """Whether an output named as in OUTPUT_INPUTS (or a stage-3 folder) is finished."""
        path = self.root / output
        if output == "stage2":
            return path.is_dir()
        return path.is_file() or (path / MODEL).is_file()
