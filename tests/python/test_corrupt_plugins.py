"""test_corrupt_plugins.py — a corrupt plugin file on DLOP_PLUGIN_PATH never kills the host: 200
truncated copies of a real plugin and 100 files of random bytes (fixed seed), each alone on the
path of a `dlop list` process, must end in a load error (exit status 0 or 1 and the file named
in the error), never a signal. The loader's ELF checks refuse them before dlopen."""
import os
import pathlib
import random
import subprocess

import pytest

BUILD = pathlib.Path(os.environ.get("DLOP_BUILD_DIR", "build"))
DLOP = BUILD / "bin" / "dlop"
PLUGIN = BUILD / "lib" / "dlop" / "plugins" / "libdlop_elemwise.so"


def corrupt_files(folder: pathlib.Path):
    source = PLUGIN.read_bytes()
    rng = random.Random(20261201)
    cuts = sorted(rng.sample(range(1, len(source)), 190)) + [0, 16, 52, 63, 64, 65, 120, 4095, 4096, len(source) - 1]
    for i, cut in enumerate(cuts):
        path = folder / f"truncated_{i:03d}.so"
        path.write_bytes(source[:cut])
        yield path
    for i in range(100):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 8192)))
        if i % 2:
            data = source[:64] + data  # a valid ELF header over garbage
        path = folder / f"random_{i:03d}.so"
        path.write_bytes(data)
        yield path


@pytest.mark.skipif(not DLOP.exists() or not PLUGIN.exists(), reason="dlop or the elemwise plugin is not built")
def test_corrupt_plugin_files_never_crash_the_host(tmp_path):
    crashed, unrefused = [], []
    for path in corrupt_files(tmp_path):
        env = dict(os.environ, DLOP_PLUGIN_PATH=str(path), DLOP_BUNDLED_PLUGINS="")
        result = subprocess.run([str(DLOP), "list"], env=env, capture_output=True, text=True, timeout=60)
        if result.returncode < 0 or result.returncode > 2:
            crashed.append((path.name, result.returncode, result.stderr[-300:]))
        elif path.name not in result.stderr or "failed to load" not in result.stderr:
            unrefused.append((path.name, result.returncode, result.stderr[-300:]))
        path.unlink()
    assert not crashed, f"{len(crashed)} corrupt files crashed `dlop list`: {crashed[:5]}"
    assert not unrefused, f"{len(unrefused)} corrupt files were not reported as load errors: {unrefused[:5]}"
