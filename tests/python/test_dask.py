"""dlop.dask on a distributed.LocalCluster of 2 worker processes (1 thread each): elementwise
groups, reductions, contractions and permutations on arrays of several odd-sized chunks equal
NumPy; grad_W over a split batch; workers compile each piece once; a worker lacking a plugin
fails with an error naming the op and plugin, not a hang.  Skips (with the reason) without
dask and distributed."""
import os

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask is not installed (scripts/ensure-python "
                         "installs it; offline, put its wheels in DLOP_WHEELHOUSE)")
distributed = pytest.importorskip("distributed", reason="distributed is not installed "
                                  "(scripts/ensure-python installs it)")

import dlop  # noqa: E402
import dlop.dask  # noqa: E402
from grad_w_support import load_example  # noqa: E402

TIMEOUT = 120  # seconds for any one result: a failure must come back, never hang


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=":0") as cluster:
        with distributed.Client(cluster) as c:
            yield c


def compute(client, lazy):
    if isinstance(lazy, list):
        return [future.result(timeout=TIMEOUT) for future in client.compute(lazy)]
    return client.compute(lazy).result(timeout=TIMEOUT)


def chunked(value, chunks):
    return da.from_array(value, chunks=chunks)


rng = np.random.default_rng(7)
A = rng.standard_normal((23, 17))         # chunks (5, 4): 5 x 5 blocks, ragged at the ends
ROW = rng.standard_normal((1, 17))        # broadcast along the rows
VEC = rng.standard_normal(17)


def test_elementwise_group_with_broadcasting_and_constants(client):
    x = dlop.matrix("x", dtype="float64")
    r = dlop.matrix("r", dtype="float64", shape=(1, None))
    v = dlop.vector("v", dtype="float64")
    y = dlop.tanh(x * r + 1.5) - dlop.exp(v) / 2.0
    lazy = dlop.dask.function([x, r, v], y)(chunked(A, (5, 4)), chunked(ROW, (1, 4)),
                                            chunked(VEC, 4))
    assert isinstance(lazy, da.Array) and lazy.chunks == ((5, 5, 5, 5, 3), (4, 4, 4, 4, 1))
    # One blockwise task per chunk for the whole group (plus the inputs' own tasks).
    assert len([k for k in lazy.dask.layers if "dlop-" in k]) == 1
    expected = np.tanh(A * ROW + 1.5) - np.exp(VEC) / 2.0
    np.testing.assert_allclose(compute(client, lazy), expected, rtol=1e-14, atol=1e-14)


def test_elementwise_float32_and_integers(client):
    a = dlop.matrix("a", dtype="int32")
    b = dlop.matrix("b", dtype="float32")
    ints = rng.integers(-100, 100, (19, 11)).astype(np.int32)
    floats = rng.standard_normal((19, 11)).astype(np.float32)
    out = dlop.dask.function([a, b], [a * 3 - 1, dlop.where(a > 0, b, -b)])(
        chunked(ints, (7, 3)), chunked(floats, (4, 11)))
    got = compute(client, out)
    np.testing.assert_array_equal(got[0], ints * 3 - 1)
    assert got[0].dtype == np.int32
    np.testing.assert_array_equal(got[1], np.where(ints > 0, floats, -floats))


@pytest.mark.parametrize("name, axis, keepdims", [
    ("sum", None, False), ("sum", 0, False), ("sum", 1, True), ("mean", None, False),
    ("mean", 0, True), ("max", 1, False), ("min", (0, 1), True), ("max", None, False)])
def test_reductions(client, name, axis, keepdims):
    x = dlop.matrix("x", dtype="float64")
    y = getattr(dlop, name)(dlop.exp(x) - 1.0, axis=axis, keepdims=keepdims)
    lazy = dlop.dask.function([x], y)(chunked(A, (5, 4)))
    expected = getattr(np, name)(np.exp(A) - 1.0, axis=axis, keepdims=keepdims)
    assert lazy.shape == expected.shape
    np.testing.assert_allclose(compute(client, lazy), expected, rtol=1e-13)


