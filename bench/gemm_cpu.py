#!/usr/bin/env python3
"""gemm_cpu.py — CPU gemm: dlop's matmul op (the blas plugin over the CBLAS it dlopens: in a
process that imported NumPy first, NumPy's own scipy-openblas; `dlop info dot` says which)
against NumPy's np.matmul (the OpenBLAS bundled in NumPy's wheel), in one run on one machine,
float32 and float64, square n x n x n.

Both allocate their output per call (dlop's eager op from its pool, np.matmul a new array).
The two are timed with their samples interleaved (cpu_timing.alternating_medians: a change of
load on a shared machine hits both alike); median seconds per call over --samples samples;
prints GFLOP/s, dlop/NumPy and whether the goal (>= 0.95) holds, and which BLAS, kernels and
thread count each side uses, so a gap can be put on the library.

    PYTHONPATH=build/python build/venv/bin/python bench/gemm_cpu.py [--sizes 256 1024 2048 4096]
"""
import argparse
import ctypes
import os
import platform
import time

import numpy as np

import dlop
from cpu_timing import alternating_medians

GOAL = 0.95


def numpy_blas():
    try:
        info = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{info.get('name')} {info.get('version')} ({info.get('openblas configuration', '').strip()})"
    except Exception as error:  # older NumPy: no mode="dicts"
        return f"unknown ({error})"


def numpy_blas_runtime():
    """Kernels and threads of the scipy-openblas NumPy loaded (NumPy >= 2 wheels)."""
    maps = [line.split()[-1] for line in open("/proc/self/maps") if "libscipy_openblas" in line]
    if not maps:
        return "unknown (no scipy-openblas loaded)"
    library = ctypes.CDLL(maps[0])
    corename = library.scipy_openblas_get_corename64_
    corename.restype = ctypes.c_char_p
    return (f"{os.path.basename(maps[0])}: core {corename().decode()}, "
            f"{library.scipy_openblas_get_num_threads64_()} threads")


def dlop_blas_runtime():
    """What the blas plugin reports about its CPU library (after its first matmul)."""
    if not hasattr(dlop, "info"):
        return "unknown (this dlop has no dlop.info)"
    cpu = dlop.info("dot")["run_time"].get("cpu", {})
    return (f"{cpu.get('blas library')} ({cpu.get('blas found as')}, {cpu.get('blas integers')}), "
            f"core {cpu.get('blas kernels')}, {cpu.get('blas threads')} threads")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 2048, 4096])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--min-seconds", type=float, default=1.0,
                        help="time per side and size (at least one call per sample)")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="cpu: the process's CPU seconds (steadier on a busy machine; with "
                             "OPENBLAS_NUM_THREADS=1 it is one core's cost)")
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"clock {args.clock}, OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}")
    print(f"NumPy {np.__version__} BLAS: {numpy_blas()}")
    print(f"{'dtype':8} {'n':>5} {'dlop GFLOP/s':>13} {'NumPy GFLOP/s':>14} {'dlop/NumPy':>11}  goal >= {GOAL}")
    rng = np.random.default_rng(1)
    for dtype in args.dtypes:
        for n in args.sizes:
            a = rng.standard_normal((n, n)).astype(dtype)
            b = rng.standard_normal((n, n)).astype(dtype)
            da, db = dlop.asarray(a), dlop.asarray(b)
            got = dlop.ops.matmul(da, db).numpy()
            if dtype == args.dtypes[0] and n == args.sizes[0]:
                print(f"dlop BLAS at run time: {dlop_blas_runtime()}")
                print(f"NumPy BLAS at run time: {numpy_blas_runtime()}", flush=True)
            expected = a @ b
            scale = np.abs(expected).max() + 1
            assert np.abs(got - expected).max() <= (1e-3 if dtype == "float32" else 1e-10) * scale
            t_dlop, t_numpy = alternating_medians(
                [lambda: dlop.ops.matmul(da, db), lambda: np.matmul(a, b)],
                min_seconds=args.min_seconds, samples=args.samples,
                clock=time.process_time if args.clock == "cpu" else time.perf_counter)
            flops = 2.0 * n * n * n
            ratio = t_numpy / t_dlop
            print(f"{dtype:8} {n:5d} {flops / t_dlop / 1e9:13.1f} {flops / t_numpy / 1e9:14.1f} "
                  f"{ratio:11.3f}  {'ok' if ratio >= GOAL else 'BELOW'}", flush=True)


if __name__ == "__main__":
    main()
