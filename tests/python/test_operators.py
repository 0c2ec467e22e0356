"""test_operators.py — Python operators and functions on symbolic Variables and on arrays (CPU):
values against NumPy, the promotion table against np.result_type, weak Python scalars on both
sides, broadcasting, reductions, views (no copies), and the errors.  The CUDA side is in
test_gpu_operators.py."""
import itertools
import math

import numpy as np
import pytest

import dlop
from dlop import _arith, _promote

NUMPY_DTYPES = [d for d in _promote.DTYPES if d != "bfloat16"]
NUMERIC = [d for d in NUMPY_DTYPES if d != "bool"]
FLOATS = ["float16", "float32", "float64"]
TOL = {"float16": 2e-3, "float32": 2e-6, "float64": 1e-13}


def sample(dtype, shape, seed=0, positive=False):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype in _promote.INTEGERS:
        low = 1 if positive else (0 if dtype == "uint8" else -9)
        return rng.integers(low, 10, shape).astype(dtype)
    values = rng.uniform(0.1 if positive else -2.0, 2.0, shape)
    return values.astype(dtype)


def check(result, expected, dtype=None):
    """result (a dlop.Array) equals expected (NumPy) in dtype, shape and values."""
    assert isinstance(result, dlop.Array)
    expected = np.asarray(expected)
    assert result.dtype == expected.dtype.name, (result.dtype, expected.dtype)
    assert result.shape == expected.shape
    got = result.numpy()
    if expected.dtype.kind == "f":
        tol = TOL[expected.dtype.name]
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, expected)


def symbolic(fn, *values):
    """fn applied to Variables standing for values, compiled for the CPU and run on them."""
    variables = [dlop.tensor("v%d" % i, dtype=v.dtype.name, shape=v.shape) for i, v in enumerate(values)]
    output = fn(*variables)
    assert isinstance(output, dlop.Variable)
    return dlop.function(variables, output)(*values), output


# ---- promotion -------------------------------------------------------------------------

@pytest.mark.parametrize("a,b", list(itertools.product(NUMPY_DTYPES, NUMPY_DTYPES)))
def test_promotion_table_is_numpys(a, b):
    assert _promote.result_type(a, b) == np.result_type(a, b).name


@pytest.mark.parametrize("other,expected", [
    ("bool", "bfloat16"), ("int8", "bfloat16"), ("uint8", "bfloat16"), ("int16", "float32"),
    ("int32", "float64"), ("int64", "float64"), ("float16", "float32"),
    ("bfloat16", "bfloat16"), ("float32", "float32"), ("float64", "float64")])
def test_bfloat16_promotion_as_documented(other, expected):
    assert _promote.result_type("bfloat16", other) == expected
    assert _promote.result_type(other, "bfloat16") == expected


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("scalar", [True, 3, 2.5])
def test_weak_scalar_rules_are_numpy_2s(dtype, scalar):
    expected = (np.zeros(2, dtype=dtype) * scalar).dtype.name  # NumPy 2: NEP 50 weak scalars
    assert _promote.common([dtype, type(scalar)]) == expected


def test_promotion_inserts_casts_on_arrays():
    for a_dtype, b_dtype in [("float32", "float64"), ("int32", "float32"), ("int8", "uint8"),
                             ("bool", "int16"), ("int8", "int64"), ("float16", "float32")]:
        a, b = sample(a_dtype, (3, 4), 1), sample(b_dtype, (3, 4), 2)
        check(dlop.asarray(a) + dlop.asarray(b), a + b)
        check(dlop.asarray(a) * b, a * b)  # a NumPy operand on the right
        check(a - dlop.asarray(b), a - b)  # and on the left: NumPy defers to dlop


def test_promotion_in_graphs_adds_cast_nodes():
    a, b = sample("float32", (5,), 1), sample("float64", (5,), 2)
    result, output = symbolic(lambda x, y: x + y, a, b)
    check(result, a + b)
    assert output.dtype == "float64"
    assert output.owner.inputs[0].owner_op.name == "cast"


