#!/usr/bin/env python3
"""fusion.py — compiled functions against the ops they are made of, side by side in one run.

(a) cpu: the seed chain y = exp(2x) * b + tanh(x) - 1 at 2^22 elements (--cpu-log2), float32 and
    float64: dlop fused, dlop fuse=False, NumPy, and numexpr with the same thread count
    (--threads, DLOP_NUM_THREADS and numexpr.set_num_threads). Goals: fused >= numexpr's
    throughput and >= 2x NumPy's (2 threads, float32).
(b) gpu: the same chain at 2^26 (--gpu-log2) on cuda:0: dlop fused and fuse=False against
    PyTorch eager, torch.compile and the fused limit: the bytes one fused kernel must move (read x
    and b, write y) at the device's copy bandwidth (a device-to-device copy measured in the same
    run). Goals: fused >= 0.95x the limit and faster than torch.compile.
(c) calls: a 10-op elementwise graph on 1024 float32 elements per call from Python, the result
    left on the device: dlop fused and fuse=False against one bare kernel launch (ctypes
    cuLaunchKernel, bench/python_calls.py's) on the GPU; on the CPU fused against fuse=False.
    Goal (GPU): fused <= 1.5x the bare launch.
(d) compile: the cold compile of the seed chain's fused kernel (a fresh cache) and a disk-cache
    hit (a second process), from dlop.jit_stats(), on the CPU (C) and, with a GPU, CUDA (NVRTC).
    Goal: a disk hit in at most 5 ms.

Every timed path is checked against NumPy first; a wrong one is reported, not timed. Parts that
cannot run (no GPU, no torch, no numexpr: `scripts/bench-fusion` installs it into the venv) print
why and are skipped. Results go to bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS: list[dict] = []


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="cpu,gpu,calls,compile")
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--cpu-log2", type=int, default=22)
    parser.add_argument("--gpu-log2", type=int, default=26)
    parser.add_argument("--threads", type=int, default=2, help="CPU threads of dlop and numexpr")
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--json", help="write the rows to this file")
    return parser.parse_args()


ARGS = parse_args()
# dlop reads DLOP_NUM_THREADS when its thread pool starts: before the first CPU call.
os.environ.setdefault("DLOP_NUM_THREADS", str(ARGS.threads))
sys.path.insert(0, HERE)
import dlop  # noqa: E402
from cpu_timing import alternating_medians  # noqa: E402


def record(part: str, dtype: str, name: str, seconds: float | None, note: str = "", **extra) -> None:
    row = dict(part=part, dtype=dtype, name=name, seconds=seconds, note=note, **extra)
    ROWS.append(row)
    shown = ("skipped" if not extra else "-") if seconds is None else "%.1f us" % (seconds * 1e6)
    more = "".join(" %s=%s" % (k, ("%.3g" % v) if isinstance(v, float) else v) for k, v in extra.items())
    print("fusion part=%s dtype=%s name=%s %s%s%s" % (part, dtype, name, shown, more,
                                                       " (%s)" % note if note else ""), flush=True)


def seed_chain(dtype: str, device: str):
    x, b = dlop.vector("x", dtype), dlop.vector("b", dtype)
    y = dlop.exp(2 * x) * b + dlop.tanh(x) - 1
    return (dlop.function([x, b], y, device=device),
            dlop.function([x, b], y, device=device, fuse=False))


def numpy_chain(x, b):
    return np.exp(2 * x) * b + np.tanh(x) - 1


def check(name: str, got, want, dtype: str) -> bool:
    rtol = 1e-5 if dtype == "float32" else 1e-12
    got = np.asarray(got, dtype=np.float64)
    if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=rtol):
        print("fusion: %s: WRONG RESULT (max abs err %.3g); not timed"
              % (name, float(np.max(np.abs(got - want))) if got.shape == want.shape else -1))
        return False
    return True


# ---- (a) CPU ------------------------------------------------------------------------------

def part_cpu() -> None:
    n = 1 << ARGS.cpu_log2
    try:
        import numexpr
        numexpr.set_num_threads(ARGS.threads)
    except ImportError:
        numexpr = None
        print("fusion: numexpr is not installed (scripts/bench-fusion installs it): its rows are skipped")
    for dtype in ARGS.dtypes.split(","):
        rng = np.random.default_rng(1)
        xs = rng.uniform(-3, 3, n).astype(dtype)
        bs = rng.uniform(-1, 1, n).astype(dtype)
        want = numpy_chain(xs.astype(np.float64), bs.astype(np.float64))
        fused, unfused = seed_chain(dtype, "cpu")
        xa, ba = dlop.asarray(xs), dlop.asarray(bs)
        paths = {"dlop fused": lambda: fused(xa, ba), "dlop fuse=False": lambda: unfused(xa, ba),
                 "numpy": lambda: numpy_chain(xs, bs)}
        if numexpr is not None:
            operands = {"x": xs, "b": bs}
            paths["numexpr"] = lambda: numexpr.evaluate("exp(2 * x) * b + tanh(x) - 1",
                                                        local_dict=operands)
        good = {name: call for name, call in paths.items() if check(name, call(), want, dtype)}
        times = dict(zip(good, alternating_medians(list(good.values()), min_seconds=1.0,
                                                   samples=ARGS.samples)))
        bytes_moved = 3 * n * np.dtype(dtype).itemsize
        for name, seconds in times.items():
            record("cpu", dtype, name, seconds, "n=2^%d, %d threads" % (ARGS.cpu_log2, ARGS.threads),
                   gbps=bytes_moved / seconds / 1e9)
        if "dlop fused" in times:
            for other in ("numexpr", "numpy", "dlop fuse=False"):
                if other in times:
                    record("cpu", dtype, "fused speedup over " + other, None, "",
                           ratio=times[other] / times["dlop fused"])


# ---- (b) GPU ------------------------------------------------------------------------------

def torch_cuda():
    try:
        import torch
    except ImportError:
        return None, "PyTorch is not installed"
    if not torch.cuda.is_available() or dlop.cuda_device_count() == 0:
        return None, "no CUDA GPU"
    return torch, ""


def gpu_seconds_round_robin(torch, calls: dict, reps=20, samples=7) -> dict:
    """Median seconds per call of each of calls: host wall clock around reps calls, with a
    device-wide synchronize (cudaDeviceSynchronize: it waits for dlop's own streams too) before
    and after. Not CUDA events: those time torch's current stream only, and dlop runs on its own.
    The paths take turns, one sample each a round: float64 kernels that call functions run at
    the card's power cap, where the clock moves with what ran just before, so paths timed one
    after the other would each see another clock."""
    for call in calls.values():
        for _ in range(3):
            call()
    torch.cuda.synchronize()
    times: dict = {name: [] for name in calls}
    for _ in range(samples):
        for name, call in calls.items():
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(reps):
                call()
            torch.cuda.synchronize()
            times[name].append((time.perf_counter() - start) / reps)
    return {name: statistics.median(seconds) for name, seconds in times.items()}


def part_gpu() -> None:
    torch, why = torch_cuda()
    if torch is None:
        record("gpu", "-", "all", None, why + ": part (b) skipped")
        return
    n = 1 << ARGS.gpu_log2
    for dtype in ARGS.dtypes.split(","):
        tdtype = getattr(torch, dtype)
        gen = torch.Generator(device="cuda").manual_seed(1)
        tx = torch.rand(n, device="cuda", dtype=tdtype, generator=gen) * 6 - 3
        tb = torch.rand(n, device="cuda", dtype=tdtype, generator=gen) * 2 - 1
        want = numpy_chain(tx.double().cpu().numpy(), tb.double().cpu().numpy())
        fused, unfused = seed_chain(dtype, "cuda")
        xa, ba = dlop.asarray(tx), dlop.asarray(tb)  # DLPack: the same memory
        torch_chain = lambda: torch.exp(2 * tx) * tb + torch.tanh(tx) - 1  # noqa: E731
        paths = {"dlop fused": lambda: fused(xa, ba), "dlop fuse=False": lambda: unfused(xa, ba),
                 "torch eager": torch_chain}
        try:
            compiled = torch.compile(lambda x, b: torch.exp(2 * x) * b + torch.tanh(x) - 1)
            compiled(tx, tb)
            paths["torch.compile"] = lambda: compiled(tx, tb)
        except Exception as error:  # noqa: BLE001 — report it and go on
            record("gpu", dtype, "torch.compile", None, "failed: %s" % str(error).splitlines()[0])
        good = {}
        for name, call in paths.items():
            result = call()  # a torch tensor or a dlop.Array, on the GPU either way
            host = result.double().cpu().numpy() if hasattr(result, "cpu") else result.numpy()
            if check(name, host, want, dtype):
                good[name] = call
        copy_to = torch.empty_like(tx)
        times = gpu_seconds_round_robin(torch, {"copy": lambda: copy_to.copy_(tx), **good})
        copy = times.pop("copy")
        bandwidth = 2 * n * tx.element_size() / copy  # a copy reads and writes n elements
        limit = 3 * n * tx.element_size() / bandwidth  # read x and b, write y
        record("gpu", dtype, "copy", copy, "device-to-device, n=2^%d" % ARGS.gpu_log2,
               tbps=bandwidth / 1e12)
        record("gpu", dtype, "fused limit", limit, "3 n bytes at the copy's bandwidth")
        for name, seconds in times.items():
            record("gpu", dtype, name, seconds, "n=2^%d" % ARGS.gpu_log2, of_limit=limit / seconds)
        if "dlop fused" in times and "torch.compile" in times:
            record("gpu", dtype, "fused speedup over torch.compile", None, "",
                   ratio=times["torch.compile"] / times["dlop fused"])
        del tx, tb, xa, ba, copy_to
        torch.cuda.empty_cache()


# ---- (c) per call -------------------------------------------------------------------------

def ten_ops(device: str, fuse: bool):
    x, b = dlop.vector("x", "float32"), dlop.vector("b", "float32")
    t = x * 1.5 + 0.5           # 2 (each Python scalar becomes a constant in the code)
    t = dlop.tanh(t) * x        # 4
    t = dlop.exp(t - 0.25) * b  # 7
    t = dlop.abs(-(t + x))      # 10
    return dlop.function([x, b], t, device=device, fuse=fuse)


def ten_ops_numpy(x, b):
    t = np.tanh(x * 1.5 + 0.5) * x
    return np.abs(-(np.exp(t - 0.25) * b + x))


def per_call_seconds(call, sync, calls=1000, repeats=9) -> float:
    for _ in range(50):
        call()
    sync()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        sync()
        samples.append((time.perf_counter() - start) / calls)
    return statistics.median(samples)


def part_calls() -> None:
    n = 1024
    rng = np.random.default_rng(2)
    xs, bs = rng.uniform(-1, 1, n).astype(np.float32), rng.uniform(-1, 1, n).astype(np.float32)
    want = ten_ops_numpy(xs.astype(np.float64), bs.astype(np.float64))
    for fuse in (True, False):
        f = ten_ops("cpu", fuse)
        if check("cpu calls", f(xs, bs), want, "float32"):
            xa, ba = dlop.asarray(xs), dlop.asarray(bs)
            record("calls", "float32", "cpu dlop " + ("fused" if fuse else "fuse=False"),
                   per_call_seconds(lambda: f(xa, ba), lambda: None), "10 ops, 1024 elements")
    if dlop.cuda_device_count() == 0:
        record("calls", "float32", "gpu", None, "no CUDA GPU: the GPU rows are skipped")
        return
    sync = lambda: dlop.synchronize("cuda")  # noqa: E731
    for fuse in (True, False):
        f = ten_ops("cuda", fuse)
        xa, ba = dlop.asarray(xs, device="cuda"), dlop.asarray(bs, device="cuda")
        if check("gpu calls", f(xa, ba).numpy(), want, "float32"):
            record("calls", "float32", "gpu dlop " + ("fused" if fuse else "fuse=False"),
                   per_call_seconds(lambda: f(xa, ba), sync), "10 ops, 1024 elements, on the GPU")
    try:
        from python_calls import Driver
        driver = Driver()
        launch, result, free = driver.bare_launch(xs)
        try:
            launch()
            record("calls", "float32", "gpu bare launch",
                   per_call_seconds(launch, driver.synchronize), "ctypes cuLaunchKernel of a PTX exp")
        finally:
            free()
    except Exception as error:  # noqa: BLE001
        record("calls", "float32", "gpu bare launch", None, "failed: %s" % error)


# ---- (d) compile --------------------------------------------------------------------------

CHILD = r"""
import json, sys, time, dlop
device = sys.argv[1]
x, b = dlop.vector("x", "float32"), dlop.vector("b", "float32")
y = dlop.exp(2 * x) * b + dlop.tanh(x) - 1
start = time.perf_counter()
f = dlop.function([x, b], y, device=device)
seconds = time.perf_counter() - start
stats = dlop.jit_stats()
print(json.dumps(dict(seconds=seconds, fused="fused(" in f.explain(), **{k: stats[k] for k in
      ("compiles", "disk_hits", "compile_seconds", "disk_hit_seconds")})))
"""


def part_compile() -> None:
    devices = ["cpu"] + (["cuda"] if dlop.cuda_device_count() > 0 else [])
    for device in devices:
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, DLOP_CACHE_DIR=cache)
            runs = []
            for _ in range(2):
                out = subprocess.run([sys.executable, "-c", CHILD, device], env=env,
                                     capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    record("compile", "float32", device, None, "failed: %s" % out.stderr.strip()[-300:])
                    break
                runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            if len(runs) < 2:
                continue
            cold, warm = runs
            target = "C" if device == "cpu" else "CUDA (NVRTC)"
            record("compile", "float32", device + " cold compile", cold["compile_seconds"],
                   "%s, %d compile(s); dlop.function took %.1f ms" % (target, cold["compiles"],
                                                                    cold["seconds"] * 1e3))
            record("compile", "float32", device + " disk-cache hit", warm["disk_hit_seconds"],
                   "%d hit(s), %d compiles; dlop.function took %.1f ms" % (
                       warm["disk_hits"], warm["compiles"], warm["seconds"] * 1e3))


def main() -> int:
    parts = ARGS.parts.split(",")
    print("# fusion.py: %s, numpy %s, dlop threads %s" % (
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), np.__version__,
        os.environ.get("DLOP_NUM_THREADS")))
    for name, part in (("cpu", part_cpu), ("gpu", part_gpu), ("calls", part_calls),
                       ("compile", part_compile)):
        if name in parts:
            part()
    if ARGS.json:
        with open(ARGS.json, "w") as out:
            json.dump(ROWS, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
