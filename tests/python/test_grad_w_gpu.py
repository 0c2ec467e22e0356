"""test_grad_w_gpu.py — the grad_W use case on CUDA: examples/grad_w.py's graph compiled for
the GPU in float32 and float64 against NumPy and against the CPU, eagerly too, and the example
program with --device cuda.  Without a usable GPU every test skips with dlop's reason;
DLOP_REQUIRE_GPU=1 turns that into a failure."""
import subprocess
import sys

import pytest

import dlop
from grad_w_support import EXAMPLE, load_example, require_gpu

grad_w = load_example()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cuda_matches_numpy_and_the_cpu(dtype):
    require_gpu()
    inputs, output = grad_w.build(dtype)
    values = grad_w.random_inputs(dtype)
    gpu = dlop.function(inputs, output, device="cuda")(*values)
    assert gpu.device == "cuda:0" and gpu.dtype == dtype
    cpu = dlop.function(inputs, output, device="cpu")(*values)
    expected = grad_w.reference(values)
    tolerance = grad_w.TOLERANCE[dtype]
    assert grad_w.difference(gpu.numpy(), expected)[1] <= tolerance
    assert grad_w.difference(gpu.numpy(), cpu.numpy().astype("float64"))[1] <= tolerance


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_eager_on_cuda(dtype):
    require_gpu()
    values = grad_w.random_inputs(dtype, seed=5)
    result = grad_w.grad_w(*(dlop.asarray(v, device="cuda") for v in values))
    assert result.device == "cuda:0"
    assert grad_w.difference(result.numpy(), grad_w.reference(values))[1] <= grad_w.TOLERANCE[dtype]


def test_example_program_on_cuda():
    require_gpu()
    result = subprocess.run([sys.executable, str(EXAMPLE), "--device", "cuda"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "grad_w: OK, every result agrees" in result.stdout
    assert result.stdout.count("  cuda vs NumPy") == 2 and "cpu vs cuda" not in result.stdout

