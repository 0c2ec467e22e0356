"""dlop.check on a dlop.Op (an op written in Python): the compliance checks that apply to it,
each group in a fresh Python process (docs/source-ops.md, "Checking"; docs/compliance.md).

dlop-check cannot hold such an op (its stages are Python callbacks of the calling process), so
these checks are written over the op's Python stages, in python_glue/dlop/_py_check_worker.py,
with the C suite's check names, messages and failure-line format.  Each group (the op-level
checks, then one per device and dtype make_node accepts) runs in its own process, which
imports the op's module and rebuilds the instance from its attributes: a crash or a hang fails
the check that was running, named, and the group's other checks go on in a new process; the
calling process, which may have initialized CUDA, never forks.
"""
from __future__ import annotations

import base64
import json
import os
import pickle
import subprocess
import sys

from . import _C, _errors

TIMEOUT_S = 300  # per process
RUN_CHECKS = ("infer_shape_agrees", "every_output_element_written", "inputs_untouched",
              "strided_inputs", "deterministic_run_to_run")


def _spec(op, name: str, seed: int) -> dict:
    cls = type(op)
    if "<locals>" in cls.__qualname__:
        raise _errors.make(_C.UnsupportedError, "UNSUPPORTED",
                           f"dlop.check: op {name}: class {cls.__qualname__} is defined inside a "
                           "function; the checks run in another process, which must import it: "
                           "define the class at module level")
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None)
    if not path:
        raise _errors.make(_C.UnsupportedError, "UNSUPPORTED",
                           f"dlop.check: op {name}: module {cls.__module__} of class "
                           f"{cls.__qualname__} has no file: the checks run in another "
                           "process, which must import it: define the class in a .py file")
    try:
        state = base64.b64encode(pickle.dumps(dict(op.__dict__))).decode()
    except Exception as error:
        raise _errors.invalid(f"dlop.check: op {name}: its attributes do not pickle ({error}): "
                              "the checks rebuild the instance from them in another process")
    return {"module": cls.__module__, "file": os.path.abspath(path),
            "qualname": cls.__qualname__, "state": state, "sys_path": [os.path.abspath(p) if p
                                                                     else os.getcwd() for p in sys.path],
            "name": name, "seed": seed}


def _case(spec: dict) -> str:
    return f"{spec['device']} {spec['dtype']}" if spec.get("device") else "op"


class _Run:
    """The checks of one group, in as many processes as crashes make necessary."""

    def __init__(self, spec: dict, isolation: str):
        self.spec, self.isolation = spec, isolation
        self.verdicts: list = []  # (check, "PASS" / "FAIL" / "ERROR" / "SKIP", message)
        self.found: dict | None = None

    def go(self) -> None:
        left = list(self.spec["checks"])
        batches = [[c] for c in left] if self.isolation == "check" else [left]
        if not left and self.spec["group"] == "op":
            batches = [[]]
        for batch in batches:
            while True:
                batch = self._process(batch)
                if not batch:
                    break

    def _process(self, checks: list) -> list:
        """Runs checks in one process; returns the ones left when it died early."""
        spec = dict(self.spec, checks=checks)
        if self.spec["group"] == "op" and self.found is not None:
            spec.update(group="op_again", **self.found)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        try:
            done = subprocess.run([sys.executable, "-m", "dlop._py_check_worker"],
                                  input=json.dumps(spec), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, errors="replace",
                                  timeout=TIMEOUT_S, env=env)
            out, err, status = done.stdout, done.stderr, done.returncode
        except subprocess.TimeoutExpired as expired:
            out = expired.stdout or ""
            out = out.decode(errors="replace") if isinstance(out, bytes) else out
            err, status = "", f"timeout ({TIMEOUT_S} s)"
        running, seen = None, set()
        for line in out.splitlines():
            parts = line.split("\t")
            kind = parts[0]
            if kind == "DTYPES":
                self.found = json.loads(parts[1])
            elif kind == "RUN":
                running = parts[1]
            elif kind in ("PASS", "FAIL", "SKIP"):
                self.verdicts.append((parts[1], kind, parts[2] if len(parts) > 2 else ""))
                seen.add(parts[1])
                running = None
            elif kind == "ERROR":
                raise _errors.make(_C.KernelError, "DLOP_PLUGIN_ERROR",
                                   f"dlop.check: op {self.spec['name']}: {parts[1]}")
        if status == 0:
            return []
        why = (f"signal {-status}" if isinstance(status, int) and status < 0 else
               f"exit status {status}" if isinstance(status, int) else status)
        tail = " ".join(err.strip().splitlines()[-3:])
        if running is None:
            raise _errors.make(_C.KernelError, "DLOP_PLUGIN_ERROR",
                               f"dlop.check: op {self.spec['name']}: the check process for "
                               f"{_case(self.spec)} ended with {why} before any check: {tail}")
        self.verdicts.append((running, "ERROR",
                              f"op {self.spec['name']}, check {running}, {_case(self.spec)}: "
                              f"the check's process ended with {why} while it ran (this "
                              f"check's own process; the others go on in a new one): {tail}"))
        seen.add(running)
        return [c for c in checks if c not in seen]


