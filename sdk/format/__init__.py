"""The .taper file: its one reader and writer, and the checks of every untrusted member. Imports `sdk.media` and
`sdk.fusion`.

- `bundle`: the format's reader and writer (docs/bundle-format.md);
- `manifest`: the manifest as typed, range-checked data;
- `tensorfile`: tensors in the safetensors layout;
- `strict_json`: the JSON grammar both readers parse;
- `signing`: Ed25519 signatures;
- `graph_check`: only the SDK's own graphs pass;
- `tokenizer_check`: only WordPiece tokenizers pass;
- `passed_checks`: the members that passed those two checks in this process, by their bytes' SHA-256;
- `onnx_proto`: the protobuf wire format, as far as the runtime edits graphs.
"""

__all__ = ["bundle", "manifest", "tensorfile", "strict_json", "signing", "graph_check", "tokenizer_check",
           "passed_checks", "onnx_proto"]
