"""Ops written in Python: subclasses of ``dlop.Op`` in Theano's shape (docs/source-ops.md,
"dlop.Op")::

    class DoubleOp(dlop.Op):
        __props__ = ()
        def make_node(self, x):                      # the type rule
            return dlop.Apply(self, [x], [x.type()])
        def infer_shape(self, node, input_shapes):   # the shape rule
            return [input_shapes[0]]
        def perform(self, node, inputs, output_storage):   # NumPy, the CPU
            output_storage[0][0] = inputs[0] * 2
        def make_thunk(self, node, device):          # CUDA: returns launch(inputs, outputs, stream)
            ...

Each class and value of its ``__props__`` is one op in the registry, an in-process plugin
whose stages are C trampolines calling back here (python_glue/src/py_op.c), so instances build
graph nodes, run eagerly on arrays and compile into functions on both devices like plugin ops.
"""
from __future__ import annotations

import inspect
import operator
import re
from typing import Any

from . import _C, _errors
from ._graph import TensorType, Variable
from ._ops import registry_lock

_registered: dict = {}  # (class, props key) -> the loaded Op (dlop.ops.<name>)
_instances: dict = {}  # registered name -> the instance it was registered for (dlop.check)


class Apply:
    """What make_node returns, as Theano's ``Apply(op, inputs, outputs)``: the op, its input
    Variables and its output Variables (``x.type()``, ``dlop.TensorType(dtype, shape)()``),
    whose dtypes and shapes are the op's type rule for these inputs."""

    __slots__ = ("op", "inputs", "outputs")

    def __init__(self, op: Any, inputs: list, outputs: list):
        self.op, self.inputs, self.outputs = op, list(inputs), list(outputs)

    def __repr__(self) -> str:
        return f"Apply({self.op!r}, {self.inputs}, {self.outputs})"


def _props_key(op: "Any") -> tuple:
    """What makes two instances one op: their class's __props__ values (a class without
    __props__ has none: all its instances are one op)."""
    names = type(op).__dict__.get("_dlop_props", ())
    try:
        key = tuple(getattr(op, name) for name in names)
        hash(key)
    except AttributeError as error:
        raise _errors.type_error(f"{type(op).__name__}: __props__ names {error.name!r}, which "
                                 "the instance does not have: set it in __init__") from None
    except TypeError:
        raise _errors.type_error(f"{type(op).__name__}: __props__ values {key!r} are not all "
                                 "hashable: props must be hashable (ints, strs, tuples)") from None
    return ("props", key)


def _eq(self, other: Any) -> bool:
    return type(self) is type(other) and _props_key(self) == _props_key(other)


def _hash(self) -> int:
    return hash((type(self), _props_key(self)))


def _str(self) -> str:
    names = type(self).__dict__.get("_dlop_props", ())
    if not names:
        return type(self).__name__
    return f"{type(self).__name__}{{{', '.join(f'{n}={getattr(self, n)!r}' for n in names)}}}"


def _call(self, *args: Any, **kwargs: Any):
    if kwargs:
        raise _errors.type_error(
            f"{type(self).__name__} takes no keyword arguments (got {', '.join(kwargs)}): a "
            "Python op's parameters are its __props__, set on the instance")
    return _registered_op(self, args)(*args)


# What every subclass gets unless it, or a base of it below dlop.Op, defines its own.
_GIVEN = {"__eq__": _eq, "__hash__": _hash, "__repr__": _str, "__call__": _call}


def _defined_below_op(cls: type, name: str) -> bool:
    """Whether cls or one of its bases before dlop.Op in the MRO defines name itself (a
    __hash__ = None that Python set for a class defining __eq__ counts: it is unhashable)."""
    from ._ops import Op
    for klass in cls.__mro__:
        if klass is Op:
            return False
        if name in klass.__dict__ and klass.__dict__[name] is not _GIVEN[name]:
            return True
    return False


