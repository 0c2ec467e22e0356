"""python -m dlop.check_module MODULE.py [--device cpu|cuda|all] [--seed N]: dlop.check on every
op that MODULE.py defines when it runs (docs/source-ops.md, "Checking"): its dlop.elementwise
ops, its dlop.Op instances at module level, and an instance of each dlop.Op class it defines
that has none there and takes no constructor arguments.

A module may give NumPy references as a dict ``DLOP_REFERENCES = {"op_name": callable}`` (a
dlop.Op by its class name).
Prints each op's verdict and every failed check; exits 0 only when every op passed, 1 when a
check failed, 2 for a usage error (no such file, no op defined)."""
from __future__ import annotations

import argparse
import importlib.util
import sys

from . import _source
from ._check import check
from ._ops import Op


def _python_ops(namespace: dict, run_name: str) -> list:
    """(name, instance) of the module's dlop.Op instances, then of its classes without one."""
    found, classes = [], set()
    for value in namespace.values():
        if isinstance(value, Op) and type(value) is not Op and type(value).__module__ == run_name:
            found.append((type(value).__name__, value))
            classes.add(type(value))
    for value in namespace.values():
        if isinstance(value, type) and issubclass(value, Op) and value.__module__ == run_name \
                and value not in classes:
            try:
                found.append((value.__name__, value()))
            except TypeError as error:
                print(f"dlop.check_module: note: {value.__name__} is not checked: its "
                      f"constructor needs arguments ({error}); make an instance at module level",
                      file=sys.stderr)
    return found


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlop.check_module",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("module", help="a Python file that defines ops with dlop.elementwise or dlop.Op")
    parser.add_argument("--device", choices=("cpu", "cuda", "all"), default="all")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    before = set(_source.definitions)
    try:
        # A module in sys.modules (not runpy's temporary one): dlop.check finds a dlop.Op's
        # class file through it, for the checks' own processes to load.
        found = importlib.util.spec_from_file_location("__dlop_check__", args.module)
        if found is None:
            raise OSError("not a Python file")
        module = importlib.util.module_from_spec(found)
        sys.modules["__dlop_check__"] = module
        found.loader.exec_module(module)
        namespace = vars(module)
    except OSError as error:
        print(f"dlop.check_module: error: cannot run {args.module}: {error}", file=sys.stderr)
        return 2
    names = [(name, name) for name in _source.definitions if name not in before]
    names += _python_ops(namespace, "__dlop_check__")
    if not names:
        print(f"dlop.check_module: error: {args.module} defines no op with dlop.elementwise "
              "or dlop.Op (an op defined before it ran is not counted)", file=sys.stderr)
        return 2
    references = namespace.get("DLOP_REFERENCES", {})
    failed = 0
    for name, op in names:
        report = check(op, references.get(name), device=args.device, seed=args.seed,
                       raise_on_failure=False)
        print(("PASS " if report.passed else "FAIL ") + str(report))
        failed += not report.passed
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
