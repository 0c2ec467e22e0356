"""What the framework adapters (dlop.jax, dlop.torch) share: finding an op, checking its
parameters, and its output types for concrete input types from the op's own make_node and
infer_shape (a framework's abstract evaluation / fake kernel)."""
from __future__ import annotations

from typing import Any, Sequence

from . import _errors, _py_op
from ._graph import tensor
from ._ops import Op, ops


def resolve(op: Any, adapter: str) -> Op:
    """The loaded dlop op for a name, an op from dlop.ops or a dlop.Op instance (its registered
    op, registered now if it was not)."""
    if isinstance(op, Op) and type(op) is not Op:
        return _py_op.registered_op_of(op, adapter)
    if isinstance(op, Op):
        return op
    if isinstance(op, str):
        if op not in ops:
            raise _errors.not_found(
                f"{adapter}: no loaded dlop op is named '{op}'; loaded ops: "
                f"{', '.join(sorted(o.name for o in ops))} (load more with dlop.load_plugin)")
        return getattr(ops, op)
    raise TypeError(f"{adapter}: expected a dlop op or its name (or a dlop.Op instance), got {op!r}")


def check_params(op: Op, params: dict, adapter: str) -> dict:
    """params with every key a declared parameter of op (the values are checked by the op's
    own make_node, through the graph)."""
    known = [p.name for p in op.params]
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise _errors.not_found(
            f"{adapter}: op '{op.name}' has no parameter(s) {', '.join(unknown)}; its "
            f"parameters: {', '.join(known) or '(none)'}")
    return dict(params)


def output_types(op: Op, inputs: Sequence[tuple[str, tuple]], params: dict,
                 adapter: str) -> list[tuple[str, tuple]]:
    """[(dtype, shape)] of op's outputs for inputs of these concrete (dtype, shape) types:
    make_node and infer_shape, through a dlop graph node. The op's own type errors come back as
    they are (dlop.DlopTypeError and friends)."""
    variables = [tensor(f"in{i}", dtype=dtype, shape=shape)
                 for i, (dtype, shape) in enumerate(inputs)]
    outputs = op(*variables, **params)
    if not isinstance(outputs, tuple):
        outputs = (outputs,)
    result = []
    for index, out in enumerate(outputs):
        shape = tuple(out.shape)
        if any(d is None for d in shape):
            raise _errors.type_error(
                f"{adapter}: op '{op.name}' leaves output {index}'s shape {shape} unknown for "
                f"the concrete inputs {list(inputs)}; its infer_shape must give every dim")
        result.append((out.dtype, shape))
    return result
