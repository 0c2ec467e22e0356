#!/usr/bin/env python3
"""reduce_gpu.py — the reduce ops on the GPU by axis case, against PyTorch in the same run: a
compiled one-op dlop function (sum, mean, max or min over every axis, the last, the first, or a
middle axis of a 3-d tensor) against torch.sum / mean / amax / amin over the same dims of the
same memory (torch reads dlop's array through DLPack), float16, bfloat16, float32, float64.
Prints µs per call, torch time / dlop time (goal: >= 1) and dlop's GB/s (input bytes / time).

Every dlop result is checked against torch's first (float64 comparison, tolerance from the
dtype and the reduced count) and a wrong one is printed as WRONG RESULT. Timing as
elementwise_gpu.py: warm-up calls, then the median of samples of `reps` back-to-back calls
between synchronizations; dlop's calls allocate their output from its caching pool.

    python3 bench/reduce_gpu.py [--ops sum mean max] [--dtypes float16 ...] [--cases first middle]
"""
import argparse
import functools
import math
import sys

import numpy as np

import dlop
from torch_bench import median_seconds, torch_with_gpu

# name, shape, axes (None: every axis)
CASES = [
    ("all", (8192, 8192), None),
    ("last", (8192, 8192), (1,)),
    ("first", (8192, 8192), (0,)),
    ("middle", (512, 512, 256), (1,)),
    ("middle-long", (64, 4096, 256), (1,)),
    ("middle-short", (16384, 16, 256), (1,)),
    ("first-3d", (256, 512, 512), (0,)),
    ("last-3d", (512, 512, 256), (2,)),
]
TOLERANCE = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 1e-5, "float64": 1e-12}


def dlop_input(torch, shape, dtype):
    """A dlop-owned CUDA array of random normal values in dtype (bfloat16 through a dlop cast,
    NumPy having none), and torch's view of the same memory."""
    rng = np.random.default_rng(11)
    values = rng.standard_normal(shape, dtype=np.float32)
    if dtype == "bfloat16":
        array = dlop.cast(dlop.asarray(values, device="cuda:0"), "bfloat16")
    else:
        array = dlop.asarray(values.astype(dtype), device="cuda:0")
    dlop.synchronize("cuda")
    return array, torch.from_dlpack(array)


def torch_call(torch, op, t, axes):
    dims = tuple(range(t.dim())) if axes is None else axes
    if op == "sum":
        return lambda: torch.sum(t, dim=dims)
    if op == "mean":
        return lambda: torch.mean(t, dim=dims)
    return lambda: (torch.amax if op == "max" else torch.amin)(t, dim=dims)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", nargs="+", default=["sum", "mean", "max"],
                        choices=["sum", "mean", "max", "min"])
    parser.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16", "float32", "float64"])
    parser.add_argument("--cases", nargs="+", default=[c[0] for c in CASES])
    parser.add_argument("--samples", type=int, default=9)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    timed = functools.partial(median_seconds, reps=args.reps, samples=args.samples, warmup=3)
    torch = torch_with_gpu("reduce_gpu.py", "the comparison")
    if torch is None:
        return 0
    print(f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, median of "
          f"{args.samples} samples of {args.reps} calls")
    print(f"{'case':13} {'shape':18} {'axes':6} {'op':5} {'dtype':9} {'dlop us':>9} "
          f"{'torch us':>9} {'torch/dlop':>10} {'dlop GB/s':>10}  goal")
    failures = 0
    for name, shape, axes in CASES:
        if name not in args.cases:
            continue
        for dtype in args.dtypes:
            array, t = dlop_input(torch, shape, dtype)
            size = t.element_size()
            count = math.prod(shape) if axes is None else math.prod(shape[a] for a in axes)
            for op in args.ops:
                x = dlop.tensor("x", dtype=dtype, shape=shape)
                reduce = getattr(dlop, op)
                f = dlop.function([x], reduce(x, axis=None if axes is None else axes), device="cuda")
                ours = torch.from_dlpack(f(array)).double()
                theirs = torch_call(torch, op, t, axes)().double()
                scale = 1.0 if op in ("max", "min") else (math.sqrt(count) if op == "sum" else 1.0 / math.sqrt(count))
                tol = TOLERANCE[dtype] * (1.0 + scale) + 1e-6 * scale
                label = f"{name:13} {str(shape):18} {str(axes or 'all'):6} {op:5} {dtype:9}"
                if ours.shape != theirs.shape or not torch.allclose(ours, theirs, rtol=TOLERANCE[dtype],
                                                                    atol=tol, equal_nan=True):
                    print(f"{label} WRONG RESULT against torch", flush=True)
                    failures += 1
                    continue
                del ours, theirs
                t_dlop = timed(lambda: f(array), lambda: dlop.synchronize("cuda"))
                t_torch = timed(torch_call(torch, op, t, axes), torch.cuda.synchronize)
                ratio = t_torch / t_dlop
                goal = ">= 1 " + ("ok" if ratio >= 1.0 else "BELOW")
                print(f"{label} {t_dlop * 1e6:9.1f} {t_torch * 1e6:9.1f} {ratio:10.2f} "
                      f"{math.prod(shape) * size / t_dlop / 1e9:10.0f}  {goal}", flush=True)
            del array, t
            torch.cuda.empty_cache()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
