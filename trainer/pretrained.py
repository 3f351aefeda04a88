"""Stage 1 from a network that already knows images (`--init`, issues 60 and 75). Three kinds of start:

- a `.taper` bundle: its generic network, the uniform mix of its bases in every block (the network
  `bundle.generic()` runs, whose classifier selection the bundle's reports score), read through the SDK, so
  the bundle is checked as any bundle is;
- a finished run directory: its classifier-selection network (the baseline, or stage 1 where the run
  trained no baseline: `RunDir.reference_model`);
- a state dict in torchvision's layout, the file a user downloads on a connected machine
  (`torchvision.models.resnet18(weights=...).state_dict()`, saved with `torch.save` or as .safetensors).

Nothing is downloaded here. torchvision's keys are this trainer's with the stem's two tensors named without
`stem.` (`conv1.weight`, `bn1.*`); every other key is the same. The classifier (`fc.*`) is re-sized to the
data's classes: it starts fresh. Any other missing, extra or differently shaped tensor is a ValueError naming
it and the start's width and stem (a run's preset must match them: `--set width=... --set stem=...`).

>>> torchvision_key("bn1.running_mean"), torchvision_key("layer1.0.conv1.weight")
('stem.bn1.running_mean', 'layer1.0.conv1.weight')
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from .checkpoints import load_state
from .models import ResNet18
from .rundir import RunDir

STEM_KEYS = ("conv1.", "bn1.")
HEAD_KEYS = ("fc.weight", "fc.bias")
BUNDLE_SUFFIX = ".taper"


def torchvision_key(key: str) -> str:
    """This trainer's name for a torchvision ResNet-18 key."""
    return "stem." + key if key.startswith(STEM_KEYS) else key


def read_state(path: str | Path) -> dict[str, torch.Tensor]:
    """The tensors of a .pt/.pth (loaded with weights_only: no code runs) or .safetensors file."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--init {path}: file not found")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(path))
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unreadable file is the same user error
        raise ValueError(f"--init {path}: not a readable state dict ({type(e).__name__}: {e})") from None
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"--init {path}: expected a dict of tensors (a model's state_dict())")
    return state


def bundle_state(path: Path) -> tuple[dict[str, torch.Tensor], str]:
    """A bundle's generic network (the bases mixed uniformly, batch norm unfolded) and what it is."""
    import sdk
    from sdk.fusion.mixer import uniform_alpha

    try:
        bundle = sdk.load(path)
    except sdk.SdkError as e:
        raise ValueError(f"--init {path}: {e}") from None
    arch = bundle.bundle.manifest.architecture
    weights = bundle.fused_weights(uniform_alpha(bundle.bundle.manifest.num_bases))
    what = (f"the generic network of bundle {path.name} (width {arch.width}, {arch.stem} stem, "
            f"{arch.input_size} px, {arch.num_classes} classes)")
    return {k: torch.from_numpy(np.array(v, np.float32)) for k, v in weights.items()}, what


def run_state(path: Path) -> tuple[dict[str, torch.Tensor], str]:
    """A finished run's classifier-selection network and what it is."""
    model = RunDir(path).reference_model()
    if not model.is_file():
        raise ValueError(f"--init {path}: not a finished run (no {model.relative_to(path)}: train it with "
                         f"`python -m trainer run --out {path} --until stage1` first)")
    config = RunDir(path).config
    shape = ""
    if config.is_file():
        from .config import TrainConfig

        saved = TrainConfig.load(config)
        shape = f" (width {saved.width}, {saved.stem} stem, {saved.input_size} px)"
    return load_state(model), f"run {path}'s {model.parent.name} network{shape}"


def start_state(path: str | Path) -> tuple[dict[str, torch.Tensor], str]:
    """The tensors of an `--init` start, in this trainer's names, and one phrase saying what they are."""
    path = Path(path)
    if path.is_dir():
        return run_state(path)
    if path.suffix == BUNDLE_SUFFIX:
        if not path.is_file():
            raise ValueError(f"--init {path}: file not found")
        return bundle_state(path)
    state = read_state(path)
    return {torchvision_key(k.removeprefix("module.")): v for k, v in state.items()}, f"{path}"


def load_pretrained(model: ResNet18, path: str | Path) -> list[str]:
    """Copy the start's tensors into `model` key by key (the classifier is kept fresh); the notes to print."""
    mapped, what = start_state(path)
    ours = model.state_dict()
    head = [k for k in HEAD_KEYS if k in mapped]
    body = {k: v for k, v in mapped.items() if k not in HEAD_KEYS and not k.endswith("num_batches_tracked")}
    missing = sorted(k for k in ours if k not in body and k not in HEAD_KEYS and not k.endswith("num_batches_tracked"))
    extra = sorted(k for k in body if k not in ours)
    shapes = [f"{k}: file {tuple(v.shape)}, model {tuple(ours[k].shape)}" for k, v in body.items()
              if k in ours and v.shape != ours[k].shape]
    if missing or extra or shapes:
        raise ValueError(f"--init {path} ({what}) does not fit this run's ResNet-18 (the preset's width and stem "
                         f"must be the start's: --set width=... --set stem=...; torchvision's layout needs width "
                         f"1.0 and the imagenet stem): missing {missing[:4]}, unexpected {extra[:4]}, "
                         f"shapes {shapes[:3]}")
    with torch.no_grad():
        for k, v in body.items():
            ours[k].copy_(v.to(ours[k].dtype))
    classes = tuple(mapped["fc.weight"].shape)[0] if "fc.weight" in mapped else None
    return [f"stage 1 starts from {what}: {len(body)} tensors copied; the classifier ({classes or 'none'} classes "
            f"in the file{', ' + str(len(head)) + ' tensors' if head else ''}) is re-sized to "
            f"{ours['fc.weight'].shape[0]} and starts fresh"]
