"""The product's benchmarks and tools, run as modules: `python -m scripts.bench_runtime --help`.

Benchmarks write their result files under docs/results/; the reliability suite's hostile bundle edits
(`scripts.bundle_edits`) are shared with the tests. Experiments on the method live in `lab/`.
"""

# A script may import onnxruntime (sorted before sdk) before it imports sdk: turn onnxruntime's telemetry
# off first, as `import sdk` would (sdk/_offline.py), so that no script trips the SDK's TelemetryWarning.
from sdk._offline import disable_onnxruntime_telemetry

disable_onnxruntime_telemetry()
