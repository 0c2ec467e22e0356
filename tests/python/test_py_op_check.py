"""dlop.check and python -m dlop.check_module on dlop.Op ops (ops written in Python): the correct
op passes, and each broken op of py_op_check_cases.py fails the check that covers it, naming op,
check, device, dtype, shape and the first differing elements."""
import os
import subprocess
import sys

import pytest

import dlop

sys.path.insert(0, os.path.dirname(__file__))
import py_op_check_cases as cases  # noqa: E402


def failures(op, **kwargs):
    report = dlop.check(op, device="cpu", raise_on_failure=False, **kwargs)
    assert not report.passed, report.output
    return report


def failed_checks(report):
    return {line.split(":")[4] for line in report.output.splitlines() if ":F:" in line or ":E:" in line}


def test_a_correct_op_passes_as_an_instance_and_as_its_registered_op():
    report = dlop.check(cases.DoubleOp(), device="cpu", reference=lambda x: 2 * x)
    assert report.passed, report.output
    assert "make_node accepted float32, float64 " in report.output
    assert report.compared == ["cpu float32", "cpu float64"]
    assert "Failures: 0, Errors: 0" in report.output
    cases.DoubleOp()(dlop.asarray([1.0, 2.0]))
    assert dlop.check(dlop.ops.DoubleOp, device="cpu").passed


def test_only_the_dtypes_make_node_accepts_are_checked():
    report = dlop.check(cases.ScaleOp(3), device="cpu")
    assert report.passed, report.output
    assert ("make_node accepted int8, int16, int32, int64, uint8, float16, float32, float64"
            in report.output)
    assert ":cpu bool:" not in report.output


def test_a_shape_rule_the_real_run_disagrees_with_fails_infer_shape_agrees():
    report = failures(cases.WrongShapeOp())
    assert "infer_shape_agrees" in failed_checks(report)
    line = next(f for f in report.failures if "check infer_shape_agrees" in f)
    assert "op WrongShapeOp" in line and "cpu float32" in line and "shape (0,)" in line
    assert "perform gives output 0 shape (0,), but infer_shape says (1,)" in line


def test_nan_in_part_of_the_output_fails_the_reference():
    report = failures(cases.NanPartOp(), reference=lambda x: 2 * x)
    line = next(f for f in report.failures if "check reference" in f)
    assert "op NanPartOp" in line and "cpu float32" in line and "[0] expected" in line
    assert "got nan" in line


def test_a_perform_writing_its_input_fails_inputs_untouched():
    report = failures(cases.WritesInputOp())
    assert failed_checks(report) == {"inputs_untouched"}, report.output
    line = report.failures[0]
    assert "op WritesInputOp, check inputs_untouched, cpu float32, shape ()" in line
    assert "the run changed input 0: [] (flat index 0) went from" in line and "to 0.0" in line


def test_nondeterministic_results_fail_deterministic_run_to_run():
    report = failures(cases.NoisyOp())
    assert "deterministic_run_to_run" in failed_checks(report), report.output
    line = next(f for f in report.failures if "check deterministic_run_to_run" in f)
    assert "op NoisyOp" in line and "cpu float32, shape (7,)" in line
    assert "two runs on the same inputs differ" in line and "[0] expected" in line


def test_a_crash_fails_the_running_check_and_the_others_go_on():
    report = failures(cases.CrashOp())
    errors = [line for line in report.output.splitlines() if ":E:" in line]
    # In the sanitizer tree ASan catches the SEGV and ends the process with status 1 instead
    crashed = ("AddressSanitizer: SEGV" if os.environ.get("DLOP_SANITIZED_TREE") == "1"
               else "signal")
    assert errors and all(crashed in line for line in errors), report.output
    assert any("op CrashOp, check infer_shape_agrees, cpu float32" in line for line in errors)
    # The checks after the crash ran in a new process: strided_inputs crashes too on (7,).
    assert "strided_inputs" in failed_checks(report)


def test_bad_arguments_and_ops_the_checks_cannot_import_are_refused():
    with pytest.raises(dlop.InvalidArgumentError, match="device must be"):
        dlop.check(cases.DoubleOp(), device="gpu")

    class Local(cases.DoubleOp):
        pass

    with pytest.raises(dlop.UnsupportedError, match="inside a function.*module level"):
        dlop.check(Local())


def test_check_module_checks_the_ops_a_file_defines(tmp_path):
    module = tmp_path / "my_py_ops.py"
    module.write_text(
        "import dlop, numpy as np\n"
        "class Triple(dlop.Op):\n"
        "    def make_node(self, x):\n"
        "        if x.dtype != 'float64':\n"
        "            raise dlop.DlopTypeError('float64 only')\n"
        "        return dlop.Apply(self, [x], [x.type()])\n"
        "    def perform(self, node, inputs, out):\n"
        "        out[0][0] = inputs[0] * 3\n"
        "class Wrong(Triple):\n"
        "    def perform(self, node, inputs, out):\n"
        "        out[0][0] = inputs[0] * 3 + 1\n"
        "DLOP_REFERENCES = {'Triple': lambda x: 3 * x, 'Wrong': lambda x: 3 * x}\n")
    done = subprocess.run([sys.executable, "-m", "dlop.check_module", str(module), "--device", "cpu"],
                          capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "PASS op Triple" in done.stdout and "FAIL op Wrong" in done.stdout
    assert "check reference" in done.stdout and "cpu float64" in done.stdout
