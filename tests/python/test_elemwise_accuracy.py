"""test_elemwise_accuracy.py — the accuracy docs/ops.md promises for the math functions on the
CPU (log, tanh, sigmoid, pow of the elemwise plugin, the seed op exp; sqrt and div exact), in
ulps of the result's dtype against a higher-precision reference: x87 long double (64-bit
significand, through NumPy's longdouble loops, i.e. libm's tanhl, logl, expl, powl) for float64
results, float64 for float32 and 16-bit results. Edge values (NaN, infinities, signed zeros,
subnormals, the largest values, the points where a formula switches) must give exactly what
NumPy gives (C99's special cases); seeded random values across each domain must stay within the
documented bound. Also: a result depends only on its input, never on where the element sits
(vector body, staged tail, strided run, parallel chunk)."""
import numpy as np
import pytest

import dlop

if np.finfo(np.longdouble).nmant < 63:
    pytest.skip("the float64 reference needs x87 long double (64-bit significand); this "
                f"platform's longdouble has {np.finfo(np.longdouble).nmant} bits",
                allow_module_level=True)

LD = np.longdouble

# The bounds of docs/ops.md, in ulps of the result dtype (float16: of float16).
BOUNDS = {
    ("log", "float32"): 4, ("log", "float64"): 4,
    ("tanh", "float32"): 4, ("tanh", "float64"): 4,
    ("sigmoid", "float32"): 5, ("sigmoid", "float64"): 5,
    ("pow", "float32"): 4, ("pow", "float64"): 4,
    ("exp", "float32"): 2, ("exp", "float64"): 2,
    ("log", "float16"): 1, ("tanh", "float16"): 1, ("sigmoid", "float16"): 1,
    ("pow", "float16"): 1, ("exp", "float16"): 1,
}


def reference(name, args):
    """The function in long double (float64 inputs) or float64 (float32 and 16-bit inputs)."""
    wide = [a.astype(LD) if a.dtype == np.float64 else a.astype(np.float64) for a in args]
    with np.errstate(all="ignore"):
        if name == "log":
            return np.log(wide[0])
        if name == "tanh":
            return np.tanh(wide[0])
        if name == "exp":
            return np.exp(wide[0])
        if name == "sigmoid":
            x = wide[0]
            return 1 / (1 + np.exp(-x))
        if name == "pow":
            return np.power(wide[0], wide[1])
    raise AssertionError(name)


def run(name, args):
    """dlop's op on the arrays, as a compiled one-op CPU function."""
    variables = [dlop.tensor(f"a{k}", dtype=a.dtype.name, shape=(None,) * a.ndim)
                 for k, a in enumerate(args)]
    f = dlop.function(variables, getattr(dlop.ops, name)(*variables))
    return np.asarray(f(*args))


def ulp_errors(got, ref, dtype):
    """|got - ref| in ulps of dtype at ref (an ulp of a subnormal is the smallest subnormal);
    where ref is beyond dtype's range or not finite, 0 if got is what rounding ref gives, inf
    otherwise."""
    info = np.finfo(dtype)
    wide = LD if ref.dtype == LD else np.float64
    ref = ref.astype(wide)
    got_wide = got.astype(wide)
    finite = np.isfinite(ref) & (np.abs(ref) <= wide(info.max))
    _, exponent = np.frexp(np.where(finite & (ref != 0), ref, 1))
    # ulp = 2^(exponent - 1 - mantissa bits), at least the smallest subnormal
    exponent = np.maximum(exponent - 1, info.minexp) - info.nmant
    ulp = np.ldexp(np.ones_like(ref), exponent.astype(np.int32))
    with np.errstate(all="ignore"):
        errors = np.where(finite, np.abs(got_wide - ref) / ulp, 0.0).astype(np.float64)
    with np.errstate(over="ignore"):
        rounded = ref.astype(dtype)
    special_ok = (got == rounded) | (np.isnan(got) & np.isnan(rounded))
    errors = np.where(finite, errors, np.where(special_ok, 0.0, np.inf))
    errors[np.isnan(got) != np.isnan(ref)] = np.inf
    return errors


