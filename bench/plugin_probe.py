#!/usr/bin/env python3
"""plugin_probe.py — what probing plugin files in a child process costs at start-up.

Each sample is a fresh process (loading runs once per process), in three settings:
  off   DLOP_PLUGIN_PROBE=off: every file dlopen'ed directly
  cold  the probe on for the files measured, an empty cache directory (DLOP_CACHE_DIR): one
        dlop-probe process per file
  warm  the probe on, the cache directory filled by an earlier run: one stat and one small
        read per file, no child process
and three ways in:
  load_default  dlop_load_default_plugins() alone, timed inside the process (ctypes on libdlop)
  import dlop   `import dlop` (NumPy imported before the clock starts), timed inside
  dlop list     the whole `dlop list` process, timed from outside (spawn to exit)
for all bundled plugins at once (probe mode `all`) and, for load_default, for each bundled
plugin alone on DLOP_PLUGIN_PATH (mode `external`, the default, which probes such files).
Prints medians and minimums in milliseconds over --samples samples, and the load average.

    build/venv/bin/python bench/plugin_probe.py [--build build] [--samples 15]
"""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

LOAD_DEFAULT = """
import ctypes, sys, time
lib = ctypes.CDLL(sys.argv[1])
start = time.perf_counter()
lib.dlop_load_default_plugins()
elapsed = time.perf_counter() - start
assert lib.dlop_load_error_count() == 0, "a plugin failed to load"
print(elapsed)
"""

IMPORT_DLOP = """
import time
import numpy
start = time.perf_counter()
import dlop
elapsed = time.perf_counter() - start
assert not dlop.load_errors(), dlop.load_errors()
print(elapsed)
"""


def inside(python: str, code: str, args: list[str], env: dict) -> float:
    out = subprocess.run([python, "-c", code, *args], env=env, capture_output=True, text=True,
                         check=False)
    if out.returncode != 0:
        sys.exit(f"plugin_probe.py: a sample failed: {out.stderr.strip()}")
    return float(out.stdout.strip().splitlines()[-1])


def outside(command: list[str], env: dict) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"plugin_probe.py: {' '.join(command)} failed: {done.stderr.decode().strip()}")
    return elapsed


def measure(sample, env_for, samples: int) -> dict:
    """Median and minimum (ms) of sample(env) in each setting; off/cold/warm interleaved so
    that the machine's load drifts alike over all three."""
    times = {"off": [], "cold": [], "warm": []}
    with tempfile.TemporaryDirectory() as warm_dir:
        sample(env_for("warm", warm_dir))  # fill the warm cache
        for _ in range(samples):
            for setting in times:
                with tempfile.TemporaryDirectory() as cold_dir:
                    directory = warm_dir if setting == "warm" else cold_dir
                    times[setting].append(1e3 * sample(env_for(setting, directory)))
    return {s: (statistics.median(t), min(t)) for s, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=os.environ.get("DLOP_BUILD_DIR", "build"))
    parser.add_argument("--samples", type=int, default=15)
    args = parser.parse_args()
    build = pathlib.Path(args.build).resolve()
    library = build / "lib" / "libdlop.so"
    plugins_dir = build / "lib" / "dlop" / "plugins"
    dlop = build / "bin" / "dlop"
    probe = build / "lib" / "dlop" / "dlop-probe"
    for needed in (library, plugins_dir, dlop, probe):
        if not needed.exists():
            sys.exit(f"plugin_probe.py: {needed} is missing: build first (scripts/build)")
    python = sys.executable
    base = dict(os.environ, PYTHONPATH=str(build / "python"), DLOP_PLUGIN_PATH="")
    base.pop("DLOP_BUNDLED_PLUGINS", None)
    plugins = sorted(plugins_dir.glob("*.so"))

    def env_all(setting: str, cache: str) -> dict:
        return dict(base, DLOP_PLUGIN_PROBE="off" if setting == "off" else "all",
                    DLOP_CACHE_DIR=cache)

    print(f"# plugin probe cost, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}, {args.samples} samples per figure")
    print(f"# {len(plugins)} bundled plugins in {plugins_dir}")
    print()
    print("| what | off: median (min) ms | cold | warm | cold - off | warm - off |")
    print("|---|---|---|---|---|---|")

    def row(name: str, figures: dict) -> None:
        off, cold, warm = figures["off"], figures["cold"], figures["warm"]
        print(f"| {name} | {off[0]:.2f} ({off[1]:.2f}) | {cold[0]:.2f} ({cold[1]:.2f}) | "
              f"{warm[0]:.2f} ({warm[1]:.2f}) | {cold[0] - off[0]:+.2f} | {warm[0] - off[0]:+.2f} |",
              flush=True)

    row(f"load_default, {len(plugins)} bundled (all)",
        measure(lambda env: inside(python, LOAD_DEFAULT, [str(library)], env), env_all,
                args.samples))
    row(f"import dlop, {len(plugins)} bundled (all)",
        measure(lambda env: inside(python, IMPORT_DLOP, [], env), env_all, args.samples))
    row(f"dlop list, {len(plugins)} bundled (all)",
        measure(lambda env: outside([str(dlop), "list"], env), env_all, args.samples))
    for plugin in plugins:
        def env_one(setting: str, cache: str, plugin=plugin) -> dict:
            return dict(base, DLOP_BUNDLED_PLUGINS="", DLOP_PLUGIN_PATH=str(plugin),
                        DLOP_PLUGIN_PROBE="off" if setting == "off" else "external",
                        DLOP_CACHE_DIR=cache)
        row(f"load_default, {plugin.name} alone on DLOP_PLUGIN_PATH (external)",
            measure(lambda env: inside(python, LOAD_DEFAULT, [str(library)], env), env_one,
                    args.samples))


if __name__ == "__main__":
    main()
