"""test_api_properties.py — a seeded property-based test of the Python API (Hypothesis): random
ops on random dtypes and shapes, broadcasting or not, axes in range or not. Where NumPy has an
answer, dlop gives the same one (or one of the documented refusals); where NumPy raises, dlop
raises a dlop exception. Never a crash, never a SystemError, never a silent wrong answer."""
import os
import warnings

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="Hypothesis is not installed (scripts/ensure-python installs it)")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

import dlop  # noqa: E402

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64"]
FLOATS = {"float16", "float32", "float64"}
# DLOP_TEST_SCALE (the sanitizer tree: 0.25) runs a share of the examples, the same seeds.
SCALE = float(os.environ.get("DLOP_TEST_SCALE", "1"))
SETTINGS = settings(max_examples=max(50, int(600 * SCALE)), deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))

shapes = st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple)


@st.composite
def arrays(draw, shape=None, dtype=None):
    dtype = dtype or draw(st.sampled_from(DTYPES))
    shape = draw(shapes) if shape is None else shape
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        values = rng.integers(0, 2, shape).astype(bool)
    elif dtype in FLOATS:
        values = rng.uniform(-4, 4, shape).astype(dtype)
        if values.size and draw(st.booleans()):  # specials: signed zeros, inf, nan
            values.flat[rng.integers(0, values.size)] = draw(st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan]))
    else:
        info = np.iinfo(dtype)
        values = rng.integers(max(info.min, -100), min(info.max, 100) + 1, shape).astype(dtype)
    return values


def broadcastable_pair(draw):
    a = draw(arrays())
    if draw(st.booleans()):  # make b's shape a broadcast partner of a's
        shape = tuple(draw(st.sampled_from([d, 1])) for d in a.shape[draw(st.integers(0, a.ndim)):])
        b = draw(arrays(shape=shape))
    else:
        b = draw(arrays())
    return a, b


def assert_same(got, expected, what):
    """dlop's result against NumPy's: same shape, same values (floats within a few ulp of the
    dtype, NaN where NumPy has NaN); the dtype as NumPy's or the documented difference."""
    got = np.asarray(got)
    expected = np.asarray(expected)
    assert got.shape == expected.shape, (what, got.shape, expected.shape)
    if expected.dtype.kind in "fc" or got.dtype.kind == "f":
        tolerance = 4 * np.finfo(np.result_type(expected.dtype, np.float16)).eps
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64),
                                   rtol=tolerance, atol=tolerance, equal_nan=True, err_msg=str(what))
    else:
        np.testing.assert_array_equal(got.astype(np.int64) if got.dtype != bool else got,
                                      expected.astype(np.int64) if expected.dtype != bool else expected,
                                      err_msg=str(what))


def run_both(what, ours, theirs, refusals=(), compare=None):
    """Call NumPy and dlop on the same inputs and hold dlop to NumPy's answer."""
    with np.errstate(all="ignore"):
        try:
            expected = theirs()
        except (ValueError, TypeError, IndexError, np.exceptions.AxisError, OverflowError) as error:
            expected = error
    try:
        got = ours()
    except dlop.DlopError as error:
        assert not isinstance(error, SystemError)
        if isinstance(expected, Exception):
            return  # both refuse
        assert any(refusal(error) for refusal in refusals), (what, "dlop refused what NumPy answers", error)
        return
    assert not isinstance(expected, Exception), (what, "NumPy refuses this, dlop answered", expected)
    (compare or assert_same)(got, expected, what)


BINARY = {
    "add": (lambda a, b: a + b, np.add), "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply), "maximum": (dlop.maximum, np.maximum),
    "minimum": (dlop.minimum, np.minimum), "less": (lambda a, b: a < b, np.less),
    "equal": (lambda a, b: a == b, np.equal), "greater_equal": (lambda a, b: a >= b, np.greater_equal),
    "div": (lambda a, b: a / b, np.true_divide), "pow": (lambda a, b: a ** b, np.power),
}
# A refusal docs/python.md documents: integer ** (the pow op is float-only).
INT_POW = lambda error: "pow" in str(error) or "**" in str(error)  # noqa: E731


@SETTINGS
@given(st.data(), st.sampled_from(sorted(BINARY)))
def test_binary_ops_agree_with_numpy(data, name):
    a, b = broadcastable_pair(data.draw)
    ours, theirs = BINARY[name]
    run_both((name, a.dtype, a.shape, b.dtype, b.shape),
             lambda: ours(dlop.asarray(a), dlop.asarray(b)), lambda: theirs(a, b), refusals=(INT_POW,))


