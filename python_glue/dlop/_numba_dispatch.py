"""Numba dispatch of dlop ops (PyTensor's mode="NUMBA", dlop.pytensor_adapter): a node becomes a
nopython function that calls libdlop's C API through ctypes — dlop_op_call_infer_shapes for the
output shapes, np.empty for the outputs, dlop_op_call_run on the arrays' own memory — with no
Python call on the way. The call is prepared once per node (a dlop._C.OpCall for its dtypes and
ranks on the CPU) and kept alive by the function. A failed run leaves nopython code once, to
raise dlop's error with its message."""
from __future__ import annotations

import ctypes

import numba
import numpy as np
from numba.np.unsafe.ndarray import to_fixed_tuple

from . import _C

# libdlop is loaded already (dlop._C links it): dlopen by soname finds that copy.
_LIBDLOP = ctypes.CDLL("libdlop.so.0")
_run = _LIBDLOP.dlop_op_call_run
_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p,
                 ctypes.c_int32, ctypes.c_void_p]
_run.restype = ctypes.c_int
_infer = _LIBDLOP.dlop_op_call_infer_shapes
_infer.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p,
                   ctypes.c_int32]
_infer.restype = ctypes.c_int

# dlop_tensor (tensor.h, DLPack's DLTensor) as 6 int64 words: data; device type | id << 32;
# ndim | dtype code << 32 | bits << 40 | lanes << 48; shape; strides; byte_offset.
TENSOR_WORDS = 6
# dlop_type: dtype | ndim << 32, then DLOP_MAX_NDIM dims.
MAX_NDIM = 16
TYPE_WORDS = 1 + MAX_NDIM
# DLPack's dtype codes and bits by NumPy dtype (the ones PyTensor's Numba backend handles).
_DL_CODES = {"bool": (6, 8), "int8": (0, 8), "int16": (0, 16), "int32": (0, 32),
             "int64": (0, 64), "uint8": (1, 8), "float32": (2, 32), "float64": (2, 64)}
_DLOP_DTYPES = {"bool": 0, "int8": 1, "int16": 2, "int32": 3, "int64": 4, "uint8": 5,
                "float32": 8, "float64": 9}


def raise_last_error(status: int) -> None:
    """dlop's error for a failed C call of an op (called from objmode): the exception class and
    this thread's message as dlop._C raises them (the message names the op)."""
    _C.raise_status(status)


def _check_dtype(name: str, where: str) -> None:
    if name not in _DL_CODES:
        raise NotImplementedError("dlop's Numba dispatch takes %s, not %s (%s)"
                                  % (", ".join(_DL_CODES), name, where))


