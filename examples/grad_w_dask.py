#!/usr/bin/env python3
"""grad_w_dask.py — examples/grad_w.py's gradient over a batch split across Dask workers:

    grad_W = dlop.dot(X.T, dlop.dot(-(x - z), W) * h * (1.0 - h))

The graph is built and compiled once on the client; dlop.dask.apply plans it on the chunked
inputs (X, x, z, h split along the batch, W whole): the elementwise lines become one blockwise
task per batch chunk, and dot(X.T, delta_h) one product per chunk summed by a tree of dlop
reductions.  The workers receive the pieces as text and compile each once.  The result is
compared with NumPy in float64; exits non-zero when it disagrees.

    python examples/grad_w_dask.py                       # 2 local worker processes, the CPU
    python examples/grad_w_dask.py --workers 4 --batch 100000 --chunk 9999
    python examples/grad_w_dask.py --device cuda         # CuPy chunks, CUDA functions
    python examples/grad_w_dask.py --scheduler tcp://host:8786   # an existing cluster
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grad_w  # noqa: E402 - the graph and the NumPy reference, from examples/grad_w.py

# Sums over the whole batch: float32's rounding grows with the number of terms per output.
TOLERANCE = {"float32": 1e-4, "float64": 1e-12}


def random_inputs(dtype: str, batch: int, seed: int = 0) -> list[np.ndarray]:
    """X, x, z, W, h for a batch of `batch` rows, made as grad_w.random_inputs makes them."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((batch, grad_w.VISIBLE))
    W1 = rng.standard_normal((grad_w.VISIBLE, grad_w.HIDDEN)) / np.sqrt(grad_w.VISIBLE)
    W = rng.standard_normal((grad_w.OUT, grad_w.HIDDEN)) / np.sqrt(grad_w.HIDDEN)
    h = 1.0 / (1.0 + np.exp(-(X @ W1)))
    x = h @ W.T
    z = rng.standard_normal((batch, grad_w.OUT))
    return [a.astype(dtype) for a in (X, x, z, W, h)]


def chunked(values: list[np.ndarray], chunk: int, device: str):
    """Dask arrays of the inputs: the batch dim split into chunks of `chunk` rows, W whole;
    on CUDA, each chunk moved to the GPU by CuPy (an explicit step of this example)."""
    import dask.array as da
    arrays = []
    for value in values:
        chunks = value.shape if value.shape[0] == grad_w.OUT else (chunk, value.shape[1])
        array = da.from_array(value, chunks=chunks)
        if device == "cuda":
            import cupy
            array = array.map_blocks(cupy.asarray, dtype=value.dtype,
                                     meta=cupy.empty((0, 0), dtype=value.dtype))
        arrays.append(array)
    return arrays


def run(client, dtype: str, batch: int, chunk: int, device: str) -> bool:
    import dlop
    import dlop.dask
    inputs, grad_W = grad_w.build(dtype)
    f = dlop.function(inputs, grad_W, device=device)
    values = random_inputs(dtype, batch)
    lazy = dlop.dask.apply(f, *chunked(values, chunk, device))
    start = time.perf_counter()
    with warnings.catch_warnings():
        # The data is made here, on the client, to compare with NumPy; Dask warns that it
        # travels in the graph (real work loads it on the workers).
        warnings.filterwarnings("ignore", message="Sending large graph")
        result = client.compute(lazy).result()
    seconds = time.perf_counter() - start
    if device == "cuda":
        result = result.get()
    expected = grad_w.reference(values)
    absolute, relative = grad_w.difference(result, expected)
    good = relative <= TOLERANCE[dtype]
    print("  %-8s grad_W %s from %d rows in %d chunks: %.3f s; max abs diff %.3e, relative "
          "%.3e (tolerance %.0e): %s" % (dtype, list(result.shape), batch, -(-batch // chunk),
                                         seconds, absolute, relative, TOLERANCE[dtype],
                                         "OK" if good else "DISAGREE"))
    return good


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="local worker processes (2)")
    parser.add_argument("--batch", type=int, default=20000, help="rows in the batch (20000)")
    parser.add_argument("--chunk", type=int, default=3001, help="rows per chunk (3001)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--scheduler", help="address of a running Dask scheduler")
    args = parser.parse_args(argv)
    try:
        from distributed import Client, LocalCluster
    except ImportError as error:
        print(f"grad_w_dask: needs dask and distributed ({error})", file=sys.stderr)
        return 2
    if args.scheduler:
        cluster, client = None, Client(args.scheduler)
    else:
        cluster = LocalCluster(n_workers=args.workers, processes=True, threads_per_worker=1,
                               dashboard_address=":0")
        client = Client(cluster)
    print("grad_W over a batch of %d rows in chunks of %d on %d %s workers" % (
        args.batch, args.chunk, len(client.scheduler_info()["workers"]), args.device))
    try:
        ok = all([run(client, dtype, args.batch, args.chunk, args.device)
                  for dtype in ("float32", "float64")])
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    print("grad_w_dask:", "OK, every result agrees" if ok else "FAILED: results disagree")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
