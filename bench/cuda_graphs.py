#!/usr/bin/env python3
"""cuda_graphs.py — a launch-bound compiled function with replayed CUDA graphs, side by side in one run.

The 10-op elementwise graph of tests/gpu/test_cuda_graphs.c on 1024 float32 elements per call
from Python, each result left on the GPU:
    t = x*b; t = t+x; t = tanh(t); t = t*b; t = t-x; t = sigmoid(t); t = t+b; t = t*x;
    t = maximum(t, b); y = t-b
- dlop with CUDA graphs (the default: recorded on the second call, one graph launch per call
  after), the same with two input pairs in turn (every replay sets moved addresses into the
  captured nodes), and with ``cuda_graphs=False`` (ten kernel launches per call);
- one bare kernel launch: a ctypes cuLaunchKernel of a PTX exp kernel (python_calls.py's), a
  dlop one-op function (exp) and torch.exp on the same 1024 elements;
- PyTorch eager on the 10 ops, and the 10 ops captured once into a torch.cuda.CUDAGraph and
  replayed per call.
Each figure is the median over --repeats of (time of --calls calls + one synchronize) / calls,
with the host's share (the calls alone) beside it. Every result is checked against NumPy first.
Goal: dlop with graphs at most 1.5x the bare launch. Without a GPU it says so and exits 0.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_calls import ROWS, Driver, per_call_us, record  # noqa: E402

N = 1024
GOAL = 1.5


def reference(x: np.ndarray, b: np.ndarray) -> np.ndarray:
    x64, b64 = x.astype(np.float64), b.astype(np.float64)
    t = np.tanh(x64 * b64 + x64) * b64 - x64
    t = (1 / (1 + np.exp(-t)) + b64) * x64
    return (np.maximum(t, b64) - b64).astype(np.float32)


def check(name: str, got: np.ndarray, want: np.ndarray) -> None:
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-6):
        raise RuntimeError("%s: WRONG RESULT (max abs err %.3g)"
                           % (name, float(np.max(np.abs(got - want)))))


def dlop_ten_ops(cuda_graphs: bool):
    import dlop
    ops = dlop.ops
    x = dlop.vector("x", dtype="float32", shape=(N,))
    b = dlop.vector("b", dtype="float32", shape=(N,))
    t = ops.mul(x, b)
    t = ops.add(t, x)
    t = ops.tanh(t)
    t = ops.mul(t, b)
    t = ops.sub(t, x)
    t = ops.sigmoid(t)
    t = ops.add(t, b)
    t = ops.mul(t, x)
    t = ops.maximum(t, b)
    y = ops.sub(t, b)
    return dlop.function([x, b], y, device="cuda", cuda_graphs=cuda_graphs)


def torch_ten_ops(torch, x, b):
    t = x * b
    t = t + x
    t = torch.tanh(t)
    t = t * b
    t = t - x
    t = torch.sigmoid(t)
    t = t + b
    t = t * x
    t = torch.maximum(t, b)
    return t - b


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per sample")
    parser.add_argument("--repeats", type=int, default=15, help="samples; the median is shown")
    parser.add_argument("--warmup", type=int, default=200, help="warm-up calls")
    args = parser.parse_args()
    timing = dict(calls=args.calls, repeats=args.repeats, warmup=args.warmup)
    rng = np.random.default_rng(11)
    x_host = (rng.random(N, dtype=np.float32) * 4 - 2).astype(np.float32)
    b_host = (rng.random(N, dtype=np.float32) * 4 - 2).astype(np.float32)
    want = reference(x_host, b_host)
    try:
        driver = Driver()
    except (OSError, RuntimeError) as error:
        print("cuda_graphs: no usable GPU (%s): nothing measured" % error)
        return 0
    sync = driver.synchronize
    print("cuda_graphs: %s, %d float32 per call" % (driver.name, N), flush=True)

    import dlop
    xs, bs = dlop.asarray(x_host, device="cuda"), dlop.asarray(b_host, device="cuda")
    for cuda_graphs in (True, False):
        name = "dlop graphs" if cuda_graphs else "dlop no graphs"
        try:
            f = dlop_ten_ops(cuda_graphs)
            for _ in range(3):  # the second call records the graph
                check(name, np.asarray(f(xs, bs).numpy()), want)
            record("gpu", name, per_call_us(lambda: f(xs, bs), sync, **timing),
                   "10 ops, cuda_graphs=%s" % cuda_graphs)
            if cuda_graphs:
                # Two input pairs in turn: every replay moves the input addresses, so it sets
                # them into the 8 nodes that read x or b first (the cost of following them).
                other = [dlop.asarray(x_host, device="cuda"), dlop.asarray(b_host, device="cuda")]
                pairs, turn = [(xs, bs), tuple(other)], [0]

                def moving() -> None:
                    turn[0] ^= 1
                    f(*pairs[turn[0]])

                for _ in range(2):  # the second pair's first call sets its addresses
                    moving()
                check(name, np.asarray(f(*other).numpy()), want)
                record("gpu", "dlop graphs moved", per_call_us(moving, sync, **timing),
                       "10 ops, inputs at new addresses every call")
            line = [ln for ln in f.explain().splitlines() if ln.startswith("cuda graphs")]
            print("  %s: %s" % (name, line[0] if line else "explain() has no cuda graphs line"))
        except Exception as error:  # noqa: BLE001 — one failure must not hide the other figures
            record("gpu", name, None, "failed: %s" % error)
    try:
        one = dlop.vector("x", dtype="float32", shape=(N,))
        g = dlop.function([one], dlop.ops.exp(one), device="cuda")
        check("dlop one op", np.asarray(g(xs).numpy()), np.exp(x_host))
        record("gpu", "dlop one op", per_call_us(lambda: g(xs), sync, **timing),
               "exp as a one-op function (one launch)")
    except Exception as error:  # noqa: BLE001
        record("gpu", "dlop one op", None, "failed: %s" % error)

    launch, result, free = driver.bare_launch(x_host)
    try:
        launch()
        check("bare launch", result(), np.exp(x_host))
        record("gpu", "bare launch", per_call_us(launch, sync, **timing),
               "ctypes cuLaunchKernel of a PTX exp kernel")
    finally:
        free()

    try:
        import torch
        if not torch.cuda.is_available():
            raise ImportError("torch sees no CUDA device")
        tx, tb = torch.from_numpy(x_host).cuda(), torch.from_numpy(b_host).cuda()
        check("torch eager", torch_ten_ops(torch, tx, tb).cpu().numpy(), want)
        record("gpu", "torch exp", per_call_us(lambda: torch.exp(tx), sync, **timing),
               "torch.exp(x): one launch")
        record("gpu", "torch eager", per_call_us(lambda: torch_ten_ops(torch, tx, tb), sync,
                                                 **timing), "the 10 ops, eager")
        static_x, static_b = tx.clone(), tb.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the capture, as torch's docs ask
            for _ in range(3):
                torch_ten_ops(torch, static_x, static_b)
        torch.cuda.current_stream().wait_stream(side)
        captured = torch.cuda.CUDAGraph()
        with torch.cuda.graph(captured):
            static_y = torch_ten_ops(torch, static_x, static_b)
        captured.replay()
        check("torch graph", static_y.cpu().numpy(), want)
        record("gpu", "torch graph", per_call_us(captured.replay, sync, **timing),
               "torch.cuda.CUDAGraph replay (fixed input and output buffers)")
    except ImportError as error:
        for name in ("torch exp", "torch eager", "torch graph"):
            record("gpu", name, None, "not usable: %s" % error)

    values = {name: us for _, name, us, _, _ in ROWS}
    base = values.get("bare launch")
    print()
    print("10-op graph on %d float32, per call from Python; ratio = us / bare launch" % N)
    print("  %-16s %10s %8s %10s  %s" % ("name", "us/call", "ratio", "host us", "note"))
    for _, name, us, host, note in ROWS:
        shown = "%10.2f" % us if us is not None else "%10s" % "-"
        ratio = "%8.2f" % (us / base) if us is not None and base else "%8s" % "-"
        host_shown = "%10.2f" % host if host is not None else "%10s" % "-"
        print("  %-16s %s %s %s  %s" % (name, shown, ratio, host_shown, note))
    ours = values.get("dlop graphs")
    if ours is not None and base:
        print("  dlop with graphs: %.2fx the bare launch, %s the %.1fx goal"
              % (ours / base, "meets" if ours <= GOAL * base else "MISSES", GOAL))
    wrong = [row for row in ROWS if "WRONG RESULT" in row[4]]
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
