"""python -m dlop.check_module MODULE.py [--device cpu|cuda|all] [--seed N]: dlop.check on every
op that MODULE.py defines with dlop.elementwise when it runs (docs/source-ops.md, "Checking").

A module may give NumPy references as a dict ``DLOP_REFERENCES = {"op_name": callable}``.
Prints each op's verdict and every failed check; exits 0 only when every op passed, 1 when a
check failed, 2 for a usage error (no such file, no op defined)."""
from __future__ import annotations

import argparse
import runpy
import sys

from . import _source
from ._check import check


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlop.check_module",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("module", help="a Python file that defines ops with dlop.elementwise")
    parser.add_argument("--device", choices=("cpu", "cuda", "all"), default="all")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    before = set(_source.definitions)
    try:
        namespace = runpy.run_path(args.module, run_name="__dlop_check__")
    except OSError as error:
        print(f"dlop.check_module: error: cannot run {args.module}: {error}", file=sys.stderr)
        return 2
    names = [name for name in _source.definitions if name not in before]
    if not names:
        print(f"dlop.check_module: error: {args.module} defines no op with dlop.elementwise "
              "(an op defined before it ran is not counted)", file=sys.stderr)
        return 2
    references = namespace.get("DLOP_REFERENCES", {})
    failed = 0
    for name in names:
        report = check(name, references.get(name), device=args.device, seed=args.seed,
                       raise_on_failure=False)
        print(("PASS " if report.passed else "FAIL ") + str(report))
        failed += not report.passed
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
