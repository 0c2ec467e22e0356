"""fusion_row_cases.py — the tests of row groups (reductions over the last axis with keepdims and
the elementwise nodes reading their results, one kernel per group), shared by
test_fusion_row.py (CPU) and test_gpu_fusion_row.py (CUDA), which import them and give the
`device` fixture. Softmax, log-softmax, a layer norm's mean, variance and normalize, and graphs
whose row kernels keep values (exp(x - max) read by a later phase, two kept values, a kept
value that is an output too), in float16, bfloat16, float32 and float64, rows of 1, 3, 17, 1000
and 8192 elements and none, rows longer than a row kernel keeps (static: not a row group,
explain says so; known only at run time: read again per phase on CUDA), empty rows, NaN and
-inf rows, strided rows, per-row and one-element inputs, integer rows, several outputs and
groups; fused against fuse=False on the same inputs: within the reduce tests' tolerance (the
summation order differs), max exactly, NaN where NaN."""
import numpy as np
import pytest

import dlop

from fusion_reduce_cases import ROUNDING, shown, to_dlop, to_numpy

FLOATS = ["float16", "bfloat16", "float32", "float64"]
LENGTHS = [1, 3, 17, 1000, 8192]
# relative to the row's largest |value|: the rounding of the values and of a sum of the row
TOLERANCE = {"float16": 4e-3, "bfloat16": 3.2e-2, "float32": 1e-5, "float64": 1e-12}


def softmax(x):
    m = dlop.max(x, axis=-1, keepdims=True)
    e = dlop.exp(x - m)
    return [e / dlop.sum(e, axis=-1, keepdims=True)]


def log_softmax(x):
    d = x - dlop.max(x, axis=-1, keepdims=True)
    return [d - dlop.log(dlop.sum(dlop.exp(d), axis=-1, keepdims=True))]


def layer_norm(x, g, b):
    mean = dlop.mean(x, axis=-1, keepdims=True)
    d = x - mean
    variance = dlop.mean(d * d, axis=-1, keepdims=True)
    return [d / dlop.sqrt(variance + 1e-5) * g + b]


def softmax_over_sum_of_squares(x):
    """exp(x - max), which the row kernels keep, written by phase 2 and read by phase 3 (the sum
    of squares of the softmax p) and by the output p / that sum."""
    e = dlop.exp(x - dlop.max(x, axis=-1, keepdims=True))
    p = e / dlop.sum(e, axis=-1, keepdims=True)
    return [p / dlop.sum(p * p, axis=-1, keepdims=True)]


def softmax_of_tanh_times_tanh(x):
    """Two kept values: tanh(x), read by all three parts, and exp(tanh(x) - max)."""
    t = dlop.tanh(x)
    e = dlop.exp(t - dlop.max(t, axis=-1, keepdims=True))
    return [e / dlop.sum(e, axis=-1, keepdims=True) * t]


def softmax_and_its_exp(x):
    """A kept value that is an output too: exp(x - max) beside the softmax."""
    e = dlop.exp(x - dlop.max(x, axis=-1, keepdims=True))
    return [e / dlop.sum(e, axis=-1, keepdims=True), e]


# name: (build, nodes, reductions)
GRAPHS = {"softmax": (softmax, 5, 2), "log_softmax": (log_softmax, 6, 2),
          "layer_norm": (layer_norm, 9, 2),
          "softmax_over_sum_of_squares": (softmax_over_sum_of_squares, 8, 3),
          "softmax_of_tanh_times_tanh": (softmax_of_tanh_times_tanh, 7, 2),
          "softmax_and_its_exp": (softmax_and_its_exp, 5, 2)}


def functions(graph, dtype, device, shape=(None, None)):
    """The graph fused and unfused, and its inputs' variables (x, and g and b for a layer norm:
    vectors of the row's length)."""
    build = GRAPHS[graph][0]
    x = dlop.matrix("x", dtype, shape=shape)
    inputs = [x] if graph != "layer_norm" else [x, dlop.vector("g", dtype), dlop.vector("b", dtype)]
    outputs = build(*inputs)
    return (dlop.function(inputs, outputs, device=device),
            dlop.function(inputs, outputs, device=device, fuse=False), inputs)


