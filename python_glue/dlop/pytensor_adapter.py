"""dlop.pytensor_adapter — any dlop op as a PyTensor Op, usable inside ``pytensor.function``.

``as_op(dlop.ops.exp)`` (or ``as_op("exp", **params)``) returns a ``pytensor.graph.op.Op`` whose
type rule, shape rule and kernel are the plugin's own: make_node builds a symbolic dlop graph,
perform runs a CPU function compiled by dlop, infer_shape asks dlop's shape rule.

Backends: the default (C / Python) mode calls perform. ``mode="JAX"`` dispatches each node to
``dlop.jax`` (an XLA custom call running the same kernel inside the jitted graph, on the CPU or
the GPU JAX uses). ``mode="NUMBA"`` compiles each node to nopython code that calls libdlop's C
API through ctypes on the arrays' own memory (dlop._numba_dispatch), with no Python call; view
ops (which have no kernel to call) and dtypes Numba's backend lacks (float16, bfloat16) call
perform through ``numba.objmode`` instead, without PyTensor's per-op fallback warning.
"""
from __future__ import annotations

import threading
from typing import Any, Sequence

import numpy as np

import dlop

try:
    import pytensor.tensor as pt
    from pytensor.graph.basic import Apply, Variable
    from pytensor.graph.op import Op
    from pytensor.tensor.exceptions import ShapeError
    from pytensor.tensor.type import TensorType
except ImportError as error:  # say what is missing instead of a bare traceback deep inside
    raise ImportError(
        "dlop.pytensor_adapter needs PyTensor (pip install pytensor); importing it failed: %s"
        % error) from error

__all__ = ["DlopOp", "as_op"]

# Unknown dims are probed with these values (two rounds, distinct per dim): large primes, so a
# rule that maps them to an output dim cannot hit the same value by accident, and never 1,
# which broadcasting treats specially.
_PROBE_BASES = (100003, 200003)
_PROBE_STEP = 1009


def _hashable(value: Any) -> Any:
    """A parameter value in a form __props__ can hash and compare (lists become tuples)."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return tuple(int(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def _resolve_op(op: Any) -> Any:
    """The dlop op object for a name, an op object from dlop.ops or a dlop.Op instance (its
    registered op, registered now if it was not)."""
    if isinstance(op, dlop.Op) and type(op) is not dlop.Op:
        from ._py_op import registered_op_of
        return registered_op_of(op, "dlop.pytensor_adapter")
    if isinstance(op, str):
        try:
            return getattr(dlop.ops, op)
        except AttributeError as error:
            raise ValueError("dlop.pytensor_adapter: no loaded dlop op is named %r "
                             "(load its plugin first; dlop.plugins() lists what is loaded)"
                             % op) from error
    if not hasattr(op, "name") or not hasattr(op, "params"):
        raise TypeError("dlop.pytensor_adapter: expected an op from dlop.ops or its name, got %r"
                        % (op,))
    return op


def _full_params(op: Any, given: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Every declared parameter of op in declaration order, given values over defaults, so two
    adapters that run the same computation compare equal and merge."""
    declared = [p.name for p in op.params]
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise TypeError("dlop op %s has no parameter(s) %s; its parameters are %s"
                        % (op.name, ", ".join(unknown), declared or "none"))
    return tuple((p.name, _hashable(given.get(p.name, p.default))) for p in op.params)


def _as_list(outputs: Any) -> list:
    """An op call's result as a list (one output comes back bare)."""
    if isinstance(outputs, (list, tuple)):
        return list(outputs)
    return [outputs]


