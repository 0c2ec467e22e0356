"""test_arrays.py — dlop.Array and dlop.asarray with NumPy: zero-copy both ways (proven by writing
through one and reading through the other), DLPack export (versioned and legacy capsules, via
numpy.from_dlpack), DLPack import (versioned first, legacy fallback), the CUDA array interface's
absence on the CPU, dtypes, strides and to()."""
import ctypes

import numpy as np
import pytest

import dlop

_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]


class LegacyProducer:
    """A DLPack producer from before DLPack 1.0: no max_version, legacy capsules only."""

    def __init__(self, array):
        self.array = array
        self.calls = []

    def __dlpack__(self, stream=None):
        self.calls.append(stream)
        return self.array.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


class VersionedProducer(LegacyProducer):
    def __dlpack__(self, stream=None, max_version=None):
        self.calls.append((stream, max_version))
        return self.array.__dlpack__(stream=stream, max_version=max_version)


def test_asarray_numpy_is_zero_copy_both_ways():
    host = np.arange(6, dtype=np.float32)
    a = dlop.asarray(host)
    assert (a.device, a.shape, a.dtype, a.size, a.ndim) == ("cpu", (6,), "float32", 6, 1)
    host[2] = 42.0
    assert a.numpy()[2] == 42.0          # a sees writes to host
    back = np.asarray(a)
    back[3] = -1.0
    assert host[3] == -1.0               # host sees writes through the array's buffer
    assert a.data_pointer == host.ctypes.data


def test_asarray_keeps_the_numpy_buffer_alive():
    host = np.arange(1000, dtype=np.float64)
    a = dlop.asarray(host)
    del host
    np.testing.assert_array_equal(a.numpy(), np.arange(1000, dtype=np.float64))


def test_asarray_strided_and_dtypes():
    host = np.arange(12, dtype=np.int64).reshape(3, 4)[:, ::2]
    a = dlop.asarray(host)
    assert a.shape == (3, 2) and a.strides == (4, 2) and a.dtype == "int64"
    np.testing.assert_array_equal(a.numpy(), host)
    for dtype in ("bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64"):
        arr = np.ones(3, dtype=dtype)
        assert dlop.asarray(arr).dtype == dtype
        np.testing.assert_array_equal(dlop.asarray(arr).numpy(), arr)
    assert dlop.asarray([1.5, 2.5]).dtype == "float64"
    assert dlop.asarray(np.ones(2), dtype="float32").dtype == "float32"
    assert dlop.asarray(3.0).shape == ()


def test_unsupported_host_dtype_is_a_type_error():
    with pytest.raises(dlop.DlopTypeError, match="format 'H'"):
        dlop.asarray(np.ones(2, dtype=np.uint16))
    with pytest.raises(TypeError):
        dlop.asarray(np.ones(2, dtype=np.complex64))


def test_dlpack_versioned_round_trip_with_numpy():
    a = dlop.asarray(np.arange(5, dtype=np.float32))
    capsule = a.__dlpack__(max_version=(1, 0))
    assert _capsule_name(capsule) == b"dltensor_versioned"
    assert a.__dlpack_device__() == (1, 0)
    n = np.from_dlpack(a)                # NumPy 2 asks for a versioned capsule
    n[0] = 7.0
    assert a.numpy()[0] == 7.0           # same memory
    del a
    assert n[0] == 7.0 and n[4] == 4.0   # the capsule keeps the memory alive


def test_dlpack_legacy_round_trip_with_numpy():
    a = dlop.asarray(np.arange(4, dtype=np.int32))
    capsule = a.__dlpack__()
    assert _capsule_name(capsule) == b"dltensor"
    del capsule                           # an unconsumed capsule frees its tensor
    producer = LegacyProducer(a)
    n = np.from_dlpack(producer)          # falls back to the legacy protocol (read-only in NumPy)
    a.numpy()[1] = 100
    assert n[1] == 100                    # same memory
    assert producer.calls == [None]


def test_dlpack_import_versioned_first_then_legacy():
    host = np.arange(3, dtype=np.float64)
    source = dlop.asarray(host)
    versioned = VersionedProducer(source)
    b = dlop.asarray(versioned)
    assert versioned.calls == [(None, (1, 1))]
    host[0] = 9.0
    assert b.numpy()[0] == 9.0
    legacy = LegacyProducer(source)
    c = dlop.asarray(legacy)
    assert legacy.calls == [None]
    assert c.numpy()[0] == 9.0
    # NumPy itself as a DLPack producer (through its buffer first; the DLPack path is taken
    # for objects without a buffer, tested above)
    assert dlop.asarray(np.ones(2)).numpy().tolist() == [1.0, 1.0]


def test_dlpack_copy_and_device_arguments():
    host = np.arange(3, dtype=np.float32)
    a = dlop.asarray(host)
    copy_capsule_owner = VersionedProducer(a)
    n = np.from_dlpack(a, copy=True)
    n[0] = 5.0
    assert host[0] == 0.0                 # copy=True gave other memory
    with pytest.raises(BufferError, match="copy=False"):
        a.__dlpack__(dl_device=(2, 0), copy=False)
    with pytest.raises(BufferError, match="stream=5 was given for a CPU array"):
        a.__dlpack__(stream=5)
    assert copy_capsule_owner.array is a


def test_cuda_array_interface_absent_on_cpu():
    a = dlop.asarray(np.ones(2))
    assert not hasattr(a, "__cuda_array_interface__")


