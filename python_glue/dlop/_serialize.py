"""Graphs and compiled functions as text: ``dlop.dumps`` / ``dlop.loads``, ``dlop.save`` /
``dlop.load``, and pickling of ``dlop.Function`` (its ``__reduce__`` calls ``_reduce_function``).

The text is JSON, "dlop-graph" format version 1 (docs/serialization.md): the graph's variables
(inputs with their static shapes, constants with their bytes, op outputs with the types the op
gave them), its nodes in order (op, plugin name and version, inputs, parameters by kind), which
variables are the inputs and outputs, and for a function the device and options it was compiled
with.  Loading rebuilds the graph through the ops of this process and refuses, with a dlop error
saying what was wanted and what is here, when an op is missing, comes from another plugin or
another plugin version, or gives other types than the saved graph recorded.
"""
from __future__ import annotations

import base64
import json
import math
import os
from typing import Any

from . import _C, _errors
from ._graph import Variable, function
from ._ops import _op, ops
from ._promote import DTYPES

FORMAT = "dlop-graph"
FORMAT_VERSION = 1
_KINDS = ("bool", "int", "float", "string", "ints")


# ---- writing --------------------------------------------------------------------------------

def _plugin_versions() -> dict[str, str]:
    return {info["name"]: info["version"] for info in _C.plugins()}


def _encode_float(value: float):
    # JSON has no infinities or NaN: those are the strings "inf", "-inf" and "nan".
    if math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def _encode_param(op, name: str, value: Any) -> dict:
    """One parameter as {"kind": ..., "value": ...}, by the kind the op declares for it."""
    decl = next((p for p in op.params if p.name == name), None)
    if decl is None:  # the op refused it when the node was made; kept as a clear error anyway
        raise _errors.not_found(f"dumps: op '{op.name}' has no parameter '{name}'")
    kind = decl.kind
    if kind == "bool":
        encoded: Any = bool(value)
    elif kind == "int":
        encoded = int(value)
    elif kind == "float":
        encoded = _encode_float(float(value))
    elif kind == "string":
        encoded = str(value)
    elif kind == "ints":
        encoded = [int(v) for v in value]
    else:
        raise _errors.make(_C.UnsupportedError, "DLOP_UNSUPPORTED",
                           f"dumps: op '{op.name}' parameter '{name}' has kind '{kind}', which "
                           f"this format (version {FORMAT_VERSION}) cannot write")
    return {"kind": kind, "value": encoded}


def _is_python_op(op) -> bool:
    from ._py_op import _registered
    return any(loaded is op for loaded in list(_registered.values()))


def _constant_entry(var) -> dict:
    """A constant's dtype, shape and C-order little-endian bytes (base64).  bfloat16, which
    NumPy lacks, is stored as its float32 values (exact) and says so in "stored_as"."""
    import numpy
    array = var.value
    stored_as = array.dtype
    if stored_as == "bfloat16":
        array = _op("cast")(array, dtype="float32")
        stored_as = "float32"
    host = numpy.ascontiguousarray(array.numpy()).astype(numpy.dtype(stored_as).newbyteorder("<"))
    return {"kind": "constant", "name": var.name, "dtype": var.value.dtype,
            "shape": list(var.value.shape), "stored_as": stored_as,
            "data": base64.b64encode(host.tobytes()).decode("ascii")}


def _shape_json(shape) -> list:
    return [None if d is None else int(d) for d in shape]