def test_bfloat16_arrays_promote_with_float32():
    a = dlop.asarray(np.array([1.5, -2.25, 3.0], dtype=np.float32)).astype("bfloat16")
    assert a.dtype == "bfloat16"
    b = np.array([0.5, 0.25, 1.0], dtype=np.float32)
    check(a + b, np.array([2.0, -2.0, 4.0], dtype=np.float32))
    check((a * 2).astype("float32"), np.array([3.0, -4.5, 6.0], dtype=np.float32))
    half = dlop.asarray(np.array([1, 2, 3], dtype=np.float16))
    check(a + half, np.array([2.5, -0.25, 6.0], dtype=np.float32))  # float16 with bfloat16


# ---- binary operators -----------------------------------------------------------------

BINARY = [
    ("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b),
    ("maximum", dlop.maximum), ("minimum", dlop.minimum),
    ("less", lambda a, b: a < b), ("less_equal", lambda a, b: a <= b),
    ("greater", lambda a, b: a > b), ("greater_equal", lambda a, b: a >= b),
    ("equal", lambda a, b: a == b), ("not_equal", lambda a, b: a != b),
]
NUMPY_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum,
    "minimum": np.minimum, "less": np.less, "less_equal": np.less_equal, "greater": np.greater,
    "greater_equal": np.greater_equal, "equal": np.equal, "not_equal": np.not_equal,
}


@pytest.mark.parametrize("name,fn", BINARY, ids=[n for n, _ in BINARY])
@pytest.mark.parametrize("dtype", NUMERIC)
def test_binary_on_arrays_and_variables(name, fn, dtype):
    a, b = sample(dtype, (4, 1, 3), 1), sample(dtype, (5, 1), 2)  # broadcast to (4, 5, 3)
    expected = NUMPY_BINARY[name](a, b)
    check(fn(dlop.asarray(a), dlop.asarray(b)), expected)
    result, output = symbolic(fn, a, b)
    check(result, expected)
    assert output.shape == (4, 5, 3) and output.dtype == expected.dtype.name


@pytest.mark.parametrize("dtype", FLOATS)
def test_div_and_pow_on_floats(dtype):
    a, b = sample(dtype, (6,), 1, positive=True), sample(dtype, (6,), 2, positive=True)
    check(dlop.asarray(a) / dlop.asarray(b), a / b)
    check(dlop.asarray(a) ** dlop.asarray(b), a ** b)
    check(symbolic(lambda x, y: x / y, a, b)[0], a / b)
    check(symbolic(lambda x, y: x ** y, a, b)[0], a ** b)


@pytest.mark.parametrize("dtype", ["bool", "int8", "int32", "uint8", "int64"])
def test_integer_true_division_is_float64(dtype):
    a, b = sample(dtype, (7,), 1, positive=True), sample(dtype, (7,), 2, positive=True)
    if dtype == "bool":
        b = np.ones(7, dtype=bool)
    check(dlop.asarray(a) / dlop.asarray(b), a / b)
    check(dlop.asarray(a) / 4, a / 4)
    assert (dlop.asarray(a) / dlop.asarray(b)).dtype == "float64"


def test_integer_pow_is_a_clear_error():
    a = dlop.asarray(np.arange(3, dtype=np.int32))
    with pytest.raises(dlop.DlopTypeError, match="pow op is defined for float"):
        a ** 2
    check(a ** 2.0, np.arange(3, dtype=np.int32) ** 2.0)  # float64, as NumPy


def test_integer_add_wraps_around_as_numpy():
    a = np.array([120, -128, 100], dtype=np.int8)
    check(dlop.asarray(a) + dlop.asarray(a), a + a)
    check(-dlop.asarray(a), -a)


