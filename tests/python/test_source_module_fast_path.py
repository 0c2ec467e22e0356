"""test_source_module_fast_path.py — how a dlop.SourceModule kernel reads torch.Tensor and
cupy.ndarray arguments without building their __cuda_array_interface__ (framework_arrays.c),
where no GPU is needed: stand-ins for the two libraries are put in sys.modules as an import
would put them, with the attributes dlop reads and an interface that behaves as the library's
own (torch/_tensor.py, cupy/_core/core.pyx), and each records what dlop touched. The kernel is
never launched: a call fails while its arguments are packed, or (only where there is no GPU) at
the stream wait or the launch, whose errors say which. The real libraries, on a GPU:
test_gpu_source_module.py."""
import json
import os
import subprocess
import sys
import types

import pytest

import dlop
from framework_standins import fake_kernel, install, make_cupy, make_torch

GPU = dlop.cuda_device_count() > 0
needs_no_gpu = pytest.mark.skipif(GPU, reason="a GPU is present: the stand-in kernel must "
                                              "never reach a stream wait or a launch")
WAIT = "ordering the launch after an array argument's stream"
LAUNCH = "kernel 'multiply_them'"


TORCH = make_torch()
CUPY, CUPY_BACKEND = make_cupy()
install(TORCH, (CUPY, CUPY_BACKEND))  # before any launch: dlop keeps what it finds first
Tensor = TORCH.Tensor
ndarray = CUPY.ndarray


class SubTensor(Tensor):
    """A torch.Tensor subclass (an nn.Parameter, say): the generic path takes it."""


class SubArray(ndarray):
    """A cupy.ndarray subclass: the generic path takes it."""


@pytest.fixture(autouse=True)
def reset_state():
    TORCH.state.update(mode=False, stream=0, stream_reads=[])
    CUPY.state.update(stream=types.SimpleNamespace(ptr=0), stream_reads=0)
    CUPY._util.CUDA_ARRAY_INTERFACE_EXPORT_VERSION = 3


def raised(call):
    """The exception call raises (it must raise)."""
    with pytest.raises(BaseException) as info:
        call()
    return info.value


def same_but_names(one, other, names):
    """str(one) == str(other) once each class name in names is written as 'X'."""
    def plain(error):
        text = str(error)
        for name in names:
            text = text.replace(name, "X")
        return text
    return plain(one) == plain(other)


# ---- PyTorch -------------------------------------------------------------------------------

def test_an_exact_tensor_is_read_from_its_attributes_not_its_interface_nor_the_driver():
    t = Tensor(device=3)
    with pytest.raises(dlop.DeviceMismatchError, match=r"argument 1 'dest' \(float \*\) got an "
                                                       r"array on cuda:3, but the kernel is "
                                                       r"loaded on cuda:0"):
        fake_kernel()(t, None, None, 4, block=(4,))
    assert "__cuda_array_interface__" not in t.used
    assert {"layout", "is_cuda", "requires_grad", "is_nested", "numel", "get_device",
            "data_ptr"} <= set(t.used)


def test_a_tensor_subclass_takes_the_generic_path():
    t = SubTensor(device=3)
    with pytest.raises(dlop.DlopError, match=r"argument 1 'dest' .* whose "
                                             r"__cuda_array_interface__ pointer is not CUDA"):
        fake_kernel()(t, None, None, 4, block=(4,))
    assert t.used[0] == "__cuda_array_interface__"


@pytest.mark.parametrize("kind", [Tensor, SubTensor])
def test_a_tensor_that_requires_grad_is_refused_naming_the_argument(kind):
    error = raised(lambda: fake_kernel()(None, kind(requires_grad=True), None, 4, block=(4,)))
    assert isinstance(error, dlop.InvalidArgumentError), error
    assert str(error).startswith(
        f"kernel 'multiply_them': argument 2 'a' (const float *) got {kind!r}, whose "
        "__cuda_array_interface__ raised RuntimeError: Can't get __cuda_array_interface__ on "
        "Variable that requires grad. If gradients aren't required, use var.detach()"), error
    assert isinstance(error.__cause__, RuntimeError)


def test_fast_and_generic_paths_raise_the_same_errors_for_tensors():
    names = [repr(Tensor), repr(SubTensor)]
    # (another GPU's tensor: the generic path asks the driver, which knows no stand-in pointer;
    # test_gpu_source_module.py compares the two there)
    for case in [dict(requires_grad=True), dict(device=-1), dict(layout=TORCH.sparse_coo),
                 dict(nested=True)]:
        fast = raised(lambda: fake_kernel()(None, Tensor(**case), None, 4, block=(4,)))
        generic = raised(lambda: fake_kernel()(None, SubTensor(**case), None, 4, block=(4,)))
        assert type(fast) is type(generic), (case, fast, generic)
        assert same_but_names(fast, generic, names), (case, fast, generic)


