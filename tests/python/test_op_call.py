"""test_op_call.py — dlop._C.OpCall, the prepared call under dlop.torch, driven with NumPy's
DLPack capsules: one call prepared for dtypes and ranks serves every shape, writes the caller's
output memory (checked by pointer and value), reads strided inputs, takes parameters, and
refuses bad capsules, shapes and dtypes with messages."""
import numpy as np
import pytest

import dlop
from dlop import _C


def test_one_call_serves_every_shape_and_writes_the_callers_memory():
    call = _C.OpCall("exp", ("float32",), (1,), {}, "cpu")
    assert call.output_dtypes == ("float32",)
    for n in (1, 7, 1000):
        x = np.linspace(-2, 2, n, dtype=np.float32)
        (shape,) = call.infer_shapes(((n,),))
        assert shape == (n,)
        y = np.full(shape, np.nan, dtype=np.float32)
        address = y.ctypes.data
        assert call.run((x.__dlpack__(),), (y.__dlpack__(),), 0) is None
        assert y.ctypes.data == address
        np.testing.assert_allclose(y, np.exp(x), rtol=2e-7)
    strided = (np.arange(20, dtype=np.float32) * 0.1)[::4]
    out = np.empty(5, dtype=np.float32)
    # versioned (DLPack 1.x) capsules too
    call.run((strided.__dlpack__(max_version=(1, 0)),), (out.__dlpack__(max_version=(1, 0)),), 0)
    np.testing.assert_allclose(out, np.exp(strided), rtol=2e-7)


def test_parameters_and_broadcasting():
    total = _C.OpCall("sum", ("float64",), (2,), {"axes": [1], "keepdims": True}, "cpu")
    x = np.arange(12.0).reshape(3, 4)
    (shape,) = total.infer_shapes(((3, 4),))
    assert shape == (3, 1)
    y = np.empty(shape)
    total.run((x.__dlpack__(),), (y.__dlpack__(),), 0)
    np.testing.assert_array_equal(y, x.sum(axis=1, keepdims=True))
    add = _C.OpCall("add", ("float32", "float32"), (2, 1), {}, "cpu")
    assert add.infer_shapes(((4, 3), (3,))) == ((4, 3),)
    with pytest.raises(dlop.ShapeError):
        add.infer_shapes(((4, 3), (2,)))


def test_errors_name_what_is_wrong():
    with pytest.raises(dlop.NotFoundError):
        _C.OpCall("no_such_op", ("float32",), (1,), {}, "cpu")
    with pytest.raises(dlop.NotFoundError, match="has no parameter 'scale'"):
        _C.OpCall("exp", ("float32",), (1,), {"scale": 2.0}, "cpu")
    with pytest.raises(dlop.DlopTypeError, match="axes"):
        _C.OpCall("sum", ("float32",), (1,), {"axes": "rows"}, "cpu")
    with pytest.raises(dlop.UnsupportedError, match="view op"):
        _C.OpCall("transpose", ("float32",), (2,), {}, "cpu")
    call = _C.OpCall("exp", ("float32",), (1,), {}, "cpu")
    x, y = np.ones(3, np.float32), np.empty(3, np.float32)
    with pytest.raises(dlop.DlopTypeError, match="input 0 is float64"):
        call.run((np.ones(3).__dlpack__(),), (y.__dlpack__(),), 0)
    with pytest.raises(dlop.ShapeError, match="output 0 is float32\\[4\\]"):
        call.run((x.__dlpack__(),), (np.empty(4, np.float32).__dlpack__(),), 0)
    with pytest.raises(dlop.InvalidArgumentError, match="not an unused 'dltensor'"):
        call.run((x,), (y.__dlpack__(),), 0)
    with pytest.raises(dlop.InvalidArgumentError, match="takes 1 inputs and 1 outputs"):
        call.run((x.__dlpack__(), x.__dlpack__()), (y.__dlpack__(),), 0)
    readonly = np.empty(3, np.float32)
    readonly.flags.writeable = False
    with pytest.raises(dlop.InvalidArgumentError, match="read-only"):
        call.run((x.__dlpack__(),), (readonly.__dlpack__(max_version=(1, 0)),), 0)
