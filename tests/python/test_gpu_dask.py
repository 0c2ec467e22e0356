"""dlop.dask with CuPy chunks on a 2-process LocalCluster: elementwise groups, reductions and
grad_W run as CUDA dlop functions on the workers and equal NumPy; the results stay CuPy arrays;
NumPy and CuPy chunks never mix, and a function's device must match its chunks.  Without a
usable GPU every test skips with dlop's reason, and without CuPy, dask or distributed with
theirs; DLOP_REQUIRE_GPU=1 turns either into a failure."""
import importlib
import os

import numpy as np
import pytest

import dlop
from grad_w_support import gpu_unusable_reason, load_example

REQUIRED = os.environ.get("DLOP_REQUIRE_GPU") == "1"
TIMEOUT = 300


def _need(name):
    try:
        return importlib.import_module(name)
    except ImportError as error:
        if REQUIRED:
            pytest.fail(f"DLOP_REQUIRE_GPU=1 but {name} cannot be imported: {error}",
                        pytrace=False)
        pytest.skip(f"{name} is not installed: {error}", allow_module_level=True)


_reason = gpu_unusable_reason()
if _reason is not None:
    if REQUIRED:
        pytest.fail(f"DLOP_REQUIRE_GPU=1 but no GPU is usable: {_reason}", pytrace=False)
    pytest.skip(f"no GPU usable: {_reason}", allow_module_level=True)
cupy = _need("cupy")
da = _need("dask.array")
distributed = _need("distributed")
import dlop.dask  # noqa: E402


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=":0") as cluster:
        with distributed.Client(cluster) as c:
            yield c


def on_gpu(value, chunks):
    return da.from_array(cupy.asarray(value), chunks=chunks, asarray=False)


def compute(client, lazy):
    return client.compute(lazy).result(timeout=TIMEOUT)


rng = np.random.default_rng(3)
A = rng.standard_normal((37, 29))


def test_elementwise_and_reductions_on_cupy_chunks(client):
    x = dlop.matrix("x", dtype="float64")
    y = dlop.exp(x) * 0.5 - x
    outputs = dlop.dask.function([x], [y, dlop.sum(y, axis=0), dlop.max(y), dlop.mean(y, axis=1)])(
        on_gpu(A, (10, 7)))
    assert all(type(o._meta).__module__.startswith("cupy") for o in outputs)
    got = [compute(client, o) for o in outputs]
    assert all(isinstance(g, cupy.ndarray) for g in got)
    expected = np.exp(A) * 0.5 - A
    for g, e in zip(got, [expected, expected.sum(0), expected.max(), expected.mean(1)]):
        np.testing.assert_allclose(g.get(), e, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_grad_w_on_cupy_chunks(client, dtype):
    example = load_example()
    inputs, grad_W = example.build(dtype)
    f = dlop.function(inputs, grad_W, device="cuda")
    values = example.random_inputs(dtype)
    arrays = [on_gpu(v, v.shape if v.shape[0] == example.OUT else (13, v.shape[1]))
              for v in values]
    result = compute(client, dlop.dask.apply(f, *arrays))
    assert isinstance(result, cupy.ndarray)
    _, relative = example.difference(result.get(), example.reference(values))
    assert relative <= example.TOLERANCE[dtype], relative


def test_mixed_chunk_kinds_are_refused():
    x, y = dlop.vector("x", dtype="float64"), dlop.vector("y", dtype="float64")
    host = da.from_array(np.ones(8), chunks=4)
    device = on_gpu(np.ones(8), 4)
    with pytest.raises(dlop.DeviceMismatchError, match="mix NumPy .* and CuPy"):
        dlop.dask.function([x, y], x + y)(host, device)
    cpu = dlop.function([x], x * 2.0, device="cpu")
    cuda = dlop.function([x], x * 2.0, device="cuda")
    with pytest.raises(dlop.DeviceMismatchError, match="cupy chunks; this function runs on cpu"):
        dlop.dask.apply(cpu, device)
    with pytest.raises(dlop.DeviceMismatchError, match="numpy chunks; this function runs on cuda"):
        dlop.dask.apply(cuda, host)
    # A task given chunks of both kinds (a graph built by hand) refuses too, on the worker.
    kernel = dlop.dask._Kernel(dlop.dumps(x + y, [x, y]), "add")
    with pytest.raises(dlop.DeviceMismatchError, match="chunks on cpu, cuda:0"):
        kernel(np.ones(2), cupy.ones(2))
