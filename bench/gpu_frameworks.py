#!/usr/bin/env python3
"""gpu_frameworks.py — the GPU bench's workloads in PyTorch, CuPy and JAX, for scale.

exp, x*2, a*b and a*row (a viewed as a 2^14 x 2^14 matrix times one broadcast row) at 2^28
elements, float32 and float64, plus PyTorch's device-to-device copy as the ceiling. PyTorch and
CuPy write into preallocated outputs (out=) and are timed with CUDA events around each call; JAX
(jitted, allocating its outputs) is timed on the host around fn(...).block_until_ready(). Each
figure is the median of --reps calls after --warmup calls. Bandwidth counts bytes read + written.
Frameworks that cannot be imported are reported and skipped.
"""
import argparse
import os
import statistics
import sys
import time
import traceback

# JAX must not grab 75% of the GPU at import: the other frameworks' buffers live there too.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

ROWS = []  # (framework, dtype, workload, ms, TB/s, timing)


def report(framework, dtype, workload, ms, moved, timing):
    tbps = moved / (ms * 1e-3) / 1e12
    ROWS.append((framework, dtype, workload, ms, tbps, timing))
    print("framework-bench framework=%s dtype=%s workload=%s seconds=%.6e tbps=%.4f timing=%s"
          % (framework, dtype, workload, ms * 1e-3, tbps, timing), flush=True)


def workload_bytes(workload, n, cols, size):
    if workload in ("copy", "exp", "x*2"):
        return 2 * n * size
    if workload == "a*b":
        return 3 * n * size
    return (2 * n + cols) * size  # a*row


