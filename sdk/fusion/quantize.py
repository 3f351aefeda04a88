"""The int8 weight quantizer: symmetric, 7-bit, one scale per output channel. One definition that the
on-device int8 route (sdk/engines/int8.py), the C kernel's quantizing fusion (sdk/fusion/native.py checks
itself against it) and the exporters share.

>>> q, scale = quantize_weight(np.array([[0.5, -1.0], [0.0, 0.0]], np.float32))
>>> q.tolist(), [round(float(s), 6) for s in scale]
([[32, -64], [0, 0]], [0.015748, 1.0])
"""

from __future__ import annotations

import numpy as np

WEIGHT_QMIN, WEIGHT_QMAX = -64, 63   # 7-bit weights


def quantize_weight(weight: np.ndarray, out: tuple[np.ndarray, np.ndarray] | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(int8 weight, float32 scale per output channel): symmetric, 7-bit; written into `out` if given."""
    flat = weight.reshape(len(weight), -1)
    scale = (np.maximum(flat.max(axis=1), -flat.min(axis=1)) * 2 / (WEIGHT_QMAX - WEIGHT_QMIN)).astype(np.float32)
    scale[scale == 0] = 1.0
    work = np.multiply(flat, (1 / scale)[:, None])   # times 1/scale (a mirror must do the same to match bit for bit)
    np.rint(work, out=work)
    np.clip(work, WEIGHT_QMIN, WEIGHT_QMAX, out=work)
    if out is None:
        return work.astype(np.int8).reshape(weight.shape), scale
    np.copyto(out[0].reshape(flat.shape), work, casting="unsafe")
    out[1][:] = scale
    return out
