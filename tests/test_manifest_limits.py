"""Provenance bounds both readers count alike (sdk/format/manifest.py json_size; Bundle.java jsonSize): values and
code points, not the length of a serialisation (issue 49: the Java core did not check provenance at all)."""

import pytest

from sdk.errors import BundleError
from sdk.format.manifest import MAX_PROVENANCE_TEXT, MAX_PROVENANCE_VALUES, _provenance, json_size

BASE = {"sdk_version": "0.6.0", "licenses": {}}   # 3 values, 24 code points of keys and strings


def test_json_size_counts_values_and_code_points():
    assert json_size(BASE) == (3, len("sdk_version") + len("0.6.0") + len("licenses"))
    assert json_size({"é🦋": [1, None, "ab"]}) == (5, 4)   # code points: the butterfly is one


@pytest.mark.parametrize("extra, ok", [
    ({"k": [0] * (MAX_PROVENANCE_VALUES - 4)}, True),        # 3 + the list + its items = the limit
    ({"k": [0] * (MAX_PROVENANCE_VALUES - 3)}, False),
    ({"t": "x" * (MAX_PROVENANCE_TEXT - 25)}, True),          # 24 + 1 for the key "t"
    ({"t": "x" * (MAX_PROVENANCE_TEXT - 24)}, False),
    ({"d": [[[0]]]}, True), ({"d": [[[[0]]]]}, False),        # depth 4 with the provenance object itself
])
def test_provenance_limits(extra, ok):
    value = {**BASE, **extra}
    if ok:
        assert _provenance(value) is value
    else:
        with pytest.raises(BundleError, match="provenance"):
            _provenance(value)


@pytest.mark.parametrize("value", ["x", -1, [], {"licenses": {}}, {"sdk_version": "v" * 41, "licenses": {}},
                                   {"sdk_version": "1", "licenses": []}])
def test_provenance_of_the_wrong_shape_is_refused(value):
    with pytest.raises(BundleError):
        _provenance(value)
