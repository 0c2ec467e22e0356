"""Operators and functions (``x + y``, ``x.T``, ``dlop.dot``, ``dlop.sum(x, axis=1)``, ...) on
symbolic Variables and on arrays: dtype promotion with cast nodes and weak Python scalars.

Every operation is a *builder*: a function that applies ops to Variables.  On Variables it runs
once and its nodes join the user's graph.  On arrays it goes to the eager path (dlop._ops, which
dlop.ops' own eager calls share): it runs once per signature (operation, dtypes, ranks, device,
parameters) on placeholder Variables, the graph is compiled for the arrays' device, and every
later call with that signature is one compiled-function call.  This module imports dlop._ops;
dlop._ops imports nothing from here.
"""
from __future__ import annotations

import operator
from typing import Callable

from . import _C, _errors, _promote
from ._graph import Variable
from ._ops import _Weak, _constant, _eager, _exact_numpy_scalar, _op
# The eager path's caches and limits live in dlop._ops with it; these are the same objects.
from ._ops import _SCALAR_LIMIT, _eager_cache, _scalar_cache, _value_key  # noqa: F401

Array = _C.Array
_FLOAT_ONLY = frozenset(("log", "sqrt", "tanh", "sigmoid", "exp"))


ScalarVar = Callable[[_Weak, str], Variable]


def _kind(x):
    return x.dtype if isinstance(x, Variable) else x.type


def _to(x, dtype: str, scalar_var: ScalarVar) -> Variable:
    """x as a Variable of dtype: a cast node where a Variable's dtype differs."""
    if isinstance(x, Variable):
        return x if x.dtype == dtype else _op("cast")(x, dtype=dtype)
    return scalar_var(x, dtype)


def _strong(operands, what: str) -> None:
    """BLAS ops take arrays: a Python scalar is refused with its value (checked before the
    eager path, whose placeholders carry no values)."""
    for x in operands:
        if _promote.is_weak(x):
            raise _errors.type_error(
                f"{what} takes arrays, not the Python scalar {x!r}; multiply by a scalar "
                f"with '*'")


# ---- builders: (name, operands, params, scalar_var) -> Variable -------------------------

def _build_binary(name: str, operands: list, params: tuple, scalar_var: ScalarVar) -> Variable:
    a, b = operands
    target = _promote.common([_kind(a), _kind(b)])
    if name == "div" and target not in _promote.FLOATS:
        target = "float64"  # true division, as NumPy: both sides become float64 first
    elif name == "pow" and target not in _promote.FLOATS:
        raise _errors.type_error(
            f"'**' on {target} operands: the pow op is defined for float16, bfloat16, float32 "
            f"and float64 only (docs/ops.md); cast first, e.g. x.astype('float64') ** 2")
    if target == "bool" and name in _BOOL_LOGIC:
        # NumPy's bool arithmetic is logic (+ is or, * is and, maximum or, minimum and): the
        # op on 0/1 as uint8, nonzero back to bool. sub of bools is refused, as NumPy does.
        result = _op(name)(_to(a, "uint8", scalar_var), _to(b, "uint8", scalar_var))
        return _op("cast")(result, dtype="bool")
    if target == "bool" and name == "sub":
        raise _errors.type_error("'-' on bool operands: NumPy refuses it too; use ^ or != for "
                                 "exclusive or, or cast first")
    return _op(name)(_to(a, target, scalar_var), _to(b, target, scalar_var))


_BOOL_LOGIC = frozenset({"add", "mul", "maximum", "minimum"})


def _build_unary(name: str, operands: list, params: tuple, scalar_var: ScalarVar) -> Variable:
    (x,) = operands
    if x.dtype == "bool" and name == "abs":
        return _op("cast")(x, dtype="bool")  # abs of a bool is itself, as in NumPy
    if x.dtype == "bool" and name == "neg":
        raise _errors.type_error("unary '-' on a bool operand: NumPy refuses it too; use ~ or "
                                 "logical not, or cast first")
    if name in _FLOAT_ONLY and x.dtype not in _promote.FLOATS:
        # NumPy's choice for integer inputs: int8 -> float16, int16 -> float32, wider -> float64.
        x = _op("cast")(x, dtype=_promote.float_for(x.dtype))
    return _op(name)(x)


