"""test_errors.py — every user error is a dlop exception with the right builtin base, a .status,
and a message naming what was wrong and what was expected; nothing crashes."""
import os

import numpy as np
import pytest

import dlop


def compiled_double(dtype="float32", shape=(None,)):
    x = dlop.tensor("x", dtype=dtype, shape=shape)
    return dlop.function([x], dlop.ops.double(x))


def test_exception_hierarchy():
    assert issubclass(dlop.DlopTypeError, dlop.DlopError) and issubclass(dlop.DlopTypeError, TypeError)
    assert issubclass(dlop.ShapeError, ValueError)
    assert issubclass(dlop.NoDeviceError, RuntimeError)
    assert issubclass(dlop.DeviceMismatchError, RuntimeError)
    assert issubclass(dlop.NotFoundError, LookupError)


def test_wrong_number_of_arguments():
    f = compiled_double()
    with pytest.raises(dlop.DlopTypeError, match=r"takes 1 input \('x',\); 2 were given") as info:
        f(np.ones(2, dtype=np.float32), np.ones(2, dtype=np.float32))
    assert info.value.status == "DLOP_TYPE_ERROR"
    with pytest.raises(TypeError, match="0 were given"):
        f()
    with pytest.raises(TypeError, match="by position, not by keyword"):
        f(x=np.ones(2, dtype=np.float32))
    with pytest.raises(dlop.DlopTypeError, match="op 'multiply_them' takes 2 input"):
        dlop.ops.multiply_them(dlop.vector("a"))


def test_wrong_dtype():
    f = compiled_double("float32")
    with pytest.raises(dlop.DlopTypeError, match=r"argument 1 \('x'\) has dtype float64; the function declares float32"):
        f(np.ones(2))
    with pytest.raises(dlop.DlopTypeError, match="float32") as info:
        dlop.ops.multiply_them(dlop.vector("a", dtype="float32"), dlop.vector("b", dtype="float64"))
    assert info.value.status == "DLOP_TYPE_ERROR"
    with pytest.raises(dlop.DlopTypeError, match="not supported"):
        dlop.vector("v", dtype="complex64")


def test_wrong_shape():
    f = compiled_double(shape=(2, 3))
    with pytest.raises(dlop.ShapeError, match=r"has shape \(3, 2\); the function declares \(2, 3\)") as info:
        f(np.ones((3, 2), dtype=np.float32))
    assert info.value.status == "DLOP_SHAPE_ERROR"
    with pytest.raises(ValueError, match=r"has shape \(6,\)"):
        f(np.ones(6, dtype=np.float32))
    with pytest.raises(dlop.ShapeError):
        dlop.ops.multiply_them(dlop.vector("a", shape=(3,)), dlop.vector("b", shape=(4,)))
    with pytest.raises(dlop.ShapeError, match="2 dimension"):
        dlop.matrix("m", shape=(3,))


def test_unknown_op_and_param():
    with pytest.raises(dlop.NotFoundError, match="no op named 'nosuchop' is loaded; loaded ops: .*double, .*exp") as info:
        dlop.ops.nosuchop
    assert info.value.status == "DLOP_NOT_FOUND"
    assert not hasattr(dlop.ops, "nosuchop")
    with pytest.raises(dlop.NotFoundError, match="op 'exp' has no parameter 'scale'; its parameters: \\(none\\)"):
        dlop.ops.exp(dlop.vector("v"), scale=2.0)
    graph = dlop._C.Graph()
    with pytest.raises(dlop.NotFoundError, match="nosuchop"):
        graph.apply("nosuchop", [], {})


def test_bad_plugin_path():
    # Every loading failure is a PluginError; .status says which one.
    with pytest.raises(dlop.PluginError, match="/no/such/plugin.so: cannot open plugin file") as info:
        dlop.load_plugin("/no/such/plugin.so")
    assert info.value.status == "DLOP_NOT_FOUND"
    with pytest.raises(dlop.PluginError, match="pyproject.toml"):
        dlop.load_plugin(__file__.replace("tests/python/test_errors.py", "pyproject.toml"))


