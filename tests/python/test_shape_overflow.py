"""test_shape_overflow.py — shapes whose element count or byte size leaves int64 (NumPy's limit:
the nonzero dims times the item size at most 2^63-1) are refused with dlop.ShapeError naming the
shape, wherever they first appear: broadcast_to, an eager broadcast, `@` on broadcast batch
dims, a compiled function, a static Variable, a DLPack or __cuda_array_interface__ import.
Never a wrapped size, a crash, a SystemError or an unnamed OverflowError. The huge inputs are
zero-stride views of one element: nothing big is allocated."""
import ctypes
import gc

import numpy as np
import pytest

import dlop
from dlpack_ctypes import DELETER, DLDataType, DLDevice, DLManagedTensor, DLTensor, capsule_new

TWO_32 = 2**32
HUGE = "(4294967296, 4294967296)"


def zero_stride(shape, dtype=np.float64):
    """A NumPy view of one element with the given shape (every stride 0)."""
    return np.lib.stride_tricks.as_strided(np.ones(1, dtype=dtype), shape=shape,
                                           strides=(0,) * len(shape), writeable=False)


def refused(match):
    """pytest.raises for a ShapeError (a dlop exception and a ValueError) matching match."""
    return pytest.raises(dlop.ShapeError, match=match)


def check_class(info):
    assert isinstance(info.value, dlop.DlopError) and isinstance(info.value, ValueError)
    assert not isinstance(info.value, (SystemError, OverflowError))


# ---- the reported cases ----------------------------------------------------------------------

def test_broadcast_to_past_int64_is_refused():
    one = dlop.asarray(np.ones(1))
    with refused(r"broadcast_to: shape \(4294967296, 4294967296, 2\) has more than 2\^63-1 "
                 r"elements") as info:
        dlop.broadcast_to(one, (TWO_32, TWO_32, 2))
    check_class(info)
    with refused(r"broadcast_to: shape \(4294967296, 4294967296, 2\)"):
        dlop.broadcast_to(one, (TWO_32, TWO_32, 2)) + 1.0
    # elements that fit, bytes that do not (NumPy's "array is too big")
    with refused(r"broadcast_to: shape \(2147483648, 2147483648\) of float64 has more than "
                 r"2\^63-1 bytes"):
        dlop.broadcast_to(one, (2**31, 2**31))
    # a zero dim does not excuse the others (NumPy refuses this too)
    with refused(r"shape \(0, 1099511627776, 1099511627776\)"):
        dlop.broadcast_to(one, (0, 2**40, 2**40))


def test_eager_broadcast_of_zero_stride_views_is_refused():
    a, b = zero_stride((TWO_32, 1)), zero_stride((1, TWO_32))
    with pytest.raises(ValueError):
        a + b  # NumPy refuses it too
    with refused(r"broadcasting \(4294967296, 1\) with \(1, 4294967296\) gives shape "
                 r"\(4294967296, 4294967296\), which has more than 2\^63-1 elements") as info:
        (dlop.asarray(a) + dlop.asarray(b)).sum()
    check_class(info)


def test_matmul_with_broadcast_batch_dims_is_refused():
    a, b = zero_stride((TWO_32, 1, 1, 1)), zero_stride((1, TWO_32, 1, 1))
    with refused(r"matmul: .*\(4294967296, 4294967296\)") as info:
        dlop.asarray(a) @ dlop.asarray(b)
    check_class(info)
    # static shapes: refused while the graph is built
    p = dlop.tensor("p", dtype="float64", shape=(TWO_32, 1, 2, 2))
    q = dlop.tensor("q", dtype="float64", shape=(1, TWO_32, 2, 2))
    with refused(HUGE.replace("(", r"\(").replace(")", r"\)")):
        p @ q


def test_compiled_function_refuses_then_still_runs():
    x = dlop.matrix("x", dtype="float64")
    y = dlop.matrix("y", dtype="float64")
    f = dlop.function([x, y], (x + y).sum())
    # add runs inside the sum's fused kernel (the fused node names its member), or on its own
    with refused(r"node #0 (fused: group member 0: )?add: broadcasting \(4294967296, 1\) with "
                 r"\(1, 4294967296\) gives shape \(4294967296, 4294967296\)") as info:
        f(zero_stride((TWO_32, 1)), zero_stride((1, TWO_32)))
    check_class(info)
    r = f(np.ones((3, 1)), np.ones((1, 4)))
    assert float(np.asarray(r)) == 24.0


# ---- static shapes ---------------------------------------------------------------------------

