"""test_source_module.py — dlop.SourceModule where there is no GPU (CI: NVRTC, no driver):
compiling for an architecture given explicitly (a cubin, cached: a compile, then a memory hit,
then a disk hit in a fresh process), compile errors carrying NVRTC's log on the source's own line
numbers (wrapped in extern "C" or not), the kernel signatures read from the source, and the
argument errors a kernel raises before anything is launched. Launches are in
test_gpu_source_module.py."""
import json
import os
import subprocess
import sys
import uuid

import numpy as np
import pytest

import dlop
from dlop import _C
from dlop._source_module import parse_kernel_signature, type_codes

MULTIPLY_THEM = r'''
__global__ void multiply_them(float *dest, const float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) dest[i] = a[i] * b[i];
}'''


def nvrtc_missing_reason():
    try:
        dlop.SourceModule("__global__ void k() {}", arch="sm_90")
    except dlop.NotFoundError as error:
        return str(error)
    return None


@pytest.fixture(scope="module", autouse=True)
def need_nvrtc():
    reason = nvrtc_missing_reason()
    if reason is not None:
        pytest.skip(f"NVRTC is not available: {reason}")


def gpu_present() -> bool:
    return dlop.cuda_device_count() > 0


def unique(source: str) -> str:
    """source with a comment no other run has, so the disk cache cannot already hold it."""
    return f"// {uuid.uuid4().hex}\n{source}"


def run_python(code: str, **env) -> dict:
    environment = dict(os.environ, DLOP_PLUGIN_PATH="")
    environment.update(env)
    result = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


# ---- compiling without a GPU -------------------------------------------------------------

def test_compiles_a_cubin_for_the_architecture_given():
    module = dlop.SourceModule(MULTIPLY_THEM, arch="sm_90")
    assert module.arch == "sm_90"
    assert module.is_ptx is False
    assert module.image[:4] == b"\x7fELF"  # a cubin is an ELF file
    assert b"multiply_them" in module.image  # extern "C": the name is not mangled
    assert dlop.SourceModule(MULTIPLY_THEM, arch=90).arch == "sm_90"


def test_no_extern_c_leaves_cxx_names_mangled():
    module = dlop.SourceModule(MULTIPLY_THEM, arch="sm_90", no_extern_c=True)
    assert b"_Z13multiply_themPfPKfS1_i" in module.image


def test_options_reach_nvrtc():
    source = "__global__ void k(int *out) { *out = N; }"
    with pytest.raises(dlop.CompileError):
        dlop.SourceModule(source, arch="sm_90")  # N is undeclared
    assert dlop.SourceModule(source, arch="sm_90", options=["-DN=4"]).image[:4] == b"\x7fELF"


def test_architecture_options_are_refused():
    with pytest.raises(dlop.InvalidArgumentError, match="names the architecture"):
        dlop.SourceModule(MULTIPLY_THEM, arch="sm_90", options=["-arch=sm_80"])


@pytest.mark.parametrize("arch", ["sm_90a", "hopper", 5, True])
def test_bad_architectures_are_refused(arch):
    with pytest.raises(dlop.DlopError, match="arch="):
        dlop.SourceModule(MULTIPLY_THEM, arch=arch)


def test_without_arch_and_without_gpu_the_error_names_the_driver():
    if gpu_present():
        pytest.skip("a GPU is present: the device's architecture is used")
    with pytest.raises(dlop.NoDeviceError) as error:
        dlop.SourceModule(MULTIPLY_THEM)
    message = str(error.value)
    assert "libcuda" in message or "driver" in message or "GPU" in message, message
    assert "arch='sm_90'" in message


def test_options_must_be_a_list():
    with pytest.raises(TypeError, match="list of str"):
        dlop.SourceModule(MULTIPLY_THEM, arch="sm_90", options="-DN=4")


# ---- compile errors ------------------------------------------------------------------------

BROKEN = """__global__ void broken(float *x) {
  int i = threadIdx.x;
  x[i] = undeclared_name;
}"""


@pytest.mark.parametrize("no_extern_c", [False, True])
def test_compile_errors_carry_the_log_on_the_sources_lines(no_extern_c):
    with pytest.raises(dlop.CompileError) as error:
        dlop.SourceModule(unique(BROKEN), arch="sm_90", no_extern_c=no_extern_c)
    # unique() put one comment line first: the error is on line 4 of the source as given
    assert "dlop_jit.cu(4): error" in error.value.log, error.value.log
    assert "undeclared_name" in error.value.log
    assert error.value.log in str(error.value)
    assert isinstance(error.value, dlop.InvalidArgumentError)
    assert error.value.status == "DLOP_INVALID_ARGUMENT"


