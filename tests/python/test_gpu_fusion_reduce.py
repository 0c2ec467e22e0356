"""test_gpu_fusion_reduce.py — reductions fused with the group computing their input, on CUDA:
the cases of fusion_reduce_cases.py with the kernels NVRTC compiles (a warp or a block per
row, two passes over parts for few outputs), fused against unfused on the GPU. Without a
usable GPU every test skips with dlop's reason; DLOP_REQUIRE_GPU=1 turns that into a failure."""
import pytest

from fusion_reduce_cases import *  # noqa: F401,F403 - the shared tests
from grad_w_support import require_gpu


@pytest.fixture
def device():
    require_gpu()
    return "cuda"