def random_inputs(name, dtype, rng, n=1 << 16):
    big = np.finfo(dtype).max
    if name == "log":
        exponents = rng.uniform(np.log2(np.finfo(dtype).smallest_subnormal), np.log2(big), n)
        with np.errstate(over="ignore"):
            x = np.exp2(exponents) * rng.uniform(1, 2, n)
        x = np.concatenate([x, rng.uniform(0.5, 2.0, n)])  # around 1, where log is small
        return [np.minimum(x, big).astype(dtype)]
    if name == "tanh":
        x = np.concatenate([rng.uniform(-25, 25, n), rng.uniform(-1, 1, n) * 10.0 ** rng.uniform(-12, 0, n)])
        return [x.astype(dtype)]
    if name == "sigmoid":
        limit = 120 if dtype != "float64" else 760
        return [np.concatenate([rng.uniform(-limit, limit, n), rng.uniform(-10, 10, n)]).astype(dtype)]
    if name == "exp":
        limit = 100 if dtype != "float64" else 740
        return [np.concatenate([rng.uniform(-limit, limit, n), rng.uniform(-1, 1, n)]).astype(dtype)]
    if name == "pow":
        a = np.exp2(rng.uniform(-30, 30, n)) if dtype != "float16" else np.exp2(rng.uniform(-6, 6, n))
        b = rng.uniform(-4, 4, n)
        signs = rng.choice([-1.0, 1.0], n)
        integral = rng.integers(-9, 10, n).astype(np.float64)
        a2 = rng.uniform(0.1, 4, n) * signs  # negative bases with integer exponents
        return [np.concatenate([a, a2]).astype(dtype), np.concatenate([b, integral]).astype(dtype)]
    raise AssertionError(name)


def edge_inputs(name, dtype):
    info = np.finfo(dtype)
    tiny, sub = info.tiny, info.smallest_subnormal
    values = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, sub, -sub, tiny, -tiny, tiny / 3,
              info.max, -info.max, 1.0, -1.0, 0.5, 2.0, info.eps, 1 - info.eps / 2, 1 + info.eps]
    if name == "sigmoid":
        values += [-87.0, -87.5, -88.0, -88.7, -89.0, -103.0, -104.0, -150.0, -708.0, -708.5,
                   -709.0, -745.0, -746.0, 87.0, 89.0, 20.0, 40.0, -40.0]
    if name == "tanh":
        values += [9.0, 9.1, 10.0, 19.0, 20.0, 22.0, -22.0, 0.55, -0.55, 1e-8, -1e-8]
    if name == "exp":
        values += [88.7, 89.0, -103.0, -104.0, -150.0, 709.7, 710.0, -708.0, -745.0, -746.0]
    return [np.array(values, dtype=np.float64).astype(dtype)]


POW_EDGES = [(-1.0, np.inf), (-1.0, -np.inf), (1.0, np.nan), (np.nan, 0.0), (0.0, -1.0),
             (-0.0, -1.0), (0.0, -2.0), (-0.0, -3.0), (-0.0, 3.0), (-0.0, 0.5), (-8.0, 1.0 / 3),
             (-2.0, 3.0), (-2.0, 2.0), (-2.0, -3.0), (2.0, 0.5), (np.inf, -0.5), (np.inf, 2.0),
             (-np.inf, 3.0), (-np.inf, 2.0), (-np.inf, -3.0), (-np.inf, -2.0), (0.5, np.inf),
             (0.5, -np.inf), (2.0, np.inf), (2.0, -np.inf), (np.nan, 1.0), (1.0, np.inf),
             (-0.5, np.inf), (-3.0, 0.5), (10.0, 400.0), (10.0, -400.0), (2.0, -1074.0),
             (2.0, -1080.0), (2.0, -149.0), (2.0, -152.0), (-1.0, 1e20), (-1.0, 1e20 + 1),
             (7.0, 0.0), (7.0, -0.0), (1e300, 2.0), (-2.0, 1e10)]


