"""test_source_check.py — dlop.check on dlop.elementwise ops (the C suite through dlop-check
--elementwise, a NumPy reference through dlop.testing) and python -m dlop.check_module, on the
CPU: a correct op passes; a reference that disagrees fails naming op, dtype and the first
differing elements; an op the suite can see crash fails naming the check, dtype and shape."""
import os
import subprocess
import sys

import numpy as np
import pytest

import dlop


def test_a_correct_op_passes_with_its_reference():
    op = dlop.elementwise("check_scale", "y = x * (T)alpha", dtypes=("float32", "int32"),
                          params={"alpha": 3})
    report = dlop.check(op, reference=lambda x, alpha=3: x * alpha, device="cpu")
    assert report.passed and report.failures == []
    assert "cpu float32" in report.compared and "cpu int32" in report.compared
    assert "Checks:" in report.output and "Failures: 0, Errors: 0" in report.output


def test_a_disagreeing_reference_fails_naming_op_dtype_and_elements():
    op = dlop.elementwise("check_twice", "y = x * 2", dtypes=("int32",))
    with pytest.raises(dlop.CheckFailed) as caught:
        dlop.check(op, reference=lambda x: x * 3, device="cpu")
    report = caught.value.report
    assert not report.passed and len(report.failures) == 1
    line = report.failures[0]
    assert "op check_twice" in line and "cpu int32" in line and "check reference" in line
    assert "expected" in line and "got" in line  # the first differing elements
    # the suite's own checks passed: only the reference is named
    assert "Failures: 0, Errors: 0" in report.output


def test_a_crashing_op_fails_naming_check_dtype_and_shape():
    # integer division by zero traps on the CPU: the suite's inputs hold zeros
    op = dlop.elementwise("check_divide", "y = (T)100 / x", dtypes=("int32",))
    report = dlop.check(op, device="cpu", raise_on_failure=False)
    assert not report.passed
    assert any("op check_divide" in f and "cpu int32" in f and "shape (" in f
               and "signal 8" in f for f in report.failures), report.failures


def test_ops_not_from_source_and_bad_arguments_are_refused():
    with pytest.raises(dlop.UnsupportedError, match="not defined by dlop.elementwise.*dlop check PLUGIN.so"):
        dlop.check("add")
    op = dlop.elementwise("check_neg", "y = -x", dtypes=("float32",))
    with pytest.raises(dlop.InvalidArgumentError, match="device must be"):
        dlop.check(op, device="gpu")


def test_check_module_checks_every_op_a_file_defines(tmp_path):
    module = tmp_path / "my_ops.py"
    module.write_text(
        "import dlop\n"
        "good = dlop.elementwise('mod_good', 'y = x + 1', dtypes=('float32',))\n"
        "bad = dlop.elementwise('mod_bad', 'y = x + 2', dtypes=('float32',))\n"
        "DLOP_REFERENCES = {'mod_good': lambda x: x + 1, 'mod_bad': lambda x: x + 1}\n")
    done = subprocess.run([sys.executable, "-m", "dlop.check_module", str(module), "--device", "cpu"],
                          capture_output=True, text=True, env=dict(os.environ))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "PASS op mod_good" in done.stdout and "FAIL op mod_bad" in done.stdout
    empty = tmp_path / "none.py"
    empty.write_text("x = 1\n")
    done = subprocess.run([sys.executable, "-m", "dlop.check_module", str(empty)],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "defines no op" in done.stderr