def test_a_cpu_tensor_is_refused_as_host_memory():
    with pytest.raises(dlop.DeviceMismatchError, match=r"argument 2 'a' .* host memory"):
        fake_kernel()(None, Tensor(device=-1), None, 4, block=(4,))


def test_a_sparse_tensor_takes_the_generic_path():
    t = Tensor(layout=TORCH.sparse_coo)
    with pytest.raises(RuntimeError, match="layout other than torch.strided"):
        fake_kernel()(None, t, None, 4, block=(4,))
    assert "__cuda_array_interface__" in t.used and "data_ptr" not in t.used


def test_a_torch_function_mode_sends_tensors_the_generic_path():
    TORCH.state["mode"] = True  # the interface would go through the mode
    t = Tensor(device=3)
    with pytest.raises(dlop.DlopError, match="__cuda_array_interface__ pointer is not CUDA"):
        fake_kernel()(t, None, None, 4, block=(4,))
    assert t.used[0] == "__cuda_array_interface__"


@pytest.mark.parametrize("kind", [Tensor, SubTensor])
def test_an_empty_tensor_is_a_null_pointer_whatever_its_device(kind):
    # argument 1 is taken (pointer 0, as the interface says); argument 2 is refused
    with pytest.raises(dlop.DeviceMismatchError, match="argument 2 'a'.* on cuda:3"):
        fake_kernel()(kind(numel=0, device=3), Tensor(device=3), None, 4, block=(4,))


def test_an_attribute_that_raises_leaves_the_tensor_to_the_generic_path():
    t = Tensor(failing={"data_ptr": RuntimeError("no storage")})
    with pytest.raises(dlop.InvalidArgumentError, match=r"argument 2 'a' .*raised RuntimeError: "
                                                        r"no storage"):
        fake_kernel()(None, t, None, 4, block=(4,))
    assert "__cuda_array_interface__" in t.used


def test_keyboard_interrupt_in_an_attribute_is_not_swallowed():
    with pytest.raises(KeyboardInterrupt):
        fake_kernel()(None, Tensor(failing={"numel": KeyboardInterrupt()}), None, 4, block=(4,))


def test_torchs_current_stream_is_read_once_per_launch_for_the_kernels_device():
    with pytest.raises(TypeError, match="argument 4 'n'"):  # after the three arrays
        fake_kernel()(Tensor(), Tensor(), Tensor(), 2.5, block=(4,))
    assert TORCH.state["stream_reads"] == [0]


@needs_no_gpu
def test_the_launch_waits_for_torchs_current_stream_unless_it_is_the_launchs():
    k = fake_kernel()
    TORCH.state["stream"] = 0x1234
    assert WAIT in str(raised(lambda: k(Tensor(), Tensor(), Tensor(), 4, block=(4,))))
    assert LAUNCH in str(raised(lambda: k(Tensor(), Tensor(), Tensor(), 4, block=(4,),
                                          stream=0x1234)))
    TORCH.state["stream"] = 0  # PyTorch's default stream: the legacy stream, stream=None's
    assert LAUNCH in str(raised(lambda: k(Tensor(), Tensor(), Tensor(), 4, block=(4,))))


# ---- CuPy ----------------------------------------------------------------------------------

def test_an_exact_cupy_array_is_read_from_its_attributes_not_its_interface_nor_the_driver():
    a = ndarray(device=2)
    with pytest.raises(dlop.DeviceMismatchError, match=r"argument 3 'b' \(const float \*\) got "
                                                       r"an array on cuda:2, but the kernel is "
                                                       r"loaded on cuda:0"):
        fake_kernel()(None, None, a, 4, block=(4,))
    assert "__cuda_array_interface__" not in a.used
    assert {"size", "data", "data.ptr", "data.device_id"} <= set(a.used)


def test_a_cupy_subclass_takes_the_generic_path():
    a = SubArray(device=2)
    with pytest.raises(dlop.DlopError, match="__cuda_array_interface__ pointer is not CUDA"):
        fake_kernel()(None, None, a, 4, block=(4,))
    assert a.used[0] == "__cuda_array_interface__"


