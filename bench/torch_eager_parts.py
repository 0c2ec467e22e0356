"""bench/torch_eager_parts.py — where the time of one eager ``torch.ops.dlop.exp(x)`` goes, on
the GPU: the whole call against ``torch.exp(x)``, then each part of dlop.torch's kernel on its
own (PyTorch's dispatch into a Python kernel with and without a Python autograd kernel, the
output's allocation, the DLPack hand-over, the shape rule, dlop's run). Per call: wall clock
over --calls calls ended by a device synchronize, median of --samples.

  PYTHONPATH=build/python python3 bench/torch_eager_parts.py [--n 230400]
"""
import argparse
import statistics
import time

import torch

import dlop
import dlop.torch as dt

parser = argparse.ArgumentParser()
parser.add_argument("--n", type=int, default=230400)
parser.add_argument("--calls", type=int, default=2000)
parser.add_argument("--samples", type=int, default=7)
ARGS = parser.parse_args()
sync = torch.cuda.synchronize


def timed(run) -> float:
    for _ in range(50):
        run()
    sync()
    times = []
    for _ in range(ARGS.samples):
        start = time.perf_counter()
        for _ in range(ARGS.calls):
            run()
        sync()
        times.append((time.perf_counter() - start) / ARGS.calls)
    return statistics.median(times) * 1e6


def row(what: str, us: float, base: float | None = None) -> None:
    ratio = "" if base is None else "  %.2fx torch.exp" % (us / base)
    print("%-58s %8.2f us%s" % (what, us, ratio), flush=True)


x = torch.randn(ARGS.n, device="cuda")
y = torch.empty_like(x)
exp = dt.op("exp")
print("dlop.torch kernels:", dt.KERNELS, flush=True)
base = timed(lambda: torch.exp(x))
row("torch.exp(x)", base)
row("torch.exp(x, out=y)", timed(lambda: torch.exp(x, out=y)), base)
row("torch.ops.dlop.exp(x)", timed(lambda: exp(x)), base)
with torch.inference_mode():
    xi = torch.randn(ARGS.n, device="cuda")
    row("torch.ops.dlop.exp(x) in inference_mode", timed(lambda: exp(xi)), base)

# PyTorch's dispatch into a Python kernel that does nothing
lib = torch.library.Library("dlop_parts", "DEF")
lib.define("noop(Tensor x) -> Tensor")
lib.define("noop_autograd(Tensor x) -> Tensor")
lib.impl("noop", lambda t: t, "CUDA")
lib.impl("noop_autograd", lambda t: t, "CUDA")
torch.library.register_autograd("dlop_parts::noop_autograd", lambda ctx, g: g,
                                setup_context=lambda ctx, inputs, output: None, lib=lib)
row("dispatch to a Python kernel (no autograd kernel)", timed(lambda: torch.ops.dlop_parts.noop(x)))
row("dispatch to a Python kernel + Python autograd kernel",
    timed(lambda: torch.ops.dlop_parts.noop_autograd(x)))

# the Python kernel's parts (what runs with DLOP_TORCH_KERNELS=python)
kernel = dt._Kernel(dt._adapters.resolve("exp", "bench"))
row("dlop.torch kernel.run, no dispatch", timed(lambda: kernel.run((x,), {})), base)
call, device = kernel.call_for((x,), {})
row("  call_for (key, cache lookup)", timed(lambda: kernel.call_for((x,), {})))
row("  infer_shapes", timed(lambda: call.infer_shapes(((ARGS.n,),))))
row("  torch.empty(shape, dtype, device)",
    timed(lambda: torch.empty((ARGS.n,), dtype=torch.float32, device=device)))
row("  to_dlpack, one tensor", timed(lambda: dt._to_dlpack(x)))
row("  current stream", timed(lambda: dt._current_stream(device)))
stream = dt._current_stream(device)
row("  call.run with two fresh capsules",
    timed(lambda: call.run((dt._to_dlpack(x),), (dt._to_dlpack(y),), stream)), base)
