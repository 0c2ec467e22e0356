"""test_gpu_py_op_check.py — dlop.check on dlop.Op ops with a CUDA make_thunk: the correct op
passes on CUDA (every check, cuda_matches_cpu included), a kernel computing something else than
perform fails cuda_matches_cpu, and one leaving half its output unwritten fails
every_output_element_written, each naming op, check, device, dtype and elements. Skipped
without a GPU, a failure under DLOP_REQUIRE_GPU=1."""
import os
import sys

import pytest

import dlop
from grad_w_support import gpu_unusable_reason, skip_or_fail

sys.path.insert(0, os.path.dirname(__file__))
import py_op_check_cases as cases  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def gpu():
    reason = gpu_unusable_reason()
    skip_or_fail(None if reason is None else f"no GPU usable: {reason}")


def test_a_correct_cuda_op_passes_on_both_devices():
    report = dlop.check(cases.GpuDouble(), device="all", reference=lambda x: 2 * x)
    assert report.passed, report.output
    assert ":cuda:0 float32:" not in report.output and not report.skipped
    assert "cuda float32" in report.compared, report.compared


def test_cuda_results_other_than_the_cpu_fail_cuda_matches_cpu():
    report = dlop.check(cases.GpuTriple(), device="cuda", raise_on_failure=False)
    lines = [f for f in report.failures if "check cuda_matches_cpu" in f]
    assert lines, report.output
    assert "op GpuTriple" in lines[0] and "cuda:0 float32" in lines[0]
    assert "CUDA results (expected: the CPU thunk's) disagree" in lines[0] and "] expected" in lines[0]


def test_an_output_half_written_on_cuda_fails_every_output_element_written():
    report = dlop.check(cases.GpuHalfWritten(), device="cuda", raise_on_failure=False)
    lines = [f for f in report.failures if "check every_output_element_written" in f]
    assert lines, report.output
    assert "op GpuHalfWritten" in lines[0] and "cuda:0 float32" in lines[0]
    assert "were never written" in lines[0]
