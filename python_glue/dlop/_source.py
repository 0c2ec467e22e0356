"""Ops defined from source at run time: ``dlop.elementwise``, an elementwise op from one scalar
body of C that the host's C compiler and NVRTC both compile (docs/source-ops.md).  The op is
registered in the same registry as plugin ops (an in-process plugin), so it is in ``dlop.ops``,
runs eagerly on arrays, builds graph nodes on Variables, and fuses with its neighbours in
compiled functions."""
from __future__ import annotations

from typing import Any, Iterable

from . import _C, _errors
from ._ops import Op, ops, registry_lock

_FLOATS = ("float16", "bfloat16", "float32", "float64")

# Every op this process defined, by name: what dlop.check and dlop.export_plugin need to define
# it again elsewhere (in dlop-check's process, in a plugin's sources).
definitions: dict = {}


def _names(value: Any, what: str) -> tuple:
    """'x', 'x, y', 'x y' or a sequence of str, as a tuple of names."""
    if isinstance(value, str):
        names = tuple(value.replace(",", " ").split())
    elif isinstance(value, Iterable):
        names = tuple(value)
        for name in names:
            if not isinstance(name, str):
                raise _errors.type_error(f"elementwise: {what} must be str names, got {name!r}")
    else:
        raise _errors.type_error(
            f"elementwise: {what} must be a str ('x, y') or a sequence of str, got {value!r}")
    if not names:
        raise _errors.invalid(f"elementwise: {what} is empty: name at least one")
    return names


def _dtype_name(dtype: Any) -> str:
    if isinstance(dtype, str):
        return dtype
    name = getattr(dtype, "name", None) or getattr(dtype, "__name__", None)  # numpy dtypes, types
    if isinstance(name, str):
        return name
    raise _errors.type_error(f"elementwise: dtypes must be names ('float32'), got {dtype!r}")


def _param(name: Any, default: Any) -> tuple:
    if not isinstance(name, str):
        raise _errors.type_error(f"elementwise: parameter names must be str, got {name!r}")
    if isinstance(default, bool) or not isinstance(default, (int, float)):
        raise _errors.type_error(
            f"elementwise: parameter '{name}' has default {default!r}: expected a float or an "
            "int (its kind: a double or an int64_t in the body)")
    if isinstance(default, int) and not -2 ** 63 <= default < 2 ** 63:
        raise _errors.invalid(f"elementwise: parameter '{name}' default {default} does not fit int64")
    return (name, "float" if isinstance(default, float) else "int", default)


def elementwise(name: str, body: str, inputs: Any = "x", outputs: Any = "y",
                dtypes: Any = _FLOATS, params: dict | None = None, doc: str | None = None) -> Op:
    """Define an elementwise op from ``body``, C statements that read the inputs and assign the
    outputs by name, and return it (also ``dlop.ops.<name>``)::

        softplus = dlop.elementwise("softplus", "y = x > 20 ? x : log1p(exp(x))",
                                    inputs="x", outputs="y",
                                    dtypes=("float16", "bfloat16", "float32", "float64"))
        y = softplus(x)   # an array: runs now; a Variable: a graph node

    Every input has one dtype among ``dtypes`` (floats and integers) and every output has it
    too; inputs broadcast as in NumPy; float16 and bfloat16 are computed in float32.  In the
    body, ``T`` is the compute type, and each of ``params`` ({"alpha": 1.0}: a float is a
    double there, an int an int64_t) is a constant of its name, set per call as a keyword
    (``op(x, alpha=2.0)``).  The body is compiled with the host's C compiler now, for every
    dtype: a body that does not compile raises InvalidArgumentError with the compiler's
    messages against the body's own lines, and defines nothing.  Defining the same op again
    returns it; another body under a defined name raises (ops stay for the process's life).
    """
    if not isinstance(name, str) or not isinstance(body, str):
        raise _errors.type_error("elementwise: name and body must be str")
    if doc is not None and not isinstance(doc, str):
        raise _errors.type_error(f"elementwise: doc must be a str or None, got {doc!r}")
    if isinstance(dtypes, str):
        dtypes = (dtypes,)
    dtype_names = tuple(_dtype_name(d) for d in dtypes)
    if not dtype_names:
        raise _errors.invalid("elementwise: dtypes is empty: name at least one")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise _errors.type_error(f"elementwise: params must be a dict of name: default, got {params!r}")
    inputs, outputs = _names(inputs, "inputs"), _names(outputs, "outputs")
    declared = tuple(_param(k, v) for k, v in params.items())
    with registry_lock:  # a dlop.Op choosing its name meanwhile sees this one taken
        _C.define_elementwise(name, body, inputs, outputs, dtype_names, declared, doc)
        definitions[name] = {"name": name, "body": body, "inputs": inputs, "outputs": outputs,
                             "dtypes": dtype_names, "params": declared, "doc": doc}
        return ops._added(name)
