"""The loaded plugins and their ops: ``dlop.plugins()``, ``dlop.load_plugin``, the plugin probe
mode (``dlop.plugin_probe``, ``dlop.set_plugin_probe``), and ``dlop.ops``, where every op is an
``Op`` that builds graph nodes from Variables and runs at once on arrays.

Running at once is the eager path (the end of this file): one small function compiled per
signature and cached.  The operators and functions of dlop._arith run on it too; they import
this module, and this module imports nothing from them."""
from __future__ import annotations

import struct
import threading
from typing import Any

from . import _C, _errors, _installation, _promote
from ._graph import Apply, Variable

Array = _C.Array

# One lock for the registry as Python sees it: a refresh reads the registry and replaces
# dlop.ops' table in one step (so a slower refresh never puts back a table older than one
# already in place), and whoever adds an op (dlop.Op, dlop.elementwise) holds it from checking
# that a name is free to taking the op from the table. Reentrant: a dlop.Op's make_node may
# call another dlop.Op for the first time.
registry_lock = threading.RLock()


class Param:
    """A declared op parameter: name, kind ('bool'|'int'|'float'|'string'|'ints'), default, doc."""

    __slots__ = ("name", "kind", "default", "doc")

    def __init__(self, name: str, kind: str, default: Any, doc: str):
        self.name, self.kind, self.default, self.doc = name, kind, default, doc

    def __repr__(self) -> str:
        return f"Param({self.name}: {self.kind} = {self.default!r})"


class Plugin:
    """A loaded plugin file: name, version, path, doc, abi_version and the names of its ops."""

    __slots__ = ("name", "version", "path", "doc", "abi_version", "ops")

    def __init__(self, info: dict):
        self.name = info["name"]
        self.version = info["version"]
        self.path = info["path"]
        self.doc = info["doc"]
        self.abi_version = info["abi_version"]
        self.ops = list(info["ops"])

    def __repr__(self) -> str:
        return f"Plugin({self.name} {self.version}, {self.path}, ops={self.ops})"


