#!/usr/bin/env python3
"""frameworks.py — dlop ops inside PyTorch and JAX against the frameworks' own ops, side by side
in one run on cuda:0 (docs/frameworks.md).

(a) torch-eager: per call from eager PyTorch, torch.ops.dlop.exp(x) against torch.exp(x) on
    230400 float32 (--eager-n), results left on the device; wall clock over --calls calls ended
    by a device synchronize, median of --samples. Goal: dlop within 1.2x torch's time.
(b) jax-jit: inside jax.jit, dlop.jax.op("exp") against jnp.exp on 2^26 float32 (--jit-log2):
    time per jitted call (block_until_ready each --calls calls) and the bytes it moves (read n,
    write n) as GB/s. Goal: dlop at least 0.95x jnp.exp's throughput.
(c) torch-compile: torch.compile(fullgraph=True) of sin(exp(x) * y) + x with exp and mul from
    dlop against the same graph all native, 2^24 float32 (--compile-log2). Reported, no goal set.

Every timed path is checked against the native result first; a wrong one is reported, not
timed. A part that cannot run (no GPU, no torch, no jax, dlop.jax unavailable) prints why.
Results go to bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

# JAX takes 75 % of the GPU's memory at start by default, which would starve torch in this run.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np

ROWS: list[dict] = []


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="torch-eager,jax-jit,torch-compile")
    parser.add_argument("--eager-n", type=int, default=230400)
    parser.add_argument("--jit-log2", type=int, default=26)
    parser.add_argument("--compile-log2", type=int, default=24)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--json", help="write the rows to this file")
    return parser.parse_args()


ARGS = parse_args()


def row(part: str, what: str, value: float, unit: str, note: str = "") -> None:
    ROWS.append({"part": part, "what": what, "value": value, "unit": unit, "note": note})
    print(f"{part:14s} {what:44s} {value:12.3f} {unit:8s} {note}")


def timed(run, sync, calls: int, samples: int) -> float:
    """Median seconds per call: calls calls, then sync, per sample (after a warm-up)."""
    run()
    sync()
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        sync()
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)


def torch_eager() -> None:
    import torch
    import dlop.torch
    exp = dlop.torch.op("exp")
    x = torch.randn(ARGS.eager_n, device="cuda")
    torch.testing.assert_close(exp(x), torch.exp(x))
    sync = torch.cuda.synchronize
    native = timed(lambda: torch.exp(x), sync, ARGS.calls, ARGS.samples)
    ours = timed(lambda: exp(x), sync, ARGS.calls, ARGS.samples)
    row("torch-eager", f"torch.exp, {ARGS.eager_n} float32", native * 1e6, "us/call")
    row("torch-eager", f"torch.ops.dlop.exp, {ARGS.eager_n} float32", ours * 1e6, "us/call")
    row("torch-eager", "dlop / torch time", ours / native, "x", "goal <= 1.2")


def jax_jit() -> None:
    import jax
    import jax.numpy as jnp
    import dlop.jax
    if not dlop.jax.available():
        print("jax-jit: skipped:", dlop.jax.unavailable_reason())
        return
    n = 1 << ARGS.jit_log2
    x = jax.device_put(jnp.linspace(-4, 4, n, dtype=jnp.float32), jax.devices("gpu")[0])
    ours_f, native_f = jax.jit(dlop.jax.op("exp")), jax.jit(jnp.exp)
    np.testing.assert_allclose(np.asarray(ours_f(x))[::4097], np.asarray(native_f(x))[::4097],
                               rtol=2e-6)
    last = {}

    def call(f):
        def run():
            last["out"] = f(x)
        return run

    sync = lambda: jax.block_until_ready(last["out"])  # noqa: E731
    native = timed(call(native_f), sync, max(ARGS.calls // 10, 10), ARGS.samples)
    ours = timed(call(ours_f), sync, max(ARGS.calls // 10, 10), ARGS.samples)
    gb = 2 * n * 4 / 1e9
    row("jax-jit", f"jnp.exp, 2^{ARGS.jit_log2} float32", gb / native, "GB/s")
    row("jax-jit", f"dlop.jax exp, 2^{ARGS.jit_log2} float32", gb / ours, "GB/s")
    row("jax-jit", "dlop / jnp throughput", native / ours, "x", "goal >= 0.95")


def torch_compile() -> None:
    import torch
    import dlop.torch
    exp, mul = dlop.torch.op("exp"), dlop.torch.op("mul")
    n = 1 << ARGS.compile_log2
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    mixed = torch.compile(lambda a, b: torch.sin(mul(exp(a), b)) + a, fullgraph=True)
    native = torch.compile(lambda a, b: torch.sin(torch.exp(a) * b) + a, fullgraph=True)
    torch.testing.assert_close(mixed(x, y), native(x, y))
    sync = torch.cuda.synchronize
    t_native = timed(lambda: native(x, y), sync, max(ARGS.calls // 10, 10), ARGS.samples)
    t_mixed = timed(lambda: mixed(x, y), sync, max(ARGS.calls // 10, 10), ARGS.samples)
    row("torch-compile", f"all native, 2^{ARGS.compile_log2} float32", t_native * 1e6, "us/call")
    row("torch-compile", f"dlop exp and mul inside, 2^{ARGS.compile_log2}", t_mixed * 1e6,
        "us/call")
    row("torch-compile", "mixed / native time", t_mixed / t_native, "x",
        "inductor cannot fuse across dlop ops (opaque custom ops)")


def main() -> None:
    import dlop
    try:
        dlop._C.device_check("cuda:0")
    except dlop.DlopError as error:
        print("frameworks: no GPU usable, nothing to time:", error)
        return
    parts = {"torch-eager": torch_eager, "jax-jit": jax_jit, "torch-compile": torch_compile}
    for name in ARGS.parts.split(","):
        try:
            parts[name]()
        except ImportError as error:
            print(f"{name}: skipped: {error}")
    if ARGS.json:
        with open(ARGS.json, "w") as out:
            json.dump(ROWS, out, indent=1)


if __name__ == "__main__":
    main()
