"""Camera-sized photos and pretrained starts (issue 60, part 4): `--init FILE` maps a ResNet-18 state dict in
torchvision's layout into stage 1 key by key (saved here, nothing downloaded), and a tiny 224 px run with the
imagenet stem goes end to end: train, export, personalize, predict a photo of another size."""

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from trainer.models import ResNet18, ResNetConfig
from trainer.pretrained import load_pretrained


def torchvision_file(tmp_path: Path, width: float = 1.0, classes: int = 1000, suffix: str = ".pth") -> Path:
    """A state dict in torchvision's layout (its key names and a 1000-class head), from a seeded model."""
    torch.manual_seed(1)
    model = ResNet18(ResNetConfig(stem="imagenet", width=width, num_classes=classes))
    state = {k.removeprefix("stem."): v for k, v in model.state_dict().items()}
    path = tmp_path / f"resnet18{suffix}"
    if suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    else:
        torch.save(state, path)
    return path


@pytest.mark.parametrize("suffix", [".pth", ".safetensors"])
def test_a_torchvision_state_dict_is_mapped_key_by_key_and_the_head_resized(tmp_path, suffix):
    path = torchvision_file(tmp_path, suffix=suffix)
    source = torch.load(path, weights_only=True) if suffix == ".pth" else None
    torch.manual_seed(2)
    model = ResNet18(ResNetConfig(stem="imagenet", width=1.0, num_classes=7))
    fresh_head = model.state_dict()["fc.weight"].clone()
    (note,) = load_pretrained(model, path)
    state = model.state_dict()
    if source is not None:
        assert torch.equal(state["stem.conv1.weight"], source["conv1.weight"])
        assert torch.equal(state["layer3.0.downsample.1.running_var"], source["layer3.0.downsample.1.running_var"])
    assert torch.equal(state["fc.weight"], fresh_head) and state["fc.weight"].shape == (7, 512)
    assert "1000 classes in the file" in note and "re-sized to 7" in note


def test_a_state_dict_that_does_not_fit_is_a_clear_error(tmp_path):
    model = ResNet18(ResNetConfig(stem="imagenet", width=0.25, num_classes=7))
    with pytest.raises(ValueError, match=r"width 1.0.*shapes \['stem.conv1.weight: file \(64, 3, 7, 7\), model \(16"):
        load_pretrained(model, torchvision_file(tmp_path))
    torch.save({"conv1.weight": torch.zeros(1)}, tmp_path / "partial.pth")
    with pytest.raises(ValueError, match="missing"):
        load_pretrained(ResNet18(ResNetConfig(stem="imagenet", width=1.0, num_classes=7)), tmp_path / "partial.pth")
    with pytest.raises(ValueError, match="file not found"):
        load_pretrained(model, tmp_path / "none.pth")


class Payload:
    def __reduce__(self):
        return (exec, ("import pathlib; pathlib.Path('PWNED').write_text('x')",))


def test_a_pickle_that_runs_code_is_refused_not_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evil.pth").write_bytes(pickle.dumps({"conv1.weight": Payload()}))
    with pytest.raises(ValueError, match="not a readable state dict"):
        load_pretrained(ResNet18(ResNetConfig(stem="imagenet", width=1.0, num_classes=7)), tmp_path / "evil.pth")
    assert not (tmp_path / "PWNED").exists()


def test_a_tiny_224px_run_goes_end_to_end(tmp_path):
    """The imagenet stem at 224 px: trained (the small end of every stage), exported, personalized, and a
    300x200 photo predicted through the bundle's own preprocessing."""
    import sdk
    from export.bundle import bundle_run
    from trainer.run import run

    run_dir = tmp_path / "run224"
    run(run_dir, "tiny", {"stem": "imagenet", "input_size": 224, "stage1_epochs": 1, "stage2_epochs": 1,
                          "stage3_epochs": 1, "batch_size": 16, "tasks_per_batch": 2, "eval_seeds": (0,),
                          "synthetic": {"image_size": 224, "train_per_class": 3, "val_per_class": 1}},
        progress=False)
    bundle = sdk.load(bundle_run(run_dir, tmp_path / "b224.taper"))
    assert bundle.bundle.manifest.architecture.input_size == 224
    model = sdk.personalize(bundle, "rings")
    photo = Image.fromarray(np.random.default_rng(0).integers(0, 255, (200, 300, 3), dtype=np.uint8))
    label, probability = model.predict(photo)
    assert label in model.classes and 0 < probability <= 1


def test_the_cli_starts_stage1_from_init_and_refuses_a_missing_file(tmp_path, capsys):
    from trainer.__main__ import main

    path = torchvision_file(tmp_path)
    out = tmp_path / "run"
    base = ["run", "--preset", "tiny", "--out", str(out), "--set", "width=1.0", "--set", "stem=imagenet",
            "--set", "stage1_epochs=1", "--until", "stage1", "--set",
            'synthetic={"image_size": 32, "train_per_class": 3, "val_per_class": 1}']
    assert main([*base, "--init", str(tmp_path / "none.pth")]) == 2
    assert "--init" in capsys.readouterr().err and not (out / "config.json").exists()
    assert main([*base, "--init", str(path)]) == 0
    printed = capsys.readouterr().out
    assert f"stage 1 starts from {path}" in printed and "next: python -m trainer run --out" in printed
