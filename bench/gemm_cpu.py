#!/usr/bin/env python3
"""gemm_cpu.py — CPU gemm: dlop's matmul op (the blas plugin over the CBLAS it dlopens, Debian's
OpenBLAS by default) against NumPy's np.matmul (the OpenBLAS bundled in NumPy's wheel), in one
run on one machine, float32 and float64, square n x n x n.

Both allocate their output per call (dlop's eager op from its pool, np.matmul a new array).
Median seconds per call over >= 5 samples; prints GFLOP/s, dlop/NumPy and whether the goal
(>= 0.95) holds, and which BLAS each side uses, so a gap can be put on the library.

    PYTHONPATH=build/python build/venv/bin/python bench/gemm_cpu.py [--sizes 256 1024 2048 4096]
"""
import argparse
import ctypes
import os
import platform

import numpy as np

import dlop
from cpu_timing import median_seconds

GOAL = 0.95


def numpy_blas():
    try:
        info = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{info.get('name')} {info.get('version')} ({info.get('openblas configuration', '').strip()})"
    except Exception as error:  # older NumPy: no mode="dicts"
        return f"unknown ({error})"


def dlop_blas():
    path = os.environ.get("DLOP_BLAS_LIBRARY") or "libopenblas.so.0"
    try:
        library = ctypes.CDLL(path)
        library.openblas_get_config.restype = ctypes.c_char_p
        return f"{path}: OpenBLAS {library.openblas_get_config().decode()}"
    except (OSError, AttributeError) as error:
        return f"{path} ({error})"


def dlop_blas_runtime():
    """Core and thread count of the BLAS instance the plugin loaded (dlopen of the same path
    returns the same instance), read after dlop's first matmul."""
    path = os.environ.get("DLOP_BLAS_LIBRARY") or "libopenblas.so.0"
    try:
        library = ctypes.CDLL(path)
        library.openblas_get_corename.restype = ctypes.c_char_p
        return (f"core {library.openblas_get_corename().decode()}, "
                f"{library.openblas_get_num_threads()} threads")
    except (OSError, AttributeError) as error:
        return f"unknown ({error})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 2048])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs")
    print(f"NumPy {np.__version__} BLAS: {numpy_blas()}")
    print(f"dlop BLAS (what the plugin loads first): {dlop_blas()}")
    print(f"{'dtype':8} {'n':>5} {'dlop GFLOP/s':>13} {'NumPy GFLOP/s':>14} {'dlop/NumPy':>11}  goal >= {GOAL}")
    rng = np.random.default_rng(1)
    for dtype in args.dtypes:
        for n in args.sizes:
            a = rng.standard_normal((n, n)).astype(dtype)
            b = rng.standard_normal((n, n)).astype(dtype)
            da, db = dlop.asarray(a), dlop.asarray(b)
            got = dlop.ops.matmul(da, db).numpy()
            if dtype == args.dtypes[0] and n == args.sizes[0]:
                print(f"dlop BLAS at run time: {dlop_blas_runtime()}", flush=True)
            expected = a @ b
            scale = np.abs(expected).max() + 1
            assert np.abs(got - expected).max() <= (1e-3 if dtype == "float32" else 1e-10) * scale
            t_dlop = median_seconds(lambda: dlop.ops.matmul(da, db))
            t_numpy = median_seconds(lambda: np.matmul(a, b))
            flops = 2.0 * n * n * n
            ratio = t_numpy / t_dlop
            print(f"{dtype:8} {n:5d} {flops / t_dlop / 1e9:13.1f} {flops / t_numpy / 1e9:14.1f} "
                  f"{ratio:11.3f}  {'ok' if ratio >= GOAL else 'BELOW'}", flush=True)


if __name__ == "__main__":
    main()
