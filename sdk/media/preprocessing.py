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
RESIZE_FILTER = "bilinear"  # sdk.media.resample: Pillow's classic bilinear, one pass over the centre box
PIXEL_SCALE = 1 / 255


@dataclass(frozen=True)
class Preprocessing:
    input_size: int
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    resize: str = RESIZE

    def to_dict(self) -> dict:
        return asdict(self)

    def app_recipe(self, image_input: bool = False) -> dict:
        """Everything an app must do to feed an exported model (each export's metadata carries it).
        `image_input`: the model takes an image and scales and normalises it itself (Core ML)."""
        recipe = {**self.to_dict(), "resize_filter": RESIZE_FILTER, "channel_order": "RGB"}
        if image_input:
            return {**recipe, "input": "image: RGB, 8 bits per channel, input_size square; the model scales "
                                       "by 1/255 and normalises with mean and std itself"}
        return {**recipe, "input": "float32 tensor [N, 3, input_size, input_size]", "layout": "NCHW",
                "scale": PIXEL_SCALE, "formula": "(pixel * scale - mean[c]) / std[c], pixel in 0..255"}

    def normalize(self, images: np.ndarray) -> np.ndarray:
        """uint8 [N, H, W, 3] (already input_size) -> float32 [N, 3, H, W]."""
        x = images.astype(np.float32) * np.float32(PIXEL_SCALE)
        x = (x - np.asarray(self.mean, np.float32)) / np.asarray(self.std, np.float32)
        return np.ascontiguousarray(x.transpose(0, 3, 1, 2))

    def apply(self, images: np.ndarray) -> np.ndarray:
        """uint8 [H, W, 3] or [N, H, W, 3] at input_size -> float32 [N, 3, S, S]."""
        if images.ndim == 3:
            images = images[None]
        return self.normalize(images)
