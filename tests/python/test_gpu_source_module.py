"""test_gpu_source_module.py — dlop.SourceModule kernels launched on a GPU: multiply_them on
dlop arrays, CuPy, PyTorch and Numba arrays (those installed), the device pointer passed as is
(no copy), scalars of every kind typed from the signature, dynamic shared memory, streams (dlop's,
CuPy's, PyTorch's, raw handles), a 2-d grid, the driver's parameter check, and a kernel that
faults, in a subprocess (the context is lost: the error says so); torch.Tensor and cupy.ndarray
arguments, read directly, against the generic path (a subclass, or the library's own
__cuda_array_interface__ behind another object): the same pointer, the launch ordered after the
producer's stream, the same errors. Skipped without a GPU, a failure under DLOP_REQUIRE_GPU=1."""
import os
import subprocess
import sys

import numpy as np
import pytest

import dlop
from grad_w_support import gpu_unusable_reason, skip_or_fail


@pytest.fixture(scope="module", autouse=True)
def gpu():
    reason = gpu_unusable_reason()
    skip_or_fail(None if reason is None else f"no GPU usable: {reason}")


MULTIPLY_THEM = r'''
__global__ void multiply_them(float *dest, const float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) dest[i] = a[i] * b[i];
}'''

KERNELS = r'''
__global__ void pointer_of(unsigned long long *out, const float *a) { *out = (unsigned long long)a; }

__global__ void scalars(double *out, signed char c, unsigned char uc, short h, unsigned short uh,
                        int i, unsigned u, long long q, unsigned long long uq, float f, double d,
                        bool flag) {
  out[0] = c; out[1] = uc; out[2] = h; out[3] = uh; out[4] = i; out[5] = u; out[6] = (double)q;
  out[7] = (double)uq; out[8] = f; out[9] = d; out[10] = flag;
}

__global__ void reverse_blocks(float *out, const float *in) {
  extern __shared__ float tile[];
  int t = threadIdx.x, base = blockIdx.x * blockDim.x;
  tile[t] = in[base + t];
  __syncthreads();
  out[base + t] = tile[blockDim.x - 1 - t];
}

__global__ void spin(long long cycles) {  // keeps a stream busy
  long long start = clock64();
  while (clock64() - start < cycles) {}
}

__global__ void grid_2d(int *out, int width) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  out[y * width + x] = 1000 * y + x;
}
'''


@pytest.fixture(scope="module")
def kernels():
    return dlop.SourceModule(KERNELS)


def multiply_them():
    return dlop.SourceModule(MULTIPLY_THEM).get_function("multiply_them")


def host_inputs(n=1000):
    rng = np.random.default_rng(7)
    return rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)


def test_compiles_for_the_devices_architecture():
    module = dlop.SourceModule(MULTIPLY_THEM)
    assert module.arch.startswith("sm_") and module.image[:4] == b"\x7fELF"
    kernel = module.get_function("multiply_them")
    assert kernel.arg_types == "PPPi" and kernel.param_names == ("dest", "a", "b", "n")
    assert kernel.device == "cuda:0" and "multiply_them(float *" in repr(kernel)


def test_the_seeds_launch_of_400_threads_for_100_elements_is_safe():
    a, b = host_inputs(100)
    dest = dlop.asarray(np.full(101, -7.0, np.float32), device="cuda")  # one sentinel past n
    multiply_them()(dest, dlop.asarray(a, device="cuda"), dlop.asarray(b, device="cuda"), 100,
                    block=(400, 1, 1), grid=(1, 1))
    got = dest.numpy()
    assert np.array_equal(got[:100], a * b)
    assert got[100] == -7.0


