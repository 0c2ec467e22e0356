"""source_elementwise_cases.py — the tests of ops defined by dlop.elementwise that run on a
device: test_source_elementwise.py runs them on the CPU, test_gpu_source_elementwise.py on
CUDA (each module gives the ``device`` fixture).  Results against NumPy for every declared
dtype, broadcasting, parameters, two outputs, a fused function of the op and its neighbours
against the same function unfused, and repeated eager calls (remembered per signature in C)
followed by calls that differ in shape, dtype, strides or parameters.  The ops are defined once per process, at
import (defining one again returns it), so each is compiled once per signature."""
import numpy as np
import pytest

import dlop

FLOATS = ("float16", "bfloat16", "float32", "float64")
# float16 and bfloat16 compute in float32 and round once on the store; float32 bodies call
# double math functions in C and float ones under NVRTC
TOLERANCE = {"float16": 1e-3, "bfloat16": 8e-3, "float32": 2e-6, "float64": 1e-13, "int32": 0}

softplus = dlop.elementwise("softplus", "y = x > 20 ? x : log1p(exp(x))", inputs="x",
                            outputs="y", dtypes=FLOATS)
scaled = dlop.elementwise("src_scaled_diff", "y = (T)(alpha * (x - w) + shift)", inputs="x, w",
                          outputs="y", dtypes=FLOATS + ("int32",),
                          params={"alpha": 1.5, "shift": 2})
# a parameter of each kind, in an a * x + b the compilers could contract (they are told not to)
affine = dlop.elementwise("src_affine_pow", "y = (T)(alpha * x + pow(alpha, (double)k))",
                          inputs="x", outputs="y", dtypes=("float32", "float64"),
                          params={"alpha": 1.0, "k": 1})
sum_diff = dlop.elementwise("src_sum_diff", "s = x + w;\nd = x - w;", inputs="x w",
                            outputs=("s", "d"), dtypes=("float32", "float64"))


def to_dlop(values, dtype, device):
    """A dlop array of dtype on device (bfloat16 through float32, which NumPy lacks)."""
    if dtype == "bfloat16":
        return dlop.asarray(np.asarray(values, np.float32), device=device).astype("bfloat16")
    return dlop.asarray(np.ascontiguousarray(np.asarray(values).astype(dtype)), device=device)


def to_numpy(array):
    if array.dtype == "bfloat16":
        array = array.astype("float32")
    return np.asarray(array.numpy())


def rounded(values, dtype):
    """values as dtype holds them, as float64 (the inputs the op really sees)."""
    return to_numpy(to_dlop(values, dtype, "cpu")).astype(np.float64)


@pytest.mark.parametrize("dtype", FLOATS)
def test_softplus_against_numpy(device, dtype):
    xs = np.concatenate([np.linspace(-30, 30, 1001), [0.0, -0.0, 20.0, 20.5]])
    got = softplus(to_dlop(xs, dtype, device))
    assert got.dtype == dtype and got.device.startswith(device) and got.shape == xs.shape
    x = rounded(xs, dtype)
    want = rounded(np.where(x > 20, x, np.log1p(np.exp(x))), dtype)  # as dtype can hold it
    np.testing.assert_allclose(to_numpy(got), want, rtol=TOLERANCE[dtype], atol=1e-300)


@pytest.mark.parametrize("dtype", FLOATS + ("int32",))
def test_broadcasting_and_parameters(device, dtype):
    xs = np.arange(12).reshape(3, 4) - 5
    ws = np.array([1, -2, 3, 0])
    x, w = to_dlop(xs, dtype, device), to_dlop(ws, dtype, device)
    got = to_numpy(scaled(x, w))
    assert got.shape == (3, 4)
    tolerance = TOLERANCE[dtype]
    if dtype == "int32":  # the double result truncated by the cast to T, as C does
        np.testing.assert_array_equal(got, np.trunc(1.5 * (xs - ws) + 2))
    else:
        np.testing.assert_allclose(got, 1.5 * (xs - ws) + 2, rtol=tolerance, atol=tolerance)
    got = to_numpy(scaled(x, w, alpha=-0.25, shift=7))
    want = -0.25 * (xs - ws) + 7
    if dtype == "int32":
        np.testing.assert_array_equal(got, np.trunc(want))
    else:
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)


