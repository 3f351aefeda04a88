"""The child side of `sdk.engines.companion_check`: run an ExecuTorch program once, in a process of its own.

Reads from stdin: a 4-byte little-endian header length, a JSON header {"shape": [N, 3, S, S]}, the
float32 images, then the program; writes the float32 features [N, C] to stdout. Anything ExecuTorch
does to this process (a signal, a hang, an error) is what the parent reports; nothing else runs here.
"""

from __future__ import annotations

import json
import math
import sys

import numpy as np


def main() -> int:
    data = sys.stdin.buffer.read()
    length = int.from_bytes(data[:4], "little")
    shape = json.loads(data[4:4 + length])["shape"]
    start = 4 + length
    stop = start + 4 * math.prod(shape)
    images = np.frombuffer(data[start:stop], np.float32).reshape(shape)
    program = data[stop:]
    import torch

    # The native module itself: `portable_lib` would first import executorch.exir (~10 s of imports here).
    from executorch.extension.pybindings._C import _load_for_executorch_from_buffer

    module = _load_for_executorch_from_buffer(program)
    features = module.forward([torch.from_numpy(images.copy())])[0].numpy()
    sys.stdout.buffer.write(np.ascontiguousarray(features, np.float32).tobytes())
    return 0


if __name__ == "__main__":
    sys.exit(main())
