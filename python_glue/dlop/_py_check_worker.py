"""One check group of dlop.check on a dlop.Op (docs/source-ops.md, "Checking"), in its own process.

``python -m dlop._py_check_worker`` reads a JSON spec on stdin (written by dlop._py_check:
where the op's class lives, the instance's state, the group, the checks to run), rebuilds the
op and runs the checks one after another, printing one line per event so the parent can name
the check that was running when this process died:

    RUN <check>            PASS <check>          FAIL <check>\t<message>
    SKIP <check>\t<note>   NOTE <text>           DTYPES <json list>   (the "op" group only)

The checks call the op's own stages, the objects the C trampolines of python_glue/src/py_op.c
call (make_node, infer_shape, make_thunk and its launch, perform's thunk), with tensors this
process made: poisoned outputs, inputs it compares byte for byte after each run. The strided
check goes through the registered op (an eager call), whose host makes strided inputs
contiguous for the op.
"""
from __future__ import annotations

import base64
import importlib
import importlib.util
import json
import pickle
import sys
import traceback

DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64")
# The same-shape family of the C suite's signatures (docs/compliance.md), by rank.
PROBE_SHAPES = ((), (5,), (5, 3), (5, 3, 7), (5, 3, 7, 9))
RUN_SHAPES = ((), (0,), (1,), (7,), (3, 0, 5), (5, 3), (2, 3, 5), (2, 1, 3, 4), (131075,))
STRIDED_SHAPES = ((7,), (5, 3), (2, 3, 5), (2, 1, 3, 4), (131075,))
TOLERANCE = {"float16": 2e-3, "float32": 1e-5, "float64": 1e-13}
POISON_A = {"float16": 0x7EAB, "float32": 0x7FABABAB, "float64": 0x7FFABABABABABABA}


def _emit(*words: str) -> None:
    print("\t".join(words).replace("\n", " "), flush=True)


class Failed(Exception):
    """A check's verdict: the message after 'op X, check Y, device dtype, shape S: '."""


def load_op(spec: dict):
    """The op the parent checks: its class imported (or its file loaded under its module's
    name), an instance made without __init__ and given the parent instance's attributes."""
    sys.path[:] = spec["sys_path"]
    name, path = spec["module"], spec["file"]
    module = sys.modules.get(name)
    if module is None and name != "__main__":
        try:
            module = importlib.import_module(name)
        except ImportError:
            module = None
    if module is None or not hasattr(module, spec["qualname"].split(".")[0]):
        load_as = "__dlop_check_main__" if name == "__main__" else name
        found = importlib.util.spec_from_file_location(load_as, path)
        module = importlib.util.module_from_spec(found)
        sys.modules[load_as] = module
        found.loader.exec_module(module)
    cls = module
    for part in spec["qualname"].split("."):
        cls = getattr(cls, part)
    op = cls.__new__(cls)
    op.__dict__.update(pickle.loads(base64.b64decode(spec["state"])))
    return op


def num_inputs(op) -> int:
    """make_node's positional inputs (2 for *inputs, as the C suite gives variadic ops)."""
    from ._py_op import num_inputs
    return num_inputs(op)


def shape_text(shape) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