def test_compile_errors_are_counted():
    before = dlop.jit_stats()
    with pytest.raises(dlop.CompileError):
        dlop.SourceModule(unique(BROKEN), arch="sm_90")
    after = dlop.jit_stats()
    assert after["compile_errors"] == before["compile_errors"] + 1
    assert after["compiles"] == before["compiles"] + 1


# ---- the cache -----------------------------------------------------------------------------

CACHE_RUN = """
import json, sys
import dlop
source = sys.argv[1] if len(sys.argv) > 1 else {source!r}
def counts():
    s = dlop.jit_stats()
    return [s["compiles"], s["memory_hits"], s["disk_hits"]]
first = counts()
dlop.SourceModule(source, arch="sm_90")
second = counts()
dlop.SourceModule(source, arch="sm_90")
third = counts()
print(json.dumps([first, second, third]))
"""


def test_cache_compiles_once_then_hits_memory_then_disk(tmp_path):
    code = CACHE_RUN.format(source=unique(MULTIPLY_THEM))
    first, second, third = run_python(code, DLOP_CACHE_DIR=str(tmp_path))
    assert [b - a for a, b in zip(first, second)] == [1, 0, 0]  # compiled
    assert [b - a for a, b in zip(second, third)] == [0, 1, 0]  # from memory
    first, second, third = run_python(code, DLOP_CACHE_DIR=str(tmp_path))
    assert [b - a for a, b in zip(first, second)] == [0, 0, 1]  # a new process: from disk
    assert [b - a for a, b in zip(second, third)] == [0, 1, 0]
    assert list((tmp_path / "jit").glob("*.cubin"))


RECORD_RUN = """
import json
import dlop
module = dlop.SourceModule({source!r}, arch="sm_90")
s = dlop.jit_stats()
print(json.dumps({{"compiles": s["compiles"], "disk_hits": s["disk_hits"],
                  "nvrtc_loaded": "libnvrtc" in open("/proc/self/maps").read(),
                  "cubin": module.image[:4] == b"\\x7fELF"}}))
"""


def nvrtc_record(cache):
    records = list((cache / "compilers").glob("*.nvrtc"))
    assert len(records) == 1, records
    return records[0]


def test_a_disk_hit_does_not_load_nvrtc(tmp_path):
    # The first process loads NVRTC, compiles and records which NVRTC it loaded; the next one
    # finds its entry by that record and never loads the 110 MB library.
    code = RECORD_RUN.format(source=unique(MULTIPLY_THEM))
    cold = run_python(code, DLOP_CACHE_DIR=str(tmp_path))
    assert (cold["compiles"], cold["disk_hits"], cold["nvrtc_loaded"]) == (1, 0, True)
    lines = nvrtc_record(tmp_path).read_text().splitlines()
    assert lines[0] == "dlop nvrtc record 1" and lines[3].startswith("NVRTC ") and lines[-1] == "end"
    assert os.path.samefile(lines[1], lines[1]) and "90" in lines[4].split()[1:]
    warm = run_python(code, DLOP_CACHE_DIR=str(tmp_path))
    assert (warm["compiles"], warm["disk_hits"], warm["nvrtc_loaded"], warm["cubin"]) == (0, 1, False, True)