class DlopOp(Op):
    """A dlop op as a PyTensor Op. Equal (and merged by PyTensor) when the op name and every
    parameter value are equal; see ``as_op``."""

    __props__ = ("op_name", "dlop_params")

    def __init__(self, op_name: str, dlop_params: tuple[tuple[str, Any], ...]):
        self.op_name = op_name
        self.dlop_params = dlop_params
        # A view op's output is a view of an input's memory (perform returns it as is): PyTensor
        # must know, or an in-place op after it would write into the caller's input array.
        views = _resolve_op(op_name).view_map
        self.view_map = {o: [i] for o, i in enumerate(views or ()) if i >= 0}
        # Compiled dlop functions per input type signature; not part of the Op's identity.
        self._functions: dict[tuple, Any] = {}
        self._lock = threading.Lock()

    # Compiled functions are process-local objects; a copied or unpickled Op recompiles.
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_functions", None)
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._functions = {}
        self._lock = threading.Lock()

    def __str__(self) -> str:
        if not self.dlop_params:
            return "dlop.%s" % self.op_name
        return "dlop.%s{%s}" % (self.op_name,
                                ", ".join("%s=%r" % item for item in self.dlop_params))

    @property
    def dlop_op(self) -> Any:
        """The dlop op this wraps (looked up by name, so it follows the loaded plugins)."""
        return _resolve_op(self.op_name)

    def _apply_dlop(self, types: Sequence[tuple[str, tuple]]) -> list:
        """Apply the dlop op to fresh symbolic inputs of the given (dtype, shape) types: runs
        the plugin's make_node and infer_shape. Returns (inputs, outputs) dlop variables."""
        inputs = [dlop.tensor("in%d" % i, dtype=dtype, shape=shape)
                  for i, (dtype, shape) in enumerate(types)]
        outputs = _as_list(self.dlop_op(*inputs, **dict(self.dlop_params)))
        return inputs, outputs

    def make_node(self, *inputs: Any) -> Apply:
        tensors = [pt.as_tensor_variable(x) for x in inputs]
        for i, t in enumerate(tensors):
            if not isinstance(t.type, TensorType):
                raise TypeError("dlop.%s: input %d must be a tensor, got %s"
                                % (self.op_name, i, t.type))
        types = [(t.type.dtype, tuple(t.type.shape)) for t in tensors]
        try:
            _, outputs = self._apply_dlop(types)
        except dlop.DlopError as error:
            # The plugin's own type error, raised while the PyTensor graph is built.
            raise TypeError("dlop.%s on inputs %s: %s" % (
                self.op_name, ", ".join("%s%s" % (d, s) for d, s in types), error)) from error
        out_types = []
        for o in outputs:
            try:
                out_types.append(TensorType(dtype=o.dtype, shape=tuple(o.shape)))
            except TypeError as error:
                raise TypeError("dlop.%s gives a %s output, which PyTensor has no dtype for"
                                % (self.op_name, o.dtype)) from error
        return Apply(self, tensors, [t() for t in out_types])

    def _function_for(self, node: Apply) -> Any:
        """The CPU function compiled for this node's input types (cached per signature)."""
        key = tuple((i.type.dtype, tuple(i.type.shape)) for i in node.inputs)
        function = self._functions.get(key)
        if function is None:
            with self._lock:
                function = self._functions.get(key)
                if function is None:
                    inputs, outputs = self._apply_dlop(key)
                    function = dlop.function(inputs, outputs, device="cpu")
                    self._functions[key] = function
        return function

    def perform(self, node: Apply, inputs: Sequence[np.ndarray], output_storage: list) -> None:
        function = self._function_for(node)
        results = _as_list(function(*inputs))
        for storage, result, variable in zip(output_storage, results, node.outputs):
            array = np.asarray(result)
            if array.dtype != np.dtype(variable.type.dtype):
                raise TypeError("dlop.%s returned %s, its node declared %s"
                                % (self.op_name, array.dtype, variable.type.dtype))
            storage[0] = array

    def infer_shape(self, fgraph: Any, node: Apply, input_shapes: Sequence[Sequence[Any]]
                    ) -> list[tuple]:
        """Output shapes from dlop's shape rule.

        Dims the graph's static types know are constants. For the others the rule is probed:
        the unknown input dims get distinct values (two rounds of different values); an output
        dim that follows exactly one input dim in both rounds is that input's symbolic dim, one
        that stays the same is that constant. Anything else (a dim that depends on several
        unknown ones, e.g. a broadcast of two unknown dims, or a rule that refuses distinct
        values) raises ShapeError, and PyTensor falls back to the shape of the computed
        output, which is correct but needs the op to run.
        """
        static_outputs = [tuple(o.type.shape) for o in node.outputs]
        if all(d is not None for shape in static_outputs for d in shape):
            return [tuple(int(d) for d in shape) for shape in static_outputs]
        unknown = [(i, k) for i, inp in enumerate(node.inputs)
                   for k, d in enumerate(inp.type.shape) if d is None]
        rounds = []
        for base in _PROBE_BASES:
            values = {dim: base + n * _PROBE_STEP for n, dim in enumerate(unknown)}
            types = [(inp.type.dtype,
                      tuple(values.get((i, k), d) for k, d in enumerate(inp.type.shape)))
                     for i, inp in enumerate(node.inputs)]
            try:
                _, outputs = self._apply_dlop(types)
            except dlop.DlopError as error:
                raise ShapeError("dlop.%s: shape rule refused distinct probe sizes (%s)"
                                 % (self.op_name, error)) from error
            rounds.append((values, [tuple(o.shape) for o in outputs]))
        result = []
        for o, static in enumerate(static_outputs):
            dims = []
            for j, d in enumerate(static):
                if d is not None:
                    dims.append(int(d))
                    continue
                probed = [shapes[o][j] for _, shapes in rounds]
                sources = [[dim for dim, v in values.items() if v == shapes[o][j]]
                           for values, shapes in rounds]
                if sources[0] and sources[0] == sources[1] and len(sources[0]) == 1:
                    i, k = sources[0][0]
                    dims.append(input_shapes[i][k])
                elif probed[0] == probed[1] and probed[0] is not None and probed[0] >= 0:
                    dims.append(int(probed[0]))
                else:
                    raise ShapeError("dlop.%s: output %d dim %d depends on several unknown "
                                     "input dims (probed %s)" % (self.op_name, o, j, probed))
            result.append(tuple(dims))
        return result