def _build_where(name: str, operands: list, params: tuple, scalar_var: ScalarVar) -> Variable:
    condition, x, y = operands
    if isinstance(condition, _Weak):
        condition = scalar_var(_Weak(bool(condition.value), condition.index), "bool")
    elif condition.dtype != "bool":
        condition = _op("cast")(condition, dtype="bool")  # nonzero is true, as in np.where
    target = _promote.common([_kind(x), _kind(y)])
    return _op("where")(condition, _to(x, target, scalar_var), _to(y, target, scalar_var))


def _build_cast(name: str, operands: list, params: tuple, scalar_var: ScalarVar) -> Variable:
    return _op("cast")(operands[0], dtype=params[0])


def _build_reduce(name: str, operands: list, params: tuple, scalar_var: ScalarVar) -> Variable:
    (x,) = operands
    axes, keepdims = params
    back_to_bool = False
    if name == "sum" and x.dtype == "bool":
        x = _op("cast")(x, dtype="int64")  # NumPy counts the true values
    elif name == "mean" and x.dtype not in _promote.FLOATS:
        x = _op("cast")(x, dtype="float64")  # NumPy's mean of integers is float64
    elif name in ("max", "min") and x.dtype == "bool":
        x, back_to_bool = _op("cast")(x, dtype="uint8"), True
    if axes == ():
        # NumPy reduces over no axis at all: the values, in the reduction's output dtype.
        dtype = "int64" if name == "sum" and x.dtype in _promote.INTEGERS else x.dtype
        result = _op("cast")(x, dtype=dtype)
    else:
        result = _op(name)(x, axes=list(axes or ()), keepdims=keepdims)
    return _op("cast")(result, dtype="bool") if back_to_bool else result


def _build_blas(name: str, operands: list, params: tuple, scalar_var: ScalarVar) -> Variable:
    target = _promote.common([x.dtype for x in operands])
    inputs = [_to(x, target, scalar_var) for x in operands]
    if name == "gemm":
        alpha, beta, trans_a, trans_b, allow_tf32 = params
        return _op("gemm")(*inputs, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b,
                           allow_tf32=allow_tf32)
    return _op(name)(*inputs, allow_tf32=params[0])


def _build_shape(name: str, operands: list, params: tuple, scalar_var: ScalarVar) -> Variable:
    key = {"transpose": "axes", "reshape": "shape", "dimshuffle": "pattern",
           "broadcast_to": "shape"}[name]
    return _op(name)(operands[0], **{key: list(params[0])})


# ---- dispatch: symbolic or eager ---------------------------------------------------------

def _symbolic_scalar(weak: _Weak, dtype: str) -> Variable:
    """A weak scalar in a user's graph: a 0-d constant of dtype (copied once at compile)."""
    _promote.check_scalar(weak.value, dtype)
    import numpy
    if dtype == "bfloat16":  # NumPy has no bfloat16: a constant and a cast node (one rounding)
        return _op("cast")(_constant(_exact_numpy_scalar(weak.value)), dtype="bfloat16")
    return _constant(numpy.asarray(weak.value, dtype=dtype))


def _apply(builder, name: str, operands: tuple, params: tuple = ()):
    """Run builder on Variables (any operand a Variable: a graph) or arrays (at once)."""
    for x in operands:
        if isinstance(x, Variable):
            break
    else:
        return _eager(builder, name, operands, params)
    inputs = []
    for index, x in enumerate(operands):
        if isinstance(x, Variable):
            inputs.append(x)
        elif _promote.is_weak(x):
            inputs.append(_Weak(x, index))
        else:
            inputs.append(_constant(x))  # arrays mixed with Variables are graph constants
    return builder(name, inputs, params, _symbolic_scalar)


# ---- operand checks for the operator methods --------------------------------------------

