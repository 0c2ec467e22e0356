"""test_pytensor_adapter.py — dlop ops inside PyTensor graphs (dlop.pytensor_adapter), checked
with PyTensor itself: results against NumPy, DebugMode's cross-checks, infer_shape against real
output shapes, broadcasting, float64, parameters in __props__ and type errors."""
import os
from pathlib import Path

import numpy as np
import pytest

import dlop

NO_PYTENSOR = ""
try:
    import pytensor
    import pytensor.tensor as pt
    from pytensor.compile.debug.debugmode import DebugMode
except ImportError as error:  # CI must have PyTensor; only the GPU machine may opt out
    if os.environ.get("DLOP_ALLOW_NO_PYTENSOR") != "1":
        raise ImportError("PyTensor is required for these tests (scripts/ensure-python installs "
                          "pytensor==3.0.7; set DLOP_ALLOW_NO_PYTENSOR=1 to skip them): %s"
                          % error) from error
    NO_PYTENSOR = "PyTensor is not importable (%s) and DLOP_ALLOW_NO_PYTENSOR=1" % error
else:
    from dlop.pytensor_adapter import DlopOp, as_op

# Every test is collected and skipped with the reason (a module-level skip would leave pytest
# with nothing collected, exit status 5, which ctest counts as a failure).
pytestmark = pytest.mark.skipif(bool(NO_PYTENSOR), reason=NO_PYTENSOR)

RNG = np.random.default_rng(20261129)


def _fixture_plugin() -> Path:
    """The test fixture plugin with parameters (fixture_scale: y = scale * x, negated when
    negate is set), built into <build>/tests/fixtures/good.so."""
    candidates = []
    if os.environ.get("DLOP_FIXTURE_DIR"):  # set by tests/python/CMakeLists.txt
        candidates.append(Path(os.environ["DLOP_FIXTURE_DIR"]) / "good.so")
    if os.environ.get("DLOP_BUILD_DIR"):
        candidates.append(Path(os.environ["DLOP_BUILD_DIR"]) / "tests" / "fixtures" / "good.so")
    # The build tree's package lives in <build>/python/dlop.
    candidates.append(Path(dlop.__file__).resolve().parents[2] / "tests" / "fixtures" / "good.so")
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    pytest.skip("fixture plugin good.so not found (looked in %s); it is built with the tests"
                % ", ".join(str(c) for c in candidates))


def _fixture_scale_loaded() -> None:
    if not any(p.name == "fixture_good" for p in dlop.plugins()):
        dlop.load_plugin(str(_fixture_plugin()))


def _dlop_nodes(fgraph_or_function) -> list:
    fgraph = getattr(fgraph_or_function, "maker", None)
    fgraph = fgraph.fgraph if fgraph is not None else fgraph_or_function
    return [n for n in fgraph.toposort() if isinstance(n.op, DlopOp)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_exp_in_pytensor_function_matches_numpy(dtype):
    x = pt.vector("x", dtype=dtype)
    y = as_op(dlop.ops.exp)(x)
    assert y.type.dtype == dtype
    f = pytensor.function([x], y)
    for n in (0, 1, 7, 1001):
        data = RNG.uniform(-5, 5, n).astype(dtype)
        out = f(data)
        assert isinstance(out, np.ndarray) and out.dtype == dtype and out.shape == (n,)
        rtol = 2e-6 if dtype == "float32" else 1e-14
        np.testing.assert_allclose(out, np.exp(data), rtol=rtol)
    assert len(_dlop_nodes(f)) == 1


def test_double_and_exp_chain_mixed_with_pytensor_ops():
    x = pt.matrix("x", dtype="float32")
    y = as_op("exp")(as_op(dlop.ops.double)(x) + 1) * 3
    f = pytensor.function([x], y)
    data = RNG.uniform(-2, 2, (4, 5)).astype(np.float32)
    np.testing.assert_allclose(f(data), np.exp(2 * data + 1) * 3, rtol=2e-6)


def test_double_on_int32_is_exact():
    x = pt.vector("x", dtype="int32")
    f = pytensor.function([x], as_op(dlop.ops.double)(x))
    data = np.array([0, 1, -7, 2**30 - 1, -(2**30)], dtype=np.int32)
    out = f(data)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, data * 2)


