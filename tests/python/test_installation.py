"""test_installation.py — which installation `import dlop` runs, and that it is one: dlop.info()
names the libdlop file, the bundled plugin directory and dlop-probe beside it, the same ones
`dlop info` of the same build names; DLOP_BUNDLED_PLUGINS is reported as such; an unknown op's
error says where this process's bundled plugins come from; and a libdlop of another version that
the dynamic linker finds first (LD_LIBRARY_PATH) is refused at import, naming both versions and
its file. The tutorial's own steps through an installed prefix are the kit.oneinstall test."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import dlop

BUILD = Path(os.environ.get("DLOP_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
LIB = os.path.realpath(BUILD / "lib")


def run_python(code: str, **environment) -> subprocess.CompletedProcess:
    env = dict(os.environ, **environment)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120)


def test_info_names_this_builds_libdlop_and_what_lies_beside_it():
    where = dlop.info()
    assert os.path.dirname(where["libdlop"]) == LIB, where
    assert os.path.basename(where["libdlop"]).startswith("libdlop.so"), where
    assert where["version"] == dlop.version()
    assert where["bundled_plugins"] == os.path.join(LIB, "dlop", "plugins"), where
    assert where["bundled_plugins_from"] == "libdlop", where
    assert where["probe_program"] == os.path.join(LIB, "dlop", "dlop-probe"), where
    assert where["extension"] == dlop._C.__file__
    assert where["package"] == os.path.dirname(os.path.abspath(dlop.__file__))
    assert where["plugin_path"] == [], where  # the tests run with DLOP_PLUGIN_PATH empty
    assert where["plugin_probe"] == dlop.plugin_probe()
    assert where["plugins"]["double"] == os.path.join(where["bundled_plugins"], "libdlop_double.so")
    assert where["load_errors"] == dlop.load_errors()


def test_info_agrees_with_the_dlop_command_of_the_same_build():
    """The two hosts of one build name one libdlop and one bundled plugin directory."""
    command = subprocess.run([str(BUILD / "bin" / "dlop"), "info"], capture_output=True, text=True,
                             timeout=120)
    assert command.returncode == 0, command.stdout + command.stderr
    lines = dict(line.strip().split(": ", 1) for line in command.stdout.splitlines()[1:]
                 if ": " in line)
    where = dlop.info()
    assert lines["libdlop"] == where["libdlop"], command.stdout
    assert lines["bundled plugins"] == where["bundled_plugins"] + " (beside libdlop)", command.stdout
    assert lines["probe program"] == where["probe_program"], command.stdout


def test_a_bundled_directory_from_the_environment_is_reported_and_named_by_unknown_ops(tmp_path):
    code = ("import json, dlop\n"
            "try:\n"
            "    dlop.ops.double\n"
            "except dlop.NotFoundError as error:\n"
            "    message = str(error)\n"
            "print(json.dumps({'info': dlop.info(), 'message': message}))\n")
    result = run_python(code, DLOP_BUNDLED_PLUGINS=str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["info"]["bundled_plugins"] == str(tmp_path), report
    assert report["info"]["bundled_plugins_from"] == "DLOP_BUNDLED_PLUGINS", report
    assert report["info"]["plugins"] == {}, report
    assert f"bundled plugins come from {tmp_path}: dlop.info()" in report["message"], report
    # Set empty: no bundled plugins at all, and both say so.
    result = run_python(code, DLOP_BUNDLED_PLUGINS="")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["info"]["bundled_plugins"] is None, report
    assert "bundled plugins come from (nowhere)" in report["message"], report


STUB = r"""
/* A libdlop of another version: every function the extension imports, doing nothing, but the
 * version and where this file lies, which the import check reads first. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
const char *dlop_version_string(void) { return "0.0.1-other"; }
int dlop_location_path(int location, char *buffer, size_t size) {
  Dl_info info;
  if (location != 0 || dladdr((void *)&dlop_location_path, &info) == 0) return -1;
  snprintf(buffer, size, "%s", info.dli_fname);
  return 0;
}
"""


def test_a_libdlop_of_another_version_found_first_is_refused_at_import(tmp_path):
    cc, nm = shutil.which("cc") or shutil.which("gcc"), shutil.which("nm")
    if cc is None or nm is None:
        pytest.skip("needs a C compiler (cc) and nm to build a libdlop of another version")
    imported = subprocess.run([nm, "-D", "--undefined-only", dlop._C.__file__],
                              capture_output=True, text=True, check=True).stdout.split()
    others = sorted({name for name in imported if name.startswith("dlop_")}
                    - {"dlop_version_string", "dlop_location_path"})
    assert others, "the extension imports no dlop_ function: nm read the wrong file"
    source = tmp_path / "stub.c"
    source.write_text(STUB + "".join(f"void {name}(void) {{}}\n" for name in others))
    other = tmp_path / "libdlop.so.0"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(other), "-Wl,-soname,libdlop.so.0",
                    str(source), "-ldl"], check=True)
    path = os.environ.get("LD_LIBRARY_PATH")
    result = run_python("import dlop", LD_LIBRARY_PATH=f"{tmp_path}:{path}" if path else str(tmp_path))
    assert result.returncode != 0, result.stdout + result.stderr
    assert "ImportError: dlop: the extension " in result.stderr, result.stderr
    assert (f"was built for libdlop {dlop.version()} but the dynamic linker loaded libdlop "
            f"0.0.1-other from {other}: a dlop Python package runs only with the libdlop of its "
            "own installation and version") in result.stderr, result.stderr
