#!/usr/bin/env python3
"""fusion_reduce.py — reductions fed by fused groups, and the grad_W use case, against the
frameworks in one run.

(a) sum: s = sum(exp(x) * b) over 2^26 float32 (--sum-log2) on cuda:0: dlop fused (one kernel
    reading x and b), dlop fuse=False, PyTorch eager, torch.compile and the limit: the bytes the
    fused kernel must read (x and b) at the device's copy bandwidth (a device-to-device copy
    measured in the same run). On the CPU (2^22, --cpu-log2): dlop fused, fuse=False and NumPy.
    Goals (GPU): fused >= 0.9x the limit and faster than torch.compile.
(b) softmax: y = softmax(x) over the rows of a 4096 x 8192 matrix (--rows, --cols), float32 and
    float16, on cuda:0: dlop fused (one row group: max, exp(x - max), its sum and the division
    in one kernel that reads each row of x once and writes y once), fuse=False,
    torch.softmax, torch.compile of the same three lines, and the limit of one read and one
    write at the copy's bandwidth. On the CPU (--cpu-rows): dlop fused, fuse=False and NumPy.
(c) grad_w: examples/grad_w.py's graph, grad_W = dot(X.T, dot(-(x - z), W) * h * (1 - h)), at
    batch 4096, 784 visible, 1024 hidden, 10 out (--batch ...), float32: dlop on cuda:0 against
    PyTorch eager and torch.compile (TF32 off on both sides, dlop's default), and dlop on the
    CPU against NumPy (both with their BLAS).

Every timed path is checked against NumPy in float64 first; a wrong one is reported, not
timed. Parts that cannot run (no GPU, no torch, torch.compile failing) print why and are
skipped. --small runs every size at a few thousand elements, to see that the bench works.
Results go to bench/RESULTS.md.

    python3 bench/fusion_reduce.py [--parts sum,softmax,grad_w] [--small] [--json FILE]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS: list[dict] = []


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="sum,softmax,grad_w")
    parser.add_argument("--sum-log2", type=int, default=26)
    parser.add_argument("--cpu-log2", type=int, default=22)
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=8192)
    parser.add_argument("--cpu-rows", type=int, default=512)
    parser.add_argument("--softmax-dtypes", default="float32,float16")
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--visible", type=int, default=784)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--out", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2,
                        help="CPU threads of dlop and of NumPy's and dlop's BLAS")
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--small", action="store_true", help="tiny sizes: see that it works")
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args()
    if args.small:
        args.sum_log2 = args.cpu_log2 = 14
        args.rows, args.cols, args.cpu_rows = 16, 1000, 16
        args.batch, args.visible, args.hidden = 64, 784, 128
    return args


ARGS = parse_args()
# dlop reads DLOP_NUM_THREADS when its thread pool starts, OpenBLAS (NumPy's and dlop's CPU dot)
# its variable when it is loaded: both before NumPy's import and the first CPU call.
os.environ.setdefault("DLOP_NUM_THREADS", str(ARGS.threads))
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(ARGS.threads))
sys.path.insert(0, HERE)
import numpy as np  # noqa: E402
import dlop  # noqa: E402
from cpu_timing import alternating_medians  # noqa: E402
from torch_bench import median_seconds  # noqa: E402


def record(part: str, dtype: str, name: str, seconds: float | None, note: str = "", **extra) -> None:
    row = dict(part=part, dtype=dtype, name=name, seconds=seconds, note=note, **extra)
    ROWS.append(row)
    shown = ("skipped" if not extra else "-") if seconds is None else "%.1f us" % (seconds * 1e6)
    more = "".join(" %s=%s" % (k, ("%.3g" % v) if isinstance(v, float) else v) for k, v in extra.items())
    print("fusion_reduce part=%s dtype=%s name=%s %s%s%s" % (part, dtype, name, shown, more,
                                                              " (%s)" % note if note else ""), flush=True)


def check(name: str, got, want, rtol: float) -> bool:
    got = np.asarray(got, dtype=np.float64)
    scale = max(float(np.max(np.abs(want))), 1e-300) if want.size else 1.0
    error = float(np.max(np.abs(got - want))) / scale if got.shape == want.shape and got.size else 0.0
    if got.shape != want.shape or not error <= rtol:
        print("fusion_reduce: %s: WRONG RESULT (max error %.3g of the largest value, tolerance %.1g);"
              " not timed" % (name, error if got.shape == want.shape else -1, rtol))
        return False
    return True


def torch_cuda():
    try:
        import torch
    except ImportError:
        return None, "PyTorch is not installed"
    if not torch.cuda.is_available() or dlop.cuda_device_count() == 0:
        return None, "no CUDA GPU"
    torch.backends.cuda.matmul.allow_tf32 = False  # dlop's float32 dot is IEEE float32 too
    torch.backends.cudnn.allow_tf32 = False
    return torch, ""


def host(result):
    """A torch tensor's, a dlop.Array's or NumPy's values as float64 on the host."""
    if hasattr(result, "cpu"):
        return result.double().cpu().numpy()
    if isinstance(result, dlop.Array):
        result = result.numpy()
    return np.asarray(result, dtype=np.float64)


