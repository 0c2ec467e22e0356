#!/usr/bin/env python3
"""elemwise_cpu.py — the bundled elemwise and reduce ops on the CPU, op by op, against NumPy in
the same run: a compiled one-op dlop function writing a fresh output per call (what a user
calls) against the NumPy expression doing the same. Prints µs per call and NumPy time / dlop
time (above 1: dlop is faster). Inputs are random, never zeros; every dlop result is checked
against NumPy before it is timed.
"""
from __future__ import annotations

import argparse

import numpy as np

import dlop
from cpu_timing import median_seconds

# name, number of array inputs, dlop builder over Variables, NumPy over arrays, rtol for the check
CASES = [
    ("add", 2, lambda x, y: x + y, lambda x, y: x + y, 0),
    ("mul", 2, lambda x, y: x * y, lambda x, y: x * y, 0),
    ("maximum", 2, dlop.maximum, np.maximum, 0),
    ("neg", 1, lambda x: -x, lambda x: -x, 0),
    ("sqrt", 1, lambda x: dlop.sqrt(abs(x)), lambda x: np.sqrt(abs(x)), 0),
    ("log", 1, lambda x: dlop.log(abs(x)), lambda x: np.log(abs(x)), 1e-6),
    ("tanh", 1, dlop.tanh, np.tanh, 1e-6),
    ("sigmoid", 1, dlop.sigmoid, lambda x: 1 / (1 + np.exp(-x)), 1e-6),
    ("pow", 2, lambda x, y: abs(x) ** y, lambda x, y: abs(x) ** y, 1e-5),
    ("where(x>y,x,y)", 2, lambda x, y: dlop.where(x > y, x, y), lambda x, y: np.where(x > y, x, y), 0),
    ("x > y", 2, lambda x, y: x > y, lambda x, y: x > y, 0),
    ("sum", 1, dlop.sum, np.sum, 1e-4),
    ("max", 1, dlop.max, np.max, 0),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2", type=int, nargs="+", default=[16, 22])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    parser.add_argument("--ops", nargs="+", default=[c[0] for c in CASES])
    parser.add_argument("--seconds", type=float, default=0.3, help="time per point and library")
    parser.add_argument("--samples", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    print(f"{'op':16} {'dtype':8} {'n':>9} {'dlop us':>10} {'numpy us':>10} {'numpy/dlop':>10}")
    failures = 0
    for log2 in args.log2:
        n = 1 << log2
        for dtype in args.dtypes:
            arrays = [rng.uniform(-5, 5, n).astype(dtype) for _ in range(2)]
            for name, arity, build, reference, rtol in CASES:
                if name not in args.ops:
                    continue
                inputs = [dlop.vector(f"v{k}", dtype=dtype) for k in range(arity)]
                f = dlop.function(inputs, build(*inputs), device="cpu")
                ours = [dlop.asarray(a) for a in arrays[:arity]]
                expected = reference(*arrays[:arity])
                got = np.asarray(f(*ours))
                if not np.allclose(got, expected, rtol=rtol, atol=0, equal_nan=True):
                    print(f"{name:16} {dtype:8} {n:>9} WRONG RESULT against NumPy")
                    failures += 1
                    continue
                t_dlop = median_seconds(lambda: f(*ours), args.seconds, args.samples)
                t_numpy = median_seconds(lambda: reference(*arrays[:arity]), args.seconds, args.samples)
                print(f"{name:16} {dtype:8} {n:>9} {t_dlop * 1e6:>10.1f} {t_numpy * 1e6:>10.1f} "
                      f"{t_numpy / t_dlop:>10.2f}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
