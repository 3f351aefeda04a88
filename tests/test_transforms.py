import numpy as np
import torch

from sdk.preprocessing import Preprocessing
from trainer.data.transforms import random_crop_flip, to_normalized_tensor


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
