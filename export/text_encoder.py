"""Export the text encoder once: reference MiniLM -> ONNX -> 8-bit weight-only quantization.

Weight-only means: large weight matrices are stored as int8 with a float scale per output channel
and dequantized in the graph; activations stay float. (Dynamic int8 quantization of activations
drops the cosine to the reference to ~0.86; weight-only keeps it at ~0.999.)

>>> folder = cached_text_encoder()     # builds on first use, then reuses   # doctest: +SKIP
>>> sdk.TextEncoder.from_dir(folder)                                          # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper

from sdk.media.cache import atomic_directory, cache_root
from sdk.text.encoder import MODEL_FILE, TOKENIZER_FILE

from .minilm import load_reference_encoder, reference_model_dir

NOTICE_FILE = "NOTICE"
EXPORT_VERSION = 2  # bump when the exported graph changes, so caches are rebuilt
MIN_QUANT_ELEMENTS = 4096  # small tensors (biases, norms) stay float


def export_onnx(model: torch.nn.Module) -> onnx.ModelProto:
    """Float ONNX graph with dynamic batch and sequence length."""
    ids = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]])
    mask = (ids != 0).long()
    buffer = io.BytesIO()
    torch.onnx.export(
        model, (ids, mask), buffer, dynamo=False, opset_version=17,
        input_names=["input_ids", "attention_mask"], output_names=["embedding"],
        dynamic_axes={"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"},
                      "embedding": {0: "batch"}},
    )
    return onnx.load_from_string(buffer.getvalue())


def quantize_weights_int8(model: onnx.ModelProto, min_elements: int = MIN_QUANT_ELEMENTS) -> onnx.ModelProto:
    """Store large 2-D float weights as symmetric int8 with one float scale per channel.

    - MatMul weights [in, out]: scale per output column, DequantizeLinear in front of the MatMul
      (the runtime constant-folds it at load time: fast queries).
    - Gather tables [rows, dim] (the 30k-token embedding, half the model): scale per row; the int8
      rows are gathered first and scaled after, so the table stays int8 in memory too.
    """
    graph = model.graph
    consumers: dict[str, list[tuple[str, int]]] = {}
    for node in graph.node:
        for i, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node.op_type, i))
    kept, new_nodes, gathers = [], [], {}
    for init in graph.initializer:
        uses = consumers.get(init.name, [])
        w = numpy_helper.to_array(init)
        kind = _quantizable_use(uses)
        if kind is None or w.dtype != np.float32 or w.ndim != 2 or w.size < min_elements:
            kept.append(init)
            continue
        axis = 1 if kind == "MatMul" else 0
        scale = np.abs(w).max(axis=1 - axis) / 127.0
        scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
        q = np.clip(np.rint(w / np.expand_dims(scale, 1 - axis)), -127, 127).astype(np.int8)
        q_name, s_name = init.name + "_int8", init.name + "_scale"
        kept.append(numpy_helper.from_array(q, q_name))
        if kind == "MatMul":
            kept += [numpy_helper.from_array(scale, s_name),
                     numpy_helper.from_array(np.zeros_like(scale, dtype=np.int8), init.name + "_zero")]
            new_nodes.append(helper.make_node(
                "DequantizeLinear", [q_name, s_name, init.name + "_zero"], [init.name], axis=1))
        else:
            kept.append(numpy_helper.from_array(scale[:, None], s_name))
            gathers[init.name] = (q_name, s_name)
    nodes = []
    for node in graph.node:
        if node.op_type == "Gather" and node.input[0] in gathers:
            q_name, s_name = gathers[node.input[0]]
            out = node.output[0]
            nodes += [
                helper.make_node("Gather", [q_name, node.input[1]], [out + "_int8"], axis=0),
                helper.make_node("Gather", [s_name, node.input[1]], [out + "_scale"], axis=0),
                helper.make_node("Cast", [out + "_int8"], [out + "_float"], to=onnx.TensorProto.FLOAT),
                helper.make_node("Mul", [out + "_float", out + "_scale"], [out]),
            ]
        else:
            nodes.append(node)
    del graph.initializer[:]
    graph.initializer.extend(kept)
    del graph.node[:]
    graph.node.extend(new_nodes + nodes)
    onnx.checker.check_model(model)
    return model


def _quantizable_use(uses: list[tuple[str, int]]) -> str | None:
    if uses and all(u == ("MatMul", 1) for u in uses):
        return "MatMul"
    if uses and all(u == ("Gather", 0) for u in uses):
        return "Gather"
    return None


def tokenizer_json_for_runtime(model_dir: Path) -> str:
    """The package's tokenizer.json with fixed 128-token padding replaced by pad-to-longest."""
    spec = json.loads((model_dir / "tokenizer.json").read_text())
    spec["padding"] = {"strategy": "BatchLongest", "direction": "Right", "pad_to_multiple_of": None,
                       "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"}
    spec["truncation"] = {"direction": "Right", "max_length": 128, "strategy": "LongestFirst", "stride": 0}
    return json.dumps(spec, ensure_ascii=False)


def build_text_encoder(out_dir: Path) -> Path:
    """Write encoder.onnx, tokenizer.json, NOTICE and manifest.json into `out_dir` (atomically)."""
    start = time.perf_counter()
    model_dir = reference_model_dir()
    model = quantize_weights_int8(export_onnx(load_reference_encoder(model_dir)))
    with atomic_directory(out_dir) as tmp:
        onnx_bytes = model.SerializeToString()
        (tmp / MODEL_FILE).write_bytes(onnx_bytes)
        (tmp / TOKENIZER_FILE).write_text(tokenizer_json_for_runtime(model_dir))
        notice = (Path(__file__).parent / "licenses" / "all-MiniLM-L6-v2.NOTICE").read_text()
        (tmp / NOTICE_FILE).write_text(notice)
        manifest = {"model": "all-MiniLM-L6-v2", "quantization": "int8 weight-only, per channel",
                    "export_version": EXPORT_VERSION, "sha256": hashlib.sha256(onnx_bytes).hexdigest(),
                    "bytes": len(onnx_bytes), "export_seconds": round(time.perf_counter() - start, 1)}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return out_dir


def cached_text_encoder(cache_dir: Path | None = None) -> Path:
    """Folder with the exported encoder, built on first use (about a minute) and reused after."""
    folder = (cache_dir or cache_root()) / f"text-encoder-v{EXPORT_VERSION}"
    if not (folder / "manifest.json").is_file():
        print(f"[text encoder] exporting all-MiniLM-L6-v2 to {folder} (once)", flush=True)
        build_text_encoder(folder)
    return folder