def funcify(op_name: str, params: dict, input_types: list, output_types: list):
    """A nopython function of the node's input arrays returning its outputs (one array, or a
    tuple for several). input_types / output_types: (dtype name, ndim) per value."""
    for i, (dtype, _) in enumerate(input_types):
        _check_dtype(dtype, "input %d" % i)
    for o, (dtype, _) in enumerate(output_types):
        _check_dtype(dtype, "output %d" % o)
    call = _C.OpCall(op_name, tuple(d for d, _ in input_types),
                     tuple(n for _, n in input_types), params, "cpu")
    n_in, n_out = len(input_types), len(output_types)
    names = ["x%d" % i for i in range(n_in)]
    lines = ["def perform(%s):" % ", ".join(names),
             "    tensors = np.zeros(%d, np.int64)" % (TENSOR_WORDS * (n_in + n_out)),
             "    types = np.zeros(%d, np.int64)" % (TYPE_WORDS * (n_in + n_out)),
             "    strides = np.zeros(%d, np.int64)" % (MAX_NDIM * (n_in + n_out))]
    for i, (dtype, ndim) in enumerate(input_types):
        code, bits = _DL_CODES[dtype]
        t, y, s = TENSOR_WORDS * i, TYPE_WORDS * i, MAX_NDIM * i
        lines += [
            "    x%d = np.asarray(x%d)" % (i, i),
            "    shape%d = np.empty(%d, np.int64)" % (i, max(ndim, 1)),
            "    for d in range(%d):" % ndim,
            "        shape%d[d] = x%d.shape[d]" % (i, i),
            "        strides[%d + d] = x%d.strides[d] // %d" % (s, i, bits // 8),
            "        types[%d + 1 + d] = x%d.shape[d]" % (y, i),
            "    types[%d] = %d | (%d << 32)" % (y, _DLOP_DTYPES[dtype], ndim),
            "    tensors[%d] = x%d.ctypes.data" % (t, i),
            "    tensors[%d] = 1" % (t + 1),
            "    tensors[%d] = %d | (%d << 32) | (%d << 40) | (1 << 48)" % (t + 2, ndim, code, bits),
            "    tensors[%d] = shape%d.ctypes.data" % (t + 3, i),
            "    tensors[%d] = strides.ctypes.data + %d" % (t + 4, 8 * s),
        ]
    out_types = TYPE_WORDS * n_in
    lines += ["    status = infer(CALL, types.ctypes.data, %d, types.ctypes.data + %d, %d)"
              % (n_in, 8 * out_types, n_out),
              "    if status != 0:",
              "        fail(status)"]
    for o, (dtype, ndim) in enumerate(output_types):
        y, t = out_types + TYPE_WORDS * o, TENSOR_WORDS * (n_in + o)
        code, bits = _DL_CODES[dtype]
        lines += [
            "    dims%d = types[%d:%d].copy()" % (o, y + 1, y + 1 + max(ndim, 1)),
            "    y%d = np.empty(to_fixed_tuple(dims%d, %d), np.%s)"
            % (o, o, ndim, "bool_" if dtype == "bool" else dtype),
            "    tensors[%d] = y%d.ctypes.data" % (t, o),
            "    tensors[%d] = 1" % (t + 1),
            "    tensors[%d] = %d | (%d << 32) | (%d << 40) | (1 << 48)" % (t + 2, ndim, code, bits),
            "    tensors[%d] = dims%d.ctypes.data" % (t + 3, o),
        ]
    lines += ["    status = run(CALL, tensors.ctypes.data, %d, tensors.ctypes.data + %d, %d, 0)"
              % (n_in, 8 * TENSOR_WORDS * n_in, n_out),
              "    if status != 0:",
              "        fail(status)"]
    # the arrays whose addresses the C calls read must live until the calls return
    # (numba frees an array right after its last use, which .ctypes.data is not counted as:
    # the scratch arrays too, or the calls read freed memory)
    keep = ", ".join(["tensors", "types", "strides"] + ["shape%d" % i for i in range(n_in)]
                     + ["dims%d" % o for o in range(n_out)] + names)
    lines += ["    keep_alive((%s,))" % keep]
    outputs = ", ".join("y%d" % o for o in range(n_out))
    lines += ["    return %s" % (outputs if n_out == 1 else "(%s,)" % outputs)]
    namespace = {"np": np, "numba": numba, "to_fixed_tuple": to_fixed_tuple, "infer": _infer,
                 "run": _run, "CALL": call.address,
                 "fail": _fail, "keep_alive": _keep_alive,
                 "_call": call}  # the prepared call lives as long as the function's globals
    exec("\n".join(lines), namespace)  # one source per arity and ranks, like PyTensor's own
    return numba.njit(namespace["perform"])


@numba.njit
def _fail(status):
    """Leave nopython code to raise dlop's error (a function of this module, so that numba
    refers to it by name instead of pickling the generated function's ctypes globals)."""
    with numba.objmode():
        raise_last_error(status)


@numba.njit
def _keep_alive(values):
    """Nothing: a use of values after the C calls, so the arrays they point into live until
    then (numba may free an array after its last use)."""
    return len(values)
