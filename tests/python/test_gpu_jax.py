"""test_gpu_jax.py — dlop ops inside JAX on CUDA (dlop.jax): eager and jax.jit next to native
ops against jnp, parameters, vmap, float16/bfloat16, XLA's device buffers reaching the kernel
uncopied (by pointer), the plugin's run-time error reaching Python, and many calls in a loop
(the prepared call and XLA's stream reused, results right). Without a usable GPU, or without a
JAX that has CUDA devices, every test skips with the reason; DLOP_REQUIRE_GPU=1 turns that
into a failure."""
import os

# JAX takes 75 % of the GPU's memory at start by default, which would starve the GPU tests that
# ctest runs beside this one.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np
import pytest

import dlop
from grad_w_support import gpu_unusable_reason, skip_or_fail


def _reason():
    reason = gpu_unusable_reason()
    if reason is not None:
        return "no GPU usable: %s" % reason
    try:
        import jax
    except ImportError as error:
        return "no GPU usable through JAX: JAX is not installed (%s)" % error
    try:
        if not jax.devices("gpu"):
            return "no GPU usable through JAX: jax.devices('gpu') is empty"
    except RuntimeError as error:
        return "no GPU usable through JAX: %s" % error
    return None


REASON = _reason()


@pytest.fixture(autouse=True)
def require_gpu():
    skip_or_fail(REASON)


FIXTURES = os.path.join(os.environ.get("DLOP_FIXTURE_DIR", ""), "adapters", "adapter_ops.so")


def gpu_array(values):
    import jax
    return jax.device_put(values, jax.devices("gpu")[0])


def test_exp_in_jit_on_the_gpu_matches_jnp():
    import jax
    import jax.numpy as jnp
    import dlop.jax
    assert dlop.jax.available(), dlop.jax.unavailable_reason()
    exp = dlop.jax.op("exp")
    x = gpu_array(np.linspace(-4, 4, 1 << 20, dtype=np.float32))
    for f in (exp, jax.jit(exp)):
        out = f(x)
        assert out.devices() == x.devices()
        np.testing.assert_allclose(np.asarray(out), np.asarray(jnp.exp(x)), rtol=2e-6)
    for dtype in (jnp.float16, jnp.bfloat16):
        h = x.astype(dtype)
        np.testing.assert_allclose(np.asarray(jax.jit(exp)(h), dtype=np.float32),
                                   np.asarray(jnp.exp(h), dtype=np.float32), rtol=1e-2)


def test_jit_mixes_dlop_and_native_ops_on_the_gpu():
    import jax
    import jax.numpy as jnp
    import dlop.jax
    add, total = dlop.jax.op("add"), dlop.jax.op("sum", axes=[1])

    @jax.jit
    def f(x, y):
        return total(add(jnp.sin(x), y) * 3.0)

    x = gpu_array(np.random.default_rng(0).standard_normal((256, 512)).astype(np.float32))
    y = gpu_array(np.random.default_rng(1).standard_normal(512).astype(np.float32))
    expected = np.sum((np.sin(np.asarray(x)) + np.asarray(y)) * 3.0, axis=1)
    for _ in range(50):  # XLA's stream and the prepared call are reused call after call
        out = f(x, y)
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-4, atol=1e-3)
    batched = jax.jit(jax.vmap(add, in_axes=(0, None)))(x, y)
    np.testing.assert_allclose(np.asarray(batched), np.asarray(x) + np.asarray(y), rtol=1e-6)


def test_zero_copy_on_the_gpu_by_pointer():
    import jax
    import dlop.jax
    if "fixture_address" not in dlop.ops:
        dlop.load_plugin(FIXTURES)
    address = dlop.jax.op("fixture_address")
    x = gpu_array(np.arange(4096, dtype=np.float32))
    assert int(jax.jit(address)(x)) == x.unsafe_buffer_pointer()


def test_plugin_error_on_the_gpu_reaches_python():
    import jax
    import jax.numpy as jnp
    import dlop.jax
    if "fixture_fails_at_run" not in dlop.ops:
        dlop.load_plugin(FIXTURES)
    fails = dlop.jax.op("fixture_fails_at_run")
    with pytest.raises(Exception, match="fixture_fails_at_run refuses to run"):
        jax.block_until_ready(jax.jit(fails)(gpu_array(np.zeros(3, np.float32))))


def test_pytensor_jax_mode_on_the_gpu():
    """PyTensor's JAX backend jits on JAX's default device, the GPU here: dlop's custom calls
    run there (PyTensor may be missing on the GPU machine: then this one skips)."""
    import jax
    pytensor = pytest.importorskip("pytensor")
    import pytensor.tensor as pt
    from dlop.pytensor_adapter import as_op
    assert jax.default_backend() == "gpu"
    x = pt.matrix("x", dtype="float32")
    f = pytensor.function([x], as_op("sum", axes=[1])(as_op("exp")(x)) * 2, mode="JAX")
    value = np.random.default_rng(4).standard_normal((64, 33)).astype(np.float32)
    np.testing.assert_allclose(f(value), np.exp(value).sum(axis=1) * 2, rtol=1e-5)
