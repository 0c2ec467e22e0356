"""fusion_reduce_cases.py — the tests of reductions fused with the group computing their input,
shared by test_fusion_reduce.py (CPU) and test_gpu_fusion_reduce.py (CUDA), which import them
and give the `device` fixture. A case is a reduction of an elementwise body (exp(a) * b for
floats, a * b + a for integers) compiled fused and unfused on one device and run on the same
random inputs (dlop arrays, bfloat16 included); fused is compared with unfused the way the
reduce plugin's tests compare with exact sums: sum and mean of floats within the output's
rounding plus the accumulation bound relative to the sum of |values| (the summation order
differs), integer sums, max and min exactly (NaN where NaN, a zero's sign aside). Every dtype
the reduce ops declare, every axis and the last ones, odd, long, empty and size-1 axes, strided
and broadcast inputs, NaN, row softmax, what explain() says, and fuse=False."""
import numpy as np
import pytest

import dlop

FLOATS = ["float16", "bfloat16", "float32", "float64"]
INTEGERS = ["int8", "int16", "int32", "int64", "uint8"]
DTYPES = {"sum": INTEGERS + FLOATS, "mean": FLOATS, "max": INTEGERS + FLOATS,
          "min": INTEGERS + FLOATS}
REDUCE = {"sum": dlop.sum, "mean": dlop.mean, "max": dlop.max, "min": dlop.min}
# The output's rounding and the accumulation bound (relative to sum |x|) of the reduce tests.
ROUNDING = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-6, "float64": 1e-13}
ACCUMULATION = {"float16": 4e-6, "bfloat16": 4e-6, "float32": 4e-6, "float64": 1e-14}


def body(a, b):
    """The elementwise stage: a group of two or three nodes for every dtype."""
    if a.dtype in FLOATS:
        return dlop.exp(a) * b
    return a * b + a


def random_values(dtype, shape, seed, low=None, high=None):
    rng = np.random.default_rng(seed)
    if dtype in FLOATS:
        low, high = (-2.0, 1.0) if low is None else (low, high)
        return rng.uniform(low, high, shape)
    info = np.iinfo(dtype)
    low = max(info.min, -20) if low is None else low
    high = min(info.max, 20) if high is None else high
    return rng.integers(low, high + 1, shape)


def to_dlop(values, dtype, device):
    """A dlop array of dtype on device from float64 or integer values (bfloat16 through
    float32, which NumPy lacks)."""
    if dtype == "bfloat16":
        return dlop.asarray(np.asarray(values, np.float32), device=device).astype("bfloat16")
    return dlop.asarray(np.ascontiguousarray(np.asarray(values).astype(dtype)), device=device)


def to_numpy(array):
    """A dlop array's values on the host (bfloat16 as float32)."""
    if array.dtype == "bfloat16":
        array = array.astype("float32")
    return np.asarray(array.numpy())


def build(op, dtype, ndim, axis, keepdims, b_shape=None):
    """Variables a, b (b of b_shape's rank when given: broadcast) and (values, reduced)."""
    a = dlop.tensor("a", dtype, shape=(None,) * ndim)
    b = dlop.tensor("b", dtype, shape=(None,) * (ndim if b_shape is None else len(b_shape)))
    values = body(a, b)
    return a, b, values, REDUCE[op](values, axis=axis, keepdims=keepdims)


