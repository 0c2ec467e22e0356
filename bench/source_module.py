#!/usr/bin/env python3
"""source_module.py — what a dlop.SourceModule kernel costs on a GPU, side by side in one run:
the host time of one launch k(dest, a, b, n, block=, grid=) on dlop arrays, on CuPy arrays and
on PyTorch tensors (those installed; read from their attributes), the same arrays through the
generic path (the library's own __cuda_array_interface__ behind another object: the interface
dict and a driver query per array, what they cost before), against CuPy's RawKernel of the
same source and a bare cuLaunchKernel through ctypes with its arguments packed once (the floor:
no argument checks); and a compile cold (NVRTC), from the disk cache (a fresh process) and from
memory. A last table puts the three array kinds side by side.
Goals (docs/source-ops.md): a launch at most CuPy's and within 1.1x of the bare launch; a cache
hit within 5 ms.

A launch's host time is the median over samples of `reps` back-to-back launches of a one-block
kernel (n = 256), divided by reps, with a synchronization between samples only: the GPU runs
each tiny kernel in about as long as the host takes to launch it, so the queue never fills and
what is timed is the host's work. Run on a quiet GPU machine:

    python3 bench/source_module.py [--samples 15] [--reps 2000]
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import numpy as np

import dlop

SOURCE = r'''
__global__ void multiply_them(float *dest, const float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) dest[i] = a[i] * b[i];
}'''


class Interface:
    """x's own __cuda_array_interface__ behind another type: dlop's generic path (for a torch
    tensor without the wait for PyTorch's current stream, which is the launch's own here)."""

    def __init__(self, x):
        self.x = x

    @property
    def __cuda_array_interface__(self):
        return self.x.__cuda_array_interface__


def per_launch_us(launch, synchronize, samples, reps):
    for _ in range(50):
        launch()
    synchronize()
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        for _ in range(reps):
            launch()
        elapsed = time.perf_counter() - start
        synchronize()
        times.append(elapsed / reps * 1e6)
    return statistics.median(times)


def bare_launch(kernel, pointers, n):
    """cuLaunchKernel through ctypes on the legacy default stream, arguments packed once."""
    libcuda = ctypes.CDLL("libcuda.so.1")
    launch = libcuda.cuLaunchKernel
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    launch.restype = ctypes.c_int
    values = [ctypes.c_void_p(p) for p in pointers] + [ctypes.c_int(n)]
    params = (ctypes.c_void_p * 4)(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
    function = ctypes.c_void_p(kernel._function)
    legacy = ctypes.c_void_p(1)

    def run():
        result = launch(function, 1, 1, 1, 256, 1, 1, 0, legacy, params, None)
        if result != 0:
            raise RuntimeError(f"cuLaunchKernel returned {result}")
    run.values = values  # kept alive with the closure
    return run


# The process's first GPU use (the driver's and the context's start, 200-300 ms on an H200's
# host) is not the cache's: it is timed apart, before the compile.
COMPILE = """
import json, sys, time
import numpy as np
import dlop
t = time.perf_counter(); dlop.asarray(np.zeros(1, np.float32), device="cuda"); dlop.synchronize("cuda")
start = time.perf_counter() - t
t = time.perf_counter(); dlop.SourceModule(sys.argv[1]); first = time.perf_counter() - t
t = time.perf_counter(); dlop.SourceModule(sys.argv[1]); again = time.perf_counter() - t
s = dlop.jit_stats()
print(json.dumps({"gpu_start_ms": start * 1e3, "first_ms": first * 1e3, "again_ms": again * 1e3, "compiles": s["compiles"],
                  "disk_hits": s["disk_hits"], "memory_hits": s["memory_hits"]}))
