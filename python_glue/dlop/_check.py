"""dlop.check(op): the compliance suite (docs/compliance.md) on an op defined at run time.

The suite is the C one, dlop-check, not a Python copy of it.  It cannot dlopen an in-process
plugin, and it forks a process per check (or per op), which does not suit a Python process that
may have initialized CUDA (a forked child cannot use the parent's CUDA context) and whose other
threads may hold locks.  So for a ``dlop.elementwise`` op, dlop.check writes the op's
definition to a file and runs ``dlop-check --elementwise FILE``: dlop-check defines the same op
in its own process, through the same dlop_define_elementwise, and certifies that in-process
plugin with every check that applies (type and shape rules against real runs, poisoned outputs,
strided and negative-stride inputs, inputs untouched, determinism, the scalar body against the
op's own kernels, CPU-vs-CUDA parity when a GPU is usable), each in its own process.  A
``reference=`` callable is compared in this process, by dlop.testing.check_values.

A ``dlop.Op`` (an op written in Python) cannot be defined again in dlop-check's process: its
checks are dlop._py_check's, over its Python stages, with the same names and report format.
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile
from typing import Any, Callable, Iterable

from . import _C, _errors, _py_check, _py_op, _source
from ._ops import Op, _op

__all__ = ["check", "CheckFailed", "CheckReport"]

# A Check failure or error line: "file.c:15:F:cpu float32:check_name:0: message".
_FAILURE = re.compile(r"^[^:\s]+:\d+:[FE]:[^:]*:([A-Za-z0-9_]+):\d+: (.*)$")


class CheckReport:
    """What dlop.check found: ``passed``, ``failures`` (one line per failed check, naming op,
    check, device, dtype and shape), ``checks`` (the cases the reference was compared on) and
    ``output`` (dlop-check's whole report)."""

    def __init__(self, op: str, output: str, failures: list, compared: list, skipped: str):
        self.op, self.output, self.failures, self.compared = op, output, failures, compared
        self.skipped = skipped  # why CUDA was not checked, or ""
        self.passed = not failures

    def __repr__(self) -> str:
        state = "passed" if self.passed else f"{len(self.failures)} failed"
        return f"<dlop.CheckReport op {self.op}: {state}>"

    def __str__(self) -> str:
        if self.passed:
            return f"op {self.op}: every check passed" + (f" ({self.skipped})" if self.skipped else "")
        return f"op {self.op}: {len(self.failures)} check(s) failed:\n" + "\n".join(
            "  " + line for line in self.failures)


class CheckFailed(AssertionError):
    """Raised by dlop.check when a check failed; ``report`` is the CheckReport."""

    def __init__(self, report: CheckReport):
        super().__init__(str(report))
        self.report = report


def _program() -> str:
    """dlop-check of this installation: <prefix>/libexec/dlop/dlop-check, from libdlop's
    directory (<prefix>/lib or <prefix>/lib/<multiarch>); DLOP_CHECK_PROGRAM overrides it."""
    override = os.environ.get("DLOP_CHECK_PROGRAM")
    if override:
        return override
    library = _C.location("library")
    tried = []
    if library:
        libdir = os.path.dirname(library)
        for up in ("..", os.path.join("..", "..")):
            path = os.path.normpath(os.path.join(libdir, up, "libexec", "dlop", "dlop-check"))
            if os.access(path, os.X_OK):
                return path
            tried.append(path)
    raise _errors.not_found(
        "dlop.check: the compliance suite dlop-check is missing (looked for "
        f"{', '.join(tried) or 'it beside libdlop'}; it is built where the Check library is "
        "found, see docs/compliance.md; DLOP_CHECK_PROGRAM names it explicitly)")


def _definition_text(d: dict) -> str:
    """The definition in dlop-check's --elementwise format (sdk/check/check_elementwise.c)."""
    lines = [f"name {d['name']}", "dtypes " + " ".join(d["dtypes"]),
             "inputs " + " ".join(d["inputs"]), "outputs " + " ".join(d["outputs"])]
    lines += [f"param {name} {kind} {default!r}" for name, kind, default in d["params"]]
    return "\n".join(lines) + "\nbody\n" + d["body"]


def _suite(d: dict, device: str, seed: int, isolation: str | None) -> tuple:
    with tempfile.TemporaryDirectory(prefix="dlop-check-") as folder:
        path = os.path.join(folder, f"{d['name']}.elementwise")
        with open(path, "w") as f:
            f.write(_definition_text(d))
        command = [_program(), "--elementwise", path, "--device", device, "--seed", str(seed)]
        if isolation is not None:
            command += ["--isolation", isolation]
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, errors="replace")
    output = done.stdout
    if done.returncode == 2:
        raise _errors.invalid(f"dlop.check: op {d['name']}: dlop-check refused it: {output.strip()}")
    if done.returncode == 77:
        raise _errors.make(_C.UnsupportedError, "UNSUPPORTED",
                           f"dlop.check: op {d['name']}: {output.strip()}")
    failures = [m.group(2) for m in map(_FAILURE.match, output.splitlines()) if m]
    if done.returncode != 0 and not failures:
        failures = [f"op {d['name']}: dlop-check exited with status {done.returncode}: "
                    f"{output.strip()[-2000:]}"]
    skipped = next((line for line in output.splitlines() if line.startswith("note: CUDA")), "")
    return output, failures, skipped


