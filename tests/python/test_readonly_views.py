"""test_readonly_views.py — read-only stays read-only: a view (transpose, reshape, broadcast_to,
dimshuffle, a compiled function's view output) of read-only memory is read-only too, through
NumPy, the buffer protocol and DLPack; results that own new memory stay writable."""
import numpy as np
import pytest

import dlop


def read_only_sources():
    numpy_array = np.arange(8, dtype=np.uint8)
    numpy_array.flags.writeable = False
    return {"bytes": dlop.asarray(bytes(range(8))), "read-only numpy": dlop.asarray(numpy_array)}


VIEWS = {
    "T": lambda a: dlop.reshape(a, (2, 4)).T,
    "reshape": lambda a: dlop.reshape(a, (4, 2)),
    "broadcast_to": lambda a: dlop.broadcast_to(a, (3, 8)),
    "dimshuffle": lambda a: dlop.dimshuffle(dlop.reshape(a, (2, 4)), (1, 0)),
    "view of a view": lambda a: dlop.reshape(a, (2, 4)).T.T,
}


def assert_read_only(array):
    with pytest.raises(ValueError, match="read-only"):
        np.asarray(array).flat[0] = 65
    assert memoryview(array).readonly
    assert not np.from_dlpack(array).flags.writeable  # DLPack 1.x carries the flag


@pytest.mark.parametrize("source", ["bytes", "read-only numpy"])
@pytest.mark.parametrize("view", list(VIEWS))
def test_views_of_read_only_memory_are_read_only(source, view):
    original = read_only_sources()[source]
    before = np.asarray(original).copy()
    result = VIEWS[view](original)
    assert_read_only(result)
    np.testing.assert_array_equal(np.asarray(original), before)


def test_compiled_function_view_output_is_read_only():
    x = dlop.matrix("x", dtype="uint8", shape=(2, 4))
    f = dlop.function([x], [x.T, x + x])
    view, fresh = f(dlop.reshape(dlop.asarray(bytes(range(8))), (2, 4)))
    assert_read_only(view)
    np.asarray(fresh)[0, 0] = 1  # new memory: writable


def test_new_results_and_views_of_writable_memory_stay_writable():
    source = read_only_sources()["bytes"]
    total = source + source
    np.asarray(total)[0] = 7
    writable = dlop.asarray(np.arange(8, dtype=np.uint8))
    view = dlop.reshape(writable, (2, 4)).T
    np.asarray(view)[0, 0] = 9
    assert np.asarray(writable)[0] == 9
