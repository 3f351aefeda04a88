"""The runtime is offline: onnxruntime's telemetry is turned off before onnxruntime is first imported.

onnxruntime 1.31 sends usage telemetry: a process that lives ~10 s past its first session queries DNS
for Microsoft's telemetry host and writes `~/.cache/Microsoft/DeveloperTools/.onnxruntime/` (a device
id and queued events). Measured here with strace on a process kept alive 15 s: the environment variable
`ORT_DISABLE_TELEMETRY=1` stops both, but only if it is set before onnxruntime's native module loads;
set later in the process, or `onnxruntime.disable_telemetry_events()`, it does not
(tests/test_offline.py). So `import sdk` sets it first thing, and warns if onnxruntime was already
imported without it: set `ORT_DISABLE_TELEMETRY=1` in the environment, or import sdk first.
onnxruntime also sends nothing when `CI=true` is set, which is why a test run by CI must unset it to see
the telemetry at all.
"""

from __future__ import annotations

import os
import sys
import warnings

TELEMETRY_SWITCH = "ORT_DISABLE_TELEMETRY"


class TelemetryWarning(UserWarning):
    """onnxruntime was imported before the SDK could turn its telemetry off."""


def disable_onnxruntime_telemetry() -> None:
    late = "onnxruntime" in sys.modules and os.environ.get(TELEMETRY_SWITCH) != "1"
    os.environ[TELEMETRY_SWITCH] = "1"
    if late:
        warnings.warn("onnxruntime was imported before sdk without ORT_DISABLE_TELEMETRY=1: its telemetry "
                      "(DNS queries, files under ~/.cache/Microsoft) stays on in this process. Import sdk first, "
                      "or set ORT_DISABLE_TELEMETRY=1 in the environment.", TelemetryWarning, stacklevel=3)
