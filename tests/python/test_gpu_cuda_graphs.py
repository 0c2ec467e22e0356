"""test_gpu_cuda_graphs.py — replayed CUDA graphs from Python: dlop.function(..., device="cuda")
replays a graph from its second call with the same shapes and says so in explain();
cuda_graphs=False runs node by node and says that; results equal either way on new inputs each
call, results kept across calls stay intact, a new shape records again, and a function with a
node that is not capture-safe (matmul) names it.  Without a usable GPU every test skips with
dlop's reason; DLOP_REQUIRE_GPU=1 turns that into a failure."""
import re

import numpy as np
import pytest

import dlop
from grad_w_support import require_gpu


@pytest.fixture(autouse=True)
def gpu():
    require_gpu()


def ten_ops(cuda_graphs=True):
    ops = dlop.ops
    x, b = dlop.vector("x", dtype="float32"), dlop.vector("b", dtype="float32")
    t = ops.tanh(ops.add(ops.mul(x, b), x))
    t = ops.sigmoid(ops.sub(ops.mul(t, b), x))
    t = ops.maximum(ops.mul(ops.add(t, b), x), b)
    return dlop.function([x, b], ops.sub(t, b), device="cuda", cuda_graphs=cuda_graphs,
                         fuse=False)  # several kernel nodes (fused, the ten ops are one)


def graphs_line(f):
    lines = [line for line in f.explain().splitlines() if line.startswith("cuda graphs: ")]
    assert len(lines) == 1, f.explain()
    return lines[0]


def counts(f):
    match = re.search(r"(\d+) recorded, (\d+) graph launches, (\d+) of them with moved",
                      graphs_line(f))
    assert match, graphs_line(f)
    return tuple(int(g) for g in match.groups())


def test_replay_equals_node_by_node_and_keeps_results():
    on, off = ten_ops(True), ten_ops(False)
    assert graphs_line(off) == "cuda graphs: not replayed: turned off by the cuda_graphs option"
    rng = np.random.default_rng(5)
    kept = []
    for call in range(6):
        x = dlop.asarray(rng.uniform(-2, 2, 1024).astype(np.float32), device="cuda")
        b = dlop.asarray(rng.uniform(-2, 2, 1024).astype(np.float32), device="cuda")
        got, want = on(x, b), off(x, b)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        kept.append((got, want.numpy(), x, b))
    for call, (got, want, _, _) in enumerate(kept):
        np.testing.assert_array_equal(got.numpy(), want, err_msg=f"call {call} after later calls")
    assert counts(on) == (1, 5, 4)


def test_new_shape_records_again():
    on, off = ten_ops(True), ten_ops(False)
    rng = np.random.default_rng(6)
    for n in (100, 100, 33, 33, 100, 0, 0):
        x = rng.uniform(-2, 2, n).astype(np.float32)
        b = rng.uniform(-2, 2, n).astype(np.float32)
        np.testing.assert_array_equal(on(x, b).numpy(), off(x, b).numpy())
    recorded, launches, _ = counts(on)
    assert (recorded, launches) == (3, 4)


def test_unsafe_node_is_named():
    w = dlop.matrix("w", dtype="float32", shape=(8, 8))
    f = dlop.function([w], dlop.ops.tanh(dlop.ops.matmul(dlop.ops.double(w), w)), device="cuda",
                      fuse=False)
    assert graphs_line(f) == ("cuda graphs: not replayed: node #1 matmul is not declared safe for "
                              "capture (its op lacks DLOP_OP_CUDA_GRAPH_SAFE)")
    a = np.random.default_rng(7).uniform(-1, 1, (8, 8)).astype(np.float32)
    for _ in range(3):
        np.testing.assert_allclose(f(a).numpy(), np.tanh((2 * a) @ a), rtol=1e-4, atol=1e-5)