def test_two_outputs(device):
    xs = np.random.default_rng(2).standard_normal((5, 7))
    ws = np.random.default_rng(3).standard_normal(7)
    s, d = sum_diff(to_dlop(xs, "float64", device), to_dlop(ws, "float64", device))
    np.testing.assert_array_equal(to_numpy(s), xs + ws)
    np.testing.assert_array_equal(to_numpy(d), xs - ws)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_fused_with_neighbours_is_one_group_and_unfused_bits(device, dtype):
    x = dlop.vector("x", dtype)
    b = dlop.vector("b", dtype)
    y = softplus(x * 2 + b) * b - 1
    fused = dlop.function([x, b], y, device=device)
    unfused = dlop.function([x, b], y, device=device, fuse=False)
    text = fused.explain()
    assert "1 node (5 of the graph's nodes run in fused kernels)" in text, text
    assert "softplus(" in text and "(in the kernel)" in text, text
    rng = np.random.default_rng(5)
    xs, bs = to_dlop(rng.uniform(-15, 15, 4099), dtype, device), to_dlop(rng.uniform(-2, 2, 4099), dtype, device)
    got, want = to_numpy(fused(xs, bs)), to_numpy(unfused(xs, bs))
    np.testing.assert_array_equal(got.view(np.uint16 if dtype == "float16" else np.uint32),
                                  want.view(np.uint16 if dtype == "float16" else np.uint32))


def test_strided_inputs_through_a_transpose(device):
    """A view feeding the op: the kernel reads its input through strides (fused and not)."""
    xs = np.random.default_rng(7).uniform(-5, 5, (33, 65))
    x = dlop.matrix("x", "float64")
    for fuse in (True, False):
        f = dlop.function([x], softplus(dlop.transpose(x)), device=device, fuse=fuse)
        got = to_numpy(f(to_dlop(xs, "float64", device)))
        np.testing.assert_allclose(got, np.log1p(np.exp(xs.T)), rtol=1e-13)


def affine_want(xs, alpha, k, dtype):
    """affine's result in NumPy: the body computes in double, then rounds to dtype."""
    x = rounded(xs, dtype)
    return (alpha * x + np.power(alpha, float(k))).astype(dtype)


def test_new_parameter_values_compile_nothing(device):
    """Parameters are the kernel's run-time values: 20 values, at most one compile."""
    xs = np.random.default_rng(11).uniform(-3, 3, 1000)
    x = to_dlop(xs, "float32", device)
    before = dlop.jit_stats()["compiles"]
    for i, alpha in enumerate(np.linspace(-2.7, 3.3, 20)):
        got = to_numpy(affine(x, alpha=float(alpha), k=i % 5))
        np.testing.assert_allclose(got, affine_want(xs, alpha, i % 5, "float32"), rtol=2e-6,
                                   atol=2e-6)
    assert dlop.jit_stats()["compiles"] - before <= 1


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_nodes_take_their_own_parameters_with_unfused_bits(device, dtype):
    """Two nodes of one op in one kernel, each with its values; bits as unfused and as eager
    calls; another function of other values compiles nothing new."""
    xs = np.random.default_rng(12).uniform(-4, 4, 4099)
    x = dlop.vector("x", dtype)

    def graph(a, b):
        return affine(affine(x, alpha=a, k=3) * 0.75, alpha=b, k=2)

    values = (0.1 + 1e-9, -1.7320508075688772)  # neither exact in binary
    fused = dlop.function([x], graph(*values), device=device)
    unfused = dlop.function([x], graph(*values), device=device, fuse=False)
    assert "1 node (3 of the graph's nodes run in fused kernels)" in fused.explain()
    xd = to_dlop(xs, dtype, device)
    eager = affine(affine(xd, alpha=values[0], k=3) * 0.75, alpha=values[1], k=2)
    bits = np.uint32 if dtype == "float32" else np.uint64
    got = to_numpy(fused(xd))
    np.testing.assert_array_equal(got.view(bits), to_numpy(unfused(xd)).view(bits))
    np.testing.assert_array_equal(got.view(bits), to_numpy(eager).view(bits))
    before = dlop.jit_stats()["compiles"]
    other = dlop.function([x], graph(2.5, -0.3), device=device)
    want = affine_want(0.75 * affine_want(xs, 2.5, 3, dtype).astype(np.float64), -0.3, 2, dtype)
    np.testing.assert_allclose(to_numpy(other(xd)), want, rtol=1e-6)
    assert dlop.jit_stats()["compiles"] == before


