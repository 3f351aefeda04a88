import numpy as np
import pytest
import torch

from sdk.media.preprocessing import Preprocessing
from trainer.config import TrainConfig
from trainer.data.transforms import random_crop_flip, random_resized_crop_flip, to_normalized_tensor


def test_training_normalisation_equals_the_runtime_preprocessing():
    images = np.random.default_rng(0).integers(0, 256, (5, 16, 16, 3), dtype=np.uint8)
    spec = Preprocessing(input_size=16)
    got = to_normalized_tensor(torch.from_numpy(images), spec).numpy()
    assert np.abs(got - spec.apply(images)).max() < 1e-6


def test_random_crop_flip_is_a_shifted_possibly_mirrored_window():
    x = torch.arange(2 * 3 * 8 * 8, dtype=torch.float32).view(2, 3, 8, 8) + 1
    out = random_crop_flip(x, pad=2, generator=torch.Generator().manual_seed(0))
    assert out.shape == x.shape
    padded = torch.nn.functional.pad(x, (2, 2, 2, 2))
    for i in range(2):
        windows = [padded[i, :, dy:dy + 8, dx:dx + 8] for dy in range(5) for dx in range(5)]
        assert any(torch.equal(out[i], w) or torch.equal(out[i], w.flip(-1)) for w in windows)
    same = random_crop_flip(x, pad=2, generator=torch.Generator().manual_seed(0))
    assert torch.equal(out, same)
    no_pad = random_crop_flip(x, pad=0, generator=torch.Generator().manual_seed(1))
    assert all(torch.equal(no_pad[i], x[i]) or torch.equal(no_pad[i], x[i].flip(-1)) for i in range(2))


def test_random_resized_crop_is_an_inside_box_of_the_drawn_area_possibly_mirrored():
    # Channel 0 is the column index, channel 1 the row index: a crop resized back to 64 x 64 is a linear
    # ramp in each, whose slope is the box's width (height) share and whose sign says "mirrored". Within
    # half a pixel of the image's edge the border value is sampled, so linearity is checked inside it.
    n, size, min_scale, inner = 400, 64, 0.08, slice(4, -4)
    cols = torch.arange(size, dtype=torch.float32)
    x = torch.stack([cols.expand(size, size), cols[:, None].expand(size, size), torch.zeros(size, size)])
    batch = x.expand(n, 3, size, size).contiguous()
    out = random_resized_crop_flip(batch, min_scale, torch.Generator().manual_seed(0))
    assert out.shape == (n, 3, size, size)
    assert torch.equal(out, random_resized_crop_flip(batch, min_scale, torch.Generator().manual_seed(0)))
    ramp_x, ramp_y = out[:, 0, size // 2, inner], out[:, 1, inner, size // 2]
    dx, dy = ramp_x.diff(dim=1), ramp_y.diff(dim=1)
    assert torch.allclose(dx, dx[:, :1].expand_as(dx), atol=1e-4)
    assert torch.allclose(dy, dy[:, :1].expand_as(dy), atol=1e-4)
    slope_x, slope_y = dx[:, 0], dy[:, 0]
    assert (slope_y > 0).all()                               # never upside down
    assert 0.35 < (slope_x < 0).float().mean() < 0.65        # about half mirrored
    area = slope_x.abs() * slope_y
    assert area.max() <= 1 + 1e-4 and area.min() >= 0.75 * min_scale - 1e-4   # ratio in [3/4, 4/3]
    assert (area < 0.3).any() and (area > 0.9).any()          # the whole range of areas is drawn
    # The box's edges (output pixel -0.5 and size - 0.5, extrapolated along the ramp) lie in the image.
    for ramp, slope in ((ramp_x, slope_x), (ramp_y, slope_y)):
        at_start = ramp[:, 0] - slope * (inner.start + 0.5)
        at_end = ramp[:, 0] + slope * (size - 0.5 - inner.start)
        edges = torch.stack([at_start, at_end])
        assert edges.min() >= -0.5 - 1e-3 and edges.max() <= size - 0.5 + 1e-3


@pytest.mark.parametrize("scale", [-0.1, 1.5])
def test_config_rejects_a_crop_scale_outside_0_1(scale):
    with pytest.raises(ValueError, match="aug_crop_scale"):
        TrainConfig(aug_crop_scale=scale)
