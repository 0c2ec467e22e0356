"""test_gpu_out_of_memory.py — a CUDA request larger than the GPU holds raises
dlop.OutOfMemoryError (a MemoryError) naming the size, and the next calls work: eager ops, a
compiled function, a fresh array. Without a usable GPU every test skips with dlop's reason."""
import numpy as np
import pytest

import dlop
from grad_w_support import require_gpu


@pytest.fixture(autouse=True)
def gpu():
    require_gpu()


def test_huge_output_is_out_of_memory_then_calls_work():
    x = dlop.asarray(np.ones(1, dtype=np.float32), device="cuda")
    big = dlop.broadcast_to(x, (2**25, 2**24))  # a view: no memory yet
    with pytest.raises(dlop.OutOfMemoryError, match="could not allocate") as info:
        big + 1.0  # 2^49 float32 outputs: 2 PiB
    assert isinstance(info.value, MemoryError)
    assert info.value.status == "DLOP_OUT_OF_MEMORY"
    y = dlop.asarray(np.arange(5, dtype=np.float32), device="cuda")
    np.testing.assert_array_equal((y + 1.0).numpy(), np.arange(5, dtype=np.float32) + 1)
    v = dlop.vector("v")
    f = dlop.function([v], dlop.ops.double(v), device="cuda")
    np.testing.assert_array_equal(f(y).numpy(), 2 * np.arange(5, dtype=np.float32))


def test_huge_copy_to_the_gpu_is_out_of_memory():
    with pytest.raises(dlop.OutOfMemoryError):
        dlop.asarray(np.broadcast_to(np.ones(1, np.float32), (2**25, 2**24)), device="cuda")
    assert dlop.asarray(np.ones(3, np.float32), device="cuda").numpy().sum() == 3
