"""test_pytensor_backends.py — dlop ops inside PyTensor graphs compiled by PyTensor's other
backends: mode="JAX" dispatches each dlop node to dlop.jax (an XLA custom call inside the jitted
graph), mode="NUMBA" compiles each dlop node to nopython code calling libdlop's C API (view ops:
perform through numba.objmode, without PyTensor's object-mode warning); against NumPy and the
default mode. Skips without PyTensor (CI
has it) and, per backend, without JAX or Numba."""
import os
import warnings

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest

pytensor = pytest.importorskip("pytensor")
import pytensor.tensor as pt

from dlop.pytensor_adapter import as_op


def graph():
    x = pt.matrix("x", dtype="float64")
    y = pt.vector("y", dtype="float64")
    z = as_op("sum", axes=[1])(as_op("add")(as_op("exp")(pt.sin(x)), y)) * 2.0
    return [x, y], z


def reference(x, y):
    return np.sum(np.exp(np.sin(x)) + y, axis=1) * 2.0


X = np.random.default_rng(3).standard_normal((5, 4))
Y = np.arange(4, dtype="float64")


def test_jax_mode_dispatches_to_dlop_jax(monkeypatch):
    pytest.importorskip("jax")
    import dlop.jax
    from dlop.pytensor_adapter import DlopOp
    assert dlop.jax.available(), dlop.jax.unavailable_reason()
    inputs, output = graph()

    def no_perform(*args):
        raise AssertionError("mode='JAX' called DlopOp.perform instead of dlop.jax")

    monkeypatch.setattr(DlopOp, "perform", no_perform)
    f = pytensor.function(inputs, output, mode="JAX")
    np.testing.assert_allclose(f(X, Y), reference(X, Y), rtol=1e-12)


def test_numba_mode_calls_dlop_from_nopython_code(monkeypatch):
    pytest.importorskip("numba")
    import dlop
    from dlop.pytensor_adapter import DlopOp
    inputs, output = graph()
    default = pytensor.function(inputs, output)

    def no_perform(*args):
        raise AssertionError("mode='NUMBA' called DlopOp.perform instead of the C API")

    monkeypatch.setattr(DlopOp, "perform", no_perform)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*object mode.*")
        f = pytensor.function(inputs, output, mode="NUMBA")
        result = f(X, Y)
    np.testing.assert_allclose(result, reference(X, Y), rtol=1e-12)
    monkeypatch.undo()
    np.testing.assert_allclose(result, default(X, Y), rtol=1e-12)
    # strided inputs reach the kernel as they are; other shapes reuse the prepared calls
    np.testing.assert_allclose(f(X[::2, ::2], Y[:2]), reference(X[::2, ::2], Y[:2]), rtol=1e-12)
    # the op's own error, with its message, out of nopython code
    with pytest.raises(dlop.ShapeError, match="cannot broadcast"):
        f(X, Y[:3])


def test_numba_mode_view_ops_run_perform_without_the_warning():
    pytest.importorskip("numba")
    x = pt.matrix("x", dtype="float64")
    y = as_op("transpose")(x) * 2.0
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*object mode.*")
        f = pytensor.function([x], y, mode="NUMBA")
        value = X.copy()
        np.testing.assert_array_equal(f(value), X.T * 2.0)
    np.testing.assert_array_equal(value, X)  # the view op's input is left alone


def test_view_ops_declare_their_alias_so_nothing_writes_the_input():
    """transpose's output is a view of x: without view_map PyTensor's in-place multiply wrote
    into the caller's array (the default mode and every backend)."""
    x = pt.matrix("x", dtype="float64")
    y = as_op("transpose")(x) * 2.0
    assert as_op("transpose").view_map == {0: [0]}
    assert as_op("exp").view_map == {}
    for mode in (None, "FAST_RUN", "FAST_COMPILE"):
        value = X.copy()
        np.testing.assert_array_equal(pytensor.function([x], y, mode=mode)(value), X.T * 2.0)
        np.testing.assert_array_equal(value, X)
