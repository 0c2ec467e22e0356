"""kit_oneinstall.py SDK LIBDLOP BUNDLED PLUGIN — `import dlop` from an SDK prefix sees what the
prefix's `dlop` command sees (docs/tutorial.md, steps 1, 4 and 6; docs/python.md, "Which
installation").

Run by tests/kit/kit_steps.sh (the kit.oneinstall test) with PYTHONPATH=SDK after the plugin
template was installed among the SDK's bundled plugins with `cmake --install`. LIBDLOP, BUNDLED
and PLUGIN are what the installed `dlop info` and `dlop list` printed: the package must be the
prefix's, use that very libdlop and bundled directory, have loaded the plugin from there at
import (no dlop.load_plugin), and run it."""
import os
import sys

import dlop
from kit_python import run_scale_add


def main(sdk: str, libdlop: str, bundled: str, plugin: str) -> int:
    package = os.path.join(os.path.realpath(sdk), "dlop")
    where = dlop.info()
    print("dlop.info():", where)
    problems = []
    if os.path.realpath(where["package"]) != package:
        problems.append(f"dlop was imported from {where['package']}, not from the SDK's {package}")
    if os.path.exists(os.path.join(package, "lib")):
        problems.append(f"the SDK's Python package carries a libdlop of its own ({package}/lib)")
    if where["libdlop"] != libdlop:
        problems.append(f"Python uses libdlop {where['libdlop']}, `dlop info` {libdlop}")
    if where["bundled_plugins"] != bundled:
        problems.append(f"Python's bundled plugins are {where['bundled_plugins']}, `dlop info`'s {bundled}")
    if where["plugins"].get("scale_add") != plugin:
        problems.append(f"Python loaded scale_add from {where['plugins'].get('scale_add')}, "
                        f"`dlop list` from {plugin}")
    if where["load_errors"]:
        problems.append(f"load errors: {where['load_errors']}")
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    return run_scale_add()


if __name__ == "__main__":
    if len(sys.argv) != 5:
        print("usage: kit_oneinstall.py SDK LIBDLOP BUNDLED PLUGIN", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