@pytest.mark.parametrize("damage", ["library changed", "wrong version", "garbage", "truncated"])
def test_a_stale_or_damaged_record_loads_nvrtc_and_is_replaced(tmp_path, damage):
    code = RECORD_RUN.format(source=unique(MULTIPLY_THEM))
    run_python(code, DLOP_CACHE_DIR=str(tmp_path))
    record = nvrtc_record(tmp_path)
    good = record.read_text()
    lines = good.splitlines(keepends=True)
    if damage == "library changed":  # another file (or the same one rewritten) at that path
        lines[2] = "1 2 3 4.000000000\n"
    elif damage == "wrong version":  # a record that lies about the very file it names
        lines[3] = "NVRTC 99.9\n"
    record.write_text({"garbage": "not a record\n", "truncated": good[:len(good) // 2]}.get(
        damage, "".join(lines)))
    again = run_python(code, DLOP_CACHE_DIR=str(tmp_path))
    # NVRTC loaded, the entry the first process wrote found (no compile), the record the truth again
    assert (again["compiles"], again["disk_hits"], again["nvrtc_loaded"]) == (0, 1, True)
    assert nvrtc_record(tmp_path).read_text() == good
    assert run_python(code, DLOP_CACHE_DIR=str(tmp_path))["nvrtc_loaded"] is False


def test_a_process_with_nvrtc_loaded_already_neither_reads_nor_writes_a_record(tmp_path):
    # Another library (PyTorch's or CuPy's wheel) loaded a libnvrtc first: dlopen returns that
    # copy, so what a record says of the loader's choice does not hold in this process.
    code = RECORD_RUN.format(source=unique(MULTIPLY_THEM))
    run_python(code, DLOP_CACHE_DIR=str(tmp_path))
    record = nvrtc_record(tmp_path)
    library = record.read_text().splitlines()[1]
    record.unlink()
    preloaded = f"import ctypes\nctypes.CDLL({library!r})\n" + code
    again = run_python(preloaded, DLOP_CACHE_DIR=str(tmp_path))
    assert (again["compiles"], again["disk_hits"]) == (0, 1)
    assert not list((tmp_path / "compilers").glob("*.nvrtc"))  # not written


def test_different_options_are_different_entries():
    source = unique("__global__ void k(int *out) { *out = N; }")
    before = dlop.jit_stats()["compiles"]
    a = dlop.SourceModule(source, arch="sm_90", options=["-DN=1"])
    b = dlop.SourceModule(source, arch="sm_90", options=["-DN=2"])
    assert dlop.jit_stats()["compiles"] == before + 2
    assert a.image != b.image


# ---- signatures ----------------------------------------------------------------------------

SIGNATURES = r'''
// __global__ void multiply_them(int decoy) in a comment is not the declaration
#define BLOCK 256
__global__ void multiply_them(float *dest, const float *a, const float * __restrict__ b, int n) {}
extern "C" __global__ void __launch_bounds__(256) scalars(unsigned n, unsigned long long m,
    size_t s, double x, const int values[], float **pp, signed char c, bool flag, short h) {}
__global__ void none(void) {}
struct Pair { int a, b; };
__global__ void by_value(Pair p, int n) {}
template <typename T> __global__ void generic(T *x) {}
'''


def test_signature_of_multiply_them():
    params, why = parse_kernel_signature(SIGNATURES, "multiply_them")
    assert why is None
    assert [p[2] for p in params] == list("PPPi")
    assert [p[1] for p in params] == ["dest", "a", "b", "n"]
    assert params[1][0] == "const float *"


def test_signature_of_scalars_and_pointers():
    params, why = parse_kernel_signature(SIGNATURES, "scalars")
    assert why is None
    assert "".join(p[2] for p in params) == "IQQdPPb?h"
    assert [p[1] for p in params] == ["n", "m", "s", "x", "values", "pp", "c", "flag", "h"]


def test_signature_without_parameters():
    assert parse_kernel_signature(SIGNATURES, "none") == ([], None)


@pytest.mark.parametrize("name, reason", [
    ("by_value", "type 'Pair'"),
    ("generic", "template"),
    ("missing", "no __global__ declaration"),
])
def test_signatures_dlop_cannot_read_say_why(name, reason):
    params, why = parse_kernel_signature(SIGNATURES, name)
    assert params is None and reason in why, why


def test_declared_types():
    assert type_codes("PPPi")[0] == "PPPi"
    codes, names, types = type_codes(["float *", "const float *", "unsigned int", "double"])
    assert codes == "PPId" and types[1] == "const float *"
    with pytest.raises(TypeError, match="item 2"):
        type_codes(["float *", "Pair"])


# ---- argument errors before any launch ----------------------------------------------------
# A kernel object over a function handle that is never launched: every call here fails while its
# arguments are packed, before libdlop is asked to launch anything.

def fake_kernel(codes="PPPi", names=("dest", "a", "b", "n"),
                types=("float *", "const float *", "const float *", "int")):
    return _C.CudaKernel(None, 1, 0, "multiply_them", codes, names, types, "")


def test_wrong_number_of_arguments():
    with pytest.raises(TypeError, match=r"takes 4 arguments \(float \*, const float \*, const "
                                        r"float \*, int\), got 3"):
        fake_kernel()(None, None, None, block=(256, 1, 1))


def test_block_is_required():
    with pytest.raises(TypeError, match="block= is required"):
        fake_kernel()(None, None, None, 4)


@pytest.mark.parametrize("block, error", [((0, 1, 1), "block="), ((1, 2, 3, 4), "1 to 3"),
                                          ("x", "tuple"), ((2**32, 1), "block=")])
def test_bad_blocks(block, error):
    with pytest.raises(dlop.DlopError if error == "block=" else (TypeError, ValueError),
                       match=error):
        fake_kernel()(None, None, None, 4, block=block)


def test_unknown_keyword():
    with pytest.raises(TypeError, match="unknown keyword argument 'threads'"):
        fake_kernel()(None, None, None, 4, block=(1,), threads=4)


def test_integer_overflow_is_an_error_not_a_truncation():
    with pytest.raises(OverflowError, match=r"argument 4 'n' \(int\) cannot hold 1099511627776"):
        fake_kernel()(None, None, None, 2**40, block=(256, 1, 1))
    with pytest.raises(OverflowError):
        fake_kernel()(None, None, None, -2**31 - 1, block=(256, 1, 1))


@pytest.mark.parametrize("code, value", [("I", -1), ("B", 256), ("b", 128), ("h", 2**15),
                                         ("Q", 2**64), ("q", 2**63), ("?", 2)])
def test_every_integer_type_is_range_checked(code, value):
    kernel = _C.CudaKernel(None, 1, 0, "k", code, ("v",), ("t",), "")
    with pytest.raises(OverflowError, match="argument 1 'v'"):
        kernel(value, block=(1,))


def test_float_out_of_float_range():
    kernel = _C.CudaKernel(None, 1, 0, "k", "f", ("x",), ("float",), "")
    with pytest.raises(OverflowError, match="float's range"):
        kernel(1e39, block=(1,))


def test_a_float_for_an_int_is_a_type_error():
    with pytest.raises(TypeError, match=r"argument 4 'n' \(int\) takes an integer, not 2.5"):
        fake_kernel()(None, None, None, 2.5, block=(256, 1, 1))


def test_a_string_for_a_float_is_a_type_error():
    kernel = _C.CudaKernel(None, 1, 0, "k", "f", ("x",), ("float",), "")
    with pytest.raises(TypeError, match="takes a real number"):
        kernel("1.0", block=(1,))


def test_a_cpu_array_is_refused_naming_the_argument():
    with pytest.raises(dlop.DeviceMismatchError,
                       match=r"argument 2 'a' \(const float \*\) got .*numpy.ndarray.*host memory"):
        fake_kernel()(None, np.zeros(4, np.float32), None, 4, block=(4,))
    with pytest.raises(dlop.DeviceMismatchError, match="dlop.Array on the CPU"):
        fake_kernel()(None, dlop.asarray(np.zeros(4, np.float32)), None, 4, block=(4,))


def test_a_non_array_for_a_pointer_is_a_type_error():
    with pytest.raises(TypeError, match=r"argument 1 'dest' \(float \*\) takes a GPU array"):
        fake_kernel()(12345, None, None, 4, block=(4,))


def test_unknown_arguments_ask_for_a_declaration():
    kernel = _C.CudaKernel(None, 1, 0, "k", None, (), (), "parameter 1 'p' has type 'Pair'")
    assert kernel.arg_types is None
    with pytest.raises(TypeError, match=r"arguments are unknown \(parameter 1 'p' has type "
                                        r"'Pair'\): declare them"):
        kernel(1, block=(1,))


def test_bad_type_codes_are_refused():
    with pytest.raises(dlop.InvalidArgumentError, match="code 'x'"):
        _C.CudaKernel(None, 1, 0, "k", "Px", ("a", "b"), ("t", "t"), "")


def test_valid_arguments_without_a_gpu_fail_at_the_launch_naming_the_driver():
    if gpu_present():
        pytest.skip("a GPU is present (the fake function must never be launched)")
    kernel = _C.CudaKernel(None, 1, 0, "k", "if", ("n", "x"), ("int", "float"), "")
    with pytest.raises(dlop.NoDeviceError):
        kernel(3, 1.5, block=(1,), grid=(1, 1))
