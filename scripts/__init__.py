"""The product's benchmarks and tools, run as modules: `python -m scripts.bench_runtime --help`.

Benchmarks write their result files under docs/results/; the reliability suite's hostile bundle edits
(`scripts.bundle_edits`) are shared with the tests. Experiments on the method live in `lab/`.
"""

# A script may import onnxruntime (sorted before sdk) before it imports sdk; importing sdk here first turns
# onnxruntime's telemetry off (sdk/engines/_offline.py), so no script trips the SDK's TelemetryWarning.
import sdk  # noqa: F401