def compare(op, dtype, got, want, values, axis, keepdims, what):
    """Fused (got) against unfused (want), both NumPy arrays; values are the unfused
    elementwise stage's, for the accumulation bound."""
    assert got.shape == want.shape and got.dtype == want.dtype, what
    if dtype not in FLOATS:
        assert np.array_equal(got, want), "%s: fused %s differs from unfused %s" % (what, got, want)
        return
    want64 = want.astype(np.float64)
    if op in ("max", "min"):
        # exact selection, but of exp's values: the plugins' AVX2/AVX-512 copies contract
        # multiply-adds where the fused kernel does not (1 ulp apart on some hosts)
        tolerance = ROUNDING[dtype] * np.abs(want64)
    else:
        scale = np.sum(np.abs(values.astype(np.float64)), axis=axis, keepdims=keepdims)
        if op == "mean":
            count = values.size // max(want.size, 1)
            scale = scale / max(count, 1)
        tolerance = 2 * (ROUNDING[dtype] * np.abs(want64) + ACCUMULATION[dtype] * scale)
    got64 = got.astype(np.float64)
    good = (np.isnan(got64) & np.isnan(want64)) | (np.abs(got64 - want64) <= tolerance) | (
        np.isinf(want64) & (got64 == want64))
    assert good.all(), "%s: first bad at %s: fused %r, unfused %r (tolerance %r)" % (
        what, np.argwhere(~good)[0], got64[~good][0], want64[~good][0], tolerance[~good][0])


def run_case(op, dtype, shape, axis, keepdims, device, seed=0, b_shape=None, a_values=None,
             a_input=None):
    """Compiles op(body(a, b)) fused and unfused on device, runs both on the same inputs (a from
    a_values, or a_input as given: a strided or broadcast view), compares; returns the fused
    function."""
    a, b, values, y = build(op, dtype, len(shape), axis, keepdims, b_shape)
    fused = dlop.function([a, b], y, device=device)
    assert "values computed in the kernel)" in fused.explain(), fused.explain()
    unfused = dlop.function([a, b], [y, values], device=device, fuse=False)
    va = random_values(dtype, shape, seed) if a_values is None else a_values
    vb = random_values(dtype, shape if b_shape is None else b_shape, seed + 1)
    xa = to_dlop(va, dtype, device) if a_input is None else a_input
    xb = to_dlop(vb, dtype, device)
    got = to_numpy(fused(xa, xb))
    want, stage = (to_numpy(r) for r in unfused(xa, xb))
    compare(op, dtype, got, want, stage, axis, keepdims,
            "%s %s %s axis=%s keepdims=%s on %s" % (op, dtype, shape, axis, keepdims, device))
    again = to_numpy(fused(xa, xb))
    assert got.tobytes() == again.tobytes(), "a second run differs"
    return fused


def shown(device):
    """The device as explain() names it."""
    return "cuda:0" if device == "cuda" else device


def softmax(x):
    m = dlop.max(x, axis=-1, keepdims=True)
    e = dlop.exp(x - m)
    return e / dlop.sum(e, axis=-1, keepdims=True)


def numpy_softmax(values):
    values = values.astype(np.float64)
    e = np.exp(values - values.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


SOFTMAX_TOLERANCE = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-6, "float64": 1e-13}


# ---- the tests (each takes the importing file's `device` fixture) ------------------------

SHAPES = [((1000,), None), ((37, 129), -1), ((5, 6, 7), (1, 2)), ((5, 6, 7), None)]


@pytest.mark.parametrize("op,dtype", [(op, d) for op in DTYPES for d in DTYPES[op]])
@pytest.mark.parametrize("keepdims", [False, True])
def test_every_dtype_and_axes(device, op, dtype, keepdims):
    for shape, axis in SHAPES:
        fused = run_case(op, dtype, shape, axis, keepdims, device, seed=len(shape))
        text = fused.explain()
        over = "every axis" if axis is None else "the last axis" if axis == -1 else "the last 2 axes"
        assert "; %s over %s of values computed in the kernel)" % (op, over) in text, text
        assert "fusion: off" not in text and text.count("fused(") == 1


@pytest.mark.parametrize("n", [1, 7, 8, 127, 128, 129, 1000, 32769, 100003])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_odd_and_long_reductions(device, n, op):
    run_case(op, "float32", (n,), None, False, device, seed=n)
    run_case(op, "float64", (3, n), -1, True, device, seed=n)


def test_many_short_rows_and_few_long_ones(device):
    for shape in [(5000, 3), (3, 70001), (2, 3, 40000)]:
        for op in ("sum", "mean", "min"):
            run_case(op, "float32", shape, -1, False, device, seed=shape[0])
    run_case("sum", "int32", (3, 70001), -1, False, device)


