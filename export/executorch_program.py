"""The ExecuTorch companion of a bundle (`sdk.xnnpack_program`): the folded backbone lowered to XNNPACK
with its weights in a separate data file, and each weight's slot in it.

Slots are found, not assumed: the backbone is exported with every weight element set to its own index
(1, 2, ...: exact in float32 up to 2^24, and a full-width ResNet-18 has 11.2 M), so each tensor in
the data file says which elements it holds and in which order. Each must be one whole parameter in the
bundle's order or channels-last; every parameter must appear once (XNNPACK names tensors by the
SHA-256 of their bytes, so equal weights would share a slot: distinct indices rule that out).

    python -m export executorch tiny-imagenet.taper          # -> tiny-imagenet.taper.xnnpack
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

import sdk
from sdk.exports import MAX_PTE_BATCH
from sdk.files import atomic_file
from sdk.xnnpack_program import CHANNELS_LAST, PTD_HEADER, PTD_HEADER_AT, companion_bytes, default_path

from .backbone import FoldedBackbone

WEIGHTS_FILE = "weights"  # the data file's name in the program (the runtime gives it as a buffer)
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


def lower_to_xnnpack(net: torch.nn.Module, input_size: int, weights_file: str | None = None
                     ) -> tuple[bytes, dict[str, bytes]]:
    """`net` (one image input) lowered to XNNPACK for batches of 1 to MAX_PTE_BATCH: the program and its
    external data files ({} unless `weights_file` names the one its weights are moved to)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.passes.external_constants_pass import delegate_external_constants_pass_unlifted

    example = (torch.zeros(2, 3, input_size, input_size),)  # a batch of 1 would be specialised as a constant
    dynamic = ({0: torch.export.Dim("batch", min=1, max=MAX_PTE_BATCH)},)  # the memory plan is for the largest
    program = torch.export.export(net, example, dynamic_shapes=dynamic)
    if weights_file is not None:
        tagged = program.module()
        delegate_external_constants_pass_unlifted(module=tagged, gen_tag_fn=lambda _node: weights_file)
        program = torch.export.export(tagged, example, dynamic_shapes=dynamic)
    lowered = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()]).to_executorch()
    return bytes(lowered.buffer), {name: bytes(data) for name, data in lowered._tensor_data.items()}


def find_slots(weights: bytes, index: dict[str, tuple[int, tuple[int, ...]]]) -> dict[str, dict]:
    """Each parameter's {offset, axes} in the data file of an indexed backbone (see the module doc)."""
    from executorch.extension.flat_tensor.serialize.serialize import _deserialize_to_flat_tensor

    _, _, _, _, base, _ = PTD_HEADER.unpack_from(weights, PTD_HEADER_AT)
    starts = sorted((first, name) for name, (first, _) in index.items())
    slots = {}
    flat = _deserialize_to_flat_tensor(weights)
    for entry in flat.named_data:
        segment = flat.segments[entry.segment_index]
        offset = base + segment.offset
        values = np.frombuffer(weights, np.float32, segment.size // 4, offset)
        first = int(values.min())
        name = starts[np.searchsorted([s for s, _ in starts], first, side="right") - 1][1]
        start, shape = index[name]
        order = np.arange(start, start + math.prod(shape), dtype=np.float32).reshape(shape)
        layouts = [tuple(range(len(shape)))] + ([CHANNELS_LAST] if len(shape) == 4 else [])
        axes = next((a for a in layouts if np.array_equal(values, order.transpose(a).ravel())), None)
        if axes is None or name in slots:
            raise RuntimeError(f"data-file tensor {entry.key[:12]} is not {name} in a known layout (or twice)")
        slots[name] = {"offset": offset, "axes": list(axes)}
    if set(slots) != set(index):
        raise RuntimeError(f"parameters without a slot: {sorted(set(index) - set(slots))[:5]}")
    return slots


def export_companion(bundle_path: str | Path, out: str | Path | None = None) -> Path:
    """Write the ExecuTorch companion of the bundle at `bundle_path` (default `<bundle>.xnnpack`)."""
    arch = sdk.load(bundle_path).bundle.manifest.architecture
    net, index = indexed_backbone(arch.stem, arch.width)
    program, files = lower_to_xnnpack(net, arch.input_size, WEIGHTS_FILE)
    if set(files) != {WEIGHTS_FILE}:
        raise RuntimeError(f"expected one external data file, got {sorted(files)}")
    weights = files[WEIGHTS_FILE]
    header = {"architecture": {"stem": arch.stem, "width": arch.width, "input_size": arch.input_size},
              "max_batch": MAX_PTE_BATCH, "slots": find_slots(weights, index)}
    out = Path(out) if out is not None else default_path(bundle_path)
    with atomic_file(out) as f:
        f.write(companion_bytes(header, program, weights))
    return out