def _document(inputs: list, outputs: list) -> dict:
    """The graph from inputs to outputs as a dict (the JSON document without "function")."""
    versions = _plugin_versions()
    index: dict[int, int] = {}
    variables: list[dict] = []
    nodes: list[dict] = []
    for var in inputs:
        if id(var) in index:
            raise _errors.invalid(f"dumps: input {var!r} is given twice")
        index[id(var)] = len(variables)
        variables.append({"kind": "input", "name": var.name, "dtype": var.dtype,
                          "shape": _shape_json(var.shape)})
    names = ", ".join(repr(v.name) for v in inputs) or "none"
    # Post-order, iteratively (as dlop.function builds its C graph), so nodes come out in an
    # order where every node's inputs are defined before it.
    stack = [(v, False) for v in reversed(outputs)]
    while stack:
        var, ready = stack.pop()
        if id(var) in index:
            continue
        if var.owner is None:
            if var.value is None:
                raise _errors.invalid(
                    f"dumps: the outputs depend on input {var.name!r}, which is not among the "
                    f"inputs ({names})")
            index[id(var)] = len(variables)
            variables.append(_constant_entry(var))
            continue
        apply = var.owner
        if not ready:
            stack.append((var, True))
            stack.extend((v, False) for v in reversed(apply.inputs) if id(v) not in index)
            continue
        op = apply.op
        if _is_python_op(op):
            raise _errors.make(
                _C.UnsupportedError, "DLOP_UNSUPPORTED",
                f"dumps: node {op.name!r} is a dlop.Op written in Python: its registry name "
                "depends on the order classes and props values register in, so a saved graph "
                "could bind another op elsewhere; graphs with Python ops are not saved")
        node = {"op": op.name, "plugin": op.plugin, "plugin_version": versions.get(op.plugin),
                "inputs": [index[id(v)] for v in apply.inputs],
                "params": {name: _encode_param(op, name, value)
                           for name, value in sorted(apply.params.items())},
                "outputs": []}
        for position, out in enumerate(apply.outputs):
            index[id(out)] = len(variables)
            node["outputs"].append(len(variables))
            variables.append({"kind": "output", "node": len(nodes), "index": position,
                              "name": out.name, "dtype": out.dtype,
                              "shape": _shape_json(out.shape)})
        nodes.append(node)
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "dlop_version": _C.version(),
            "variables": variables, "nodes": nodes,
            "inputs": [index[id(v)] for v in inputs],
            "outputs": [index[id(v)] for v in outputs]}


def _free_inputs(outputs: list) -> list:
    """The input Variables (no owner, no value) outputs depend on, in the order first met."""
    found, seen = [], set()
    stack = list(reversed(outputs))
    while stack:
        var = stack.pop()
        if id(var) in seen:
            continue
        seen.add(id(var))
        if var.owner is None:
            if var.value is None:
                found.append(var)
            continue
        stack.extend(reversed(var.owner.inputs))
    return found