def test_empty_and_size_one_axes(device):
    for op in ("sum", "mean"):
        fused = run_case(op, "float32", (4, 0), -1, False, device)  # every output empty
        assert "over the last axis" in fused.explain()
        run_case(op, "float64", (0,), None, False, device)
        run_case(op, "float32", (0, 5), -1, True, device)  # no output at all
    for op in ("sum", "max", "min", "mean"):
        run_case(op, "float32", (6, 1), -1, False, device)
        run_case(op, "float32", (1, 1, 9), (1, 2), True, device)
        run_case(op, "float64", (1,), None, False, device)
    a, b, _, y = build("max", "float32", 2, -1, False)
    f = dlop.function([a, b], y, device=device)
    empty = to_dlop(np.zeros((3, 0)), "float32", device)
    with pytest.raises(dlop.DlopError, match="cannot reduce an empty axis"):
        f(empty, empty)


def test_strided_and_broadcast_inputs(device):
    for op in ("sum", "max"):
        for dtype in ("float32", "int16"):
            # a transposed view: the reduced axis steps by 9 elements
            transposed = dlop.transpose(to_dlop(random_values(dtype, (300, 9), 1), dtype, device))
            run_case(op, dtype, (9, 300), -1, False, device, a_input=transposed)
            run_case(op, dtype, (9, 300), None, True, device, a_input=transposed)
            # a broadcast view: zero strides inside the input
            row = to_dlop(random_values(dtype, (1, 300), 2), dtype, device)
            run_case(op, dtype, (9, 300), -1, False, device, a_input=dlop.broadcast_to(row, (9, 300)))
        run_case(op, "float32", (40, 33), -1, False, device, b_shape=(40, 1))  # a column
        run_case(op, "float32", (40, 33), -1, False, device, b_shape=(1, 33))  # a row
        run_case(op, "float64", (40, 33), None, False, device, b_shape=(33,))
        run_case(op, "int16", (40, 33), None, False, device, b_shape=(1,))
    if device == "cpu":  # NumPy's views reach a CPU function as they are
        big = random_values("float32", (9, 600), 3).astype(np.float32)
        for view in (big[:, ::2], big[::-1, 1::2], big[::2, ::-3]):
            run_case("sum", "float32", view.shape, -1, False, device, a_input=view)
            run_case("min", "float32", view.shape, None, False, device, a_input=view)


def test_constants_in_the_stage(device):
    x = dlop.matrix("x", "float32")
    y = dlop.sum(dlop.exp(x * 0.5) - 1.0, axis=-1)
    fused, unfused = dlop.function([x], y, device=device), dlop.function([x], y, device=device,
                                                                          fuse=False)
    assert "(in the code)" in fused.explain() and "sum over the last axis" in fused.explain()
    xs = to_dlop(random_values("float32", (17, 1001), 3), "float32", device)
    np.testing.assert_allclose(to_numpy(fused(xs)), to_numpy(unfused(xs)), rtol=2e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", FLOATS)
def test_nan_propagates_through_max_and_min(device, dtype):
    values = random_values(dtype, (12, 257), 5)
    values[2, 100] = np.nan      # one NaN in a row
    values[5, :] = np.nan        # a row of NaN
    values[7, 0] = np.inf
    values[8, 3] = -np.inf
    for op in ("max", "min"):
        run_case(op, dtype, (12, 257), -1, False, device, a_values=values)
        run_case(op, dtype, (12, 257), None, False, device, a_values=values)
    a, b, _, y = build("max", dtype, 2, -1, False)
    got = to_numpy(dlop.function([a, b], y, device=device)(
        to_dlop(values, dtype, device), to_dlop(np.ones((12, 257)), dtype, device)))
    rows = np.isnan(got)
    assert rows[2] and rows[5] and rows.sum() == 2


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("shape", [(64, 1000), (3, 40000), (129, 7)])
def test_row_softmax(device, dtype, shape):
    x = dlop.matrix("x", dtype)
    y = softmax(x)
    fused, unfused = dlop.function([x], y, device=device), dlop.function([x], y, device=device,
                                                                          fuse=False)
    text = fused.explain()
    # a row group: max, sub, exp, sum and div in one kernel reading each row once
    # (fusion_row_cases.py tests row groups themselves)
    assert ("function on %s: 1 node (5 of the graph's nodes run in fused kernels)"
            % shown(device)) in text, text
    assert "(row group 0: 5 nodes in one kernel, dlop_fused_g0; 2 reductions" in text
    values = random_values(dtype, shape, 7, -8.0, 8.0)
    xs = to_dlop(values, dtype, device)
    got, want = to_numpy(fused(xs)), to_numpy(unfused(xs))
    tolerance = 4 * SOFTMAX_TOLERANCE[dtype]
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tolerance,
                               atol=tolerance / shape[1])
    reference = numpy_softmax(values.astype(dtype))
    np.testing.assert_allclose(got.astype(np.float64), reference, rtol=tolerance,
                               atol=tolerance / shape[1] * 4)


