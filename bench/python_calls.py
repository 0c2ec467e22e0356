#!/usr/bin/env python3
"""python_calls.py — per-call cost of a compiled dlop function from Python, side by side in one run.

(a) GPU, the seed workload: exp over 230400 float32, 1000 calls back to back, each result left on
    the GPU: dlop (compiled function), PyTorch (out= and allocating), CuPy (out= and allocating),
    jax.jit, and a bare driver-API launch (ctypes cuLaunchKernel of a hand-written PTX exp kernel
    on the primary context: the floor any Python framework pays). Each figure is the median over
    --repeats of (time of --calls calls + one synchronize at the end) / --calls. Frameworks that
    cannot be imported or see no GPU are skipped with a message. Goal: dlop <= 4.5 us per call.
(b) CPU: a compiled one-op exp function on a 10-element float32 NumPy array against np.exp on
    the same array: median us per call over --repeats samples. Goal: dlop <= 1.5x np.exp.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import platform
import statistics
import sys
import time
from typing import Callable

import numpy as np

# JAX must not take 75% of the GPU at import: the other frameworks share it.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

GPU_N = 10 * 30 * 768  # 230400: the Theano GPU check's vector
CPU_N = 10
GPU_GOAL_US = 4.5
CPU_GOAL_RATIO = 1.5

# y[i] = exp(x[i]) as 2^(x * log2 e), one thread per element (ex2.approx, like --use_fast_math).
BARE_PTX = rb"""
.version 7.0
.target sm_52
.address_size 64
.visible .entry bare_exp(.param .u64 y_ptr, .param .u64 x_ptr, .param .u32 n)
{
  .reg .pred p;
  .reg .b32 r<6>;
  .reg .f32 f<4>;
  .reg .b64 rd<8>;
  ld.param.u64 rd1, [y_ptr];
  ld.param.u64 rd2, [x_ptr];
  ld.param.u32 r1, [n];
  mov.u32 r2, %ctaid.x;
  mov.u32 r3, %ntid.x;
  mov.u32 r4, %tid.x;
  mad.lo.s32 r5, r2, r3, r4;
  setp.ge.u32 p, r5, r1;
  @p bra DONE;
  cvta.to.global.u64 rd3, rd2;
  cvta.to.global.u64 rd4, rd1;
  mul.wide.u32 rd5, r5, 4;
  add.s64 rd6, rd3, rd5;
  add.s64 rd7, rd4, rd5;
  ld.global.f32 f1, [rd6];
  mul.f32 f2, f1, 0f3FB8AA3B;
  ex2.approx.ftz.f32 f3, f2;
  st.global.f32 [rd7], f3;
DONE:
  ret;
}
"""

# (part, name, us per call, host-only us per call or None, note)
ROWS: list[tuple[str, str, float | None, float | None, str]] = []


def per_call_us(call: Callable[[], object], sync: Callable[[], None], calls: int,
                repeats: int, warmup: int) -> tuple[float, float]:
    """Medians over repeats of (calls back-to-back calls + one sync) / calls and of the calls
    alone before the sync / calls (the host's cost while the GPU queue is not full), in us."""
    for _ in range(warmup):
        call()
    sync()
    samples, host = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        t1 = time.perf_counter()
        sync()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
        host.append((t1 - t0) / calls * 1e6)
    return statistics.median(samples), statistics.median(host)


def record(part: str, name: str, us: float | tuple[float, float] | None, note: str = "") -> None:
    host = None
    if isinstance(us, tuple):
        us, host = us
    ROWS.append((part, name, us, host if part == "gpu" else None, note))
    shown = "skipped" if us is None else "%.2f us/call" % us
    if host is not None and part == "gpu":
        shown += " (host %.2f)" % host
    print("python-calls part=%s name=%s %s%s" % (part, name, shown, " (%s)" % note if note else ""),
          flush=True)


class Driver:
    """The CUDA driver API through ctypes: the primary context of device 0 made current on this
    thread (dlop, PyTorch, CuPy and JAX share it), cuCtxSynchronize, and the bare kernel."""

    def __init__(self) -> None:
        self.cuda = ctypes.CDLL("libcuda.so.1")
        self.context = ctypes.c_void_p()
        device = ctypes.c_int()
        self.check(self.cuda.cuInit(0), "cuInit")
        self.check(self.cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
        self.check(self.cuda.cuDevicePrimaryCtxRetain(ctypes.byref(self.context), device),
                   "cuDevicePrimaryCtxRetain")
        self.check(self.cuda.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        name = ctypes.create_string_buffer(256)
        self.check(self.cuda.cuDeviceGetName(name, 256, device), "cuDeviceGetName")
        self.name = name.value.decode()

    def check(self, result: int, what: str) -> None:
        if result != 0:
            text = ctypes.c_char_p()
            self.cuda.cuGetErrorString(result, ctypes.byref(text))
            raise RuntimeError("%s failed: CUDA error %d (%s)"
                               % (what, result, text.value.decode() if text.value else "?"))

    def synchronize(self) -> None:
        # Waits for every stream of the primary context, whichever framework queued the work.
        self.check(self.cuda.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        self.check(self.cuda.cuCtxSynchronize(), "cuCtxSynchronize")

    def bare_launch(self, data: np.ndarray) -> tuple[Callable[[], None], Callable[[], np.ndarray],
                                                     Callable[[], None]]:
        """(launch, result, free): one cuLaunchKernel per call of a PTX exp kernel on a stream
        of its own, with its argument array built once, as a C host would."""
        cu, check = self.cuda, self.check
        module, kernel, stream = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        x, y = ctypes.c_uint64(), ctypes.c_uint64()
        nbytes = data.nbytes
        check(cu.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(BARE_PTX)),
              "cuModuleLoadData(bare_exp PTX)")
        check(cu.cuModuleGetFunction(ctypes.byref(kernel), module, b"bare_exp"),
              "cuModuleGetFunction")
        check(cu.cuStreamCreate(ctypes.byref(stream), 1), "cuStreamCreate")  # non-blocking
        check(cu.cuMemAlloc_v2(ctypes.byref(x), ctypes.c_size_t(nbytes)), "cuMemAlloc x")
        check(cu.cuMemAlloc_v2(ctypes.byref(y), ctypes.c_size_t(nbytes)), "cuMemAlloc y")
        check(cu.cuMemcpyHtoD_v2(x, data.ctypes.data_as(ctypes.c_void_p),
                                 ctypes.c_size_t(nbytes)), "cuMemcpyHtoD")
        n = ctypes.c_uint32(data.size)
        args = (ctypes.c_void_p * 3)(ctypes.cast(ctypes.byref(y), ctypes.c_void_p),
                                     ctypes.cast(ctypes.byref(x), ctypes.c_void_p),
                                     ctypes.cast(ctypes.byref(n), ctypes.c_void_p))
        threads = 256
        blocks = (data.size + threads - 1) // threads
        launch_kernel = cu.cuLaunchKernel

        def launch() -> None:
            result = launch_kernel(kernel, blocks, 1, 1, threads, 1, 1, 0, stream, args, None)
            if result != 0:
                check(result, "cuLaunchKernel")

        def result() -> np.ndarray:
            out = np.empty_like(data)
            check(cu.cuMemcpyDtoH_v2(out.ctypes.data_as(ctypes.c_void_p), y,
                                     ctypes.c_size_t(nbytes)), "cuMemcpyDtoH")
            return out

        def free() -> None:
            self.synchronize()
            cu.cuMemFree_v2(x)
            cu.cuMemFree_v2(y)
            cu.cuStreamDestroy_v2(stream)
            cu.cuModuleUnload(module)

        return launch, result, free


def check_exp(name: str, got: np.ndarray, data: np.ndarray, rtol: float = 2e-6) -> None:
    """A timed path must compute the right thing; a wrong one is reported, not timed."""
    if got.shape != data.shape or not np.allclose(got, np.exp(data), rtol=rtol, atol=0):
        raise RuntimeError("%s: WRONG RESULT (max rel err %.3g)"
                           % (name, float(np.max(np.abs(got / np.exp(data) - 1)))))


def bench_gpu(args: argparse.Namespace) -> str:
    """Part (a). Returns the GPU's name, or why there is none."""
    data = (np.random.default_rng(7).random(GPU_N, dtype=np.float32) * 10 - 5).astype(np.float32)
    try:
        driver = Driver()
    except (OSError, RuntimeError) as error:
        reason = "no usable GPU: %s" % error
        record("gpu", "all", None, reason + "; part (a) skipped")
        return reason
    timing = dict(calls=args.calls, repeats=args.repeats, warmup=args.warmup)
    sync = driver.synchronize

    # dlop: a compiled function, input already on the GPU, each result stays there.
    try:
        import dlop
        x = dlop.vector("x", dtype="float32", shape=(GPU_N,))
        f = dlop.function([x], dlop.ops.exp(x), device="cuda")
        xs = dlop.asarray(data, device="cuda")
        check_exp("dlop", np.asarray(f(xs).numpy()), data)
        record("gpu", "dlop", per_call_us(lambda: f(xs), sync, **timing), "compiled function")
        del f, xs
    except Exception as error:  # noqa: BLE001 — one failure must not hide the other figures
        record("gpu", "dlop", None, "failed: %s" % error)

    launch, result, free = driver.bare_launch(data)
    try:
        launch()
        check_exp("bare launch", result(), data, rtol=1e-5)  # ex2.approx: a few ulp
        record("gpu", "bare launch", per_call_us(launch, sync, **timing),
               "ctypes cuLaunchKernel, PTX kernel")
    finally:
        free()

    try:
        import torch
        if not torch.cuda.is_available():
            raise ImportError("torch sees no CUDA device")
        tx = torch.from_numpy(data).cuda()
        ty = torch.empty_like(tx)
        check_exp("torch", torch.exp(tx).cpu().numpy(), data)
        record("gpu", "torch out=", per_call_us(lambda: torch.exp(tx, out=ty), sync, **timing),
               "torch.exp(x, out=y)")
        record("gpu", "torch", per_call_us(lambda: torch.exp(tx), sync, **timing), "torch.exp(x)")
        del tx, ty
    except ImportError as error:
        record("gpu", "torch out=", None, "not usable: %s" % error)
        record("gpu", "torch", None, "not usable: %s" % error)

    try:
        import cupy as cp
        cx = cp.asarray(data)
        cy = cp.empty_like(cx)
        check_exp("cupy", cp.asnumpy(cp.exp(cx)), data)
        record("gpu", "cupy out=", per_call_us(lambda: cp.exp(cx, out=cy), sync, **timing),
               "cp.exp(x, out=y)")
        record("gpu", "cupy", per_call_us(lambda: cp.exp(cx), sync, **timing), "cp.exp(x)")
        del cx, cy
    except ImportError as error:
        record("gpu", "cupy out=", None, "not usable: %s" % error)
        record("gpu", "cupy", None, "not usable: %s" % error)

    try:
        import jax
        import jax.numpy as jnp
        gpus = [d for d in jax.devices() if d.platform == "gpu"]
        if not gpus:
            raise ImportError("jax has no GPU backend (devices: %s)" % jax.devices())
        jexp = jax.jit(jnp.exp)
        jx = jax.device_put(data, gpus[0])
        check_exp("jax", np.asarray(jexp(jx)), data)
        last = [None]

        def jax_call() -> None:
            last[0] = jexp(jx)

        def jax_sync() -> None:
            last[0].block_until_ready()
            sync()

        record("gpu", "jax.jit", per_call_us(jax_call, jax_sync, **timing), "jax.jit(jnp.exp)")
    except ImportError as error:
        record("gpu", "jax.jit", None, "not usable: %s" % error)
    return driver.name


def bench_cpu(args: argparse.Namespace) -> None:
    """Part (b): per-call time on a 10-element float32 array, dlop against np.exp."""
    import dlop
    data = (np.random.default_rng(3).random(CPU_N, dtype=np.float32) * 10 - 5).astype(np.float32)
    out = np.empty_like(data)
    x = dlop.vector("x", dtype="float32")
    f = dlop.function([x], dlop.ops.exp(x), device="cpu")
    check_exp("dlop cpu", np.asarray(f(data)), data)
    nothing = lambda: None  # noqa: E731 — the CPU needs no synchronization
    paths = {"np.exp": lambda: np.exp(data), "np.exp out=": lambda: np.exp(data, out=out),
             "dlop": lambda: f(data)}
    # Samples of the three alternate, so a change of clock or load mid-run hits all of them
    # alike and the ratio stays meaningful on a busy machine.
    samples: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(args.repeats):
        for name, call in paths.items():
            samples[name].append(per_call_us(call, nothing, args.cpu_calls, 1,
                                             args.cpu_calls // 10)[0])
    notes = {"np.exp": "np.exp(x), allocating", "np.exp out=": "np.exp(x, out=y)",
             "dlop": "compiled one-op function f(x) on a NumPy array"}
    for name in paths:
        record("cpu", name, statistics.median(samples[name]), notes[name])


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def print_table(gpu: str | None) -> None:
    print()
    print("Python per-call cost — %s, %d cores; GPU: %s; Python %s, NumPy %s"
          % (cpu_name(), os.cpu_count() or 0, gpu or "not measured", platform.python_version(),
             np.__version__))
    values = {(part, name): us for part, name, us, _, _ in ROWS}
    for part, title, reference, goal in (
            ("gpu", "(a) GPU: exp over %d float32, result left on the GPU" % GPU_N,
             "bare launch", "goal: dlop <= %.1f us" % GPU_GOAL_US),
            ("cpu", "(b) CPU: exp over %d float32" % CPU_N, "np.exp",
             "goal: dlop <= %.1fx np.exp" % CPU_GOAL_RATIO)):
        rows = [row for row in ROWS if row[0] == part]
        if not rows:
            continue
        print()
        print("%s (%s); ratio = us / %s" % (title, goal, reference))
        if part == "gpu":
            print("  host us: the calls alone, before the final synchronize (what Python and the "
                  "launch cost while the GPU keeps up)")
        print("  %-12s %12s %8s %10s  %s" % ("name", "us/call", "ratio", "host us", "note"))
        base = values.get((part, reference))
        for _, name, us, host, note in rows:
            shown = "%12.2f" % us if us is not None else "%12s" % "-"
            ratio = "%8.2f" % (us / base) if us is not None and base else "%8s" % "-"
            host_shown = "%10.2f" % host if host is not None else "%10s" % "-"
            print("  %-12s %s %s %s  %s" % (name, shown, ratio, host_shown, note))
        dlop_us = values.get((part, "dlop"))
        if dlop_us is not None:
            if part == "gpu":
                verdict = "meets" if dlop_us <= GPU_GOAL_US else "MISSES"
                print("  dlop: %.2f us per call, %s the %.1f us goal"
                      % (dlop_us, verdict, GPU_GOAL_US))
            elif base:
                verdict = "meets" if dlop_us <= CPU_GOAL_RATIO * base else "MISSES"
                print("  dlop: %.2fx np.exp, %s the %.1fx goal"
                      % (dlop_us / base, verdict, CPU_GOAL_RATIO))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="GPU calls per sample")
    parser.add_argument("--cpu-calls", type=int, default=20000, help="CPU calls per sample")
    parser.add_argument("--repeats", type=int, default=15, help="samples; the median is shown")
    parser.add_argument("--warmup", type=int, default=200, help="GPU warm-up calls")
    parser.add_argument("--parts", default="gpu,cpu", help="gpu, cpu or both")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    gpu = None
    if "gpu" in parts:
        gpu = bench_gpu(args)
    if "cpu" in parts:
        bench_cpu(args)
    print_table(gpu)
    wrong = [row for row in ROWS if "WRONG RESULT" in row[4]]
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
