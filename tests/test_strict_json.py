"""The one JSON grammar of the bundle format (sdk/format/strict_json.py; Json.java is checked against the same
documents in tests/test_android_core.py through export.golden.JSON_CASES)."""

import numpy as np
import pytest

from export.bundle_edits import resign
from export.golden import JSON_CASES
from sdk.errors import BundleError, TensorFileError
from sdk.format import strict_json
from sdk.format.bundle import Bundle
from sdk.format.tensorfile import read_tensors


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a": -Infinity}', "[01]", "[+1]", "[.5]", '"a\tb"',
                                  "[1]\x0b"])
def test_what_python_json_would_accept_is_refused(text):
    with pytest.raises(ValueError, match="doc"):
        strict_json.loads(text.encode(), "doc")


def test_depth_is_bounded_and_counted_like_the_java_reader():
    assert strict_json.loads(b"[[1]]", "doc", max_depth=2) == [[1]]
    with pytest.raises(ValueError, match="nested deeper than 1"):
        strict_json.loads(b"[[1]]", "doc", max_depth=1)
    with pytest.raises(ValueError):                                   # far past Python's recursion limit
        strict_json.loads(b"[" * 100_000 + b"]" * 100_000, "doc")


def test_the_golden_documents_cover_both_verdicts():
    verdicts = set()
    for text, depth in JSON_CASES:
        try:
            strict_json.loads(text if isinstance(text, bytes) else text.encode(), "doc", depth)
            verdicts.add("ok")
        except ValueError:
            verdicts.add("error")
    assert verdicts == {"ok", "error"}


def test_a_forged_manifest_with_a_nan_literal_is_refused(tiny_bundle):
    """Python's json would read NaN as a float; the reader refuses it before any field check."""
    blob = tiny_bundle.read_bytes()
    start = blob.index(b'"mean":[') + len(b'"mean":[')
    end = blob.index(b",", start)                     # the first mean value, e.g. 0.485
    forged = blob[:start] + b"NaN".ljust(end - start) + blob[end:]
    with pytest.raises(BundleError, match="NaN is not a JSON number"):
        Bundle.from_buffer(np.frombuffer(resign(forged), np.uint8))


def test_a_tensor_header_with_infinity_is_refused():
    header = b'{"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, Infinity]}}'
    blob = len(header).to_bytes(8, "little") + header + b"\0" * 4
    with pytest.raises(TensorFileError, match="Infinity is not a JSON number"):
        read_tensors(blob)