def prepare_class(cls: type) -> None:
    """Called for every subclass of dlop.Op: checks __props__ (none: ()) and gives the class
    Theano's equality and hashing (same props, equal ops), its repr and its call, where the
    class and its bases below dlop.Op define none of their own."""
    props = cls.__dict__.get("__props__", getattr(cls, "__props__", None))
    if props is not None and (isinstance(props, str) or not isinstance(props, tuple) or not all(
            isinstance(name, str) for name in props)):
        raise _errors.type_error(f"{cls.__name__}.__props__ must be a tuple of attribute "
                                 f"names (str), got {props!r}")
    cls._dlop_props = () if props is None else props
    cls._dlop_props_declared = props is not None
    for name, method in _GIVEN.items():
        if not _defined_below_op(cls, name):
            setattr(cls, name, method)


def _defines(op: Any, name: str) -> bool:
    return callable(getattr(type(op), name, None))


def _as_variable(value: Any) -> Variable:
    """A call's argument as make_node sees it: Variables as they are, arrays as Variables of
    their dtype and shape (the first call learns the number of outputs from them)."""
    if isinstance(value, Variable):
        return value
    array = value if isinstance(value, _C.Array) else _C.asarray(value)
    return Variable("x", array.dtype, array.shape)


def _op_name(cls: type) -> str:
    """A registry name for a new op of cls: its class name (ASCII identifier characters), with
    _2, _3, ... when another op (another props value, another class) has it. The caller holds
    registry_lock until the op is registered under it."""
    from ._ops import ops
    ops._refresh()
    base = re.sub(r"[^A-Za-z0-9_]", "_", cls.__name__)[:_NAME_CHARS]
    if not re.match(r"[A-Za-z_]", base):
        base = "op_" + base
    name, n = base, 1
    while name in ops:
        n += 1
        name = f"{base}_{n}"
    return name


# The registry takes origins of at most 200 bytes (loader/inprocess.c): a label, not a record.
_ORIGIN_BYTES = 190
# Registry names are shown cut at 64 characters in messages: longer class names are cut here.
_NAME_CHARS = 60


def _origin(text: str) -> str:
    """The plugin's origin label: one line, cut to the registry's limit (props can be long)."""
    text = "".join(c if c >= " " and c != "\x7f" else " " for c in text)
    data = text.encode()
    if len(data) <= _ORIGIN_BYTES:
        return text
    return data[:_ORIGIN_BYTES - 3].decode(errors="ignore") + "..."


def _check_stateless(op: Any) -> None:
    """A class without __props__ is one op for all its instances: an instance with attributes
    would silently run with the first instance's, so it is refused, saying what to write."""
    state = getattr(op, "__dict__", None)
    if state:
        names = ", ".join(sorted(state))
        raise _errors.type_error(
            f"{type(op).__name__} has no __props__, so all its instances are one op (as if "
            f"__props__ = ()), but this one has attributes ({names}): name those that make the "
            f"op in __props__ (__props__ = ({', '.join(repr(n) for n in sorted(state))},)), or "
            "write __props__ = () if none of them changes what it computes")


def _registered_op(op: Any, args: tuple):
    """The loaded op (dlop.ops.<name>) for op's class and props, registered on first use."""
    if not type(op)._dlop_props_declared:
        _check_stateless(op)
    key = (type(op), _props_key(op))
    loaded = _registered.get(key)
    if loaded is not None:
        return loaded
    with registry_lock:
        loaded = _registered.get(key)
        if loaded is not None:
            return loaded
        cls = type(op)
        if not _defines(op, "make_node"):
            raise _errors.type_error(f"{cls.__name__} defines no make_node(self, *inputs): the "
                                     "type rule every op needs")
        cpu, cuda = _defines(op, "perform"), _defines(op, "make_thunk")
        if not cpu and not cuda:
            raise _errors.type_error(
                f"{cls.__name__} defines neither perform (the CPU) nor make_thunk (CUDA): it "
                "could run nowhere")
        try:
            node = _Callbacks(op, "?", 0)._node_for(tuple(_as_variable(a) for a in args))
        except Exception as error:
            raise _stage_error(cls.__name__, "make_node", error) from error
        name = _op_name(cls)
        callbacks = _Callbacks(op, name, len(node.outputs))
        origin = _origin(f"dlop.Op {cls.__module__}.{cls.__qualname__} {_str(op)}")
        doc = (cls.__doc__ or f"{cls.__name__}, an op written in Python").strip()
        _C.register_python_op(name, origin, doc, len(node.outputs), cpu, cuda, callbacks)
        from ._ops import ops
        loaded = _registered[key] = ops._added(name)
        _instances[name] = op
        return loaded