def check_python_op(op, name: str, device: str, seed: int, isolation) -> tuple:
    """Runs the groups; returns (output, failures, skipped, accepted dtypes)."""
    spec = _spec(op, name, seed)
    cls = type(op)
    has_cpu = callable(getattr(cls, "perform", None))
    has_cuda = callable(getattr(cls, "make_thunk", None))
    lines, failures, counts = [], [], {"checks": 0, "F": 0, "E": 0}

    def record(run: _Run):
        for check, kind, message in run.verdicts:
            counts["checks"] += 1
            if kind in ("FAIL", "ERROR"):
                letter = "F" if kind == "FAIL" else "E"
                counts[letter] += 1
                lines.append(f"py_op_check:0:{letter}:{_case(run.spec)}:{check}:0: {message}")
                failures.append(message)

    probe = _Run(dict(spec, group="op", checks=["make_node_is_pure"]), isolation or "op")
    probe.go()
    found = probe.found or {"dtypes": [], "ranks": []}
    record(probe)
    lines.append(f"note: make_node accepted {', '.join(found['dtypes']) or 'no dtype'} "
                 f"(ranks {found['ranks']} of the same-shape signatures); bfloat16 is not "
                 "checked (NumPy has none, so perform cannot take it)")
    if not found["dtypes"]:
        message = (f"op {name}, check make_node_accepts_declared_dtype, op: make_node accepted "
                   "no dtype on any same-shape signature (every input one dtype and shape, "
                   "ranks 0 to 4)")
        lines.append(f"py_op_check:0:F:op:make_node_accepts_declared_dtype:0: {message}")
        failures.append(message)
        counts["checks"] += 1
        counts["F"] += 1
    skipped = ""
    devices = []
    if device in ("cpu", "all") and has_cpu:
        devices.append("cpu")
    elif device == "cpu":
        skipped = f"op {name} has no perform: the CPU is not checked"
    if device in ("cuda", "all") and has_cuda:
        if _C.cuda_device_count() > 0:
            devices.append("cuda:0")
        elif device == "cuda":
            raise _errors.make(_C.UnsupportedError, "UNSUPPORTED",
                               f"dlop.check: op {name}: SKIP: no usable GPU for --device cuda")
        else:
            skipped = "note: CUDA checks skipped (no usable GPU)"
    for dev in devices:
        checks = list(RUN_CHECKS) + (["cuda_matches_cpu"] if dev != "cpu" and has_cpu else [])
        for dtype in found["dtypes"]:
            run = _Run(dict(spec, group="case", device=dev, dtype=dtype, checks=checks,
                            dtypes=found["dtypes"], ranks=found["ranks"]), isolation or "op")
            run.go()
            record(run)
    if skipped:
        lines.append(skipped)
    total = counts["checks"]
    passed = 100 * (total - counts["F"] - counts["E"]) // max(total, 1)
    lines.append(f"{passed}%: Checks: {total}, Failures: {counts['F']}, Errors: {counts['E']}")
    return "\n".join(lines) + "\n", failures, skipped, found["dtypes"], found["ranks"]