class Op:
    """A loaded op.  Call it on Variables to build a node (types and shapes are inferred now),
    or on arrays (dlop.Array, NumPy, DLPack producers) to run it at once on their device.
    Keyword arguments are the op's parameters.

    Subclassed, it is an op written in Python, Theano's Op shape (make_node, infer_shape,
    perform, make_thunk, __props__): dlop._py_op and docs/source-ops.md, "dlop.Op"."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        from ._py_op import prepare_class
        prepare_class(cls)

    def __init__(self, info: dict | None = None):
        if info is None:  # a subclass's super().__init__(): a Python op has no info of its own
            if type(self) is Op:
                raise _errors.type_error(
                    "dlop.Op() needs an op's info: subclass dlop.Op to write an op in Python, "
                    "or take loaded ops from dlop.ops")
            return
        self.name: str = info["name"]
        self.__doc__ = info["doc"]
        self.num_inputs: int = info["num_inputs"]  # -1: any number
        self.num_outputs: int = info["num_outputs"]
        self.params = [Param(p["name"], p["kind"], p["default"], p["doc"]) for p in info["params"]]
        self.dtypes: dict[str, list[str]] = info["dtypes"]
        self.deterministic: bool = info["deterministic"]
        self.cuda_graph_safe: bool = info["cuda_graph_safe"]
        self.needs_contiguous_inputs: bool = info["needs_contiguous_inputs"]
        # Declares a scalar body: elementwise with NumPy broadcasting (framework adapters batch
        # such ops by broadcasting).
        self.elementwise: bool = info["elementwise"]
        # Per output, the input it may overwrite / is a view of (-1: none); None when undeclared.
        self.inplace_map: list[int] | None = info["inplace_map"]
        self.view_map: list[int] | None = info["view_map"]
        self.plugin: str = info["plugin"]
        # The call in C (eager_calls.c): on dlop.Arrays of one device with bool, int or float
        # parameters, a repeated signature runs its compiled function without Python code here.
        self._calls = _C.EagerCalls(self.num_outputs != 1, self._eager_function, self._call)

    def __repr__(self) -> str:
        return f"<dlop op {self.name} from plugin {self.plugin}>"

    def _check_call(self, args: tuple, params: dict) -> None:
        if self.num_inputs >= 0 and len(args) != self.num_inputs:
            raise _errors.type_error(
                f"op '{self.name}' takes {self.num_inputs} input(s), got {len(args)}")
        known = {p.name for p in self.params}
        for key in params:
            if key not in known:
                raise _errors.not_found(
                    f"op '{self.name}' has no parameter '{key}'; its parameters: "
                    f"{', '.join(sorted(known)) or '(none)'}")

    def __call__(self, *args: Any, **params: Any):
        if type(self) is not Op:  # super().__call__ from a dlop.Op subclass's own __call__
            from ._py_op import _call
            return _call(self, *args, **params)
        return self._calls(args, params)

    def _call(self, args: tuple, params: dict):
        """Every call that _C.EagerCalls does not take itself."""
        self._check_call(args, params)
        if any(isinstance(a, Variable) for a in args):
            return self._apply(args, params)
        return self._run(args, params)

    def _eager_function(self, arrays: tuple, params: dict):
        """For _C.EagerCalls, a new signature: the call checked, and the compiled function that
        runs it on arrays (dlop.Arrays on one device), which _C.EagerCalls remembers."""
        self._check_call(arrays, params)
        return _eager_entry(_build_op, self.name, _params_key(params), arrays[0].device,
                            tuple((a.dtype, a.ndim) for a in arrays))[0]

    def _apply(self, args: tuple, params: dict):
        inputs = [a if isinstance(a, Variable) else _constant(a) for a in args]
        graph = _C.Graph()
        ids = [graph.input(v.name or "input", v.dtype, v.shape) for v in inputs]
        out_ids = graph.apply(self.name, ids, dict(params))
        apply = Apply(self, inputs, dict(params))
        for index, out_id in enumerate(out_ids):
            dtype, shape = graph.type(out_id)
            name = f"{self.name}_out" if self.num_outputs == 1 else f"{self.name}_out{index}"
            apply.outputs.append(Variable(name, dtype, shape, owner=apply))
        return apply.outputs[0] if self.num_outputs == 1 else tuple(apply.outputs)

    def _run(self, args: tuple, params: dict):
        # The operators' eager path (one compiled node per dtypes, ranks, device and
        # parameters; sizes unknown so every shape reuses it). Python scalars are strong
        # here: an op takes arrays, so 2 is an int64 array, not a weak scalar.
        arrays = args
        for a in args:
            if type(a) is not _C.Array:
                arrays = tuple(_C.asarray(a) for a in args)
                break
        result = _eager(_build_op, self.name, arrays, _params_key(params))
        return tuple(result) if self.num_outputs != 1 else result


def _params_key(params: dict) -> tuple:
    """An op call's parameters as the eager path takes them: (name, value) pairs by name."""
    return tuple(sorted(params.items())) if params else ()


def _build_op(name: str, operands: list, params: tuple, scalar_var: Any):
    """The eager path's builder for one op: its node on the placeholder Variables."""
    op = _op(name)
    outputs = op._apply(tuple(operands), dict(params))
    return list(outputs) if op.num_outputs != 1 else outputs


def _constant(value: Any) -> Variable:
    """A constant Variable holding a dlop.Array (NumPy and scalars are converted)."""
    array = _C.asarray(value)
    return Variable("constant", array.dtype, array.shape, value=array)


class _OpNamespace:
    """``dlop.ops``: one attribute per loaded op (refreshed by load_plugin)."""

    def __init__(self):
        self._ops: dict[str, Op] = {}

    def _refresh(self) -> None:
        with registry_lock:
            fresh = {}
            for info in _C.op_infos():
                old = self._ops.get(info["name"])
                fresh[info["name"]] = old if old is not None else Op(info)
            self._ops = fresh

    def _added(self, name: str) -> Op:
        """The op just registered as name, from its own info, added to the table (the caller
        holds registry_lock from registering it, so no refresh can leave it out)."""
        with registry_lock:
            op = self._ops.get(name)
            if op is None:
                info = next(i for i in _C.op_infos() if i["name"] == name)
                op = Op(info)
                self._ops = {**self._ops, name: op}
            return op

    def __getattr__(self, name: str) -> Op:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return self._ops[name]
        except KeyError:
            bundled = _C.location("bundled_plugins")
            error = _errors.UnknownOpError(
                f"no op named '{name}' is loaded; loaded ops: {', '.join(sorted(self._ops)) or '(none)'}"
                " (load more with dlop.load_plugin(path) or DLOP_PLUGIN_PATH; this process's"
                f" bundled plugins come from {bundled or '(nowhere)'}: dlop.info() says which"
                " libdlop and plugin directories it uses)")
            error.status = "DLOP_NOT_FOUND"
            raise error from None

    def __dir__(self) -> list[str]:
        return sorted(self._ops)

    def __iter__(self):
        return iter(sorted(self._ops.values(), key=lambda op: op.name))

    def __contains__(self, name: str) -> bool:
        return name in self._ops

    def __repr__(self) -> str:
        return f"<dlop.ops: {', '.join(sorted(self._ops))}>"