def test_multiply_them_on_dlop_arrays():
    a, b = host_inputs()
    dest = dlop.asarray(np.zeros_like(a), device="cuda")
    n = a.size
    multiply_them()(dest, dlop.asarray(a, device="cuda"), dlop.asarray(b, device="cuda"), n,
                    block=(256, 1, 1), grid=((n + 255) // 256, 1))
    assert np.array_equal(dest.numpy(), a * b)


def test_results_feed_dlop_ops_without_synchronizing():
    a, b = host_inputs()
    dest = dlop.asarray(np.zeros_like(a), device="cuda")
    multiply_them()(dest, dlop.asarray(a, device="cuda"), dlop.asarray(b, device="cuda"), a.size,
                    block=(256,), grid=((a.size + 255) // 256,))
    # dlop's stream waits for the kernel (on the GPU) before the op runs
    assert np.array_equal(dlop.exp(dest).numpy(), np.exp(a * b).astype(np.float32)) or \
        np.allclose(dlop.exp(dest).numpy(), np.exp(a * b), rtol=1e-6)


def test_zero_copy_the_kernel_gets_the_arrays_pointer(kernels):
    out = dlop.asarray(np.zeros(1, np.int64), device="cuda")  # dlop has no uint64: same bits
    a = dlop.asarray(np.zeros(8, np.float32), device="cuda")
    kernels.get_function("pointer_of")(out, a, block=(1,))
    assert int(out.numpy().view(np.uint64)[0]) == a.__cuda_array_interface__["data"][0]


def test_scalars_of_every_kind(kernels):
    out = dlop.asarray(np.zeros(11), device="cuda")
    values = [-128, 255, -32768, 65535, -2**31, 2**32 - 1, -2**53, 2**53, 1.5, 2.0**-1074, True]
    kernels.get_function("scalars")(out, *values, block=(1,))
    assert out.numpy().tolist() == [float(v) for v in values]


def test_numpy_scalars_are_accepted(kernels):
    out = dlop.asarray(np.zeros(11), device="cuda")
    values = [np.int8(-1), np.uint8(2), np.int16(-3), np.uint16(4), np.int32(-5), np.uint32(6),
              np.int64(-7), np.uint64(8), np.float32(0.25), np.float64(0.5), False]
    kernels.get_function("scalars")(out, *values, block=(1,))
    assert out.numpy().tolist() == [-1, 2, -3, 4, -5, 6, -7, 8, 0.25, 0.5, 0]


def test_dynamic_shared_memory(kernels):
    block = 128
    data = np.arange(4 * block, dtype=np.float32)
    out = dlop.asarray(np.zeros_like(data), device="cuda")
    kernels.get_function("reverse_blocks")(out, dlop.asarray(data, device="cuda"), block=(block,),
                                           grid=(4,), shared=block * 4)
    assert np.array_equal(out.numpy(), data.reshape(4, block)[:, ::-1].ravel())


def test_two_dimensional_grid(kernels):
    width, height = 64, 48
    out = dlop.asarray(np.zeros((height, width), np.int32), device="cuda")
    kernels.get_function("grid_2d")(out, width, block=(16, 16, 1), grid=(width // 16, height // 16))
    y, x = np.mgrid[0:height, 0:width]
    assert np.array_equal(out.numpy(), 1000 * y + x)


def test_on_dlops_stream():
    a, b = host_inputs()
    dest = dlop.asarray(np.zeros_like(a), device="cuda")
    multiply_them()(dest, dlop.asarray(a, device="cuda"), dlop.asarray(b, device="cuda"), a.size,
                    block=(256,), grid=((a.size + 255) // 256,), stream=dlop.cuda_stream())
    assert np.array_equal(dest.numpy(), a * b)


def test_an_empty_grid_launches_nothing():
    dest = dlop.asarray(np.full(4, 3.0, np.float32), device="cuda")
    multiply_them()(dest, dest, dest, 4, block=(256,), grid=(0,))
    assert dest.numpy().tolist() == [3.0] * 4


def test_none_is_a_null_pointer():
    multiply_them()(None, None, None, 0, block=(32,))  # n = 0: nothing dereferenced
    dlop.synchronize("cuda")


def test_unknown_kernel_name():
    with pytest.raises(dlop.NotFoundError, match="no kernel named 'multiply_those'"):
        dlop.SourceModule(MULTIPLY_THEM).get_function("multiply_those")


def test_declared_types_are_checked_against_the_compiled_kernel():
    module = dlop.SourceModule(MULTIPLY_THEM)
    try:
        module.get_function("multiply_them", arg_types="PPP")
    except dlop.DlopTypeError as error:
        assert "do not match the compiled kernel (4 parameters" in str(error)
    else:
        pytest.skip("the driver cannot tell a kernel's parameters (CUDA < 12.4)")
    kernel = module.get_function("multiply_them", arg_types=["float *", "float *", "float *", "int"])
    assert kernel.arg_types == "PPPi"
    assert kernel.prepare("PPPi") is kernel


def test_macro_declared_kernels_need_declared_types():
    source = "#define KERNEL(name) __global__ void name(float *x) { x[0] = 1; }\nKERNEL(one)"
    kernel = dlop.SourceModule(source).get_function("one")
    assert kernel.arg_types is None
    with pytest.raises(TypeError, match="declare them"):
        kernel(None, block=(1,))
    out = dlop.asarray(np.zeros(1, np.float32), device="cuda")
    kernel.prepare("P")(out, block=(1,))
    assert out.numpy()[0] == 1.0


# ---- other libraries' arrays and streams ---------------------------------------------------

def test_cupy_arrays_and_stream():
    cupy = pytest.importorskip("cupy")
    a, b = host_inputs()
    ca, cb = cupy.asarray(a), cupy.asarray(b)
    dest = cupy.zeros_like(ca)
    kernel = multiply_them()
    kernel(dest, ca, cb, a.size, block=(256,), grid=((a.size + 255) // 256,))
    assert np.array_equal(cupy.asnumpy(dest), a * b)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        dest2 = cupy.zeros_like(ca)
        kernel(dest2, ca, cb, a.size, block=(256,), grid=((a.size + 255) // 256,), stream=stream)
        stream.synchronize()
    assert np.array_equal(cupy.asnumpy(dest2), a * b)


class ReadOnly:
    """A CUDA array seen through a version-3 __cuda_array_interface__ marked read-only."""

    def __init__(self, array):
        self.array = array
        interface = dict(array.__cuda_array_interface__)
        interface["data"] = (interface["data"][0], True)
        self.__cuda_array_interface__ = interface


def test_a_read_only_array_is_refused_where_the_kernel_may_write_it():
    cupy = pytest.importorskip("cupy")
    a, b = host_inputs()
    ca, cb = cupy.asarray(a), cupy.asarray(b)
    dest = cupy.zeros_like(ca)
    kernel = multiply_them()
    with pytest.raises(dlop.InvalidArgumentError, match="argument 1 'dest'.*read-only"):
        kernel(ReadOnly(dest), ca, cb, a.size, block=(256,), grid=((a.size + 255) // 256,))
    # const float *a and *b: read-only inputs are fine
    kernel(dest, ReadOnly(ca), ReadOnly(cb), a.size, block=(256,), grid=((a.size + 255) // 256,))
    assert np.array_equal(cupy.asnumpy(dest), a * b)


def test_a_bad_type_code_is_a_type_error_naming_it():
    kernel = multiply_them()
    with pytest.raises(dlop.DlopTypeError, match="code 2 'x'"):
        kernel.prepare("Px")


def test_torch_tensors_in_place_and_stream(kernels):
    torch = pytest.importorskip("torch")
    a, b = host_inputs()
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    dest = torch.zeros_like(ta)
    kernel = multiply_them()
    kernel(dest, ta, tb, a.size, block=(256,), grid=((a.size + 255) // 256,))
    assert np.array_equal(dest.cpu().numpy(), a * b)  # written in place: no copy was made
    out = torch.zeros(1, dtype=torch.int64, device="cuda")
    kernels.get_function("pointer_of")(out, ta, block=(1,))
    assert int(out.item()) == ta.data_ptr()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        dest2 = torch.zeros_like(ta)
        kernel(dest2, ta, tb, a.size, block=(256,), grid=((a.size + 255) // 256,), stream=stream)
    stream.synchronize()
    assert np.array_equal(dest2.cpu().numpy(), a * b)
    dest2.zero_()
    stream.synchronize()
    kernel(dest2, ta, tb, a.size, block=(256,), grid=((a.size + 255) // 256,),
           stream=stream.cuda_stream)  # a raw handle
    stream.synchronize()
    assert np.array_equal(dest2.cpu().numpy(), a * b)


def test_torch_cpu_tensor_is_refused():
    torch = pytest.importorskip("torch")
    with pytest.raises(dlop.DeviceMismatchError, match="argument 2 'a'"):
        multiply_them()(torch.zeros(4, device="cuda"), torch.zeros(4), torch.zeros(4), 4,
                        block=(4,))


def test_numba_arrays():
    cuda = pytest.importorskip("numba.cuda")
    a, b = host_inputs()
    da, db, dest = cuda.to_device(a), cuda.to_device(b), cuda.device_array_like(a)
    multiply_them()(dest, da, db, a.size, block=(256,), grid=((a.size + 255) // 256,))
    assert np.array_equal(dest.copy_to_host(), a * b)


def test_an_array_on_another_gpu_is_refused():
    if dlop.cuda_device_count() < 2:
        pytest.skip("one GPU: no other device to put an array on")
    other = dlop.asarray(np.zeros(4, np.float32), device="cuda:1")
    with pytest.raises(dlop.DeviceMismatchError, match="on cuda:1, but the kernel is loaded on cuda:0"):
        multiply_them()(other, other, other, 4, block=(4,))


# ---- torch.Tensor and cupy.ndarray read directly, against the generic path ------------------
# Exactly those types are read from their attributes (framework_arrays.c); a subclass, or the
# library's own __cuda_array_interface__ behind another object, takes the generic path. The two
# must agree on everything.

SPIN = 400_000_000  # GPU clock cycles: a fraction of a second on an H200 (about 2 GHz)


class Interface:
    """x's own __cuda_array_interface__ behind another type: the generic path."""

    def __init__(self, x):
        self.x = x

    @property
    def __cuda_array_interface__(self):
        return self.x.__cuda_array_interface__


def torch_paths():
    torch = pytest.importorskip("torch")

    class Sub(torch.Tensor):
        pass
    return torch, {"fast": lambda t: t, "generic": lambda t: t.as_subclass(Sub)}


def cupy_paths():
    cupy = pytest.importorskip("cupy")
    return cupy, {"fast": lambda a: a, "generic": Interface}


def without(text, *names):
    for name in names:
        text = text.replace(name, "X")
    return text


@pytest.mark.parametrize("path", ["fast", "generic"])
def test_torch_the_kernel_gets_the_tensors_pointer(kernels, path):
    torch, paths = torch_paths()
    wrap, pointer_of = paths[path], kernels.get_function("pointer_of")
    t = torch.arange(8, dtype=torch.float32, device="cuda")[3:]  # a view: an offset pointer
    out = torch.full((2,), -1, dtype=torch.int64, device="cuda")
    pointer_of(wrap(out[:1]), wrap(t), block=(1,))
    pointer_of(wrap(out[1:]), wrap(torch.empty(0, device="cuda")), block=(1,))  # empty: NULL
    assert out.tolist() == [t.data_ptr(), 0]


@pytest.mark.parametrize("path", ["fast", "generic"])
def test_cupy_the_kernel_gets_the_arrays_pointer(kernels, path):
    cupy, paths = cupy_paths()
    wrap, pointer_of = paths[path], kernels.get_function("pointer_of")
    a = cupy.arange(8, dtype=cupy.float32)[3:]
    out = cupy.full(2, -1, dtype=cupy.int64)
    pointer_of(wrap(out[:1]), wrap(a), block=(1,))
    pointer_of(wrap(out[1:]), wrap(cupy.empty(0, cupy.float32)), block=(1,))
    assert out.tolist() == [a.data.ptr, 0]


def written_on_a_side_stream_then_launched(kernels, on_side, side_handle, fill, wrap, synchronize):
    """Input a written by the library on a side stream (kept busy first) and the kernel
    launched at once on the legacy stream (stream=None), inside on_side (the side stream the
    library's current one). Returns the kernel's output and the expected values."""
    a, b = host_inputs()
    n = a.size
    ta, tb, dest, source = fill(np.zeros_like(a)), fill(b), fill(np.zeros_like(a)), fill(a)
    kernel, spin = multiply_them(), kernels.get_function("spin")
    synchronize()
    with on_side:
        spin(SPIN, block=(1,), stream=side_handle)
        ta[...] = source  # on the side stream, behind the spin
        kernel(wrap(dest), wrap(ta), wrap(tb), n, block=(256,), grid=((n + 255) // 256,))
    return dest, a * b


@pytest.mark.parametrize("path", ["fast", "generic"])
def test_torch_the_launch_waits_for_torchs_current_stream(kernels, path):
    torch, paths = torch_paths()
    side = torch.cuda.Stream()  # PyTorch's streams do not synchronize with the legacy stream
    dest, expected = written_on_a_side_stream_then_launched(
        kernels, torch.cuda.stream(side), side.cuda_stream,
        lambda x: torch.from_numpy(x).cuda(), paths[path], torch.cuda.synchronize)
    done = torch.cuda.Event()
    done.record(torch.cuda.default_stream())  # the legacy stream, after the launch
    done.synchronize()
    assert side.query(), "the launch did not wait for the side stream"
    torch.cuda.synchronize()
    assert np.array_equal(dest.cpu().numpy(), expected)


@pytest.mark.parametrize("path", ["fast", "generic"])
def test_cupy_the_launch_waits_for_cupys_current_stream(kernels, path):
    cupy, paths = cupy_paths()
    side = cupy.cuda.Stream(non_blocking=True)
    dest, expected = written_on_a_side_stream_then_launched(
        kernels, side, side.ptr, cupy.asarray, paths[path], cupy.cuda.Device().synchronize)
    done = cupy.cuda.Event()
    done.record(cupy.cuda.Stream.null)
    done.synchronize()
    assert side.done, "the launch did not wait for the side stream"
    cupy.cuda.Device().synchronize()
    assert np.array_equal(cupy.asnumpy(dest), expected)


@pytest.mark.parametrize("path", ["fast", "generic"])
def test_cupy_export_version_2_names_no_stream_and_nothing_waits(kernels, path, monkeypatch):
    cupy, paths = cupy_paths()
    monkeypatch.setattr(cupy._util, "CUDA_ARRAY_INTERFACE_EXPORT_VERSION", 2)
    wrap = paths[path]
    side = cupy.cuda.Stream(non_blocking=True)
    a = cupy.zeros(4, cupy.float32)
    kernel, spin = multiply_them(), kernels.get_function("spin")
    cupy.cuda.Device().synchronize()
    with side:
        spin(5 * SPIN, block=(1,), stream=side.ptr)
        kernel(wrap(a), wrap(a), wrap(a), 4, block=(4,))  # the legacy stream
    done = cupy.cuda.Event()
    done.record(cupy.cuda.Stream.null)
    done.synchronize()
    assert not side.done, "the launch waited for a stream CuPy did not name"
    side.synchronize()


def test_torch_a_function_mode_sees_the_tensors_interface():
    torch, _ = torch_paths()

    class Counting(torch.overrides.TorchFunctionMode):
        calls = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            Counting.calls += 1
            return func(*args, **(kwargs or {}))
    a, b = host_inputs()
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    dest, kernel = torch.zeros_like(ta), multiply_them()
    with Counting():
        kernel(dest, ta, tb, a.size, block=(256,), grid=((a.size + 255) // 256,))
    assert Counting.calls >= 3  # each tensor's __cuda_array_interface__ went through the mode
    assert np.array_equal(dest.cpu().numpy(), a * b)


def refusal(kernel, *args):
    with pytest.raises(dlop.DlopError) as info:
        kernel(*args, block=(4,))
    return info.value


def test_torch_the_same_errors_on_both_paths():
    torch, paths = torch_paths()
    sub = type(paths["generic"](torch.zeros(1, device="cuda")))
    names = (repr(torch.Tensor), repr(sub))
    kernel, dest = multiply_them(), torch.zeros(4, device="cuda")
    cases = {"cpu": torch.zeros(4), "grad": torch.zeros(4, device="cuda", requires_grad=True)}
    for case, tensor in cases.items():
        fast = refusal(kernel, dest, tensor, dest, 4)
        generic = refusal(kernel, dest, paths["generic"](tensor), dest, 4)
        assert type(fast) is type(generic), (case, fast, generic)
        assert without(str(fast), *names) == without(str(generic), *names), (case, fast, generic)
        assert "argument 2 'a'" in str(fast)
    assert isinstance(fast, dlop.InvalidArgumentError) and "requires grad" in str(fast)
    assert "detach()" in str(fast) and isinstance(fast.__cause__, RuntimeError)


def test_torch_a_parameter_requiring_grad_is_refused_naming_the_argument():
    torch, _ = torch_paths()
    weight = torch.nn.Parameter(torch.zeros(4, device="cuda"))
    with pytest.raises(dlop.InvalidArgumentError, match=r"argument 1 'dest' \(float \*\) got "
                                                        r".*Parameter.*requires grad"):
        multiply_them()(weight, weight.detach(), weight.detach(), 4, block=(4,))


def test_torch_and_cupy_arrays_on_another_gpu_are_refused_on_both_paths(kernels):
    if dlop.cuda_device_count() < 2:
        pytest.skip("one GPU: no other device to put an array on")
    expected = ("argument 2 'a' (const float *) got an array on cuda:1, but the kernel is "
                "loaded on cuda:0")
    pointer_of = kernels.get_function("pointer_of")
    others = []
    try:
        torch, paths = torch_paths()
        others.append((paths, torch.zeros(4, device="cuda:1"), torch.empty(0, device="cuda:1"),
                       torch.full((1,), -1, dtype=torch.int64, device="cuda")))
    except pytest.skip.Exception:
        pass
    try:
        cupy, paths = cupy_paths()
        with cupy.cuda.Device(1):
            other, empty = cupy.zeros(4, cupy.float32), cupy.empty(0, cupy.float32)
        others.append((paths, other, empty, cupy.full(1, -1, dtype=cupy.int64)))
    except pytest.skip.Exception:
        pass
    if not others:
        pytest.skip("neither PyTorch nor CuPy is installed")
    for paths, other, empty, out in others:
        for wrap in paths.values():
            error = refusal(multiply_them(), None, wrap(other), None, 4)
            assert isinstance(error, dlop.DeviceMismatchError) and expected in str(error), error
            out[...] = -1
            pointer_of(wrap(out), wrap(empty), block=(1,))  # empty: NULL, on no device
            assert out.tolist() == [0]


# ---- a kernel that faults ------------------------------------------------------------------

FAULT = r'''
import dlop
module = dlop.SourceModule("__global__ void fault(int *p) { p[threadIdx.x] = 1; }")
kernel = module.get_function("fault", arg_types="Q")  # an address, not an array: 16 is unmapped
stream = dlop.cuda_stream()  # dlop.synchronize waits for this stream
kernel(16, block=(32,), stream=stream)
try:
    dlop.synchronize("cuda")
    kernel(16, block=(32,), stream=stream)
    dlop.synchronize("cuda")
except dlop.KernelError as error:
    print("KernelError:", error)
'''


def test_a_faulting_kernel_is_reported_and_the_context_is_lost():
    result = subprocess.run([sys.executable, "-c", FAULT], capture_output=True, text=True,
                            timeout=120, env=dict(os.environ))
    assert "KernelError:" in result.stdout, (result.stdout, result.stderr)
    message = result.stdout
    assert "faulted on the device" in message and "unusable" in message, message
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in message or "CUDA_ERROR_LAUNCH_FAILED" in message, message
