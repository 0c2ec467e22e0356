"""test_gpu_operators.py — operators and functions on CUDA: arithmetic with promotion and
Python scalars (0-d constants cached on the device), comparisons, reductions, views that share
the input's device memory, dot/matmul against NumPy, graphs compiled for CUDA with constants,
and mixing devices (an error naming both).  Without a usable GPU every test skips with dlop's
reason; DLOP_REQUIRE_GPU=1 turns that into a failure."""
import numpy as np
import pytest

import dlop
from dlop import _arith
from grad_w_support import require_gpu


@pytest.fixture(autouse=True)
def gpu():
    require_gpu()


def on_gpu(a):
    return dlop.asarray(a, device="cuda")


def check(result, expected, tol=0.0):
    assert isinstance(result, dlop.Array) and result.device == "cuda:0"
    expected = np.asarray(expected)
    assert result.dtype == expected.dtype.name and result.shape == expected.shape
    if tol:
        np.testing.assert_allclose(result.numpy(), expected, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(result.numpy(), expected)


def test_arithmetic_promotion_and_scalars():
    rng = np.random.default_rng(0)
    a = rng.uniform(0.5, 2, (33, 65)).astype(np.float32)   # odd sizes
    b = rng.uniform(0.5, 2, (65,)).astype(np.float64)
    x, y = on_gpu(a), on_gpu(b)
    check(x + y, a + b, 1e-12)                       # a cast node float32 -> float64
    check(2 - x, 2 - a, 1e-6)
    check(1.0 / x, 1.0 / a, 1e-6)
    check(x ** 2, a ** 2, 1e-6)
    check(-(x - y) * x, -(a - b) * a, 1e-12)
    check(x < 1.0, a < 1.0)
    check(abs(x - 1.25), np.abs(a - 1.25), 1e-6)
    ints = np.arange(-5, 6, dtype=np.int8)
    check(on_gpu(ints) + 1, ints + 1)                # weak scalar keeps int8
    check(on_gpu(ints) / 2, ints / 2, 1e-15)         # true division in float64
    with pytest.raises(OverflowError):
        on_gpu(ints) + 1000


def test_scalar_constants_live_on_the_device_and_are_cached():
    x = on_gpu(np.arange(8, dtype=np.float64))
    check(x * 2.5, np.arange(8) * 2.5)
    key = (_arith._value_key(2.5), "float64", "cuda:0")
    assert _arith._scalar_cache[key].device == "cuda:0"
    cached = _arith._scalar_cache[key]
    check(x * 2.5, np.arange(8) * 2.5)
    assert _arith._scalar_cache[key] is cached
    bf = on_gpu(np.array([1.0, 2.0, 3.0], dtype=np.float32)).astype("bfloat16")
    check((bf * 0.5).astype("float32"), np.array([0.5, 1.0, 1.5], dtype=np.float32))


def test_reductions_and_float16():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((17, 129, 3)).astype(np.float32)
    x = on_gpu(a)
    for axis in (None, 0, 1, (0, 2), -1):
        check(dlop.sum(x, axis=axis), np.sum(a.astype(np.float64), axis=axis).astype(np.float32), 1e-4)
        check(x.max(axis=axis, keepdims=True), a.max(axis=axis, keepdims=True))
    h = a.astype(np.float16)
    check(dlop.mean(on_gpu(h), axis=1), h.astype(np.float32).mean(axis=1).astype(np.float16), 2e-3)


def test_views_share_device_memory():
    a = np.arange(24, dtype=np.float64).reshape(4, 6)
    x = on_gpu(a)
    t = x.T
    check(t, a.T)
    assert t.data_pointer == x.data_pointer and t.strides == (1, 6)
    check(x.reshape(3, 8), a.reshape(3, 8))
    assert x.reshape(3, 8).data_pointer == x.data_pointer
    check(x.dimshuffle(1, "x", 0), a.T[:, None, :])
    check(dlop.broadcast_to(on_gpu(a[0]), (5, 6)), np.broadcast_to(a[0], (5, 6)))
    check(x.T + 1.0, a.T + 1.0)                      # an elementwise op on a strided view


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dot_and_matmul(dtype):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((65, 33)).astype(dtype)
    b = rng.standard_normal((33, 17)).astype(dtype)
    tol = 1e-5 if dtype == "float32" else 1e-12
    check(dlop.dot(on_gpu(a), on_gpu(b)), (a.astype(np.float64) @ b).astype(dtype), tol)
    check(on_gpu(a).T @ on_gpu(a), (a.T.astype(np.float64) @ a).astype(dtype), tol)
    batch = rng.standard_normal((3, 5, 33)).astype(dtype)
    check(dlop.matmul(on_gpu(batch), on_gpu(b)), (batch.astype(np.float64) @ b).astype(dtype), tol)


def test_graph_for_cuda_with_constants():
    x = dlop.matrix("x", dtype="float32", shape=(None, 4))
    w = np.linspace(-1, 1, 4).astype(np.float32)
    y = dlop.sigmoid(x * w + 0.5).sum(axis=1)
    f = dlop.function([x], y, device="cuda")
    a = np.random.default_rng(3).standard_normal((9, 4)).astype(np.float32)
    expected = (1 / (1 + np.exp(-(a.astype(np.float64) * w + 0.5)))).sum(axis=1).astype(np.float32)
    check(f(a), expected, 1e-5)


def test_mixed_devices_name_both():
    x = on_gpu(np.ones(3, dtype=np.float32))
    host = dlop.asarray(np.ones(3, dtype=np.float32))
    for expression in (lambda: x + host, lambda: host * x, lambda: dlop.where(host > 0, x, 0.0),
                       lambda: x + np.ones(3, dtype=np.float32)):
        with pytest.raises(dlop.DeviceMismatchError) as info:
            expression()
        assert "cuda:0" in str(info.value) and "cpu" in str(info.value)
