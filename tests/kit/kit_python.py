"""kit_python.py PLUGIN.so — the plugin template used from Python, as docs/tutorial.md shows it.

Run by tests/kit/kit_steps.sh (the kit.python test) with the build's dlop package on PYTHONPATH:
loads the template plugin explicitly, builds z = scale_add(x, y; alpha) with broadcasting,
checks the static type, runs it on the CPU and compares with NumPy bit for bit.
"""
import sys

import numpy as np

import dlop


def run_scale_add() -> int:
    """Run the loaded scale_add on the CPU and compare with NumPy; 0 when everything matches
    (also what kit_oneinstall.py runs on the plugin installed among the bundled ones)."""
    x = dlop.matrix("x", dtype="float64")
    y = dlop.vector("y", dtype="float64")
    z = dlop.ops.scale_add(x, y, alpha=2.5)
    print("z:", z.dtype, z.shape)
    f = dlop.function([x, y], z, device="cpu")
    x_value = np.arange(12, dtype=np.float64).reshape(3, 4) / 7.0
    y_value = np.array([1.0, -2.0, 0.5, 3.0])
    result = np.asarray(f(x_value, y_value))
    expected = 2.5 * x_value + y_value
    if result.shape != expected.shape or not np.array_equal(result, expected):
        print(f"scale_add gave\n{result}\nexpected\n{expected}", file=sys.stderr)
        return 1
    print("scale_add on the cpu matches NumPy:", result.shape)
    return 0


def main(plugin_path: str) -> int:
    """Load the plugin explicitly, then run_scale_add()."""
    dlop.load_plugin(plugin_path)
    return run_scale_add()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: kit_python.py PLUGIN.so", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