def test_array_protocol_and_to():
    a = dlop.asarray(np.arange(3, dtype=np.float32))
    assert np.asarray(a, dtype=np.float64).dtype == np.float64
    assert a.to("cpu") is a
    assert len(a) == 3
    assert repr(a) == "dlop.Array(shape=(3,), dtype=float32, device=cpu)"
    with pytest.raises(TypeError):
        dlop.Array()


def test_function_results_feed_numpy_without_copy():
    x = dlop.vector("x", dtype="float32")
    f = dlop.function([x], dlop.ops.double(x))
    r = f(np.ones(4, dtype=np.float32))
    view = np.asarray(r)
    view[0] = 123.0
    assert r.numpy()[0] == 123.0
    assert f(r).numpy()[0] == 246.0      # a dlop.Array goes back in without conversion


def test_read_only_memory_stays_read_only():
    host = np.arange(4, dtype=np.float32)
    host.flags.writeable = False
    a = dlop.asarray(host)
    assert np.asarray(a).flags.writeable is False       # buffer protocol says read-only
    assert memoryview(a).readonly
    with pytest.raises(ValueError, match="read-only"):
        np.asarray(a)[0] = 1.0
    # DLPack: the versioned capsule carries READ_ONLY (NumPy makes its view read-only); a
    # legacy capsule cannot say so and is refused, as NumPy does.
    n = np.from_dlpack(a)
    assert n.flags.writeable is False
    with pytest.raises(BufferError, match="read-only"):
        a.__dlpack__()
    np.testing.assert_array_equal(np.from_dlpack(a, copy=True), host)
    # Re-wrapping keeps the flag; bytes are read-only too.
    assert np.asarray(dlop.asarray(a)).flags.writeable is False
    assert memoryview(dlop.asarray(b"abc")).readonly
    # Writable sources stay writable.
    assert np.asarray(dlop.asarray(np.ones(2))).flags.writeable is True


def test_read_only_dlpack_import_is_honoured():
    host = np.arange(3, dtype=np.float64)
    host.flags.writeable = False
    source = dlop.asarray(host)
    b = dlop.asarray(VersionedProducer(source))           # a versioned capsule flagged read-only
    assert np.asarray(b).flags.writeable is False
    writable = dlop.asarray(VersionedProducer(dlop.asarray(np.ones(2))))
    assert np.asarray(writable).flags.writeable is True


def test_dlpack_argument_errors_name_what_was_expected():
    a = dlop.asarray(np.ones(2, dtype=np.float32))
    with pytest.raises(TypeError, match=r"max_version is \[1, 0\]; expected a \(major, minor\)"):
        a.__dlpack__(max_version=[1, 0])
    with pytest.raises(TypeError, match="dl_device is 'cpu'; expected a"):
        a.__dlpack__(dl_device="cpu")
    with pytest.raises(BufferError, match="stream='x' was given for a CPU array; expected None"):
        a.__dlpack__(stream="x")
    a.__dlpack__(stream=None)
    a.__dlpack__(stream=-1)                             # "no synchronization" is harmless


class FakeCai:
    """A __cuda_array_interface__ producer with a malformed interface (checked before any
    CUDA call, so this runs without a GPU)."""

    def __init__(self, interface):
        self.__cuda_array_interface__ = interface


def test_cuda_array_interface_strides_must_match_shape():
    bad = FakeCai({"shape": (2, 3), "typestr": "<f4", "data": (0, False), "strides": (12,),
                   "version": 3})
    with pytest.raises(dlop.InvalidArgumentError, match="1 strides for 2 dimensions"):
        dlop.asarray(bad)
    with pytest.raises(dlop.DlopTypeError, match="typestr '>f4'"):
        dlop.asarray(FakeCai({"shape": (2,), "typestr": ">f4", "data": (0, False), "version": 3}))


class LyingDevice(VersionedProducer):
    """__dlpack_device__ names another device than the capsule's tensor has."""

    def __dlpack_device__(self):
        return (1, 3)


def test_dlpack_device_mismatch_is_refused_and_the_tensor_freed():
    host = np.arange(3, dtype=np.float32)
    with pytest.raises(dlop.InvalidArgumentError, match=r"device \(1, 0\) but __dlpack_device__ said \(1, 3\)"):
        dlop.asarray(LyingDevice(dlop.asarray(host)))
    host.resize(0, refcheck=True)      # fails if the refused tensor still held the buffer


def test_cpu_inputs_go_back_at_once_with_nothing_queued():
    """Only foreign CUDA inputs wait in the deferred-release queue; NumPy buffers and CPU
    DLPack tensors go back to their producer when the call ends, as before."""
    import sys
    x = dlop.vector("x", dtype="float64")
    f = dlop.function([x], dlop.ops.exp(dlop.ops.double(x)), device="cpu")
    host = np.linspace(0, 1, 50)
    before = sys.getrefcount(host)
    for _ in range(20):
        np.testing.assert_allclose(f(host).numpy(), np.exp(2 * host))
        np.testing.assert_allclose(f(VersionedProducer(host)).numpy(), np.exp(2 * host))
        np.testing.assert_allclose(f(LegacyProducer(host)).numpy(), np.exp(2 * host))
        dlop.asarray(VersionedProducer(host))
        assert dlop._C.pending_foreign_releases() == 0
    # Every buffer view and DLPack capsule let go of host when its call ended.
    assert sys.getrefcount(host) == before
    dlop.synchronize("cpu")
    assert dlop._C.pending_foreign_releases() == 0
