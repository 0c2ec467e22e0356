"""test_gpu_fusion_row.py — row groups on CUDA: the cases of fusion_row_cases.py with the
kernel NVRTC compiles (a block per row, the row in registers, or read per phase for rows past
that), fused against unfused on the GPU. Without a usable GPU every test skips with dlop's
reason; DLOP_REQUIRE_GPU=1 turns that into a failure."""
import pytest

from fusion_row_cases import *  # noqa: F401,F403 - the shared tests
from grad_w_support import require_gpu


@pytest.fixture
def device():
    require_gpu()
    return "cuda"


def test_cuda_matches_the_cpu():
    """Every graph on both devices, every output: the CPU's and CUDA's row kernels (CUDA's
    keeping values in registers where they fit, reading the row again past that)."""
    require_gpu()
    for graph in sorted(GRAPHS):
        cpu, _, _ = functions(graph, "float32", "cpu")
        cuda, _, _ = functions(graph, "float32", "cuda")
        for n in (17, 4096, 8192, 40000):
            arrays = values_for(graph, "float32", 9, n)
            got, want = run(cuda, arrays, "float32", "cuda"), run(cpu, arrays, "float32", "cpu")
            for k in range(len(want)):
                assert_close(got[k], want[k], "float32",
                             "%s, rows of %d, output %d" % (graph, n, k))