def test_maximum_minimum_propagate_nan():
    a = np.array([1.0, np.nan, 3.0, np.nan])
    b = np.array([np.nan, 2.0, 1.0, np.nan])
    check(dlop.maximum(a, dlop.asarray(b)), np.maximum(a, b))
    check(dlop.minimum(dlop.asarray(a), b), np.minimum(a, b))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_signed_zero_ties_as_numpy(dtype):
    """Between -0.0 and 0.0, maximum/minimum and the max/min reductions pick the zero NumPy's
    float32 and float64 loops pick: every pair and every short sequence of signed zeros."""
    zeros = [-0.0, 0.0]
    a = np.array([x for x, _ in itertools.product(zeros, zeros)], dtype=dtype)
    b = np.array([y for _, y in itertools.product(zeros, zeros)], dtype=dtype)
    for ours, theirs in ((dlop.maximum, np.maximum), (dlop.minimum, np.minimum)):
        got = ours(dlop.asarray(a), dlop.asarray(b)).numpy()
        assert list(np.signbit(got)) == list(np.signbit(theirs(a, b))), ours
    for n in (2, 3, 4):
        for values in itertools.product(zeros, repeat=n):
            x = np.array(values, dtype=dtype)
            for name in ("max", "min"):
                got = getattr(dlop, name)(dlop.asarray(x)).numpy()
                assert np.signbit(got) == np.signbit(getattr(x, name)()), (name, values)
    with np.errstate(divide="ignore"):  # the example as it was reported: 1 / max is +inf
        assert 1.0 / dlop.max(dlop.asarray(np.array([-0.0, 0.0], dtype=dtype))).numpy() == np.inf


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sigmoid_keeps_tiny_results(dtype):
    """sigmoid(x) for very negative x is e^x, subnormal near the bottom of the range: not 0."""
    x = np.array([-90.0, -100.0, -103.0, -700.0, -745.0, -20.0, 0.0, 30.0], dtype=dtype)
    reference = np.array([1.0 / (1.0 + math.exp(-float(v))) if v > -700 else math.exp(float(v))
                          for v in x]).astype(dtype)
    got = dlop.sigmoid(dlop.asarray(x)).numpy()
    np.testing.assert_allclose(got, reference, rtol=4 * np.finfo(dtype).eps, atol=0)
    if dtype == "float32":
        assert got[0] > 8.1e-40 and got[1] > 0  # 8.2e-40 and 3.8e-44: subnormals, not 0


# ---- Python scalars -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("scalar", [2, 1.5, True])
def test_scalars_on_both_sides(dtype, scalar):
    a = sample(dtype, (3, 2), 3, positive=True)
    x = dlop.asarray(a)
    for fn in (lambda u: u + scalar, lambda u: scalar + u, lambda u: u * scalar,
               lambda u: scalar * u, lambda u: scalar - u, lambda u: u - scalar,
               lambda u: u < scalar, lambda u: scalar < u, lambda u: u == scalar):
        check(fn(x), fn(a))
        check(symbolic(fn, a)[0], fn(a))


def test_scalar_division_and_power():
    a = sample("float32", (5,), 4, positive=True)
    x = dlop.asarray(a)
    check(1.0 / x, 1.0 / a)
    check(x / 3, a / 3)
    check(x ** 2, a ** 2)
    check(2.0 ** x, 2.0 ** a)
    check(symbolic(lambda v: 1.0 / v - 2 ** v, a)[0], 1.0 / a - 2 ** a)


def test_scalar_kinds_as_numpy_2():
    assert (dlop.asarray(np.ones(2, np.float32)) * 2.0).dtype == "float32"
    assert (dlop.asarray(np.ones(2, np.int8)) + 1).dtype == "int8"
    assert (dlop.asarray(np.ones(2, np.int8)) + 1.5).dtype == "float64"
    assert (dlop.asarray(np.ones(2, bool)) + 1).dtype == "int64"
    assert (dlop.asarray(np.ones(2, np.uint8)) * 255).dtype == "uint8"
    # NumPy scalars are strong (NumPy 2): float32 * float64-scalar is float64.
    assert (dlop.asarray(np.ones(2, np.float32)) * np.float64(2.0)).dtype == "float64"


@pytest.mark.parametrize("dtype,value", [("int8", 1000), ("int8", -129), ("uint8", -1),
                                         ("uint8", 256), ("int16", 40000), ("int32", 2**31)])