def values_for(graph, dtype, rows, n, seed=3):
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(-8, 8, (rows, n))]
    if graph == "layer_norm":
        arrays += [rng.uniform(0.5, 2, n), rng.uniform(-1, 1, n)]
    return arrays


def run(f, arrays, dtype, device):
    got = f(*[to_dlop(a, dtype, device) for a in arrays])
    results = got if isinstance(got, (list, tuple)) else [got]
    return [to_numpy(r).astype(np.float64) for r in results]


def assert_close(got, want, dtype, what):
    """Equal NaN, equal infinities, the rest within the dtype's tolerance of the row's scale."""
    assert got.shape == want.shape, what
    assert np.array_equal(np.isnan(got), np.isnan(want)), "%s: NaN differs" % what
    finite = np.isfinite(want)
    assert np.array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)]), what
    if want.size == 0:
        return
    scale = np.max(np.abs(np.where(finite, want, 0)), axis=-1, keepdims=True)
    scale = np.maximum(scale, 1e-30)
    error = np.abs(np.where(finite, got, 0) - np.where(finite, want, 0)) / scale
    assert error.max() <= TOLERANCE[dtype], "%s: error %g of the row's scale" % (what, error.max())


# ---- the tests (each takes the importing file's `device` fixture) ------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_row_group_against_fuse_false(device, graph, dtype):
    fused, unfused, _ = functions(graph, dtype, device)
    text = fused.explain()
    _, nodes, reductions = GRAPHS[graph]  # bfloat16's layer norm: its epsilon's cast runs first
    assert "(%d of the graph's nodes run in fused kernels)" % nodes in text, text
    assert (": %d nodes in one kernel, dlop_fused_g0; %d reductions" % (nodes, reductions)
            in text), text
    for n in LENGTHS:
        for rows in (0, 5):
            arrays = values_for(graph, dtype, rows, n)
            got, want = run(fused, arrays, dtype, device), run(unfused, arrays, dtype, device)
            assert len(got) == len(want)
            for k in range(len(want)):
                assert_close(got[k], want[k], dtype,
                             "%s %s %d x %d, output %d" % (graph, dtype, rows, n, k))


def test_explain_shows_the_members_and_the_phases(device):
    fused, _, _ = functions("softmax", "float32", device)
    text = fused.explain()
    for line in ["max(x: float32[?,?]) -> max.0: float32[?,1] (in the kernel, phase 1 of the row)",
                 "sub(x: float32[?,?], max.0: float32[?,1]) -> sub.1: float32[?,?] (in the kernel)",
                 "sum(exp.2: float32[?,?]) -> sum.3: float32[?,1] (in the kernel, phase 2 of the "
                 "row)",
                 "div(exp.2: float32[?,?], sum.3: float32[?,1]) -> div.4: float32[?,?] (output 0)"]:
        line = "    " + line
        assert line in text, text


def test_a_row_longer_than_the_limit_is_not_a_row_group(device):
    fused, unfused, _ = functions("softmax", "float32", device, shape=(None, 20000))
    text = fused.explain()
    assert "row group" not in text.replace("not a row group", ""), text
    assert ("#0 max(x: float32[?,20000]) -> float32[?,1] on %s (not a row group: its rows have "
            "20000 elements, more than the 16384 a row kernel keeps on chip)"
            % shown(device)) in text, text
    arrays = values_for("softmax", "float32", 3, 20000)
    assert_close(run(fused, arrays, "float32", device)[0],
                 run(unfused, arrays, "float32", device)[0], "float32", "a long row")