def test_a_reduction_over_leading_axes_reads_its_input(device):
    a, b, _, y = build("sum", "float32", 2, 0, False)
    fused = dlop.function([a, b], y, device=device)
    text = fused.explain()
    assert ("not fused: it reduces axes (0) of a rank-2 input, and a fused reduction covers "
            "every axis or the last ones: it reads its input") in text, text
    assert "(group 0: 2 nodes in one kernel" in text  # the body still fuses on its own
    unfused = dlop.function([a, b], y, device=device, fuse=False)
    xa = to_dlop(random_values("float32", (30, 20), 1), "float32", device)
    xb = to_dlop(random_values("float32", (30, 20), 2), "float32", device)
    assert np.array_equal(to_numpy(fused(xa, xb)), to_numpy(unfused(xa, xb)))


def test_an_input_that_is_also_returned_is_read_from_memory(device):
    a, b, values, y = build("sum", "float32", 1, None, False)
    fused = dlop.function([a, b], [values, y], device=device)
    text = fused.explain()
    assert "not fused: its input" in text and "is a function output, written anyway" in text
    xa = to_dlop(random_values("float32", (500,), 1), "float32", device)
    xb = to_dlop(random_values("float32", (500,), 2), "float32", device)
    got_values, got = (to_numpy(r) for r in fused(xa, xb))
    np.testing.assert_allclose(got, got_values.astype(np.float64).sum(), rtol=1e-5)


def test_a_value_also_read_elsewhere_is_computed_twice(device):
    x = dlop.vector("x", "float32")
    e = x * 2.0 + 1.0  # exact bodies: cheap to compute twice on any device
    y = e / dlop.sum(e)
    fused, unfused = dlop.function([x], y, device=device), dlop.function([x], y, device=device,
                                                                          fuse=False)
    text = fused.explain()
    assert "function on %s: 2 nodes (4 of the graph's nodes run in fused kernels)" % shown(device) in text
    assert "sum over every axis" in text and text.count("mul(") == 2
    xs = to_dlop(random_values("float32", (4099,), 9), "float32", device)
    np.testing.assert_allclose(to_numpy(fused(xs)), to_numpy(unfused(xs)), rtol=1e-5, atol=1e-9)


def test_math_read_elsewhere_is_computed_twice_on_cuda_only(device):
    x = dlop.vector("x", "float64")
    e = dlop.exp(x)
    y = e / dlop.sum(e)
    fused = dlop.function([x], y, device=device)
    text = fused.explain()
    if device == "cpu":
        assert "not fused: its input exp.0 is also read elsewhere and exp calls math functions" in text
    else:
        assert "function on %s: 2 nodes (3 of the graph's nodes run in fused kernels)" % shown(device) in text
    xs = to_dlop(random_values("float64", (3001,), 4), "float64", device)
    want = np.exp(to_numpy(xs))
    np.testing.assert_allclose(to_numpy(fused(xs)), want / want.sum(), rtol=1e-13)


