"""dlop.dask: dlop graphs on Dask arrays, planned once on the client, run by dlop on each chunk.

``dlop.dask.apply(f, *arrays)`` (or ``dlop.dask.function(inputs, outputs)(*arrays)``) returns
lazy Dask arrays.  The graph is cut into pieces Dask knows how to distribute:

- a group of elementwise nodes becomes one ``blockwise`` task per chunk running the group as
  one (fused) dlop function;
- ``sum``, ``mean``, ``max`` and ``min`` become Dask reductions whose chunk, combine and
  aggregate steps are dlop reductions;
- ``dot`` and ``matmul`` become blocked contractions: a dlop product per pair of blocks, summed
  over the contracted blocks by a dlop reduction (one product per block when the contracted
  dimension is a single chunk);
- ``transpose`` and ``dimshuffle`` permute the block index and run per chunk.

Each piece travels as its dlop-graph text (dlop.dumps); a worker rebuilds and compiles it once
per process and device, keyed by the text's SHA-256, and refuses clearly (a dlop error naming
the op and plugin) what its plugins cannot run.  Chunks are NumPy arrays (run on the CPU) or
CuPy arrays (run on their GPU); every input of one call has the same kind, and nothing is moved
between devices.  docs/dask.md has the details.
"""
from __future__ import annotations

import hashlib
import math
import string
import threading
from typing import Any, Sequence

import numpy

try:
    import dask.array as da
except ImportError as error:  # pragma: no cover - said clearly, not as a bare ImportError
    raise ImportError(f"dlop.dask needs Dask ('pip install dask distributed'): {error}") from None

from . import _C, _errors
from ._graph import Variable, function as _compile
from ._ops import _op
from ._serialize import dumps, loads

__all__ = ["apply", "function", "cache_info"]

_REDUCTIONS = ("sum", "mean", "max", "min")
_CONTRACTIONS = ("dot", "matmul")
_PERMUTATIONS = ("transpose", "dimshuffle")


def _unsupported(message: str) -> Exception:
    return _errors.make(_C.UnsupportedError, "DLOP_UNSUPPORTED", f"dlop.dask: {message}")


# ---- on the workers: kernels rebuilt from text, compiled once per process ---------------------

_compiled: dict = {}
_lock = threading.Lock()
_stats = {"compiles": 0, "hits": 0}


def cache_info() -> dict:
    """This process's kernel cache: ``functions`` (compiled functions kept, one per text and
    device), ``compiles`` and ``hits`` (calls that found theirs compiled)."""
    with _lock:
        return {"functions": len(_compiled), **_stats}


def _chunk_kind(block) -> str:
    module = type(block).__module__.split(".")[0]
    if module == "numpy":
        return "cpu"
    if module == "cupy":
        return f"cuda:{block.device.id}"
    raise _errors.type_error(f"dlop.dask: a chunk of type {type(block).__name__}; expected "
                             "NumPy arrays (CPU) or CuPy arrays (GPU)")


def _device_of(blocks, label: str) -> str:
    devices = {_chunk_kind(b) for b in blocks}
    if len(devices) > 1:
        raise _errors.device_mismatch(
            f"dlop.dask: {label} got chunks on {', '.join(sorted(devices))}; every chunk of one "
            "task must be on one device (dlop never moves data between devices)")
    return devices.pop() if devices else "cpu"


def _result(array, device: str):
    if device == "cpu":
        return numpy.asarray(array)
    import cupy
    return cupy.from_dlpack(array)


class _Kernel:
    """A piece of the plan: its dlop-graph text, run on chunks.  Pickles as the text; compiled
    on first use in each process for the device of the chunks it is given."""

    __slots__ = ("text", "key", "label")

    def __init__(self, text: str, label: str):
        self.text = text
        self.key = hashlib.sha256(text.encode("utf-8")).hexdigest()
        self.label = label

    def __reduce__(self):
        return (_Kernel, (self.text, self.label))

    def __dask_tokenize__(self):
        return ("dlop-kernel", self.key)

    def __repr__(self) -> str:
        return f"<dlop.dask kernel {self.label} {self.key[:12]}>"

    def _function(self, device: str):
        key = (self.key, device)
        with _lock:
            compiled = _compiled.get(key)
            if compiled is not None:
                _stats["hits"] += 1
                return compiled
        inputs, output = loads(self.text)
        compiled = _compile(inputs, output, device=device)
        with _lock:
            _stats["compiles"] += 1
            return _compiled.setdefault(key, compiled)

    def __call__(self, *blocks, **ignored):
        # Dask's reductions pass axis= and keepdims=; this kernel was planned for them.
        device = _device_of(blocks, self.label)
        if device == "cpu":
            # A chunk received from another worker may sit in its message's bytes at an address
            # that is no multiple of its element size, which dlop refuses: such a chunk is
            # copied (on the host, where it already is) to aligned memory first.
            blocks = [b if b.flags.aligned else b.copy() for b in blocks]
        return _result(self._function(device)(*blocks), device)


