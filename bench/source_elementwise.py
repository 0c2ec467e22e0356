#!/usr/bin/env python3
"""source_elementwise.py — what an op from dlop.elementwise costs, side by side in one run.

On a GPU (cuda:0): the host time of one eager call on 230400 float32 of softplus
(y = x > 20 ? x : log1p(exp(x))) and of a two-input op (z = x * w - w), against CuPy's
ElementwiseKernel of the same body, torch.nn.functional.softplus and the same expression in
torch, and a bare cuLaunchKernel (ctypes, arguments packed once) of the same body compiled with
dlop.SourceModule; the throughput at 2^28 float32 of the two-input op (memory-bound) and of
softplus (bound by its exp and log1p) against a device-to-device copy of the same bytes, and
softplus against torch's. On the CPU: the same calls against NumPy's expression and numexpr (where
installed). Both: a compile cold (a new op, an empty DLOP_CACHE_DIR, a fresh process), from the
disk cache (a fresh process on that cache) and from memory (a new parameter value in the same
process). Each result is checked against NumPy before it is timed.
Goals (docs/source-ops.md): a call at most CuPy's cost and within 1.1x of the bare launch; a
memory-bound body's throughput >= 95 % of the copy's; a cache hit <= 5 ms.

A call's time is the median over samples of `reps` back-to-back calls divided by reps, with a
synchronization between samples only (bench/source_module.py's method).

    python3 bench/source_elementwise.py [--device cuda|cpu] [--samples 15] [--reps 500]
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

import numpy as np

import dlop

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from source_module import per_launch_us  # noqa: E402 - the same timing as SourceModule's bench

SOFTPLUS = "y = x > 20 ? x : log1p(exp(x))"
softplus = dlop.elementwise("bench_softplus", SOFTPLUS, inputs="x", outputs="y",
                            dtypes=("float32",), params={"alpha": 1.0})
mul_sub = dlop.elementwise("bench_mul_sub", "z = x * w - w", inputs="x, w", outputs="z",
                           dtypes=("float32",))
KERNEL = r'''
extern "C" __global__ void softplus(float *y, const float *x, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) { float v = x[i]; y[i] = v > 20 ? v : log1pf(expf(v)); }
}'''
N = 230400


def softplus_numpy(x):
    return np.where(x > 20, x, np.log1p(np.exp(x.astype(np.float64)))).astype(np.float32)


def on_host(got):
    """A result as a NumPy array, copied from the GPU where it lives there."""
    if isinstance(got, dlop.Array):
        return got.numpy()
    if hasattr(got, "get"):  # CuPy
        return got.get()
    if hasattr(got, "cpu"):  # PyTorch
        return got.cpu().numpy()
    return np.asarray(got)


def check(name, got, want):
    if not np.allclose(on_host(got), want, rtol=2e-6, atol=1e-6):
        raise SystemExit(f"source_elementwise.py: WRONG RESULT: {name}")


def bare_launch(function, pointers, n):
    """cuLaunchKernel through ctypes on the legacy default stream, arguments packed once."""
    libcuda = ctypes.CDLL("libcuda.so.1")
    launch = libcuda.cuLaunchKernel
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    values = [ctypes.c_void_p(p) for p in pointers] + [ctypes.c_longlong(n)]
    params = (ctypes.c_void_p * 3)(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
    handle, legacy, grid = ctypes.c_void_p(function), ctypes.c_void_p(1), (n + 255) // 256

    def run():
        if launch(handle, grid, 1, 1, 256, 1, 1, 0, legacy, params, None) != 0:
            raise RuntimeError("cuLaunchKernel failed")
    run.values = values  # kept alive with the closure
    return run


def gpu_rows(args):
    rng = np.random.default_rng(1)
    xs, ws = rng.uniform(-5, 5, N).astype(np.float32), rng.uniform(-2, 2, N).astype(np.float32)
    x, w = dlop.asarray(xs, device="cuda"), dlop.asarray(ws, device="cuda")
    check("dlop softplus", softplus(x).numpy(), softplus_numpy(xs))
    check("dlop mul_sub", mul_sub(x, w).numpy(), xs * ws - ws)
    libcuda = ctypes.CDLL("libcuda.so.1")
    context = ctypes.c_void_p()
    assert libcuda.cuInit(0) == 0
    assert libcuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), 0) == 0
    assert libcuda.cuCtxSetCurrent(context) == 0

    def sync():
        if libcuda.cuCtxSynchronize() != 0:
            raise RuntimeError("cuCtxSynchronize failed")

    def time_it(call):
        return per_launch_us(call, sync, args.samples, args.reps)

    rows = {}
    y = dlop.asarray(np.zeros(N, np.float32), device="cuda")
    kernel = dlop.SourceModule(KERNEL).get_function("softplus")
    kernel(y, x, N, block=(256, 1, 1), grid=((N + 255) // 256, 1))
    check("SourceModule softplus", y.numpy(), softplus_numpy(xs))
    pointers = [a.__cuda_array_interface__["data"][0] for a in (y, x)]
    rows["bare cuLaunchKernel softplus"] = time_it(bare_launch(kernel._function, pointers, N))
    rows["dlop softplus(x)"] = time_it(lambda: softplus(x))
    rows["dlop mul_sub(x, w)"] = time_it(lambda: mul_sub(x, w))
    try:
        import cupy
        cx, cw = cupy.asarray(xs), cupy.asarray(ws)
        ck = cupy.ElementwiseKernel("float32 x", "float32 y", SOFTPLUS, "bench_softplus")
        ck2 = cupy.ElementwiseKernel("float32 x, float32 w", "float32 z", "z = x * w - w", "bench_ms")
        check("cupy softplus", cupy.asnumpy(ck(cx)), softplus_numpy(xs))
        rows["cupy ElementwiseKernel softplus"] = time_it(lambda: ck(cx))
        rows["cupy ElementwiseKernel mul_sub"] = time_it(lambda: ck2(cx, cw))
    except ImportError:
        print("cupy not installed: its rows are left out")
    try:
        import torch
        tx, tw = torch.from_numpy(xs).cuda(), torch.from_numpy(ws).cuda()
        rows["torch softplus"] = time_it(lambda: torch.nn.functional.softplus(tx))
        rows["torch where(x > 20, x, log1p(exp(x)))"] = time_it(
            lambda: torch.where(tx > 20, tx, torch.log1p(torch.exp(tx))))
        rows["torch x * w - w"] = time_it(lambda: tx * tw - tw)
    except ImportError:
        torch = None
        print("torch not installed: its rows and the copy are left out")
    print(f"{'per call, 230400 float32':42s} {'us':>8s} {'/bare':>7s} {'/cupy':>7s}")
    bare = rows["bare cuLaunchKernel softplus"]
    for name, us in rows.items():
        kind = "mul_sub" if ("mul_sub" in name or "w - w" in name) else "softplus"
        cupy_us = rows.get(f"cupy ElementwiseKernel {kind}")
        print(f"{name:42s} {us:8.2f} {us / bare:7.2f} {us / cupy_us if cupy_us else float('nan'):7.2f}")
    print("goal: dlop <= cupy's cost (/cupy <= 1) and softplus within 1.1x of the bare launch")
    throughput = gpu_throughput(torch, sync)
    return {"call_us": rows, **throughput}


def gpu_throughput(torch, sync):
    """At 2^28 float32: a memory-bound body (z = x * w - w, three streams) against a copy of the
    same bytes, and softplus (exp and log1p per element: on an H200 its arithmetic, not the
    memory, sets the pace) against the copy and torch's softplus."""
    n = 1 << 28
    rng = np.random.default_rng(2)
    x = dlop.asarray(rng.uniform(-5, 5, n).astype(np.float32), device="cuda")
    w = dlop.asarray(rng.uniform(-2, 2, n).astype(np.float32), device="cuda")
    y = softplus(x)
    check("softplus 2^28 (a sample)", y.numpy()[:: 1 << 16], softplus_numpy(x.numpy()[:: 1 << 16]))
    z = mul_sub(x, w)
    xs, ws = x.numpy()[:: 1 << 16], w.numpy()[:: 1 << 16]
    check("mul_sub 2^28 (a sample)", z.numpy()[:: 1 << 16], xs * ws - ws)
    del y, z

    def seconds(call, reps=20):
        call()
        sync()
        start = time.perf_counter()
        for _ in range(reps):
            call()
        sync()
        return (time.perf_counter() - start) / reps
    result = {"softplus_2^28_GBps": 2 * n * 4 / seconds(lambda: softplus(x)) / 1e9,
              "mul_sub_2^28_GBps": 3 * n * 4 / seconds(lambda: mul_sub(x, w)) / 1e9}
    if torch is not None:
        src = torch.empty(n, dtype=torch.float32, device="cuda")
        dst = torch.empty_like(src)
        result["copy_2^28_GBps"] = 2 * n * 4 / seconds(lambda: dst.copy_(src)) / 1e9
        tx = torch.from_dlpack(x)  # the same values, no copy
        result["torch_softplus_2^28_GBps"] = 2 * n * 4 / seconds(
            lambda: torch.nn.functional.softplus(tx)) / 1e9
        copy = result["copy_2^28_GBps"]
        print(f"mul_sub 2^28 float32: {result['mul_sub_2^28_GBps']:.0f} GB/s, copy {copy:.0f} GB/s: "
              f"{100 * result['mul_sub_2^28_GBps'] / copy:.1f} % (goal >= 95 %)")
        print(f"softplus 2^28 float32: {result['softplus_2^28_GBps']:.0f} GB/s: "
              f"{100 * result['softplus_2^28_GBps'] / copy:.1f} % of the copy; torch's softplus "
              f"{result['torch_softplus_2^28_GBps']:.0f} GB/s "
              f"({result['softplus_2^28_GBps'] / result['torch_softplus_2^28_GBps']:.2f}x torch)")
    return result


