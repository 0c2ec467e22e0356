"""test_pytensor_backends.py — dlop ops inside PyTensor graphs compiled by PyTensor's other
backends: mode="JAX" dispatches each dlop node to dlop.jax (an XLA custom call inside the jitted
graph), mode="NUMBA" calls the node's perform through numba.objmode without PyTensor's object-
mode fallback warning; both against NumPy and the default mode. Skips without PyTensor (CI
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


def test_numba_mode_runs_without_the_object_mode_warning():
    pytest.importorskip("numba")
    inputs, output = graph()
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*object mode.*")
        f = pytensor.function(inputs, output, mode="NUMBA")
        result = f(X, Y)
    np.testing.assert_allclose(result, reference(X, Y), rtol=1e-12)
    default = pytensor.function(inputs, output)
    np.testing.assert_allclose(result, default(X, Y), rtol=1e-12)
