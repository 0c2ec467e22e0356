"""The loaded plugins and their ops: ``dlop.plugins()``, ``dlop.load_plugin``, and ``dlop.ops``,
where every op is an ``Op`` that builds graph nodes from Variables and runs at once on arrays."""
from __future__ import annotations

from typing import Any

from . import _C, _errors
from ._graph import Apply, Variable


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
    Keyword arguments are the op's parameters."""

    def __init__(self, info: dict):
        self.name: str = info["name"]
        self.__doc__ = info["doc"]
        self.num_inputs: int = info["num_inputs"]  # -1: any number
        self.num_outputs: int = info["num_outputs"]
        self.params = [Param(p["name"], p["kind"], p["default"], p["doc"]) for p in info["params"]]
        self.dtypes: dict[str, list[str]] = info["dtypes"]
        self.deterministic: bool = info["deterministic"]
        self.cuda_graph_safe: bool = info["cuda_graph_safe"]
        self.plugin: str = info["plugin"]

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
        self._check_call(args, params)
        if any(isinstance(a, Variable) for a in args):
            return self._apply(args, params)
        return self._run(args, params)

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
        result = _arith._eager(_build_op, self.name, arrays,
                               tuple(sorted(params.items())) if params else ())
        return tuple(result) if self.num_outputs != 1 else result


def _build_op(name: str, operands: list, params: tuple, scalar_var: Any):
    """The eager path's builder for one op: its node on the placeholder Variables."""
    op = _arith._op(name)
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
        fresh = {}
        for info in _C.op_infos():
            old = self._ops.get(info["name"])
            fresh[info["name"]] = old if old is not None else Op(info)
        self._ops = fresh

    def __getattr__(self, name: str) -> Op:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return self._ops[name]
        except KeyError:
            error = _errors.UnknownOpError(
                f"no op named '{name}' is loaded; loaded ops: {', '.join(sorted(self._ops)) or '(none)'}"
                " (load more with dlop.load_plugin(path) or DLOP_PLUGIN_PATH)")
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


# Last: _arith imports this module's ops and _constant, and Op._run calls its eager path.
from . import _arith  # noqa: E402