def gpu_times(torch, paths: dict) -> dict:
    """Seconds per call of each path (host clock around device-wide synchronizes: CUDA events
    would time torch's stream only, and dlop runs on its own)."""
    return {name: median_seconds(call, torch.cuda.synchronize, reps=10, samples=ARGS.samples,
                                 warmup=3) for name, call in paths.items()}


def copy_bandwidth(torch, like) -> float:
    """Bytes per second of a device-to-device copy of like (it reads and writes them)."""
    target = torch.empty_like(like)
    seconds = median_seconds(lambda: target.copy_(like), torch.cuda.synchronize, reps=10,
                             samples=ARGS.samples, warmup=3)
    return 2 * like.numel() * like.element_size() / seconds


def try_compile(torch, function, *args):
    """torch.compile(function), run once; None (recorded) when it fails."""
    try:
        compiled = torch.compile(function)
        compiled(*args)
        return compiled
    except Exception as error:  # noqa: BLE001 — report it and go on
        return str(error).splitlines()[0] if str(error) else type(error).__name__


def ratio_rows(part, dtype, times, base="dlop fused"):
    if base not in times:
        return
    for other in ("torch.compile", "torch eager", "dlop fuse=False", "numpy"):
        if other in times:
            record(part, dtype, "fused speedup over " + other, None, "", ratio=times[other] / times[base])


# ---- (a) sum(exp(x) * b) ----------------------------------------------------------------

def sum_functions(device):
    x, b = dlop.vector("x", "float32"), dlop.vector("b", "float32")
    s = dlop.sum(dlop.exp(x) * b)
    return dlop.function([x, b], s, device=device), dlop.function([x, b], s, device=device, fuse=False)


def part_sum() -> None:
    n = 1 << ARGS.cpu_log2
    rng = np.random.default_rng(1)
    xs, bs = rng.uniform(-2, 1, n).astype(np.float32), rng.uniform(-1, 1, n).astype(np.float32)
    want = np.sum(np.exp(xs.astype(np.float64)) * bs)
    fused, unfused = sum_functions("cpu")
    assert "sum over every axis" in fused.explain(), fused.explain()
    xa, ba = dlop.asarray(xs), dlop.asarray(bs)
    paths = {"dlop fused": lambda: fused(xa, ba), "dlop fuse=False": lambda: unfused(xa, ba),
             "numpy": lambda: np.sum(np.exp(xs) * bs)}
    good = {k: f for k, f in paths.items() if check("cpu " + k, host_value(f()), want, 1e-5)}
    times = dict(zip(good, alternating_medians(list(good.values()), min_seconds=1.0,
                                               samples=ARGS.samples)))
    for name, seconds in times.items():
        record("sum-cpu", "float32", name, seconds, "n=2^%d, %d threads" % (ARGS.cpu_log2, ARGS.threads),
               gbps=2 * n * 4 / seconds / 1e9)
    ratio_rows("sum-cpu", "float32", times)

    torch, why = torch_cuda()
    if torch is None:
        record("sum-gpu", "float32", "all", None, why + ": the GPU rows are skipped")
        return
    n = 1 << ARGS.sum_log2
    gen = torch.Generator(device="cuda").manual_seed(1)
    tx = torch.rand(n, device="cuda", generator=gen) * 3 - 2
    tb = torch.rand(n, device="cuda", generator=gen) * 2 - 1
    want = np.sum(np.exp(tx.double().cpu().numpy()) * tb.double().cpu().numpy())
    fused, unfused = sum_functions("cuda")
    xa, ba = dlop.asarray(tx), dlop.asarray(tb)  # DLPack: the same memory
    eager = lambda x, b: torch.sum(torch.exp(x) * b)  # noqa: E731
    paths = {"dlop fused": lambda: fused(xa, ba), "dlop fuse=False": lambda: unfused(xa, ba),
             "torch eager": lambda: eager(tx, tb)}
    compiled = try_compile(torch, eager, tx, tb)
    if isinstance(compiled, str):
        record("sum-gpu", "float32", "torch.compile", None, "failed: " + compiled)
    else:
        paths["torch.compile"] = lambda: compiled(tx, tb)
    good = {k: f for k, f in paths.items() if check("gpu " + k, host_value(f()), want, 1e-5)}
    bandwidth = copy_bandwidth(torch, tx)
    limit = 2 * n * 4 / bandwidth  # read x and b
    record("sum-gpu", "float32", "copy", 2 * n * 4 / bandwidth, "device-to-device", tbps=bandwidth / 1e12)
    record("sum-gpu", "float32", "limit", limit, "read x and b at the copy's bandwidth")
    times = gpu_times(torch, good)
    for name, seconds in times.items():
        record("sum-gpu", "float32", name, seconds, "n=2^%d" % ARGS.sum_log2, of_limit=limit / seconds)
    ratio_rows("sum-gpu", "float32", times)
    del tx, tb, xa, ba
    torch.cuda.empty_cache()