# ---- on the client: the plan ------------------------------------------------------------------

def _letters(count: int, skip: str = "") -> str:
    pool = [c for c in string.ascii_lowercase + string.ascii_uppercase if c not in skip]
    if count > len(pool):
        raise _unsupported(f"{count} dimensions are more than this plan can index")
    return "".join(pool[:count])


def _placeholder(name: str, dtype: str, shape) -> Variable:
    """A chunk's Variable: size-1 dims stay 1 (they broadcast), every other size is unknown."""
    return Variable(name, dtype, tuple(1 if d == 1 else None for d in shape))


def _kernel(label: str, inputs: list, output) -> _Kernel:
    return _Kernel(dumps(output, inputs), label)


class _Planner:
    """Walks a dlop graph once, mapping each Variable to a Dask array."""

    def __init__(self, inputs: list, outputs: list, arrays: list):
        self.outputs = outputs
        self.values: dict[int, Any] = {}
        self.kind = None  # "numpy" or "cupy", from the inputs' meta
        for var, array in zip(inputs, arrays):
            self.values[id(var)] = array
        self._meta_module()
        self.consumers: dict[int, int] = {}
        self.order: list = []
        self._topological()

    def _meta_module(self) -> None:
        kinds = {}
        for array in self.values.values():
            kinds[type(array._meta).__module__.split(".")[0]] = type(array._meta).__name__
        unknown = [m for m in kinds if m not in ("numpy", "cupy")]
        if unknown:
            raise _errors.type_error(
                f"dlop.dask: chunks of type {kinds[unknown[0]]} ({unknown[0]}); expected NumPy "
                "(CPU) or CuPy (GPU) chunks")
        if len(kinds) > 1:
            raise _errors.device_mismatch(
                "dlop.dask: the inputs mix NumPy (CPU) and CuPy (GPU) chunks; put every input on "
                "one device (dlop never moves data between devices)")
        self.kind = next(iter(kinds), "numpy")

    def meta(self, dtype: str, ndim: int):
        if self.kind == "cupy":
            import cupy as module
        else:
            module = numpy
        return module.empty((0,) * ndim, dtype=dtype)

    def constant(self, var):
        """A graph constant used outside an elementwise group, as a one-chunk Dask array on the
        inputs' device (as a compiled function places its constants on its device)."""
        host = var.value.numpy()
        if self.kind == "cupy":
            import cupy
            host = cupy.asarray(host)
        return da.from_array(host, chunks=host.shape, asarray=False)

    def _topological(self) -> None:
        """self.order: the nodes the outputs need, producers first; self.consumers: how many
        node inputs read each Variable (outputs count as two: they are always materialized)."""
        done = set(self.values)  # the inputs: their producers, if any, are cut off
        placed = set()
        stack = [(v, False) for v in reversed(self.outputs)]
        while stack:
            var, ready = stack.pop()
            if id(var) in done:
                continue
            apply = var.owner
            if apply is None:
                if var.value is None:
                    raise _errors.invalid(
                        f"dlop.dask: the outputs depend on input {var.name!r}, which is not among "
                        "the inputs")
                done.add(id(var))  # a constant
                continue
            if not ready:
                stack.append((var, True))
                stack.extend((v, False) for v in reversed(apply.inputs) if id(v) not in done)
                continue
            if id(apply) not in placed:
                placed.add(id(apply))
                self.order.append(apply)
                for v in apply.inputs:
                    self.consumers[id(v)] = self.consumers.get(id(v), 0) + 1
            done.update(id(o) for o in apply.outputs)
        for v in self.outputs:
            self.consumers[id(v)] = self.consumers.get(id(v), 0) + 2

    def value(self, var):
        found = self.values.get(id(var))
        if found is None:
            if var.owner is None and var.value is not None:
                found = self.values[id(var)] = self.constant(var)
            else:  # pragma: no cover - the order guarantees producers come first
                raise _errors.invalid(f"dlop.dask: {var!r} was used before it was planned")
        return found

    def run(self) -> list:
        for apply in self.order:
            op = apply.op
            out = apply.outputs[0]
            if op.elementwise:
                if len(apply.outputs) != 1:
                    raise _unsupported(f"elementwise op '{op.name}' has {len(apply.outputs)} "
                                       "outputs; only single-output ones are planned")
                # Only a group's last node is planned; the others are folded into it.
                if self._folded(out):
                    continue
                self.values[id(out)] = self.elementwise(out)
            elif op.name in _REDUCTIONS:
                self.values[id(out)] = self.reduction(apply)
            elif op.name in _CONTRACTIONS:
                self.values[id(out)] = self.contraction(apply)
            elif op.name in _PERMUTATIONS:
                self.values[id(out)] = self.permutation(apply)
            else:
                raise _unsupported(
                    f"op '{op.name}' (plugin '{op.plugin}') has no chunked plan; dlop.dask plans "
                    "elementwise ops, sum, mean, max, min, dot, matmul, transpose and dimshuffle")
        return [self.value(v) for v in self.outputs]

    # -- elementwise groups --

    def _folded(self, var) -> bool:
        """var's node belongs to its only consumer's group: it is used once, by an elementwise
        node, and is not an output."""
        if self.consumers.get(id(var), 0) != 1:
            return False
        return any(a.op.elementwise and any(v is var for v in a.inputs) for a in self.order)

    def _group_leaves(self, root) -> tuple[list, list]:
        """The group ending at root: its nodes (in order) and its leaves (Variables it reads
        from outside: inputs, other groups' and nodes' results; constants stay inside)."""
        members, leaves, seen = [], [], set()
        stack = [root]
        while stack:
            var = stack.pop()
            if id(var) in seen:
                continue
            seen.add(id(var))
            inside = var is root or (var.owner is not None and var.owner.op.elementwise
                                     and id(var) not in self.values and self._folded(var))
            if inside:
                members.append(var)
                stack.extend(reversed(var.owner.inputs))
            elif var.owner is None and var.value is not None and id(var) not in self.values:
                continue  # a constant: embedded in the group's text
            else:
                leaves.append(var)
        return members, leaves

    def elementwise(self, root):
        members, leaves = self._group_leaves(root)
        arrays = [self.value(v) for v in leaves]
        holders = {id(v): _placeholder(f"in{i}", v.dtype, a.shape)
                   for i, (v, a) in enumerate(zip(leaves, arrays))}
        # Rebuild the group on the placeholders, producers before consumers.
        made: dict[int, Variable] = dict(holders)
        order = [a for a in self.order if any(a.outputs[0] is m for m in members)]
        for apply in order:
            args = [made.get(id(v), v) for v in apply.inputs]  # constants are used as they are
            made[id(apply.outputs[0])] = apply.op._apply(tuple(args), dict(apply.params))
        output = made[id(root)]
        kernel = _kernel("+".join(a.op.name for a in order), [holders[id(v)] for v in leaves],
                         output)
        out_index = _letters(root.ndim)
        args = []
        for v, array in zip(leaves, arrays):
            args += [array, out_index[root.ndim - array.ndim:]]  # NumPy's right alignment
        return da.blockwise(kernel, out_index, *args, dtype=root.dtype,
                            meta=self.meta(root.dtype, root.ndim), token=f"dlop-{kernel.label}")

    # -- reductions --

    def reduction(self, apply):
        x_var, out = apply.inputs[0], apply.outputs[0]
        x = self.value(x_var)
        axes = tuple(apply.params.get("axes", ()))
        keepdims = bool(apply.params.get("keepdims", False))
        axes = tuple(sorted({a % x.ndim for a in axes})) if axes else tuple(range(x.ndim))
        name = apply.op.name
        if name == "mean":
            return self._mean(x, x_var.dtype, axes, keepdims, out.dtype)
        step = dict(axes=list(axes), keepdims=True)
        part = _placeholder("x", x_var.dtype, x.shape)
        chunk = _kernel(f"{name}-chunk", [part], _op(name)(part, **step))
        partial = _placeholder("p", out.dtype, x.shape)
        combine = _kernel(f"{name}-combine", [partial], _op(name)(partial, **step))
        aggregate = _kernel(f"{name}-aggregate", [partial],
                            _op(name)(partial, axes=list(axes), keepdims=keepdims))
        return da.reduction(x, chunk, aggregate, combine=combine, axis=axes, keepdims=keepdims,
                            dtype=out.dtype, meta=self.meta(out.dtype, out.ndim),
                            name=f"dlop-{name}")

    def _mean(self, x, dtype: str, axes: tuple, keepdims: bool, out_dtype: str):
        """mean = sum / count: the sums in float32 for 16-bit floats (as the mean op
        accumulates), divided by the count of reduced elements once, at the end."""
        count = math.prod(x.shape[a] for a in axes)
        if math.isnan(count):
            raise _unsupported("mean over dimensions of unknown size (compute the chunk sizes "
                               "first: x.compute_chunk_sizes())")
        wide = "float32" if dtype in ("float16", "bfloat16") else dtype
        step = dict(axes=list(axes), keepdims=True)
        part = _placeholder("x", dtype, x.shape)
        summed = _op("sum")(_op("cast")(part, dtype=wide) if wide != dtype else part, **step)
        chunk = _kernel("mean-chunk", [part], summed)
        partial = _placeholder("p", wide, x.shape)
        combine = _kernel("mean-combine", [partial], _op("sum")(partial, **step))
        total = _op("sum")(partial, axes=list(axes), keepdims=keepdims)
        divisor = numpy.asarray(count, dtype=wide)
        mean = _op("div")(total, divisor)
        if wide != out_dtype:
            mean = _op("cast")(mean, dtype=out_dtype)
        aggregate = _kernel("mean-aggregate", [partial], mean)
        ndim = x.ndim if keepdims else x.ndim - len(axes)
        return da.reduction(x, chunk, aggregate, combine=combine, axis=axes, keepdims=keepdims,
                            dtype=out_dtype, meta=self.meta(out_dtype, ndim), name="dlop-mean")

    # -- contractions --

    def contraction(self, apply):
        name = apply.op.name
        a_var, b_var = apply.inputs
        out = apply.outputs[0]
        a, b = self.value(a_var), self.value(b_var)
        if name == "dot" and (a.ndim not in (1, 2) or b.ndim not in (1, 2)):
            raise _unsupported(f"dot of ranks {a.ndim} and {b.ndim}; dot takes ranks 1 and 2")
        if a.ndim < 1 or b.ndim < 1:
            raise _unsupported(f"{name} of a 0-d operand")
        # Index letters: k contracted, i a's rows, j b's columns, batch dims right-aligned.
        batch = max(a.ndim, b.ndim) - 2 if name == "matmul" else 0
        batch_letters = _letters(max(batch, 0), skip="ijk")
        a_index = batch_letters[batch - max(a.ndim - 2, 0):] + ("i" if a.ndim >= 2 else "") + "k"
        b_index = batch_letters[batch - max(b.ndim - 2, 0):] + "k" + ("j" if b.ndim >= 2 else "")
        out_index = batch_letters + ("i" if a.ndim >= 2 else "") + ("j" if b.ndim >= 2 else "")
        pa = _placeholder("a", a_var.dtype, a.shape)
        pb = _placeholder("b", b_var.dtype, b.shape)
        product = apply.op._apply((pa, pb), dict(apply.params))
        meta = self.meta(out.dtype, out.ndim)
        if a.numblocks[-1] == 1 and b.numblocks[-2 if b.ndim >= 2 else 0] == 1:
            kernel = _kernel(f"{name}-block", [pa, pb], product)
            return da.blockwise(kernel, out_index, a, a_index, b, b_index, dtype=out.dtype,
                                concatenate=True, meta=meta, token=f"dlop-{name}")
        # One product per pair of blocks along k, a trailing axis of size 1 each, then their
        # sum over that axis.
        pattern = list(range(out.ndim)) + [-1]
        kernel = _kernel(f"{name}-partial", [pa, pb],
                         _op("dimshuffle")(product, pattern=pattern))
        partials = da.blockwise(kernel, out_index + "k", a, a_index, b, b_index,
                                adjust_chunks={"k": 1}, dtype=out.dtype,
                                meta=self.meta(out.dtype, out.ndim + 1), token=f"dlop-{name}")
        step = dict(axes=[out.ndim], keepdims=True)
        part = _placeholder("p", out.dtype, partials.shape)
        chunk = _kernel(f"{name}-sum", [part], _op("sum")(part, **step))
        aggregate = _kernel(f"{name}-sum-aggregate", [part],
                            _op("sum")(part, axes=[out.ndim], keepdims=False))
        return da.reduction(partials, chunk, aggregate, combine=chunk, axis=(out.ndim,),
                            keepdims=False, dtype=out.dtype, meta=meta, name=f"dlop-{name}-sum")

    # -- permutations --

    def permutation(self, apply):
        name = apply.op.name
        x_var, out = apply.inputs[0], apply.outputs[0]
        x = self.value(x_var)
        in_index = _letters(x.ndim)
        part = _placeholder("x", x_var.dtype, x.shape)
        kernel = _kernel(name, [part], apply.op._apply((part,), dict(apply.params)))
        new_axes = {}
        if name == "transpose":
            axes = [a % x.ndim for a in apply.params.get("axes", ())] or list(range(x.ndim))[::-1]
            out_index = "".join(in_index[a] for a in axes)
        else:
            extra = iter(_letters(out.ndim, skip=in_index))
            out_index = ""
            for axis in apply.params.get("pattern", ()):
                if axis == -1:
                    letter = next(extra)
                    new_axes[letter] = 1
                    out_index += letter
                else:
                    out_index += in_index[axis % x.ndim]
        return da.blockwise(kernel, out_index, x, in_index, new_axes=new_axes or None,
                            concatenate=True, dtype=out.dtype,
                            meta=self.meta(out.dtype, out.ndim), token=f"dlop-{name}")


