"""Type promotion for dlop's Python operators and functions: the dtype two operands meet in
(NumPy's ``np.result_type`` for the dtypes NumPy has, extended to bfloat16) and NEP 50 "weak"
Python scalars, which take the array's dtype instead of upcasting it.  See docs/ops.md."""
from __future__ import annotations

from . import _errors

DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "float16", "bfloat16",
          "float32", "float64")
SIGNED = ("int8", "int16", "int32", "int64")
INTEGERS = SIGNED + ("uint8",)
FLOATS = ("float16", "bfloat16", "float32", "float64")

_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8}
_INT_RANGE = {"int8": (-2**7, 2**7 - 1), "int16": (-2**15, 2**15 - 1),
              "int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1), "uint8": (0, 255)}
# Significand bits (with the implicit one): the widest integer a float holds exactly.
_FLOAT_PRECISION = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}
_FLOAT_ORDER = ("float16", "float32", "float64")


def _int_with_int(a: str, b: str) -> str:
    if "uint8" in (a, b):
        other = b if a == "uint8" else a
        # A signed type that holds 0..255 as well as its own range.
        return "int16" if other == "int8" else other
    return a if _INT_BITS[a] >= _INT_BITS[b] else b


def _float_holding(integer: str) -> str:
    """The smallest float (NumPy's ladder float16 < float32 < float64) that holds every value
    of an integer dtype exactly, as np.result_type picks it."""
    bits = _INT_BITS[integer] - (0 if integer == "uint8" else 1)
    for name in _FLOAT_ORDER:
        if _FLOAT_PRECISION[name] > bits:
            return name
    return "float64"


def _float_with_float(a: str, b: str) -> str:
    if {a, b} == {"float16", "bfloat16"}:
        return "float32"  # neither holds the other: float16 has the mantissa, bfloat16 the range
    order = {"float16": 0, "bfloat16": 0, "float32": 1, "float64": 2}
    return a if order[a] >= order[b] else b


def _rule(a: str, b: str) -> str:
    if a == b:
        return a
    if a == "bool":
        return b
    if b == "bool":
        return a
    if a in INTEGERS and b in INTEGERS:
        return _int_with_int(a, b)
    if a in FLOATS and b in FLOATS:
        return _float_with_float(a, b)
    integer, floating = (a, b) if a in INTEGERS else (b, a)
    if floating == "bfloat16":
        # bfloat16 holds int8 and uint8 exactly (8 significand bits); wider integers need the
        # float NumPy would pick for them.
        return "bfloat16" if _INT_BITS[integer] == 8 else _float_holding(integer)
    return _float_with_float(_float_holding(integer), floating)


# The explicit table, computed once: RESULT[(a, b)] for every pair of dlop dtypes.
RESULT = {(a, b): _rule(a, b) for a in DTYPES for b in DTYPES}


def result_type(a: str, b: str) -> str:
    """The dtype two arrays of dtypes a and b meet in (np.result_type, plus bfloat16)."""
    return RESULT[(a, b)]


def is_weak(value) -> bool:
    """A Python scalar (bool, int, float) that adapts to its partner's dtype (NEP 50).  NumPy
    scalars (np.float32(2), and np.float64 although it subclasses float) are strong, as in
    NumPy 2."""
    kind = type(value)
    return kind is float or kind is int or kind is bool


def weak_kind(value) -> str:
    """The dtype a weak scalar has on its own (two scalars, or a scalar against nothing)."""
    kind = type(value)
    if kind is bool:
        return "bool"
    if kind is int:
        return "int64"
    if kind is float:
        return "float64"
    raise _errors.type_error(f"{value!r} ({kind.__name__}) is not a Python bool, int or float")


def with_weak(strong: str, scalar_type: type) -> str:
    """The dtype an array of dtype ``strong`` and a Python scalar of ``scalar_type`` meet in:
    the array's own kind keeps its dtype; a float with integers or bool gives float64; an int
    with bool gives int64."""
    if scalar_type is bool:
        return strong
    if scalar_type is int:
        return "int64" if strong == "bool" else strong
    if scalar_type is float:
        return strong if strong in FLOATS else "float64"
    raise _errors.type_error(f"a {scalar_type.__name__} is not a Python bool, int or float")


def common(kinds: list) -> str:
    """The dtype several operands meet in.  Each entry is a dtype name (an array: strong) or a
    Python type (bool, int, float: a weak scalar)."""
    strong = [k for k in kinds if isinstance(k, str)]
    if strong:
        result = strong[0]
        for dtype in strong[1:]:
            result = RESULT[(result, dtype)]
        for kind in kinds:
            if not isinstance(kind, str):
                result = with_weak(result, kind)
        return result
    # Only Python scalars: the widest Python kind, as NumPy treats them on their own.
    if float in kinds:
        return "float64"
    if int in kinds:
        return "int64"
    return "bool"


def int_range(dtype: str):
    """(low, high) of an integer dtype, None for the others (bool and floats)."""
    return _INT_RANGE.get(dtype)


def check_scalar(value, dtype: str) -> None:
    """Refuse a Python int that does not fit an integer dtype (x_int8 + 1000), as NumPy 2 does,
    rather than wrapping it around silently."""
    if type(value) is int and dtype in _INT_RANGE:
        low, high = _INT_RANGE[dtype]
        if not low <= value <= high:
            raise _errors.scalar_overflow(
                f"the Python int {value} is out of range for {dtype} ({low}..{high}); make the "
                f"array wider first (x.astype('int64')) or use a value in range")


def float_for(dtype: str) -> str:
    """The float dtype a float-only function (log, sqrt, mean, ...) computes an integer or
    bool array in: NumPy's choice, np.result_type(dtype, float16) (int8 -> float16,
    int16 -> float32, int32/int64 -> float64)."""
    return dtype if dtype in FLOATS else RESULT[(dtype, "float16")]