class Group:
    def __init__(self, spec: dict):
        import numpy
        from . import _C
        from ._py_op import _Callbacks
        self.np, self._C = numpy, _C
        self.spec = spec
        self.op = load_op(spec)
        self.n = num_inputs(self.op)
        self.device, self.dtype = spec.get("device"), spec.get("dtype")
        self.callbacks = _Callbacks(self.op, spec["name"], 0)
        self.rng = numpy.random.default_rng(spec["seed"])

    # ---- types ----------------------------------------------------------------------------
    def types(self, dtype: str, shape) -> list:
        return [(dtype, tuple(shape))] * self.n

    def probe(self, dtype: str) -> list:
        """The ranks make_node accepts for dtype (every input that dtype and shape)."""
        ranks = []
        for shape in PROBE_SHAPES:
            try:
                self.callbacks.make_node(self.types(dtype, shape))
                ranks.append(len(shape))
            except Exception:
                pass
        return ranks

    def shapes(self, pool=RUN_SHAPES) -> list:
        ranks = self.spec["ranks"]
        return [s for s in pool if len(s) in ranks]

    # ---- tensors --------------------------------------------------------------------------
    def values(self, dtype: str, shape):
        np = self.np
        if dtype == "bool":
            return self.rng.integers(0, 1, size=shape, endpoint=True).astype(bool)
        if dtype.startswith("float"):
            return self.rng.uniform(-2, 2, size=shape).astype(dtype)
        low, high = (0, 40) if dtype == "uint8" else (-20, 20)
        return self.rng.integers(low, high, size=shape, endpoint=True).astype(dtype)

    def inputs(self, shape) -> list:
        return [self.readonly(self.values(self.dtype, shape)) for _ in range(self.n)]

    @staticmethod
    def readonly(array):
        array.setflags(write=False)  # as dlop gives them to perform
        return array

    def poisoned(self, dtype: str, shape, first: bool):
        np = self.np
        out = np.empty(shape, dtype=dtype)
        raw = out.view(np.uint8) if out.ndim else out.reshape(1).view(np.uint8)
        if first and dtype in POISON_A:
            bits = out.view(f"uint{out.itemsize * 8}")
            bits[...] = POISON_A[dtype]
        else:
            raw[...] = 0xAB if first else 0x5C
        return out

    def rule(self, shape) -> list:
        """[(dtype, shape)] of each output: make_node's dtype, infer_shape's shape."""
        types = self.types(self.dtype, shape)
        outs = self.callbacks.make_node(types)
        shapes = self.callbacks.infer_shape(types, outs)
        return [(d, tuple(s)) for (d, _), s in zip(outs, shapes)]

    def run(self, device: str, inputs: list, outputs: list) -> list:
        """One run of a fresh thunk on device; the outputs as NumPy arrays after it."""
        types = [(str(a.dtype), a.shape) for a in inputs]
        outs = self.callbacks.make_node(types)
        thunk = self.callbacks.make_thunk(device, types, outs)
        if device == "cpu":
            thunk(tuple(inputs), tuple(outputs), None)
            return outputs
        _C = self._C
        on_device = [_C.asarray(a, device) for a in inputs]
        results = [_C.asarray(o, device) for o in outputs]
        thunk(tuple(on_device), tuple(results), _C.stream_handle(device))
        _C.synchronize(device)
        return [self.np.asarray(r.to("cpu")) for r in results]

    def fresh_run(self, device: str, inputs: list, first: bool = True, copy: bool = True) -> list:
        """A run on fresh outputs poisoned with the first or second pattern, and on copies of
        the inputs (a run that writes its inputs fails inputs_untouched alone) unless not copy."""
        shape = inputs[0].shape if inputs else ()
        if copy:
            inputs = [self.readonly(a.copy()) for a in inputs]
        outputs = [self.poisoned(d, s, first) for d, s in self.rule(shape)]
        try:
            return self.run(device, inputs, outputs)
        except Exception as error:
            raise Failed(f"the run raised {type(error).__name__}: {error}") from error

    # ---- comparisons ----------------------------------------------------------------------
    def differ(self, expected, actual, dtype: str, what: str) -> str:
        """'' when equal within the dtype's tolerance (NaN meets NaN), else the first elements."""
        np = self.np
        e, a = expected.reshape(-1), actual.reshape(-1)
        if dtype in TOLERANCE:
            e64, a64 = e.astype(np.float64), a.astype(np.float64)
            tol = TOLERANCE[dtype]
            with np.errstate(invalid="ignore"):
                ok = (np.isnan(e64) & np.isnan(a64)) | (e64 == a64) | (
                    np.isfinite(e64) & (np.abs(e64 - a64) <= tol + tol * np.abs(e64)))
        else:
            ok = e == a
        bad = np.flatnonzero(~ok)
        if bad.size == 0:
            return ""
        return (f"{bad.size} of {e.size} elements of {what} differ"
                f"{' beyond the dtype' + chr(39) + 's tolerance' if dtype in TOLERANCE else ''}: "
                + "; ".join(self.element(expected, i, f"expected {e[i].item()!r}, got {a[i].item()!r}")
                            for i in bad[:4]))

    def element(self, array, flat: int, text: str) -> str:
        index = self.np.unravel_index(flat, array.shape) if array.ndim else ()
        return "[" + ", ".join(str(int(i)) for i in index) + f"] {text}"

    # ---- the checks -----------------------------------------------------------------------
    def make_node_is_pure(self, shape):
        for dtype in self.spec["dtypes"]:
            for unknown in (False, True):
                s = tuple(None for _ in shape) if unknown else shape
                types = self.types(dtype, s)
                first, second = self.callbacks.make_node(types), self.callbacks.make_node(types)
                if first != second:
                    raise Failed(f"{dtype} {shape_text(s)}: make_node gave {first}, then {second} "
                                 "for the same inputs (no state may carry over between calls)")

    def infer_shape_agrees(self, shape):
        np = self.np
        types = self.types(self.dtype, shape)
        outs = self.callbacks.make_node(types)
        shapes = self.callbacks.infer_shape(types, outs)
        for i, ((dtype, known), got) in enumerate(zip(outs, shapes)):
            if len(got) != len(known):
                raise Failed(f"infer_shape gives output {i} shape {shape_text(got)}, of another "
                             f"rank than make_node's {shape_text(known)}")
            for d, (k, g) in enumerate(zip(known, got)):
                if g is None or g < 0:
                    raise Failed(f"infer_shape gives output {i} shape {shape_text(got)}: every "
                                 "dim must be known and non-negative when the inputs' are")
                if k is not None and k != g:
                    raise Failed(f"infer_shape gives output {i} shape {shape_text(got)}, but "
                                 f"make_node said {shape_text(known)}: dim {d} is {g}, not {k}")
        again = self.callbacks.infer_shape(types, outs)
        if [tuple(s) for s in again] != [tuple(s) for s in shapes]:
            raise Failed(f"infer_shape gave {shapes}, then {again} for the same inputs")
        if self.device != "cpu" or not callable(getattr(type(self.op), "perform", None)):
            return
        # The real run: what perform returns against the rules.
        node = self.callbacks._node(types)
        storage = [[None] for _ in outs]
        self.op.perform(node, self.inputs(shape), storage)
        for i, (cell, (dtype, _), want) in enumerate(zip(storage, outs, shapes)):
            value = np.asarray(cell[0])
            if value.shape != tuple(want):
                raise Failed(f"perform gives output {i} shape {shape_text(value.shape)}, but "
                             f"infer_shape says {shape_text(want)}")
            if str(value.dtype) != dtype:
                raise Failed(f"perform gives output {i} of dtype {value.dtype}, but make_node "
                             f"says {dtype}")

    def every_output_element_written(self, shape):
        np = self.np
        inputs = self.inputs(shape)
        first = self.fresh_run(self.device, inputs, True)
        second = self.fresh_run(self.device, inputs, False)
        for i, ((dtype, s), a, b) in enumerate(zip(self.rule(shape), first, second)):
            pa, pb = self.poisoned(dtype, s, True), self.poisoned(dtype, s, False)
            bits = f"uint{max(a.itemsize, 1) * 8}"
            never = (a.view(bits) == pa.view(bits)) & (b.view(bits) == pb.view(bits))
            idx = np.flatnonzero(never.reshape(-1))
            if idx.size:
                raise Failed(f"{idx.size} of {never.size} elements of output {i} were never "
                             f"written (element {idx[0]} first, {idx[-1]} last): they still hold "
                             "the poison pattern of each of two runs")
            if dtype == "bool":
                held = a.view(np.uint8).reshape(-1)
                wrong = np.flatnonzero(held > 1)
                if wrong.size:
                    raise Failed(f"output {i} is bool but its element {wrong[0]} holds "
                                 f"{held[wrong[0]]} (bool elements must be 0 or 1)")

    def inputs_untouched(self, shape):
        np = self.np
        inputs = self.inputs(shape)
        before = [a.copy() for a in inputs]
        self.fresh_run(self.device, inputs, copy=False)
        for i, (old, new) in enumerate(zip(before, inputs)):
            changed = np.flatnonzero((old.reshape(-1) != new.reshape(-1)) &
                                     ~(_isnan(np, old) & _isnan(np, new)))
            if changed.size:
                k = changed[0]
                raise Failed(f"the run changed input {i}: " + self.element(
                    old, k, f"(flat index {k}) went from {old.reshape(-1)[k].item()!r} to "
                    f"{new.reshape(-1)[k].item()!r}") + f"; {changed.size} of its {old.size} "
                    "elements changed; inputs are read-only")

    def strided_inputs(self, shape):
        np, _C = self.np, self._C
        base = [self.values(self.dtype, shape) for _ in range(self.n)]
        expected = self.eager([_C.asarray(a.copy(), self.device) for a in base])
        wide = []
        for a in base:
            w = np.zeros(tuple(d * 2 for d in shape), dtype=a.dtype)
            w[tuple(slice(None, None, 2) for _ in shape)] = a
            wide.append(w[tuple(slice(None, None, 2) for _ in shape)])
        reversed_ = [np.ascontiguousarray(a[tuple(slice(None, None, -1) for _ in shape)])
                     [tuple(slice(None, None, -1) for _ in shape)] for a in base]
        for layout, arrays in (("every other element (strides x2)", wide),
                               ("reversed (negative strides)", reversed_)):
            got = self.eager([_C.asarray(a.copy() if a.flags.c_contiguous else a, self.device)
                              for a in arrays])
            for i, (e, g) in enumerate(zip(expected, got)):
                text = self.differ(e, g, str(e.dtype), f"output {i}")
                if text:
                    raise Failed(f"inputs laid out {layout} give other results than contiguous "
                                 f"ones: {text}")

    def eager(self, arrays: list) -> list:
        try:
            result = self.op(*arrays)
        except Exception as error:
            raise Failed(f"the call raised {type(error).__name__}: {error}") from error
        result = result if isinstance(result, tuple) else (result,)
        return [self.np.asarray(r.to("cpu")) for r in result]

    def deterministic_run_to_run(self, shape):
        inputs = self.inputs(shape)
        first, second = self.fresh_run(self.device, inputs), self.fresh_run(self.device, inputs)
        for i, (a, b) in enumerate(zip(first, second)):
            text = self.differ(a, b, str(a.dtype), f"output {i}")
            if text:
                raise Failed(f"two runs on the same inputs differ: {text} (expected: the first "
                             "run's, got: the second's)")

    def cuda_matches_cpu(self, shape):
        inputs = self.inputs(shape)
        cpu, cuda = self.fresh_run("cpu", inputs), self.fresh_run(self.device, inputs)
        for i, (a, b) in enumerate(zip(cpu, cuda)):
            text = self.differ(a, b, str(a.dtype), f"output {i}")
            if text:
                raise Failed("CUDA results (expected: the CPU thunk's) disagree: " + text)


