#!/usr/bin/env python3
"""demo.py — the Python front end in one page: loaded plugins, a symbolic graph whose types
and shapes are known as it is built, one function compiled per device, explain(), eager ops,
eval, and zero-copy exchange with NumPy. Runs on the CPU, and on CUDA when a GPU is usable
(saying so when it is not; nothing moves to another device behind your back)."""
import sys

import numpy as np

import dlop


def show(title: str) -> None:
    print("\n== %s" % title)


def usable_devices() -> list[str]:
    devices = ["cpu"]
    try:
        dlop.asarray(np.zeros(1, dtype=np.float32), device="cuda")
        devices.append("cuda")
    except dlop.NoDeviceError as error:
        print("CUDA: skipped — %s" % error)
    return devices


def main() -> int:
    show("plugins (from DLOP_PLUGIN_PATH and the bundled folder)")
    for plugin in dlop.plugins():
        print("%s %s: ops %s\n  %s" % (plugin.name, plugin.version, ", ".join(plugin.ops), plugin.path))
    print("dlop.ops.exp:", dlop.ops.exp.__doc__.splitlines()[0])

    show("a graph: types and shapes are known while it is built")
    x = dlop.vector("x", dtype="float32")             # length unknown until run time
    W = dlop.matrix("W", dtype="float64", shape=(3, 4))
    y = dlop.ops.exp(dlop.ops.double(x))
    z = dlop.ops.multiply_them(W, dlop.ops.double(W))
    print("y:", y.dtype, y.shape, "   z:", z.dtype, z.shape)

    ok = True
    data = np.linspace(-1, 1, 5, dtype=np.float32)
    w = np.arange(12, dtype=np.float64).reshape(3, 4)
    for device in usable_devices():
        show("compiled for %s" % device)
        f = dlop.function([x], y, device=device)
        g = dlop.function([W], z, device=device)
        print(f.explain())
        r = f(data)                                    # host input copied to the device; r stays there
        s = g(w)
        print("f(x) on %s: %s" % (r.device, np.round(r.numpy(), 4)))
        print("g(W) on %s, float64: row 1 = %s" % (s.device, s.numpy()[1]))
        good = np.allclose(r.numpy(), np.exp(2 * data), rtol=1e-6) and np.array_equal(s.numpy(), 2 * w * w)
        print("matches NumPy:", "OK" if good else "WRONG")
        ok &= good

        a = dlop.asarray(np.ones(3), device=device)     # eager: ops on concrete arrays run at once
        e = dlop.ops.exp(a)
        print("eager exp(ones(3)) on %s: %s" % (e.device, e.numpy()))

    show("evaluate any variable now")
    print("y.eval({x: [0, 0.5]}) =", y.eval({x: np.array([0, 0.5], dtype=np.float32)}).numpy())

    show("zero-copy with NumPy")
    host = np.zeros(4, dtype=np.float32)
    shared = dlop.asarray(host)                        # same memory, no copy
    host[2] = 7
    print("written through NumPy, read through dlop:", np.asarray(shared))
    print("back to NumPy through DLPack:", np.from_dlpack(shared))
    print("\ndemo:", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
