"""test_examples.py — runs the Python examples (examples/*.py) as a user would, in a subprocess:
on the CPU everywhere, on CUDA where a GPU is usable (skipped with the reason otherwise, a failure
when DLOP_REQUIRE_GPU=1), and checks their exit status and what they print."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dlop

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# DLOP_TEST_SCALE (the sanitizer tree: 0.25): gpu_test.py's timing loop makes that share of its
# 1000 calls, the same compiled function each time (under ASan the 1000 took 8 s of CPU).
GPU_TEST_ITERS = max(1, round(1000 * float(os.environ.get("DLOP_TEST_SCALE", "1"))))


def run_example(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True,
                          text=True, timeout=300, env=os.environ.copy())


def gpu_unusable_reason() -> str | None:
    """None when dlop can put an array on cuda:0, else dlop's message saying why not."""
    try:
        dlop.asarray(np.zeros(1, dtype=np.float32), device="cuda")
    except dlop.DlopError as error:
        return str(error) or type(error).__name__
    return None


def require_gpu() -> None:
    reason = gpu_unusable_reason()
    if reason is None:
        return
    if os.environ.get("DLOP_REQUIRE_GPU") == "1":
        pytest.fail("DLOP_REQUIRE_GPU=1 but no GPU is usable: %s" % reason)
    pytest.skip("no GPU usable: %s" % reason)


def assert_ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, "exit %d\nstdout:\n%s\nstderr:\n%s" % (
        result.returncode, result.stdout, result.stderr)
    return result.stdout


def run_ok_on(device: str, name: str, *args: str) -> str:
    """What the example prints run with --device device (and args); it must exit 0. CUDA needs
    a usable GPU (see require_gpu)."""
    if device == "cuda":
        require_gpu()
    return assert_ok(run_example(name, "--device", device, *args))


DEVICES = ["cpu", "cuda"]


@pytest.mark.parametrize("device", DEVICES)
def test_double_op(device):
    out = run_ok_on(device, "double_op.py")
    assert "double_op: ok, result == 2 * input exactly on %s" % device in out
    assert "input:" in out and "result (on" in out
    # The printed input is a 4x5 matrix: 4 rows of 5 numbers each.
    matrix = out.split("input:\n", 1)[1].split("result", 1)[0]
    assert matrix.count("[") == 5 and len(matrix.split()) >= 20


@pytest.mark.parametrize("device", DEVICES)
def test_multiply_them(device):
    out = run_ok_on(device, "multiply_them.py")
    assert "all 100 products equal NumPy's exactly on %s" % device in out


@pytest.mark.parametrize("device", DEVICES)
def test_gpu_test(device):
    out = run_ok_on(device, "gpu_test.py", "--iters", str(GPU_TEST_ITERS))
    for dtype in ("float32", "float64"):
        assert "== %s on %s ==" % (dtype, device) in out
    assert out.count("Looping %d times took" % GPU_TEST_ITERS) == 2
    assert out.count("Used the %s" % ("gpu" if device == "cuda" else "cpu")) == 2
    assert "exp" in out  # f.explain() lists the node
    assert out.rstrip().endswith("gpu_test: ok")


@pytest.mark.parametrize("device", DEVICES)
def test_pycuda_double_op(device):
    """The seed's PyCUDADoubleOp as a dlop.Op: perform on the CPU, a SourceModule on CUDA."""
    out = run_ok_on(device, "pycuda_double_op.py")
    assert "pycuda_double_op: ok, result == 2 * input exactly on %s" % device in out
    assert "PyCUDADoubleOp(x: float32[?,?]) -> float32[?,?] on %s" % device in out


def test_source_ops():
    """dlop.elementwise, SourceModule and dlop.Op in one tour: the CPU always, CUDA where a GPU
    is usable (a failure when DLOP_REQUIRE_GPU=1 and none is), each step against NumPy."""
    out = assert_ok(run_example("source_ops.py"))
    assert "compiles for 4 new beta values: 0" in out
    assert out.count(": ok\n") >= 7 and out.rstrip().endswith("source_ops: ok")
    if gpu_unusable_reason() is None:
        assert "on cuda:" in out and "SourceModule scale launched directly: ok" in out
    elif os.environ.get("DLOP_REQUIRE_GPU") == "1":
        pytest.fail("DLOP_REQUIRE_GPU=1 but no GPU is usable: %s" % gpu_unusable_reason())
    else:
        assert "cuda skipped: no GPU is usable" in out


def test_multiply_them_source():
    """The seed's multiply_them through dlop.SourceModule: GPU only (no CPU variant)."""
    out = run_ok_on("cuda", "multiply_them_source.py")
    assert "all 100 products equal NumPy's exactly on cuda" in out
    assert "the 300 threads past n wrote nothing" in out


def test_multiply_them_source_without_the_device_says_so():
    result = run_example("multiply_them_source.py", "--device", "cuda:99")
    assert result.returncode == 2
    assert "multiply_them_source: needs a GPU, and cuda:99 is not usable" in result.stderr
    assert result.stdout.strip() == ""


@pytest.mark.parametrize("name", ["double_op.py", "multiply_them.py", "gpu_test.py"])
def test_missing_device_is_a_clear_error_not_a_switch(name):
    # cuda:99 exists nowhere: the example must stop with a message, never run elsewhere.
    result = run_example(name, "--device", "cuda:99", "--iters", "1") if name == "gpu_test.py" \
        else run_example(name, "--device", "cuda:99")
    assert result.returncode != 0
    assert "--device cuda:99 was asked for but no GPU is usable" in result.stderr
    assert result.stdout.strip() == ""  # nothing ran


def test_default_device_says_which_it_used():
    out = assert_ok(run_example("multiply_them.py"))
    if gpu_unusable_reason() is None:
        assert "on cuda" in out
    else:
        assert "running on the CPU (pass --device cuda to require the GPU)" in out
        assert "exactly on cpu" in out
