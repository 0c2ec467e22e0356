"""Symbolic variables and compiled functions.

A Variable knows its dtype and static shape (None where unknown) from the moment it is made:
op applications run the op's make_node and infer_shape through a small C graph.  Compiling
(``function``) rebuilds the needed part of the graph in C and hands it to libdlop.
"""
from __future__ import annotations

import itertools
from typing import Any, Iterable, Sequence

from . import _C, _errors, _promote

_names = itertools.count()


class Apply:
    """One op application: the op, its input Variables, its parameters, its outputs."""

    __slots__ = ("op", "inputs", "params", "outputs")

    def __init__(self, op: Any, inputs: list["Variable"], params: dict[str, Any]):
        self.op = op
        self.inputs = inputs
        self.params = params
        self.outputs: list[Variable] = []


class TensorType:
    """A Variable's type, its dtype and static shape (None where unknown); calling it makes a
    new Variable of that type, as Theano's ``x.type()`` does in an op's make_node."""

    __slots__ = ("dtype", "shape")

    def __init__(self, dtype: Any, shape: Sequence[int | None]):
        self.dtype = _check_dtype(dtype)
        self.shape = _check_shape(shape, None, "TensorType", "type", self.dtype)

    def __call__(self, name: str | None = None) -> "Variable":
        return Variable(name, self.dtype, self.shape)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, TensorType) and (self.dtype, self.shape) == (other.dtype, other.shape)

    def __hash__(self) -> int:
        return hash((self.dtype, self.shape))

    def __repr__(self) -> str:
        return f"TensorType({self.dtype}, {self.shape})"


class Variable:
    """A typed symbolic value: a graph input, a constant, or an op's output.

    ``dtype`` is a dtype name, ``shape`` a tuple with None for sizes not known while the graph
    is built.  ``eval`` computes it now.
    """

    __slots__ = ("name", "dtype", "shape", "owner", "value", "_eval_cache", "__weakref__")
    # Operators (x + y, x.T, x.sum(), x == y as an 'equal' node, ...) are installed by
    # dlop._arith.install(); hashing stays by identity.
    __hash__ = object.__hash__

    def __init__(self, name: str | None, dtype: str, shape: Sequence[int | None],
                 owner: Apply | None = None, value: Any = None):
        self.name = name
        self.dtype = dtype
        self.shape = tuple(shape)
        self.owner = owner
        self.value = value  # a dlop.Array for constants
        self._eval_cache: dict[Any, Any] = {}

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def type(self) -> TensorType:
        """This variable's TensorType: ``x.type()`` is a new Variable of x's dtype and shape."""
        return TensorType(self.dtype, self.shape)

    @property
    def owner_op(self):
        """The Op that produced this variable, or None for inputs and constants."""
        return self.owner.op if self.owner is not None else None

    def eval(self, givens: dict["Variable", Any] | None = None, device: str = "cpu"):
        """Compute this variable now on ``device``; ``givens`` maps input Variables to values.

        The compiled function is cached per (inputs, device), so repeated evals are cheap.
        """
        givens = dict(givens or {})
        for key in givens:
            if not isinstance(key, Variable):
                raise _errors.type_error(f"eval: givens keys must be dlop Variables, not {key!r}")
        inputs = list(givens)
        key = (tuple(id(v) for v in inputs), device)
        compiled = self._eval_cache.get(key)
        # Identity, not ==: a Variable's == builds an 'equal' node.  A stale entry (its ids
        # reused by new Variables) has other inputs and is replaced.
        if compiled is None or len(compiled.inputs) != len(inputs) or any(
                a is not b for a, b in zip(compiled.inputs, inputs)):
            compiled = function(inputs, self, device=device)
            self._eval_cache[key] = compiled
        return compiled(*givens.values())

    def __repr__(self) -> str:
        label = self.name if self.name is not None else "?"
        where = f" = {self.owner.op.name}(...)" if self.owner is not None else ""
        return f"Variable({label}: {self.dtype}{list(self.shape)}{where})"


def _default_name(prefix: str) -> str:
    return f"{prefix}{next(_names)}"


def _check_dtype(dtype: Any) -> str:
    if isinstance(dtype, str):
        name = dtype
    else:
        try:
            import numpy
            name = numpy.dtype(dtype).name
        except Exception:
            raise _errors.type_error(f"dtype {dtype!r} is not a dtype name") from None
    if name not in _promote.DTYPES:
        raise _errors.type_error(
            f"dtype '{name}' is not supported; expected one of {', '.join(_promote.DTYPES)}")
    return name


def _check_shape(shape: Iterable[int | None], ndim: int | None, what: str, name: str,
                 dtype: str) -> tuple:
    shape = tuple(shape)
    if ndim is not None and len(shape) != ndim:
        raise _errors.make(_C.ShapeError, "DLOP_SHAPE_ERROR",
                           f"{what} takes a shape of {ndim} dimension(s), got {shape}")
    for dim in shape:
        if dim is not None and (not isinstance(dim, int) or dim < 0):
            raise _errors.make(_C.ShapeError, "DLOP_SHAPE_ERROR",
                               f"{what}: dimension {dim!r} in {shape} is not a size >= 0 or None")
    # A shape no array can have (more than 2^63-1 elements or bytes; None counts as 1) is
    # refused here, where the Variable is made, by the C check every layer uses.
    _C.check_shape(f"{what} '{name}'", dtype, shape)
    return shape