def _accepts(x) -> bool:
    """Operands an operator takes; anything else gives NotImplemented (so ``x == None`` is
    False and ``x + "a"`` is Python's TypeError)."""
    kind = type(x)
    if kind is Array or kind is Variable or kind is float or kind is int or kind is bool:
        return True
    if isinstance(x, (Variable, list, tuple)):
        return True
    module = getattr(kind, "__module__", "") or ""
    if module.startswith("numpy"):
        return True  # ndarray and NumPy scalars
    return hasattr(x, "__dlpack__") or hasattr(x, "__cuda_array_interface__")


# A comparison of an integer array with a Python int outside its dtype's range has one answer
# for every element (uint8 == -1 is False, uint8 < 300 is True), which NumPy 2 gives instead
# of raising. For x of range [low, high]: x op v with v > high is x op' high, with v < low it
# is x op' low, op' chosen so that it gives that constant answer for every x in range.
_ABOVE_RANGE = {"less": "less_equal", "less_equal": "less_equal", "not_equal": "less_equal",
                "greater": "greater", "greater_equal": "greater", "equal": "greater"}
_BELOW_RANGE = {"greater": "greater_equal", "greater_equal": "greater_equal",
                "not_equal": "greater_equal", "less": "less", "less_equal": "less",
                "equal": "less"}


def _fold_out_of_range(name: str, array, value):
    """(name, value) for array <name> value, with an out-of-range Python int folded as above."""
    if type(value) is not int or name not in _ABOVE_RANGE:
        return name, value
    limits = _promote.int_range(str(getattr(array, "dtype", "")))
    if limits is None:
        return name, value
    low, high = limits
    if value > high:
        return _ABOVE_RANGE[name], high
    if value < low:
        return _BELOW_RANGE[name], low
    return name, value


def _binary_method(name: str, reflected: bool = False):
    if name in _ABOVE_RANGE:  # comparisons: Python mirrors them itself, never reflected here
        def compare(self, other):
            if not _accepts(other):
                return NotImplemented
            op, other = _fold_out_of_range(name, self, other)
            return _apply(_build_binary, op, (self, other))
        compare.__name__ = f"__{name}__"
        return compare
    if reflected:
        def method(self, other):
            if not _accepts(other):
                return NotImplemented
            return _apply(_build_binary, name, (other, self))
    else:
        def method(self, other):
            if not _accepts(other):
                return NotImplemented
            return _apply(_build_binary, name, (self, other))
    method.__name__ = f"__{'r' if reflected else ''}{name}__"
    return method


# ---- the public functions ----------------------------------------------------------------

def _axes(axis, what: str):
    """NumPy's axis argument as the reduce ops' axes: None (every axis) or a tuple of ints."""
    if axis is None:
        return None
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    try:
        return tuple(operator.index(a) for a in items)
    except TypeError:
        raise _errors.type_error(f"{what}: axis must be None, an int or a tuple of ints, "
                                 f"got {axis!r}") from None


def _ints(values, what: str) -> tuple:
    if len(values) == 1 and isinstance(values[0], (tuple, list)):
        values = tuple(values[0])
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        raise _errors.type_error(f"{what} takes ints, got {values!r}") from None


def maximum(a, b):
    """Elementwise maximum (NaN propagates), with promotion and broadcasting."""
    return _apply(_build_binary, "maximum", (a, b))


def minimum(a, b):
    """Elementwise minimum (NaN propagates), with promotion and broadcasting."""
    return _apply(_build_binary, "minimum", (a, b))


def where(condition, x, y):
    """x where condition is true, else y (condition cast to bool; x and y promoted)."""
    return _apply(_build_where, "where", (condition, x, y))


def abs(x):  # noqa: A001 - dlop.abs, as numpy.abs
    """Elementwise absolute value."""
    return _apply(_build_unary, "abs", (x,))


def negative(x):
    """Elementwise -x."""
    return _apply(_build_unary, "neg", (x,))


def log(x):
    """Elementwise natural logarithm (integers computed in NumPy's float for them)."""
    return _apply(_build_unary, "log", (x,))


def sqrt(x):
    """Elementwise square root (integers computed in NumPy's float for them)."""
    return _apply(_build_unary, "sqrt", (x,))


