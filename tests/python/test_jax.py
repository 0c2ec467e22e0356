"""test_jax.py — dlop ops inside JAX on the CPU (dlop.jax): eager calls and jax.jit next to
native ops, against NumPy; parameters of every kind; broadcasting; jax.vmap of elementwise ops
(batched by broadcasting, inputs of different ranks) and of other ops (one call per element);
the plugin's run-time errors reaching Python as JAX errors with the plugin's message; bad
arguments refused with messages; XLA's buffers reaching the kernel uncopied (by pointer).
test_gpu_jax.py runs the same on CUDA. Skips when JAX is not installed; with JAX installed,
dlop.jax must be available (its handler is built whenever the build's Python has jaxlib)."""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp

import dlop
import dlop.jax

jax.config.update("jax_enable_x64", True)

FIXTURES = os.path.join(os.environ.get("DLOP_FIXTURE_DIR", ""), "adapters", "adapter_ops.so")


@pytest.fixture(scope="module", autouse=True)
def require_handler():
    assert dlop.jax.available(), dlop.jax.unavailable_reason()


@pytest.fixture(scope="module")
def adapter_ops():
    if "fixture_address" not in dlop.ops:
        dlop.load_plugin(FIXTURES)
    return dlop.ops


def test_exp_eager_and_jit_match_numpy():
    exp = dlop.jax.op("exp")
    for dtype in ("float32", "float64"):
        x = np.linspace(-3, 3, 1001).astype(dtype)
        eager = exp(jnp.asarray(x))
        assert eager.dtype == dtype and eager.shape == x.shape
        np.testing.assert_allclose(np.asarray(eager), np.exp(x), rtol=2e-7 if dtype == "float32" else 1e-15)
        jitted = jax.jit(exp)(x)
        np.testing.assert_array_equal(np.asarray(jitted), np.asarray(eager))


def test_jit_mixes_dlop_and_native_ops():
    exp, add = dlop.jax.op(dlop.ops.exp), dlop.jax.op("add")

    @jax.jit
    def f(x, y):
        return jnp.sum(add(exp(jnp.sin(x)), y) * 2.0, axis=0)

    x = np.random.default_rng(0).standard_normal((5, 7)).astype("float32")
    y = np.arange(7, dtype="float32")
    expected = np.sum((np.exp(np.sin(x)) + y) * 2.0, axis=0)
    np.testing.assert_allclose(np.asarray(f(x, y)), expected, rtol=1e-5)
    # a second call with the same shapes reuses the compiled executable and the prepared call
    np.testing.assert_allclose(np.asarray(f(x + 1, y)), np.sum((np.exp(np.sin(x + 1)) + y) * 2.0,
                                                             axis=0), rtol=1e-5)


def test_broadcasting_and_types_come_from_the_op():
    add = dlop.jax.op("add")
    a = jnp.ones((2, 1, 3), dtype="float32")
    b = jnp.arange(4 * 3, dtype="float32").reshape(4, 3)
    out = jax.jit(add)(a, b)
    assert out.shape == (2, 4, 3) and out.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(out), np.ones((2, 1, 3)) + np.asarray(b))
    ints = dlop.jax.op("mul")(jnp.arange(6, dtype="int32"), jnp.int32(3))
    assert ints.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(ints), np.arange(6) * 3)


def test_parameters_of_each_kind():
    x = np.arange(12, dtype="float64").reshape(3, 4)
    total = dlop.jax.op("sum", axes=[1])(x)  # ints
    np.testing.assert_array_equal(np.asarray(total), x.sum(axis=1))
    kept = jax.jit(dlop.jax.op("sum", axes=(0,), keepdims=True))(x)  # ints and bool
    assert kept.shape == (1, 4)
    np.testing.assert_array_equal(np.asarray(kept), x.sum(axis=0, keepdims=True))
    as_int = dlop.jax.op("cast", dtype="int32")(x)  # string
    assert as_int.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(as_int), x.astype("int32"))
    # two parameter values of one op are two prepared calls, never mixed up
    first = jax.jit(dlop.jax.op("sum", axes=[0]))(x)
    second = jax.jit(dlop.jax.op("sum", axes=[1]))(x)
    np.testing.assert_array_equal(np.asarray(first), x.sum(axis=0))
    np.testing.assert_array_equal(np.asarray(second), x.sum(axis=1))


def test_vmap_of_elementwise_ops_broadcasts_like_numpy():
    add = dlop.jax.op("add")
    xs = np.random.default_rng(1).standard_normal((6, 3)).astype("float32")  # batch of (3,)
    y = np.random.default_rng(2).standard_normal((2, 3)).astype("float32")    # unbatched (2, 3)
    out = jax.jit(jax.vmap(add, in_axes=(0, None)))(xs, y)
    assert out.shape == (6, 2, 3)
    np.testing.assert_allclose(np.asarray(out), xs[:, None, :] + y[None], rtol=1e-6)
    both = jax.vmap(add)(xs, xs[::-1].copy())
    np.testing.assert_allclose(np.asarray(both), xs + xs[::-1], rtol=1e-6)


