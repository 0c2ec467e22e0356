"""abi3_smoke.py — run by ctest with Pythons other than the one the extension was built with
(python3.12, python3.13 where found): the one Limited-API build of dlop._C must load and run
there. No NumPy needed: the input is an array.array, the output is read through memoryview."""
import array
import math
import sys

import dlop

assert dlop._C.__file__.endswith("_C.abi3.so"), dlop._C.__file__
x = dlop.vector("x", dtype="float32")
f = dlop.function([x], dlop.ops.exp(dlop.ops.double(x)), device="cpu")
r = f(array.array("f", [0.0, 0.5, 1.0]))
got = list(memoryview(r))
want = [math.exp(2 * v) for v in (0.0, 0.5, 1.0)]
assert all(abs(g - w) <= 1e-6 * w for g, w in zip(got, want)), (got, want)
print("abi3 smoke: ok on Python %s: %s" % (sys.version.split()[0], got))
