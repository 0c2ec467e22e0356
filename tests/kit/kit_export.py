"""kit_export.py define WORK | compare WORK PLUGIN.so — dlop.export_plugin end to end (the
kit.export test, tests/kit/kit_steps.sh, which builds and checks the project between the two).

define: defines two ops with dlop.elementwise (one with parameters, one with two outputs and
broadcasting), runs them on the CPU (and on CUDA where a GPU is usable) on fixed inputs, saves
inputs and results to WORK/expected.npz, checks that export_plugin refuses a dlop.Op written in
Python and a SourceModule kernel, and writes the plugin project into WORK/project.
compare: in a fresh process that defines nothing, loads PLUGIN.so and checks that its ops give
the saved results: bit for bit (the bodies' maths is exact: sums and products, no FMA), on each
device the define step ran.
"""
import os
import sys

import numpy as np

import dlop

DTYPES = ("float16", "float32", "float64", "int32")
PARAMS = {"alpha": -1.75, "beta": 0.25}  # not the defaults: the call's values must reach the kernels


def devices() -> list:
    return ["cpu"] + (["cuda"] if dlop.cuda_device_count() > 0 else [])


def inputs(dtype: str) -> tuple:
    rng = np.random.default_rng(7)
    if dtype == "int32":
        x = rng.integers(-1000, 1000, (3, 5)).astype(np.int32)
        w = rng.integers(-1000, 1000, (5,)).astype(np.int32)
    else:
        x = (rng.standard_normal((3, 5)) * 4).astype(dtype)
        w = (rng.standard_normal((5,)) * 4).astype(dtype)
    # a strided, negative-stride view: the plugin's loop must handle any strides
    return np.ascontiguousarray(x[:, ::-1])[:, ::-1], w


def on(device: str, array):
    return dlop.asarray(array, device=device) if device != "cpu" else array


def run(device: str) -> dict:
    results = {}
    for dtype in DTYPES:
        x, w = inputs(dtype)
        if dtype != "int32":
            results[f"scale_shift/{dtype}"] = dlop.ops.kx_scale_shift(on(device, x), **PARAMS).numpy()
        s, p = dlop.ops.kx_sum_prod(on(device, x), on(device, w))
        results[f"sum_prod_s/{dtype}"], results[f"sum_prod_p/{dtype}"] = s.numpy(), p.numpy()
    return results


def define(work: str) -> int:
    dlop.elementwise("kx_scale_shift", "y = (T)(alpha * x + beta)", inputs="x", outputs="y",
                     params={"alpha": 2.0, "beta": 0.5})
    dlop.elementwise("kx_sum_prod", "s = x + w;  // broadcast\np = x * w", inputs="x, w",
                     outputs="s, p", dtypes=DTYPES)
    saved = {}
    for device in devices():
        saved.update({f"{device}/{k}": v for k, v in run(device).items()})
    np.savez(os.path.join(work, "expected.npz"), **saved)

    class Doubled(dlop.Op):
        __props__ = ()

        def make_node(self, x):
            return dlop.Apply(self, [x], [x.type()])

        def perform(self, node, inputs, output_storage):
            output_storage[0][0] = inputs[0] * 2

    refusals = [Doubled(), dlop.SourceModule("__global__ void k(float *p) {}", arch=90)]
    for refused in refusals:
        try:
            dlop.export_plugin([refused], os.path.join(work, "refused"))
        except dlop.UnsupportedError as error:
            print("refused as expected:", error)
        else:
            print(f"export_plugin accepted {refused!r}", file=sys.stderr)
            return 1
    written = dlop.export_plugin(["kx_scale_shift", dlop.ops.kx_sum_prod],
                                 os.path.join(work, "project"), name="kitexport", version="1.2.3")
    print("\n".join(written))
    return 0


def compare(work: str, plugin: str) -> int:
    dlop.load_plugin(plugin)
    saved = np.load(os.path.join(work, "expected.npz"))
    ran = {key.split("/", 1)[0] for key in saved.files}
    failures = 0
    for device in devices():
        if device not in ran:
            continue
        got = run(device)
        for key, value in got.items():
            expected = saved[f"{device}/{key}"]
            same = value.dtype == expected.dtype and value.shape == expected.shape and \
                np.array_equal(value.view(np.uint8), expected.view(np.uint8))
            print(f"{device} {key}: {'same bits' if same else 'DIFFERS'}")
            if not same:
                print(f"  plugin {value!r}\n  python {expected!r}", file=sys.stderr)
                failures += 1
    for device in ran - set(devices()):
        print(f"{device}: the define step ran it but it is not usable here", file=sys.stderr)
        failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "define":
        sys.exit(define(sys.argv[2]))
    if len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    print("usage: kit_export.py define WORK | compare WORK PLUGIN.so", file=sys.stderr)
    sys.exit(2)
