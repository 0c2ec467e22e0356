"""test_scalar_edge_cases.py — Python scalars at their edges: weak scalars converted to bfloat16
with one rounding (not float64 -> float32 -> bfloat16), the eager caches keyed on a float's bits
(NaN scalars and NaN/-0.0 parameters, through the operators and dlop.ops.<op>), and comparisons
with ints out of the dtype's range answered like NumPy."""
import numpy as np
import pytest

import dlop
from dlop import _arith

# 1 + 2^-8 + 2^-30: float32 rounds it to 1 + 2^-8, exactly halfway between two bfloat16
# values, which then ties to even (1.0); rounded once, it is above the midpoint: 1 + 2^-7.
TRAP = 1.0 + 2.0 ** -8 + 2.0 ** -30
TRAP_BF16 = 1.0 + 2.0 ** -7


def bf16_ones(n):
    return dlop.cast(dlop.asarray(np.ones(n, dtype=np.float32)), "bfloat16")


def as_f32(array):
    return dlop.cast(array, "float32").numpy()


def test_eager_weak_float_rounds_once_to_bfloat16():
    result = bf16_ones(3) * TRAP
    assert result.dtype == "bfloat16"
    np.testing.assert_array_equal(as_f32(result), np.full(3, TRAP_BF16, np.float32))


def test_graph_weak_float_rounds_once_to_bfloat16():
    x = dlop.vector("x", dtype="bfloat16")
    y = x * TRAP
    f = dlop.function([x], y, "cpu")
    out = f(bf16_ones(2))
    np.testing.assert_array_equal(as_f32(out), np.full(2, TRAP_BF16, np.float32))


def test_eager_weak_int_rounds_once_to_bfloat16():
    # 2^24 + 2^16 + 1 rounds (float32) to 2^24 + 2^16, a bfloat16 tie that goes to 2^24 even;
    # rounded once it is above the midpoint: 2^24 + 2^17.
    value = 2 ** 24 + 2 ** 16 + 1
    result = bf16_ones(1) * value
    assert result.dtype == "bfloat16"
    np.testing.assert_array_equal(as_f32(result), np.float32([2 ** 24 + 2 ** 17]))


def test_nan_scalars_share_one_cached_array():
    a = dlop.asarray(np.ones(4, dtype=np.float32))
    a * float("nan")
    before = len(_arith._scalar_cache)
    for _ in range(5):
        result = a * float("nan")  # a new float object each time
        assert np.isnan(result.numpy()).all()
    assert len(_arith._scalar_cache) == before


def test_negative_zero_scalar_keeps_its_sign():
    a = dlop.asarray(np.ones(2, dtype=np.float32))
    assert not np.signbit((a * 0.0).numpy()).any()
    assert np.signbit((a * -0.0).numpy()).all()


def test_nan_parameter_compiles_once():
    a = dlop.asarray(np.ones((2, 2), dtype=np.float64))
    dlop.gemm(a, a, a, alpha=float("nan"))
    before = len(_arith._eager_cache)
    for _ in range(3):
        result = dlop.gemm(a, a, a, alpha=float("nan"))
        assert np.isnan(result.numpy()).all()
    assert len(_arith._eager_cache) == before


def test_zero_and_negative_zero_parameters_are_distinct_signatures():
    a = dlop.asarray(np.ones((2, 2), dtype=np.float64))
    dlop.gemm(a, a, a, alpha=1.0, beta=0.0)
    before = len(_arith._eager_cache)
    dlop.gemm(a, a, a, alpha=1.0, beta=-0.0)
    assert len(_arith._eager_cache) == before + 1


def test_comparison_with_out_of_range_int_answers_like_numpy():
    # NumPy 2 answers these (every element alike) instead of raising; arithmetic still raises.
    values = np.array([0, 1, 127, 255], dtype=np.uint8)
    a = dlop.asarray(values)
    x = dlop.vector("x", dtype="uint8")
    for scalar in (-1, -300, 256, 300, 2**70, -2**70):
        for op in (lambda p, q: p < q, lambda p, q: p <= q, lambda p, q: p > q,
                   lambda p, q: p >= q, lambda p, q: p == q, lambda p, q: p != q):
            expected = op(values, scalar)
            np.testing.assert_array_equal(op(a, scalar).numpy(), expected)
            np.testing.assert_array_equal(op(scalar, a).numpy(), op(scalar, values))
            np.testing.assert_array_equal(op(x, scalar).eval({x: values}).numpy(), expected)
    with pytest.raises(dlop.ScalarOverflowError):
        a + 256


def test_op_calls_key_parameters_like_the_operators():
    # dlop.ops.<op>(arrays) runs on the operators' eager cache: a NaN parameter compiles once
    # (each call compiled and kept one more node, unbounded, before) and 0.0 / -0.0 are two
    # signatures (they shared one).
    a = dlop.asarray(np.ones((2, 2), dtype=np.float64))
    dlop.ops.gemm(a, a, a, alpha=float("nan"))
    before = len(_arith._eager_cache)
    for _ in range(3):
        assert np.isnan(dlop.ops.gemm(a, a, a, alpha=float("nan")).numpy()).all()
    assert len(_arith._eager_cache) == before
    dlop.ops.gemm(a, a, a, beta=0.0)
    before = len(_arith._eager_cache)
    dlop.ops.gemm(a, a, a, beta=-0.0)
    assert len(_arith._eager_cache) == before + 1
