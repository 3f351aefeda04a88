"""Export a personalized model for a phone or another engine: ONNX, ExecuTorch (.pte, XNNPACK) or
Core ML (.mlpackage). Each file carries the class names and how to feed it (`metadata`):
- ONNX: written by the runtime alone (no torch): the bundle's backbone graph with the folded weights
  inline and the task's head appended; `metadata_props` "classes", "class_ids", "preprocessing",
  "head", "precision" (JSON strings except "head", "producer" and "precision"). Input "image" float32
  [N, 3, S, S]; output "logits" [N, K] (a model of one class: [N, 2], it and "anything else", `sdk.engines.rest`).
  An int8 model (`precision="int8"`) is written as the QDQ graph it runs (`sdk.engines.int8`).
- An int8 model in ExecuTorch is XNNPACK's int8 kernels with its own int8 weights and activation scales
  (export/int8_program.py; the sidecar's "precision" is "int8"); in Core ML, Core ML's int8 weights of its
  int8 weights, float16 compute (metadata "precision": "int8 weights, float16 compute").
- ExecuTorch: a sidecar `<file>.json` with the same fields (a .pte has no free-form metadata);
  batches of 1 to `MAX_PTE_BATCH` images. Needs the `export` extra (torch, executorch).
- Core ML: a classifier (class labels built in) taking an RGB image, with the same fields in
  `user_defined_metadata`; FP16 weights and compute. Needs the `export` extra (coremltools); its
  prediction needs macOS, so here the conversion runs and its spec is checked.
Every file is written in a staging folder and renamed into place when complete; an existing folder is
never replaced.

>>> model.export("insects.onnx")            # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from sdk.engines.onnxruntime import FEATURES, HEAD_BIAS, HEAD_WEIGHT, LOGITS
from sdk.errors import SdkError
from sdk.format.onnx_proto import (
    append_linear_head,
    append_rest_score,
    inline_external_data,
    inputs_to_initializers,
    with_metadata,
)
from sdk.fusion.folding import BACKBONE_FILE
from sdk.media.files import refuse_to_replace_folder, staging_directory, user_path

FORMATS = (".onnx", ".pte", ".mlpackage")
# A .pte's memory plan is made for the largest batch it accepts, so this bounds the memory an app's
# ExecuTorch runtime reserves; larger batches are fed in pieces.
MAX_PTE_BATCH = 8
PLAIN_FIELDS = ("head", "producer", "precision")  # metadata values that are plain strings; the others are JSON


def metadata(model, image_input: bool = False) -> dict[str, str]:
    """The class names and the preprocessing recipe, as string fields (`image_input`: Core ML's)."""
    return {"classes": json.dumps(model.classes), "class_ids": json.dumps(model.class_ids),
            "preprocessing": json.dumps(model.preprocessing.app_recipe(image_input)), "head": model.head,
            "producer": "taper-sdk", "precision": model.precision}


def metadata_json(model) -> dict:
    """`metadata` with the JSON fields decoded (the .pte sidecar)."""
    return {k: v if k in PLAIN_FIELDS else json.loads(v) for k, v in metadata(model).items()}


def export_model(model, path: str | os.PathLike) -> Path:
    """Write `model` to `path`; the format follows the suffix (.onnx, .pte, .mlpackage). Atomic: on
    failure nothing is left, the folders it made included."""
    path = user_path(path, "export's path")
    if path.suffix not in FORMATS:
        raise SdkError(f"cannot export to {path.name!r}: use one of {FORMATS}")
    if model.source is None:
        raise SdkError("this model was not made by sdk.personalize (no bundle to export from)")
    writer = _onnx if path.suffix == ".onnx" else _torch_writer(path.suffix)
    # Never delete what the user owns: an existing folder is refused, for .mlpackage (a folder format)
    # any existing path. Files are written in a staging folder beside the target (removed on errors and
    # SIGTERM/SIGHUP) and renamed into place only when complete.
    finals = [path, path.with_name(path.name + ".json")] if path.suffix == ".pte" else [path]
    for final in finals:
        refuse_to_replace_folder(final)
    if path.suffix == ".mlpackage" and os.path.lexists(path):   # a symlink too, even a dangling one
        raise SdkError(f"{path} exists: not replacing it (remove it or choose another name)")
    with staging_directory(path) as tmp:
        for item in writer(model, tmp / path.name):
            final = path.parent / item.name
            refuse_to_replace_folder(final)
            try:
                os.replace(item, final)
            except OSError as e:   # e.g. a folder format onto something that appeared meanwhile
                raise SdkError(f"cannot write {final}: {e.strerror}") from None
    return path


def onnx_model(model) -> bytes:
    """The model as one self-contained ONNX file: the bundle's backbone graph, the weights of
    `model.alpha` fused and folded (the reference fusion), the task's head rows as initializers."""
    if model.precision == "int8":   # the QDQ graph it runs (sdk.engines.int8), its head rows made initializers
        head = {HEAD_WEIGHT: model.head_weight, HEAD_BIAS: model.head_bias}
        graph = inputs_to_initializers(model.int8_graph, {n: (a.shape, np.ascontiguousarray(a, "<f4").tobytes())
                                                          for n, a in head.items()})
        return with_metadata(_one_class(graph, model), metadata(model))
    bundle = model.source
    folded, _ = bundle.folded_weights(bundle.fused_weights(model.alpha))
    graph = append_linear_head(bundle.engine.backbone_graph, FEATURES, model.head_weight.shape[1], HEAD_WEIGHT,
                               HEAD_BIAS, LOGITS, unit_features=model.head == "cosine")
    head = {HEAD_WEIGHT: model.head_weight, HEAD_BIAS: model.head_bias}
    graph = inputs_to_initializers(graph, {n: (a.shape, np.ascontiguousarray(a, "<f4").tobytes())
                                           for n, a in head.items()})
    graph = inline_external_data(graph, BACKBONE_FILE, folded.view(np.uint8))
    return with_metadata(_one_class(graph, model), metadata(model))


def _one_class(graph: bytes, model) -> bytes:
    """A model of one class ends in its two scores, X's and the rest's (`sdk.engines.rest`)."""
    return append_rest_score(graph, LOGITS) if model.rest else graph


def _onnx(model, out: Path) -> list[Path]:
    out.write_bytes(onnx_model(model))
    return [out]


# Writers that need torch live in the `export` package, which registers them under this entry-point group
# (pyproject.toml), named by the suffix without its dot: the runtime never imports the exporter.
WRITER_ENTRY_POINTS = "taper_sdk.model_writers"


def _torch_writer(suffix: str):
    from importlib.metadata import entry_points

    needs = f"exporting {suffix} needs the export extra (pip install 'taper-sdk[export]')"
    found = [ep for ep in entry_points(group=WRITER_ENTRY_POINTS) if ep.name == suffix.removeprefix(".")]
    if not found:
        raise SdkError(f"{needs}: no writer is registered for it")
    try:
        return found[0].load()
    except ImportError as e:
        raise SdkError(f"{needs}: {e}") from None
