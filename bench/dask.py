#!/usr/bin/env python3
"""bench/dask.py — dlop.dask throughput on a distributed.LocalCluster: 1 worker process against
2 (or --workers), and examples/grad_w.py's gradient on Dask against the same compiled function
in one process.

Workloads (each result checked against NumPy in float64 before it is timed):
- reduce: sum(exp(x) * y + 1) over n float32 (x, y chunked: one blockwise group and one tree
  reduction of dlop steps); throughput counts x and y read once;
- grad_W: dot(X.T, dot(-(x - z), W) * h * (1 - h)) over a batch split into chunks along the
  rows (float32, 784 visible, 256 hidden, 10 out); throughput counts X, x, z and h read once;
- the same two written with dask.array's own NumPy operations (for scale).

The inputs are made and persisted on the workers first (not timed); each figure is the median
wall time of --repeat computes after a warm-up compute (which compiles every piece on every
worker).  Each worker gets DLOP_NUM_THREADS and OPENBLAS_NUM_THREADS = cores / workers, so the
workers together use the machine's cores once (more workers: the same cores, more processes),
or --threads N each (--threads 1: one core per worker, so more workers use more cores).  --device cuda makes the chunks CuPy arrays
(the workers share the GPUs they see; CUDA_VISIBLE_DEVICES is theirs to set).

    python bench/dask.py                        # CPU: 1 and 2 workers
    python bench/dask.py --workers 1,2,4 --n 67108864 --batch 262144
    python bench/dask.py --device cuda --n 268435456 --batch 1048576 --chunk 131072
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# This file is named dask.py: its folder must not shadow the dask package.
sys.path = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import grad_w  # noqa: E402 - the graph of the use case


def timed(client, lazy, repeat: int) -> tuple[float, object]:
    result = client.compute(lazy).result()  # warm-up: compiles the pieces on every worker
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        client.compute(lazy).result()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), result


def host(value, device: str):
    """A computed result on the host; aligned (what arrives from a worker may not be, which
    dlop refuses)."""
    return np.require(value.get() if device == "cuda" else value, requirements="A")


def made_on_workers(client, da, shape, chunks, seed, device, scale=1.0, dtype="float32"):
    """A random array generated chunk by chunk on the workers, persisted there."""
    array = da.random.default_rng(seed).standard_normal(shape, chunks=chunks,
                                                        dtype=np.float64) * scale
    array = array.astype(dtype)
    if device == "cuda":
        import cupy
        array = array.map_blocks(cupy.asarray, dtype=dtype,
                                 meta=cupy.empty((0,) * len(shape), dtype=dtype))
    return client.persist(array)


def bench_reduce(client, da, args, device) -> list[tuple]:
    import dlop
    import dlop.dask
    x, y = (made_on_workers(client, da, (args.n,), args.n_chunk, seed, device)
            for seed in (1, 2))
    xv, yv = dlop.vector("x"), dlop.vector("y")
    f = dlop.function([xv, yv], dlop.sum(dlop.exp(xv) * yv + 1.0), device=device)
    lazy = dlop.dask.apply(f, x, y)
    seconds, result = timed(client, lazy, args.repeat)
    xs, ys = (host(a.compute(), device).astype(np.float64) for a in (x, y))
    expected = (np.exp(xs) * ys + 1.0).sum()
    error = abs(float(host(result, device)) - expected) / abs(expected)
    if error > 1e-4:
        raise SystemExit(f"reduce: dlop.dask gives {float(host(result, device))}, NumPy "
                         f"{expected} (relative {error:.1e})")
    native, _ = timed(client, (da.exp(x) * y + 1.0).sum(), args.repeat)
    gbytes = 2 * args.n * 4 / 1e9
    return [("reduce", "dlop.dask", seconds, gbytes / seconds),
            ("reduce", "dask.array", native, gbytes / native)]


def bench_grad_w(client, da, args, device) -> tuple[list[tuple], tuple]:
    import dlop
    import dlop.dask
    X = made_on_workers(client, da, (args.batch, grad_w.VISIBLE), (args.chunk, grad_w.VISIBLE),
                        3, device)
    x = made_on_workers(client, da, (args.batch, grad_w.OUT), (args.chunk, grad_w.OUT), 4, device)
    z = made_on_workers(client, da, (args.batch, grad_w.OUT), (args.chunk, grad_w.OUT), 5, device)
    h = made_on_workers(client, da, (args.batch, grad_w.HIDDEN), (args.chunk, grad_w.HIDDEN), 6,
                        device, scale=0.25)
    W = made_on_workers(client, da, (grad_w.OUT, grad_w.HIDDEN), (grad_w.OUT, grad_w.HIDDEN), 7,
                        device, scale=1 / 16)
    inputs, output = grad_w.build("float32")
    f = dlop.function(inputs, output, device=device)
    lazy = dlop.dask.apply(f, X, x, z, W, h)
    seconds, result = timed(client, lazy, args.repeat)
    values = [host(a.compute(), device) for a in (X, x, z, W, h)]
    expected = grad_w.reference(values)
    _, relative = grad_w.difference(host(result, device), expected)
    if relative > 1e-4:
        raise SystemExit(f"grad_W: dlop.dask differs from NumPy by {relative:.1e} (relative)")
    native_lazy = X.T @ ((-(x - z)) @ W * h * (1.0 - h))
    native, _ = timed(client, native_lazy, args.repeat)
    gbytes = args.batch * (grad_w.VISIBLE + 2 * grad_w.OUT + grad_w.HIDDEN) * 4 / 1e9
    rows_out = [("grad_W", "dlop.dask", seconds, gbytes / seconds),
                ("grad_W", "dask.array", native, gbytes / native)]
    # The same compiled function in this process, on the whole batch at once.
    if device == "cuda":
        import cupy
        arrays = [cupy.asarray(v) for v in values]
        f(*arrays)
        dlop.synchronize("cuda")
    else:
        arrays = values
        f(*arrays)
    samples = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        f(*arrays)
        if device == "cuda":
            dlop.synchronize("cuda")
        samples.append(time.perf_counter() - start)
    local = statistics.median(samples)
    return rows_out, ("grad_W", "dlop, one process", local, gbytes / local)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="worker counts to compare (1,2)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--n", type=int, default=1 << 25, help="reduce: elements (2^25)")
    parser.add_argument("--n-chunk", type=int, default=1 << 22, help="reduce: chunk (2^22)")
    parser.add_argument("--batch", type=int, default=65536, help="grad_W: rows (65536)")
    parser.add_argument("--chunk", type=int, default=8192, help="grad_W: rows per chunk (8192)")
    parser.add_argument("--repeat", type=int, default=5, help="timed computes per figure (5)")
    parser.add_argument("--threads", type=int, default=0,
                        help="dlop and OpenBLAS threads per worker (default: cores / workers)")
    args = parser.parse_args(argv)
    try:
        import dask.array as da
        from distributed import Client, LocalCluster
    except ImportError as error:
        print(f"bench/dask.py: needs dask and distributed ({error})", file=sys.stderr)
        return 2
    cores = os.cpu_count() or 1
    print(f"dlop.dask, {args.device}: reduce over {args.n} float32 in chunks of {args.n_chunk}; "
          f"grad_W over {args.batch} rows in chunks of {args.chunk}; median of {args.repeat}; "
          f"{cores} cores")
    rows, local = [], None
    for workers in [int(w) for w in args.workers.split(",")]:
        threads = str(args.threads or max(1, cores // workers))
        env = {"DLOP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads}
        with LocalCluster(n_workers=workers, processes=True, threads_per_worker=1,
                          dashboard_address=":0", env=env) as cluster, Client(cluster) as client:
            found = bench_reduce(client, da, args, args.device)
            grad_rows, local = bench_grad_w(client, da, args, args.device)
            rows += [(workers, threads) + r for r in found + grad_rows]
    print(f"{'workload':8} {'how':18} {'workers':>7} {'threads':>7} {'seconds':>9} {'GB/s':>7} "
          f"{'vs 1 worker':>11}")
    first = {(r[2], r[3]): r[4] for r in rows if r[0] == rows[0][0]}
    for workers, threads, workload, how, seconds, rate in rows:
        print(f"{workload:8} {how:18} {workers:7d} {threads:>7} {seconds:9.4f} {rate:7.2f} "
              f"{first[(workload, how)] / seconds:10.2f}x")
    workload, how, seconds, rate = local
    print(f"{workload:8} {how:18} {'-':>7} {os.environ.get('DLOP_NUM_THREADS', 'all'):>7} "
          f"{seconds:9.4f} {rate:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