ops = _OpNamespace()
ops._refresh()


def plugins() -> list[Plugin]:
    """The loaded plugins: name, version, path (the file), doc, ops."""
    return [Plugin(info) for info in _C.plugins()]


def load_plugin(path: str) -> Plugin:
    """Load one plugin file (an explicit path) and add its ops to dlop.ops."""
    info = _C.load_plugin(path)
    ops._refresh()
    return Plugin(info)


def load_errors() -> list[str]:
    """Plugin files that failed to load, one 'FILE: reason' line each."""
    return list(_C.load_errors())


def info(name: str | None = None) -> dict:
    """What ``dlop info NAME`` shows, as a dict: name, plugin, dtypes (per device) and run_time,
    per device, what the op reports about how it runs in this process (ABI 1.2 runtime_info;
    the blas ops: "blas library", "blas found as", "blas integers", "blas kernels", "blas
    threads"), as {key: value}; a device the op reports nothing about is absent.

    Without a name, what ``dlop info`` shows: the installation in use, as a dict: version,
    package, extension, libdlop (the file), bundled_plugins (the directory, None when there is
    none) and bundled_plugins_from ('libdlop' or 'DLOP_BUNDLED_PLUGINS'), plugin_path
    (DLOP_PLUGIN_PATH's entries), plugin_probe, probe_program, plugins ({name: file}) and
    load_errors."""
    if name is None:
        return _installation.installation_info()
    op = _op(name)
    run_time = {}
    for device in ("cpu", "cuda"):
        if not op.dtypes.get(device):
            continue
        text = _C.op_runtime_info(op.name, device)
        if text is not None:
            run_time[device] = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    return {"name": op.name, "plugin": op.plugin, "dtypes": op.dtypes, "run_time": run_time}


def plugin_probe() -> str:
    """Which plugin files are loaded in a child process first, so that a file whose loading
    crashes is refused instead of killing Python: 'external' (every file but the bundled
    plugins, the default), 'all' or 'off'. DLOP_PLUGIN_PROBE sets it before `import dlop`."""
    return _C.plugin_probe()


def set_plugin_probe(mode: str) -> None:
    """Set the plugin probe mode ('off', 'all' or 'external') for later dlop.load_plugin calls
    (the plugins found at import were loaded under DLOP_PLUGIN_PROBE's mode)."""
    _C.set_plugin_probe(mode)


def _op(name: str):
    """The loaded op called name: the builders' lookup (here and in dlop._arith)."""
    op = ops._ops.get(name)
    # Not loaded: dlop.ops' own lookup raises UnknownOpError naming the loaded ops.
    return op if op is not None else getattr(ops, name)


# ---- the eager path: one compiled function per signature ------------------------------

class _Weak:
    """A Python bool/int/float operand while a builder runs: its type decides promotion; the
    value becomes a Variable of the chosen dtype only through ``scalar_var``."""

    __slots__ = ("value", "type", "index")

    def __init__(self, value: Any, index: int):
        self.value, self.type, self.index = value, type(value), index


def _exact_numpy_scalar(value):
    """value as a NumPy scalar that holds it exactly where it can (bool, int64, float64), for
    the cast op to round once to bfloat16.  Going through float32 rounded twice: 1 + 2**-8 +
    2**-30 became the bfloat16 tie 1 + 2**-8 in float32 and then 1.0, not 1 + 2**-7."""
    import numpy
    kind = type(value)
    if kind is bool:
        return numpy.bool_(value)
    if kind is int and -2 ** 63 <= value < 2 ** 63:
        return numpy.int64(value)
    return numpy.float64(value)  # floats, and ints beyond int64 (as NumPy converts them)


_EAGER_LIMIT = 512     # compiled signatures kept (reshape's shape is a parameter: bounded)
_SCALAR_LIMIT = 256    # 0-d scalar arrays kept per (value, dtype, device)
_eager_cache: dict = {}
_scalar_cache: dict = {}
_float_bits = struct.Struct("<d").pack