def _isnan(np, a):
    return np.isnan(a.reshape(-1)) if a.dtype.kind == "f" else np.zeros(a.size, dtype=bool)


# check name -> (shapes it runs on: "probe" one shape per accepted rank, "run", "strided")
PER_SHAPE = {"make_node_is_pure": "probe", "infer_shape_agrees": "run",
             "every_output_element_written": "run", "inputs_untouched": "run",
             "strided_inputs": "strided", "deterministic_run_to_run": "few",
             "cuda_matches_cpu": "run"}


def run_check(group: Group, check: str) -> None:
    pool = {"probe": PROBE_SHAPES, "run": RUN_SHAPES, "strided": STRIDED_SHAPES,
            "few": ((7,), (2, 3, 5), (131075,))}[PER_SHAPE[check]]
    where = f"{group.device} {group.dtype}" if group.device else "op"
    for shape in group.shapes(pool):
        try:
            getattr(group, check)(shape)
        except Failed as failure:
            _emit("FAIL", check, f"op {group.spec['name']}, check {check}, {where}, shape "
                                 f"{shape_text(shape)}: {failure}")
            return
        except Exception as error:
            _emit("FAIL", check, f"op {group.spec['name']}, check {check}, {where}, shape "
                                 f"{shape_text(shape)}: {type(error).__name__}: {error}")
            return
    _emit("PASS", check)


def main() -> int:
    spec = json.load(sys.stdin)
    try:
        group = Group(spec)
    except Exception:
        _emit("ERROR", "the op could not be rebuilt in the check's process: " +
              traceback.format_exc(limit=3))
        return 3
    if spec["group"] == "op":
        accepted, ranks = [], set()
        for dtype in DTYPES:
            found = group.probe(dtype)
            if found:
                accepted.append(dtype)
                ranks.update(found)
        _emit("DTYPES", json.dumps({"dtypes": accepted, "ranks": sorted(ranks)}))
        if not accepted:
            return 0
        spec["dtypes"], spec["ranks"] = accepted, sorted(ranks)
    for check in spec["checks"]:
        _emit("RUN", check)
        run_check(group, check)
    return 0


if __name__ == "__main__":
    sys.exit(main())