def _input(name: str | None, prefix: str, dtype: Any, shape: Sequence[int | None],
           ndim: int | None, what: str) -> Variable:
    name = name or _default_name(prefix)
    dtype = _check_dtype(dtype)
    return Variable(name, dtype, _check_shape(shape, ndim, what, name, dtype))


def tensor(name: str | None = None, dtype: Any = "float32",
           shape: Sequence[int | None] = ()) -> Variable:
    """A graph input of any rank: ``shape`` has a size or None (unknown) per dimension."""
    return _input(name, "t", dtype, shape, None, "tensor")


def scalar(name: str | None = None, dtype: Any = "float32", shape: Sequence[int] = ()) -> Variable:
    """A 0-d graph input."""
    return _input(name, "s", dtype, shape, 0, "scalar")


def vector(name: str | None = None, dtype: Any = "float32",
           shape: Sequence[int | None] = (None,)) -> Variable:
    """A 1-d graph input (its length unknown unless ``shape`` says it)."""
    return _input(name, "v", dtype, shape, 1, "vector")


def matrix(name: str | None = None, dtype: Any = "float32",
           shape: Sequence[int | None] = (None, None)) -> Variable:
    """A 2-d graph input."""
    return _input(name, "m", dtype, shape, 2, "matrix")


def _build(graph: Any, outputs: list[Variable], inputs: list[Variable]) -> dict[int, int]:
    """Add everything outputs depend on to graph; returns id(Variable) -> graph var id.

    Inputs become graph inputs (even when they are op outputs: their producers are cut off);
    an input-less Variable that is not among inputs is an error naming it.
    """
    ids: dict[int, int] = {}
    for var in inputs:
        if id(var) in ids:
            raise _errors.invalid(f"function: input {var!r} is given twice")
        ids[id(var)] = graph.input(var.name or "input", var.dtype, var.shape)
    names = ", ".join(repr(v.name) for v in inputs) or "none"
    # Iterative post-order, so deep graphs do not hit the recursion limit.
    stack: list[tuple[Variable, bool]] = [(v, False) for v in reversed(outputs)]
    while stack:
        var, ready = stack.pop()
        if id(var) in ids:
            continue
        if var.owner is None:
            if var.value is not None:
                ids[id(var)] = graph.constant(var.name or "constant", var.value)
                continue
            raise _errors.invalid(
                f"function: the outputs depend on input {var.name!r}, which is not among the "
                f"function's inputs ({names}); add it to the inputs (or to eval's givens)")
        apply = var.owner
        if not ready:
            stack.append((var, True))
            stack.extend((v, False) for v in reversed(apply.inputs) if id(v) not in ids)
            continue
        out_ids = graph.apply(apply.op.name, [ids[id(v)] for v in apply.inputs], dict(apply.params))
        for out_var, out_id in zip(apply.outputs, out_ids):
            ids[id(out_var)] = out_id
    return ids


def function(inputs: Sequence[Variable], outputs: Variable | Sequence[Variable],
             device: str = "cpu", *, fuse: bool = True, cuda_graphs: bool = True) -> "_C.Function":
    """Compile the graph from inputs to outputs for one device.

    The result is called with one array per input (NumPy arrays are copied to the device;
    dlop.Array and DLPack / CUDA-array-interface producers on the device are used in place;
    arrays on another device are an error).  It returns one dlop.Array, or a list when
    ``outputs`` is a list.  Fails with NoDeviceError / UnsupportedError rather than running
    anything elsewhere.

    Elementwise nodes are fused: each group of them runs as one generated kernel, without
    intermediate buffers (``explain()`` shows the groups).  ``fuse=False`` runs every node with
    its op's own kernel, to compare.  Where the run-time compiler is missing the function runs
    unfused and ``explain()`` says why.

    On CUDA, a function whose nodes are all capture-safe records a CUDA graph on the second
    call with the same input shapes, strides and alignments, and replays it with one launch
    on every later such call; ``cuda_graphs=False`` runs it node by node always.
    ``explain()`` says which, and why not.
    """
    if not isinstance(fuse, bool):
        raise _errors.type_error(f"function: fuse must be True or False, not {fuse!r}")
    if not isinstance(cuda_graphs, bool):
        raise _errors.type_error(f"function: cuda_graphs must be True or False, not {cuda_graphs!r}")
    inputs = list(inputs)
    return_list = isinstance(outputs, (list, tuple))
    output_list = list(outputs) if return_list else [outputs]
    for var in inputs + output_list:
        if not isinstance(var, Variable):
            raise _errors.type_error(f"function: inputs and outputs must be dlop Variables, not {var!r}")
    _C.device_check(device)
    graph = _C.Graph()
    ids = _build(graph, output_list, inputs)
    names = tuple(v.name or f"input{i}" for i, v in enumerate(inputs))
    return graph.compile([ids[id(v)] for v in inputs], [ids[id(v)] for v in output_list], device,
                         return_list, tuple(inputs), tuple(output_list), names, cuda_graphs, fuse)
