"""test_blas_info.py — dlop.info(name) from Python, and which CPU BLAS the blas ops use there:
with NumPy imported first (NumPy >= 2 loads its scipy-openblas64 copy), the plugin reuses that
very library, so the process has one OpenBLAS and one thread pool; its gemm gives NumPy's
values. DLOP_BLAS_LIBRARY still wins. Each case runs in a fresh `python -c`: the plugin picks
its library once per process."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import dlop

FIXTURES = os.environ.get("DLOP_FIXTURE_DIR", "")


def run_fresh(code: str, **env) -> dict:
    """Run code in a fresh interpreter (it prints one JSON value) and return what it printed."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


REPORT = """
import json, numpy as np, dlop
a = np.arange(12.0).reshape(3, 4); b = np.arange(8.0).reshape(4, 2)
got = dlop.ops.matmul(dlop.asarray(a), dlop.asarray(b)).numpy()
assert np.array_equal(got, a @ b), got
maps = [line.split()[-1] for line in open("/proc/self/maps") if "openblas" in line]
print(json.dumps({"info": dlop.info("dot"), "maps": sorted(set(maps))}))
"""


def numpy_openblas():
    """The scipy-openblas file NumPy's wheel loaded, or None (NumPy < 2, or another BLAS)."""
    maps = [line.split()[-1] for line in open("/proc/self/maps") if "libscipy_openblas" in line]
    return os.path.realpath(maps[0]) if maps else None


def test_info_has_the_ops_facts():
    info = dlop.info("dot")
    assert info["name"] == "dot" and info["plugin"] == "blas"
    assert info["dtypes"]["cpu"] == ["float32", "float64"]
    cpu = info["run_time"]["cpu"]
    for key in ("blas library", "blas found as", "blas symbols", "blas integers"):
        assert cpu[key], key
    assert "cuda" not in info["run_time"]  # the CUDA path has nothing of its own to report
    assert dlop.info("exp")["run_time"] == {}  # an op without runtime_info


def test_info_of_an_unknown_op_names_it():
    with pytest.raises(dlop.NotFoundError, match="no_such_op"):
        dlop.info("no_such_op")


@pytest.mark.skipif(numpy_openblas() is None, reason="this NumPy loads no scipy-openblas")
def test_numpy_openblas_is_reused():
    env = {k: v for k, v in os.environ.items() if k != "DLOP_BLAS_LIBRARY"}
    done = subprocess.run([sys.executable, "-c", REPORT], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    cpu = report["info"]["run_time"]["cpu"]
    assert cpu["blas found as"].startswith("scipy-openblas already loaded in this process")
    assert os.path.realpath(cpu["blas library"]) == numpy_openblas()
    assert cpu["blas integers"] == "64-bit (ILP64)"
    # one OpenBLAS in the process: the plugin opened no second one
    assert [os.path.realpath(m) for m in report["maps"]] == [numpy_openblas()], report["maps"]


def test_environment_still_wins():
    fake = os.path.join(FIXTURES, "blas", "libscipy_openblas_fake.so")
    if not os.path.exists(fake):
        pytest.skip(f"{fake} not built")
    report = run_fresh(REPORT, DLOP_BLAS_LIBRARY=fake)
    cpu = report["info"]["run_time"]["cpu"]
    assert cpu == {**cpu, "blas library": fake, "blas found as": "DLOP_BLAS_LIBRARY",
                   "blas symbols": "scipy_cblas_sgemm", "blas kernels": "FakeCore",
                   "blas threads": "3"}


def test_float32_gemm_matches_numpy():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((70, 50), dtype=np.float32)
    b = rng.standard_normal((50, 30), dtype=np.float32)
    got = dlop.ops.matmul(dlop.asarray(a), dlop.asarray(b)).numpy()
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-4)
