"""test_fusion.py — elementwise fusion from Python on the CPU: dlop.function fuses the seed chain
y = exp(2x) * b + tanh(x) - 1 into one generated kernel (explain shows the group, its members
and where each value lives), fuse=False runs node by node, both agree with each other and with
NumPy, in any size (0 and odd included), with broadcasting, strided inputs and a member's value
returned too; eager calls stay unfused; a bad fuse argument is a clear error."""
import numpy as np
import pytest

import dlop


def seed_chain(dtype="float32"):
    x = dlop.vector("x", dtype)
    b = dlop.vector("b", dtype)
    return x, b, dlop.exp(2 * x) * b + dlop.tanh(x) - 1


def test_seed_chain_is_one_kernel():
    x, b, y = seed_chain()
    f = dlop.function([x, b], y)
    text = f.explain()
    assert "function on cpu: 1 node (6 of the graph's nodes run in fused kernels)" in text
    assert "#0 fused(x: float32[?], b: float32[?]) -> float32[?] on cpu (group 0: 6 nodes" in text
    assert text.count("(in the kernel)") == 5 and "(output 0)" in text
    assert "(in the code)" in text  # the Python scalars 2 and 1
    assert "\nfusion: 6 nodes in 1 generated kernel (C, compiled by the host's C compiler)" in text


def test_fuse_false_runs_node_by_node():
    x, b, y = seed_chain()
    g = dlop.function([x, b], y, fuse=False)
    text = g.explain()
    assert "function on cpu: 6 nodes\n" in text
    assert "#3 tanh(x: float32[?]) -> float32[?] on cpu" in text
    assert "\nfusion: off (turned off when the function was compiled)\n" in text
    assert "fused(" not in text


@pytest.mark.parametrize("n", [0, 1, 7, 1000, 100003])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_agrees_with_unfused_and_numpy(n, dtype):
    x, b, y = seed_chain(dtype)
    fused, unfused = dlop.function([x, b], y), dlop.function([x, b], y, fuse=False)
    rng = np.random.default_rng(n)
    xs = rng.uniform(-3, 3, n).astype(dtype)
    bs = rng.uniform(-1, 1, n).astype(dtype)
    got, want = np.asarray(fused(xs, bs)), np.asarray(unfused(xs, bs))
    assert got.shape == (n,) and got.dtype == np.dtype(dtype)
    tolerance = 1e-6 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(got, np.exp(2 * xs) * bs + np.tanh(xs) - 1, rtol=10 * tolerance,
                               atol=10 * tolerance)


def test_float16_chain_is_bit_identical_to_unfused():
    x = dlop.vector("x", "float16")
    y = (x * x + x) * x - 3
    fused, unfused = dlop.function([x], y), dlop.function([x], y, fuse=False)
    xs = np.random.default_rng(1).uniform(-20, 20, 4097).astype(np.float16)
    got, want = np.asarray(fused(xs)), np.asarray(unfused(xs))
    assert "(group 0: 4 nodes" in fused.explain()
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


def test_broadcasting_and_strided_inputs():
    a = dlop.matrix("a", "float64")
    r = dlop.vector("r", "float64")
    y = dlop.sqrt(dlop.abs(a * r + 1.5))
    fused, unfused = dlop.function([a, r], y), dlop.function([a, r], y, fuse=False)
    assert "(group 0: 4 nodes" in fused.explain()
    rng = np.random.default_rng(2)
    big = rng.uniform(-5, 5, (30, 40))
    strided = big[::3, ::2]  # a strided view: handed to the kernel as it is
    rs = rng.uniform(-5, 5, 20)
    got = np.asarray(fused(strided, rs))
    assert np.array_equal(got, np.asarray(unfused(strided, rs)))
    np.testing.assert_allclose(got, np.sqrt(np.abs(strided * rs + 1.5)), rtol=1e-15)
    column = rng.uniform(-5, 5, (7, 1))  # a broadcast column
    got = np.asarray(fused(column, rs))
    assert got.shape == (7, 20)
    assert np.array_equal(got, np.asarray(unfused(column, rs)))


def test_member_value_returned_too():
    x = dlop.vector("x", "float32")
    t = dlop.exp(x)
    y = t * 3 + 1
    f = dlop.function([x], [y, t])
    text = f.explain()
    assert "-> (float32[?], float32[?]) on cpu (group 0: 3 nodes" in text
    assert "exp(x: float32[?]) -> exp.0: float32[?] (output 1)" in text or "(output 1)" in text
    xs = np.linspace(-2, 2, 101, dtype=np.float32)
    got_y, got_t = (np.asarray(a) for a in f(xs))
    want_y, want_t = (np.asarray(a) for a in dlop.function([x], [y, t], fuse=False)(xs))
    assert np.array_equal(got_t, want_t) and np.array_equal(got_y, want_y)


def test_eager_calls_stay_unfused():
    xs = np.arange(10, dtype=np.int16)
    got = np.asarray(dlop.exp(xs))  # a cast to float32 and exp: one eager call
    np.testing.assert_allclose(got, np.exp(xs.astype(np.float32)), rtol=1e-6)


def test_fuse_must_be_a_bool():
    x, b, y = seed_chain()
    with pytest.raises(dlop.DlopTypeError, match="fuse must be True or False, not 1"):
        dlop.function([x, b], y, fuse=1)
