"""test_gpu_interop.py — dlop on CUDA with the GPU frameworks: CuPy, PyTorch and JAX through
DLPack in both directions with streams, __cuda_array_interface__ producers (CuPy, and a
Numba-style object), float64 on the GPU, results left on the device, device-mismatch
errors, and the deferred release of foreign inputs (no GPU wait per call; the memory goes back
to its producer only after dlop's work on it is done; synchronize empties the queue).  Without a usable GPU every test skips with dlop's reason; DLOP_REQUIRE_GPU=1 turns
that into a failure.  A framework that is not installed skips its own tests."""
import os
import time

import numpy as np
import pytest

import dlop


def _gpu_reason():
    try:
        dlop._C.device_check("cuda:0")
    except dlop.DlopError as error:
        return str(error)
    return None


GPU_REASON = _gpu_reason()


@pytest.fixture(autouse=True)
def require_gpu():
    if GPU_REASON is None:
        return
    if os.environ.get("DLOP_REQUIRE_GPU") == "1":
        pytest.fail(f"DLOP_REQUIRE_GPU=1 but no GPU is usable: {GPU_REASON}")
    pytest.skip(f"no GPU usable: {GPU_REASON}")


def framework(name):
    try:
        return pytest.importorskip(name)
    except pytest.skip.Exception:
        raise


def exp_double(dtype="float32", device="cuda"):
    x = dlop.vector("x", dtype=dtype)
    return dlop.function([x], dlop.ops.exp(dlop.ops.double(x)), device=device)


def test_graph_function_eval_example_on_cuda_float32_and_float64():
    for dtype in ("float32", "float64"):
        f = exp_double(dtype)
        assert f.device == "cuda:0"
        host = np.arange(5, dtype=dtype)
        r = f(host)
        assert r.device == "cuda:0" and r.dtype == dtype and r.shape == (5,)
        np.testing.assert_allclose(r.numpy(), np.exp(2 * host), rtol=1e-6)
        assert "cuda:0" in f.explain()
        with pytest.raises(dlop.DeviceMismatchError, match=r"call \.numpy\(\)"):
            np.asarray(r)
    a = dlop.asarray(np.ones(3), device="cuda")
    assert a.device == "cuda:0"
    np.testing.assert_allclose(dlop.ops.exp(a).numpy(), np.exp(np.ones(3)))
    x = dlop.vector("x", dtype="float32")
    y = dlop.ops.exp(dlop.ops.double(x))
    np.testing.assert_allclose(y.eval({x: np.ones(4, dtype=np.float32)}, device="cuda").numpy(),
                               np.exp(np.full(4, 2.0, dtype=np.float32)), rtol=1e-6)


def test_sizes_zero_odd_and_large():
    f = exp_double()
    for n in (0, 1, 7, 230400, 1000003):
        host = np.linspace(-3, 3, n, dtype=np.float32)
        np.testing.assert_allclose(f(host).numpy(), np.exp(2 * host), rtol=2e-6)


def test_device_mismatch_is_an_error_never_a_move():
    f = exp_double()
    cpu = dlop.asarray(np.ones(3, dtype=np.float32))
    with pytest.raises(dlop.DeviceMismatchError, match=r"argument 1 \('x'\) is on cpu; this function runs on cuda:0"):
        f(cpu)
    g = exp_double(device="cpu")
    gpu = dlop.asarray(np.ones(3, dtype=np.float32), device="cuda")
    with pytest.raises(dlop.DeviceMismatchError, match="is on cuda:0; this function runs on cpu"):
        g(gpu)
    with pytest.raises(dlop.DeviceMismatchError, match="one device"):
        dlop.ops.multiply_them(cpu, gpu)
    if dlop.cuda_device_count() < 2:
        with pytest.raises(dlop.NoDeviceError):
            exp_double(device="cuda:1")


def test_cai_export_fields():
    f = exp_double()
    r = f(np.ones(6, dtype=np.float32))
    cai = r.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (6,) and cai["typestr"] == "<f4"
    assert cai["strides"] is None and cai["data"][1] is False and cai["data"][0] == r.data_pointer
    if "stream" in cai:
        assert cai["stream"] == dlop._C.stream_handle("cuda:0")
    r.synchronize()
    assert "stream" not in r.__cuda_array_interface__ or r.__cuda_array_interface__["stream"]


class NumbaStyle:
    """A __cuda_array_interface__ producer like a Numba device array (v3, with a stream)."""

    def __init__(self, owner, stream):
        self.owner = owner
        self.__cuda_array_interface__ = dict(owner.__cuda_array_interface__)
        self.__cuda_array_interface__["stream"] = stream