def median_event_ms(fn, new_event, elapsed_ms, synchronize, args):
    """Median milliseconds of fn() between two CUDA events, over args.reps calls after
    args.warmup calls (PyTorch's and CuPy's events, given as new_event and elapsed_ms)."""
    start, end = new_event(), new_event()
    for _ in range(args.warmup):
        fn()
    synchronize()
    samples = []
    for _ in range(args.reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(elapsed_ms(start, end))
    return statistics.median(samples)


def report_out_workloads(framework, name, size, timed, copy, exp, mul, x, b, y, x2, y2, row, n,
                         cols):
    """Times and reports the workloads of a framework whose exp and mul write into out=: copy is
    its copy of x into y; x2, y2 are x and y as (n / cols, cols) matrices, row b's first cols;
    size is the element size in bytes."""
    work = {
        "copy": copy,
        "exp": lambda: exp(x, out=y),
        "x*2": lambda: mul(x, 2, out=y),
        "a*b": lambda: mul(x, b, out=y),
        "a*row": lambda: mul(x2, row, out=y2),
    }
    for workload, fn in work.items():
        report(framework, name, workload, timed(fn), workload_bytes(workload, n, cols, size),
               "events")


def bench_torch(args, n, cols):
    import torch
    if not torch.cuda.is_available():
        print("torch: no CUDA device visible", flush=True)
        return
    device = torch.device("cuda:0")

    def timed(fn):
        return median_event_ms(fn, lambda: torch.cuda.Event(enable_timing=True),
                               lambda start, end: start.elapsed_time(end), torch.cuda.synchronize,
                               args)

    for name, dtype in (("float32", torch.float32), ("float64", torch.float64)):
        size = torch.empty((), dtype=dtype).element_size()
        x = torch.rand(n, dtype=dtype, device=device) * 10 - 5
        b = torch.rand(n, dtype=dtype, device=device) * 4 - 2
        y = torch.empty_like(x)
        x2, y2, row = x.view(n // cols, cols), y.view(n // cols, cols), b[:cols].clone()
        report_out_workloads("torch", name, size, timed, lambda: y.copy_(x), torch.exp, torch.mul,
                             x, b, y, x2, y2, row, n, cols)
        del x, b, y, x2, y2, row
        torch.cuda.empty_cache()


def bench_cupy(args, n, cols):
    import cupy as cp

    def timed(fn):
        return median_event_ms(fn, cp.cuda.Event, cp.cuda.get_elapsed_time,
                               cp.cuda.Device().synchronize, args)

    rng = cp.random.default_rng(1)
    for name, dtype in (("float32", cp.float32), ("float64", cp.float64)):
        size = cp.dtype(dtype).itemsize
        x = (rng.random(n, dtype=dtype) * 10 - 5).astype(dtype)
        b = (rng.random(n, dtype=dtype) * 4 - 2).astype(dtype)
        y = cp.empty_like(x)
        x2, y2, row = x.reshape(n // cols, cols), y.reshape(n // cols, cols), b[:cols].copy()
        report_out_workloads("cupy", name, size, timed,
                             lambda: y.data.copy_from_device_async(x.data, x.nbytes), cp.exp,
                             cp.multiply, x, b, y, x2, y2, row, n, cols)
        del x, b, y, x2, y2, row
        cp.get_default_memory_pool().free_all_blocks()


def bench_jax(args, n, cols):
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    if not any(d.platform == "gpu" for d in jax.devices()):
        print("jax: no GPU backend (devices: %s)" % jax.devices(), flush=True)
        return

    def timed(fn, *operands):
        for _ in range(args.warmup):
            fn(*operands).block_until_ready()
        samples = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            fn(*operands).block_until_ready()
            samples.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(samples)

    exp = jax.jit(jnp.exp)
    twice = jax.jit(lambda v: v * 2)
    mul = jax.jit(lambda p, q: p * q)
    key = jax.random.PRNGKey(0)
    for name, dtype in (("float32", jnp.float32), ("float64", jnp.float64)):
        size = jnp.dtype(dtype).itemsize
        k1, k2 = jax.random.split(key)
        x = jax.random.uniform(k1, (n,), dtype=dtype, minval=-5, maxval=5)
        b = jax.random.uniform(k2, (n,), dtype=dtype, minval=-2, maxval=2)
        x2, row = x.reshape(n // cols, cols), b[:cols]
        for workload, fn, operands in (("exp", exp, (x,)), ("x*2", twice, (x,)),
                                       ("a*b", mul, (x, b)), ("a*row", mul, (x2, row))):
            report("jax", name, workload, timed(fn, *operands),
                   workload_bytes(workload, n, cols, size), "host+block")
        del x, b, x2, row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2", type=int, default=28)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--frameworks", default="torch,cupy,jax")
    args = parser.parse_args()
    n, cols = 1 << args.log2, 1 << (args.log2 // 2)
    runners = {"torch": bench_torch, "cupy": bench_cupy, "jax": bench_jax}
    for framework in args.frameworks.split(","):
        try:
            runners[framework](args, n, cols)
        except ImportError as e:
            print("%s: not importable (%s): skipped" % (framework, e), flush=True)
        except Exception:  # one framework's failure must not hide the others' figures
            print("%s: failed:\n%s" % (framework, traceback.format_exc()), flush=True)

    if not ROWS:
        print("SKIP: no framework could run a GPU workload")
        return 0
    copy = {dtype: tbps for (fw, dtype, wl, ms, tbps, _) in ROWS if fw == "torch" and wl == "copy"}
    print()
    print("Frameworks, n = 2^%d elements (a*row: 2^%d x 2^%d by 2^%d), median of %d after %d "
          "warm-up" % (args.log2, args.log2 - args.log2 // 2, args.log2 // 2, args.log2 // 2,
                       args.reps, args.warmup))
    print("%-6s %-8s %-6s %10s %8s %14s  %s" % ("fw", "dtype", "work", "ms", "TB/s",
                                               "vs torch copy", "timing"))
    for fw, dtype, wl, ms, tbps, timing in ROWS:
        ratio = "%13.1f%%" % (100 * tbps / copy[dtype]) if dtype in copy else "%14s" % "n/a"
        print("%-6s %-8s %-6s %10.4f %8.3f %s  %s" % (fw, dtype, wl, ms, tbps, ratio, timing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
