"""dlop.torch — dlop ops as PyTorch custom ops: ``dlop.torch.op("exp")`` registers and returns
``torch.ops.dlop.exp``, whose schema comes from the op descriptor (one Tensor per input, the
parameters keyword-only with their kinds and declared defaults).

- CPU and CUDA kernels run the plugin's thunk on the tensors' own memory (no copies), on
  PyTorch's current CUDA stream. Outputs come from PyTorch's allocator: they are PyTorch tensors
  that PyTorch frees, stream-ordered, like its own. The kernels (and the autograd kernel) are
  C++ inside PyTorch's dispatcher (``dlop/_torch_kernels.so``) when it was built for the PyTorch
  and the Python that run (the in-place variants keep Python kernels), else Python, handing the
  tensors over as DLPack capsules: ``KERNELS`` says which, and why. ``DLOP_TORCH_KERNELS=python`` asks for the Python ones.
- A fake kernel from the op's make_node and infer_shape, so ``torch.compile(fullgraph=True)``
  traces dlop ops without graph breaks (symbolic sizes: elementwise ops broadcast them; other
  ops map them through the shape rule, probed with distinct sizes).
- Backward through a dlop op raises an error naming the op (dlop ops declare no gradients yet).
- Ops that declare an output in place of an input (inplace_map) also get ``<name>_``, which
  writes into that input and says so in its schema (``Tensor(a!)``); view ops are refused (use
  PyTorch's own views).
``dlop.torch.register_all()`` registers every loaded op that can be registered.
"""
from __future__ import annotations

import ctypes
import os
import sysconfig
import threading
import warnings
from typing import Any

from . import _C, _adapters, _errors
from ._C import UnsupportedError
from ._graph import tensor as _tensor
from ._ops import Op, ops

try:
    import torch
    import torch.utils.dlpack
except ImportError as error:
    raise ImportError("dlop.torch needs PyTorch; importing it failed: %s" % error) from error

__all__ = ["op", "register_all", "KERNELS"]

