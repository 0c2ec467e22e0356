#!/usr/bin/env python3
"""multiply_them_source.py — the PyCUDA example Theano's tutorial started from, through
dlop.SourceModule: the multiply_them kernel compiled from a source string at run time (NVRTC,
cached), launched on dlop arrays, checked against NumPy. PyCUDA's original launched 400 threads
for 100 elements with no bound check (300 threads wrote past the arrays); here the kernel checks
its index, and the launch keeps the seed's 400 threads to show it is safe.
Usage: python examples/multiply_them_source.py [--device cuda:N]   (needs a GPU)"""
import argparse
import sys

import numpy as np

import dlop

SOURCE = r'''
__global__ void multiply_them(float *dest, const float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dest[i] = a[i] * b[i];
}'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda or cuda:N (default: cuda)")
    args = parser.parse_args()
    try:
        dlop._C.device_check(args.device)
    except dlop.DlopError as error:
        print(f"multiply_them_source: needs a GPU, and {args.device} is not usable: {error}",
              file=sys.stderr)
        return 2

    module = dlop.SourceModule(SOURCE, device=args.device)
    multiply_them = module.get_function("multiply_them")
    print(f"compiled for {module.arch}: {multiply_them!r}")

    n = 100
    rng = np.random.default_rng(1)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    # one element past n, to show that the 300 extra threads write nothing
    dest = dlop.asarray(np.full(n + 1, -1.0, np.float32), device=args.device)
    multiply_them(dest, dlop.asarray(a, device=args.device), dlop.asarray(b, device=args.device),
                  n, block=(400, 1, 1), grid=(1, 1))
    got = dest.numpy()
    mismatches = np.flatnonzero(got[:n] != a * b)
    if mismatches.size or got[n] != -1.0:
        print("multiply_them_source: WRONG RESULT at %d of %d elements (first: %s), guard %s"
              % (mismatches.size, n, mismatches[:5].tolist(), got[n]), file=sys.stderr)
        return 1
    print("first five: %s" % got[:5])
    print(f"multiply_them_source: ok, all {n} products equal NumPy's exactly on {args.device}, "
          "and the 300 threads past n wrote nothing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