@pytest.mark.parametrize("kind", [ndarray, SubArray])
def test_an_empty_cupy_array_is_a_null_pointer_whatever_its_device(kind):
    with pytest.raises(dlop.DeviceMismatchError, match="argument 2 'a'.* on cuda:2"):
        fake_kernel()(kind(size=0, device=2), ndarray(device=2), None, 4, block=(4,))


@pytest.mark.parametrize("kind", [ndarray, SubArray])
def test_cupys_refusal_of_an_unknown_export_version_is_reported(kind):
    CUPY._util.CUDA_ARRAY_INTERFACE_EXPORT_VERSION = 5
    with pytest.raises(dlop.InvalidArgumentError,
                       match=r"argument 1 'dest' .*raised ValueError: CUPY_CUDA_ARRAY_INTERFACE"):
        fake_kernel()(kind(), None, None, 4, block=(4,))


def test_cupys_current_stream_is_read_once_per_launch():
    with pytest.raises(TypeError, match="argument 4 'n'"):
        fake_kernel()(ndarray(), ndarray(), ndarray(), 2.5, block=(4,))
    assert CUPY.state["stream_reads"] == 1


@needs_no_gpu
def test_the_launch_waits_for_cupys_current_stream_as_its_interface_names_it():
    k = fake_kernel()
    CUPY.state["stream"] = types.SimpleNamespace(ptr=0x4321)
    assert WAIT in str(raised(lambda: k(ndarray(), ndarray(), ndarray(), 4, block=(4,))))
    assert LAUNCH in str(raised(lambda: k(ndarray(), None, None, 4, block=(4,), stream=0x4321)))
    CUPY._util.CUDA_ARRAY_INTERFACE_EXPORT_VERSION = 2  # CuPy then names no stream
    assert LAUNCH in str(raised(lambda: k(ndarray(), ndarray(), ndarray(), 4, block=(4,))))
    CUPY._util.CUDA_ARRAY_INTERFACE_EXPORT_VERSION = 3
    CUPY.state["stream"] = types.SimpleNamespace(ptr=0)  # its null stream: the legacy stream
    assert LAUNCH in str(raised(lambda: k(ndarray(), ndarray(), ndarray(), 4, block=(4,))))


# ---- in a fresh process: what dlop finds in sys.modules ------------------------------------

def run_python(code):
    environment = dict(os.environ, DLOP_PLUGIN_PATH="",
                       PYTHONPATH=os.pathsep.join([os.path.dirname(__file__)] + sys.path))
    result = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_dlop_imports_neither_torch_nor_cupy():
    # A finder first on sys.meta_path records every attempt to import either library, so the
    # test fails even where neither is installed (a failed import leaves sys.modules as it was).
    found = run_python("""
import json, sys

tried = []
class Recorder:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "cupy", "cupy_backends"):
            tried.append(name)
        return None
sys.meta_path.insert(0, Recorder())

import dlop
from dlop import _C

class Interface:  # a __cuda_array_interface__ producer that is neither library's
    __cuda_array_interface__ = {"data": (0x7F0000, False), "shape": (4,), "typestr": "<f4",
                                "version": 3}

kernel = _C.CudaKernel(None, 1, 0, "k", "P", ("x",), ("float *",), "")
try:
    kernel(Interface(), block=(1,))
except dlop.DlopError:
    pass
print(json.dumps(tried))
""")
    assert found == []


@needs_no_gpu
def test_cupys_null_stream_under_per_thread_default_streams_is_the_per_thread_stream():
    result = run_python("""
import json, sys
from framework_standins import fake_kernel, install, make_cupy
cupy, backend = make_cupy(default_stream=2)  # CuPy imported with PTDS on
install(cupy=(cupy, backend))
messages = []
for stream in (None, 2):
    try:
        fake_kernel()(cupy.ndarray(), None, None, 4, block=(4,), stream=stream)
    except Exception as error:
        messages.append(str(error))
print(json.dumps(messages))
""")
    assert WAIT in result[0] and LAUNCH in result[1], result


def test_a_torch_without_what_dlop_reads_leaves_its_tensors_to_the_generic_path():
    used = run_python("""
import json, sys
from framework_standins import fake_kernel, install, make_torch
torch = make_torch()
del torch._C._cuda_getCurrentRawStream  # as in a build without CUDA
install(torch=torch)
t = torch.Tensor(device=3)
try:
    fake_kernel()(t, None, None, 4, block=(4,))
except Exception:
    pass
print(json.dumps(t.used))
""")
    assert used[0] == "__cuda_array_interface__"
