"""test_torch.py — dlop ops as PyTorch custom ops on the CPU (dlop.torch): the schema made from
the op descriptor, eager results against torch's own ops, parameters with their defaults,
torch.compile(fullgraph=True) equal to eager (static and dynamic shapes), torch.library.opcheck
on the bundled ops it applies to, backward raising an error naming the op, the in-place
variant's aliasing, view ops refused, and the tensors' own memory reaching the kernel (by
pointer). PyPI serves PyTorch for Linux only with its CUDA libraries, so CI has no torch and
these tests skip; the H200 machine has torch and runs them (and test_gpu_torch.py on CUDA)."""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (PyPI has no CPU-only "
                            "Linux wheel); these tests run where torch is, on the GPU machine")

import dlop
import dlop.torch

FIXTURES = os.path.join(os.environ.get("DLOP_FIXTURE_DIR", ""), "adapters", "adapter_ops.so")


@pytest.fixture(scope="module")
def adapter_ops():
    if "fixture_address" not in dlop.ops:
        dlop.load_plugin(FIXTURES)
    return dlop.ops


def test_op_is_torch_ops_dlop_with_the_descriptors_schema():
    exp = dlop.torch.op("exp")
    assert exp is torch.ops.dlop.exp
    assert dlop.torch.op(dlop.ops.exp) is exp  # registered once
    assert str(exp.default._schema) == "dlop::exp(Tensor x) -> Tensor"
    total = dlop.torch.op("sum")
    assert str(total.default._schema) == \
        "dlop::sum(Tensor x, *, int[] axes=[], bool keepdims=False) -> Tensor"
    cast = dlop.torch.op("cast")
    assert 'str dtype="float32"' in str(cast.default._schema)
    add = dlop.torch.op("add")
    assert str(add.default._schema) == "dlop::add(Tensor x0, Tensor x1) -> Tensor"


def test_eager_results_match_torch():
    exp, add = dlop.torch.op("exp"), dlop.torch.op("add")
    for dtype in (torch.float32, torch.float64):
        x = torch.linspace(-3, 3, 1001, dtype=dtype)
        torch.testing.assert_close(exp(x), torch.exp(x))
    a, b = torch.randn(4, 1, 3), torch.randn(5, 3)
    torch.testing.assert_close(add(a, b), a + b)
    strided = torch.randn(6, 8)[:, ::2]  # any strides reach the kernel as they are
    torch.testing.assert_close(exp(strided), torch.exp(strided))
    x = torch.arange(12.0).reshape(3, 4)
    torch.testing.assert_close(torch.ops.dlop.sum(x, axes=[1]), x.sum(dim=1))
    torch.testing.assert_close(dlop.torch.op("sum")(x, axes=[0], keepdims=True),
                               x.sum(dim=0, keepdim=True))
    assert dlop.torch.op("cast")(x, dtype="int32").dtype == torch.int32


def test_zero_copy_by_pointer(adapter_ops):
    address = dlop.torch.op("fixture_address")
    x = torch.arange(100, dtype=torch.float32)
    assert int(address(x)) == x.data_ptr()
    view = x[10:]
    assert int(address(view)) == view.data_ptr()


def test_torch_compile_fullgraph_equals_eager():
    exp, add, total = dlop.torch.op("exp"), dlop.torch.op("add"), dlop.torch.op("sum")

    def f(x, y):
        return total(torch.sin(add(exp(x), y)) * 2, axes=[1])

    x, y = torch.randn(64, 32), torch.randn(32)
    compiled = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(compiled(x, y), f(x, y))
    # symbolic sizes: elementwise ops broadcast them, sum maps them through its shape rule
    dynamic = torch.compile(f, fullgraph=True, dynamic=True)
    for n in (7, 19):
        x = torch.randn(n, 32)
        out = dynamic(x, y)
        assert out.shape == (n,)
        torch.testing.assert_close(out, f(x, y))


def test_opcheck_on_the_bundled_ops():
    """Every bundled elementwise and reduction op (blas needs a CPU BLAS library: its GPU
    twin checks matmul); positive inputs so that log, sqrt and pow stay real."""
    x, y = torch.rand(5, 3) + 0.5, torch.rand(3) + 0.5
    unary = ["abs", "neg", "exp", "log", "sqrt", "tanh", "sigmoid", "double"]
    binary = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "multiply_them", "equal",
              "not_equal", "less", "less_equal", "greater", "greater_equal"]
    cases = [(name, (x,), {}) for name in unary] + [(name, (x, y), {}) for name in binary]
    cases += [(name, (x,), {"axes": [0]}) for name in ("sum", "mean", "max", "min")]
    cases += [("sum", (x,), {"axes": [1], "keepdims": True}), ("cast", (x,), {"dtype": "float64"}),
              ("where", (x > 1, x, y), {})]
    for name, args, kwargs in cases:
        if name in ("double", "multiply_them"):  # the seed ops take float32 of one shape
            args = tuple(a.expand(5, 3).contiguous() for a in args)
        torch.library.opcheck(dlop.torch.op(name).default, args, kwargs)


