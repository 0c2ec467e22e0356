"""dlop: Theano-style graphs and eager arrays over dynamically loaded C/CUDA op plugins.

Build graphs from typed variables (``dlop.vector``, ``dlop.matrix``, ...) and the ops in
``dlop.ops``; types and shapes are known at once.  ``dlop.function`` compiles a graph for one
device ("cpu", "cuda", "cuda:1"); ops applied to concrete arrays run at once.  Arrays
(``dlop.Array``) exchange memory without copies with NumPy, CuPy, PyTorch, JAX and Numba.
"""
from __future__ import annotations

import atexit

try:
    from . import _C
except ImportError as _error:
    # The extension finds libdlop in the package's lib/ (a wheel) or in the prefix's library
    # directory beside it (`cmake --install`): say so when neither holds one (docs/python.md).
    if "libdlop" not in str(_error):
        raise
    raise ImportError(f"{_error}: the dlop package in {__path__[0]} runs the libdlop of its own "
                      "installation, in its lib/ (a wheel) or in ../lib beside it (installed by "
                      "`cmake --install`), and neither holds one: reinstall it, or import it from "
                      "where it was installed") from None
from ._C import (
    Array,
    DeviceMismatchError,
    DlopError,
    DlopTypeError,
    Function,
    InvalidArgumentError,
    KernelError,
    NoDeviceError,
    NotFoundError,
    OutOfMemoryError,
    PluginError,
    ShapeError,
    UnsupportedError,
)
from ._graph import TensorType, Variable, function, matrix, scalar, tensor, vector
from ._ops import (Op, Param, Plugin, info, load_errors, load_plugin, ops, plugin_probe, plugins,
                   set_plugin_probe)
from . import _arith
from ._arith import (abs, astype, broadcast_to, cast, dimshuffle, dot, exp, gemm, log, matmul,
                     max, maximum, mean, min, minimum, negative, reshape, sigmoid, sqrt, sum,
                     tanh, transpose, where)
from ._errors import ScalarOverflowError
from ._py_op import Apply  # what a dlop.Op subclass's make_node returns (source-ops.md)
from ._source import elementwise  # ops defined from a scalar body at run time (source-ops.md)
from ._check import CheckFailed, CheckReport, check  # the compliance suite on such ops
from ._export import export_plugin  # such ops as a plugin project (source-ops.md)
from ._source_module import CompileError, SourceModule  # raw CUDA kernels (source-ops.md)
from ._serialize import dumps, load, loads, save  # graphs and functions as text (serialization.md)
from . import testing  # dlop.testing.check_values: an op's values against a NumPy reference

__all__ = [
    "Apply", "Array", "CheckFailed", "CheckReport", "CompileError", "Function", "Op", "Param",
    "Plugin", "SourceModule", "TensorType", "Variable",
    "asarray", "check", "dumps", "elementwise", "export_plugin", "function", "info", "load", "loads", "save", "load_errors", "load_plugin", "matrix", "ops", "plugin_probe",
    "plugins", "set_plugin_probe",
    "scalar", "synchronize", "tensor", "vector", "version", "cuda_device_count", "cuda_stream", "jit_stats",
    "DlopError", "DlopTypeError", "ShapeError", "InvalidArgumentError", "NotFoundError",
    "NoDeviceError", "DeviceMismatchError", "UnsupportedError", "PluginError", "KernelError",
    "OutOfMemoryError", "ScalarOverflowError",
    # Operators' functions (docs/python.md, "Operators and functions"):
    "abs", "astype", "broadcast_to", "cast", "dimshuffle", "dot", "exp", "gemm", "log", "matmul",
    "max", "maximum", "mean", "min", "minimum", "negative", "reshape", "sigmoid", "sqrt", "sum",
    "tanh", "transpose", "where",
]

# Operators (+ - * / ** @, comparisons, .T, .sum(), ...) on Variable and Array.
_arith.install()

__version__ = _C.version()

# Foreign CUDA inputs (PyTorch, CuPy, JAX, Numba) go back to their producers once dlop's work
# on them is done, at later calls; at exit everything still queued goes back while those
# libraries are alive (atexit hooks run before modules are torn down).
atexit.register(_C.release_foreign_at_exit)


def asarray(obj, device: str | None = None, dtype=None) -> Array:
    """A dlop.Array for obj without copying when it already lives on ``device``.

    obj may be a dlop.Array, a NumPy array or anything with the buffer protocol, a DLPack
    producer (CuPy, PyTorch, JAX: asked for a versioned capsule first, with dlop's stream),
    a ``__cuda_array_interface__`` producer (Numba; its stream is waited for), or a nested
    list / scalar.  ``device`` moves the data there (an explicit copy); ``dtype`` converts host
    data (device arrays must already have it).
    """
    return _C.asarray(obj, device, dtype)


def version() -> str:
    """The libdlop version string."""
    return _C.version()


def cuda_device_count() -> int:
    """Number of CUDA devices (0 without a driver or GPU)."""
    return _C.cuda_device_count()


def synchronize(device: str = "cuda") -> None:
    """Wait until the work dlop enqueued on ``device`` has finished.

    Foreign CUDA inputs (PyTorch, CuPy, JAX, Numba arrays passed to functions, ops or
    ``asarray``) whose release was deferred until that work finished are handed back to their
    producers here too.
    """
    _C.synchronize(device)


def cuda_stream(device: str = "cuda") -> int:
    """The CUstream (an int) dlop's own work on ``device`` is enqueued on from Python: pass it as
    ``stream=`` to a SourceModule kernel to order the kernel with dlop's ops without waiting."""
    return _C.stream_handle(device)


def jit_stats() -> dict:
    """What run-time compilation (NVRTC for CUDA, the host's C compiler) did in this process.

    A dict: ``compiles`` (compiler runs, failed ones included), ``compile_errors``,
    ``memory_hits`` and ``disk_hits`` (requests served without compiling), ``corrupt_entries``
    (disk entries found damaged, compiled again and replaced), ``compile_seconds`` and
    ``disk_hit_seconds`` (wall time), and ``cache_dir``, the directory of the disk cache
    (None when there is none: ``DLOP_CACHE_DIR=""``, or a directory that cannot be used).
    """
    return _C.jit_stats()
