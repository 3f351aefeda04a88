import pytest
import torch

from trainer.models import (
    NUM_BLOCKS,
    ResNet18,
    ResNetConfig,
    functional_forward,
    is_mixed,
    mixer_block_of,
    names_by_block,
)


@pytest.mark.parametrize("stem,size,expected_spatial", [("imagenet", 64, 2), ("small", 32, 4), ("imagenet", 224, 7)])
def test_stems_and_shapes(stem, size, expected_spatial):
    model = ResNet18(ResNetConfig(stem=stem, width=0.25, num_classes=7, input_size=size)).eval()
    x = torch.randn(2, 3, size, size)
    with torch.no_grad():
        assert model(x).shape == (2, 7)
        trunk = model.layer4(model.layer3(model.layer2(model.layer1(model.stem(x)))))
    assert trunk.shape[-1] == expected_spatial


def test_full_width_matches_the_standard_resnet18_size():
    # 11,689,512 is torchvision's resnet18 (1000 classes): same layout, same parameter count.
    model = ResNet18(ResNetConfig(width=1.0, num_classes=1000))
    assert sum(p.numel() for p in model.parameters()) == 11_689_512
    half = ResNet18(ResNetConfig(width=0.5, num_classes=1000))
    assert [m.out_channels for m in half.modules() if isinstance(m, torch.nn.Conv2d)][-1] == 256


def test_every_width_the_sdk_reads_builds_the_sdk_topology():
    """The trainer's widths are the bundle format's (sdk.format.manifest.WIDTHS), down to 0.125 (8 stem channels)."""
    from sdk.format.manifest import WIDTHS
    from sdk.fusion.architecture import topology

    assert 0.125 in WIDTHS
    for width in WIDTHS:
        model = ResNet18(ResNetConfig(width=width, num_classes=5, input_size=64))
        convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
        assert [(c.in_channels, c.out_channels) for c in convs] == [
            (c.in_channels, c.out_channels) for c in topology("imagenet", width).convs]
    assert topology("imagenet", 0.125).stem.out_channels == 8


def test_invalid_configs_are_rejected():
    for bad in (dict(stem="huge"), dict(width=0.3), dict(num_classes=0)):
        with pytest.raises(ValueError):
            ResNetConfig(**bad)


@pytest.mark.parametrize("train", [False, True])
def test_functional_forward_equals_module_forward(train):
    torch.manual_seed(0)
    model = ResNet18(ResNetConfig(width=0.25, num_classes=10, input_size=32, stem="small"))
    for m in model.modules():  # non-trivial batch-norm statistics
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.normal_()
            m.running_var.uniform_(0.5, 2)
            m.weight.data.normal_()
    model.train(train)
    x = torch.randn(4, 3, 32, 32)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    assert torch.equal(functional_forward(model, weights, x), model(x))


def test_functional_forward_uses_the_given_weights_and_carries_gradients():
    model = ResNet18(ResNetConfig(width=0.25, num_classes=5, input_size=32, stem="small")).eval()
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    weights["fc.bias"] = torch.tensor([0.0, 0.0, 100.0, 0.0, 0.0], requires_grad=True)
    out = functional_forward(model, weights, torch.randn(3, 3, 32, 32))
    assert (out.argmax(1) == 2).all()
    out.sum().backward()
    assert weights["fc.bias"].grad is not None
    del weights["fc.weight"]
    with pytest.raises(RuntimeError):
        functional_forward(model, weights, torch.randn(1, 3, 32, 32))


def test_every_weight_has_exactly_one_mixer_block():
    model = ResNet18(ResNetConfig(width=0.25, num_classes=10))
    names = list(model.state_dict())
    groups = names_by_block(names)
    assert len(groups) == NUM_BLOCKS
    assert sorted(sum(groups, [])) == sorted(n for n in names if is_mixed(n))
    assert mixer_block_of("stem.conv1.weight") == 0 and mixer_block_of("stem.bn1.running_var") == 0
    assert mixer_block_of("layer1.0.conv1.weight") == 0
    assert mixer_block_of("layer2.0.downsample.1.running_mean") == 1
    assert mixer_block_of("layer3.1.bn2.bias") == 2
    assert mixer_block_of("layer4.1.conv2.weight") == 3 and mixer_block_of("fc.weight") == 3
    assert not is_mixed("layer1.0.bn1.num_batches_tracked")
    with pytest.raises(ValueError):
        mixer_block_of("head.weight")
