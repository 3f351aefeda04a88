"""The one JSON grammar both bundle readers parse (docs/bundle-format.md, "JSON"): RFC 8259, strictly.

Python's `json` accepts `NaN`, `Infinity` and `-Infinity`, which are not JSON; here they are refused, as
the Java core's parser (`Json.java`) refuses them. Text must be valid UTF-8 (no replacement characters),
strings may not hold raw control characters, whitespace is space, tab, LF and CR only, and nesting is
bounded. Lengths the format limits are counted in code points (`len` of a Python str; the Java core uses
`codePointCount`), never in UTF-16 units.

>>> loads(b'{"a": [1, 2.5e3, "x"]}', "doc")
{'a': [1, 2500.0, 'x']}
>>> loads(b'{"a": NaN}', "doc")
Traceback (most recent call last):
...
ValueError: doc: not JSON (NaN is not a JSON number)
"""

from __future__ import annotations

import json


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def depth(value: object) -> int:
    """Nesting depth of parsed JSON (a scalar is 0, [1] is 1); iterative, so no depth exhausts the stack."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, level + 1)
            stack.extend((child, level + 1) for child in children)
    return deepest


def loads(raw: bytes, what: str, max_depth: int | None = None) -> object:
    """Parse UTF-8 JSON bytes. ValueError naming `what` for bad UTF-8, bad JSON, NaN/Infinity, or nesting
    deeper than `max_depth`."""
    try:
        value = json.loads(bytes(raw).decode("utf-8"), parse_constant=_refuse_constant)
    except (UnicodeDecodeError, RecursionError) as e:
        raise ValueError(f"{what}: not UTF-8 JSON ({type(e).__name__})") from None
    except ValueError as e:
        reason = str(e) if "JSON number" in str(e) else type(e).__name__
        raise ValueError(f"{what}: not JSON ({reason})") from None
    if max_depth is not None and depth(value) > max_depth:
        raise ValueError(f"{what}: nested deeper than {max_depth}")
    return value