def test_out_of_range_int_scalar_is_an_error(dtype, value):
    a = dlop.asarray(np.ones(3, dtype=dtype))
    with pytest.raises(dlop.ScalarOverflowError, match="%d is out of range for %s" % (value, dtype)):
        a + value
    with pytest.raises(OverflowError):  # as NumPy 2 raises
        value * a
    with pytest.raises(dlop.DlopTypeError):
        dlop.tensor("t", dtype=dtype, shape=(3,)) - value


def test_scalar_constants_are_cached_and_compiled_functions_shared():
    x = dlop.asarray(np.arange(4, dtype=np.float32))
    x * 2.0
    size = len(_arith._eager_cache)
    check(x * 3.0, np.arange(4, dtype=np.float32) * 3)   # same signature: no new compile
    check(x * -0.0, np.arange(4, dtype=np.float32) * -0.0)
    assert len(_arith._eager_cache) == size
    assert np.signbit((x * -0.0).numpy()[0])  # -0.0 is not the cached 0.0
    for i in range(2 * _arith._SCALAR_LIMIT):  # bounded
        x + float(i)
    assert len(_arith._scalar_cache) <= _arith._SCALAR_LIMIT
    check(x + 7.0, np.arange(4, dtype=np.float32) + 7)


# ---- unary functions, where, cast ------------------------------------------------------

UNARY = [("neg", lambda x: -x, np.negative), ("abs", abs, np.abs),
         ("dlop.abs", dlop.abs, np.abs), ("exp", dlop.exp, np.exp)]
FLOAT_UNARY = [("log", dlop.log, np.log), ("sqrt", dlop.sqrt, np.sqrt), ("tanh", dlop.tanh, np.tanh),
               ("sigmoid", dlop.sigmoid, lambda v: (1 / (1 + np.exp(-v.astype(np.float64)))).astype(np.result_type(v.dtype, np.float16)))]


@pytest.mark.parametrize("name,fn,ref", UNARY[:3], ids=[u[0] for u in UNARY[:3]])
@pytest.mark.parametrize("dtype", NUMERIC)
def test_neg_abs(name, fn, ref, dtype):
    a = sample(dtype, (3, 4), 5)
    check(fn(dlop.asarray(a)), ref(a))
    check(symbolic(fn, a)[0], ref(a))


@pytest.mark.parametrize("name,fn,ref", FLOAT_UNARY + UNARY[3:], ids=[u[0] for u in FLOAT_UNARY + UNARY[3:]])
@pytest.mark.parametrize("dtype", FLOATS + ["int8", "int16", "int32"])
def test_float_functions(name, fn, ref, dtype):
    a = sample(dtype, (2, 5), 6, positive=True)
    expected = ref(a)  # integers: NumPy's float for them (int8 -> float16, int16 -> float32, ...)
    check(fn(dlop.asarray(a)), expected)
    check(symbolic(fn, a)[0], expected)


def test_where():
    condition = np.array([[True, False, True]])
    a, b = sample("float32", (2, 3), 1), sample("float64", (2, 1), 2)
    check(dlop.where(condition, a, b), np.where(condition, a, b))
    check(dlop.where(dlop.asarray(condition), dlop.asarray(a), 0.5), np.where(condition, a, np.float32(0.5)))
    ints = np.array([0, 3, -1])  # a non-bool condition: nonzero is true, as np.where
    check(dlop.where(ints, 1.0, -1.0), np.where(ints, 1.0, -1.0))
    c = dlop.vector("c", dtype="bool", shape=(3,))
    x = dlop.matrix("x", dtype="float32", shape=(2, 3))
    out = dlop.where(c, x, 0)
    assert out.dtype == "float32" and out.shape == (2, 3)
    check(dlop.function([c, x], out)(condition[0], a), np.where(condition[0], a, np.float32(0)))


@pytest.mark.parametrize("source,target", [("float32", "int32"), ("float64", "float16"),
                                           ("int64", "float32"), ("int8", "bool"),
                                           ("bool", "float64"), ("uint8", "int8")])
