#!/usr/bin/env python3
"""eager_calls.py — where the host time of an op's eager call goes, side by side in one run.

Per call of softplus(x), softplus(x, alpha=2.0) (ops from dlop.elementwise), dlop.ops.exp(x) (a
plugin's op) and mul_sub(x, w) (two inputs) on dlop.Arrays of --n float32 (16: the kernel is
nothing): the call as written (its repeated signature runs from C, python_glue/src/eager_calls.c),
the same call through the Python eager path (Op._call, every call's path before), and the
compiled function alone. The difference of the first and the last is what the call adds to
the compiled function. A figure is the median over samples of `reps` back-to-back calls divided
by reps, synchronized between samples only (bench/source_module.py's method); each result is
checked against NumPy first.

    python3 bench/eager_calls.py [--device cpu|cuda] [--n 16] [--samples 15] [--reps 500]
"""
import argparse
import os
import sys

import numpy as np

import dlop
from dlop import _ops

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from source_module import per_launch_us  # noqa: E402 - the same timing as SourceModule's bench

softplus = dlop.elementwise("bench_softplus", "y = x > 20 ? x : log1p(exp(x))", inputs="x",
                            outputs="y", dtypes=("float32",), params={"alpha": 1.0})
mul_sub = dlop.elementwise("bench_mul_sub", "z = x * w - w", inputs="x, w", outputs="z",
                           dtypes=("float32",))


def compiled_function(op, args, params):
    """The compiled function the eager path runs for this call (its cache entry)."""
    return _ops._eager_entry(_ops._build_op, op.name, _ops._params_key(params), args[0].device,
                             tuple((a.dtype, a.ndim) for a in args))[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--reps", type=int, default=500)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    xs = rng.uniform(-5, 5, args.n).astype(np.float32)
    ws = rng.uniform(-2, 2, args.n).astype(np.float32)
    x, w = dlop.asarray(xs, device=args.device), dlop.asarray(ws, device=args.device)
    exp = dlop.ops.exp
    cases = [("softplus(x)", softplus, (x,), {}, np.log1p(np.exp(xs))),
             ("softplus(x, alpha=2.0)", softplus, (x,), {"alpha": 2.0}, np.log1p(np.exp(xs))),
             ("dlop.ops.exp(x)", exp, (x,), {}, np.exp(xs)),
             ("mul_sub(x, w)", mul_sub, (x, w), {}, xs * ws - ws)]
    print(f"{'per call, ' + str(args.n) + ' float32 on ' + args.device:32s} {'call':>8s} "
          f"{'Python path':>12s} {'function':>9s} {'call - function':>16s}  (us)")
    for name, op, operands, params, want in cases:
        np.testing.assert_allclose(op(*operands, **params).numpy(), want, rtol=2e-6, atol=1e-6)
        function = compiled_function(op, operands, params)

        def time_it(call):
            return per_launch_us(call, lambda: dlop.synchronize(args.device), args.samples,
                                 args.reps)

        if params:
            call = time_it(lambda: op(*operands, alpha=2.0))
        else:
            call = time_it(lambda: op(*operands))
        python = time_it(lambda: op._call(operands, params))
        alone = time_it(lambda: function(*operands))
        print(f"{name:32s} {call:8.2f} {python:12.2f} {alone:9.2f} {call - alone:16.2f}")


if __name__ == "__main__":
    main()
