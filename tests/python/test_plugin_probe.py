"""test_plugin_probe.py — the plugin probe from Python: dlop.plugin_probe() reports the mode
DLOP_PLUGIN_PROBE set, dlop.set_plugin_probe changes it and refuses what is not a mode, and
dlop.load_plugin of a file whose loading crashes or aborts raises PluginError naming the file and
the signal while Python lives on and loads the next file. With the probe off the same file kills
the process: what the probe is there for. Each case runs in a fresh `python -c` (the mode is
per process, and a crash must not take pytest with it), with its own empty cache directory."""
import os
import pathlib
import signal
import subprocess
import sys

import pytest

PROBE_FIXTURES = pathlib.Path(os.environ.get("DLOP_FIXTURE_DIR", "")) / "probe"


def fixture(name: str) -> str:
    path = PROBE_FIXTURES / f"{name}.so"
    if not path.is_file():
        pytest.fail(f"probe fixture {path} is missing: build the tests (it is part of the build)")
    return str(path)


def run_python(tmp_path: pathlib.Path, code: str, probe=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, DLOP_PLUGIN_PATH="", DLOP_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("DLOP_PLUGIN_PROBE", None)
    if probe is not None:
        env["DLOP_PLUGIN_PROBE"] = probe
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("setting, mode", [(None, "external"), ("off", "off"), ("0", "off"),
                                           ("all", "all"), ("1", "all"), ("external", "external")])
def test_plugin_probe_reports_the_environment_setting(tmp_path, setting, mode):
    result = run_python(tmp_path, "import dlop; print(dlop.plugin_probe())", probe=setting)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == mode


def test_set_plugin_probe_changes_the_mode_and_refuses_what_is_not_one(tmp_path):
    code = """
import dlop
for mode in ("all", "off", "external"):
    dlop.set_plugin_probe(mode)
    assert dlop.plugin_probe() == mode, (mode, dlop.plugin_probe())
for bad, error in ((1, dlop.DlopTypeError), (None, dlop.DlopTypeError), (b"off", dlop.DlopTypeError),
                   ("ON", dlop.InvalidArgumentError), ("", dlop.InvalidArgumentError),
                   ("off\\x00x", dlop.InvalidArgumentError)):
    try:
        dlop.set_plugin_probe(bad)
    except error as e:
        assert "set_plugin_probe" in str(e), str(e)
    else:
        raise AssertionError(f"set_plugin_probe({bad!r}) was accepted")
    assert dlop.plugin_probe() == "external", (bad, dlop.plugin_probe())
print("modes ok")
"""
    result = run_python(tmp_path, code)
    assert result.returncode == 0, result.stderr
    assert "modes ok" in result.stdout


LOAD_AND_GO_ON = """
import sys
import dlop
dlop.set_plugin_probe(sys.argv[1])
try:
    dlop.load_plugin(sys.argv[2])
except dlop.PluginError as e:
    print("refused:", e)
else:
    print("loaded")
fine = dlop.load_plugin(sys.argv[3])
print("then loaded", fine.name, fine.ops)
"""


@pytest.mark.parametrize("name, signal_number", [("constructor_segfaults", signal.SIGSEGV),
                                                 ("entry_aborts", signal.SIGABRT)])
def test_load_plugin_of_a_crashing_file_raises_plugin_error(tmp_path, name, signal_number):
    """In the default mode (the modes themselves: tests/unit/test_probe.c)."""
    path = fixture(name)
    result = subprocess.run([sys.executable, "-c", LOAD_AND_GO_ON, "external", path, fixture("fine")],
                            env=dict(os.environ, DLOP_PLUGIN_PATH="", DLOP_CACHE_DIR=str(tmp_path)),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"Python ended with {result.returncode}: {result.stderr[-600:]}"
    lines = result.stdout.splitlines()
    expected = (f"refused: {path}: plugin probe: loading it in a child process ended with signal "
                f"{int(signal_number)} ({signal.strsignal(signal_number)})")
    assert lines[0].startswith(expected), lines
    assert lines[1] == "then loaded fixture_probe_fine ['fixture_probe_scale']", lines


def test_entry_abort_quotes_the_childs_last_output(tmp_path):
    result = subprocess.run([sys.executable, "-c", LOAD_AND_GO_ON, "external", fixture("entry_aborts"),
                             fixture("fine")],
                            env=dict(os.environ, DLOP_PLUGIN_PATH="", DLOP_CACHE_DIR=str(tmp_path)),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-600:]
    assert 'its last output: "fixture entry_aborts: giving up"' in result.stdout, result.stdout


def test_without_the_probe_the_same_file_kills_python(tmp_path):
    """The counterpart: the crash the probe catches is real."""
    # Under AddressSanitizer (the sanitizer tree preloads it) the signal must stay a signal.
    asan = os.environ.get("ASAN_OPTIONS")
    extra = {"ASAN_OPTIONS": asan + ":handle_segv=0"} if asan is not None else {}
    result = subprocess.run([sys.executable, "-c", LOAD_AND_GO_ON, "off", fixture("constructor_segfaults"),
                             fixture("fine")],
                            env=dict(os.environ, DLOP_PLUGIN_PATH="", DLOP_CACHE_DIR=str(tmp_path), **extra),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == -signal.SIGSEGV, (result.returncode, result.stdout, result.stderr[-600:])