def test_backward_raises_naming_the_op():
    x = torch.randn(4, requires_grad=True)
    y = dlop.torch.op("exp")(x)
    assert y.requires_grad
    with pytest.raises(RuntimeError, match="dlop op 'exp' has no gradient"):
        y.sum().backward()
    # without gradients nothing is recorded
    with torch.no_grad():
        torch.testing.assert_close(dlop.torch.op("exp")(x), torch.exp(x))
        assert not dlop.torch.op("exp")(x).requires_grad
    # an integer output has no gradient to refuse: nothing is recorded on it
    assert not dlop.torch.op("less")(x, x).requires_grad


def test_in_place_variant_writes_its_input():
    dlop.torch.op("exp")  # registers exp_ too: exp declares its output in place of x
    exp_ = torch.ops.dlop.exp_
    assert str(exp_.default._schema) == "dlop::exp_(Tensor(a!) x) -> ()"
    x = torch.linspace(-1, 1, 9)
    expected = torch.exp(x)
    pointer = x.data_ptr()
    assert exp_(x) is None
    assert x.data_ptr() == pointer
    torch.testing.assert_close(x, expected)
    torch.library.opcheck(exp_.default, (torch.randn(6),))

    def g(t):
        t = t * 1.0
        exp_(t)
        return t + 1
    torch.testing.assert_close(torch.compile(g, fullgraph=True)(x.clone()), g(x.clone()))
    with pytest.raises(dlop.InvalidArgumentError, match="C-contiguous"):
        exp_(torch.randn(4, 4).t())


def test_errors_reach_python_with_the_plugins_message(adapter_ops):
    fails = dlop.torch.op("fixture_fails_at_run")
    with pytest.raises(dlop.DlopError, match="fixture_fails_at_run refuses to run"):
        fails(torch.zeros(5))
    with pytest.raises(dlop.DlopError, match="exp"):
        dlop.torch.op("exp")(torch.arange(4))  # int64: the op's own type rule refuses it
    with pytest.raises(dlop.UnsupportedError, match="view op"):
        dlop.torch.op("transpose")
    with pytest.raises(dlop.NotFoundError, match="no_such_op"):
        dlop.torch.op("no_such_op")
    with pytest.raises((TypeError, RuntimeError), match="axes"):  # the schema's own check
        torch.ops.dlop.sum(torch.ones(3), axes="rows")


def test_register_all():
    names = dlop.torch.register_all()
    assert "exp" in names and "transpose" not in names
    for name in names:
        assert hasattr(torch.ops.dlop, name)


def test_the_kernels_in_use_are_named():
    """C++ kernels wherever the build found this PyTorch; Python ones when asked or not built."""
    built = os.path.join(os.path.dirname(dlop.torch.__file__), "_torch_kernels.so")
    if os.environ.get("DLOP_TORCH_KERNELS") == "python":
        assert dlop.torch.KERNELS == "python (DLOP_TORCH_KERNELS=python)"
    elif os.path.exists(built):
        assert dlop.torch.KERNELS.startswith("c++"), dlop.torch.KERNELS
    else:
        assert "not built" in dlop.torch.KERNELS, dlop.torch.KERNELS


def test_a_dtype_dlop_has_none_for_is_a_dlop_type_error():
    with pytest.raises(dlop.DlopTypeError, match="input 0 is .*, which dlop has no dtype for"):
        dlop.torch.op("exp")(torch.zeros(3, dtype=torch.complex64))


def test_forward_mode_ad_is_refused_naming_the_op():
    import torch.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        x = fwAD.make_dual(torch.randn(4), torch.ones(4))
        # the C++ autograd kernel refuses it; the Python kernels refuse it in the kernel itself,
        # since PyTorch skips a Python autograd kernel when no input requires grad
        with pytest.raises(RuntimeError, match="(?i)exp.*forward|forward.*exp"):
            dlop.torch.op("exp")(x)


class TorchTwice(dlop.Op):
    """A dlop.Op written in Python (no other test calls it, so dlop.torch registers it)."""
    __props__ = ()

    def make_node(self, x):
        if x.dtype not in ("float32", "float64"):
            raise dlop.DlopTypeError(f"TorchTwice takes float32 or float64, not {x.dtype}")
        return dlop.Apply(self, [x], [x.type()])

    def infer_shape(self, node, input_shapes):
        return [input_shapes[0]]

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0] * 2


def test_a_dlop_op_instance_eager_and_compiled():
    # An instance: its registered op, registered here; variadic in the registry (its inputs are
    # make_node's), so its schema takes a list of tensors.
    twice = dlop.torch.op(TorchTwice())
    assert twice is torch.ops.dlop.TorchTwice and dlop.torch.op(dlop.ops.TorchTwice) is twice
    assert str(twice.default._schema) == "dlop::TorchTwice(Tensor[] xs) -> Tensor"
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    torch.testing.assert_close(twice([x]), x * 2)
    compiled = torch.compile(lambda v: twice([v]) + 1, fullgraph=True)
    torch.testing.assert_close(compiled(x), x * 2 + 1)
    with pytest.raises(dlop.DlopTypeError, match="TorchTwice takes float32 or float64, not int32"):
        twice([torch.zeros(3, dtype=torch.int32)])