def cpu_rows(args):
    rng = np.random.default_rng(1)
    xs, ws = rng.uniform(-5, 5, N).astype(np.float32), rng.uniform(-2, 2, N).astype(np.float32)
    check("dlop softplus", softplus(xs).numpy(), softplus_numpy(xs))
    check("dlop mul_sub", mul_sub(xs, ws).numpy(), xs * ws - ws)
    rows = {"dlop softplus(x)": per_launch_us(lambda: softplus(xs), lambda: None, args.samples, args.reps),
            "numpy where(x > 20, x, log1p(exp(x)))": per_launch_us(
                lambda: np.where(xs > 20, xs, np.log1p(np.exp(xs))), lambda: None, args.samples, args.reps),
            "dlop mul_sub(x, w)": per_launch_us(lambda: mul_sub(xs, ws), lambda: None, args.samples, args.reps),
            "numpy x * w - w": per_launch_us(lambda: xs * ws - ws, lambda: None, args.samples, args.reps)}
    try:
        import numexpr
        rows["numexpr where(x > 20, x, log1p(exp(x)))"] = per_launch_us(
            lambda: numexpr.evaluate("where(x > 20, x, log1p(exp(x)))", local_dict={"x": xs}),
            lambda: None, args.samples, args.reps)
        rows["numexpr x * w - w"] = per_launch_us(
            lambda: numexpr.evaluate("x * w - w", local_dict={"x": xs, "w": ws}), lambda: None,
            args.samples, args.reps)
    except ImportError:
        print("numexpr not installed: its rows are left out")
    print(f"{'per call, 230400 float32 (cpu)':42s} {'us':>8s} {'/numpy':>7s}")
    for name, us in rows.items():
        kind = "x * w - w" if ("mul_sub" in name or "w - w" in name) else "where(x > 20"
        reference = next(v for k, v in rows.items() if k.startswith("numpy") and kind in k)
        print(f"{name:42s} {us:8.2f} {us / reference:7.2f}")
    return {"call_us": rows}


