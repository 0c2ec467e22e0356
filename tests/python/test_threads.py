"""test_threads.py — one compiled function called from several threads at once (the GIL is
released around large runs, so the runs really overlap) gives every thread its own right answer."""
import threading

import numpy as np

import dlop


def test_concurrent_calls_are_safe_and_correct():
    x = dlop.vector("x", dtype="float64")
    f = dlop.function([x], dlop.ops.double(dlop.ops.double(x)))
    errors = []
    size = (1 << 17) + 3  # above the GIL-release threshold and the plugins' parallel grain

    def worker(seed: int) -> None:
        try:
            data = np.full(size, float(seed))
            small = np.full(7, float(seed))
            for _ in range(30):
                big = f(data).numpy()
                if not (big[0] == 4 * seed and big[-1] == 4 * seed):
                    errors.append(f"thread {seed}: big result {big[0]}, {big[-1]}")
                    return
                if f(small).numpy().tolist() != [4.0 * seed] * 7:
                    errors.append(f"thread {seed}: small result wrong")
                    return
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(f"thread {seed}: {error!r}")

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(1, 7)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_buffer_released_when_array_dies_on_another_thread():
    host = np.arange(10, dtype=np.float32)
    holder = [dlop.asarray(host)]

    def drop() -> None:
        holder.clear()  # the wrapped NumPy buffer is released from this thread

    thread = threading.Thread(target=drop)
    thread.start()
    thread.join()
    host.resize(0, refcheck=True)  # fails if a buffer export were still held
    assert host.size == 0