def test_reductions_of_integers_and_float32(client):
    i = dlop.vector("i", dtype="int16")
    f = dlop.matrix("f", dtype="float32")
    ints = rng.integers(-1000, 1000, 1001).astype(np.int16)
    floats = rng.standard_normal((40, 9)).astype(np.float32)
    total, mean = dlop.dask.function([i, f], [dlop.sum(i), dlop.mean(f, axis=0)])(
        chunked(ints, 97), chunked(floats, (7, 2)))
    got_total, got_mean = compute(client, [total, mean])
    assert got_total.dtype == np.int64 and got_total == ints.astype(np.int64).sum()
    np.testing.assert_allclose(got_mean, floats.astype(np.float64).mean(axis=0), rtol=1e-6)
    assert got_mean.dtype == np.float32


@pytest.mark.parametrize("a_shape, b_shape, a_chunks, b_chunks", [
    ((23, 17), (17, 9), (5, 4), (4, 3)),      # k split in 5: partial products summed
    ((23, 17), (17, 9), (6, 17), (17, 5)),    # k one chunk: one product per block
    ((17,), (17, 9), 4, (4, 9)),
    ((23, 17), (17,), (5, 4), 4),
    ((17,), (17,), 3, 3),
])
def test_dot_blocked(client, a_shape, b_shape, a_chunks, b_chunks):
    a_value, b_value = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    a = dlop.tensor("a", dtype="float64", shape=(None,) * len(a_shape))
    b = dlop.tensor("b", dtype="float64", shape=(None,) * len(b_shape))
    lazy = dlop.dask.function([a, b], dlop.dot(a, b))(chunked(a_value, a_chunks),
                                                      chunked(b_value, b_chunks))
    np.testing.assert_allclose(compute(client, lazy), a_value @ b_value, rtol=1e-12, atol=1e-12)


