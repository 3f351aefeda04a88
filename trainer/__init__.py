"""TAPER trainer: ResNet-18 family, data and tasks, training stages, evaluation. Needs the `train` extra."""

import sys

try:
    import torch  # noqa: F401
except ImportError:
    _MISSING = ("the trainer needs torch, which a runtime-only install does not have: "
                "pip install torch==2.13.0, then pip install 'taper-sdk[train]' -c constraints.txt")
    if sys.argv[:1] == ["-m"]:  # `python -m trainer`: one line, not a traceback
        sys.exit(f"error: {_MISSING}")
    raise ImportError(_MISSING) from None
