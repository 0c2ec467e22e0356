"""grad_w_support.py — loads examples/grad_w.py as a module for test_grad_w.py and
test_grad_w_gpu.py (the example is the code under test), and the GPU skip rule the GPU tests
share: skip with dlop's reason without a usable GPU, fail when DLOP_REQUIRE_GPU=1."""
import importlib.util
import os
from pathlib import Path

import pytest

import dlop

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "grad_w.py"


def load_example():
    spec = importlib.util.spec_from_file_location("grad_w_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gpu_unusable_reason():
    try:
        dlop._C.device_check("cuda:0")
    except dlop.DlopError as error:
        return str(error) or type(error).__name__
    return None


def skip_or_fail(reason):
    """The rule for a test that needs the GPU and what reason says is missing ("no GPU usable:
    ..."; None: nothing is): skip with the reason, or fail when DLOP_REQUIRE_GPU=1."""
    if reason is None:
        return
    if os.environ.get("DLOP_REQUIRE_GPU") == "1":
        pytest.fail(f"DLOP_REQUIRE_GPU=1 but {reason}")
    pytest.skip(reason)


def require_gpu():
    reason = gpu_unusable_reason()
    skip_or_fail(None if reason is None else f"no GPU usable: {reason}")
