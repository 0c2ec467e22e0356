#!/usr/bin/env python3
"""gpu_test.py — Theano's "am I using the GPU?" check with dlop: exp over 10*30*768 elements,
1000 calls, in float32 and in float64, printing the time, the result and where every node ran
(f.explain()). Usage: python examples/gpu_test.py [--device cpu|cuda|cuda:N] [--iters N]"""
import argparse
import sys
import time

import numpy as np

import dlop
from choose_device import add_device_option, pick_device

VLEN = 10 * 30 * 768  # 10 x #cores x #threads per core, as in the Theano original


def run(dtype: str, device: str, iters: int) -> bool:
    """Time iters calls of a compiled exp on device; True when the result is right."""
    data = np.random.default_rng(22).random(VLEN).astype(dtype)
    x = dlop.vector("x", dtype=dtype, shape=(VLEN,))
    f = dlop.function([x], dlop.ops.exp(x), device=device)
    xs = dlop.asarray(data, device=device)  # like Theano's shared variable: lives on device
    print("== %s on %s ==" % (dtype, device))
    print(f.explain())
    r = f(xs)  # warm-up: first-call costs are not what this measures
    t0 = time.perf_counter()
    for _ in range(iters):
        r = f(xs)
    host = r.numpy()  # waits for the last call: the loop's time includes the GPU work
    t1 = time.perf_counter()
    print("Looping %d times took %f seconds (%.2f us per call)"
          % (iters, t1 - t0, (t1 - t0) / iters * 1e6))
    print("Result is %s" % (host,))
    print("Used the %s (result on %s)" % ("gpu" if r.device.startswith("cuda") else "cpu",
                                          r.device))
    rtol = 2e-6 if dtype == "float32" else 1e-14
    if host.dtype != np.dtype(dtype) or not np.allclose(host, np.exp(data), rtol=rtol, atol=0):
        print("gpu_test: WRONG RESULT in %s" % dtype, file=sys.stderr)
        return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_device_option(parser)
    parser.add_argument("--iters", type=int, default=1000)
    args = parser.parse_args()
    device = pick_device("gpu_test", args.device)
    ok = all([run(dtype, device, args.iters) for dtype in ("float32", "float64")])
    print("gpu_test: %s" % ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
