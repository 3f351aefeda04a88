"""Image preprocessing shared by training and the runtime (the runtime must repeat it exactly).

Training images are already `input_size` square (Tiny ImageNet: 64x64); a photo of another size is
resized so its shorter side is `input_size`, then center-cropped. Pixels: RGB, /255, then
(x - mean) / std per channel, NCHW float32.

>>> spec = Preprocessing(input_size=64)
>>> spec.apply(np.zeros((64, 64, 3), np.uint8)).shape
(1, 3, 64, 64)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
RESIZE = "shorter_side_then_center_crop"


@dataclass(frozen=True)
class Preprocessing:
    input_size: int
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    resize: str = RESIZE

    def to_dict(self) -> dict:
        return asdict(self)

    def normalize(self, images: np.ndarray) -> np.ndarray:
        """uint8 [N, H, W, 3] (already input_size) -> float32 [N, 3, H, W]."""
        x = images.astype(np.float32) * np.float32(1 / 255)
        x = (x - np.asarray(self.mean, np.float32)) / np.asarray(self.std, np.float32)
        return np.ascontiguousarray(x.transpose(0, 3, 1, 2))

    def apply(self, images: np.ndarray) -> np.ndarray:
        """uint8 [H, W, 3] or [N, H, W, 3] at input_size -> float32 [N, 3, S, S]."""
        if images.ndim == 3:
            images = images[None]
        return self.normalize(images)