def num_inputs(op: Any) -> int:
    """make_node's positional inputs (2 for *inputs, as the C suite gives variadic ops): the
    registered op is variadic, so callers that make inputs for it ask here."""
    count = 0
    for p in inspect.signature(op.make_node).parameters.values():
        if p.kind == p.VAR_POSITIONAL:
            return 2
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            count += 1
    return count


def instance_of(op: Any) -> Any:
    """The dlop.Op instance behind op: op itself when it is one, the instance a registered op
    (dlop.ops.<name>) was registered for, None for any other op."""
    from ._ops import Op
    if not isinstance(op, Op):
        return None
    if type(op) is not Op:
        return op
    return _instances.get(op.name)


def accepts(op: Any, types: list) -> bool:
    """Whether op's make_node takes inputs of these (dtype, shape) types."""
    try:
        _Callbacks(op, "?", 0)._node(types)
    except Exception:  # noqa: BLE001 - any refusal is a no, as in dlop.check's probe
        return False
    return True


# The signatures registered_op_of tries on an op not registered yet: every input one dtype, of
# the same-shape family of the C suite's signatures, ranks 0 to 4.
_PROBE_DTYPES = ("float32", "float64", "int32", "int64", "float16", "bfloat16", "int8", "int16",
                 "uint8", "bool")
_PROBE_SHAPES = ((), (5,), (5, 3), (5, 3, 7), (5, 3, 7, 9))


def registered_op_of(op: Any, who: str):
    """The registered op (dlop.ops.<name>) of a dlop.Op instance, registered now when it is not
    yet: on the first probe signature its make_node takes (who names the caller in the error
    when it takes none)."""
    key = (type(op), _props_key(op))
    loaded = _registered.get(key)
    if loaded is not None:
        return loaded
    n = num_inputs(op)
    for dtype in _PROBE_DTYPES:
        for shape in _PROBE_SHAPES:
            types = [(dtype, shape)] * n
            if accepts(op, types):
                return _registered_op(op, tuple(Variable(f"x{i}", d, s)
                                                for i, (d, s) in enumerate(types)))
    raise _errors.type_error(
        f"{who}: {type(op).__name__} is not registered yet, and its make_node took none of the "
        f"signatures tried ({n} inputs of one dtype, ranks 0 to 4): call it once on inputs it "
        "takes (that registers it), then pass it again")


# The dlop classes a stage's exception keeps, in the order py_op.c's status_of tries them; the
# others (PluginError, the base DlopError) follow their builtin base or become KernelError.
_KEPT_STATUS = {_C.ShapeError: "DLOP_SHAPE_ERROR", _C.NotFoundError: "DLOP_NOT_FOUND",
                _C.NoDeviceError: "DLOP_NO_DEVICE", _C.DeviceMismatchError: "DLOP_DEVICE_MISMATCH",
                _C.UnsupportedError: "DLOP_UNSUPPORTED", _C.OutOfMemoryError: "DLOP_OUT_OF_MEMORY"}


def _stage_error(name: str, stage: str, error: Exception) -> Exception:
    """What the C trampolines make of an exception raised in a stage (py_op.c), for the one
    make_node call made here, before the op is registered: the same class and message (a
    KeyboardInterrupt or SystemExit is not caught there, nor turned into a dlop error in C)."""
    kept = next((c for c in _KEPT_STATUS if isinstance(error, c)), None)
    if kept is not None:
        cls, status = kept, _KEPT_STATUS[kept]
    elif isinstance(error, TypeError):
        cls, status = _C.DlopTypeError, "DLOP_TYPE_ERROR"
    elif isinstance(error, MemoryError):
        cls, status = _C.OutOfMemoryError, "DLOP_OUT_OF_MEMORY"
    elif isinstance(error, ValueError):
        cls, status = _C.InvalidArgumentError, "DLOP_INVALID_ARGUMENT"
    else:
        cls, status = _C.KernelError, "DLOP_PLUGIN_ERROR"
    return _errors.make(cls, status, f"op '{name}': {stage} raised {type(error).__qualname__}: "
                                     f"{error}")