# ---- repeated eager calls: Op.__call__ remembers the compiled function per signature --------

def test_repeated_calls_after_a_changed_signature(device):
    """Each call after remembered ones, with another shape, rank, dtype, strides or parameter
    value (kind, sign of zero, order of the keywords), gives its own result: never the result
    of a remembered signature that differs in anything the compile reads."""
    xs = np.random.default_rng(21).uniform(-3, 3, (6, 8))
    calls = [(xs[0], "float32", False, {}), (xs[0], "float32", False, {}),
             (xs[1, :5], "float32", False, {}), (xs, "float32", False, {}),
             (xs, "float64", False, {}), (xs, "float64", True, {}), (xs[0], "float32", False, {}),
             (xs, "float32", True, {"alpha": 2.0}), (xs, "float32", True, {"alpha": 2}),
             (xs, "float32", True, {"alpha": 2.0, "k": 3}),
             (xs, "float32", True, {"k": 3, "alpha": 2.0}),
             (xs, "float64", False, {"alpha": -0.0, "k": 1}),
             (xs, "float64", False, {"alpha": 0.0, "k": 1}),
             (xs, "float64", False, {"alpha": -0.0, "k": 1}),
             (np.float64(1.5), "float64", False, {"alpha": 3.0}), (xs[0], "float32", False, {})]
    for values, dtype, transposed, params in calls:
        values = np.asarray(values)
        x = to_dlop(values, dtype, device) if values.ndim else dlop.asarray(
            values.astype(dtype), device=device)
        if transposed:  # a strided view of the array
            x, values = x.T, values.T
        got = to_numpy(affine(x, **params))
        want = affine_want(values, params.get("alpha", 1.0), params.get("k", 1), dtype)
        want = want.reshape(values.shape)  # rounded() gives a 0-d value one dimension
        assert got.dtype == want.dtype and got.shape == want.shape
        # bits, so that -0.0 and 0.0 differ
        np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


def test_repeated_calls_of_two_inputs_and_two_outputs(device):
    """A two-input op after a remembered call, broadcasting another way; two outputs stay a
    tuple on every call."""
    rng = np.random.default_rng(22)
    for xs, ws in [(rng.standard_normal(7), rng.standard_normal(7))] * 2 + [
            (rng.standard_normal((4, 1)), rng.standard_normal(5)),
            (rng.standard_normal(3), rng.standard_normal(3))]:
        x, w = to_dlop(xs, "float64", device), to_dlop(ws, "float64", device)
        result = sum_diff(x, w)
        assert isinstance(result, tuple) and len(result) == 2
        np.testing.assert_array_equal(to_numpy(result[0]), xs + ws)
        np.testing.assert_array_equal(to_numpy(result[1]), xs - ws)
        got = to_numpy(scaled(x.astype("float32"), w.astype("float32"), shift=-1))
        np.testing.assert_allclose(got, 1.5 * (xs - ws) - 1, rtol=2e-6, atol=2e-6)


def test_repeated_plugin_op_calls_after_a_changed_dtype(device):
    """dlop.ops.exp (a plugin's op) takes the same path: float32, float64, float32 again."""
    xs = np.linspace(-3, 3, 16)
    for dtype, values in [("float32", xs), ("float32", xs), ("float64", xs),
                          ("float64", xs.reshape(4, 4)), ("float32", xs[:3])]:
        got = to_numpy(dlop.ops.exp(to_dlop(values, dtype, device)))
        assert got.dtype == dtype and got.shape == values.shape
        np.testing.assert_allclose(got, np.exp(values.astype(dtype)), rtol=TOLERANCE[dtype])