def _remember(cache: dict, limit: int, key, value) -> None:
    if len(cache) >= limit:
        del cache[next(iter(cache))]  # the oldest entry: a bounded cache without bookkeeping
    cache[key] = value


def _value_key(value):
    """A cache key for a Python scalar or parameter: -0.0 == 0.0 and True == 1 == 1.0 but they
    give different results, and NaN != NaN would miss every time (filling the cache with one
    entry per call): a float is keyed by its bits, every value by its type too."""
    kind = type(value)
    if kind is float:
        return (kind, _float_bits(value))
    if kind is tuple or kind is list:
        return (kind, tuple(map(_value_key, value)))
    return (kind, value)


def _scalar_array(value, dtype: str, device: str):
    """A 0-d array of dtype on device holding a Python scalar, cached, so ``a * 2.0`` on a GPU
    does not copy 2.0 to the device on every call."""
    key = (_value_key(value), dtype, device)
    array = _scalar_cache.get(key)
    if array is None:
        _promote.check_scalar(value, dtype)
        if dtype == "bfloat16":
            array = _op("cast")(_C.asarray(_exact_numpy_scalar(value), device), dtype="bfloat16")
        else:
            array = _C.asarray(value, device, dtype)
        _remember(_scalar_cache, _SCALAR_LIMIT, key, array)
    return array


def _compile_eager(builder, name: str, descriptions: tuple, params: tuple, device: str):
    inputs: list = [None] * len(descriptions)
    scalars: list = []
    operands: list = []
    for index, description in enumerate(descriptions):
        if isinstance(description, tuple):
            dtype, ndim = description
            inputs[index] = Variable(f"x{index}", dtype, (None,) * ndim)
            operands.append(inputs[index])
        else:  # a weak scalar's type; its value comes with each call
            operands.append(_Weak(description(), index))

    def placeholder(weak: _Weak, dtype: str) -> Variable:
        inputs[weak.index] = Variable(f"s{weak.index}", dtype, ())
        scalars.append((weak.index, dtype))
        return inputs[weak.index]

    output = builder(name, operands, params, placeholder)
    from ._graph import function
    used = [i for i, v in enumerate(inputs) if v is not None]
    # Unfused: an eager call is one operation (and its promotions), where compiling a fused
    # kernel would cost more than it saves; compiled functions fuse.
    compiled = function([inputs[i] for i in used], output, device, fuse=False)
    return compiled, tuple(used), tuple(scalars)


def _eager_entry(builder, name: str, params: tuple, device: str, descriptions: tuple):
    """The compiled function of one signature, with the operands it takes and the scalars it
    makes arrays of: from the cache, or compiled now."""
    key = (builder, name, _value_key(params), device, descriptions)
    entry = _eager_cache.get(key)
    if entry is None:
        entry = _compile_eager(builder, name, descriptions, params, device)
        _remember(_eager_cache, _EAGER_LIMIT, key, entry)
    return entry


def _eager(builder, name: str, operands: tuple, params: tuple):
    """Run builder at once on operands (arrays and Python scalars); also dlop.ops' eager calls."""
    arrays: list = list(operands)
    descriptions = []
    device = None
    for index, x in enumerate(operands):
        kind = type(x)
        if kind is float or kind is int or kind is bool:
            descriptions.append(kind)
            continue
        if kind is not Array:
            x = arrays[index] = _C.asarray(x)
        where = x.device
        if device is None:
            device = where
        elif where != device:
            raise _errors.device_mismatch(
                f"{name}: one operand is on {device} and another on {where}; put them on one "
                f"device (dlop.asarray(a, device=...) or a.to(...)) - dlop never moves data itself")
        descriptions.append((x.dtype, x.ndim))
    if device is None:
        if operands:
            # Only Python scalars: NumPy's dtypes for them (int64, float64, bool), on the CPU.
            return _eager(builder, name, tuple(_C.asarray(x) for x in operands), params)
        device = "cpu"  # an op called without inputs (dlop.ops.<name>())
    compiled, used, scalars = _eager_entry(builder, name, params, device, tuple(descriptions))
    for index, dtype in scalars:
        arrays[index] = _scalar_array(operands[index], dtype, device)
    if len(used) != len(arrays):
        arrays = [arrays[i] for i in used]
    return compiled(*arrays)
