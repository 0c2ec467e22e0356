"""torch_bench.py — what the PyTorch comparisons elementwise_gpu.py and gemm_gpu.py share:
PyTorch with a GPU (or a line saying why the bench is skipped), and host-clock timing: a few
warm-up calls, then the median over `samples` samples of `reps` back-to-back calls, each sample
between two synchronizations of the device.
"""
import statistics
import time

import dlop


def torch_with_gpu(program, needed_for):
    """torch, when it imports and both it and dlop see a CUDA GPU; else None, after printing
    why program is skipped (needed_for: what the bench needs PyTorch for)."""
    try:
        import torch
    except ImportError:
        print(f"{program} needs PyTorch ({needed_for}); skipped")
        return None
    if not torch.cuda.is_available() or dlop.cuda_device_count() == 0:
        print(f"{program} needs a CUDA GPU; skipped")
        return None
    return torch


def median_seconds(call, synchronize, reps, samples, warmup):
    """Median seconds per call of call(), synchronize() ending each sample."""
    for _ in range(warmup):
        call()
    synchronize()
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        for _ in range(reps):
            call()
        synchronize()
        times.append((time.perf_counter() - start) / reps)
    return statistics.median(times)