def test_a_long_row_known_only_at_run_time(device):
    """Rows of unknown length: a row group; rows past what a thread keeps are read per phase."""
    for graph in ("softmax", "layer_norm"):
        fused, unfused, _ = functions(graph, "float32", device)
        arrays = values_for(graph, "float32", 3, 40000)
        assert_close(run(fused, arrays, "float32", device)[0],
                     run(unfused, arrays, "float32", device)[0], "float32", graph)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_nan_and_minus_infinity_rows(device, dtype):
    values = values_for("softmax", dtype, 6, 17)[0]
    values[1, :] = -np.inf      # max -inf: x - max is NaN everywhere
    values[2, 4] = np.nan       # NaN propagates through max and sum
    values[3, 5] = np.inf       # exp(inf - inf)
    values[4, :] = 0.0
    values[4, 3] = -np.inf      # exp(-inf) is 0
    for graph in ("softmax", "log_softmax"):
        fused, unfused, _ = functions(graph, dtype, device)
        got, want = run(fused, [values], dtype, device), run(unfused, [values], dtype, device)
        assert_close(got[0], want[0], dtype, graph)
        assert np.isnan(got[0][1]).all() and np.isnan(got[0][2]).all()


def test_several_outputs_the_max_and_both_softmaxes(device):
    x = dlop.matrix("x", "float32")
    m = dlop.max(x, axis=-1, keepdims=True)
    d = x - m
    e = dlop.exp(d)
    s = dlop.sum(e, axis=-1, keepdims=True)
    outputs = [e / s, m, d - dlop.log(s), s]
    fused = dlop.function([x], outputs, device=device)
    unfused = dlop.function([x], outputs, device=device, fuse=False)
    text = fused.explain()
    assert ("function on %s: 1 node (7 of the graph's nodes run in fused kernels)"
            % shown(device)) in text, text
    assert "-> max.0: float32[?,1] (output 0, phase 1 of the row)" in text, text
    assert "-> sum.3: float32[?,1] (output 1, phase 2 of the row)" in text, text
    for n in (1, 17, 1000):
        arrays = values_for("softmax", "float32", 7, n)
        got, want = run(fused, arrays, "float32", device), run(unfused, arrays, "float32", device)
        np.testing.assert_array_equal(got[1], want[1])  # the max: exact
        for k in (0, 2, 3):
            assert_close(got[k], want[k], "float32", "output %d, rows of %d" % (k, n))


def test_strided_rows(device):
    """Rows of a view stepping by 2, and the rows of a transposed input: the kernels read
    elements a stride apart."""
    fused, unfused, _ = functions("softmax", "float32", device)
    values = values_for("softmax", "float32", 6, 2000)[0].astype(np.float32)
    view = dlop.asarray(values[:, ::2], device=device)
    assert_close(to_numpy(fused(view)[0]).astype(np.float64),
                 to_numpy(unfused(view)[0]).astype(np.float64), "float32", "strided")
    x = dlop.matrix("x", "float32")
    outputs = softmax(dlop.transpose(x))
    fused_t = dlop.function([x], outputs, device=device)
    unfused_t = dlop.function([x], outputs, device=device, fuse=False)
    assert "row group 0" in fused_t.explain(), fused_t.explain()
    xs = dlop.asarray(np.ascontiguousarray(values.T), device=device)  # rows of 2000, 6 apart
    assert_close(to_numpy(fused_t(xs)[0]).astype(np.float64),
                 to_numpy(unfused_t(xs)[0]).astype(np.float64), "float32", "transposed")


def test_runs_give_the_same_bits(device):
    fused, _, _ = functions("layer_norm", "float32", device)
    arrays = [to_dlop(a, "float32", device) for a in values_for("layer_norm", "float32", 33, 1000)]
    first, again = to_numpy(fused(*arrays)[0]), to_numpy(fused(*arrays)[0])
    assert first.tobytes() == again.tobytes()


def test_a_per_row_result_only_is_not_a_row_group(device):
    """A reduction whose result is only transformed per row, never broadcast back along the
    row, keeps today's plan."""
    x = dlop.matrix("x", "float64")
    y = dlop.exp(dlop.max(dlop.exp(x), axis=-1, keepdims=True)) * 2.0
    text = dlop.function([x], y, device=device).explain()
    assert "row group" not in text, text