UNARY = {"neg": (lambda a: -a, np.negative), "abs": (dlop.abs, np.abs), "sqrt": (dlop.sqrt, np.sqrt),
         "log": (dlop.log, np.log), "tanh": (dlop.tanh, np.tanh), "exp": (dlop.exp, np.exp)}


@SETTINGS
@given(arrays(), st.sampled_from(sorted(UNARY)))
def test_unary_ops_agree_with_numpy(a, name):
    ours, theirs = UNARY[name]
    run_both((name, a.dtype, a.shape), lambda: ours(dlop.asarray(a)), lambda: theirs(a))


@SETTINGS
@given(arrays(), st.sampled_from(["sum", "mean", "max", "min"]),
       st.one_of(st.none(), st.integers(-5, 5), st.lists(st.integers(-4, 4), max_size=3).map(tuple)),
       st.booleans())
def test_reductions_agree_with_numpy(a, name, axis, keepdims):
    def theirs():
        if isinstance(axis, tuple):
            np.lib.array_utils.normalize_axis_tuple(axis, a.ndim)  # raises on repeats, as dlop
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # mean of an empty slice: NaN
            return getattr(np, name)(a, axis=axis, keepdims=keepdims)
    # NumPy's sum/max/min (not mean) accept axis=0 or -1 on a 0-d input; dlop refuses any axis
    # there, as docs/python.md says.
    zero_d_axis = lambda error: "a 0-d input takes no axes" in str(error)  # noqa: E731
    run_both((name, a.dtype, a.shape, axis, keepdims),
             lambda: getattr(dlop, name)(dlop.asarray(a), axis=axis, keepdims=keepdims), theirs,
             refusals=(zero_d_axis,))


@SETTINGS
@given(st.data())
def test_shape_views_agree_with_numpy(data):
    a = data.draw(arrays())
    kind = data.draw(st.sampled_from(["reshape", "transpose", "broadcast_to"]))
    target = data.draw(st.lists(st.integers(-1, 5), max_size=4).map(tuple))
    if kind == "reshape":
        run_both((kind, a.shape, target), lambda: dlop.reshape(dlop.asarray(a), target),
                 lambda: np.reshape(a, target))
    elif kind == "transpose":
        axes = data.draw(st.one_of(st.none(), st.permutations(range(a.ndim)).map(tuple),
                                   st.lists(st.integers(-4, 4), max_size=4).map(tuple)))
        run_both((kind, a.shape, axes), lambda: dlop.transpose(dlop.asarray(a), axes),
                 lambda: np.transpose(a, axes))
    else:
        run_both((kind, a.shape, target), lambda: dlop.broadcast_to(dlop.asarray(a), target),
                 lambda: np.broadcast_to(a, target))


@SETTINGS
@given(st.data())
def test_matmul_agrees_with_numpy(data):
    dtype = data.draw(st.sampled_from(["float32", "float64"]))
    a = data.draw(arrays(dtype=dtype, shape=data.draw(st.lists(st.integers(0, 4), min_size=1, max_size=3).map(tuple))))
    b = data.draw(arrays(dtype=dtype, shape=data.draw(st.lists(st.integers(0, 4), min_size=1, max_size=3).map(tuple))))
    def within_rounding_of_a_sum(got, expected, what):
        # A product's rounding depends on the order of its sum (BLAS's against NumPy's): bound
        # the difference by the terms' size, k * eps * (|a| @ |b|), not by the result's.
        got = np.asarray(got, dtype=np.float64)
        assert got.shape == expected.shape, (what, got.shape, expected.shape)
        k = a.shape[-1] if a.ndim else 1
        bound = (k + 2) * np.finfo(dtype).eps * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
        expected = expected.astype(np.float64)
        same_special = (got == expected) | (np.isnan(got) & np.isnan(expected))  # inf, nan
        close = np.abs(got - expected) <= bound + np.finfo(dtype).tiny
        assert np.all(same_special | close), (what, got, expected)
    run_both(("matmul", a.shape, b.shape), lambda: dlop.asarray(a) @ dlop.asarray(b), lambda: a @ b,
             compare=within_rounding_of_a_sum)


@SETTINGS
@given(arrays(), st.sampled_from(DTYPES))
def test_cast_agrees_with_numpy_on_values_every_dtype_holds(a, dtype):
    if a.dtype.kind == "f":
        a = np.nan_to_num(np.trunc(a), posinf=3, neginf=-3)  # exact in every dtype
    if dtype == "uint8" or a.dtype == np.uint8:
        a = np.abs(a)
    run_both(("cast", a.dtype, dtype), lambda: dlop.cast(dlop.asarray(a), dtype), lambda: a.astype(dtype))