def host_value(result):
    return np.asarray(host(result)).reshape(())


# ---- (b) row softmax -------------------------------------------------------------------

def softmax_lines(x, module):
    """The three lines, for dlop and torch alike."""
    m = module.max(x, axis=-1, keepdims=True) if module is dlop else x.amax(dim=-1, keepdim=True)
    e = module.exp(x - m)
    s = module.sum(e, axis=-1, keepdims=True) if module is dlop else e.sum(dim=-1, keepdim=True)
    return e / s


def softmax_functions(dtype, device):
    x = dlop.matrix("x", dtype)
    y = softmax_lines(x, dlop)
    return dlop.function([x], y, device=device), dlop.function([x], y, device=device, fuse=False)


def numpy_softmax(values):
    e = np.exp(values - values.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


SOFTMAX_RTOL = {"float32": 1e-5, "float16": 4e-3}


def part_softmax() -> None:
    rows, cols = ARGS.cpu_rows, ARGS.cols
    values = np.random.default_rng(2).uniform(-8, 8, (rows, cols)).astype(np.float32)
    want = numpy_softmax(values.astype(np.float64))
    fused, unfused = softmax_functions("float32", "cpu")
    assert "(row group 0: 5 nodes in one kernel" in fused.explain(), fused.explain()
    xa = dlop.asarray(values)
    paths = {"dlop fused": lambda: fused(xa), "dlop fuse=False": lambda: unfused(xa),
             "numpy": lambda: numpy_softmax(values)}
    good = {k: f for k, f in paths.items() if check("cpu " + k, host(f()), want, 1e-5)}
    times = dict(zip(good, alternating_medians(list(good.values()), min_seconds=1.0,
                                               samples=ARGS.samples)))
    for name, seconds in times.items():
        record("softmax-cpu", "float32", name, seconds, "%d x %d, %d threads" % (rows, cols, ARGS.threads))
    ratio_rows("softmax-cpu", "float32", times)

    torch, why = torch_cuda()
    if torch is None:
        record("softmax-gpu", "-", "all", None, why + ": the GPU rows are skipped")
        return
    rows = ARGS.rows
    for dtype in ARGS.softmax_dtypes.split(","):
        tdtype = getattr(torch, dtype)
        gen = torch.Generator(device="cuda").manual_seed(2)
        tx = (torch.rand(rows, cols, device="cuda", generator=gen) * 16 - 8).to(tdtype)
        want = numpy_softmax(tx.double().cpu().numpy())
        fused, unfused = softmax_functions(dtype, "cuda")
        assert "(row group 0: 5 nodes in one kernel" in fused.explain(), fused.explain()
        xa = dlop.asarray(tx)
        manual = lambda x: softmax_lines(x, torch)  # noqa: E731
        paths = {"dlop fused": lambda: fused(xa), "dlop fuse=False": lambda: unfused(xa),
                 "torch eager": lambda: torch.softmax(tx, dim=-1)}
        compiled = try_compile(torch, manual, tx)
        if isinstance(compiled, str):
            record("softmax-gpu", dtype, "torch.compile", None, "failed: " + compiled)
        else:
            paths["torch.compile"] = lambda: compiled(tx)
        good = {k: f for k, f in paths.items() if check("gpu %s %s" % (dtype, k), host(f()), want,
                                                        SOFTMAX_RTOL[dtype])}
        bandwidth = copy_bandwidth(torch, tx)
        limit = 2 * tx.numel() * tx.element_size() / bandwidth  # read x, write y
        record("softmax-gpu", dtype, "limit", limit, "read x and write y once at the copy's "
               "bandwidth (%.2f TB/s)" % (bandwidth / 1e12))
        times = gpu_times(torch, good)
        for name, seconds in times.items():
            record("softmax-gpu", dtype, name, seconds, "%d x %d" % (rows, cols), of_limit=limit / seconds)
        ratio_rows("softmax-gpu", dtype, times)
        del tx, xa
        torch.cuda.empty_cache()


# ---- (c) grad_W -------------------------------------------------------------------------

def load_grad_w():
    path = os.path.join(HERE, "..", "examples", "grad_w.py")
    spec = importlib.util.spec_from_file_location("grad_w_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def grad_w_inputs():
    """X, x, z, W, h as examples/grad_w.py makes them, at this bench's sizes, float32."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((ARGS.batch, ARGS.visible))
    W1 = rng.standard_normal((ARGS.visible, ARGS.hidden)) / np.sqrt(ARGS.visible)
    W = rng.standard_normal((ARGS.out, ARGS.hidden)) / np.sqrt(ARGS.hidden)
    h = 1.0 / (1.0 + np.exp(-(X @ W1)))
    x = h @ W.T
    z = rng.standard_normal((ARGS.batch, ARGS.out))
    return [a.astype(np.float32) for a in (X, x, z, W, h)]


def grad_w_graph(example):
    X = dlop.matrix("X", "float32", shape=(None, ARGS.visible))
    x = dlop.matrix("x", "float32", shape=(None, ARGS.out))
    z = dlop.matrix("z", "float32", shape=(None, ARGS.out))
    W = dlop.matrix("W", "float32", shape=(ARGS.out, ARGS.hidden))
    h = dlop.matrix("h", "float32", shape=(None, ARGS.hidden))
    return [X, x, z, W, h], example.grad_w(X, x, z, W, h)


def numpy_grad_w(X, x, z, W, h):
    delta_o = -(x - z)
    delta_h = (delta_o @ W) * h * (1.0 - h)
    return X.T @ delta_h


def part_grad_w() -> None:
    example = load_grad_w()
    values = grad_w_inputs()
    want = example.reference(values)
    inputs, grad_W = grad_w_graph(example)
    shape = "batch %d, %d visible, %d hidden, %d out" % (ARGS.batch, ARGS.visible, ARGS.hidden, ARGS.out)
    cpu = dlop.function(inputs, grad_W, device="cpu")
    arrays = [dlop.asarray(v) for v in values]
    paths = {"dlop": lambda: cpu(*arrays), "numpy": lambda: numpy_grad_w(*values)}
    good = {k: f for k, f in paths.items() if check("cpu " + k, host(f()), want, 1e-4)}
    times = dict(zip(good, alternating_medians(list(good.values()), min_seconds=1.0,
                                               samples=ARGS.samples)))
    for name, seconds in times.items():
        record("grad_w-cpu", "float32", name, seconds, "%s, %d threads" % (shape, ARGS.threads))
    if "dlop" in times and "numpy" in times:
        record("grad_w-cpu", "float32", "dlop speedup over numpy", None, "",
               ratio=times["numpy"] / times["dlop"])

    torch, why = torch_cuda()
    if torch is None:
        record("grad_w-gpu", "float32", "all", None, why + ": the GPU rows are skipped")
        return
    gpu = dlop.function(inputs, grad_W, device="cuda")
    unfused = dlop.function(inputs, grad_W, device="cuda", fuse=False)
    tensors = [torch.from_numpy(v).cuda() for v in values]
    arrays = [dlop.asarray(t) for t in tensors]
    eager = lambda X, x, z, W, h: X.T @ ((-(x - z) @ W) * h * (1.0 - h))  # noqa: E731
    paths = {"dlop fused": lambda: gpu(*arrays), "dlop fuse=False": lambda: unfused(*arrays),
             "torch eager": lambda: eager(*tensors)}
    compiled = try_compile(torch, eager, *tensors)
    if isinstance(compiled, str):
        record("grad_w-gpu", "float32", "torch.compile", None, "failed: " + compiled)
    else:
        paths["torch.compile"] = lambda: compiled(*tensors)
    good = {k: f for k, f in paths.items() if check("gpu " + k, host(f()), want, 1e-4)}
    times = gpu_times(torch, good)
    flops = 2.0 * ARGS.batch * ARGS.out * ARGS.hidden + 2.0 * ARGS.visible * ARGS.batch * ARGS.hidden
    for name, seconds in times.items():
        record("grad_w-gpu", "float32", name, seconds, shape, tflops=flops / seconds / 1e12)
    ratio_rows("grad_w-gpu", "float32", times)


def main() -> int:
    parts = ARGS.parts.split(",")
    print("# fusion_reduce.py: %s, numpy %s, dlop threads %s%s" % (
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), np.__version__,
        os.environ.get("DLOP_NUM_THREADS"), ", small sizes" if ARGS.small else ""))
    for name, part in (("sum", part_sum), ("softmax", part_softmax), ("grad_w", part_grad_w)):
        if name in parts:
            part()
    if ARGS.json:
        with open(ARGS.json, "w") as out:
            json.dump(ROWS, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
