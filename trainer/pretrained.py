"""Stage 1 from a pretrained ResNet-18 (`--init FILE`, issue 60): a state dict in torchvision's layout, the
file a user downloads on a connected machine (`torchvision.models.resnet18(weights=...).state_dict()`,
saved with `torch.save` or as .safetensors). Nothing is downloaded here.

torchvision's keys are this trainer's with the stem's two tensors named without `stem.` (`conv1.weight`,
`bn1.*`); every other key is the same. The classifier (`fc.*`) is re-sized to the data's classes: it
starts fresh. Any other missing, extra or differently shaped tensor is a ValueError naming it (a width
other than 1.0 or the `small` stem cannot take torchvision's weights).

>>> torchvision_key("bn1.running_mean"), torchvision_key("layer1.0.conv1.weight")
('stem.bn1.running_mean', 'layer1.0.conv1.weight')
"""

from __future__ import annotations

from pathlib import Path

import torch

from .models import ResNet18

STEM_KEYS = ("conv1.", "bn1.")
HEAD_KEYS = ("fc.weight", "fc.bias")


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


def load_pretrained(model: ResNet18, path: str | Path) -> list[str]:
    """Copy the file's tensors into `model` key by key (the classifier is kept fresh); the notes to print."""
    state = read_state(path)
    ours = model.state_dict()
    mapped = {torchvision_key(k.removeprefix("module.")): v for k, v in state.items()}
    head = [k for k in HEAD_KEYS if k in mapped]
    body = {k: v for k, v in mapped.items() if k not in HEAD_KEYS}
    missing = sorted(k for k in ours if k not in body and k not in HEAD_KEYS and not k.endswith("num_batches_tracked"))
    extra = sorted(k for k in body if k not in ours)
    shapes = [f"{k}: file {tuple(v.shape)}, model {tuple(ours[k].shape)}" for k, v in body.items()
              if k in ours and v.shape != ours[k].shape]
    if missing or extra or shapes:
        raise ValueError(f"--init {path} does not fit this ResNet-18 (torchvision's layout needs width 1.0 and the "
                         f"imagenet stem): missing {missing[:4]}, unexpected {extra[:4]}, shapes {shapes[:3]}")
    with torch.no_grad():
        for k, v in body.items():
            ours[k].copy_(v.to(ours[k].dtype))
    classes = tuple(mapped["fc.weight"].shape)[0] if "fc.weight" in mapped else None
    return [f"stage 1 starts from {path}: {len(body)} tensors copied; the classifier ({classes or 'none'} classes "
            f"in the file{', ' + str(len(head)) + ' tensors' if head else ''}) is re-sized to "
            f"{ours['fc.weight'].shape[0]} and starts fresh"]
