"""test_foreign_input_errors.py — odd or hostile inputs from outside (DLPack producers written in
Python, devices named with odd strings, parameters too large for C) end in a dlop exception that
names what was wrong: never a SystemError, never a crash."""
import ctypes

import numpy as np
import pytest

import dlop
from dlpack_ctypes import DELETER, DLDataType, DLDevice, DLManagedTensor, DLTensor, capsule_new



class PythonDeleterProducer:
    """A legacy DLPack producer whose deleter is Python code (a ctypes callback), as a pure
    Python library would write it. The deleter runs Python code when dlop gives the tensor back."""

    def __init__(self, values, code, bits):
        self.values = values
        self.deleted = 0
        self.shape = (ctypes.c_int64 * 1)(values.size)
        self.managed = DLManagedTensor()
        self.managed.dl_tensor = DLTensor(values.ctypes.data, DLDevice(1, 0), 1,
                                          DLDataType(code, bits, 1), self.shape, None, 0)

        def deleter(_pointer):
            self.deleted += 1
            [str(i) for i in range(10)]  # Python work: would clobber a pending exception

        self.deleter = DELETER(deleter)
        self.managed.deleter = self.deleter

    def __dlpack__(self, stream=None):
        return capsule_new(ctypes.addressof(self.managed), b"dltensor", None)

    def __dlpack_device__(self):
        return (1, 0)


def test_python_deleter_keeps_the_real_error():
    producer = PythonDeleterProducer(np.arange(4, dtype=np.uint16), code=1, bits=16)  # uint16
    with pytest.raises(dlop.DlopError, match="bits 16") as info:
        dlop.asarray(producer)
    assert not isinstance(info.value, SystemError)
    assert producer.deleted == 1  # given back exactly once


def test_python_deleter_on_success_is_called_once():
    producer = PythonDeleterProducer(np.arange(4, dtype=np.float32), code=2, bits=32)
    a = dlop.asarray(producer)
    np.testing.assert_array_equal(np.asarray(a), np.arange(4, dtype=np.float32))
    del a
    import gc
    gc.collect()
    assert producer.deleted == 1


class BadDevice:
    def __init__(self, device):
        self.device = device

    def __dlpack__(self, stream=None, max_version=None):
        return np.ones(2, dtype=np.float32).__dlpack__()

    def __dlpack_device__(self):
        return self.device


@pytest.mark.parametrize("device", [5, None, "cpu", (1,), (1, 0, 0), (1, "a"), [1, 0], (2**70, 0)])
def test_bad_dlpack_device_is_a_type_error(device):
    with pytest.raises(dlop.DlopTypeError, match=r"__dlpack_device__ of .* returned .*; expected a tuple \(device_type, device_id\) of two ints"):
        dlop.asarray(BadDevice(device))


@pytest.mark.parametrize("text", ["cpu\x00x", "cuda:0\x00", "\x00"])
def test_device_string_with_nul_is_refused(text):
    x = dlop.vector("x")
    with pytest.raises(dlop.InvalidArgumentError, match="contains a NUL character; expected 'cpu', 'cuda' or 'cuda:N'"):
        dlop.function([x], dlop.ops.double(x), device=text)
    with pytest.raises(dlop.InvalidArgumentError, match="NUL"):
        dlop.asarray(np.ones(2), device=text)


def test_huge_axis_names_the_parameter():
    a = dlop.asarray(np.ones((2, 3), dtype=np.float32))
    with pytest.raises(dlop.InvalidArgumentError, match=r"op 'sum' parameter 'axes': 1180591620717411303424 does not fit"):
        dlop.sum(a, axis=2**70)
    with pytest.raises(dlop.InvalidArgumentError, match=r"parameter 'axes': -1180591620717411303424 does not fit"):
        dlop.sum(a, axis=(0, -2**70))
    x = dlop.vector("x")
    with pytest.raises(dlop.InvalidArgumentError, match=r"parameter 'axes'"):
        dlop.sum(x, axis=2**64)


def test_string_parameter_with_nul_is_refused():
    x = dlop.vector("x", dtype="float32")
    with pytest.raises(dlop.InvalidArgumentError, match=r"op 'cast' parameter 'dtype': 'float64\\x00x' contains a NUL character"):
        dlop.ops.cast(x, dtype="float64\x00x")
