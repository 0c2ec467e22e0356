"""test_grad_w.py — the grad_W use case on the CPU: examples/grad_w.py's graph
(delta_o = -(x - z); delta_h = dot(delta_o, W) * h * (1 - h); grad_W = dot(X.T, delta_h)),
built once per dtype, against NumPy in float64, symbolically and eagerly; and the example run
as a program.  The CUDA side is test_grad_w_gpu.py."""
import subprocess
import sys

import numpy as np
import pytest

import dlop
from grad_w_support import EXAMPLE, gpu_unusable_reason, load_example

grad_w = load_example()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_graph_on_the_cpu_matches_numpy(dtype):
    inputs, output = grad_w.build(dtype)
    assert output.dtype == dtype and output.shape == (grad_w.VISIBLE, grad_w.HIDDEN)
    values = grad_w.random_inputs(dtype)
    result = dlop.function(inputs, output, device="cpu")(*values)
    assert result.dtype == dtype and result.device == "cpu"
    expected = grad_w.reference(values)
    _, relative = grad_w.difference(result.numpy(), expected)
    assert relative <= grad_w.TOLERANCE[dtype]
    # The tolerance means something: a wrong graph (h instead of 1 - h) is far outside it.
    X, x, z, W, h = (v.astype(np.float64) for v in values)
    wrong = X.T @ ((-(x - z) @ W) * h * h)
    assert grad_w.difference(wrong, expected)[1] > 100 * grad_w.TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_eager_lines_match_numpy(dtype):
    values = grad_w.random_inputs(dtype, seed=3)
    result = grad_w.grad_w(*(dlop.asarray(v) for v in values))
    assert isinstance(result, dlop.Array) and result.dtype == dtype
    _, relative = grad_w.difference(result.numpy(), grad_w.reference(values))
    assert relative <= grad_w.TOLERANCE[dtype]


def test_other_batch_sizes_reuse_the_graph():
    inputs, output = grad_w.build("float64")
    f = dlop.function(inputs, output)
    for batch in (1, 7, 64):
        values = [v[:batch] if i != 3 else v for i, v in enumerate(grad_w.random_inputs("float64"))]
        _, relative = grad_w.difference(f(*values).numpy(), grad_w.reference(values))
        assert relative <= grad_w.TOLERANCE["float64"]


def test_example_program_on_the_cpu():
    result = subprocess.run([sys.executable, str(EXAMPLE), "--device", "cpu"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "grad_w: OK, every result agrees" in result.stdout
    for dtype in ("float32", "float64"):
        assert "== %s: grad_W is %s [784, 256], built once" % (dtype, dtype) in result.stdout
    assert result.stdout.count("  cpu vs NumPy") == 2 and result.stdout.count("eager cpu vs NumPy") == 2


def test_example_without_a_gpu_says_so():
    reason = gpu_unusable_reason()
    if reason is None:
        pytest.skip("a GPU is usable: the no-GPU messages are tested on machines without one")
    result = subprocess.run([sys.executable, str(EXAMPLE), "--device", "cuda"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert "--device cuda was asked for but no GPU is usable" in result.stderr
    default = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True,
                             timeout=300)
    assert "CUDA: skipped, no GPU usable" in default.stdout