_backends_lock = threading.Lock()
_backends_registered = False


def _register_backends() -> None:
    """Teach PyTensor's JAX and Numba backends about DlopOp, once, for the backends that are
    installed (imported here, not at import of this module: each import takes a second)."""
    global _backends_registered
    with _backends_lock:
        if _backends_registered:
            return
        _backends_registered = True
        import importlib.util
        if importlib.util.find_spec("jax") is not None:
            from pytensor.link.jax.dispatch import jax_funcify

            @jax_funcify.register(DlopOp)
            def _jax_funcify_dlop(op, node=None, **kwargs):
                import dlop.jax
                if not dlop.jax.available():
                    raise NotImplementedError(dlop.jax.unavailable_reason())
                return dlop.jax.op(op.op_name, **dict(op.dlop_params))
        if importlib.util.find_spec("numba") is not None:
            import numba
            from pytensor.link.numba.dispatch.basic import (get_numba_type, numba_funcify,
                                                             numba_njit)

            @numba_funcify.register(DlopOp)
            def _numba_funcify_dlop(op, node=None, **kwargs):
                from dlop import _numba_dispatch
                try:
                    return _numba_dispatch.funcify(
                        op.op_name, dict(op.dlop_params),
                        [(i.type.dtype, i.type.ndim) for i in node.inputs],
                        [(o.type.dtype, o.type.ndim) for o in node.outputs])
                except (dlop.UnsupportedError, NotImplementedError):
                    pass  # view ops and float16: perform, through objmode (module doc)
                single = len(node.outputs) == 1
                if single:
                    signature = get_numba_type(node.outputs[0].type)
                else:
                    signature = numba.types.Tuple([get_numba_type(o.type) for o in node.outputs])

                def python_perform(inputs):
                    storage = [[None] for _ in node.outputs]
                    op.perform(node, inputs, storage)
                    return storage[0][0] if single else tuple(s[0] for s in storage)

                @numba_njit
                def perform(*inputs):
                    with numba.objmode(ret=signature):
                        ret = python_perform(inputs)
                    return ret

                return perform


def as_op(op: Any, **params: Any) -> DlopOp:
    """Wrap a dlop op (an object from ``dlop.ops``, its name, or a ``dlop.Op`` instance) as a
    PyTensor Op.

    Keyword arguments are the op's parameters; unset ones take their declared defaults. The
    result is called on PyTensor variables: ``as_op(dlop.ops.exp)(x)``.
    """
    resolved = _resolve_op(op)
    _register_backends()
    return DlopOp(resolved.name, _full_params(resolved, params))
