#!/usr/bin/env python3
"""gemm_gpu.py — GPU gemm at 8192^3: dlop's matmul op (cuBLAS through the blas plugin) against
torch.matmul (TF32 off: torch.backends.cuda.matmul.allow_tf32 = False) in one run on one GPU,
for float32, float64, bfloat16 and float16. Goal: dlop >= 0.97 of PyTorch for float32 and
float64.

dlop runs on its own stream, so both sides are timed the same way: a warm-up, then samples of
`reps` back-to-back calls between device synchronizations (dlop.synchronize / torch.cuda.
synchronize), median seconds per call; at 8192^3 one call is 20-200 ms, so the synchronization
costs well under 0.1%. Inputs are torch tensors; dlop wraps them once (no copy).

    python3 bench/gemm_gpu.py [--n 8192] [--samples 7] [--dtypes float32 float64 bfloat16 float16]
"""
import argparse
import functools
import sys

import dlop
from torch_bench import median_seconds, torch_with_gpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64", "bfloat16", "float16"])
    args = parser.parse_args()
    # median seconds per call: 2 warm-up calls, then args.samples samples of args.reps calls
    timed = functools.partial(median_seconds, reps=args.reps, samples=args.samples, warmup=2)
    torch = torch_with_gpu("gemm_gpu.py", "the reference")
    if torch is None:
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    n = args.n
    print(f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, n = {n}, "
          f"median of {args.samples} samples of {args.reps} calls")
    print(f"{'dtype':9} {'dlop TFLOP/s':>12} {'torch TFLOP/s':>13} {'dlop/torch':>10}  goal")
    flops = 2.0 * n ** 3
    for name in args.dtypes:
        dtype = getattr(torch, name)
        generator = torch.Generator(device="cuda").manual_seed(1)
        a = torch.randn(n, n, device="cuda", dtype=dtype, generator=generator)
        b = torch.randn(n, n, device="cuda", dtype=dtype, generator=generator)
        da, db = dlop.asarray(a), dlop.asarray(b)
        # correctness first: against torch on a slice of rows (float64 reference)
        got = torch.from_dlpack(dlop.ops.matmul(da, db, allow_tf32=False))[:64].double()
        ref = a[:64].double() @ b.double()
        rel = ((got - ref).abs().max() / ref.abs().max()).item()
        tol = {"float64": 1e-12, "float32": 1e-5}.get(name, 1e-2)
        if rel > tol:
            print(f"{name}: dlop's result differs from float64 by {rel:.2e} (> {tol}): FAIL")
            return 1
        t_dlop = timed(lambda: dlop.ops.matmul(da, db, allow_tf32=False),
                       lambda: dlop.synchronize("cuda"))
        t_torch = timed(lambda: torch.matmul(a, b), torch.cuda.synchronize)
        ratio = t_torch / t_dlop
        goal = ">= 0.97 " + ("ok" if ratio >= 0.97 else "BELOW") if name in ("float32", "float64") else "-"
        print(f"{name:9} {flops / t_dlop / 1e12:12.1f} {flops / t_torch / 1e12:13.1f} {ratio:10.3f}  {goal}",
              flush=True)
        del a, b, da, db
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