def test_cupy_dlpack_both_ways_with_streams():
    cp = framework("cupy")
    f = exp_double()
    with cp.cuda.Stream(non_blocking=True) as stream:
        x = cp.arange(1000, dtype=cp.float32) / 100
        r = f(x)                                   # cupy -> dlop, no copy; dlop waits for cupy's stream
        back = cp.from_dlpack(r)                   # dlop -> cupy on cupy's current stream
        cp.testing.assert_allclose(back, cp.exp(2 * x), rtol=1e-6)
    a = dlop.asarray(x)
    assert a.data_pointer == x.data.ptr            # zero-copy
    x64 = cp.linspace(0, 1, 11, dtype=cp.float64)
    cp.testing.assert_allclose(cp.from_dlpack(exp_double("float64")(x64)), cp.exp(2 * x64))
    legacy = cp.from_dlpack(dlop.asarray(np.ones(3, dtype=np.float32), device="cuda"))
    assert float(legacy.sum()) == 3.0


def test_cupy_cai_and_numba_style_producers():
    cp = framework("cupy")
    f = exp_double()
    x = cp.arange(64, dtype=cp.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        y = x * 0.5
    producer = NumbaStyle(y, stream.ptr)           # dlop must wait for that stream
    r = f(producer)
    cp.testing.assert_allclose(cp.asarray(r), cp.exp(2 * y), rtol=1e-6)   # cupy reads our CAI
    view = cp.asarray(dlop.asarray(producer))
    assert view.data.ptr == y.data.ptr


def test_torch_dlpack_both_ways_with_streams():
    torch = framework("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    f = exp_double()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        x = torch.arange(4096, device="cuda", dtype=torch.float32) / 1000
        r = f(x)
        back = torch.from_dlpack(r)
        torch.testing.assert_close(back, torch.exp(2 * x))
    assert dlop.asarray(x).data_pointer == x.data_ptr()
    x64 = torch.linspace(0, 1, 9, device="cuda", dtype=torch.float64)
    torch.testing.assert_close(torch.from_dlpack(exp_double("float64")(x64)), torch.exp(2 * x64))
    t = x[::2]                                     # strided, no copy
    torch.testing.assert_close(torch.from_dlpack(f(t)), torch.exp(2 * t))
    with pytest.raises(dlop.DeviceMismatchError):
        exp_double(device="cpu")(x)


def x64_enabled(jax):
    """JAX's float64 switch as a context manager: jax.enable_x64 since JAX 0.8 (the H200's 0.11
    has no jax.experimental.enable_x64), jax.experimental.enable_x64 before."""
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(True)
    import jax.experimental
    return jax.experimental.enable_x64()


def test_jax_dlpack_both_ways():
    jax = framework("jax")
    jnp = framework("jax.numpy")
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError as error:
        pytest.skip(f"JAX without a GPU backend: {error}")
    f = exp_double()
    x = jax.device_put(jnp.arange(100, dtype=jnp.float32) / 10, gpu)
    r = f(x)
    back = jnp.from_dlpack(r)
    np.testing.assert_allclose(np.asarray(back), np.exp(2 * np.asarray(x)), rtol=1e-6)
    x64 = np.linspace(0, 1, 5)
    with x64_enabled(jax):
        y = jax.device_put(jnp.asarray(x64), gpu)
        np.testing.assert_allclose(np.asarray(jnp.from_dlpack(exp_double("float64")(y))), np.exp(2 * x64))


def test_dlpack_stream_argument_semantics():
    r = exp_double()(np.ones(10, dtype=np.float32))
    with pytest.raises(ValueError, match="stream=0 is ambiguous"):
        r.__dlpack__(stream=0)
    r.__dlpack__(stream=-1)                        # no synchronization asked
    r.__dlpack__(stream=1)                         # legacy default stream waits for our writes
    r.__dlpack__(stream=2, max_version=(1, 0))
    host = np.from_dlpack(r, device="cpu") if hasattr(np, "from_dlpack") else None
    if host is not None:
        np.testing.assert_allclose(host, np.exp(np.full(10, 2.0, dtype=np.float32)), rtol=1e-6)


# ---- deferred release of foreign CUDA inputs ---------------------------------------------

BIG = 1 << 26                                       # 256 MiB of float32: ~0.1 ms per kernel


def torch_cuda():
    torch = framework("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    return torch


def test_torch_inputs_do_not_synchronize_per_call():
    torch = torch_cuda()
    f = exp_double()
    t = torch.rand(BIG, device="cuda")
    r = f(t)                                        # warm up: pool blocks, modules, events
    dlop.synchronize()
    start = time.perf_counter()
    r = f(t)
    dlop.synchronize()
    one_call = time.perf_counter() - start          # host + GPU time of one call
    start = time.perf_counter()
    for _ in range(200):
        r = f(t)
    loop = time.perf_counter() - start
    ours = torch.cuda.ExternalStream(dlop._C.stream_handle("cuda:0"))
    pending_work = not ours.query()
    queued = dlop._C.pending_foreign_releases()
    dlop.synchronize()
    # Waiting per call would take at least 200 kernel times; the host only enqueues.
    assert loop < 0.25 * 200 * one_call, (loop, one_call)
    assert pending_work, "dlop's stream was idle right after the loop: the calls waited"
    assert queued > 0, "no input release was deferred"
    assert dlop._C.pending_foreign_releases() == 0  # synchronize gave everything back
    torch.testing.assert_close(torch.from_dlpack(r), torch.exp(2 * t))


def test_torch_memory_reused_by_the_producer_right_after_the_call():
    torch = torch_cuda()
    f = exp_double()
    results = []
    for i in range(4):
        t = torch.rand(BIG, device="cuda") + i
        expected = torch.exp(2 * t)
        r = f(t)
        del t                                       # torch may hand this block out again ...
        junk = [torch.full((BIG,), 1e6, device="cuda") for _ in range(3)]   # ... to these
        results.append((r, expected))
        del junk
    for r, expected in results:
        torch.testing.assert_close(torch.from_dlpack(r), expected)
    dlop.synchronize()
    assert dlop._C.pending_foreign_releases() == 0


def test_torch_queue_is_bounded_in_bytes():
    torch = torch_cuda()
    f = exp_double()
    dlop.synchronize()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(40):                             # fresh 256 MiB tensors: 10 GiB unbounded
        r = f(torch.rand(BIG, device="cuda"))
    peak = torch.cuda.max_memory_allocated() - base
    # At most 1 GiB queued, plus the tensor of the call and torch's temporaries.
    assert peak <= 8 * 4 * BIG, f"torch held {peak / 2**30:.2f} GiB of inputs dlop had released"
    assert dlop._C.pending_foreign_releases() <= 5
    dlop.synchronize()
    assert dlop._C.pending_foreign_releases() == 0
    del r


def test_cupy_and_cai_memory_reused_by_the_producer_right_after_the_call():
    cp = framework("cupy")
    f = exp_double()
    results = []
    for i in range(3):
        x = cp.random.random(BIG, dtype=cp.float32) + i
        expected = cp.exp(2 * x)
        results.append((f(x), expected))           # DLPack
        del x
        junk = [cp.full(BIG, 1e6, dtype=cp.float32) for _ in range(3)]
        del junk
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            y = cp.random.random(BIG, dtype=cp.float32) - i
            expected_y = cp.exp(2 * y)
        producer = NumbaStyle(y, stream.ptr)       # __cuda_array_interface__
        results.append((f(producer), expected_y))
        del y, producer
        with stream:
            junk = [cp.full(BIG, -1e6, dtype=cp.float32) for _ in range(3)]
        del junk
        stream.synchronize()
    for r, expected in results:
        cp.testing.assert_allclose(cp.from_dlpack(r), expected, rtol=1e-6)
    dlop.synchronize()
    assert dlop._C.pending_foreign_releases() == 0


def test_eager_ops_and_asarray_release_foreign_inputs_too():
    torch = torch_cuda()
    t = torch.rand(4096, device="cuda")
    r = dlop.ops.exp(t)                             # eager op on a torch tensor
    a = dlop.asarray(t)
    del a                                           # the wrap goes back after our stream
    dlop.synchronize()
    assert dlop._C.pending_foreign_releases() == 0
    torch.testing.assert_close(torch.from_dlpack(r), torch.exp(t))


def test_numba_device_arrays_both_ways():
    """Real Numba (numba.cuda) through __cuda_array_interface__: a Numba device array as a
    function input without a copy, and a dlop result read by Numba without a copy."""
    numba_cuda = framework("numba.cuda")
    if not numba_cuda.is_available():
        pytest.skip("numba.cuda sees no GPU")
    host = np.linspace(-1, 1, 1000, dtype=np.float32)
    stream = numba_cuda.stream()
    d = numba_cuda.to_device(host, stream=stream)     # pending on Numba's stream
    f = exp_double()
    r = f(d)                                           # dlop waits for that stream (CAI v3)
    np.testing.assert_allclose(r.numpy(), np.exp(2 * host), rtol=1e-6)
    view = dlop.asarray(d)
    assert view.__cuda_array_interface__["data"][0] == d.__cuda_array_interface__["data"][0]
    back = numba_cuda.as_cuda_array(r)                 # Numba reads our CAI: same memory
    assert back.__cuda_array_interface__["data"][0] == r.__cuda_array_interface__["data"][0]
    np.testing.assert_allclose(back.copy_to_host(), np.exp(2 * host), rtol=1e-6)
    dlop.synchronize("cuda")
    assert dlop._C.pending_foreign_releases() == 0


def test_host_numpy_arrays_and_lists_are_copied_to_a_cuda_function():
    host = [0.0, 0.5, 1.0]                             # numpy.asarray makes it float64
    f = exp_double("float64")
    for argument in (np.array(host), host):
        r = f(argument)
        assert r.device == "cuda:0"
        np.testing.assert_allclose(r.numpy(), np.exp(2 * np.array(host)), rtol=1e-12)
