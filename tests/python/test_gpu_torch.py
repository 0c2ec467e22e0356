"""test_gpu_torch.py — dlop ops as PyTorch custom ops on CUDA (dlop.torch): eager results
against torch, on PyTorch's current stream (a side stream included), torch.compile(fullgraph)
next to native ops equal to eager, opcheck on CUDA tensors, the tensors' device memory reaching
the kernel uncopied (by pointer), the in-place variant, errors with the plugin's message.
Without a usable GPU, or without torch with CUDA, every test skips with the reason;
DLOP_REQUIRE_GPU=1 turns that into a failure."""
import os

import pytest

import dlop
from grad_w_support import gpu_unusable_reason, skip_or_fail


def _reason():
    reason = gpu_unusable_reason()
    if reason is not None:
        return "no GPU usable: %s" % reason
    try:
        import torch
    except ImportError as error:
        return "no GPU usable through PyTorch: torch is not installed (%s)" % error
    if not torch.cuda.is_available():
        return "no GPU usable through PyTorch: torch.cuda.is_available() is False"
    return None


REASON = _reason()


@pytest.fixture(autouse=True)
def require_gpu():
    skip_or_fail(REASON)


FIXTURES = os.path.join(os.environ.get("DLOP_FIXTURE_DIR", ""), "adapters", "adapter_ops.so")


def test_eager_on_cuda_matches_torch_on_the_current_stream():
    import torch
    import dlop.torch
    exp, add = dlop.torch.op("exp"), dlop.torch.op("add")
    x = torch.randn(230400, device="cuda")
    torch.testing.assert_close(exp(x), torch.exp(x))
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # the kernel is ordered on the stream torch uses now
        y = torch.randn(1 << 22, device="cuda")
        z = add(exp(y), y)
        expected = torch.exp(y) + y
    side.synchronize()
    torch.testing.assert_close(z, expected)
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        h = x.to(dtype)
        torch.testing.assert_close(exp(h), torch.exp(h))


def test_zero_copy_on_cuda_by_pointer():
    import torch
    import dlop.torch
    if "fixture_address" not in dlop.ops:
        dlop.load_plugin(FIXTURES)
    address = dlop.torch.op("fixture_address")
    x = torch.arange(1000, dtype=torch.float32, device="cuda")
    out = address(x)
    assert out.device.type == "cuda"
    assert int(out.cpu()) == x.data_ptr()
    y = dlop.torch.op("exp")(x)
    assert int(address(y).cpu()) == y.data_ptr()  # the output torch allocated is what was written


def test_torch_compile_on_cuda_with_native_ops():
    import torch
    import dlop.torch
    exp, mul = dlop.torch.op("exp"), dlop.torch.op("mul")

    def f(x, y):
        return torch.relu(mul(exp(x * 0.5), y)).sum(dim=1)

    x, y = torch.randn(512, 256, device="cuda"), torch.randn(256, device="cuda")
    torch.testing.assert_close(torch.compile(f, fullgraph=True)(x, y), f(x, y))


def test_opcheck_and_in_place_on_cuda():
    import torch
    import dlop.torch
    x, y = torch.randn(33, 7, device="cuda"), torch.randn(7, device="cuda")
    for name, args, kwargs in [("exp", (x,), {}), ("add", (x, y), {}),
                               ("sum", (x,), {"axes": [1]}), ("matmul", (x, x.t().contiguous()), {})]:
        torch.library.opcheck(dlop.torch.op(name).default, args, kwargs)
    dlop.torch.op("exp")
    t = x.clone()
    torch.ops.dlop.exp_(t)
    torch.testing.assert_close(t, torch.exp(x))


def test_errors_on_cuda():
    import torch
    import dlop.torch
    if "fixture_fails_at_run" not in dlop.ops:
        dlop.load_plugin(FIXTURES)
    with pytest.raises(dlop.DlopError, match="fixture_fails_at_run refuses to run"):
        dlop.torch.op("fixture_fails_at_run")(torch.zeros(3, device="cuda"))
    with pytest.raises(dlop.DeviceMismatchError, match="input 1 is on cpu"):
        dlop.torch.op("add")(torch.zeros(3, device="cuda"), torch.zeros(3))
