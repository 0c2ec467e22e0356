#!/usr/bin/env python3
"""double_op.py — Theano's PyCUDADoubleOp example with dlop: the bundled `double` op on a 4x5
float32 matrix, on the GPU (or the CPU with --device cpu). Prints input and result, checks 2x.
Usage: python examples/double_op.py [--device cpu|cuda|cuda:N]"""
import argparse
import sys

import numpy as np

import dlop
from choose_device import add_device_option, pick_device


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_device_option(parser)
    args = parser.parse_args()
    device = pick_device("double_op", args.device)

    x = dlop.matrix("x", dtype="float32", shape=(4, 5))
    y = dlop.ops.double(x)
    f = dlop.function([x], y, device=device)
    a = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    result = f(a)
    print("device:", result.device)
    print("input:\n%s" % a)
    print("result (on %s):\n%s" % (result.device, np.asarray(result.numpy())))
    if result.numpy().dtype != np.float32 or not np.array_equal(result.numpy(), a * 2):
        print("double_op: WRONG RESULT: expected 2 * input", file=sys.stderr)
        return 1
    print("double_op: ok, result == 2 * input exactly on %s" % device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
