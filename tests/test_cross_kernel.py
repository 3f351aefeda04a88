"""The fusion kernel built for aarch64 (Jetson, Apple silicon, phones) and run under qemu-user against the
Python reference (scripts/cross_kernel.py): every storage kind in the plain and both blocked layouts, the
quantizing fusion and the quantizer, on the runtime's own prepared plans."""

import os

import numpy as np
import pytest

from scripts import cross_kernel
from sdk.fusion.native import _check_bases, native_kernel, packed_placements
from sdk.fusion.plan import NUMPY, FusionPlan

# Skipped only where the cross compiler or qemu is missing, never in CI (set-up installs them as root).
needs_cross = pytest.mark.skipif(cross_kernel.tools() is None and not os.environ.get("CI"),
                                 reason="needs gcc-aarch64-linux-gnu and qemu-user (Debian)")


@needs_cross
def test_the_aarch64_kernel_gives_the_python_references_weights():
    result = cross_kernel.parity("aarch64")
    assert result["built"] and result["passed"], result["cases"]
    assert result["parity_cases"] == 5 and result["max_abs_diff"] < 1e-5


@needs_cross
def test_the_comparison_catches_a_wrong_fusion(tmp_path):
    """The driver fused with other mixing coefficients than the reference is found out (the check can fail)."""
    binary = cross_kernel.build(tmp_path)
    bases = _check_bases()
    alpha = np.random.default_rng(1).dirichlet(np.ones(3), 4).astype(np.float32)
    placements, floats = packed_placements(bases.shapes, 0)
    reference = FusionPlan.build(bases, placements, floats, NUMPY, tile_floats=None)
    plan = FusionPlan.build(bases, placements, floats, native_kernel())
    want = reference.new_buffer(None)
    reference.fuse_and_fold(alpha, want)
    start = plan.new_buffer(None).data
    other = np.ascontiguousarray(alpha[:, ::-1])
    (got,) = cross_kernel.run(binary, cross_kernel.fuse_case(plan.prepared, other, start, []),
                              [(np.float32, start.size)], tmp_path, "aarch64")
    assert np.abs(got - want.data).max() > 1e-3
