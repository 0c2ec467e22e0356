#!/usr/bin/env python3
"""source_ops.py — the three ways to write an op from source in Python, in one short tour,
each checked against NumPy: dlop.elementwise (one C body for the CPU and CUDA, a parameter
that changes without a recompile, fused with its neighbours in a compiled function),
dlop.SourceModule (a CUDA kernel from a string, launched PyCUDA's way), and dlop.Op (a Theano
style op: NumPy on the CPU, a SourceModule kernel on CUDA). Runs on the CPU always, then on
CUDA where a GPU is usable; otherwise it says why CUDA was skipped.
Usage: python examples/source_ops.py"""
import sys

import numpy as np

import dlop

# 1. An elementwise op from one scalar body: x and y are the element, beta a run-time value.
softplus = dlop.elementwise("tour_softplus", "y = x * beta > 20 ? x : log1p(exp(x * beta)) / beta",
                            inputs="x", outputs="y", dtypes=("float32", "float64"),
                            params={"beta": 1.0})

# 2. A CUDA kernel from source, for the dlop.Op below.
SCALE = r'''
extern "C" __global__ void scale(double *y, const double *x, double a, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}'''


# 3. A Theano-style op: the type rule, the shape rule, NumPy on the CPU, the kernel on CUDA.
class Scale(dlop.Op):
    __props__ = ("a",)

    def __init__(self, a):
        self.a = float(a)

    def make_node(self, x):
        if x.dtype != "float64":
            raise dlop.DlopTypeError(f"Scale takes float64, not {x.dtype}")
        return dlop.Apply(self, [x], [x.type()])

    def infer_shape(self, node, input_shapes):
        return [input_shapes[0]]

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = self.a * inputs[0]

    def make_thunk(self, node, device):
        kernel = dlop.SourceModule(SCALE, device=device).get_function("scale")

        def thunk(inputs, outputs, stream):
            n = inputs[0].size
            if n:  # a grid of 0 blocks is not a launch
                kernel(outputs[0], inputs[0], self.a, n, block=(256, 1, 1),
                       grid=((n + 255) // 256, 1), stream=stream)
        return thunk


def softplus_numpy(x, beta):
    x64 = x.astype(np.float64)
    return np.where(x64 * beta > 20, x64, np.log1p(np.exp(x64 * beta)) / beta).astype(x.dtype)


def check(what, got, want, device, rtol):
    host = got.numpy() if isinstance(got, dlop.Array) else np.asarray(got)  # a copy from the GPU
    if not np.allclose(host, want, rtol=rtol, atol=rtol):
        raise SystemExit(f"source_ops: WRONG RESULT on {device}: {what}")
    print(f"  {what}: ok")


def tour(device):
    print(f"on {device}:")
    xs = np.linspace(-30, 30, 10001).astype(np.float32)
    x = dlop.asarray(xs, device=device)
    check("softplus(x) against NumPy", softplus(x), softplus_numpy(xs, 1.0), device, 2e-6)
    compiles = dlop.jit_stats()["compiles"]
    for beta in (0.5, 1.5, 2.5, 4.0):  # new values, the same compiled kernel
        check(f"softplus(x, beta={beta})", softplus(x, beta=beta), softplus_numpy(xs, beta),
              device, 2e-6)
    print(f"  compiles for 4 new beta values: {dlop.jit_stats()['compiles'] - compiles}")

    v = dlop.vector("v", "float64")
    f = dlop.function([v], Scale(3.0)(softplus(v * 2 - 1, beta=0.75)), device=device)
    vs = np.linspace(-4, 4, 1001)
    check("Scale(3) of softplus in a compiled function", f(dlop.asarray(vs, device=device)),
          3.0 * softplus_numpy(2 * vs - 1, 0.75), device, 1e-13)
    check("Scale(0.5) called eagerly", Scale(0.5)(dlop.asarray(vs, device=device)), 0.5 * vs,
          device, 0)

    if device.startswith("cuda"):  # a SourceModule kernel launched on its own
        y = dlop.asarray(np.zeros_like(vs), device=device)
        kernel = dlop.SourceModule(SCALE, device=device).get_function("scale")
        kernel(y, dlop.asarray(vs, device=device), -2.0, vs.size, block=(256, 1, 1),
               grid=((vs.size + 255) // 256, 1))
        check("SourceModule scale launched directly", y.numpy(), -2.0 * vs, device, 0)


def main() -> int:
    tour("cpu")
    try:
        dlop._C.device_check("cuda")
    except dlop.DlopError as error:
        print(f"cuda skipped: no GPU is usable ({error})")
    else:
        tour("cuda")
    print("source_ops: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