"""


def compile_times():
    source = f"// {uuid.uuid4().hex}\n{SOURCE}"
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, DLOP_CACHE_DIR=cache)
        runs = []
        for _ in range(2):
            out = subprocess.run([sys.executable, "-c", COMPILE, source], env=env, check=True,
                                 capture_output=True, text=True).stdout
            runs.append(json.loads(out))
    cold, warm = runs
    assert cold["compiles"] >= 1 and warm["disk_hits"] >= 1, runs
    return {"gpu_start_ms": warm["gpu_start_ms"], "cold_compile_ms": cold["first_ms"],
            "disk_hit_ms": warm["first_ms"],
            "memory_hit_ms": min(cold["again_ms"], warm["again_ms"])}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--reps", type=int, default=2000)
    args = parser.parse_args()
    try:
        dlop._C.device_check("cuda:0")
    except dlop.DlopError as error:
        print(f"source_module.py: needs a GPU: {error}", file=sys.stderr)
        return 2
    n = 256
    kernel = dlop.SourceModule(SOURCE).get_function("multiply_them")
    host = np.ones(n, np.float32)
    dest, a, b = (dlop.asarray(host, device="cuda") for _ in range(3))
    dlop.synchronize("cuda")
    # The primary context current on this thread, for the bare launch and cuCtxSynchronize
    # (dlop leaves the caller's context as it was: none).
    libcuda = ctypes.CDLL("libcuda.so.1")
    context = ctypes.c_void_p()
    assert libcuda.cuInit(0) == 0
    assert libcuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), 0) == 0
    assert libcuda.cuCtxSetCurrent(context) == 0

    def sync():  # every stream of the context
        result = libcuda.cuCtxSynchronize()
        if result != 0:
            raise RuntimeError(f"cuCtxSynchronize returned {result}")
    rows = {}
    block, grid = (256, 1, 1), (1, 1)
    pointers = [x.__cuda_array_interface__["data"][0] for x in (dest, a, b)]
    rows["bare cuLaunchKernel (ctypes)"] = per_launch_us(bare_launch(kernel, pointers, n), sync,
                                                         args.samples, args.reps)
    rows["dlop k(...) on dlop arrays"] = per_launch_us(
        lambda: kernel(dest, a, b, n, block=block, grid=grid), sync, args.samples, args.reps)
    dlop_stream = dlop.cuda_stream()
    rows["dlop k(...) on dlop arrays, dlop's stream"] = per_launch_us(
        lambda: kernel(dest, a, b, n, block=block, grid=grid, stream=dlop_stream), sync,
        args.samples, args.reps)
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None:
        ca, cb, cd = (cupy.ones(n, cupy.float32) for _ in range(3))
        raw = cupy.RawKernel('extern "C" {\n' + SOURCE + "\n}", "multiply_them")  # unmangled, as dlop wraps it
        rows["cupy RawKernel on cupy arrays"] = per_launch_us(
            lambda: raw(grid, block, (cd, ca, cb, np.int32(n))), sync, args.samples, args.reps)
        rows["dlop k(...) on cupy arrays"] = per_launch_us(
            lambda: kernel(cd, ca, cb, n, block=block, grid=grid), sync, args.samples, args.reps)
        gd, ga, gb = Interface(cd), Interface(ca), Interface(cb)
        rows["dlop k(...) on cupy arrays, generic path"] = per_launch_us(
            lambda: kernel(gd, ga, gb, n, block=block, grid=grid), sync, args.samples, args.reps)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        ta, tb, td = (torch.ones(n, device="cuda") for _ in range(3))
        rows["dlop k(...) on torch tensors"] = per_launch_us(
            lambda: kernel(td, ta, tb, n, block=block, grid=grid), sync, args.samples, args.reps)
        sd, sa, sb = Interface(td), Interface(ta), Interface(tb)
        rows["dlop k(...) on torch tensors, generic path"] = per_launch_us(
            lambda: kernel(sd, sa, sb, n, block=block, grid=grid), sync, args.samples, args.reps)
    bare = rows["bare cuLaunchKernel (ctypes)"]
    cupy_cost = rows.get("cupy RawKernel on cupy arrays")
    print(f"{'launch of multiply_them (n = 256)':44s} {'us':>8s} {'/bare':>7s} {'/cupy':>7s}")
    for name, us in rows.items():
        against_cupy = f"{us / cupy_cost:7.2f}" if cupy_cost else "      -"
        print(f"{name:44s} {us:8.2f} {us / bare:7.2f} {against_cupy}")
    # The three array kinds side by side (goal: each at most CuPy's RawKernel).
    kinds = ("dlop arrays", "cupy arrays", "torch tensors")
    table = {"read directly": [rows.get(f"dlop k(...) on {kind}") for kind in kinds],
             "generic path": [None] + [rows.get(f"dlop k(...) on {kind}, generic path")
                                       for kind in kinds[1:]]}
    print(f"\n{'dlop k(...), us per launch':28s}" + "".join(f"{kind:>15s}" for kind in kinds))
    for label, cells in table.items():
        print(f"{label:28s}" + "".join(f"{'-':>15s}" if cell is None else f"{cell:15.2f}"
                                       for cell in cells))
    if cupy_cost:
        slowest = max(cell for cell in table["read directly"] if cell is not None)
        verdict = "met" if slowest <= cupy_cost else "NOT met"
        print(f"{'cupy RawKernel (the goal)':28s}{cupy_cost:15.2f}   {verdict}: the slowest kind "
              f"read directly takes {slowest:.2f} us")
    compiled = compile_times()
    for name, ms in compiled.items():
        print(f"{name:40s} {ms:8.2f} ms")
    print(json.dumps({"launch_us": rows, **compiled}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
