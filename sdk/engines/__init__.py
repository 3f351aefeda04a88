"""Running a fused network: onnxruntime (two routes and int8), ExecuTorch, their companions and device caches.
Imports `sdk.media`, `sdk.fusion` and `sdk.format`.

- `onnxruntime`: the engine: the bases fused into onnxruntime sessions;
- `compiled`: the backbone compiled once per device;
- `network`: a personalized network: images in, logits out;
- `rest`: a task of one class, its logits collapsed to it and anything else;
- `int8`: int8 models quantized on the device;
- `int8_session`: how an int8 model's sessions are made;
- `int8_route_cache`: the int8 route kept on disk;
- `device_cache`: what compiling computes, kept on disk;
- `executorch`: ExecuTorch as the engine;
- `xnnpack_program`: a bundle's ExecuTorch companion;
- `companion_check`: a companion vetted in a child process;
- `companion_probe`: that child's side;
- `_offline`: onnxruntime's telemetry off before it loads.
"""

__all__ = [
    "onnxruntime",
    "compiled",
    "network",
    "rest",
    "int8",
    "int8_session",
    "int8_route_cache",
    "device_cache",
    "executorch",
    "xnnpack_program",
    "companion_check",
    "companion_probe",
    "_offline",
]