def _text(doc: dict) -> str:
    """JSON with one line per top-level field, per variable and per node: easy to read and to
    compare with diff."""
    def one(value) -> str:
        return json.dumps(value, allow_nan=False)
    lines = []
    for key, value in doc.items():
        if key in ("variables", "nodes") and value:
            items = ",\n".join("  " + one(item) for item in value)
            lines.append(f" {one(key)}: [\n{items}\n ]")
        else:
            lines.append(f" {one(key)}: {one(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def dumps(obj, inputs=None) -> str:
    """A dlop.Function, or a graph (a Variable or a list of Variables), as JSON text.

    A function's text records its inputs, outputs, device and options (``fuse``,
    ``cuda_graphs``); ``dlop.loads`` compiles it again.  For a graph, ``inputs`` (a list of
    Variables) fixes the inputs and their order; by default they are the input Variables the
    outputs depend on, in the order a depth-first walk from the outputs meets them.
    """
    if isinstance(obj, _C.Function):
        if inputs is not None:
            raise _errors.invalid("dumps: a function has its inputs already; do not pass inputs")
        fn_inputs, outputs = obj.inputs, obj.outputs
        if outputs is None:
            raise _errors.make(_C.UnsupportedError, "DLOP_UNSUPPORTED",
                               "dumps: this dlop.Function was not made by dlop.function and does "
                               "not know its graph, so it cannot be saved")
        as_list = isinstance(outputs, list)
        doc = _document(list(fn_inputs), outputs if as_list else [outputs])
        doc["outputs_as_list"] = as_list
        doc["function"] = {"device": obj.device, "fuse": obj.fuse, "cuda_graphs": obj.cuda_graphs}
    else:
        as_list = isinstance(obj, (list, tuple))
        outputs = list(obj) if as_list else [obj]
        for var in outputs + list(inputs or []):
            if not isinstance(var, Variable):
                raise _errors.type_error(
                    f"dumps: expected a dlop.Function or dlop Variables, not {var!r}")
        doc = _document(list(inputs) if inputs is not None else _free_inputs(outputs), outputs)
        doc["outputs_as_list"] = as_list
    return _text(doc)


def save(obj, file, inputs=None) -> None:
    """``dumps(obj, inputs)`` written to ``file`` (a path or a text file object)."""
    text = dumps(obj, inputs)
    if isinstance(file, (str, os.PathLike)):
        with open(file, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        file.write(text)


# ---- reading --------------------------------------------------------------------------------

def _corrupt(where: str, message: str) -> Exception:
    return _errors.invalid(f"loads: not a valid {FORMAT} document: {where}: {message}")


def _field(obj: dict, key: str, kinds, where: str):
    if not isinstance(obj, dict):
        raise _corrupt(where, f"expected an object, got {type(obj).__name__}")
    if key not in obj:
        raise _corrupt(where, f"'{key}' is missing")
    value = obj[key]
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in _tuple(kinds)):
        raise _corrupt(f"{where}.{key}", f"expected {_kind_names(kinds)}, got {value!r}")
    return value


def _tuple(kinds) -> tuple:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def _kind_names(kinds) -> str:
    names = {dict: "an object", list: "a list", str: "a string", int: "an integer",
             bool: "true or false", float: "a number", type(None): "null"}
    return " or ".join(names.get(k, k.__name__) for k in _tuple(kinds))


def _shape(value, where: str) -> tuple:
    if not isinstance(value, list):
        raise _corrupt(where, f"expected a list of sizes and nulls, got {value!r}")
    for dim in value:
        if dim is not None and (not isinstance(dim, int) or isinstance(dim, bool) or dim < 0):
            raise _corrupt(where, f"dimension {dim!r} is not a size >= 0 or null")
    return tuple(value)


def _decode_float(value, where: str) -> float:
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise _corrupt(where, f"expected a number or \"inf\", \"-inf\", \"nan\", got {value!r}")


def _decode_param(op, name: str, entry, where: str):
    kind = _field(entry, "kind", str, where)
    if kind not in _KINDS:
        raise _corrupt(f"{where}.kind", f"unknown parameter kind {kind!r}; expected one of "
                       f"{', '.join(_KINDS)}")
    if "value" not in entry:
        raise _corrupt(where, "'value' is missing")
    value = entry["value"]
    decl = next((p for p in op.params if p.name == name), None)
    if decl is None:
        raise _errors.not_found(
            f"loads: op '{op.name}' (plugin '{op.plugin}') has no parameter '{name}' here; its "
            f"parameters: {', '.join(p.name for p in op.params) or '(none)'}")
    if decl.kind != kind:
        raise _errors.type_error(
            f"loads: op '{op.name}' parameter '{name}' was saved with kind {kind}; the op loaded "
            f"here declares kind {decl.kind}")
    bad = False
    if kind == "bool":
        bad = not isinstance(value, bool)
    elif kind == "int":
        bad = not isinstance(value, int) or isinstance(value, bool)
    elif kind == "float":
        value = _decode_float(value, f"{where}.value")
    elif kind == "string":
        bad = not isinstance(value, str)
    else:
        bad = not isinstance(value, list) or any(
            not isinstance(v, int) or isinstance(v, bool) for v in value)
        value = tuple(value) if not bad else value
    if bad:
        raise _corrupt(f"{where}.value", f"{value!r} is not a value of kind {kind}")
    return value


def _constant(entry: dict, where: str):
    import numpy
    dtype = _field(entry, "dtype", str, where)
    stored_as = _field(entry, "stored_as", str, where)
    shape = _shape(_field(entry, "shape", list, where), f"{where}.shape")
    if dtype not in DTYPES or stored_as != (dtype if dtype != "bfloat16" else "float32"):
        raise _corrupt(where, f"dtype {dtype!r} stored as {stored_as!r}: expected a dlop dtype "
                       "stored as itself (bfloat16 as float32)")
    if None in shape:
        raise _corrupt(f"{where}.shape", "a constant's shape has no unknown sizes")
    try:
        raw = base64.b64decode(_field(entry, "data", str, where), validate=True)
    except ValueError as error:
        raise _corrupt(f"{where}.data", f"not base64 ({error})") from None
    host_dtype = numpy.dtype(stored_as).newbyteorder("<")
    count = math.prod(shape)
    if len(raw) != count * host_dtype.itemsize:
        raise _corrupt(f"{where}.data", f"{len(raw)} bytes; a {stored_as} array of shape "
                       f"{shape} has {count * host_dtype.itemsize}")
    host = numpy.frombuffer(raw, dtype=host_dtype).astype(numpy.dtype(stored_as)).reshape(shape)
    array = _C.asarray(host.copy())
    if dtype == "bfloat16":
        array = _op("cast")(array, dtype="bfloat16")
    name = entry.get("name")
    return Variable(name if isinstance(name, str) else "constant", dtype, shape, value=array)


def _type_text(dtype: str, shape) -> str:
    return f"{dtype}{list(shape)}"


def _rebuild(doc: dict):
    """The Variables of a parsed document: (inputs, outputs as a list)."""
    if not isinstance(doc, dict):
        raise _corrupt("the document", f"expected a JSON object, got {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        raise _corrupt("format", f"expected \"{FORMAT}\", got {doc.get('format')!r}")
    version = doc.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise _corrupt("format_version", f"expected an integer, got {version!r}")
    if version != FORMAT_VERSION:
        raise _errors.make(_C.UnsupportedError, "DLOP_UNSUPPORTED",
                           f"loads: the document is {FORMAT} format version {version}; this dlop "
                           f"({_C.version()}) reads version {FORMAT_VERSION} only")
    entries = _field(doc, "variables", list, "the document")
    nodes = _field(doc, "nodes", list, "the document")
    variables: list = [None] * len(entries)
    for i, entry in enumerate(entries):
        where = f"variables[{i}]"
        kind = _field(entry, "kind", str, where)
        if kind == "input":
            dtype = _field(entry, "dtype", str, where)
            if dtype not in DTYPES:
                raise _corrupt(f"{where}.dtype", f"{dtype!r} is not a dlop dtype")
            name = _field(entry, "name", (str, type(None)), where)
            variables[i] = Variable(name, dtype, _shape(_field(entry, "shape", list, where),
                                                        f"{where}.shape"))
        elif kind == "constant":
            variables[i] = _constant(entry, where)
        elif kind != "output":
            raise _corrupt(f"{where}.kind", f"expected \"input\", \"constant\" or \"output\", "
                           f"got {kind!r}")

    def variable(ref, where: str):
        if not isinstance(ref, int) or isinstance(ref, bool) or not 0 <= ref < len(variables):
            raise _corrupt(where, f"{ref!r} is not a variable index below {len(variables)}")
        if variables[ref] is None:
            raise _corrupt(where, f"variable {ref} is used before the node making it")
        return variables[ref]

    for n, node in enumerate(nodes):
        where = f"nodes[{n}]"
        name = _field(node, "op", str, where)
        plugin = _field(node, "plugin", str, where)
        wanted = _field(node, "plugin_version", (str, type(None)), where)
        op = ops._ops.get(name)
        if op is None:
            raise _errors.not_found(
                f"loads: the graph needs op '{name}' from plugin '{plugin}' version {wanted}, "
                f"which is not loaded in this process (load it with dlop.load_plugin(path) or "
                f"DLOP_PLUGIN_PATH)")
        if op.plugin != plugin:
            raise _errors.make(_C.PluginError, "DLOP_PLUGIN_ERROR",
                               f"loads: the graph needs op '{name}' from plugin '{plugin}' "
                               f"version {wanted}; here it comes from plugin '{op.plugin}'")
        have = _plugin_versions().get(op.plugin)
        if have != wanted:
            raise _errors.make(_C.PluginError, "DLOP_PLUGIN_ERROR",
                               f"loads: the graph needs op '{name}' from plugin '{plugin}' "
                               f"version {wanted}; the plugin loaded here is version {have}")
        args = [variable(ref, f"{where}.inputs[{k}]")
                for k, ref in enumerate(_field(node, "inputs", list, where))]
        params = {key: _decode_param(op, key, entry, f"{where}.params.{key}")
                  for key, entry in _field(node, "params", dict, where).items()}
        made = op._apply(tuple(args), params)
        made = list(made) if isinstance(made, tuple) else [made]
        refs = _field(node, "outputs", list, where)
        if len(refs) != len(made):
            raise _corrupt(f"{where}.outputs", f"{len(refs)} outputs listed; op '{name}' has "
                           f"{len(made)}")
        for k, (ref, out) in enumerate(zip(refs, made)):
            at = f"{where}.outputs[{k}]"
            if not isinstance(ref, int) or isinstance(ref, bool) or not 0 <= ref < len(entries):
                raise _corrupt(at, f"{ref!r} is not a variable index below {len(entries)}")
            entry = entries[ref]
            if (entry.get("kind") != "output" or entry.get("node") != n or entry.get("index") != k
                    or variables[ref] is not None):
                raise _corrupt(at, f"variable {ref} is not output {k} of node {n}")
            dtype = _field(entry, "dtype", str, f"variables[{ref}]")
            shape = _shape(_field(entry, "shape", list, f"variables[{ref}]"),
                           f"variables[{ref}].shape")
            if (out.dtype, out.shape) != (dtype, shape):
                raise _errors.make(
                    _C.PluginError, "DLOP_PLUGIN_ERROR",
                    f"loads: op '{name}' (plugin '{plugin}' {have}) gives "
                    f"{_type_text(out.dtype, out.shape)} for output {k} of node {n} here; the "
                    f"saved graph recorded {_type_text(dtype, shape)}")
            out_name = entry.get("name")
            if isinstance(out_name, str):
                out.name = out_name
            variables[ref] = out
    for i, var in enumerate(variables):
        if var is None:
            raise _corrupt(f"variables[{i}]", "an output that no node makes")
    inputs = [variable(ref, f"inputs[{k}]")
              for k, ref in enumerate(_field(doc, "inputs", list, "the document"))]
    for k, ref in enumerate(doc["inputs"]):
        if entries[ref].get("kind") != "input":
            raise _corrupt(f"inputs[{k}]", f"variable {ref} is not an input")
    outputs = [variable(ref, f"outputs[{k}]")
               for k, ref in enumerate(_field(doc, "outputs", list, "the document"))]
    return inputs, outputs


def _parse(text) -> dict:
    if isinstance(text, (bytes, bytearray)):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as error:
            raise _corrupt("the text", f"not UTF-8 ({error})") from None
    if not isinstance(text, str):
        raise _errors.type_error(f"loads: expected the JSON text (str or bytes), not {text!r}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise _corrupt("the text", f"not JSON ({error})") from None


def loads(text, device: str | None = None):
    """Rebuild what ``dumps`` wrote, through the ops loaded in this process.

    A function's text gives a compiled dlop.Function, for its saved device unless ``device``
    names another; a graph's text gives ``(inputs, outputs)``: the list of input Variables and
    the output Variable (or list of them, as it was saved).  Refuses with a dlop error naming
    the op, the plugin and both versions when an op is missing or its plugin's version differs,
    and with InvalidArgumentError (UnsupportedError for an unknown format version) when the
    text is not such a document.
    """
    doc = _parse(text)
    inputs, outputs = _rebuild(doc)
    as_list = doc.get("outputs_as_list", False)
    if not isinstance(as_list, bool):
        raise _corrupt("outputs_as_list", f"expected true or false, got {as_list!r}")
    if not as_list and len(outputs) != 1:
        raise _corrupt("outputs", f"{len(outputs)} outputs but outputs_as_list is false")
    result = outputs if as_list else outputs[0]
    if "function" not in doc:
        return inputs, result
    options = _field(doc, "function", dict, "the document")
    saved_device = _field(options, "device", str, "function")
    fuse = _field(options, "fuse", bool, "function")
    cuda_graphs = _field(options, "cuda_graphs", bool, "function")
    return function(inputs, result, device=device or saved_device, fuse=fuse,
                    cuda_graphs=cuda_graphs)


def load(file, device: str | None = None):
    """``loads`` of the text in ``file`` (a path or a file object)."""
    if isinstance(file, (str, os.PathLike)):
        with open(file, "rb") as handle:
            return loads(handle.read(), device)
    return loads(file.read(), device)


def _reduce_function(compiled):
    """dlop.Function.__reduce__: rebuilt from its text by ``loads``."""
    return (loads, (dumps(compiled),))