def tanh(x):
    """Elementwise hyperbolic tangent."""
    return _apply(_build_unary, "tanh", (x,))


def sigmoid(x):
    """Elementwise 1 / (1 + exp(-x))."""
    return _apply(_build_unary, "sigmoid", (x,))


def exp(x):
    """Elementwise exponential."""
    return _apply(_build_unary, "exp", (x,))


def cast(x, dtype):
    """x converted to dtype (a dtype name or a NumPy dtype); floats to integers round toward
    zero and saturate (docs/ops.md)."""
    from ._graph import _check_dtype
    return _apply(_build_cast, "cast", (x,), (_check_dtype(dtype),))


astype = cast


def sum(x, axis=None, keepdims=False):  # noqa: A001 - dlop.sum, as numpy.sum
    """Sum over axis (None: every axis); integers and bool sum in int64."""
    return _apply(_build_reduce, "sum", (x,), (_axes(axis, "sum"), bool(keepdims)))


def mean(x, axis=None, keepdims=False):
    """Mean over axis (None: every axis); integers and bool averaged in float64."""
    return _apply(_build_reduce, "mean", (x,), (_axes(axis, "mean"), bool(keepdims)))


def max(x, axis=None, keepdims=False):  # noqa: A001 - dlop.max, as numpy.max
    """Maximum over axis (None: every axis); NaN propagates."""
    return _apply(_build_reduce, "max", (x,), (_axes(axis, "max"), bool(keepdims)))


def min(x, axis=None, keepdims=False):  # noqa: A001 - dlop.min, as numpy.min
    """Minimum over axis (None: every axis); NaN propagates."""
    return _apply(_build_reduce, "min", (x,), (_axes(axis, "min"), bool(keepdims)))


def dot(a, b, allow_tf32=False):
    """NumPy's dot for ranks 1 and 2 (BLAS; cuBLAS on CUDA).  allow_tf32: float32 products may
    use TF32 tensor cores on CUDA (off by default)."""
    _strong((a, b), "dlop.dot")
    return _apply(_build_blas, "dot", (a, b), (bool(allow_tf32),))


def matmul(a, b, allow_tf32=False):
    """NumPy's matmul: batched, batch dims broadcast (BLAS; cuBLAS on CUDA)."""
    _strong((a, b), "dlop.matmul")
    return _apply(_build_blas, "matmul", (a, b), (bool(allow_tf32),))


def gemm(a, b, c, alpha=1.0, beta=1.0, trans_a=False, trans_b=False, allow_tf32=False):
    """alpha * op(a) @ op(b) + beta * c, op(a) being a or a.T (trans_a), c broadcast."""
    _strong((a, b, c), "dlop.gemm")
    return _apply(_build_blas, "gemm", (a, b, c),
                  (float(alpha), float(beta), bool(trans_a), bool(trans_b), bool(allow_tf32)))


def transpose(x, axes=None):
    """x with its axes permuted (reversed when axes is None): a view, no copy."""
    if axes is None:
        return _apply(_build_shape, "transpose", (x,), ((),))
    axes = _ints((axes,), "transpose")
    if hasattr(x, "shape"):
        ndim = len(x.shape)
    else:
        import numpy
        ndim = numpy.ndim(x)
    if len(axes) != ndim:  # the op reads empty axes as "reverse": only a 0-d input may pass ()
        raise _errors.invalid(
            f"transpose: axes {axes} do not match the input's {ndim} dimension(s); expected a "
            f"permutation of range({ndim})")
    return _apply(_build_shape, "transpose", (x,), (axes,))


def reshape(x, shape):
    """x with a new shape (one size may be -1): a view when the strides allow it."""
    shape = (shape,) if isinstance(shape, int) else shape
    return _apply(_build_shape, "reshape", (x,), (_ints((shape,), "reshape"),))


def dimshuffle(x, *pattern):
    """Theano's dimshuffle: input axes in their new order, 'x' (or -1) for a new axis of size 1;
    dropped axes must have size 1.  A view."""
    if len(pattern) == 1 and isinstance(pattern[0], (tuple, list)):
        pattern = tuple(pattern[0])
    pattern = tuple(-1 if p == "x" else p for p in pattern)
    return _apply(_build_shape, "dimshuffle", (x,), (_ints(pattern, "dimshuffle"),))


