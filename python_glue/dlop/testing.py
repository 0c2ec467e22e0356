"""dlop.testing: hold an op's values to a reference written in NumPy, from Python.

``dlop check`` (docs/compliance.md) certifies a plugin file; its ``values_match_reference``
check compares each dtype with the op's reference dtype or with a reference function the
plugin exports in C.  ``check_values`` is the same check with the reference in the caller's
hands::

    dlop.testing.check_values("add", reference=lambda a, b: a + b)
    dlop.testing.check_values("sum", reference=lambda x, axes=(), keepdims=False:
                              x.sum(axis=tuple(axes) or None, keepdims=keepdims),
                              params={"axes": (1,)}, shapes=[(2, 3, 5)])

For every device and dtype the op declares, it runs the op at once on small integers that
every dtype holds exactly (the suite's inputs), calls ``reference(*inputs, **params)`` on the
same values as NumPy arrays of that dtype (float32 for bfloat16, which NumPy lacks), and
compares after converting the reference's result to the op's output dtype, with the suite's
rule: floats within the tolerance of the narrowest float dtype involved, integers exactly
modulo 2**bits (integer results wrap), bool as nonzero.  A mismatch raises ``AssertionError``
naming op, device, dtype, shapes and the first mismatching elements.

A ``dlop.Op`` (an instance, or its registered op) declares every dtype: the dtypes checked are
those its make_node takes on the cases' shapes (bfloat16 not on the CPU, where perform gets
NumPy arrays), its inputs as many as make_node's.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from . import _C, _errors, _py_op
from ._graph import Variable
from ._ops import Op, _op

__all__ = ["check_values"]

_EXACT_RANGE = {"bool": (0, 1), "uint8": (0, 8), "bfloat16": (-4, 4)}  # else (-8, 8)
_TOLERANCE = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 1e-5, "float64": 1e-13}
_FLOAT_BITS = {"bfloat16": 8, "float16": 11, "float32": 24, "float64": 53}
_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8}


def _range(dtypes: Iterable[str]) -> tuple[int, int]:
    low, high = -8, 8
    for dtype in dtypes:
        lo, hi = _EXACT_RANGE.get(dtype, (-8, 8))
        low, high = max(low, lo), min(high, hi)
    return low, high


def _narrowest_float(dtypes: Iterable[str]):
    floats = [d for d in dtypes if d in _FLOAT_BITS]
    return min(floats, key=_FLOAT_BITS.get) if floats else None


def _shape_text(shape: tuple) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ")"


def _shapes_text(shapes: tuple) -> str:
    if all(s == shapes[0] for s in shapes):
        return f"shape {_shape_text(shapes[0])}"
    return "shapes " + " x ".join(_shape_text(s) for s in shapes)


def _cases(shapes, num_inputs: int) -> list[tuple]:
    """Each entry: a shape for every input, or a tuple of one shape per input (any number of
    them for a variadic op, num_inputs None; a plain shape gives such an op 2 inputs)."""
    if shapes is None:
        shapes = [(), (7,), (2, 3, 5)]
    cases = []
    for entry in shapes:
        entry = tuple(entry)
        if entry and all(isinstance(s, (tuple, list)) for s in entry):
            per_input = tuple(tuple(s) for s in entry)
            if num_inputs is not None and len(per_input) != num_inputs:
                raise _errors.invalid(
                    f"check_values: shapes entry {entry!r} gives {len(per_input)} input shapes, "
                    f"the op takes {num_inputs} inputs")
            cases.append(per_input)
        else:
            cases.append((entry,) * (2 if num_inputs is None else num_inputs))
    return cases


def _to_numpy(array, np):
    """A dlop result as a NumPy array on the host (bfloat16 as float32, exactly)."""
    if array.device != "cpu":
        array = array.to("cpu")
    if array.dtype == "bfloat16":
        array = _op("cast")(array, dtype="float32")
    return np.asarray(array)


def _as_dtype(values, dtype: str, device: str, np):
    """values (int64 NumPy) as a dlop array of dtype on device."""
    if dtype == "bfloat16":
        return _op("cast")(_C.asarray(values.astype(np.float32), device), dtype="bfloat16")
    return _C.asarray(values.astype(dtype), device)


def _round_to(expected, dtype: str, np):
    """float64 values as dtype holds them (bfloat16 rounded to nearest even by hand)."""
    if dtype == "bfloat16":
        bits = expected.astype(np.float32).view(np.uint32).astype(np.uint64)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        finite = np.isfinite(expected)
        out = rounded.astype(np.uint32).view(np.float32).astype(np.float64)
        return np.where(finite, out, expected)
    return expected.astype(dtype).astype(np.float64)


def _compare(expected, actual, dtype: str, tolerance_dtype, np):
    """Mismatching flat indices and the expected values as dtype holds them."""
    expected = np.asarray(expected, dtype=np.float64).reshape(-1)
    actual = actual.reshape(-1)
    if dtype in _FLOAT_BITS:
        with np.errstate(over="ignore"):  # beyond the dtype's range is its infinity
            held = _round_to(expected, dtype, np)
        got = actual.astype(np.float64)
        tol = _TOLERANCE[tolerance_dtype or dtype]
        with np.errstate(invalid="ignore"):
            close = np.abs(held - got) <= tol + tol * np.abs(held)
        ok = (np.isnan(held) & np.isnan(got)) | (held == got) | (np.isfinite(held) & close)
        return np.flatnonzero(~ok), held
    if dtype == "bool":
        held = (expected != 0).astype(np.float64)
        return np.flatnonzero(held != actual.astype(np.float64)), held
    integral = np.isfinite(expected) & (expected == np.floor(expected)) & (np.abs(expected) < 2.0**63)
    wrapped = np.where(integral, expected, 0).astype(np.int64).astype(dtype).astype(np.int64)
    ok = integral & (wrapped == actual.astype(np.int64))
    return np.flatnonzero(~ok), np.where(integral, wrapped, expected)


def check_values(op: str | Op, reference: Callable[..., Any], *, params: dict | None = None,
                 shapes: Iterable | None = None, devices: Iterable[str] | None = None,
                 dtypes: Iterable[str] | None = None, seed: int = 1) -> list[str]:
    """Compare ``op`` with ``reference(*inputs, **params)`` on every declared device and dtype.

    ``shapes``: the input shapes to run, each entry a shape every input gets or a tuple of one
    shape per input (default ``()``, ``(7,)`` and ``(2, 3, 5)``).  ``devices`` / ``dtypes``
    narrow the cases (default: what the op declares; CUDA only where a GPU is usable).
    Returns the cases compared (``"cpu int32"``, ...); raises ``AssertionError`` on a mismatch.
    """
    import numpy as np

    op = op if isinstance(op, Op) else _op(op)
    instance = _py_op.instance_of(op)
    params = dict(params or {})
    if instance is not None:
        cases = _cases(shapes, _py_op.num_inputs(instance))
        op = _registered_python_op(instance, cases)
    else:
        cases = _cases(shapes, op.num_inputs if op.num_inputs >= 0 else None)
    wanted_devices = list(devices) if devices is not None else [
        d for d in ("cpu", "cuda") if op.dtypes.get(d) and (d == "cpu" or _C.cuda_device_count() > 0)]
    compared = []
    for device in wanted_devices:
        kind = "cuda" if device.startswith("cuda") else "cpu"
        declared = op.dtypes.get(kind, [])
        if dtypes is not None:
            wanted = list(dtypes)
        elif instance is not None:
            wanted = _python_op_dtypes(instance, declared, kind, cases)
        else:
            wanted = declared
        for dtype in wanted:
            if dtype not in declared:
                raise _errors.invalid(
                    f"check_values: op {op.name} does not declare {dtype} on {kind} "
                    f"(it declares {', '.join(declared) or 'nothing'})")
            for number, input_shapes in enumerate(cases):
                _check_case(op, reference, params, device, dtype, input_shapes,
                            seed * 1000003 + number, np)
            compared.append(f"{device} {dtype}")
    if instance is not None and not compared:
        raise _errors.invalid(
            f"check_values: {type(instance).__name__}.make_node takes no dtype the devices "
            f"{', '.join(wanted_devices) or '(none)'} can check here: nothing was compared")
    return compared


def _candidates(dtype: str, num_inputs: int) -> list:
    """Every input of dtype, then each with one input bool (a where's condition)."""
    return [(dtype,) * num_inputs] + [tuple("bool" if i == k else dtype for i in range(num_inputs))
                                      for k in range(num_inputs)]


def _python_op_dtypes(instance, declared: list, kind: str, cases: list) -> list:
    """The declared dtypes a dlop.Op's make_node takes on one of the cases (as _input_dtypes
    would give it them), bfloat16 not on the CPU: NumPy, which perform gets, has none."""
    return [d for d in declared if not (kind == "cpu" and d == "bfloat16") and any(
        _py_op.accepts(instance, list(zip(candidate, shapes)))
        for shapes in cases for candidate in _candidates(d, len(shapes)))]


def _registered_python_op(instance, cases: list) -> Op:
    """A dlop.Op's registered op, registered on the first case and dtype its make_node takes."""
    for dtype in ("float64", "float32", "int64", "int32", "float16", "int16", "int8", "uint8",
                  "bool", "bfloat16"):
        for shapes in cases:
            for candidate in _candidates(dtype, len(shapes)):
                types = list(zip(candidate, shapes))
                if _py_op.accepts(instance, types):
                    return _py_op._registered_op(instance, tuple(
                        Variable(f"x{i}", d, s) for i, (d, s) in enumerate(types)))
    raise _errors.invalid(
        f"check_values: {type(instance).__name__}.make_node takes none of the cases' shapes "
        f"({', '.join(_shapes_text(c) for c in cases)}) in any dtype: nothing to compare (give "
        "shapes= it takes)")


def _input_dtypes(op: Op, dtype: str, num_inputs: int, run) -> tuple:
    """Every input of dtype; when the op refuses that, one input bool (a where's condition),
    the first that it takes: the suite's mixed-dtype rule."""
    candidates = _candidates(dtype, num_inputs)
    error = None
    for candidate in candidates:
        try:
            return candidate, run(candidate)
        except _C.DlopTypeError as e:
            error = error or e
    raise error


def _check_case(op: Op, reference, params: dict, device: str, dtype: str, shapes: tuple,
                seed: int, np) -> None:
    rng = np.random.default_rng(seed)
    values: list = []

    def run(input_dtypes):
        values.clear()
        for shape, input_dtype in zip(shapes, input_dtypes):
            low, high = _range((input_dtype,))
            values.append(rng.integers(low, high, size=shape, endpoint=True, dtype=np.int64))
        arrays = [_as_dtype(v, d, device, np) for v, d in zip(values, input_dtypes)]
        result = op(*arrays, **params)
        return result if isinstance(result, tuple) else (result,)

    input_dtypes, results = _input_dtypes(op, dtype, len(shapes), run)
    numpy_inputs = [v.astype(np.float32 if d == "bfloat16" else d)
                    for v, d in zip(values, input_dtypes)]
    expected = reference(*numpy_inputs, **params)
    expected = expected if isinstance(expected, tuple) else (expected,)
    where = f"op {op.name}, check values_match_reference (dlop.testing), {device} {dtype}, " \
            f"{_shapes_text(shapes)}"
    if len(expected) != len(results):
        raise AssertionError(f"{where}: the reference gave {len(expected)} outputs, the op "
                             f"{len(results)}")
    low, high = _range(input_dtypes)
    for index, (want, got) in enumerate(zip(expected, results)):
        actual = _to_numpy(got, np)
        want = np.asarray(want)
        if want.shape != actual.shape:
            want = np.broadcast_to(want, actual.shape) if want.size == 1 else want
        if want.shape != actual.shape:
            raise AssertionError(f"{where}: output {index} has shape {_shape_text(actual.shape)}, "
                                 f"the reference's {_shape_text(want.shape)}")
        tolerance = _narrowest_float(list(input_dtypes) + [got.dtype])
        bad, held = _compare(want, actual, got.dtype, tolerance, np)
        if bad.size == 0:
            continue
        flat = actual.reshape(-1)
        first = "; ".join(f"[{i}] expected {held[i]:.9g}, got {flat[i].item()!r}" for i in bad[:4])
        there = ""
        if all(v.size == actual.size for v in values):
            there = " (inputs at element %d: %s)" % (
                bad[0], ", ".join(str(v.reshape(-1)[bad[0]]) for v in values))
        rule = ("exactly, modulo 2**bits (integer results wrap)" if got.dtype in _INT_BITS
                else "as bool (nonzero is true)" if got.dtype == "bool"
                else f"rounded to {got.dtype}, within {tolerance}'s tolerance")
        raise AssertionError(
            f"{where}: {dtype} results disagree with the NumPy reference on inputs every "
            f"dtype holds exactly (small integers in [{low}, {high}]): {bad.size} of "
            f"{actual.size} elements of output {index} ({got.dtype}) differ (compared "
            f"{rule}): {first}{there}")