def test_cast_and_astype(source, target):
    a = sample(source, (4,), 7)
    if source.startswith("float"):
        a = a * 10
    expected = a.astype(target)
    check(dlop.asarray(a).astype(target), expected)
    check(dlop.cast(a, np.dtype(target)), expected)
    check(symbolic(lambda v: v.astype(target), a)[0], expected)


# ---- reductions ------------------------------------------------------------------------

AXES = [None, 0, 1, -1, (0, 2), (2, 0), (0, 1, 2), ()]


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_float(name, axis, keepdims):
    a = sample("float32", (3, 4, 5), 8)
    expected = getattr(np, name)(a, axis=axis, keepdims=keepdims)
    check(getattr(dlop, name)(a, axis=axis, keepdims=keepdims), expected)
    check(getattr(dlop.asarray(a), name)(axis=axis, keepdims=keepdims), expected)
    check(symbolic(lambda v: getattr(v, name)(axis=axis, keepdims=keepdims), a)[0], expected)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int32", "float64", "float16"])
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
def test_reduction_dtypes(dtype, name):
    a = sample(dtype, (6, 7), 9)
    expected = getattr(np, name)(a, axis=1)
    if name == "sum" and dtype == "uint8":
        expected = expected.astype(np.int64)  # docs/ops.md: integer sums are int64 (NumPy: uint64)
    check(getattr(dlop, name)(a, axis=1), expected)


def test_reduction_bad_axis_is_an_error():
    a = dlop.asarray(np.ones((2, 3), dtype=np.float32))
    with pytest.raises(dlop.DlopError, match="3"):
        dlop.sum(a, axis=3)
    with pytest.raises(dlop.DlopTypeError, match="axis must be None, an int or a tuple"):
        dlop.sum(a, axis="rows")


# ---- views -----------------------------------------------------------------------------

def shares(view, base):
    return np.shares_memory(np.asarray(view), np.asarray(base))


def test_transpose_is_a_view():
    a = sample("float32", (3, 4, 2), 10)
    x = dlop.asarray(a)
    check(x.T, a.T)
    assert shares(x.T, a)
    check(x.transpose(1, 0, 2), a.transpose(1, 0, 2))
    check(x.transpose((2, 0, 1)), a.transpose(2, 0, 1))
    check(dlop.transpose(x, (0, 2, 1)), a.transpose(0, 2, 1))
    assert shares(x.transpose(1, 0, 2), a)
    m = dlop.matrix("m", shape=(3, None))
    assert m.T.shape == (None, 3)
    check(dlop.function([m], m.T)(a[:, :, 0]), a[:, :, 0].T)


def test_reshape_dimshuffle_broadcast_to():
    a = sample("float64", (2, 6), 11)
    x = dlop.asarray(a)
    check(x.reshape(3, 4), a.reshape(3, 4))
    check(x.reshape((4, -1)), a.reshape(4, -1))
    check(dlop.reshape(x, 12), a.reshape(12))
    assert shares(x.reshape(3, 4), a)
    check(x.dimshuffle(1, "x", 0), a.T[:, None, :])
    assert shares(x.dimshuffle(1, "x", 0), a)
    check(dlop.broadcast_to(a[0], (3, 6)), np.broadcast_to(a[0], (3, 6)))
    b = dlop.broadcast_to(x, (4, 2, 6))
    assert b.strides[0] == 0 and shares(b, a)
    # reshape of a non-contiguous view: values right (a copy when strides do not allow a view)
    check(x.T.reshape(12), a.T.reshape(12))
    v = dlop.tensor("v", dtype="float64", shape=(2, 6))
    out = v.dimshuffle("x", 1, 0).reshape(6, 2)
    assert out.shape == (6, 2)
    check(dlop.function([v], out)(a), a.T[None].reshape(6, 2))


