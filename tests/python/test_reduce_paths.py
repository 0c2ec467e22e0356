"""test_reduce_paths.py — the CPU reductions give the same bits whichever of their loops runs:
the vectorized ones (a contiguous run per output; a block of adjacent outputs at once for a
leading or middle axis) and the element-by-element ones of strided and negative-stride layouts
that collapse to the same dims (the summation tree depends on the collapsed dims only), on
data with NaN, signed zeros and infinities (max/min: the first NaN, the last of equal values),
and whatever the thread count (DLOP_NUM_THREADS=1, 2 and 3, each in a child process)."""
import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

import dlop

SHAPES = [(7,), (100,), (70000,), (64, 33), (3, 200, 5), (4, 64, 70), (70000, 3), (40000, 2, 6),
          (130, 1, 9), (9, 1100, 5), (2, 3, 4, 5)]
DTYPES = ["float32", "float64", "float16", "int32", "int8"]


def values(shape, dtype, kind, seed):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dtype.startswith("int"):
        return rng.integers(-100, 100, n).astype(dtype).reshape(shape)
    v = rng.uniform(-5, 5, n)
    spots = lambda share: rng.integers(0, n, max(1, n // share))  # noqa: E731
    if kind == "nan":
        v[spots(50)] = np.nan
    elif kind == "zeros":  # extremes that are zeros of both signs
        v = -np.abs(v)
        v[spots(5)] = 0.0
        v[spots(5)] = -0.0
    elif kind == "inf":
        v[spots(40)] = np.inf
        v[spots(40)] = -np.inf
    return v.astype(dtype).reshape(shape)


def strided_copy(a):
    """The same values, every other element of a twice as wide last axis: the dims collapse as
    a's do (so the summation tree is the same), but no dim is contiguous, which sends every
    output through the element-by-element loops."""
    big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), dtype=a.dtype)
    view = big[..., ::2]
    view[...] = a
    return view


def reduce_all(a):
    """Every op over every axis set of up to two axes: {key: result bytes}."""
    out = {}
    x = dlop.tensor("x", dtype=a.dtype.name, shape=(None,) * a.ndim)
    axes_sets = [()] + [(d,) for d in range(a.ndim)] + list(itertools.combinations(range(a.ndim), 2))
    for op in ("sum", "mean", "max", "min"):
        if op == "mean" and a.dtype.kind != "f":
            continue
        for axes in axes_sets:
            f = dlop.function([x], getattr(dlop.ops, op)(x, axes=list(axes)))
            out[(op, axes)] = np.asarray(f(a)).tobytes()
    return out


def kinds_of(dtype):
    return ("plain",) if dtype.startswith("int") else ("plain", "nan", "zeros", "inf")


CASES = [(shape, dtype, kind) for shape in SHAPES for dtype in DTYPES for kind in kinds_of(dtype)]


# DLOP_TEST_SCALE below 1 (the sanitizer tree: 0.25): the thread-count test's children run one
# case per shape and dtype (55 of the 154), its data kind turning with the shape, so each float
# dtype still meets NaNs, zeros and infinities split across threads; the vectorized-vs-element
# test below runs every case.
THREAD_CASES = CASES if float(os.environ.get("DLOP_TEST_SCALE", "1")) >= 1 else [
    (shape, dtype, kind) for shape, dtype, kind in CASES
    if kind == kinds_of(dtype)[(SHAPES.index(shape) + DTYPES.index(dtype)) % len(kinds_of(dtype))]]


@pytest.mark.parametrize("shape,dtype,kind", CASES)
def test_vectorized_loops_give_the_element_loops_bits(shape, dtype, kind):
    a = values(shape, dtype, kind, seed=len(shape) * 7 + DTYPES.index(dtype))
    contiguous = reduce_all(a)
    strided = reduce_all(strided_copy(a))
    flip = tuple(slice(None, None, -1) for _ in shape)
    reversed_ = reduce_all(np.ascontiguousarray(a[flip])[flip])  # the same values, negative strides
    assert contiguous.keys() == strided.keys()
    for key in contiguous:
        assert contiguous[key] == strided[key], f"{key} of {shape} {dtype} ({kind}): contiguous and strided differ"
        assert contiguous[key] == reversed_[key], f"{key} of {shape} {dtype} ({kind}): negative strides differ"


def test_max_keeps_the_first_nan_and_the_last_of_equal_zeros():
    n = 1000
    for dtype in ("float32", "float64"):
        a = np.full(n, -1.0, dtype=dtype)
        a[100] = 0.0
        a[700] = -0.0
        x = dlop.vector("x", dtype=dtype)
        f = dlop.function([x], dlop.ops.max(x))
        assert np.signbit(np.asarray(f(a)))  # -0.0: the later of the equal zeros
        a[700] = 0.0
        a[100] = -0.0
        assert not np.signbit(np.asarray(f(a)))
        payloads = a.copy()
        bits = payloads.view(np.uint32 if dtype == "float32" else np.uint64)
        bits[300] = 0x7FC00001 if dtype == "float32" else 0x7FF8000000000001
        bits[600] = 0x7FC00002 if dtype == "float32" else 0x7FF8000000000002
        got = np.asarray(f(payloads)).reshape(1).view(bits.dtype)[0]
        assert got == bits[300]


CHILD = r"""
import hashlib, sys
sys.path.insert(0, sys.argv[1])
import test_reduce_paths as t
digest = hashlib.sha256()
for shape, dtype, kind in t.THREAD_CASES:
    results = t.reduce_all(t.values(shape, dtype, kind, seed=len(shape) * 7 + t.DTYPES.index(dtype)))
    for key in sorted(results, key=repr):
        digest.update(results[key])
print(digest.hexdigest())
"""


def test_thread_count_does_not_change_the_bits():
    here = os.path.dirname(os.path.abspath(__file__))
    digests = []
    for threads in ("1", "2", "3"):
        env = dict(os.environ, DLOP_NUM_THREADS=threads)
        done = subprocess.run([sys.executable, "-c", CHILD, here], env=env, capture_output=True,
                              text=True, timeout=240)
        assert done.returncode == 0, done.stderr
        digests.append(done.stdout.strip())
    assert digests[0] == digests[1] == digests[2], digests
