"""test_testing.py — dlop.testing.check_values: an op's values against a NumPy reference on every
declared dtype (dlop check's values_match_reference from Python): right references pass, a
wrong one or a wrong dtype path fails naming op, device, dtype, shape and the first elements."""
import os

import numpy as np
import pytest

import dlop

FIXTURES = os.path.join(os.environ.get("DLOP_BUILD_DIR", ""), "tests", "compliance", "fixtures")


def declared_cases(op):
    """What check_values compares by default: every CPU dtype, and every CUDA one with a GPU."""
    devices = ["cpu"] + (["cuda"] if dlop.cuda_device_count() > 0 else [])
    return [f"{device} {d}" for device in devices for d in op.dtypes.get(device, [])]


def test_right_references_pass_on_every_declared_dtype():
    assert dlop.testing.check_values("add", reference=lambda a, b: a + b) == declared_cases(dlop.ops.add)
    # where: the bool condition is found the way dlop check finds it (one input bool)
    assert "cpu bool" in dlop.testing.check_values("where", reference=np.where)
    # float16 and bfloat16 round exp's results: compared within their tolerance, not bit for bit
    assert "cpu bfloat16" in dlop.testing.check_values("exp", reference=np.exp)
    dlop.testing.check_values(
        "sum", params={"axes": (1,)}, shapes=[(2, 3, 5)],
        reference=lambda x, axes=(), keepdims=False: x.sum(
            axis=tuple(axes), keepdims=keepdims, dtype=np.int64 if x.dtype.kind in "iub" else x.dtype))
    assert dlop.testing.check_values("matmul", reference=np.matmul, shapes=[((5, 3), (3, 7))]) == \
        declared_cases(dlop.ops.matmul)


def test_integer_results_are_compared_modulo_their_width():
    # uint8 0 - 8 is 248: NumPy's uint8 arithmetic, and the op's, wrap alike
    dlop.testing.check_values("sub", reference=lambda a, b: a - b, dtypes=["uint8"])
    # a reference's int64 result is converted to int8 modulo 2**8: 256 more is the same int8
    dlop.testing.check_values("mul", reference=lambda a, b: a.astype(np.int64) * b + 256,
                              dtypes=["int8"])
    with pytest.raises(AssertionError, match=r"expected -?\d+, got"):
        dlop.testing.check_values("mul", reference=lambda a, b: a.astype(np.int64) * b + 255,
                                  dtypes=["int8"])


def test_a_wrong_reference_fails_naming_where():
    with pytest.raises(AssertionError) as info:
        dlop.testing.check_values("add", reference=lambda a, b: a - b, dtypes=["int32"],
                                  shapes=[(7,)])
    message = str(info.value)
    assert message.startswith("op add, check values_match_reference (dlop.testing), cpu int32, "
                              "shape (7): int32 results disagree with the NumPy reference")
    assert "elements of output 0 (int32) differ (compared exactly, modulo 2**bits" in message
    assert "expected" in message and "got" in message and "(inputs at element" in message


def test_a_float_reference_is_held_to_the_dtype_tolerance():
    # a reference off by one part in 1e4: within bfloat16's tolerance, beyond float32's
    off = lambda x: np.exp(x) * (1 + 1e-4)
    dlop.testing.check_values("exp", reference=off, dtypes=["bfloat16"])
    with pytest.raises(AssertionError, match=r"cpu float32, shape \(7\): .*rounded to float32, "
                                             r"within float32's tolerance"):
        dlop.testing.check_values("exp", reference=off, dtypes=["float32"], shapes=[(7,)])


def test_bad_arguments_are_dlop_errors():
    with pytest.raises(dlop.InvalidArgumentError, match="does not declare bool on cpu"):
        dlop.testing.check_values("exp", reference=np.exp, dtypes=["bool"])
    with pytest.raises(dlop.InvalidArgumentError, match="gives 1 input shapes, the op takes 2"):
        dlop.testing.check_values("add", reference=np.add, shapes=[((3,),)])
    with pytest.raises(dlop.NotFoundError):
        dlop.testing.check_values("no_such_op", reference=np.add)


def test_the_garbage_int32_path_fails_as_dlop_check_says():
    path = os.path.join(FIXTURES, "int32_garbage.so")
    if not os.path.exists(path):
        pytest.skip(f"{path} not built (the compliance fixtures need Check)")
    dlop.load_plugin(path)
    twice = dlop.ops.fixture_twice
    assert dlop.testing.check_values(twice, reference=lambda x: 2 * x, dtypes=["float32"]) == [
        "cpu float32"]
    with pytest.raises(AssertionError, match=r"op fixture_twice, check values_match_reference "
                                             r"\(dlop\.testing\), cpu int32, shape \(\): int32 "
                                             r"results disagree"):
        dlop.testing.check_values(twice, reference=lambda x: 2 * x)


class HalfOf(dlop.Op):
    """A dlop.Op taking float32 and float64 only (it declares every dtype, as Python ops do)."""
    __props__ = ()

    def make_node(self, x):
        if x.dtype not in ("float32", "float64"):
            raise dlop.DlopTypeError(f"HalfOf takes float32 or float64, not {x.dtype}")
        return dlop.Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0] / 2


def test_a_dlop_op_is_checked_on_the_dtypes_its_make_node_takes():
    expected = ["cpu float32", "cpu float64"]  # its CPU is perform: no CUDA declared
    # The instance (not called before: check_values registers it), then its registered op.
    assert dlop.testing.check_values(HalfOf(), reference=lambda x: x / 2) == expected
    assert dlop.testing.check_values(dlop.ops.HalfOf, reference=lambda x: x / 2) == expected
    with pytest.raises(AssertionError, match="op HalfOf, check values_match_reference "
                                             r"\(dlop.testing\), cpu float32"):
        dlop.testing.check_values(HalfOf(), reference=lambda x: x / 3)
    # Asked for explicitly, a dtype make_node refuses is the op's own error.
    with pytest.raises(dlop.DlopTypeError, match="HalfOf takes float32 or float64, not int32"):
        dlop.testing.check_values(HalfOf(), reference=lambda x: x / 2, dtypes=["int32"])


def test_a_dlop_op_whose_make_node_takes_no_case_is_refused():
    class Matrices(HalfOf):
        def make_node(self, x):
            if x.ndim != 2:
                raise dlop.ShapeError("Matrices takes matrices")
            return super().make_node(x)
    with pytest.raises(dlop.InvalidArgumentError, match=r"Matrices.make_node takes none of the "
                                                        r"cases' shapes \(shape \(\), shape \(7\)"):
        dlop.testing.check_values(Matrices(), reference=lambda x: x / 2)
    assert dlop.testing.check_values(Matrices(), reference=lambda x: x / 2,
                                     shapes=[(2, 3)]) == ["cpu float32", "cpu float64"]
