#!/usr/bin/env python3
"""cpu_vs_numpy.py — the seed kernels on the CPU against NumPy, in one run on one machine.

Runs dlop-bench-cpu (kernels through their thunk on preallocated tensors, and through
dlop_function_run) and times NumPy's np.exp(x, out=y), np.multiply(a, b, out=z),
np.multiply(x, 2, out=y) and the allocating forms (np.exp(x), a * b, x * 2) the same way
(median per call over samples of >= 100 us, ~50 ms per point, >= 5 samples), then prints a
side-by-side table with dlop/NumPy throughput and whether the goal holds: at least NumPy's
throughput from 2^16 elements up (dlop thunk vs NumPy with out=).
"""
import argparse
import os
import platform
import subprocess
import sys
import time

import numpy as np

GOAL_FROM_LOG2 = 16
OPS = ("double", "multiply_them", "exp")


def parse_line(line):
    """'dlop-bench k=v k=v' -> dict, or None for other lines."""
    if not line.startswith("dlop-bench "):
        return None
    fields = dict(item.split("=", 1) for item in line.split()[1:] if "=" in item)
    return fields


def measure(call, target_seconds, min_reps):
    """Median seconds per call, batched like dlop-bench-cpu so both pay the same clock cost."""
    start = time.perf_counter()
    calls = 0
    while True:
        call()
        calls += 1
        warm = time.perf_counter() - start
        if calls >= 3 and (warm >= 0.1 * target_seconds or calls >= 100000):
            break
    # Calibrate on warm calls only: the first ones pay page faults and would shrink `inner`.
    k = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(k):
            call()
        per_call = (time.perf_counter() - t0) / k
        if per_call * k >= 1e-3 or k >= (1 << 20):
            break
        k *= 2
    inner = int(1e-4 / per_call) + 1
    count = max(min_reps, min(20000, int(target_seconds / (per_call * inner))))
    samples = []
    for _ in range(count):
        t0 = time.perf_counter()
        for _ in range(inner):
            call()
        samples.append((time.perf_counter() - t0) / inner)
    return float(np.median(samples))


def numpy_points(log2_sizes, dtypes, target_seconds, min_reps):
    """{(op, dtype, n): (seconds with out=, seconds allocating)}"""
    rng = np.random.default_rng(12345)
    results = {}
    for dtype in dtypes:
        for log2n in log2_sizes:
            n = 1 << log2n
            # The same ranges as dlop-bench-cpu: exp stays clear of overflow; never zeros.
            x = rng.uniform(-5.0, 5.0, n).astype(dtype)
            b = rng.uniform(-2.0, 2.0, n).astype(dtype)
            y = np.empty_like(x)
            two = dtype(2)
            results[("double", dtype.__name__, n)] = (
                measure(lambda: np.multiply(x, two, out=y), target_seconds, min_reps),
                measure(lambda: x * 2, target_seconds, min_reps),
            )
            results[("multiply_them", dtype.__name__, n)] = (
                measure(lambda: np.multiply(x, b, out=y), target_seconds, min_reps),
                measure(lambda: x * b, target_seconds, min_reps),
            )
            results[("exp", dtype.__name__, n)] = (
                measure(lambda: np.exp(x, out=y), target_seconds, min_reps),
                measure(lambda: np.exp(x), target_seconds, min_reps),
            )
    return results