def edge_pow(dtype):
    a, b = zip(*POW_EDGES)
    return [np.array(a).astype(dtype), np.array(b).astype(dtype)]


FUNCTIONS = ["log", "tanh", "sigmoid", "pow", "exp"]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_random_values_within_the_documented_ulps(name, dtype):
    rng = np.random.default_rng(1234)
    args = random_inputs(name, dtype, rng)
    got = run(name, args)
    errors = ulp_errors(got, reference(name, args), dtype)
    worst = int(np.argmax(errors))
    assert errors[worst] <= BOUNDS[(name, dtype)], (
        f"{name} {dtype}: {errors[worst]:.2f} ulp at {[a[worst] for a in args]}: got "
        f"{got[worst]!r}, reference {reference(name, [a[worst:worst + 1] for a in args])[0]!r}; "
        f"bound {BOUNDS[(name, dtype)]} ulp")


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_edge_values(name, dtype):
    """Where the reference is NaN, an infinity or exactly zero (C99's special cases: log(0),
    tanh(-0.0), pow(-0.0, -3), ...), exactly that, the sign included; finite results within
    the bound (sigmoid's tiny results included, which 1 / (1 + exp(-x)) would flush to 0)."""
    args = edge_pow(dtype) if name == "pow" else edge_inputs(name, dtype)
    got = run(name, args)
    ref = reference(name, args)
    for k in range(got.size):
        g, r = got[k], ref[k]
        where = f"{name}{tuple(a[k] for a in args)} {dtype}: got {g!r}, reference {r!r}"
        if np.isnan(r):
            assert np.isnan(g), where
        elif np.isinf(r) or r == 0:
            assert g == r and np.signbit(g) == np.signbit(r), where
    errors = ulp_errors(got, ref, dtype)
    worst = int(np.argmax(errors))
    assert errors[worst] <= BOUNDS[(name, dtype)], (
        f"{name} {dtype} edge value {[a[worst] for a in args]}: {errors[worst]:.2f} ulp, got {got[worst]!r}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sqrt_and_div_are_correctly_rounded(dtype):
    rng = np.random.default_rng(3)
    x = np.concatenate([np.exp2(rng.uniform(-140, 120, 1 << 15)), [0.0, -0.0, np.inf, -1.0, np.nan,
                                                                      np.finfo(dtype).smallest_subnormal]]).astype(dtype)
    y = rng.uniform(-3, 3, x.size).astype(dtype)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(run("sqrt", [x]), np.sqrt(x))
        np.testing.assert_array_equal(run("div", [x, y]), x / y)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("name", ["log", "tanh", "sigmoid", "pow", "sqrt"])
def test_a_result_does_not_depend_on_where_its_element_is(name, dtype):
    """The vector body, the staged tail of a run, a strided or reversed run and another
    offset give the same bits for the same input."""
    rng = np.random.default_rng(9)
    n = 100003  # several parallel chunks and a tail that is no whole vector
    positive = name in ("log", "sqrt", "pow")
    base = rng.uniform(0.1 if positive else -30, 30, n).astype(dtype)
    other = rng.uniform(-3, 3, n).astype(dtype)
    args = [base, other] if name == "pow" else [base]
    whole = run(name, args)
    shifted = run(name, [a[7:] for a in args])
    np.testing.assert_array_equal(shifted, whole[7:])
    strided = run(name, [a[::3] for a in args])
    np.testing.assert_array_equal(strided, whole[::3])
    reversed_ = run(name, [a[::-1] for a in args])
    np.testing.assert_array_equal(reversed_, whole[::-1])
    for k in (0, 1, 15, 17, n - 1):  # single elements: all staged
        np.testing.assert_array_equal(run(name, [a[k:k + 1] for a in args]), whole[k:k + 1])
