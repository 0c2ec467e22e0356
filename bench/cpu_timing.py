"""cpu_timing.py — the host-clock timing the CPU comparisons (gemm_cpu.py, elemwise_cpu.py, ops.py)
share: one warm-up call (compile, pool, thread start), then the median over `samples` samples
of enough back-to-back calls to fill `min_seconds` in all. `alternating_medians` times several
calls the same way with their samples interleaved, so that a change of clock or load during the
run hits all of them alike; `sync` (for a GPU) is called before and after every sample."""
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


def alternating_medians(calls, min_seconds=0.3, samples=5, sync=None, clock=time.perf_counter):
    """Median seconds per call of each of calls: sample k of every call is taken before
    sample k + 1 of any; each call gets about min_seconds in all. clock may be
    time.process_time (CPU seconds of the whole process: what one thread costs on a machine
    busy with other work, but the sum over threads for a multithreaded call)."""
    sync = sync or (lambda: None)
    reps = []
    for call in calls:
        call()  # warm-up: compile, pool, threads, caches
        sync()
        start = clock()
        call()
        sync()
        once = max(clock() - start, 1e-7)
        reps.append(max(1, int(min_seconds / samples / once)))
    times = [[] for _ in calls]
    for _ in range(samples):
        for k, call in enumerate(calls):
            sync()
            start = clock()
            for _ in range(reps[k]):
                call()
            sync()
            times[k].append((clock() - start) / reps[k])
    return [statistics.median(t) for t in times]
