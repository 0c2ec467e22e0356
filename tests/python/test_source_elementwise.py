"""test_source_elementwise.py — ops defined by dlop.elementwise, on the CPU: the device cases of
source_elementwise_cases.py (NumPy results per dtype, broadcasting, parameters, two outputs,
fusion with neighbours), and what only needs the host: the op in dlop.ops and the listings
(an in-process plugin), graphs of Variables, the compiler's errors against the body's lines,
bad definitions and bad calls (after remembered eager calls too), redefinition, and the
remembered signatures: a bounded few, a NaN parameter once, safe across threads."""
import numpy as np
import pytest

import dlop
from source_elementwise_cases import *  # noqa: F401,F403 - the shared tests
from source_elementwise_cases import affine, affine_want, softplus, sum_diff


@pytest.fixture
def device():
    return "cpu"


def test_the_op_is_registered_like_a_plugins():
    assert dlop.ops.softplus is softplus and "softplus" in dir(dlop.ops)
    assert softplus.elementwise and softplus.num_inputs == 1 and softplus.num_outputs == 1
    assert softplus.dtypes == {"cpu": ["float16", "bfloat16", "float32", "float64"],
                               "cuda": ["float16", "bfloat16", "float32", "float64"]}
    plugin = next(p for p in dlop.plugins() if p.name == softplus.plugin)
    assert plugin.path == "in-process: dlop_define_elementwise softplus" and plugin.ops == ["softplus"]
    assert dlop.info("softplus")["plugin"] == softplus.plugin
    # the same definition again is the same op; numpy dtypes name dtypes too
    again = dlop.elementwise("softplus", "y = x > 20 ? x : log1p(exp(x))", inputs=["x"],
                             outputs="y", dtypes=(np.float16, "bfloat16", np.dtype("float32"), "float64"))
    assert again is softplus


def test_variables_build_typed_nodes():
    x = dlop.matrix("x", "float32")
    w = dlop.vector("w", "float32")
    s, d = sum_diff(x, w)
    assert (s.dtype, s.shape, d.dtype, d.shape) == ("float32", (None, None), "float32", (None, None))
    f = dlop.function([x, w], [s * 2, d])
    xs, ws = np.ones((2, 3), np.float32), np.arange(3, dtype=np.float32)
    got = f(xs, ws)
    np.testing.assert_array_equal(np.asarray(got[0]), 2 * (xs + ws))
    np.testing.assert_array_equal(np.asarray(got[1]), xs - ws)


def test_a_body_that_does_not_compile_shows_its_own_lines():
    body = "T twice = x * 2;\ny = twice +* 3;\ny = y + undefined_name"
    with pytest.raises(dlop.InvalidArgumentError) as raised:
        dlop.elementwise("src_broken", body, dtypes=("float32",))
    message = str(raised.value)
    assert message.startswith("src_broken: the body does not compile with the host's C compiler:")
    assert "src_broken (body):2:" in message and "    2 | y = twice +* 3;" in message
    assert "src_broken (body):3:" in message and "    3 | y = y + undefined_name" in message
    assert "dlop_fused" not in message  # the wrapper's own lines are left out
    assert "src_broken" not in dlop.ops  # nothing was registered: the name is still free
    fixed = dlop.elementwise("src_broken", "y = x * 2", dtypes=("float32",))
    np.testing.assert_array_equal(np.asarray(fixed(np.ones(3, np.float32))), [2, 2, 2])


@pytest.mark.parametrize("arguments, error, text", [
    (dict(name="1x", body="y = x"), dlop.InvalidArgumentError, "'1x' is not an identifier"),
    (dict(name="src_e1", body="  ;\n"), dlop.InvalidArgumentError, "the body is empty"),
    (dict(name="src_e2", body="y = x", outputs="y z"), dlop.InvalidArgumentError,
     "never names output 'z'"),
    (dict(name="src_e3", body="y = x", inputs="x x"), dlop.InvalidArgumentError,
     "the name 'x' is used twice"),
    (dict(name="src_e4", body="y = x", inputs="out0"), dlop.InvalidArgumentError,
     "'out0' is reserved"),
    (dict(name="src_e5", body="y = x", inputs="T"), dlop.InvalidArgumentError, "'T' is reserved"),
    (dict(name="src_e6", body="y = x", dtypes="bool"), dlop.InvalidArgumentError,
     "bool is not supported"),
    (dict(name="src_e7", body="y = x", dtypes="complex64"), dlop.InvalidArgumentError,
     "unknown dtype 'complex64'"),
    (dict(name="src_e8", body="y = x", params={"p": "1"}), dlop.DlopTypeError,
     "expected a float or an int"),
    (dict(name="src_e9", body="y = x", params={"y": 1.0}), dlop.InvalidArgumentError,
     "the name 'y' is used twice"),
    (dict(name="src_e10", body="y = x", inputs=""), dlop.InvalidArgumentError,
     "inputs is empty"),
    (dict(name="src_e11", body="y = x", inputs=" ".join(f"x{k}" for k in range(16))),
     dlop.InvalidArgumentError, "16 inputs and 1 outputs"),
    (dict(name="double", body="y = x"), dlop.DlopError, "already provided by"),
    (dict(name="softplus", body="y = x"), dlop.DlopError, "already defined from another source"),
])
def test_bad_definitions(arguments, error, text):
    with pytest.raises(error) as raised:
        dlop.elementwise(**arguments)
    assert text in str(raised.value)