def check(op: str | Op, reference: Callable[..., Any] | None = None, *, device: str = "all",
          seed: int = 1, params: dict | None = None, shapes: Iterable | None = None,
          isolation: str | None = None, raise_on_failure: bool = True) -> CheckReport:
    """Run the compliance suite on ``op`` (a ``dlop.elementwise`` op or a ``dlop.Op`` instance, or
    the registered op or name of either), and compare
    it with ``reference(*inputs, **params)`` (NumPy) when one is given.

    ``device``: "cpu", "cuda" or "all" (CUDA checked where a GPU is usable; on "all" without
    one the report's ``skipped`` says so).  ``seed``: the suite's inputs.  ``params`` and
    ``shapes`` go to the reference comparison (dlop.testing.check_values).  ``isolation``:
    dlop-check's --isolation ("check" or "op"; default: its own choice).  Returns the
    CheckReport; raises CheckFailed (an AssertionError) naming every failed check when one
    failed, unless ``raise_on_failure`` is False.
    """
    if isinstance(op, Op) and type(op) is not Op:  # a dlop.Op instance: an op written in Python
        return _check_python_op(op, reference, device, seed, isolation, raise_on_failure)
    op = op if isinstance(op, Op) else _op(op)
    if op.name in _py_op._instances:  # dlop.ops.<name> of a dlop.Op
        return _check_python_op(_py_op._instances[op.name], reference, device, seed, isolation,
                                raise_on_failure)
    if device not in ("cpu", "cuda", "all"):
        raise _errors.invalid(f"dlop.check: device must be 'cpu', 'cuda' or 'all', got {device!r}")
    if isolation not in (None, "check", "op"):
        raise _errors.invalid(f"dlop.check: isolation must be 'check', 'op' or None, got {isolation!r}")
    d = _source.definitions.get(op.name)
    if d is None:
        raise _errors.make(
            _C.UnsupportedError, "UNSUPPORTED",
            f"dlop.check: op {op.name} (plugin {op.plugin}) was not defined by dlop.elementwise "
            "in this process: dlop.check certifies ops from source; for a plugin file run "
            "`dlop check PLUGIN.so` (docs/compliance.md)")
    output, failures, skipped = _suite(d, device, seed, isolation)
    compared = []
    if reference is not None:
        devices = None if device == "all" else [device]
        try:
            compared = _reference_check(op, reference, params, shapes, devices, seed)
        except AssertionError as error:
            failures.append(f"op {op.name}, check reference: {error}")
    report = CheckReport(op.name, output, failures, compared, skipped)
    if failures and raise_on_failure:
        raise CheckFailed(report)
    return report


def _check_python_op(op, reference, device, seed, isolation, raise_on_failure) -> CheckReport:
    """dlop.check on a dlop.Op instance: dlop._py_check's checks, each group in a process of its
    own; the reference compared here, on the dtypes make_node accepts."""
    if device not in ("cpu", "cuda", "all"):
        raise _errors.invalid(f"dlop.check: device must be 'cpu', 'cuda' or 'all', got {device!r}")
    if isolation not in (None, "check", "op"):
        raise _errors.invalid(f"dlop.check: isolation must be 'check', 'op' or None, got {isolation!r}")
    key = (type(op), _py_op._props_key(op))
    loaded = _py_op._registered.get(key)
    name = loaded.name if loaded is not None else _py_op._str(op)
    output, failures, skipped, dtypes, ranks = _py_check.check_python_op(op, name, device, seed, isolation)
    compared = []
    if reference is not None and dtypes:
        import numpy
        from . import _py_check_worker
        n = _py_check_worker.num_inputs(op)  # the registered op is variadic: give every shape
        shapes = [(s,) * n for s in ((), (7,), (2, 3, 5), (5, 3), (2, 1, 3, 4)) if len(s) in ranks]
        args = tuple(numpy.zeros(s, dtype=dtypes[0]) for s in shapes[0])
        try:
            loaded = _py_op._registered_op(op, args)
            name = loaded.name
            devices = [d for d in ("cpu", "cuda") if device in (d, "all") and
                       loaded.dtypes.get(d) and (d == "cpu" or _C.cuda_device_count() > 0)]
            compared = _reference_check(loaded, reference, None, shapes, devices, seed, dtypes)
        except AssertionError as error:
            failures.append(f"op {name}, check reference: {error}")
        except _C.DlopError as error:
            failures.append(f"op {name}, check reference: the op raised {type(error).__name__}: "
                            f"{error}")
    report = CheckReport(name, output, failures, compared, skipped)
    if failures and raise_on_failure:
        raise CheckFailed(report)
    return report


def _reference_check(op, reference, params, shapes, devices, seed, dtypes=None) -> list:
    from .testing import check_values
    return check_values(op, reference, params=params, shapes=shapes, devices=devices, seed=seed,
                        dtypes=dtypes)
