"""test_gpu_py_op.py — ops written in Python (dlop.Op) on CUDA through make_thunk: a kernel
compiled once with dlop.SourceModule and launched on dlop's stream, in compiled functions and
eager calls on dlop and DLPack arrays, float32 and float64, an empty input, the CPU and CUDA
results equal, an exception in make_thunk or the launch chained to the caller, and an array the
launch keeps failing its run and expired (any later use raises). Skipped
without a GPU, a failure under DLOP_REQUIRE_GPU=1."""
import numpy as np
import pytest

import dlop
from grad_w_support import gpu_unusable_reason, skip_or_fail


@pytest.fixture(scope="module", autouse=True)
def gpu():
    reason = gpu_unusable_reason()
    skip_or_fail(None if reason is None else f"no GPU usable: {reason}")


CTYPES = {"float32": "float", "float64": "double"}


class GpuDouble(dlop.Op):
    __props__ = ()
    compiles = 0
    streams = []

    def make_node(self, x):
        if x.dtype not in CTYPES:
            raise dlop.DlopTypeError(f"GpuDouble takes float32 or float64, not {x.dtype}")
        return dlop.Apply(self, [x], [x.type()])

    def infer_shape(self, node, input_shapes):
        return [input_shapes[0]]

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0] * 2

    def make_thunk(self, node, device):
        ctype = CTYPES[node.inputs[0].dtype]
        kernel = dlop.SourceModule(f"""
__global__ void twice(const {ctype} *x, {ctype} *y, long long n) {{
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * 2;
}}""", device=device).get_function("twice")
        type(self).compiles += 1

        def launch(inputs, outputs, stream):
            type(self).streams.append(stream)
            n = inputs[0].size
            if n:
                kernel(inputs[0], outputs[0], n, block=(256, 1, 1), grid=((n + 255) // 256, 1),
                       stream=stream)
        return launch


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_function_on_cuda(dtype):
    x = dlop.matrix("x", dtype)
    f = dlop.function([x], GpuDouble()(x) + 1, device="cuda")
    compiles = GpuDouble.compiles
    for shape in ((4, 5), (0, 3), (33, 129)):
        value = np.random.default_rng(0).standard_normal(shape).astype(dtype)
        got = f(dlop.asarray(value, device="cuda"))
        assert got.device.startswith("cuda")
        np.testing.assert_array_equal(got.numpy(), value * 2 + 1)
    assert GpuDouble.compiles == compiles  # make_thunk ran when f was compiled, not per call
    assert GpuDouble.streams[-1] == dlop.cuda_stream("cuda")


def test_eager_cuda_arrays_and_cpu_parity():
    value = np.linspace(-3, 3, 1001)
    on_gpu = GpuDouble()(dlop.asarray(value, device="cuda"))
    on_cpu = GpuDouble()(value)
    assert on_gpu.device.startswith("cuda") and on_cpu.device == "cpu"
    np.testing.assert_array_equal(on_gpu.numpy(), on_cpu.numpy())
    torch = pytest.importorskip("torch")
    t = torch.arange(10, dtype=torch.float32, device="cuda")
    np.testing.assert_array_equal(GpuDouble()(t).numpy(), np.arange(10, dtype=np.float32) * 2)


def test_errors_in_make_thunk_and_the_launch_are_chained():
    class ThunkFails(GpuDouble):
        def make_thunk(self, node, device):
            raise KeyError("no kernel for this")

    class LaunchFails(GpuDouble):
        def make_thunk(self, node, device):
            def launch(inputs, outputs, stream):
                raise RuntimeError("launch broke")
            return launch
    x = dlop.vector("x", "float32")
    with pytest.raises(dlop.DlopError) as info:
        dlop.function([x], ThunkFails()(x), device="cuda")
    assert isinstance(info.value.__cause__, KeyError)
    f = dlop.function([x], LaunchFails()(x), device="cuda")
    with pytest.raises(dlop.DlopError, match="launch broke") as info:
        f(dlop.asarray(np.ones(3, np.float32), device="cuda"))
    assert isinstance(info.value.__cause__, RuntimeError)


def test_an_op_without_make_thunk_refuses_cuda():
    class CpuOnly(dlop.Op):
        __props__ = ()

        def make_node(self, x):
            return dlop.Apply(self, [x], [x.type()])

        def perform(self, node, inputs, output_storage):
            output_storage[0][0] = inputs[0]
    x = dlop.vector("x", "float32")
    with pytest.raises(dlop.DlopError, match="CpuOnly") as info:
        dlop.function([x], CpuOnly()(x), device="cuda")
    assert "cuda" in str(info.value).lower()
    with pytest.raises(dlop.DlopError, match="CpuOnly"):
        CpuOnly()(dlop.asarray(np.ones(2, np.float32), device="cuda"))


SPIN = """
__device__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
}
"""


class SlowAddOne(dlop.Op):
    """A producer node that takes ~20 ms on the run's stream before writing x + 1."""
    __props__ = ()

    def make_node(self, x):
        return dlop.Apply(self, [x], [x.type()])

    def make_thunk(self, node, device):
        kernel = dlop.SourceModule(SPIN + """
__global__ void slow_add_one(const float *x, float *y, long long n, long long cycles) {
  spin(cycles);
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 1;
}""", device=device).get_function("slow_add_one")

        def launch(inputs, outputs, stream):
            n = inputs[0].size
            kernel(inputs[0], outputs[0], n, 40_000_000, block=(256, 1, 1),
                   grid=((n + 255) // 256, 1), stream=stream)
        return launch


class SlowDoubleOnDefaultStream(dlop.Op):
    """The seed's PyCUDA style: a launch without stream= (CUDA's legacy default stream), slow
    before it writes; with look, a look at its input through .numpy() first (which waits for
    the producer on the host, so the launch itself is then ordered by that wait)."""
    __props__ = ("look",)
    seen = []

    def __init__(self, look):
        self.look = look

    def make_node(self, x):
        return dlop.Apply(self, [x], [x.type()])

    def make_thunk(self, node, device):
        kernel = dlop.SourceModule(SPIN + """
__global__ void slow_twice(const float *x, float *y, long long n, long long cycles) {
  spin(cycles);
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * 2;
}""", device=device).get_function("slow_twice")

        def launch(inputs, outputs, stream):
            if self.look:
                type(self).seen.append(inputs[0].numpy()[:4].copy())
            n = inputs[0].size
            kernel(inputs[0], outputs[0], n, 40_000_000, block=(256, 1, 1),
                   grid=((n + 255) // 256, 1))
        return launch


@pytest.mark.parametrize("look", [False, True])
def test_a_launch_without_stream_is_ordered_with_the_nodes_around_it(look):
    # Slow nodes on both sides: without the ordering the default-stream kernel reads x + 1
    # before it is written, the + 1 after it reads its output before it is written, and
    # .numpy() on a borrowed input reads it before its producer finished.
    x = dlop.vector("x", "float32")
    f = dlop.function([x], SlowDoubleOnDefaultStream(look)(SlowAddOne()(x)) + 1, device="cuda")
    value = np.arange(1 << 16, dtype=np.float32)
    for _ in range(3):
        got = f(dlop.asarray(value, device="cuda")).numpy()
        np.testing.assert_array_equal(got, (value + 1) * 2 + 1)
        if look:
            np.testing.assert_array_equal(SlowDoubleOnDefaultStream.seen[-1], value[:4] + 1)


def test_a_kernel_that_may_write_an_input_is_refused():
    # float *x (not const) for an input: the function's inputs are the caller's arrays, lent
    # without a copy, so the kernel must not be able to write them.
    class WritesItsInput(GpuDouble):
        def make_thunk(self, node, device):
            kernel = dlop.SourceModule("""
__global__ void twice(float *x, float *y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) { y[i] = x[i] * 2; x[i] = 0; }
}""", device=device).get_function("twice")

            def launch(inputs, outputs, stream):
                kernel(inputs[0], outputs[0], inputs[0].size, block=(32, 1, 1), grid=(1, 1),
                       stream=stream)
            return launch
    value = dlop.asarray(np.ones(8, np.float32), device="cuda")
    with pytest.raises(dlop.DlopError, match="read-only") as info:
        WritesItsInput()(value)
    assert isinstance(info.value.__cause__, dlop.InvalidArgumentError)
    np.testing.assert_array_equal(value.numpy(), np.ones(8, np.float32))


class KeepsOnCuda(GpuDouble):
    """GpuDouble's launch, then it keeps what `how` says of the arrays it was lent."""
    __props__ = ("how",)
    kept = []

    def __init__(self, how):
        self.how = how

    def make_thunk(self, node, device):
        run = super().make_thunk(node, device)

        def launch(inputs, outputs, stream):
            run(inputs, outputs, stream)
            if self.how == "input":
                type(self).kept.append(inputs[0])
            elif self.how == "outputs":  # the whole tuple
                type(self).kept.append(outputs[0])
                type(self).kept.append(outputs)
            elif self.how == "dlpack":
                type(self).kept.append(outputs[0].__dlpack__(stream=stream))
        return launch


@pytest.mark.parametrize("how, what", [("input", r"inputs\[0\]"), ("outputs", r"outputs\[0\]"),
                                       ("dlpack", r"an array it was lent \(through a DLPack export or a dlop view\)")])
def test_an_array_kept_after_the_launch_fails_the_run_and_is_expired(how, what):
    # The run's memory goes back to dlop's pool when it ends: what was kept must not read it.
    KeepsOnCuda.kept.clear()
    host = np.arange(1000, dtype=np.float32)
    value = dlop.asarray(host, device="cuda")
    with pytest.raises(dlop.KernelError, match=f"the launch kept {what} after the run: .*the "
                                               "kept dlop.Array is expired"):
        KeepsOnCuda(how)(value)
    np.testing.assert_array_equal(value.numpy(), host)  # the caller's array is its own
    if how == "dlpack":
        return
    kept = KeepsOnCuda.kept[0]
    assert repr(kept).startswith("dlop.Array(expired: lent for one run of 'KeepsOnCuda")
    kernel = dlop.SourceModule("""
__global__ void twice(const float *x, float *y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * 2;
}""", device="cuda").get_function("twice")
    out = dlop.asarray(np.zeros(1000, np.float32), device="cuda")
    uses = [lambda: kept.numpy(), lambda: kept.__cuda_array_interface__,
            lambda: kept.__dlpack__(), lambda: kept + 1, lambda: GpuDouble()(kept),
            lambda: kernel(kept, out, 1000, block=(256, 1, 1), grid=(4, 1))]
    for use in uses:
        with pytest.raises(dlop.InvalidArgumentError, match="lent for one run of the Python op "
                                                            "'KeepsOnCuda.*' and is gone"):
            use()
    np.testing.assert_array_equal(out.numpy(), np.zeros(1000, np.float32))