def test_multiply_them_broadcasts_like_numpy():
    a = pt.matrix("a", dtype="float32")
    row = pt.tensor("row", dtype="float32", shape=(1, None))
    scalar = pt.scalar("s", dtype="float32")
    mul = as_op(dlop.ops.multiply_them)
    f = pytensor.function([a, row, scalar], [mul(a, row), mul(a, scalar)])
    data = RNG.standard_normal((3, 5)).astype(np.float32)
    r = RNG.standard_normal((1, 5)).astype(np.float32)
    s = np.float32(1.5)
    by_row, by_scalar = f(data, r, s)
    np.testing.assert_array_equal(by_row, data * r)
    np.testing.assert_array_equal(by_scalar, data * s)
    # Static shapes meet: (3, 1) x (5,) gives a statically known (3, 5).
    out = mul(pt.tensor("c", dtype="float64", shape=(3, 1)),
              pt.tensor("d", dtype="float64", shape=(5,)))
    assert out.type.shape == (3, 5) and out.type.dtype == "float64"


def test_multiply_them_float64_exact():
    a, b = pt.vector("a", dtype="float64"), pt.vector("b", dtype="float64")
    f = pytensor.function([a, b], as_op(dlop.ops.multiply_them)(a, b))
    x, y = RNG.standard_normal(100), RNG.standard_normal(100)
    out = f(x, y)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, x * y)


def test_debugmode_cross_check_passes():
    # DebugMode runs perform more than once, with preallocated and strided outputs, checks
    # that inputs are untouched and that outputs match their types and stay consistent.
    x = pt.matrix("x", dtype="float64")
    b = pt.vector("b", dtype="float64")
    y = as_op(dlop.ops.multiply_them)(as_op(dlop.ops.exp)(x), as_op(dlop.ops.double)(b))
    f = pytensor.function([x, b], y, mode=DebugMode(check_py_code=True))
    data = RNG.uniform(-3, 3, (4, 6))
    vec = RNG.uniform(-3, 3, 6)
    np.testing.assert_allclose(f(data, vec), np.exp(data) * (2 * vec), rtol=1e-14)
    # A strided (transposed) input goes through too.
    np.testing.assert_allclose(f(data.T.copy().T, vec), np.exp(data) * (2 * vec), rtol=1e-14)


def test_infer_shape_is_symbolic_for_unary_ops():
    # The shape graph must not contain the dlop op: shapes come from the rule, not from running.
    x = pt.tensor("x", dtype="float32", shape=(None, 3, None))
    y = as_op(dlop.ops.exp)(as_op(dlop.ops.double)(x))
    f_shape = pytensor.function([x], y.shape)
    assert _dlop_nodes(f_shape) == []
    f = pytensor.function([x], y)
    for shape in ((0, 3, 1), (2, 3, 5), (7, 3, 0)):
        data = np.ones(shape, dtype=np.float32)
        assert tuple(f_shape(data)) == f(data).shape == shape


def test_infer_shape_broadcast_with_one_unknown_dim_is_symbolic():
    a = pt.tensor("a", dtype="float64", shape=(None,))
    one = pt.tensor("one", dtype="float64", shape=(1,))
    y = as_op(dlop.ops.multiply_them)(a, one)
    f_shape = pytensor.function([a, one], y.shape)
    assert _dlop_nodes(f_shape) == []
    for n in (0, 1, 9):
        assert tuple(f_shape(np.ones(n), np.ones(1))) == (n,)


def test_infer_shape_of_ambiguous_broadcast_agrees_with_outputs():
    # Two unknown dims broadcast: the rule cannot be written generically, so the adapter defers
    # to PyTensor's shape of the computed output; the answer must still be right.
    a = pt.matrix("a", dtype="float32")
    b = pt.matrix("b", dtype="float32")
    y = as_op(dlop.ops.multiply_them)(a, b)
    f_shape = pytensor.function([a, b], y.shape)
    f = pytensor.function([a, b], y)
    for sa, sb in (((3, 4), (3, 4)), ((1, 4), (3, 4)), ((3, 1), (1, 5)), ((0, 2), (1, 2))):
        da, db = np.ones(sa, np.float32), np.ones(sb, np.float32)
        assert tuple(f_shape(da, db)) == f(da, db).shape == np.broadcast_shapes(sa, sb)