def test_two_reductions_of_one_value(device):
    x = dlop.matrix("x", "float32")
    e = dlop.exp(x * 0.5)
    outputs = [dlop.max(e, axis=-1), dlop.mean(e, axis=-1)]
    fused = dlop.function([x], outputs, device=device)
    unfused = dlop.function([x], outputs, device=device, fuse=False)
    text = fused.explain()
    if device == "cpu":  # exp feeds both: computed once, written, read by each (see above)
        assert "function on cpu: 3 nodes (2 of the graph's nodes run in fused kernels)" in text
        assert text.count("not fused: its input exp.1 is also read elsewhere") == 2, text
    else:  # each reduction computes exp itself; e is never written
        assert "function on %s: 2 nodes (4 of the graph's nodes run in fused kernels)" % shown(device) in text
        assert "max over the last axis" in text and "mean over the last axis" in text
    xs = to_dlop(random_values("float32", (33, 2049), 8), "float32", device)
    (got_max, got_mean), (want_max, want_mean) = ([to_numpy(r) for r in f(xs)] for f in (fused, unfused))
    # a max of exp's values: exact selection, exp within an ulp or two (see compare)
    np.testing.assert_allclose(got_max, want_max, rtol=ROUNDING["float32"])
    np.testing.assert_allclose(got_mean, want_mean, rtol=1e-5)


def test_a_stage_past_the_operand_limit_reads_the_rest(device):
    xs = [dlop.vector("x%d" % i, "int32") for i in range(20)]
    t = xs[0]
    for v in xs[1:]:
        t = t + v
    y = dlop.sum(t)
    fused = dlop.function(xs, y, device=device)
    unfused = dlop.function(xs, y, device=device, fuse=False)
    text = fused.explain()
    assert "sum over every axis" in text and "function on %s: 2 nodes" % shown(device) in text, text
    values = [to_dlop(random_values("int32", (777,), i), "int32", device) for i in range(20)]
    assert to_numpy(fused(*values)) == to_numpy(unfused(*values))


def test_cuda_runs_replay_a_graph_of_the_fused_reduction(device):
    if device == "cpu":
        pytest.skip("CUDA graphs are CUDA's")
    x = dlop.matrix("x", "float32")
    # the row group and a column sum beside it: two kernels, which a replayed graph launches at once
    f = dlop.function([x], [softmax(x), dlop.sum(x, axis=0)], device=device)
    for seed in range(4):  # new inputs every call: the graph's addresses move
        values = random_values("float32", (300, 5000), seed, -4.0, 4.0)
        got, column_sums = f(to_dlop(values, "float32", device))
        np.testing.assert_allclose(to_numpy(got), numpy_softmax(values.astype(np.float32)),
                                   rtol=1e-5, atol=1e-9)
        np.testing.assert_allclose(to_numpy(column_sums), values.astype(np.float32).sum(
            axis=0, dtype=np.float64), rtol=1e-5, atol=1e-3)
    line = [l for l in f.explain().splitlines() if l.startswith("cuda graphs: ")][0]
    assert line.startswith("cuda graphs: replayed (") and "1 recorded" in line, line


def test_cuda_runs_a_one_kernel_softmax_without_a_graph(device):
    if device == "cpu":
        pytest.skip("CUDA graphs are CUDA's")
    x = dlop.matrix("x", "float32")
    f = dlop.function([x], softmax(x), device=device)
    values = random_values("float32", (300, 5000), 0, -4.0, 4.0)
    np.testing.assert_allclose(to_numpy(f(to_dlop(values, "float32", device))),
                               numpy_softmax(values.astype(np.float32)), rtol=1e-5, atol=1e-9)
    line = [l for l in f.explain().splitlines() if l.startswith("cuda graphs: ")][0]
    assert line == "cuda graphs: not replayed: 1 kernel node: a graph launch would save nothing " \
        "over its launch", line


def test_fuse_false_reads_every_intermediate(device):
    a, b, _, y = build("sum", "float32", 1, None, False)
    text = dlop.function([a, b], y, device=device, fuse=False).explain()
    assert "fusion: off (turned off when the function was compiled)" in text
    assert "fused(" not in text and "not fused" not in text