def test_one_group_per_connected_set_of_rows(device):
    """A softmax of x and a layer norm of z: two row groups when nothing joins them, one (four
    phases) when a node reads both."""
    x, z = dlop.matrix("x", "float32"), dlop.matrix("z", "float32")
    g, b = dlop.vector("g", "float32"), dlop.vector("b", "float32")
    apart = [softmax(x)[0] * 2.0, layer_norm(z, g, b)[0]]
    joined = [apart[0] + apart[1]]
    rng = np.random.default_rng(5)
    arrays = [rng.uniform(-4, 4, (9, 300)), rng.uniform(-4, 4, (9, 300)),
              rng.uniform(0.5, 2, 300), rng.uniform(-1, 1, 300)]
    for outputs, lines in ((apart, ["(row group 0: 6 nodes", "(row group 1: 9 nodes"]),
                           (joined, ["(row group 0: 16 nodes", "4 reductions over the last"])):
        fused = dlop.function([x, z, g, b], outputs, device=device)
        unfused = dlop.function([x, z, g, b], outputs, device=device, fuse=False)
        text = fused.explain()
        assert all(line in text for line in lines), text
        got, want = run(fused, arrays, "float32", device), run(unfused, arrays, "float32", device)
        for k in range(len(outputs)):
            assert_close(got[k], want[k], "float32", "output %d" % k)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8"])
def test_integer_rows_are_exact(device, dtype):
    """x - max(x) + sum(x) over integer rows (the sum in int64): the unfused values exactly."""
    x = dlop.matrix("x", dtype)
    y = x - dlop.max(x, axis=-1, keepdims=True) + dlop.sum(x, axis=-1, keepdims=True)
    fused = dlop.function([x], y, device=device)
    unfused = dlop.function([x], y, device=device, fuse=False)
    assert "(row group 0: " in fused.explain(), fused.explain()
    for n in (1, 33, 5000):
        values = np.random.default_rng(n).integers(0, 20, (7, n)).astype(dtype)
        xs = dlop.asarray(values, device=device)
        np.testing.assert_array_equal(to_numpy(fused(xs)), to_numpy(unfused(xs)))


def test_per_row_and_scalar_inputs(device):
    """A per-row input ([rows, 1]: read once per row) and a scalar one beside the rows."""
    x, c = dlop.matrix("x", "float64"), dlop.matrix("c", "float64", shape=(None, 1))
    t = dlop.vector("t", "float64", shape=(1,))
    outputs = softmax((x - c) * t)
    fused = dlop.function([x, c, t], outputs, device=device)
    unfused = dlop.function([x, c, t], outputs, device=device, fuse=False)
    assert "(row group 0: 7 nodes" in fused.explain(), fused.explain()
    rng = np.random.default_rng(6)
    arrays = [rng.uniform(-4, 4, (5, 700)), rng.uniform(-1, 1, (5, 1)), np.array([0.75])]
    assert_close(run(fused, arrays, "float64", device)[0],
                 run(unfused, arrays, "float64", device)[0], "float64", "per-row inputs")


def test_empty_rows_fail_or_run_as_unfused(device):
    """Rows of no element: a max has no identity, so the run fails as the unfused one does;
    a sum of each is 0 and what reads it back is empty."""
    fused, unfused, _ = functions("softmax", "float32", device)
    empty = [np.zeros((3, 0))]
    for f in (fused, unfused):
        with pytest.raises(dlop.DlopError, match="cannot reduce an empty axis"):
            run(f, empty, "float32", device)
    x = dlop.matrix("x", "float32")
    s = dlop.sum(x, axis=-1, keepdims=True)
    outputs = [x - s, s]
    fused = dlop.function([x], outputs, device=device)
    got = run(fused, empty, "float32", device)
    assert "(row group 0: " in fused.explain()
    assert got[0].shape == (3, 0) and np.array_equal(got[1], np.zeros((3, 1)))