def _check_arrays(inputs: Sequence[Variable], arrays: Sequence) -> None:
    if len(arrays) != len(inputs):
        raise _errors.type_error(f"dlop.dask: the function takes {len(inputs)} inputs "
                                 f"({', '.join(repr(v.name) for v in inputs)}); "
                                 f"{len(arrays)} were given")
    for i, (var, array) in enumerate(zip(inputs, arrays)):
        label = f"argument {i + 1} ('{var.name}')"
        if not isinstance(array, da.Array):
            raise _errors.type_error(
                f"dlop.dask: {label} is a {type(array).__name__}, not a Dask array (wrap it with "
                "dask.array.from_array)")
        if var.dtype == "bfloat16":
            raise _errors.type_error(f"dlop.dask: {label} is declared bfloat16, which Dask arrays "
                                     "cannot hold (NumPy has no bfloat16); cast inside the graph")
        if array.dtype != numpy.dtype(var.dtype):
            raise _errors.type_error(f"dlop.dask: {label} has dtype {array.dtype}; the function "
                                     f"declares {var.dtype}")
        if array.ndim != var.ndim or any(
                want is not None and want != have for want, have in zip(var.shape, array.shape)):
            raise _errors.make(_C.ShapeError, "DLOP_SHAPE_ERROR",
                               f"dlop.dask: {label} has shape {array.shape}; the function declares "
                               f"{var.shape} (None: any size)")


