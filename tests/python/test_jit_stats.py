"""test_jit_stats.py — dlop.jit_stats(): run-time compilation's counters from Python. The dict
has its keys and types and holds what libdlop's own dlop_jit_stats_get says (read through
ctypes from the libdlop this process loaded); cache_dir follows DLOP_CACHE_DIR (a directory,
None when empty, None with one warning when it cannot be made); and, on a GPU, a kernel
compiled through the host table's cuda_compile slot counts one compile, then a memory hit, then
in a fresh process a disk hit. Cases that depend on the environment run in a fresh `python -c`
(the cache directory is read once per process)."""
import ctypes
import json
import os
import pathlib
import subprocess
import sys

import pytest

import dlop

COUNTS = ("compiles", "compile_errors", "memory_hits", "disk_hits", "corrupt_entries")
TIMES = ("compile_seconds", "disk_hit_seconds")


class JitStats(ctypes.Structure):
    """dlop_jit_stats of dlop/runtime.h."""
    _fields_ = [("struct_size", ctypes.c_uint32), ("reserved", ctypes.c_uint32)] + [
        (name, ctypes.c_uint64) for name in COUNTS] + [(name, ctypes.c_double) for name in TIMES]


def loaded_libdlop() -> ctypes.CDLL:
    """The libdlop this process loaded with dlop._C (the same library, not another copy)."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "/libdlop.so" in line}
    assert len(paths) == 1, f"expected one libdlop mapped, found {paths}"
    return ctypes.CDLL(paths.pop())


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    environment = dict(os.environ, DLOP_PLUGIN_PATH="")
    environment.update(env)
    return subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True,
                          text=True, timeout=120)


def test_keys_and_types():
    stats = dlop.jit_stats()
    assert set(stats) == set(COUNTS) | set(TIMES) | {"cache_dir"}
    for name in COUNTS:
        assert isinstance(stats[name], int) and stats[name] >= 0, (name, stats[name])
    for name in TIMES:
        assert isinstance(stats[name], float) and stats[name] >= 0.0, (name, stats[name])
    assert stats["cache_dir"] is None or isinstance(stats["cache_dir"], str)
    assert "jit_stats" in dlop.__all__


def test_values_are_libdlops_own():
    library = loaded_libdlop()
    native = JitStats(struct_size=ctypes.sizeof(JitStats))
    assert library.dlop_jit_stats_get(ctypes.byref(native)) == 0
    stats = dlop.jit_stats()
    for name in COUNTS + TIMES:
        assert stats[name] == getattr(native, name), name
    directory = ctypes.create_string_buffer(4096)
    assert library.dlop_jit_cache_directory(directory, len(directory)) == 0
    assert stats["cache_dir"] == (os.fsdecode(directory.value) or None)


def test_cache_dir_follows_dlop_cache_dir(tmp_path):
    code = "import dlop, json; print(json.dumps(dlop.jit_stats()['cache_dir']))"
    result = run_python(code, DLOP_CACHE_DIR=str(tmp_path / "cache"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == str(tmp_path / "cache" / "jit")
    assert (tmp_path / "cache" / "jit").is_dir()
    assert oct((tmp_path / "cache" / "jit").stat().st_mode & 0o777) == "0o700"
    result = run_python(code, DLOP_CACHE_DIR="")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) is None
    assert result.stderr == ""


def test_unusable_cache_dir_is_none_with_one_warning(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = run_python("import dlop, json; print(json.dumps(dlop.jit_stats()['cache_dir'])); "
                        "dlop.jit_stats()", DLOP_CACHE_DIR=str(blocker / "cache"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) is None
    assert result.stderr.count("dlop: warning: run-time compilation cache: cannot create the "
                               "directory") == 1, result.stderr


def gpu_reason():
    try:
        dlop._C.device_check("cuda:0")
    except dlop.DlopError as error:
        return str(error)
    return None


# Compiles a kernel through the host table's cuda_compile slot (ABI 1.2, offset 128) and prints
# the stats after each of two requests.
SLOT_PROGRAM = r"""
import ctypes, json, dlop
with open("/proc/self/maps") as maps:
    path = next(line.split()[-1] for line in maps if "/libdlop.so" in line)
library = ctypes.CDLL(path)
library.dlop_host_api_table.restype = ctypes.c_void_p
table = library.dlop_host_api_table()
compile_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_char_p, ctypes.c_void_p,
                                ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p,
                                ctypes.c_size_t)
unload_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
cuda_compile = compile_type(ctypes.c_void_p.from_address(table + 128).value)
cuda_module_unload = unload_type(ctypes.c_void_p.from_address(table + 56).value)
source = b'extern "C" __global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n'
seen = []
for _ in range(2):
    module = ctypes.c_void_p()
    error = ctypes.create_string_buffer(4096)
    status = cuda_compile(0, source, None, 0, ctypes.byref(module), error, len(error))
    assert status == 0, error.value.decode()
    seen.append(dlop.jit_stats())
for _ in range(2):
    assert cuda_module_unload(module) == 0
print(json.dumps(seen))
"""


def test_a_kernel_compiled_through_the_host_table_is_counted(tmp_path):
    reason = gpu_reason()
    if reason is not None:
        if os.environ.get("DLOP_REQUIRE_GPU") == "1":
            pytest.fail(f"DLOP_REQUIRE_GPU=1 but no GPU usable: {reason}")
        pytest.skip(f"no GPU usable: {reason}")
    cache = str(tmp_path / "cache")
    result = run_python(SLOT_PROGRAM, DLOP_CACHE_DIR=cache)
    assert result.returncode == 0, result.stderr
    first, second = json.loads(result.stdout)
    assert (first["compiles"], first["memory_hits"], first["disk_hits"]) == (1, 0, 0)
    assert first["compile_seconds"] > 0
    assert (second["compiles"], second["memory_hits"], second["disk_hits"]) == (1, 1, 0)
    entries = list(pathlib.Path(cache, "jit").iterdir())
    assert len(entries) == 1 and entries[0].suffix in (".cubin", ".ptx"), entries
    # A fresh process: the entry on disk, no compiler run.
    result = run_python(SLOT_PROGRAM, DLOP_CACHE_DIR=cache)
    assert result.returncode == 0, result.stderr
    first, second = json.loads(result.stdout)
    assert (first["compiles"], first["memory_hits"], first["disk_hits"]) == (0, 0, 1)
    assert (second["compiles"], second["memory_hits"], second["disk_hits"]) == (0, 1, 1)
