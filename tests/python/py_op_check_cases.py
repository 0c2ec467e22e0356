"""dlop.Op classes for test_py_op_check.py: one correct op and one broken in each way a check of
dlop.check must catch. Module level, so the checks' processes can import them."""
import ctypes

import numpy as np

import dlop

FLOATS = ("float32", "float64")


def _float_node(op, x):
    if x.dtype not in FLOATS:
        raise dlop.DlopTypeError(f"{type(op).__name__} takes float32 or float64, got {x.dtype}")
    return dlop.Apply(op, [x], [x.type()])


class DoubleOp(dlop.Op):
    """y = 2x, correct."""
    __props__ = ()

    def make_node(self, x):
        return _float_node(self, x)

    def infer_shape(self, node, shapes):
        return [shapes[0]]

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0] * 2


class ScaleOp(dlop.Op):
    """y = factor * x, correct, with props (any dtype but bool)."""
    __props__ = ("factor",)

    def __init__(self, factor):
        self.factor = factor

    def make_node(self, x):
        if x.dtype in ("bool", "bfloat16"):
            raise dlop.DlopTypeError(f"ScaleOp does not take {x.dtype}")
        return dlop.Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = (inputs[0] * self.factor).astype(inputs[0].dtype)


class WrongShapeOp(DoubleOp):
    """infer_shape adds one to the last dim; perform gives x's shape (make_node leaves the dims
    unknown, so only a real run tells)."""
    def make_node(self, x):
        _float_node(self, x)
        return dlop.Apply(self, [x], [dlop.TensorType(x.dtype, (None,) * x.ndim)()])

    def infer_shape(self, node, shapes):
        s = shapes[0]
        return [tuple(s[:-1]) + (s[-1] + 1,) if s else s]


class NanPartOp(DoubleOp):
    """perform writes NaN into every third element of float32 outputs."""
    def perform(self, node, inputs, output_storage):
        y = inputs[0] * 2
        if y.dtype == np.float32:
            y.reshape(-1)[::3] = np.nan
        output_storage[0][0] = y


class WritesInputOp(DoubleOp):
    """perform zeroes its (read-only) input's memory through ctypes after reading it."""
    def perform(self, node, inputs, output_storage):
        x = inputs[0]
        output_storage[0][0] = x * 2
        if x.size:
            ctypes.memset(x.ctypes.data, 0, x.itemsize)


class NoisyOp(DoubleOp):
    """perform adds fresh noise on every run."""
    def perform(self, node, inputs, output_storage):
        noise = np.random.default_rng().uniform(0.5, 1.0, inputs[0].shape)
        output_storage[0][0] = (inputs[0] * 2 + noise).astype(inputs[0].dtype)


class CrashOp(DoubleOp):
    """perform kills its process on an input of 7 elements."""
    def perform(self, node, inputs, output_storage):
        if inputs[0].shape == (7,):
            ctypes.string_at(0)
        output_storage[0][0] = inputs[0] * 2


# ---- CUDA (test_gpu_py_op_check.py): a kernel y[i] = x[i] * SCALE for i < n * PART ------------

CTYPES = {"float32": "float", "float64": "double"}


class GpuDouble(DoubleOp):
    """perform and a CUDA kernel, both y = 2x: correct."""
    SCALE, WRITTEN = 2, "n"

    def make_thunk(self, node, device):
        ctype = CTYPES[node.inputs[0].dtype]
        kernel = dlop.SourceModule(f"""
__global__ void scale(const {ctype} *x, {ctype} *y, long long n) {{
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < {self.WRITTEN}) y[i] = x[i] * {self.SCALE};
}}""", device=device).get_function("scale")

        def launch(inputs, outputs, stream):
            n = inputs[0].size
            if n:
                kernel(inputs[0], outputs[0], n, block=(256, 1, 1), grid=((n + 255) // 256, 1),
                       stream=stream)
        return launch


class GpuTriple(GpuDouble):
    """The CUDA kernel computes 3x, perform 2x."""
    SCALE = 3


class GpuHalfWritten(GpuDouble):
    """The CUDA kernel writes only the first half of the output."""
    WRITTEN = "n / 2"
