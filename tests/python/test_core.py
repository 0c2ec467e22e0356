"""test_core.py — the dlop package on the CPU: every line of the example dlop started from
(symbolic x and W, exp(double(x)), a compiled function and its explain, an eager op, eval; its
CUDA lines check the clear refusal here), plugins and op metadata, static and unknown shapes,
eval, explain, eager ops, multi-output functions and the per-call Function attributes."""
import os

import numpy as np
import pytest

import dlop
from dlop import _arith


def cuda_usable() -> bool:
    try:
        dlop._C.device_check("cuda")
        return True
    except dlop.NoDeviceError:
        return False


def test_plugins_list_bundled_files():
    plugins = {p.name: p for p in dlop.plugins()}
    assert {"double", "exp", "multiply_them"} <= set(plugins)
    exp = plugins["exp"]
    assert exp.path.endswith("libdlop_exp.so") and os.path.isfile(exp.path)
    assert exp.ops == ["exp"] and exp.version and exp.abi_version[0] == 1
    assert isinstance(exp.doc, str)
    assert dlop.load_errors() == []


def test_ops_carry_metadata_and_doc():
    exp = dlop.ops.exp
    assert exp.name == "exp" and exp.num_inputs == 1 and exp.num_outputs == 1
    assert "e^x" in exp.__doc__
    assert exp.dtypes["cpu"] == ["float16", "bfloat16", "float32", "float64"]
    assert set(exp.dtypes) == {"cpu", "cuda"}
    assert exp.deterministic is True and isinstance(exp.cuda_graph_safe, bool)
    assert exp.plugin == "exp" and exp.params == []
    assert dlop.ops.multiply_them.num_inputs == 2
    assert "exp" in dir(dlop.ops) and "double" in dlop.ops


def test_load_plugin_adds_ops_and_params():
    fixture = os.path.join(os.environ.get("DLOP_FIXTURE_DIR", ""), "good.so")
    if not os.path.isfile(fixture):
        pytest.fail(f"fixture plugin {fixture} is missing: build the tests (it is part of the build)")
    assert not hasattr(dlop.ops, "fixture_scale")
    plugin = dlop.load_plugin(fixture)
    assert plugin.name == "fixture_good" and plugin.ops == ["fixture_scale"]
    assert plugin.path.endswith("good.so")
    op = dlop.ops.fixture_scale
    assert [(p.name, p.kind, p.default) for p in op.params] == [("scale", "float", 2.0), ("negate", "bool", False)]
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(op(x).numpy(), 2 * x)
    np.testing.assert_array_equal(op(x, scale=3.0, negate=True).numpy(), -3 * x)
    v = dlop.vector("v", dtype="float64")
    y = op(v, scale=0.5)
    np.testing.assert_array_equal(y.eval({v: np.ones(3)}).numpy(), np.full(3, 0.5))


def test_graph_function_eval_example_cpu():
    x = dlop.vector("x", dtype="float32")
    W = dlop.matrix("W", dtype="float64", shape=(784, 500))
    assert W.shape == (784, 500) and W.dtype == "float64" and W.ndim == 2
    y = dlop.ops.exp(dlop.ops.double(x))
    assert (y.dtype, y.shape) == ("float32", (None,))
    assert y.owner_op is dlop.ops.exp and x.owner_op is None
    f = dlop.function([x], y, device="cpu")
    assert f.device == "cpu" and f.inputs == [x] and f.outputs is y
    r = f(np.arange(5, dtype=np.float32))
    expected = np.exp(2 * np.arange(5, dtype=np.float32))
    np.testing.assert_allclose(np.asarray(r), expected, rtol=1e-6)
    np.testing.assert_allclose(r.numpy(), expected, rtol=1e-6)
    assert (r.device, r.shape, r.dtype, r.ndim, r.size) == ("cpu", (5,), "float32", 1, 5)
    text = f.explain()
    assert "double" in text and "exp" in text and "float32" in text and "on cpu" in text
    a = dlop.asarray(np.ones(3))
    e = dlop.ops.exp(a)
    assert isinstance(e, dlop.Array) and e.dtype == "float64"
    np.testing.assert_allclose(e.numpy(), np.exp(np.ones(3)))
    v = y.eval({x: np.ones(4, dtype=np.float32)})
    np.testing.assert_allclose(v.numpy(), np.exp(np.full(4, 2.0, dtype=np.float32)), rtol=1e-6)


def test_function_cuda_graphs_option_is_checked():
    x = dlop.vector("x", dtype="float32")
    y = dlop.ops.exp(dlop.ops.double(x))
    # accepted on every device; a CPU function runs node by node and explain() says nothing of graphs
    for value in (True, False):
        f = dlop.function([x], y, device="cpu", cuda_graphs=value)
        np.testing.assert_allclose(f(np.ones(3, dtype=np.float32)).numpy(),
                                   np.exp(np.full(3, 2, dtype=np.float32)), rtol=1e-6)
        assert "cuda graphs" not in f.explain()
    for wrong in (0, 1, "no", None):
        with pytest.raises(dlop.DlopTypeError, match="cuda_graphs must be True or False"):
            dlop.function([x], y, device="cpu", cuda_graphs=wrong)
    with pytest.raises(TypeError):
        dlop.function([x], y, "cpu", False)  # keyword only