def _shape(value: Any, what: str) -> tuple:
    """A shape from infer_shape: sizes must be integers (operator.index), never coerced, so
    2.5 or "12" is an error rather than a buffer of another size than the kernel writes."""
    try:
        if isinstance(value, (str, bytes)):
            raise TypeError
        return tuple(None if d is None else operator.index(d) for d in value)
    except TypeError:
        raise _errors.type_error(f"{what} is {value!r}: expected a sequence of integer sizes "
                                 "(ints, or None where unknown)") from None


class _Callbacks:
    """What the C trampolines call: the op's stages on (dtype, shape) lists."""

    def __init__(self, op: Any, name: str, num_outputs: int):
        self.op, self.name, self.num_outputs = op, name, num_outputs

    def _node_for(self, inputs: tuple) -> Apply:
        node = self.op.make_node(*inputs)
        outputs = getattr(node, "outputs", None)
        if outputs is None:
            raise _errors.type_error(
                f"{type(self.op).__name__}.make_node returned {node!r}: expected "
                "dlop.Apply(self, inputs, outputs)")
        for index, out in enumerate(outputs):
            if isinstance(out, TensorType):
                outputs[index] = out = out()
            if not isinstance(out, Variable):
                raise _errors.type_error(
                    f"{type(self.op).__name__}.make_node: output {index} is {out!r}: expected a "
                    "Variable (x.type(), dlop.TensorType(dtype, shape)())")
        if self.num_outputs and len(outputs) != self.num_outputs:
            raise _errors.type_error(
                f"{type(self.op).__name__}.make_node gave {len(outputs)} outputs; its first node "
                f"had {self.num_outputs}: an op has one number of outputs")
        return node

    def _node(self, types: list) -> Apply:
        return self._node_for(tuple(Variable(f"x{i}", d, s) for i, (d, s) in enumerate(types)))

    def make_node(self, types: list) -> list:
        return [(v.dtype, v.shape) for v in self._node(types).outputs]

    def infer_shape(self, input_types: list, output_types: list) -> list:
        node = self._node(input_types)
        if not _defines(self.op, "infer_shape"):
            # No shape rule: make_node's output shapes are the rule; they must be known at run
            # time, so an unknown size there says what to write.
            return [v.shape for v in node.outputs]
        shapes = self.op.infer_shape(node, [s for _, s in input_types])
        if not isinstance(shapes, (list, tuple)):
            raise _errors.type_error(f"{type(self.op).__name__}.infer_shape returned {shapes!r}: "
                                     "expected a list of shapes, one per output")
        return [_shape(s, f"infer_shape's shape for output {i}") for i, s in enumerate(shapes)]

    def make_thunk(self, device: str, input_types: list, output_types: list):
        node = self._node(input_types)
        if device == "cpu":
            return _perform_thunk(self.op, node)
        launch = self.op.make_thunk(node, device)
        if not callable(launch):
            raise _errors.type_error(
                f"{type(self.op).__name__}.make_thunk returned {launch!r}: expected a callable "
                "launch(inputs, outputs, stream)")
        return launch


def _perform_thunk(op: Any, node: Apply):
    """The CPU thunk of an op with perform: NumPy views of the inputs (read-only) in, each
    output_storage[i][0] checked against the output's dtype and shape and copied into it."""
    import numpy
    cls = type(op).__name__

    def run(inputs: tuple, outputs: tuple, stream: Any) -> None:
        arrays = [numpy.asarray(a) for a in inputs]
        storage = [[None] for _ in outputs]
        op.perform(node, arrays, storage)
        for index, (cell, out) in enumerate(zip(storage, outputs)):
            target = numpy.asarray(out)
            value = cell[0]
            if value is None:
                raise _errors.invalid(f"{cls}.perform left output_storage[{index}][0] None: it "
                                      "must set every output")
            value = numpy.asarray(value)
            if value.shape != target.shape:
                raise _errors.make(_C.ShapeError, "DLOP_SHAPE_ERROR",
                                   f"{cls}.perform: output {index} has shape {value.shape}; the "
                                   f"op's shape rule says {target.shape}")
            if value.dtype != target.dtype:
                raise _errors.type_error(f"{cls}.perform: output {index} is {value.dtype}; the "
                                         f"op's type rule says {target.dtype} (cast it)")
            target[...] = value

    return run
