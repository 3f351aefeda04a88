"""The ExecuTorch companion of a bundle (`sdk.engines.xnnpack_program`): the folded backbone lowered to XNNPACK,
its weights inside the program, and each weight's slot in the program's bytes.

Slots are found, not assumed: the backbone is exported with every weight element set to its own index
(1, 2, ...: exact in float32 up to 2^24, and a full-width ResNet-18 has 11.2 M), so each named
tensor in the program's segments says which elements it holds and in which order. Each must be one
whole parameter in the bundle's order or channels-last; every parameter must appear once (XNNPACK names tensors by the
SHA-256 of their bytes, so equal weights would share a slot: distinct indices rule that out).

    python -m export executorch tiny-imagenet.taper          # -> tiny-imagenet.taper.xnnpack
    python -m export executorch tiny-imagenet.taper --sign keys/release.key     # signed (version 3)
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

import sdk
from sdk.engines.xnnpack_program import (
    CHANNELS_LAST,
    PTE_HEADER,
    PTE_HEADER_AT,
    companion_bytes,
    companion_target,
    default_path,
)
from sdk.exports import MAX_PTE_BATCH
from sdk.format.signing import SigningKey
from sdk.media.files import atomic_file

from .backbone import FoldedBackbone

EXACT_FLOAT_INDICES = 1 << 24


def indexed_backbone(stem: str, width: float) -> tuple[FoldedBackbone, dict[str, tuple[int, tuple[int, ...]]]]:
    """The folded backbone with every weight element set to its index from 1, and each parameter's
    first index and shape."""
    net = FoldedBackbone(stem, width).eval()
    first, index = 1, {}
    with torch.no_grad():
        for name, p in net.named_parameters():
            p.copy_(torch.arange(first, first + p.numel(), dtype=torch.float32).view_as(p))
            index[name], first = (first, tuple(p.shape)), first + p.numel()
    if first > EXACT_FLOAT_INDICES:
        raise ValueError(f"{first - 1} weights: more than float32 indexes exactly")
    return net, index


# Ops that must run inside XNNPACK: a conv left to ExecuTorch's portable kernels is slow, and an int8
# program's quantize/dequantize left outside would mean float convs on dequantized weights.
DELEGATED = ("convolution", "quantize_per", "dequantize_per")


def lower_to_xnnpack(net: torch.nn.Module, input_size: int) -> bytes:
    """`net` (one image input) lowered to XNNPACK for batches of 1 to MAX_PTE_BATCH: the program, its
    weights inside it (in the segments after its flatbuffer). RuntimeError if a DELEGATED op stays outside."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    example = (torch.zeros(2, 3, input_size, input_size),)  # a batch of 1 would be specialised as a constant
    dynamic = ({0: torch.export.Dim("batch", min=1, max=MAX_PTE_BATCH)},)  # the memory plan is for the largest
    program = torch.export.export(net, example, dynamic_shapes=dynamic)
    edge = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])
    outside = sorted({str(n.target) for n in edge.exported_program().graph.nodes
                      if n.op == "call_function" and any(op in str(n.target) for op in DELEGATED)})
    if outside:
        raise RuntimeError(f"XNNPACK did not take {outside}: the program would run them outside the delegate")
    lowered = edge.to_executorch()
    if lowered._tensor_data:
        raise RuntimeError(f"expected the weights inside the program, got data files {sorted(lowered._tensor_data)}")
    return bytes(lowered.buffer)


def find_slots(program: bytes, index: dict[str, tuple[int, tuple[int, ...]]]) -> dict[str, dict]:
    """Each parameter's {offset, axes} in the program of an indexed backbone (see the module doc)."""
    from executorch.exir._serialize._flatbuffer_program import _flatbuffer_to_program

    _, _, flatbuffer_size, base, _ = PTE_HEADER.unpack_from(program, PTE_HEADER_AT)
    starts = sorted((first, name) for name, (first, _) in index.items())
    slots = {}
    parsed = _flatbuffer_to_program(program[:flatbuffer_size])
    for entry in parsed.named_data:
        segment = parsed.segments[entry.segment_index]
        offset = base + segment.offset
        values = np.frombuffer(program, np.float32, segment.size // 4, offset)
        first = int(values.min())
        name = starts[np.searchsorted([s for s, _ in starts], first, side="right") - 1][1]
        start, shape = index[name]
        order = np.arange(start, start + math.prod(shape), dtype=np.float32).reshape(shape)
        layouts = [tuple(range(len(shape)))] + ([CHANNELS_LAST] if len(shape) == 4 else [])
        axes = next((a for a in layouts if np.array_equal(values, order.transpose(a).ravel())), None)
        if axes is None or name in slots:
            raise RuntimeError(f"program tensor {entry.key[:12]} is not {name} in a known layout (or twice)")
        slots[name] = {"offset": offset, "axes": list(axes)}
    if set(slots) != set(index):
        raise RuntimeError(f"parameters without a slot: {sorted(set(index) - set(slots))[:5]}")
    return slots


def export_companion(bundle_path: str | Path, out: str | Path | None = None, key: SigningKey | None = None) -> Path:
    """Write the ExecuTorch companion of the bundle at `bundle_path` (default `<bundle>.xnnpack`), signed by
    `key` if given (companion version 3, `sdk.engines.xnnpack_program`)."""
    architecture, _ = companion_target(sdk.load(bundle_path).bundle)
    net, index = indexed_backbone(architecture["stem"], architecture["width"])
    program = lower_to_xnnpack(net, architecture["input_size"])
    header = {"architecture": architecture, "max_batch": MAX_PTE_BATCH, "slots": find_slots(program, index)}
    out = Path(out) if out is not None else default_path(bundle_path)
    with atomic_file(out) as f:
        f.write(companion_bytes(header, program, key))
    return out