class Function:
    """A dlop graph to run on Dask arrays: call it with one Dask array per input."""

    def __init__(self, inputs: Sequence[Variable], outputs):
        self.inputs = list(inputs)
        self.outputs = outputs
        for var in self.inputs + self._output_list():
            if not isinstance(var, Variable):
                raise _errors.type_error(
                    f"dlop.dask.function: inputs and outputs must be dlop Variables, not {var!r}")

    def _output_list(self) -> list:
        return list(self.outputs) if isinstance(self.outputs, (list, tuple)) else [self.outputs]

    def __call__(self, *arrays):
        _check_arrays(self.inputs, arrays)
        results = _Planner(self.inputs, self._output_list(), list(arrays)).run()
        return results if isinstance(self.outputs, (list, tuple)) else results[0]

    def __repr__(self) -> str:
        return f"<dlop.dask.Function of {len(self.inputs)} inputs>"


def function(inputs: Sequence[Variable], outputs) -> Function:
    """The graph from inputs to outputs, to call on Dask arrays (chunks NumPy or CuPy)."""
    return Function(inputs, outputs)


def apply(fn, *arrays):
    """A compiled dlop.Function applied to Dask arrays: lazy Dask arrays (a list when the
    function returns a list).  The chunks must be on the function's kind of device: NumPy for
    a CPU function, CuPy for a CUDA one."""
    if not isinstance(fn, _C.Function):
        raise _errors.type_error(f"dlop.dask.apply: expected a dlop.Function, not {fn!r} "
                                 "(dlop.dask.function(inputs, outputs) takes a graph)")
    if fn.outputs is None:
        raise _unsupported("this dlop.Function does not know its graph (it was not made by "
                           "dlop.function)")
    _check_arrays(fn.inputs, arrays)
    wanted = "cupy" if fn.device.startswith("cuda") else "numpy"
    for i, array in enumerate(arrays):
        have = type(array._meta).__module__.split(".")[0]
        if have != wanted:
            raise _errors.device_mismatch(
                f"dlop.dask.apply: argument {i + 1} has {have} chunks; this function runs on "
                f"{fn.device}, which takes {'CuPy' if wanted == 'cupy' else 'NumPy'} chunks "
                "(dlop never moves data between devices)")
    return Function(fn.inputs, fn.outputs)(*arrays)
