#!/usr/bin/env python3
"""elementwise_gpu.py — broadcasting binary elementwise on the GPU at 2^28 elements: dlop's add
(the elemwise plugin) against a device-to-device copy of the same tensor (torch's copy_ of a
contiguous tensor: one cudaMemcpyAsync DtoD) and torch's add, in one run on one GPU. Cases:
same shape (2^14, 2^14) + (2^14, 2^14), row broadcast (2^14, 2^14) + (2^14,), column broadcast
(2^14, 1) + (2^14, 2^14); float32 and float16. Goal: dlop >= 0.95 of the copy's
bandwidth for the broadcast cases, on arrays dlop owns; "wrapped/copy" is the same add on torch
tensors wrapped with dlop.asarray (each call then also orders dlop's stream after torch's).

Bandwidth = bytes read + written / time: a copy of n elements moves 2n; add of two full
operands 3n, a broadcast add 2n plus the row or column. Timing as gemm_gpu.py: warm-up, then
the median of samples of `reps` back-to-back calls between synchronizations. dlop's eager call
allocates its output from the caching pool (no cudaMalloc in steady state); at 2^28 elements a
call takes 0.5-1 ms, so its few microseconds of host work overlap the previous kernel.

    python3 bench/elementwise_gpu.py [--log2 28] [--samples 9] [--reps 10] [--dtypes float32 float16]
"""
import argparse
import functools
import sys

import dlop
from torch_bench import median_seconds, torch_with_gpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2", type=int, default=28)
    parser.add_argument("--samples", type=int, default=9)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float16"])
    args = parser.parse_args()
    # median seconds per call: 3 warm-up calls, then args.samples samples of args.reps calls
    timed = functools.partial(median_seconds, reps=args.reps, samples=args.samples, warmup=3)
    torch = torch_with_gpu("elementwise_gpu.py", "the copy and the comparison")
    if torch is None:
        return 0
    side = 1 << (args.log2 // 2)
    rows = (1 << args.log2) // side
    n = rows * side
    print(f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, n = {n} "
          f"({rows} x {side}), median of {args.samples} samples of {args.reps} calls")
    print(f"{'case':28} {'dtype':8} {'dlop GB/s':>10} {'copy GB/s':>10} {'dlop/copy':>9} "
          f"{'torch GB/s':>10} {'dlop/torch':>10} {'wrapped/copy':>12}  goal")
    failures = 0
    for name in args.dtypes:
        dtype = getattr(torch, name)
        size = torch.empty((), dtype=dtype).element_size()
        g = torch.Generator(device="cuda").manual_seed(1)
        x = torch.randn(rows, side, device="cuda", dtype=dtype, generator=g)
        y = torch.randn(rows, side, device="cuda", dtype=dtype, generator=g)
        row = torch.randn(side, device="cuda", dtype=dtype, generator=g)
        column = torch.randn(rows, 1, device="cuda", dtype=dtype, generator=g)
        copy_dst = torch.empty_like(x)
        t_copy = timed(lambda: copy_dst.copy_(x), torch.cuda.synchronize)
        copy_bw = 2 * n * size / t_copy
        cases = [("same shape (R,C)+(R,C)", x, y, 3 * n * size),
                 ("row (R,C)+(C,)", x, row, (2 * n + side) * size),
                 ("column (R,1)+(R,C)", column, x, (2 * n + rows) * size)]
        for label, a, b, moved in cases:
            # Inputs dlop owns (copied in once), as a dlop program has them; torch tensors wrapped
            # with dlop.asarray are timed too: each call then also orders dlop's stream after
            # the producer's (about 12 us of GPU time per call on an H200).
            da = dlop.asarray(a.cpu().numpy(), device="cuda:0")
            db = dlop.asarray(b.cpu().numpy(), device="cuda:0")
            wa, wb = dlop.asarray(a), dlop.asarray(b)
            got = torch.from_dlpack(dlop.ops.add(da, db))
            if not torch.equal(got, a + b):  # one rounding of an exact sum: bit-equal to torch
                print(f"{label} {name}: dlop's add differs from torch's: FAIL")
                failures += 1
                continue
            del got
            t_dlop = timed(lambda: dlop.ops.add(da, db), lambda: dlop.synchronize("cuda"))
            t_wrapped = timed(lambda: dlop.ops.add(wa, wb), lambda: dlop.synchronize("cuda"))
            t_torch = timed(lambda: torch.add(a, b), torch.cuda.synchronize)
            bw, torch_bw, wrapped_bw = moved / t_dlop, moved / t_torch, moved / t_wrapped
            ratio = bw / copy_bw
            goal = ">= 0.95 " + ("ok" if ratio >= 0.95 else "BELOW")
            if ratio < 0.95:
                failures += 1
            print(f"{label:28} {name:8} {bw / 1e9:10.0f} {copy_bw / 1e9:10.0f} {ratio:9.3f} "
                  f"{torch_bw / 1e9:10.0f} {bw / torch_bw:10.3f} {wrapped_bw / copy_bw:12.3f}  {goal}",
                  flush=True)
            del da, db, wa, wb
        del x, y, row, column, copy_dst
        torch.cuda.empty_cache()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