def broadcast_to(x, shape):
    """NumPy's broadcast_to: a view with stride 0 along broadcast axes."""
    shape = (shape,) if isinstance(shape, int) else shape
    return _apply(_build_shape, "broadcast_to", (x,), (_ints((shape,), "broadcast_to"),))


# ---- the methods installed on Variable and Array -----------------------------------------

def _method_transpose(self, *axes):
    # x.transpose(1, 0, 2) and x.transpose((1, 0, 2)), as NumPy
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = tuple(axes[0])
    return transpose(self, axes if axes else None)


def _method_reshape(self, *shape):
    return reshape(self, shape[0] if len(shape) == 1 else shape)


def _variable_bool(self):
    raise _errors.type_error(
        f"{self!r} is symbolic: it has no truth value while the graph is built (comparisons "
        f"build bool nodes; compare identities with 'is', or evaluate first)")


def _array_bool(self):
    if self.size != 1:
        raise _errors.invalid(
            f"the truth value of a dlop.Array of {self.size} elements is ambiguous; reduce it "
            f"first (dlop.max / dlop.min) or use .numpy().any() / .all()")
    if self.device != "cpu":
        raise _errors.device_mismatch(
            f"the truth value of a dlop.Array on {self.device} needs its value on the host; "
            f"dlop never copies from the GPU behind your back: use bool(a.numpy())")
    return bool(self.numpy().reshape(-1)[0])


def _neg(self):
    return _apply(_build_unary, "neg", (self,))


def _abs(self):
    return _apply(_build_unary, "abs", (self,))


def _pow(self, other, modulo=None):
    if modulo is not None or not _accepts(other):
        return NotImplemented
    return _apply(_build_binary, "pow", (self, other))


def _rpow(self, other):
    if not _accepts(other):
        return NotImplemented
    return _apply(_build_binary, "pow", (other, self))


def _matmul(self, other):
    if not _accepts(other):
        return NotImplemented
    return matmul(self, other)


def _rmatmul(self, other):
    if not _accepts(other):
        return NotImplemented
    return matmul(other, self)


def install() -> None:
    """Give Variable and dlop.Array their operators and methods.  Array is a C heap type whose
    class dict is writable: assigning ``Array.__add__`` fills its number slot with CPython's
    wrapper around this function, so promotion lives in one place (here) for both."""
    methods = {
        "__add__": _binary_method("add"), "__radd__": _binary_method("add", True),
        "__sub__": _binary_method("sub"), "__rsub__": _binary_method("sub", True),
        "__mul__": _binary_method("mul"), "__rmul__": _binary_method("mul", True),
        "__truediv__": _binary_method("div"), "__rtruediv__": _binary_method("div", True),
        "__pow__": _pow, "__rpow__": _rpow,
        "__matmul__": _matmul, "__rmatmul__": _rmatmul,
        "__neg__": _neg, "__abs__": _abs,
        "__lt__": _binary_method("less"), "__le__": _binary_method("less_equal"),
        "__gt__": _binary_method("greater"), "__ge__": _binary_method("greater_equal"),
        "__eq__": _binary_method("equal"), "__ne__": _binary_method("not_equal"),
        "T": property(lambda self: transpose(self), doc="The axes reversed: a view."),
        "transpose": _method_transpose,
        "reshape": _method_reshape,
        "dimshuffle": dimshuffle,
        "sum": sum, "mean": mean, "max": max, "min": min,
        "astype": cast,
        # NumPy on the left of an operator defers to us (ndarray.__add__ returns NotImplemented).
        "__array_ufunc__": None,
        "__array_priority__": 1000,
    }
    for cls in (Variable, Array):
        for key, value in methods.items():
            setattr(cls, key, value)
        # Identity hashing stays: Variables are dict keys (givens) and compared with 'is'.
        cls.__hash__ = object.__hash__
    Variable.__bool__ = _variable_bool
    Array.__bool__ = _array_bool
