"""dlop.jax — dlop ops inside JAX: ``dlop.jax.op("exp")`` is a function of JAX arrays that works
eagerly and inside ``jax.jit``, on the CPU and on CUDA GPUs, through ``jax.ffi``.

Each call is one XLA custom call to dlop's FFI handler (``dlop/_xla_ffi.so``, C): it runs the
plugin's thunk on XLA's own buffers (no copies) and, on a GPU, on the stream XLA gives it. Result
shapes and dtypes come from the op's make_node and infer_shape while JAX traces. Elementwise ops
(those that declare a scalar body) batch under ``jax.vmap`` by broadcasting; other ops run once
per batch element. Errors from the plugin reach Python as JAX's runtime errors carrying the
plugin's message. Gradients are not defined (dlop ops declare none yet).
"""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

import numpy as np

from . import _adapters, _errors
from ._C import UnsupportedError
from ._ops import Op

try:
    import jax
    import jax.numpy as jnp
except ImportError as error:  # say what is missing instead of a bare traceback deep inside
    raise ImportError("dlop.jax needs JAX (pip install jax); importing it failed: %s"
                      % error) from error

__all__ = ["op", "available", "unavailable_reason"]

_HANDLER_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_xla_ffi.so")
# One target per handler; elementwise capture-safe ops use the one XLA may record into its
# command buffers (CUDA graphs).
_TARGET = "dlop_call"
_TARGET_GRAPH_SAFE = "dlop_call_graph_safe"

_lock = threading.Lock()
_library = None
_reason: str | None = None


def _load() -> None:
    """Load the handler library and register its targets with XLA, once."""
    global _library, _reason
    with _lock:
        if _library is not None or _reason is not None:
            return
        if not os.path.exists(_HANDLER_FILE):
            _reason = ("dlop.jax is unavailable: dlop's XLA FFI handler (%s) was not built; "
                       "it needs jaxlib's FFI header when dlop is configured (install jax into "
                       "the Python the build uses, or set DLOP_XLA_FFI_INCLUDE_DIR, and rebuild)"
                       % _HANDLER_FILE)
            return
        try:
            library = ctypes.CDLL(_HANDLER_FILE)
        except OSError as error:
            _reason = "dlop.jax is unavailable: loading %s failed: %s" % (_HANDLER_FILE, error)
            return
        capsule = jax.ffi.pycapsule
        for target, cpu, cuda in ((_TARGET, library.dlop_xla_call_cpu, library.dlop_xla_call_cuda),
                                  (_TARGET_GRAPH_SAFE, library.dlop_xla_call_cpu,
                                   library.dlop_xla_call_cuda_graph_safe)):
            jax.ffi.register_ffi_target(target, capsule(cpu), platform="cpu")
            # initialize prepares the call before any command-buffer capture records execute
            jax.ffi.register_ffi_target(target, {"initialize": capsule(cuda),
                                                 "execute": capsule(cuda)}, platform="CUDA")
        _library = library


def available() -> bool:
    """Whether dlop ops can run inside JAX here (see unavailable_reason)."""
    _load()
    return _library is not None


def unavailable_reason() -> str | None:
    """Why dlop.jax cannot run ops here, or None when it can."""
    _load()
    return _reason


def _attribute(param, value: Any) -> Any:
    """A parameter value as the XLA attribute the handler reads for its declared kind."""
    kind = param.kind
    try:
        if kind == "bool":
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError("expected a bool")
            return np.bool_(value)
        if kind == "int":
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise TypeError("expected an int")
            return np.int64(value)
        if kind == "float":
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
                raise TypeError("expected a float")
            return np.float64(value)
        if kind == "string":
            if not isinstance(value, str):
                raise TypeError("expected a str")
            return value
        if kind == "ints":
            values = [int(v) for v in (value if isinstance(value, (list, tuple, np.ndarray))
                                       else [value])]
            return np.asarray(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError) as error:
        raise TypeError("dlop.jax: parameter '%s' is declared %s: %s, got %r"
                        % (param.name, kind, error, value)) from None
    raise TypeError("dlop.jax: parameter '%s' has a kind dlop.jax does not know: %s"
                    % (param.name, kind))


def _dtype_name(dtype: Any) -> str:
    return np.dtype(dtype).name  # "bfloat16" too (ml_dtypes' name)


class _JaxOp:
    """A dlop op bound to parameter values, called on JAX arrays (see ``op``)."""

    def __init__(self, dlop_op: Op, params: dict):
        self.dlop_op = dlop_op
        self.params = params
        self.__name__ = dlop_op.name
        self.__doc__ = dlop_op.__doc__
        declared = {p.name: p for p in dlop_op.params}
        # attribute names sorted as XLA sorts them; values typed as the handler reads them
        self._attributes = {"param_" + name: _attribute(declared[name], value)
                            for name, value in sorted(params.items())}
        graph_safe = dlop_op.elementwise and dlop_op.cuda_graph_safe
        self._target = _TARGET_GRAPH_SAFE if graph_safe else _TARGET
        # Elementwise ops broadcast, so a batch is one call on inputs with a batch dim (rank
        # aligned first, below); any other op runs once per batch element.
        self._vmap_method = "expand_dims" if dlop_op.elementwise else "sequential"

    def __repr__(self) -> str:
        return "<dlop.jax op %s%s>" % (self.dlop_op.name, self.params or "")

    def __call__(self, *args: Any):
        _load()
        if _library is None:
            raise RuntimeError(_reason)
        op = self.dlop_op
        if op.num_inputs >= 0 and len(args) != op.num_inputs:
            raise TypeError("dlop.jax: op '%s' takes %d input(s), got %d"
                            % (op.name, op.num_inputs, len(args)))
        arrays = [jnp.asarray(a) for a in args]
        if op.elementwise and arrays:
            # NumPy broadcasting aligns trailing dims; jax.vmap adds the batch dim in front of
            # each batched input, so give every input the same rank first (a free reshape).
            rank = max(a.ndim for a in arrays)
            arrays = [a.reshape((1,) * (rank - a.ndim) + a.shape) if a.ndim < rank else a
                      for a in arrays]
        types = [(_dtype_name(a.dtype), tuple(a.shape)) for a in arrays]
        outputs = _adapters.output_types(op, types, self.params, "dlop.jax")
        results = [jax.ShapeDtypeStruct(shape, jnp.dtype(dtype)) for dtype, shape in outputs]
        call = jax.ffi.ffi_call(self._target, results if len(results) != 1 else results[0],
                                vmap_method=self._vmap_method)
        out = call(*arrays, dlop_op=op.name, **self._attributes)
        return tuple(out) if len(results) != 1 else out


def op(name_or_op: Any, **params: Any) -> _JaxOp:
    """A dlop op (its name, or an op from ``dlop.ops``) as a function of JAX arrays.

    Keyword arguments are the op's parameters (the others take their declared defaults). The
    result works eagerly, inside ``jax.jit`` (CPU and GPU) and under ``jax.vmap``::

        exp = dlop.jax.op("exp")
        y = jax.jit(lambda x: exp(x) * 2)(jnp.arange(4.0))
    """
    resolved = _adapters.resolve(name_or_op, "dlop.jax")
    if resolved.view_map is not None:
        raise _errors.make(UnsupportedError, "DLOP_UNSUPPORTED",
                           "dlop.jax: op '%s' is a view op (its output is a view of an input); "
                           "XLA has no views of buffers, so use JAX's own (jnp.transpose, "
                           "jnp.reshape, jnp.broadcast_to)" % resolved.name)
    return _JaxOp(resolved, _adapters.check_params(resolved, params, "dlop.jax"))
