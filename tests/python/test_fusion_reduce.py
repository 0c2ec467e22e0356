"""test_fusion_reduce.py — reductions fused with the group computing their input, on the CPU:
the cases of fusion_reduce_cases.py (every dtype the reduce ops declare, axes, sizes, strides,
NaN, softmax, explain, fuse=False) with the generated C kernels."""
import pytest

from fusion_reduce_cases import *  # noqa: F401,F403 - the shared tests


@pytest.fixture
def device():
    return "cpu"
