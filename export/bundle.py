"""Pack a training run into one `.taper` bundle (format: `sdk/bundle.py`).

    python -m export bundle runs/bench --out tiny-imagenet.taper
    python -m export inspect tiny-imagenet.taper
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from sdk.bundle import ALIGN, HEADER, MAGIC, VERSION
from sdk.preprocessing import Preprocessing
from sdk.tensorfile import encode_header
from sdk.text_encoder import MAX_TOKENS, MODEL_FILE, PROMPTS, TOKENIZER_FILE

from .backbone import EXTERNAL_FILE, export_backbone
from .text_encoder import NOTICE_FILE, cached_text_encoder


def safetensors_bytes(tensors: dict[str, np.ndarray]) -> bytes:
    arrays = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()}
    return encode_header(arrays) + b"".join(a.tobytes() for a in arrays.values())


def run_contents(run_dir: Path, variant: str = "taper") -> tuple[dict, dict[str, bytes]]:
    """The manifest fields and member bytes of a finished run."""
    from trainer.checkpoints import load_state
    from trainer.config import TrainConfig
    from trainer.run import STAGE3_VARIANTS, make_context, stage3_dir

    config = TrainConfig.load(run_dir / "config.json")
    ctx = make_context(run_dir, config, progress=False)
    state = {k: v.numpy() for k, v in load_state(run_dir / stage3_dir(variant) / "model.safetensors").items()}
    _, blocks, uses_mixer, _ = STAGE3_VARIANTS[variant]
    if not uses_mixer:
        raise ValueError(f"variant {variant!r} has no mixer predictor; bundle 'taper' or an ablation with one")
    hierarchy = ctx.data.hierarchy
    classes = {"classes": [{"id": w, "name": n, "path": list(p)} for w, n, p in
                           zip(hierarchy.wnids, hierarchy.names, hierarchy.paths, strict=True)],
               "supercategories": {g: [hierarchy.index(w) for w in ws] for g, ws in hierarchy.supercategories.items()}}
    evaluation = json.loads((run_dir / "eval.json").read_text()) if (run_dir / "eval.json").exists() else {}
    architecture = {"stem": config.stem, "width": config.width, "num_classes": ctx.data.num_classes,
                    "input_size": config.input_size}
    provenance = {"run": run_dir.name, "variant": variant, "data": str(config.data),
                  "accuracy": evaluation.get("accuracy", {})}
    return assemble(
        architecture,
        bases=[np.concatenate([state[f"bank.params{b}"], state[f"bank.stats{b}"]], axis=1) for b in range(4)],
        mixer={k[len("mixer."):]: v for k, v in state.items()
               if k.startswith("mixer.") and not k.endswith("num_batches_tracked")},
        mixer_spec={"hidden": config.mixer_hidden, "layers": 4, "blocks": blocks},
        class_embeddings=load_state(run_dir / "classes.safetensors")["text"].numpy(),
        classes=classes, provenance=provenance)


def assemble(architecture: dict, bases: list[np.ndarray], mixer: dict[str, np.ndarray], mixer_spec: dict,
             class_embeddings: np.ndarray, classes: dict, provenance: dict) -> tuple[dict, dict[str, bytes]]:
    """Manifest fields and members from the parts (bases[b]: [Q, P_b] in `block_layout` order)."""
    graph, layout, external_size = export_backbone(architecture["stem"], architecture["width"],
                                                   architecture["input_size"])
    encoder = cached_text_encoder()
    members = {
        "bases.safetensors": safetensors_bytes({f"block{b}": block for b, block in enumerate(bases)}),
        "mixer.safetensors": safetensors_bytes(mixer),
        "class_embeddings.safetensors": safetensors_bytes({"text": class_embeddings}),
        "classes.json": json.dumps(classes, ensure_ascii=False).encode(),
        "backbone.onnx": graph,
        "text_encoder.onnx": (encoder / MODEL_FILE).read_bytes(),
        "tokenizer.json": (encoder / TOKENIZER_FILE).read_bytes(),
        "NOTICE": (encoder / NOTICE_FILE).read_bytes(),
    }
    fields = {
        "architecture": architecture,
        "preprocessing": Preprocessing(architecture["input_size"]).to_dict(),
        "num_bases": int(bases[0].shape[0]),
        "mixer": {"embed_dim": int(class_embeddings.shape[1]), **mixer_spec},
        "backbone": {"graph": "backbone.onnx", "external_file": EXTERNAL_FILE, "external_size": external_size,
                     "layout": layout, "input": "image", "output": "features"},
        "text_encoder": {"graph": "text_encoder.onnx", "tokenizer": "tokenizer.json", "notice": "NOTICE",
                         "prompts": list(PROMPTS), "max_tokens": MAX_TOKENS},
        "provenance": {**provenance, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
    }
    return fields, members


def write_bundle(out: Path, fields: dict, members: dict[str, bytes]) -> Path:
    """Write the bundle atomically (temp file in the same folder, then rename)."""
    entries = {name: {"offset": 0, "size": len(blob), "sha256": hashlib.sha256(blob).hexdigest()}
               for name, blob in members.items()}
    manifest_bytes = b""
    for _ in range(10):  # offsets depend on the manifest's length, which depends on the offsets
        offset = _align(HEADER.size + len(manifest_bytes))
        for name in members:
            entries[name]["offset"] = offset
            offset = _align(offset + entries[name]["size"])
        new = json.dumps({"format": "taper-bundle", "version": VERSION, "members": entries, **fields},
                         separators=(",", ":")).encode()
        if new == manifest_bytes:
            break
        manifest_bytes = new
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(HEADER.pack(MAGIC, VERSION, 0, len(manifest_bytes)) + manifest_bytes)
            for name, blob in members.items():
                f.write(b"\0" * (entries[name]["offset"] - f.tell()))
                f.write(blob)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out


def bundle_run(run_dir: Path, out: Path, variant: str = "taper") -> Path:
    fields, members = run_contents(Path(run_dir), variant)
    return write_bundle(out, fields, members)


def _align(n: int) -> int:
    return n + (-n % ALIGN)


__all__ = ["assemble", "bundle_run", "run_contents", "write_bundle"]