@pytest.mark.skipif(cuda_usable(), reason="a GPU is usable here: test_gpu_interop.py covers CUDA")
def test_graph_function_eval_example_cuda_lines_refuse_clearly_without_gpu():
    x = dlop.vector("x", dtype="float32")
    y = dlop.ops.exp(dlop.ops.double(x))
    for device in ("cuda", "cuda:1"):
        with pytest.raises(dlop.NoDeviceError, match="libcuda") as info:
            dlop.function([x], y, device=device)
        assert info.value.status == "DLOP_NO_DEVICE"
        assert isinstance(info.value, RuntimeError)
    with pytest.raises(dlop.NoDeviceError, match="libcuda"):
        dlop.asarray(np.ones(3), device="cuda")
    with pytest.raises(dlop.NoDeviceError, match="libcuda"):
        y.eval({x: np.ones(4, dtype=np.float32)}, device="cuda")


def test_static_and_unknown_shapes_propagate():
    a = dlop.tensor("a", dtype="float32", shape=(2, None, 3))
    b = dlop.tensor("b", dtype="float32", shape=(2, 5, 3))
    assert dlop.ops.double(a).shape == (2, None, 3)
    m = dlop.ops.multiply_them(a, b)
    assert m.shape[0] == 2 and m.shape[2] == 3 and m.dtype == "float32"
    s = dlop.scalar("s", dtype="float64")
    assert s.shape == () and dlop.ops.exp(s).shape == ()
    v = dlop.vector("v", dtype="int32", shape=(7,))
    assert dlop.ops.double(v).shape == (7,) and dlop.ops.double(v).dtype == "int32"
    assert dlop.matrix("m").shape == (None, None) and dlop.vector().dtype == "float32"


def test_static_shape_checked_at_call():
    v = dlop.vector("v", dtype="float32", shape=(3,))
    f = dlop.function([v], dlop.ops.double(v))
    np.testing.assert_array_equal(f(np.arange(3, dtype=np.float32)).numpy(), [0, 2, 4])
    with pytest.raises(dlop.ShapeError, match=r"argument 1 \('v'\) has shape \(4,\); the function declares \(3,\)"):
        f(np.arange(4, dtype=np.float32))


def test_eval_of_intermediate_and_constants():
    x = dlop.vector("x", dtype="float64")
    d = dlop.ops.double(x)
    y = dlop.ops.multiply_them(d, np.array([1.0, 10.0, 100.0]))  # a NumPy constant in the graph
    assert y.shape == (3,) or y.shape == (None,)
    out = y.eval({x: np.array([1.0, 2.0, 3.0])})
    np.testing.assert_array_equal(out.numpy(), [2.0, 40.0, 600.0])
    # givens at an intermediate cut the graph there
    np.testing.assert_array_equal(y.eval({d: np.array([1.0, 1.0, 1.0])}).numpy(), [1.0, 10.0, 100.0])
    # eval caches its compiled function per inputs and device
    assert len(y._eval_cache) == 2
    y.eval({x: np.zeros(3)})
    assert len(y._eval_cache) == 2


def test_function_with_several_outputs_returns_list():
    x = dlop.vector("x", dtype="float32")
    d = dlop.ops.double(x)
    e = dlop.ops.exp(x)
    f = dlop.function([x], [d, e])
    out = f(np.zeros(2, dtype=np.float32))
    assert isinstance(out, list) and len(out) == 2
    np.testing.assert_array_equal(out[0].numpy(), [0, 0])
    np.testing.assert_array_equal(out[1].numpy(), [1, 1])
    assert f.outputs == [d, e]


def test_eager_ops_on_various_inputs():
    np.testing.assert_array_equal(dlop.ops.double([1, 2, 3]).numpy(), [2, 4, 6])
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(dlop.ops.multiply_them(a, a).numpy(), a * a)
    # strided (transposed) input, no copy on the way in
    np.testing.assert_array_equal(dlop.ops.double(a.T).numpy(), 2 * a.T)
    # results chain without leaving dlop
    r = dlop.ops.exp(dlop.ops.double(dlop.asarray(np.zeros(2))))
    np.testing.assert_array_equal(r.numpy(), [1.0, 1.0])
    # eager ops reuse one compiled node per dtypes/ranks/device/params
    before = len(_arith._eager_cache)
    dlop.ops.double(np.ones(17, dtype=np.float32))
    dlop.ops.double(np.ones(5, dtype=np.float32))
    assert len(_arith._eager_cache) <= before + 1


def test_function_call_is_the_c_vectorcall():
    x = dlop.vector("x")
    f = dlop.function([x], dlop.ops.exp(x))
    assert type(f) is dlop.Function
    assert "__call__" not in dlop.Function.__dict__ or type(dlop.Function.__dict__["__call__"]).__name__ == "wrapper_descriptor"
    assert dlop.Function.__module__ == "dlop"
    # nothing in the call path is written in Python: the function has no Python __call__
    assert not hasattr(type(f).__call__, "__code__")


def test_zero_size_and_zero_dim_arrays():
    x = dlop.tensor("x", dtype="float32", shape=(None, 3))
    f = dlop.function([x], dlop.ops.double(x))
    assert f(np.zeros((0, 3), dtype=np.float32)).shape == (0, 3)
    s = dlop.scalar("s", dtype="float64")
    assert float(dlop.function([s], dlop.ops.exp(s))(np.array(0.0)).numpy()) == 1.0


def test_function_takes_nested_lists_as_host_data():
    x = dlop.matrix("x", dtype="float64")
    f = dlop.function([x], dlop.ops.double(x), device="cpu")
    r = f([[1.0, 2.0], [3.0, 4.0]])
    assert r.device == "cpu" and r.shape == (2, 2)
    np.testing.assert_array_equal(r.numpy(), [[2.0, 4.0], [6.0, 8.0]])