def bytes_moved(op, dtype, n):
    size = np.dtype(dtype).itemsize
    return n * size * (3 if op == "multiply_them" else 2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", default=os.path.join("build", "bin", "dlop-bench-cpu"),
                        help="path to dlop-bench-cpu")
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--min-log2", type=int, default=10)
    parser.add_argument("--max-log2", type=int, default=24)
    parser.add_argument("--step", type=int, default=2)
    parser.add_argument("--target-ms", type=float, default=50.0)
    parser.add_argument("--min-reps", type=int, default=5)
    parser.add_argument("--out", help="also write the table to this file")
    args = parser.parse_args()

    ops = [op for op in args.ops.split(",") if op]
    dtype_names = [d for d in args.dtypes.split(",") if d]
    dtypes = [getattr(np, d) for d in dtype_names]
    log2_sizes = list(range(args.min_log2, args.max_log2 + 1, args.step))

    command = [args.bench, "--ops", ",".join(ops), "--dtypes", ",".join(dtype_names),
               "--min-log2", str(args.min_log2), "--max-log2", str(args.max_log2),
               "--step", str(args.step), "--target-ms", str(args.target_ms),
               "--min-reps", str(args.min_reps)]
    print("running:", " ".join(command), file=sys.stderr, flush=True)
    proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(proc.stderr)
    header = [line for line in proc.stdout.splitlines() if line.startswith("#")]
    dlop = {}
    for line in proc.stdout.splitlines():
        fields = parse_line(line)
        if fields:
            dlop[(fields["op"], fields["dtype"], int(fields["n"]), fields["path"])] = fields

    print("timing NumPy %s ..." % np.__version__, file=sys.stderr, flush=True)
    numpy_results = numpy_points(log2_sizes, dtypes, args.target_ms / 1000.0, args.min_reps)

    lines = []
    lines.append("dlop CPU kernels vs NumPy %s (single-threaded) on %s, Python %s" % (
        np.__version__, platform.processor() or platform.machine(), platform.python_version()))
    lines.extend(header)
    lines.append("GB/s counts bytes read + written; 'thunk' = kernel on preallocated tensors, "
                 "'fn' = dlop_function_run (allocates its output);")
    lines.append("NumPy 'out=' = np.multiply(x, 2, out=y) / np.multiply(a, b, out=z) / "
                 "np.exp(x, out=y); 'alloc' = x * 2 / a * b / np.exp(x).")
    lines.append("ratio = dlop thunk / NumPy out= throughput; goal: ratio >= 1 from 2^%d "
                 "elements up." % GOAL_FROM_LOG2)
    title = "%-14s %-8s %6s %10s %10s %10s %10s %7s %7s  %s" % (
        "op", "dtype", "n", "thunk", "fn", "np out=", "np alloc", "ratio", "fn/alc", "goal")
    lines.append("")
    lines.append(title)
    lines.append("-" * len(title))
    misses = []
    checked = 0
    failed_checks = []
    for op in ops:
        for dtype in dtype_names:
            for log2n in log2_sizes:
                n = 1 << log2n
                thunk = dlop.get((op, dtype, n, "thunk"))
                fn = dlop.get((op, dtype, n, "function"))
                np_out, np_alloc = numpy_results[(op, dtype, n)]
                moved = bytes_moved(op, dtype, n)
                def gbps(seconds):
                    return moved / seconds / 1e9
                t_gb = gbps(float(thunk["seconds"])) if thunk else None
                f_gb = gbps(float(fn["seconds"])) if fn else None
                ratio = t_gb / gbps(np_out) if t_gb else None
                fn_ratio = f_gb / gbps(np_alloc) if f_gb else None
                for point in (thunk, fn):
                    if point and point.get("check") != "ok":
                        failed_checks.append("%s %s 2^%d %s" % (op, dtype, log2n, point["path"]))
                if log2n >= GOAL_FROM_LOG2:
                    checked += 1
                    if ratio is None:
                        goal = "NO (no dlop result)"
                        misses.append((op, dtype, log2n, None))
                    elif ratio >= 1.0:
                        goal = "yes"
                    else:
                        goal = "NO"
                        misses.append((op, dtype, log2n, ratio))
                else:
                    goal = "-"
                def cell(value, fmt):
                    return fmt % value if value is not None else "n/a"
                lines.append("%-14s %-8s %6s %10s %10s %10.2f %10.2f %7s %7s  %s" % (
                    op, dtype, "2^%d" % log2n, cell(t_gb, "%.2f"), cell(f_gb, "%.2f"),
                    gbps(np_out), gbps(np_alloc), cell(ratio, "%.2f"), cell(fn_ratio, "%.2f"),
                    goal))
    lines.append("")
    lines.append("goal (>= NumPy from 2^%d up): %d of %d rows hold" % (
        GOAL_FROM_LOG2, checked - len(misses), checked))
    for op, dtype, log2n, ratio in misses:
        lines.append("  missed: %s %s 2^%d: %s" % (
            op, dtype, log2n, "no result" if ratio is None else "%.0f%% of NumPy" % (100 * ratio)))
    if failed_checks:
        lines.append("WRONG RESULTS (dlop-bench-cpu check failed): " + "; ".join(failed_checks))
    if proc.returncode != 0:
        lines.append("dlop-bench-cpu exited with status %d (see its messages above)" % proc.returncode)
    table = "\n".join(lines) + "\n"
    sys.stdout.write(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table)
    return 0 if proc.returncode == 0 and not failed_checks else 1


if __name__ == "__main__":
    sys.exit(main())
