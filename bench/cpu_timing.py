"""cpu_timing.py — the host-clock timing the CPU comparisons (gemm_cpu.py, elemwise_cpu.py)
share: one warm-up call (compile, pool, thread start), then the median over `samples` samples
of enough back-to-back calls to fill `min_seconds` in all."""
import statistics
import time


def median_seconds(call, min_seconds=0.3, samples=5):
    call()
    start = time.perf_counter()
    call()
    once = max(time.perf_counter() - start, 1e-7)
    reps = max(1, int(min_seconds / samples / once))
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        for _ in range(reps):
            call()
        times.append((time.perf_counter() - start) / reps)
    return statistics.median(times)
