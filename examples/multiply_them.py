#!/usr/bin/env python3
"""multiply_them.py — Theano's PyCUDA multiply_them example with dlop: 100 random float32 pairs
multiplied by the bundled `multiply_them` op on the GPU (or the CPU with --device cpu) and
compared with NumPy for exact equality. Usage: python examples/multiply_them.py [--device D]"""
import argparse
import sys

import numpy as np

import dlop
from choose_device import add_device_option, pick_device


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_device_option(parser)
    args = parser.parse_args()
    device = pick_device("multiply_them", args.device)

    rng = np.random.default_rng(1)
    a = rng.standard_normal(100).astype(np.float32)
    b = rng.standard_normal(100).astype(np.float32)
    x, y = dlop.vector("a", dtype="float32"), dlop.vector("b", dtype="float32")
    f = dlop.function([x, y], dlop.ops.multiply_them(x, y), device=device)
    dest = f(a, b)
    print("device:", dest.device)
    got = dest.numpy()
    mismatches = np.flatnonzero(got != a * b)
    if got.dtype != np.float32 or got.shape != (100,) or mismatches.size:
        print("multiply_them: WRONG RESULT at %d of 100 elements (first: %s)"
              % (mismatches.size, mismatches[:5].tolist()), file=sys.stderr)
        return 1
    print("first five: %s" % got[:5])
    print("multiply_them: ok, all 100 products equal NumPy's exactly on %s" % device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
