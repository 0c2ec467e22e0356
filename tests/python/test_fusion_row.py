"""test_fusion_row.py — row groups on the CPU: the cases of fusion_row_cases.py (softmax,
log-softmax, a layer norm; every float dtype; row lengths, long, NaN, strided rows; several
outputs; explain) with the generated C kernel, fused against fuse=False."""
import pytest

from fusion_row_cases import *  # noqa: F401,F403 - the shared tests


@pytest.fixture
def device():
    return "cpu"