def test_bad_calls():
    x32 = np.ones(4, np.float32)
    with pytest.raises(dlop.DlopTypeError, match="takes 2 input"):
        sum_diff(x32)
    with pytest.raises(dlop.DlopTypeError, match="x is float32 but w is float64"):
        sum_diff(x32, np.ones(4))
    with pytest.raises(dlop.DlopTypeError, match="input x has dtype int64, expected one of"):
        softplus(np.arange(3))
    with pytest.raises(dlop.ShapeError, match="cannot broadcast"):
        sum_diff(x32, np.ones(3, np.float32))
    with pytest.raises(dlop.NotFoundError, match="no parameter 'beta'"):
        softplus(x32, beta=1.0)


def test_negative_and_step_strides_of_numpy_views():
    xs = np.random.default_rng(8).uniform(-5, 5, (6, 10))
    for view in (xs[::-1], xs[:, ::2], xs[::-2, ::-3]):
        got = np.asarray(softplus(view).numpy())
        np.testing.assert_allclose(got, np.log1p(np.exp(view)), rtol=1e-13)


def test_bad_calls_after_remembered_ones():
    """A remembered signature checks nothing less: arity, parameter names and values, mixed
    inputs and Variables after good calls of the same arrays."""
    x = dlop.asarray(np.ones(4, np.float32))
    for _ in range(2):
        softplus(x)
        affine(x, alpha=2.0, k=3)
        affine(x, alpha=2.0, k=1)
    with pytest.raises(dlop.DlopTypeError, match="takes 1 input"):
        softplus(x, x)
    with pytest.raises(dlop.NotFoundError, match="no parameter 'beta'"):
        softplus(x, beta=1.0)
    with pytest.raises(dlop.NotFoundError, match="no parameter 'beta'"):
        affine(x, alpha=2.0, beta=3)
    with pytest.raises(dlop.DlopTypeError, match="'alpha'"):
        affine(x, alpha=True, k=3)  # a bool is not a float parameter's value
    with pytest.raises(dlop.DlopTypeError, match="'k'"):
        affine(x, alpha=2.0, k=3.0)  # nor a float an int's
    with pytest.raises(dlop.DlopTypeError, match="'k'"):
        affine(x, alpha=2.0, k=True)  # nor a bool, though True == 1
    with pytest.raises(dlop.InvalidArgumentError, match="'k'"):
        affine(x, alpha=2.0, k=2 ** 70)
    with pytest.raises(dlop.DlopTypeError, match="x is float32 but w is float64"):
        sum_diff(x, dlop.asarray(np.ones(4)))
    s, d = sum_diff(x, np.full(4, 2, np.float32))  # a NumPy input: the general path
    np.testing.assert_array_equal(s.numpy(), np.full(4, 3, np.float32))
    node = softplus(dlop.vector("v", "float32"))
    assert isinstance(node, dlop.Variable) and node.dtype == "float32"


def test_remembered_signatures_are_few_and_nan_is_one():
    """Repeated calls of one signature remember it once (a NaN parameter too, whose value never
    equals itself); many signatures keep a bounded number and stay right."""
    x = dlop.asarray(np.linspace(-1, 1, 5))
    calls = affine._calls
    affine(x, alpha=float("nan"), k=1)
    before = calls.remembered()
    for _ in range(3):
        assert np.isnan(affine(x, alpha=float("nan"), k=1).numpy()).all()
        affine(x, alpha=0.5, k=1)
    assert calls.remembered() == min(before + 1, 8)
    for i in range(20):
        np.testing.assert_allclose(affine(x, alpha=float(i), k=2).numpy(),
                                   i * x.numpy() + float(i) ** 2, rtol=1e-15)
    assert calls.remembered() == 8


def test_repeated_calls_on_threads():
    """Threads calling one op with their own dtypes and parameters each get their results."""
    import threading
    xs = np.linspace(-2, 2, 33)
    failures = []

    def work(dtype, alpha):
        x = dlop.asarray(xs.astype(dtype))
        want = affine_want(xs, alpha, 2, dtype)
        for _ in range(200):
            got = affine(x, alpha=alpha, k=2).numpy()
            if got.dtype != want.dtype or not np.array_equal(got, want):
                failures.append((dtype, alpha))
                return

    threads = [threading.Thread(target=work, args=(dtype, alpha))
               for dtype in ("float32", "float64") for alpha in (0.5, -1.25, 3.0)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
