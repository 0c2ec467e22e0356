"""framework_standins.py — stand-ins for PyTorch and CuPy for test_source_module_fast_path.py:
modules to put in sys.modules where the real ones would be, with the attributes dlop's kernel
launch reads of a torch.Tensor and a cupy.ndarray (framework_arrays.c) and each library's
__cuda_array_interface__ as its own source builds it (torch/_tensor.py, cupy/_core/core.pyx:
the same refusals, the same pointer and stream). Each array records what was read of it."""
import sys
import types

from dlop import _C

POINTER = 0x7F0000  # no device's memory: a driver query of it fails


def fake_kernel():
    """multiply_them over a function handle that must never be launched."""
    return _C.CudaKernel(None, 1, 0, "multiply_them", "PPPi", ("dest", "a", "b", "n"),
                         ("float *", "const float *", "const float *", "int"), "")


def install(torch=None, cupy=None):
    """Put the stand-ins in sys.modules, as importing the libraries would."""
    if torch is not None:
        sys.modules.update({"torch": torch, "torch._C": torch._C})
    if cupy is not None:
        cupy, backend = cupy
        sys.modules.update({"cupy": cupy, "cupy._util": cupy._util, "cupy.cuda": cupy.cuda,
                            "cupy_backends.cuda.stream": backend})


class Layout:
    def __init__(self, name):
        self.name = name


class Recorder:
    """Records each attribute dlop reads; `failing` maps a name to the exception it raises."""

    def __init__(self, failing=None):
        self.used = []
        self.failing = failing or {}

    def touch(self, name):
        self.used.append(name)
        if name in self.failing:
            raise self.failing[name]


def make_torch():
    torch = types.ModuleType("torch")
    torch.strided, torch.sparse_coo = Layout("strided"), Layout("sparse_coo")
    torch.state = {"mode": False, "stream": 0, "stream_reads": []}
    torch._C = types.ModuleType("torch._C")
    torch._C._is_torch_function_mode_enabled = lambda: torch.state["mode"]

    def current_raw_stream(device):
        torch.state["stream_reads"].append(device)
        return torch.state["stream"]
    torch._C._cuda_getCurrentRawStream = current_raw_stream

    class Tensor(Recorder):
        """A tensor of float32 on cuda:device (-1: the CPU)."""

        def __init__(self, device=0, numel=4, requires_grad=False, layout=torch.strided,
                     failing=None, nested=False):
            super().__init__(failing)
            self._device, self._numel = device, numel
            self._requires_grad, self._layout, self._nested = requires_grad, layout, nested

        @property
        def layout(self):
            self.touch("layout")
            return self._layout

        @property
        def is_cuda(self):
            self.touch("is_cuda")
            return self._device >= 0

        @property
        def requires_grad(self):
            self.touch("requires_grad")
            return self._requires_grad

        @property
        def is_nested(self):
            self.touch("is_nested")
            return self._nested

        def numel(self):
            self.touch("numel")
            return self._numel

        def get_device(self):
            self.touch("get_device")
            return self._device

        def data_ptr(self):
            self.touch("data_ptr")
            return POINTER

        @property
        def __cuda_array_interface__(self):  # as torch/_tensor.py builds it
            self.used.append("__cuda_array_interface__")
            if self._device < 0:
                raise AttributeError("Can't get __cuda_array_interface__ on non-CUDA tensor type")
            if self._layout is torch.sparse_coo:
                raise AttributeError("Can't get __cuda_array_interface__ on sparse type")
            if self._nested:  # torch's getter reads self.shape, which a nested tensor lacks
                raise RuntimeError("Internal error: NestedTensorImpl doesn't support sizes.")
            if self._requires_grad:
                raise RuntimeError(
                    "Can't get __cuda_array_interface__ on Variable that requires grad. If "
                    "gradients aren't required, use var.detach() to get Variable that doesn't "
                    "require grad.")
            pointer = self.data_ptr() if self._numel > 0 else 0
            return dict(typestr="<f4", shape=(self._numel,), strides=None, data=(pointer, False),
                        version=2)

        def __dlpack_device__(self):
            return (2, self._device) if self._device >= 0 else (1, 0)

        def __dlpack__(self, stream=None):
            if self._layout is not torch.strided:
                raise RuntimeError("Can't export tensors with layout other than torch.strided")
            raise AssertionError("the stand-in exports nothing")

    torch.Tensor = Tensor
    return torch


def make_cupy(default_stream=1):
    cupy = types.ModuleType("cupy")
    cupy._util = types.ModuleType("cupy._util")
    cupy._util.CUDA_ARRAY_INTERFACE_EXPORT_VERSION = 3
    cupy.cuda = types.ModuleType("cupy.cuda")
    backend = types.ModuleType("cupy_backends.cuda.stream")
    backend.get_default_stream_ptr = lambda: default_stream  # 2 under CUPY_CUDA_PER_THREAD_...
    cupy.state = {"stream": types.SimpleNamespace(ptr=0), "stream_reads": 0}

    def get_current_stream():
        cupy.state["stream_reads"] += 1
        return cupy.state["stream"]
    cupy.cuda.get_current_stream = get_current_stream

    class MemoryPointer:
        def __init__(self, owner, device_id):
            self.owner, self._device_id = owner, device_id

        @property
        def ptr(self):
            self.owner.touch("data.ptr")
            return POINTER

        @property
        def device_id(self):
            self.owner.touch("data.device_id")
            return self._device_id

    class ndarray(Recorder):  # noqa: N801 (CuPy's name)
        def __init__(self, device=0, size=4, failing=None):
            super().__init__(failing)
            self._size, self._data = size, MemoryPointer(self, device)

        @property
        def size(self):
            self.touch("size")
            return self._size

        @property
        def data(self):
            self.touch("data")
            return self._data

        @property
        def __cuda_array_interface__(self):  # as cupy/_core/core.pyx builds it
            self.used.append("__cuda_array_interface__")
            version = cupy._util.CUDA_ARRAY_INTERFACE_EXPORT_VERSION
            desc = {"shape": (self._size,), "typestr": "<f4", "descr": [("", "<f4")]}
            if version == 3:
                pointer = cupy.state["stream"].ptr
                desc["stream"] = pointer if pointer != 0 else backend.get_default_stream_ptr()
            elif version != 2:
                raise ValueError("CUPY_CUDA_ARRAY_INTERFACE_EXPORT_VERSION can only be set to 3 "
                                 "(default) or 2")
            desc["version"], desc["strides"] = version, None
            desc["data"] = (POINTER, False) if self._size > 0 else (0, False)
            return desc

    cupy.ndarray = ndarray
    return cupy, backend