def test_vmap_of_other_ops_runs_per_element():
    total = dlop.jax.op("sum", axes=[0])
    xs = np.arange(24, dtype="float32").reshape(2, 3, 4)
    out = jax.vmap(total)(xs)
    np.testing.assert_array_equal(np.asarray(out), xs.sum(axis=1))


def test_zero_copy_by_pointer(adapter_ops):
    address = dlop.jax.op("fixture_address")
    x = jnp.arange(1000, dtype="float32")
    assert int(address(x)) == x.unsafe_buffer_pointer()
    # inside jit, on an argument buffer
    assert int(jax.jit(address)(x)) == x.unsafe_buffer_pointer()


def test_plugin_errors_reach_python_as_jax_errors(adapter_ops):
    fails = dlop.jax.op("fixture_fails_at_run")
    with pytest.raises(Exception, match="fixture_fails_at_run refuses to run, as it always does "
                                        r"\(5 elements\)") as info:
        jax.block_until_ready(jax.jit(fails)(jnp.zeros(5)))
    assert "jax" in type(info.value).__module__ or "xla" in type(info.value).__module__.lower()


def test_type_errors_come_from_make_node_while_tracing():
    exp = dlop.jax.op("exp")
    with pytest.raises(dlop.DlopError, match="exp"):
        jax.jit(exp)(jnp.arange(4, dtype="int32"))
    with pytest.raises(dlop.ShapeError):
        dlop.jax.op("add")(jnp.ones(3), jnp.ones(4))


def test_bad_arguments():
    with pytest.raises(dlop.NotFoundError, match="no loaded dlop op is named 'no_such_op'"):
        dlop.jax.op("no_such_op")
    with pytest.raises(dlop.NotFoundError, match="has no parameter"):
        dlop.jax.op("exp", scale=2)
    with pytest.raises(TypeError, match="parameter 'axes' is declared ints"):
        dlop.jax.op("sum", axes="rows")
    with pytest.raises(TypeError, match="parameter 'keepdims' is declared bool"):
        dlop.jax.op("sum", keepdims=1)
    with pytest.raises(dlop.UnsupportedError, match="view op"):
        dlop.jax.op("transpose")
    with pytest.raises(TypeError, match="takes 1 input"):
        dlop.jax.op("exp")(jnp.ones(2), jnp.ones(2))
    with pytest.raises(TypeError, match="expected a dlop op or its name"):
        dlop.jax.op(42)


def test_handler_refuses_calls_that_do_not_come_from_dlop_jax():
    x = jnp.ones(3, dtype="float32")
    result = jax.ShapeDtypeStruct((3,), jnp.float32)
    with pytest.raises(Exception, match="no string attribute 'dlop_op'"):
        jax.block_until_ready(jax.ffi.ffi_call("dlop_call", result)(x))
    with pytest.raises(Exception, match="no loaded op is named 'not_an_op'"):
        jax.block_until_ready(jax.ffi.ffi_call("dlop_call", result)(x, dlop_op="not_an_op"))
    with pytest.raises(Exception, match="output 0 is float32\\[4\\] but the op gives float32\\[3\\]"):
        jax.block_until_ready(jax.ffi.ffi_call("dlop_call", jax.ShapeDtypeStruct((4,), jnp.float32))(
            x, dlop_op="exp"))


class JaxTwice(dlop.Op):
    """A dlop.Op written in Python (no other test calls it, so dlop.jax registers it)."""
    __props__ = ()

    def make_node(self, x):
        if x.dtype not in ("float32", "float64"):
            raise dlop.DlopTypeError(f"JaxTwice takes float32 or float64, not {x.dtype}")
        return dlop.Apply(self, [x], [x.type()])

    def infer_shape(self, node, input_shapes):
        return [input_shapes[0]]

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0] * 2


def test_a_dlop_op_instance_eager_jit_and_vmap():
    twice = dlop.jax.op(JaxTwice())  # an instance: its registered op, registered here
    assert twice.dlop_op is dlop.ops.JaxTwice and dlop.jax.op(dlop.ops.JaxTwice).dlop_op is twice.dlop_op
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(np.asarray(twice(jnp.asarray(x))), x * 2)
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda v: twice(v) + 1)(x)), x * 2 + 1)
    np.testing.assert_array_equal(np.asarray(jax.vmap(twice)(x)), x * 2)
    with pytest.raises(dlop.DlopTypeError, match="JaxTwice takes float32 or float64, not int32"):
        twice(jnp.zeros(3, jnp.int32))