def test_static_variable_shapes_are_checked_where_made():
    with refused(r"matrix 'w': shape \(1099511627776, 1099511627776\) has more than 2\^63-1 "
                 r"elements") as info:
        dlop.matrix("w", dtype="float32", shape=(2**40, 2**40))
    check_class(info)
    # unknown dims count as 1: no size they take at run time could make it fit
    with refused(r"tensor 't': shape \(\?, 1099511627776, 1099511627776\)"):
        dlop.tensor("t", dtype="int8", shape=(None, 2**40, 2**40))
    with refused(r"vector 'v': shape \(2305843009213693952,\) of float64 has more than 2\^63-1 "
                 r"bytes"):
        dlop.vector("v", dtype="float64", shape=(2**61,))
    # a dim past int64 is named, not an OverflowError from the conversion
    with refused(r"matrix 'm': dimension 0 is 1180591620717411303424, more than 2\^63-1") as info:
        dlop.matrix("m", shape=(2**70, 2))
    check_class(info)
    # the largest that fit are fine
    assert dlop.vector("ok", dtype="int8", shape=(2**63 - 1,)).shape == (2**63 - 1,)
    assert dlop.vector("ok8", dtype="float64", shape=((2**63 - 1) // 8,)).shape[0] == (2**63 - 1) // 8


def test_reshape_target_past_int64_is_refused():
    a = dlop.asarray(np.ones(4))
    with refused(r"reshape: shape \(1099511627776, 1099511627776\) has more than 2\^63-1 "
                 r"elements"):
        a.reshape(2**40, 2**40)


# ---- imports ---------------------------------------------------------------------------------

class ClaimingProducer:
    """A legacy DLPack producer of one float64 that claims any shape and strides."""

    def __init__(self, shape, strides):
        self.value = np.ones(1)
        self.deleted = 0
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.strides = (ctypes.c_int64 * len(strides))(*strides)
        self.managed = DLManagedTensor()
        self.managed.dl_tensor = DLTensor(self.value.ctypes.data, DLDevice(1, 0), len(shape),
                                          DLDataType(2, 64, 1), self.shape, self.strides, 0)

        def deleter(_pointer):
            self.deleted += 1

        self.deleter = DELETER(deleter)
        self.managed.deleter = self.deleter

    def __dlpack__(self, stream=None):
        return capsule_new(ctypes.addressof(self.managed), b"dltensor", None)

    def __dlpack_device__(self):
        return (1, 0)


def test_dlpack_import_of_a_huge_shape_is_refused():
    producer = ClaimingProducer((TWO_32, TWO_32, 2), (0, 0, 0))
    with refused(r"dlop_array_wrap: shape \(4294967296, 4294967296, 2\) has more than 2\^63-1 "
                 r"elements") as info:
        dlop.asarray(producer)
    check_class(info)
    assert producer.deleted == 1  # given back, exactly once
    # in a function call too
    x = dlop.tensor("x", dtype="float64", shape=(None, None, None))
    f = dlop.function([x], x * 2.0)
    producer = ClaimingProducer((2**31, 2**31, 1), (0, 0, 0))
    with refused(r"shape \(2147483648, 2147483648, 1\) of float64 has more than 2\^63-1 bytes"):
        f(producer)
    assert producer.deleted == 1


def test_dlpack_import_whose_strides_reach_past_int64_is_refused():
    producer = ClaimingProducer((3, 2), (2**62, 1))
    with pytest.raises(dlop.InvalidArgumentError,
                       match=r"shape \(3, 2\) with strides \(4611686018427387904, 1\) of 8-byte "
                             r"elements at byte offset 0 reaches beyond the 2\^63-1 bytes of "
                             r"int64 \(dimension 0\)") as info:
        dlop.asarray(producer)
    assert not isinstance(info.value, (SystemError, OverflowError))
    assert producer.deleted == 1


def test_dlpack_import_of_a_large_zero_stride_view_works():
    producer = ClaimingProducer((2**30, 2**29), (0, 0))  # 2^59 float64: 2^62 bytes fit
    a = dlop.asarray(producer)
    assert a.shape == (2**30, 2**29) and a.size == 2**59 and a.strides == (0, 0)
    view = memoryview(a)
    assert view.nbytes == 2**62 and view.strides == (0, 0)
    assert view[2**30 - 1, 2**29 - 1] == 1.0
    del a, view
    gc.collect()
    assert producer.deleted == 1


class HugeCai:
    """A __cuda_array_interface__ producer claiming a huge shape (never dereferenced)."""

    def __init__(self, shape):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f8", "data": (0, False),
                                         "strides": (0,) * len(shape), "version": 3}


def test_cuda_array_interface_of_a_huge_shape_is_refused():
    with refused(r"__cuda_array_interface__: shape \(4294967296, 4294967296, 2\) has more than "
                 r"2\^63-1 elements") as info:
        dlop.asarray(HugeCai((TWO_32, TWO_32, 2)))
    check_class(info)
    with refused(r"__cuda_array_interface__\['shape'\]\[1\] is 1180591620717411303424, outside "
                 r"int64") as info:
        dlop.asarray(HugeCai((1, 2**70)))
    check_class(info)


# ---- what still works ------------------------------------------------------------------------

def test_fitting_broadcasts_still_work():
    one = dlop.asarray(np.ones(1, dtype=np.int8))
    big = dlop.broadcast_to(one, (2**31, 2**31))  # 2^62 int8 elements, one in memory
    assert big.shape == (2**31, 2**31) and big.size == 2**62
    view = memoryview(big)
    assert view.nbytes == 2**62
    assert view[2**31 - 1, 2**31 - 1] == 1
    a = dlop.asarray(zero_stride((3, 1)))
    b = dlop.asarray(np.arange(4.0).reshape(1, 4))
    np.testing.assert_array_equal(np.asarray(a + b), np.ones((3, 1)) + np.arange(4.0))
    p = dlop.asarray(zero_stride((2, 1, 2, 3)))
    q = dlop.asarray(np.ones((1, 3, 3, 2)))
    np.testing.assert_array_equal(np.asarray(p @ q), np.ones((2, 1, 2, 3)) @ np.ones((1, 3, 3, 2)))
    assert float(np.asarray(dlop.asarray(zero_stride((1000, 1000))).sum())) == 1e6
