"""test_gpu_source_elementwise.py — ops defined by dlop.elementwise on CUDA: the device cases of
source_elementwise_cases.py with the kernels NVRTC compiles (NumPy results per dtype,
broadcasting, parameters, two outputs, fused against unfused bits), CPU-vs-CUDA agreement, a
CUDA array of another library taken through DLPack, an input on the wrong device refused, and
remembered eager calls of one device never serving another.
Without a usable GPU every test skips with dlop's reason; DLOP_REQUIRE_GPU=1 turns that into a
failure."""
import numpy as np
import pytest

import dlop
from grad_w_support import require_gpu
from source_elementwise_cases import *  # noqa: F401,F403 - the shared tests
from source_elementwise_cases import softplus, to_dlop, to_numpy


@pytest.fixture
def device():
    require_gpu()
    return "cuda"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_cuda_agrees_with_cpu(device, dtype):
    xs = np.random.default_rng(7).uniform(-25, 25, 100003)
    cpu = to_numpy(softplus(to_dlop(xs, dtype, "cpu")))
    cuda = to_numpy(softplus(to_dlop(xs, dtype, device)))
    # the 16-bit floats compute in float32 on both, rounding once: at most one unit apart
    tolerance = {"float16": 1e-3, "bfloat16": 8e-3, "float64": 1e-15}[dtype]
    np.testing.assert_allclose(cuda, cpu, rtol=tolerance, atol=1e-300)


def test_foreign_cuda_array_by_dlpack(device):
    torch = pytest.importorskip("torch")
    x = torch.linspace(-5, 5, 1000, device="cuda", dtype=torch.float32)
    y = softplus(x)
    assert y.device.startswith("cuda")
    np.testing.assert_allclose(to_numpy(y), torch.nn.functional.softplus(x).cpu().numpy(),
                               rtol=2e-6, atol=1e-7)


def test_an_input_on_another_device_is_refused(device):
    from source_elementwise_cases import sum_diff
    with pytest.raises(dlop.DeviceMismatchError, match="one operand is on"):
        sum_diff(to_dlop(np.ones(3), "float32", device), np.ones(3, np.float32))


# Sizes around the vector kernel's steps: its packs (16 bytes), the packs a thread loads (up to 4
# for a 16-bit float's body that calls functions, 2 for a 4-byte one and for float64) times its
# 256 threads a block, and the scalar tail after the last whole pack.
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("n", [1, 7, 8, 9, 2047, 2048, 2049, 8 * 256 * 4 + 3, 8 * 256 * 4 * 3 + 13, 1 << 20])
def test_vector_kernel_packs_and_tails_agree_with_cpu(device, dtype, n):
    xs = np.random.default_rng(n).uniform(-25, 25, n)
    cpu = to_numpy(softplus(to_dlop(xs, dtype, "cpu")))
    cuda = to_numpy(softplus(to_dlop(xs, dtype, device)))
    tolerance = {"float16": 1e-3, "bfloat16": 8e-3, "float32": 2e-6, "float64": 1e-15}[dtype]
    np.testing.assert_allclose(cuda, cpu, rtol=tolerance, atol=1e-300)
    # two array inputs and a call: 2 packs per thread for the 16-bit floats and float64, 1 for float32
    x = dlop.vector("x", dtype)
    w = dlop.vector("w", dtype)
    ws = np.random.default_rng(n + 1).uniform(-2, 2, n)
    results = [to_numpy(dlop.function([x, w], dlop.tanh(x) * w, device=d)(to_dlop(xs, dtype, d), to_dlop(ws, dtype, d)))
               for d in ("cpu", device)]
    np.testing.assert_allclose(results[1], results[0], rtol=tolerance * 2, atol=tolerance)


def test_repeated_calls_after_a_change_of_device(device):
    """A remembered CPU call does not serve CUDA arrays (nor the other way round), and dlop
    arrays on two devices are refused after remembered calls on each."""
    from source_elementwise_cases import sum_diff
    xs = np.linspace(-4, 4, 1000)
    want = np.log1p(np.exp(xs.astype(np.float32)))
    for where in ("cpu", "cpu", device, device, "cpu", device):
        got = softplus(to_dlop(xs, "float32", where))
        assert got.device.startswith(where)
        np.testing.assert_allclose(to_numpy(got), want, rtol=2e-6, atol=1e-7)
    cpu, cuda = to_dlop(xs, "float32", "cpu"), to_dlop(xs, "float32", device)
    for pair in [(cpu, cpu), (cuda, cuda), (cpu, cuda), (cuda, cpu)]:
        if pair[0].device != pair[1].device:
            with pytest.raises(dlop.DeviceMismatchError, match="one operand is on"):
                sum_diff(*pair)
        else:
            assert sum_diff(*pair)[0].device == pair[0].device