COMPILE = """
import json, sys, time
import numpy as np
import dlop
device = sys.argv[2]
x = dlop.asarray(np.linspace(-5, 5, 1000, dtype=np.float32), device=device)
t = time.perf_counter()
op = dlop.elementwise(sys.argv[1], "y = x > 20 ? x : log1p(exp(x * alpha))", inputs="x",
                      outputs="y", dtypes=("float32",), params={"alpha": 1.0})
define = time.perf_counter() - t
t = time.perf_counter(); op(x).numpy(); first = time.perf_counter() - t
t = time.perf_counter(); op(x, alpha=0.5).numpy(); again = time.perf_counter() - t
s = dlop.jit_stats()
print(json.dumps({"define_ms": define * 1e3, "first_ms": first * 1e3, "again_ms": again * 1e3,
                  "compiles": s["compiles"], "disk_hits": s["disk_hits"]}))
"""


def compile_times(device):
    name = f"bench_cold_{uuid.uuid4().hex[:12]}"  # a new op: a new source
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, DLOP_CACHE_DIR=cache)
        runs = [json.loads(subprocess.run([sys.executable, "-c", COMPILE, name, device], env=env,
                                          check=True, capture_output=True, text=True).stdout)
                for _ in range(2)]
    cold, warm = runs
    assert cold["compiles"] >= 1 and warm["disk_hits"] >= 1, runs
    result = {"cold_define_ms": cold["define_ms"], "cold_first_call_ms": cold["first_ms"],
              "disk_hit_define_ms": warm["define_ms"], "disk_hit_first_call_ms": warm["first_ms"],
              "memory_hit_new_value_ms": min(cold["again_ms"], warm["again_ms"])}
    for key, ms in result.items():
        print(f"{key:42s} {ms:8.2f} ms")
    print("goal: a cache hit (disk_hit_*, memory_hit_*) <= 5 ms; a definition compiles the body "
          "for the CPU too (its check)")
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when usable)")
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--reps", type=int, default=500)
    args = parser.parse_args()
    device = args.device
    if device is None:
        try:
            dlop._C.device_check("cuda:0")
            device = "cuda"
        except dlop.DlopError as error:
            print(f"no GPU usable ({error}): the CPU rows only")
            device = "cpu"
    result = gpu_rows(args) if device == "cuda" else cpu_rows(args)
    result.update(compile_times(device))
    print(json.dumps({"device": device, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