# ---- linear algebra --------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dot_matmul_gemm(dtype):
    a, b = sample(dtype, (5, 7), 12), sample(dtype, (7, 3), 13)
    v = sample(dtype, (7,), 14)
    check(dlop.dot(a, b), a @ b)
    check(dlop.dot(dlop.asarray(a), v), a @ v)
    check(dlop.dot(v, v), np.dot(v, v))
    check(dlop.asarray(a) @ b, a @ b)
    check(a @ dlop.asarray(b), a @ b)
    batch = sample(dtype, (2, 1, 5, 7), 15)
    check(dlop.matmul(batch, sample(dtype, (3, 7, 4), 16)), batch @ sample(dtype, (3, 7, 4), 16))
    c = sample(dtype, (3,), 17)
    check(dlop.gemm(a, b, c, alpha=0.5, beta=2.0), 0.5 * (a @ b) + 2.0 * c)
    check(dlop.gemm(a.T.copy(), b, c, trans_a=True), a @ b + c)
    check(dlop.dot(dlop.asarray(a).T, sample(dtype, (5, 2), 18)), a.T @ sample(dtype, (5, 2), 18))
    x = dlop.matrix("x", dtype=dtype, shape=(None, 7))
    y = x @ b
    assert y.shape == (None, 3)
    check(dlop.function([x], y)(a), a @ b)


def test_dot_promotes_and_refuses_scalars():
    a, b = sample("float32", (2, 3), 1), sample("float64", (3, 2), 2)
    check(dlop.dot(a, b), a @ b)
    with pytest.raises(dlop.DlopTypeError, match="takes arrays, not the Python scalar 2"):
        dlop.dot(dlop.asarray(a), 2)


def test_matmul_shape_mismatch_message():
    with pytest.raises(dlop.DlopError, match="7"):
        dlop.asarray(np.ones((2, 7), np.float32)) @ np.ones((5, 3), np.float32)


# ---- errors, hashing, truth values -------------------------------------------------------

def test_broadcast_mismatch_names_the_shapes():
    with pytest.raises(dlop.DlopError) as info:
        dlop.asarray(np.ones(3, np.float32)) + np.ones(4, np.float32)
    assert "3" in str(info.value) and "4" in str(info.value)
    with pytest.raises(dlop.DlopError):
        dlop.vector("a", shape=(3,)) * dlop.vector("b", shape=(4,))


def test_unsupported_operands_are_python_errors():
    x = dlop.asarray(np.ones(2, np.float32))
    v = dlop.vector("v")
    with pytest.raises(TypeError):
        x + "a"
    with pytest.raises(TypeError):
        v * object()
    assert (x == None) is False and (v != None) is True  # noqa: E711 - identity fallback


def test_variables_hash_by_identity_and_have_no_truth_value():
    a, b = dlop.vector("a"), dlop.vector("b")
    assert isinstance(a == b, dlop.Variable) and (a == b).dtype == "bool"
    assert len({a, b, a}) == 2
    assert a in {a: 1}
    with pytest.raises(dlop.DlopTypeError, match="no truth value"):
        bool(a < b)
    with pytest.raises(TypeError):
        b in [a]  # list membership falls back to ==: loud, not a silent True


def test_array_truth_value():
    assert bool(dlop.asarray(np.array([3.0])) > 2) is True
    with pytest.raises(ValueError, match="ambiguous"):
        bool(dlop.asarray(np.ones(2)) > 0)


def test_eval_reuses_its_compiled_function():
    x = dlop.vector("x", dtype="float64")
    y = (x * 2.0 + 1.0).sum()
    data = np.arange(5.0)
    assert y.eval({x: data}).numpy() == pytest.approx(25.0)
    first = dict(y._eval_cache)
    assert y.eval({x: data + 1}).numpy() == pytest.approx(35.0)
    assert len(y._eval_cache) == 1 and list(y._eval_cache.values())[0] is list(first.values())[0]


def test_mixing_variables_and_arrays_makes_constants():
    w = np.arange(3.0)
    x = dlop.vector("x", dtype="float64", shape=(3,))
    y = x * dlop.asarray(w) + w
    assert y.dtype == "float64"
    check(dlop.function([x], y)(np.ones(3)), np.ones(3) * w + w)