@pytest.mark.parametrize("fixture, status", [
    ("init_fails.so", "DLOP_PLUGIN_ERROR"), ("no_entry_symbol.so", None),
    ("abi_major_mismatch.so", "DLOP_ABI_MISMATCH"), ("not_a_shared_object.so", None),
    ("bad_op_name.so", "DLOP_INVALID_PLUGIN")])
def test_every_load_failure_is_a_plugin_error(fixture, status):
    path = os.path.join(os.environ["DLOP_FIXTURE_DIR"], fixture)
    with pytest.raises(dlop.PluginError, match=fixture.replace(".", r"\.")) as info:
        dlop.load_plugin(path)
    assert isinstance(info.value, RuntimeError)
    if status:
        assert info.value.status == status


def test_wrong_device_and_no_gpu():
    f = compiled_double()
    try:
        dlop._C.device_check("cuda")
        gpu = True
    except dlop.NoDeviceError as error:
        gpu = False
        assert "libcuda" in str(error)
    if not gpu:
        with pytest.raises(dlop.NoDeviceError, match="libcuda") as info:
            dlop.function([dlop.vector("v")], dlop.ops.exp(dlop.vector("w")), device="cuda")
        with pytest.raises(dlop.NoDeviceError, match="libcuda"):
            dlop.asarray(np.ones(2), device="cuda:0")
    with pytest.raises(dlop.InvalidArgumentError, match="tpu"):
        dlop.asarray(np.ones(2), device="tpu")
    with pytest.raises(dlop.InvalidArgumentError):
        compiled = dlop.function([dlop.vector("v")], dlop.ops.exp(dlop.vector("v2")))
    assert f(np.ones(1, dtype=np.float32)).device == "cpu"


def test_missing_input_is_named():
    a, b = dlop.vector("a"), dlop.vector("b")
    y = dlop.ops.multiply_them(a, b)
    with pytest.raises(dlop.InvalidArgumentError, match=r"depend on input 'b', which is not among the function's inputs \('a'\)"):
        dlop.function([a], y)
    with pytest.raises(dlop.InvalidArgumentError, match="'b'"):
        y.eval({a: np.ones(2, dtype=np.float32)})


def test_wrong_param_type():
    import os
    fixture = os.path.join(os.environ.get("DLOP_FIXTURE_DIR", ""), "good.so")
    if not os.path.isfile(fixture):
        pytest.fail(f"fixture plugin {fixture} is missing")
    dlop.load_plugin(fixture) if "fixture_scale" not in dlop.ops else None
    with pytest.raises(dlop.DlopTypeError, match="parameter 'negate' takes a bool, not 'yes'"):
        dlop.ops.fixture_scale(dlop.vector("v"), negate="yes")
    with pytest.raises(dlop.DlopTypeError, match="parameter 'scale' takes a float"):
        dlop.ops.fixture_scale(dlop.vector("v"), scale="big")


@pytest.mark.parametrize("status,name,cls", [
    (-1, "DLOP_INVALID_ARGUMENT", dlop.InvalidArgumentError),
    (-3, "DLOP_SHAPE_ERROR", dlop.ShapeError),
    (-8, "DLOP_LOAD_ERROR", dlop.PluginError),
    (-9, "DLOP_PLUGIN_ERROR", dlop.KernelError),
    (-12, "DLOP_CUDA_ERROR", dlop.KernelError),
    (-4, "DLOP_OUT_OF_MEMORY", dlop.OutOfMemoryError),
])
def test_raise_status_maps_statuses_as_the_extension_does(status, name, cls):
    """Python code that calls libdlop through ctypes (the Numba dispatch) raises through
    _C.raise_status: the same class and status name as the extension's own calls."""
    from dlop import _C
    with pytest.raises(dlop.DlopError) as caught:
        _C.raise_status(status)
    assert type(caught.value) is cls
    assert caught.value.status == name


def test_raise_status_refuses_a_success_status():
    from dlop import _C
    with pytest.raises(ValueError, match="below 0"):
        _C.raise_status(0)


def test_raise_status_with_a_message_of_the_callers():
    from dlop import _C
    with pytest.raises(dlop.DeviceMismatchError, match="input 1 is on cpu") as caught:
        _C.raise_status(-15, "input 1 is on cpu")
    assert caught.value.status == "DLOP_DEVICE_MISMATCH"