def test_static_shapes_come_from_make_node():
    x = pt.tensor("x", dtype="float32", shape=(2, None, 4))
    y = as_op(dlop.ops.exp)(x)
    assert y.type.shape == (2, None, 4)
    assert y.type.dtype == "float32"


def test_equal_ops_compare_equal_and_merge():
    assert as_op(dlop.ops.exp) == as_op("exp")
    assert hash(as_op(dlop.ops.exp)) == hash(as_op("exp"))
    assert as_op(dlop.ops.exp) != as_op(dlop.ops.double)
    x = pt.vector("x", dtype="float32")
    y = as_op(dlop.ops.exp)(x) + as_op("exp")(x)
    f = pytensor.function([x], y)
    assert len(_dlop_nodes(f)) == 1  # PyTensor's merge saw one computation
    np.testing.assert_allclose(f(np.arange(3, dtype=np.float32)),
                               2 * np.exp(np.arange(3, dtype=np.float32)), rtol=2e-6)


def test_params_are_props():
    _fixture_scale_loaded()
    default = as_op("fixture_scale")
    explicit = as_op("fixture_scale", **{p.name: p.default for p in dlop.ops.fixture_scale.params})
    assert default == explicit and hash(default) == hash(explicit)
    three = as_op("fixture_scale", scale=3.0)
    negated = as_op("fixture_scale", scale=3.0, negate=True)
    assert three != default and three != negated
    assert dict(negated.dlop_params) == {"scale": 3.0, "negate": True}
    assert "scale=3.0" in str(negated)
    x = pt.vector("x", dtype="float64")
    f = pytensor.function([x], [three(x), negated(x), as_op("fixture_scale", scale=3.0)(x)])
    data = RNG.standard_normal(11)
    a, b, c = f(data)
    np.testing.assert_allclose(a, 3 * data, rtol=1e-15)
    np.testing.assert_allclose(b, -3 * data, rtol=1e-15)
    np.testing.assert_array_equal(c, a)
    assert len(_dlop_nodes(f)) == 2  # the two equal scale=3.0 ops merged
    with pytest.raises(TypeError, match="factor"):
        as_op("fixture_scale", factor=2.0)


def test_type_errors_carry_dlop_message():
    a = pt.vector("a", dtype="float32")
    b = pt.vector("b", dtype="float64")
    with pytest.raises(TypeError, match="same dtype"):
        as_op(dlop.ops.multiply_them)(a, b)
    with pytest.raises(TypeError, match="int32"):
        as_op(dlop.ops.exp)(pt.vector("i", dtype="int32"))
    with pytest.raises(TypeError, match="broadcast"):
        as_op(dlop.ops.multiply_them)(pt.tensor("c", dtype="float32", shape=(3,)),
                                      pt.tensor("d", dtype="float32", shape=(4,)))
    with pytest.raises(ValueError, match="no loaded dlop op"):
        as_op("no_such_op_anywhere")


def test_op_survives_copy_and_pickle():
    import copy
    import pickle
    op = as_op(dlop.ops.exp)
    x = pt.vector("x", dtype="float32")
    pytensor.function([x], op(x))(np.ones(2, np.float32))  # fills the compiled cache
    for clone in (copy.deepcopy(op), pickle.loads(pickle.dumps(op))):
        assert clone == op
        f = pytensor.function([x], clone(x))
        np.testing.assert_allclose(f(np.zeros(2, np.float32)), [1, 1])


class PtTwice(dlop.Op):
    """A dlop.Op written in Python (no other test calls it, so as_op registers it)."""
    __props__ = ()

    def make_node(self, x):
        return dlop.Apply(self, [x], [x.type()])

    def infer_shape(self, node, input_shapes):
        return [input_shapes[0]]

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0] * 2


def test_a_dlop_op_instance_in_a_pytensor_function():
    op = as_op(PtTwice())  # an instance: its registered op, registered here
    assert op == as_op(dlop.ops.PtTwice)
    x = pt.vector("x", dtype="float64")
    f = pytensor.function([x], op(x) + 1)
    data = RNG.uniform(-2, 2, 9)
    np.testing.assert_array_equal(f(data), data * 2 + 1)