def test_matmul_with_batch_dims_and_permutations(client):
    a_value = rng.standard_normal((3, 11, 8)).astype(np.float32)
    b_value = rng.standard_normal((8, 5)).astype(np.float32)
    a = dlop.tensor("a", dtype="float32", shape=(None, None, None))
    b = dlop.matrix("b", dtype="float32")
    product = dlop.matmul(a, b)
    outputs = [product, dlop.transpose(product, (2, 0, 1)), dlop.dimshuffle(b, (1, -1, 0))]
    got = compute(client, dlop.dask.function([a, b], outputs)(chunked(a_value, (2, 4, 3)),
                                                            chunked(b_value, (3, 2))))
    expected = a_value.astype(np.float64) @ b_value
    np.testing.assert_allclose(got[0], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[1], expected.transpose(2, 0, 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[2], b_value.T[:, None, :])


def test_shared_results_constants_and_inputs_as_outputs(client):
    """exp(x) is used twice (computed once, its own tasks), W is a graph constant feeding a
    contraction (a one-chunk Dask array, rechunked along k by Dask), x is also an output."""
    W = rng.standard_normal((17, 3))
    x = dlop.matrix("x", dtype="float64")
    e = dlop.exp(x)
    lazy = dlop.dask.function([x], [dlop.dot(e, W), e + 1.0, x])(chunked(A, (5, 4)))
    assert len([k for k in lazy[1].dask.layers if k.startswith("dlop-exp")]) == 1
    got = compute(client, lazy)
    np.testing.assert_allclose(got[0], np.exp(A) @ W, rtol=1e-12)
    np.testing.assert_allclose(got[1], np.exp(A) + 1.0, rtol=1e-14)
    np.testing.assert_array_equal(got[2], A)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_grad_w_over_a_split_batch(client, dtype):
    example = load_example()
    inputs, grad_W = example.build(dtype)
    f = dlop.function(inputs, grad_W)
    values = example.random_inputs(dtype)  # a batch of 64 rows
    rows = (13, 13, 13, 13, 12)
    arrays = [chunked(v, v.shape if v.shape[0] == example.OUT else (rows, v.shape[1]))
              for v in values]
    lazy = dlop.dask.apply(f, *arrays)
    assert lazy.shape == (example.VISIBLE, example.HIDDEN)
    result = compute(client, lazy)
    expected = example.reference(values)
    _, relative = example.difference(result, expected)
    assert relative <= example.TOLERANCE[dtype], relative
    # The same, run by the compiled function in this process.
    np.testing.assert_allclose(result, f(*values).numpy(), rtol=1e-5 if dtype == "float32" else 1e-12,
                               atol=1e-5 if dtype == "float32" else 1e-12)


def test_workers_compile_each_piece_once(client):
    x = dlop.vector("x", dtype="float64")
    y = dlop.sum(dlop.sqrt(x * x + 2.0))
    value = rng.standard_normal(1000)
    before = client.run(dlop.dask.cache_info)
    for _ in range(2):  # planned twice: the same four texts (the group, sum's three steps)
        got = compute(client, dlop.dask.function([x], y)(chunked(value, 10)))  # 100 chunks
        np.testing.assert_allclose(got, np.sqrt(value * value + 2.0).sum(), rtol=1e-12)
    after = client.run(dlop.dask.cache_info)
    compiles = {w: i["compiles"] - before[w]["compiles"] for w, i in after.items()}
    calls = {w: i["compiles"] + i["hits"] - before[w]["compiles"] - before[w]["hits"]
             for w, i in after.items()}
    # At most one compile per text per worker process, however many chunks it ran.
    assert all(n <= 4 for n in compiles.values()), compiles
    assert sum(calls.values()) >= 200 and sum(compiles.values()) <= 8, (calls, compiles)


def test_refusals_on_the_client():
    x = dlop.matrix("x", dtype="float64")
    value = chunked(A, (5, 4))
    with pytest.raises(dlop.DlopTypeError, match="not a Dask array"):
        dlop.dask.function([x], x + 1.0)(A)
    with pytest.raises(dlop.DlopTypeError, match="has dtype float32; the function declares float64"):
        dlop.dask.function([x], x + 1.0)(value.astype(np.float32))
    with pytest.raises(dlop.ShapeError, match=r"has shape \(23,\)"):
        dlop.dask.function([x], x + 1.0)(value[:, 0])
    with pytest.raises(dlop.UnsupportedError, match="op 'reshape' .* has no chunked plan"):
        dlop.dask.function([x], dlop.reshape(x, (-1,)))(value)
    with pytest.raises(dlop.DlopTypeError, match="expected a dlop.Function"):
        dlop.dask.apply(lambda v: v, value)
    # What a task does with a chunk that is neither NumPy nor CuPy.
    kernel = dlop.dask._Kernel(dlop.dumps(x + 1.0, [x]), "add")
    with pytest.raises(dlop.DlopTypeError, match="a chunk of type list; expected NumPy"):
        kernel([[1.0, 2.0]])
    np.testing.assert_array_equal(kernel(np.ones((2, 2))), np.full((2, 2), 2.0))


def test_a_worker_without_the_plugin_fails_naming_it(tmp_path):
    """A worker whose bundled plugin folder lacks the exp plugin: the task fails with the
    loader's NotFoundError, which reaches the client within the timeout."""
    exp = next(p for p in dlop.plugins() if p.name == "exp")
    folder = os.path.dirname(exp.path)
    for name in os.listdir(folder):
        if os.path.join(folder, name) != exp.path:
            os.symlink(os.path.join(folder, name), tmp_path / name)
    x = dlop.vector("x", dtype="float32")
    lazy = dlop.dask.function([x], dlop.exp(x) + 1.0)(chunked(np.ones(10, np.float32), 5))
    with distributed.LocalCluster(n_workers=1, processes=True, threads_per_worker=1,
                                  dashboard_address=":0",
                                  env={"DLOP_BUNDLED_PLUGINS": str(tmp_path)}) as cluster:
        with distributed.Client(cluster) as c:
            assert c.run(lambda: os.environ["DLOP_BUNDLED_PLUGINS"]) != {}
            with pytest.raises(dlop.NotFoundError) as error:
                c.compute(lazy).result(timeout=TIMEOUT)
    message = str(error.value)
    assert "op 'exp' from plugin 'exp' version 1.0.0, which is not loaded" in message


def test_the_example_runs_on_the_cluster(client):
    """examples/grad_w_dask.py as a user runs it, on this module's cluster (--scheduler)."""
    import subprocess
    import sys
    from grad_w_support import EXAMPLE
    script = EXAMPLE.parent / "grad_w_dask.py"
    done = subprocess.run([sys.executable, str(script), "--batch", "2000", "--chunk", "333",
                           "--scheduler", client.scheduler.address], capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "grad_w_dask: OK, every result agrees" in done.stdout
    assert done.stdout.count("): OK") == 2, done.stdout  # float32 and float64
