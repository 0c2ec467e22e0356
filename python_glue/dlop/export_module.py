"""python -m dlop.export_module MODULE.py DIR [--name NAME] [--version X.Y.Z] [--overwrite]:
runs MODULE.py and writes a plugin project for every op it defines with dlop.elementwise into
DIR (dlop.export_plugin; docs/source-ops.md, "From prototype to a plugin").

Exits 0 when the project was written, 1 when an op cannot be exported (the reason is printed),
2 for a usage error (no such file, no op defined)."""
from __future__ import annotations

import argparse
import runpy
import sys

from . import _source
from ._export import export_plugin


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlop.export_module",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("module", help="a Python file that defines ops with dlop.elementwise")
    parser.add_argument("directory", help="where the plugin project is written")
    parser.add_argument("--name", default="myops", help="the plugin's name (lib<name>.so)")
    parser.add_argument("--version", default="0.1.0", help="the plugin's version, X.Y.Z")
    parser.add_argument("--overwrite", action="store_true", help="write over a non-empty DIR")
    args = parser.parse_args(argv)
    before = set(_source.definitions)
    try:
        runpy.run_path(args.module, run_name="__dlop_export__")
    except OSError as error:
        print(f"dlop.export_module: error: cannot run {args.module}: {error}", file=sys.stderr)
        return 2
    names = [name for name in _source.definitions if name not in before]
    if not names:
        print(f"dlop.export_module: error: {args.module} defines no op with dlop.elementwise",
              file=sys.stderr)
        return 2
    try:
        written = export_plugin(names, args.directory, name=args.name, version=args.version,
                                overwrite=args.overwrite)
    except Exception as error:  # a refusal names the op and why
        print(f"dlop.export_module: error: {error}", file=sys.stderr)
        return 1
    print(f"wrote {len(written)} files for {', '.join(names)} into {args.directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