_DTYPES = {"bool": torch.bool, "int8": torch.int8, "uint8": torch.uint8, "int16": torch.int16,
           "int32": torch.int32, "int64": torch.int64, "float16": torch.float16,
           "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}
_NAMES = {dtype: name for name, dtype in _DTYPES.items()}

_LIBRARY = torch.library.Library("dlop", "FRAGMENT")
_lock = threading.RLock()
_registered: dict[str, Any] = {}
_to_dlpack = getattr(torch.utils.dlpack, "to_dlpack", None) or torch._C._to_dlpack
# PyTorch's current CUstream of a device as an int, without making a Stream object per call
# (what torch.cuda.current_stream(device).cuda_stream gives, at a fraction of the cost).
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _current_stream(device) -> int:
    index = device.index if device.index is not None else torch.cuda.current_device()
    if _raw_stream is not None:
        return _raw_stream(index)
    return torch.cuda.current_stream(index).cuda_stream


def _load_kernels():
    """dlop/_torch_kernels.so, ready, or None; and a sentence that says which kernels run."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_torch_kernels.so")
    if os.environ.get("DLOP_TORCH_KERNELS", "") == "python":
        return None, "python (DLOP_TORCH_KERNELS=python)"
    if not os.path.exists(path):
        return None, ("python (dlop/_torch_kernels.so was not built: the build's Python had no "
                      "PyTorch)")
    try:
        library = ctypes.CDLL(path)
    except OSError as error:
        return None, "python (dlop/_torch_kernels.so failed to load: %s)" % error
    library.dlop_torch_kernels_built_for.restype = ctypes.c_char_p
    library.dlop_torch_kernels_built_for_python.restype = ctypes.c_char_p
    built = library.dlop_torch_kernels_built_for().decode()
    built_python = library.dlop_torch_kernels_built_for_python().decode()
    python = sysconfig.get_config_var("SOABI")
    if built != torch.__version__ or built_python != python:
        return None, ("python (dlop/_torch_kernels.so was built for PyTorch %s on %s; PyTorch %s "
                      "on %s is running: rebuild dlop to use the C++ kernels)"
                      % (built, built_python, torch.__version__, python))
    library.dlop_torch_kernels_init.argtypes = [ctypes.py_object, ctypes.c_char_p, ctypes.c_size_t]
    library.dlop_torch_kernels_register.argtypes = [ctypes.c_char_p, ctypes.c_int,
                                                    ctypes.c_char_p, ctypes.c_size_t]
    error = ctypes.create_string_buffer(1024)
    if library.dlop_torch_kernels_init(_C.raise_status, error, len(error)) != 0:
        return None, "python (dlop/_torch_kernels.so failed to start: %s)" % error.value.decode()
    return library, "c++ (dlop/_torch_kernels.so, built for PyTorch %s)" % built


_kernels, KERNELS = _load_kernels()


# Distinct sizes for symbolic dims when the fake kernel asks a non-elementwise op's shape rule
# (as the PyTensor adapter probes): large primes, never 1, two rounds.
_PROBE_BASES = (100003, 200003)
_PROBE_STEP = 1009


# ---- the schema ------------------------------------------------------------------------------

def _default_text(param) -> str:
    value, kind = param.default, param.kind
    if kind == "bool":
        return "True" if value else "False"
    if kind == "int":
        return str(int(value))
    if kind == "float":
        return repr(float(value))
    if kind == "string":
        escaped = str(value).replace("\\", "\\\\").replace('"', '\\"')
        return '"%s"' % escaped
    if kind == "ints":
        return "[%s]" % ", ".join(str(int(v)) for v in value)
    raise TypeError("dlop.torch: parameter '%s' has a kind PyTorch has no type for: %s"
                    % (param.name, kind))


_SCHEMA_TYPES = {"bool": "bool", "int": "int", "float": "float", "string": "str", "ints": "int[]"}


def _input_names(op: Op) -> list[str]:
    if op.num_inputs < 0:
        return ["xs"]
    return ["x"] if op.num_inputs == 1 else ["x%d" % i for i in range(op.num_inputs)]


def _schema(op: Op, inplace_input: int = -1) -> str:
    """'(Tensor x, *, int[] axes=[], bool keepdims=False) -> Tensor'; with inplace_input, the
    in-place variant: that input is written (Tensor(a!)) and nothing is returned."""
    names = _input_names(op)
    if op.num_inputs < 0:
        arguments = ["Tensor[] xs"]
    else:
        arguments = ["Tensor(a!) %s" % n if i == inplace_input else "Tensor %s" % n
                     for i, n in enumerate(names)]
    params = ["%s %s=%s" % (_SCHEMA_TYPES[p.kind], p.name, _default_text(p)) for p in op.params]
    if params:
        arguments += ["*"] + params
    if inplace_input >= 0:
        returns = "()"
    elif op.num_outputs == 1:
        returns = "Tensor"
    else:
        returns = "(%s)" % ", ".join(["Tensor"] * op.num_outputs)
    return "(%s) -> %s" % (", ".join(arguments), returns)


# ---- running -----------------------------------------------------------------------------------

def _params_key(params: dict) -> tuple:
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in params.items()))


class _Kernel:
    """The CPU/CUDA kernel of one dlop op: one prepared dlop call per (device, dtypes, ranks,
    parameters), reused for every shape."""

    def __init__(self, op: Op):
        self.op = op
        self.calls: dict = {}
        self.defaults = {p.name: p.default for p in op.params}

    def full_params(self, params: dict) -> dict:
        full = dict(self.defaults)
        full.update(params)
        return full

    def call_for(self, tensors: tuple, params: dict):
        device = tensors[0].device if tensors else torch.device("cpu")
        for i, t in enumerate(tensors):
            if t.device != device:
                raise _errors.device_mismatch(
                    "dlop.torch: op '%s': input %d is on %s but input 0 is on %s; put them on "
                    "one device" % (self.op.name, i, t.device, device))
        key = (device, tuple(t.dtype for t in tensors), tuple(t.dim() for t in tensors),
               _params_key(params))
        call = self.calls.get(key)
        if call is None:
            names = []
            for i, t in enumerate(tensors):
                if t.dtype not in _NAMES:
                    raise _errors.type_error("dlop.torch: op '%s': input %d is %s, which dlop has "
                                             "no dtype for" % (self.op.name, i, t.dtype))
                names.append(_NAMES[t.dtype])
            if device.type not in ("cpu", "cuda"):
                raise _errors.make(UnsupportedError, "DLOP_UNSUPPORTED",
                                   "dlop.torch: op '%s': tensors on %s; dlop runs on cpu and "
                                   "cuda" % (self.op.name, device))
            where = "cpu"
            if device.type == "cuda":
                index = device.index if device.index is not None else torch.cuda.current_device()
                where = "cuda:%d" % index
            call = _C.OpCall(self.op.name, tuple(names), tuple(t.dim() for t in tensors),
                             params, where)
            self.calls[key] = call
        return call, device

    def run(self, tensors: tuple, params: dict, into: tuple | None = None):
        tensors = tuple(t.detach() if t.requires_grad else t for t in tensors)
        call, device = self.call_for(tensors, params)
        shapes = call.infer_shapes(tuple(tuple(t.shape) for t in tensors))
        if into is None:
            into = tuple(torch.empty(shape, dtype=_DTYPES[dtype], device=device)
                         for shape, dtype in zip(shapes, call.output_dtypes))
        else:  # the in-place variant: its input is the output (checked by the call)
            into = tuple(t.detach() if t.requires_grad else t for t in into)
        stream = _current_stream(device) if device.type == "cuda" else 0
        call.run(tuple(_to_dlpack(t) for t in tensors), tuple(_to_dlpack(o) for o in into),
                 stream)
        return into


# ---- the fake kernel --------------------------------------------------------------------------

def _symbol_key(dim) -> str:
    return str(dim)


def _fake_outputs(op: Op, tensors: tuple, params: dict) -> list:
    shapes = [tuple(t.shape) for t in tensors]
    dtypes = [_NAMES[t.dtype] for t in tensors]
    concrete = all(isinstance(d, int) for s in shapes for d in s)
    if concrete:
        types = _adapters.output_types(op, list(zip(dtypes, shapes)), params, "dlop.torch")
        return [(dtype, shape) for dtype, shape in types]
    # symbolic sizes (dynamic shapes): dtypes and static dims from make_node on unknown dims
    partial = [(d, tuple(x if isinstance(x, int) else None for x in s))
               for d, s in zip(dtypes, shapes)]
    variables = [_tensor("in%d" % i, dtype=d, shape=s) for i, (d, s) in enumerate(partial)]
    outs = op(*variables, **params)
    outs = outs if isinstance(outs, tuple) else (outs,)
    if op.elementwise:
        shape = tuple(torch.broadcast_shapes(*shapes))
        return [(o.dtype, shape) for o in outs]
    symbols = {}
    for s in shapes:
        for d in s:
            if not isinstance(d, int):
                symbols.setdefault(_symbol_key(d), d)
    keys = list(symbols)
    rounds = []
    for base in _PROBE_BASES:
        values = {k: base + n * _PROBE_STEP for n, k in enumerate(keys)}
        probed = [(d, tuple(x if isinstance(x, int) else values[_symbol_key(x)] for x in s))
                  for d, s in zip(dtypes, shapes)]
        rounds.append((values, _adapters.output_types(op, probed, params, "dlop.torch")))
    result = []
    for o, out in enumerate(outs):
        dims = []
        for j in range(len(out.shape)):
            got = [types[o][1][j] for _, types in rounds]
            sources = [[k for k, v in values.items() if v == types[o][1][j]]
                       for values, types in rounds]
            if sources[0] and sources[0] == sources[1] and len(sources[0]) == 1:
                dims.append(symbols[sources[0][0]])
            elif got[0] == got[1]:
                dims.append(got[0])
            else:
                raise _errors.make(UnsupportedError, "DLOP_UNSUPPORTED",
                                   "dlop.torch: op '%s': output %d dim %d depends on several "
                                   "symbolic sizes (probed %s); compile with dynamic=False"
                                   % (op.name, o, j, got))
        result.append((out.dtype, tuple(dims)))
    return result


# ---- registering -------------------------------------------------------------------------------

def _no_gradient(name: str):
    def backward(ctx, *grads):
        raise RuntimeError(
            "dlop op '%s' has no gradient: dlop ops do not declare derivatives yet, so backward "
            "cannot pass through it (compute this part with PyTorch ops, or detach its inputs)"
            % name)
    return backward


def _refuse_dual(name: str, tensors) -> None:
    """Forward-mode AD: PyTorch calls a Python-registered autograd kernel only when an input
    requires grad, so a dual tensor reaches the kernel itself and its tangent would be dropped
    (a silently wrong derivative). The C++ autograd kernel refuses it the same way."""
    from torch.autograd import forward_ad
    # a private name: where a PyTorch lacks it, every call checks
    if getattr(forward_ad, "_current_level", 0) < 0:  # no dual level open: no tangent anywhere
        return
    if any(forward_ad.unpack_dual(t).tangent is not None for t in tensors):
        raise RuntimeError(
            "dlop op '%s' has no gradient: dlop ops do not declare derivatives yet, so "
            "forward-mode AD cannot pass through it (its input is a dual tensor)" % name)


def _setup_context(ctx, inputs, output) -> None:
    """Nothing to save: backward only raises (the signature torch.library expects)."""


def _register(dlop_op: Op):
    name = dlop_op.name
    kernel = _Kernel(dlop_op)
    qualname = "dlop::" + name
    _LIBRARY.define(name + _schema(dlop_op))

    def split(args, kwargs):
        tensors = tuple(args[0]) if dlop_op.num_inputs < 0 else tuple(args)
        return tensors, kernel.full_params(kwargs)

    def impl(*args, **kwargs):
        tensors, params = split(args, kwargs)
        _refuse_dual(name, tensors)
        out = kernel.run(tensors, params)
        return out[0] if dlop_op.num_outputs == 1 else tuple(out)

    def fake(*args, **kwargs):
        tensors, params = split(args, kwargs)
        # new_empty: a fake tensor on the inputs' device (ops without inputs: the meta device)
        outs = [tensors[0].new_empty(shape, dtype=_DTYPES[dtype]) if tensors
                else torch.empty(shape, dtype=_DTYPES[dtype], device="meta")
                for dtype, shape in _fake_outputs(dlop_op, tensors, params)]
        return outs[0] if dlop_op.num_outputs == 1 else tuple(outs)

    # CPU, CUDA and autograd kernels in C++ (torch_kernels.cpp), else in Python
    error = ctypes.create_string_buffer(1024)
    in_cpp = _kernels is not None and _kernels.dlop_torch_kernels_register(
        name.encode(), int(dlop_op.num_inputs < 0), error, len(error)) == 0
    if not in_cpp:
        if _kernels is not None:  # the op still works, through the Python kernels: say so
            warnings.warn("dlop.torch: registering the C++ kernels of '%s' failed (%s); its "
                          "kernels run in Python" % (name, error.value.decode("utf-8", "replace")))
        _LIBRARY.impl(name, impl, "CPU")
        _LIBRARY.impl(name, impl, "CUDA")
        torch.library.register_autograd(qualname, _no_gradient(name),
                                        setup_context=_setup_context, lib=_LIBRARY)
    torch.library.register_fake(qualname, fake, lib=_LIBRARY)

    inplace = dlop_op.inplace_map
    if (inplace and dlop_op.num_outputs == 1 and dlop_op.num_inputs > 0 and inplace[0] >= 0):
        target = inplace[0]
        _LIBRARY.define(name + "_" + _schema(dlop_op, inplace_input=target))

        def impl_inplace(*args, **kwargs):
            tensors, params = split(args, kwargs)
            _refuse_dual(name + "_", tensors)
            kernel.run(tensors, params, into=(tensors[target],))

        def fake_inplace(*args, **kwargs):
            tensors, params = split(args, kwargs)
            (dtype, shape), = _fake_outputs(dlop_op, tensors, params)
            t = tensors[target]
            if _DTYPES[dtype] != t.dtype or tuple(shape) != tuple(t.shape):
                raise _errors.type_error(
                    "dlop.torch: %s_ writes its result into input %d, which is %s%s, but the "
                    "result is %s%s" % (name, target, t.dtype, tuple(t.shape), dtype, tuple(shape)))
            return None

        _LIBRARY.impl(name + "_", impl_inplace, "CPU")
        _LIBRARY.impl(name + "_", impl_inplace, "CUDA")
        torch.library.register_fake(qualname + "_", fake_inplace, lib=_LIBRARY)
    return getattr(torch.ops.dlop, name)


def op(name_or_op: Any):
    """Register one dlop op (its name, or an op from ``dlop.ops``) as ``torch.ops.dlop.<name>``
    (once; later calls return the same op) and return it."""
    resolved = _adapters.resolve(name_or_op, "dlop.torch")
    if resolved.view_map is not None:
        raise _errors.make(UnsupportedError, "DLOP_UNSUPPORTED",
                           "dlop.torch: op '%s' is a view op (its output is a view of an input); "
                           "use PyTorch's own views (permute, reshape, expand)" % resolved.name)
    with _lock:
        registered = _registered.get(resolved.name)
        if registered is None:
            registered = _registered[resolved.name] = _register(resolved)
    return registered


def register_all() -> list[str]:
    """Register every loaded op that is not a view op; returns the names registered."""
    names = []
    for dlop_op in ops:
        if dlop_op.view_map is None:
            op(dlop_op)
            names.append(dlop_op.name)
    return names
