"""test_source_elementwise.py — ops defined by dlop.elementwise, on the CPU: the device cases of
source_elementwise_cases.py (NumPy results per dtype, broadcasting, parameters, two outputs,
fusion with neighbours), and what only needs the host: the op in dlop.ops and the listings
(an in-process plugin), graphs of Variables, the compiler's errors against the body's lines,
bad definitions and bad calls, and redefinition."""
import numpy as np
import pytest

import dlop
from source_elementwise_cases import *  # noqa: F401,F403 - the shared tests
from source_elementwise_cases import softplus, sum_diff


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
