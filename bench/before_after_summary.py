#!/usr/bin/env python3
"""before_after_summary.py DIR — the table of bench/before_after.sh: for every point measured in
both trees, the median over rounds of before and after, and after/before of the time (below 1:
the change made it faster). Reads dlop-bench lines (seconds=), elemwise_cpu.py's table (dlop
µs), bench/ops.py's --json rows (dlop seconds), elementwise_gpu.py's rows (time relative to the device copy's) and python_calls.py's rows (µs per call, the other libraries too: their
change between rounds is the machine's noise)."""
from __future__ import annotations

import collections
import json
import math
import pathlib
import re
import statistics
import sys


def ops_points(path: pathlib.Path):
    """(key, seconds) of every checked dlop row of bench/ops.py's --json file."""
    for row in json.loads(path.read_text()).get("rows", []):
        if row.get("check") == "ok":
            key = f"ops: {row['case']} {row['dtype']} 2^{int(math.log2(row['n']))} threads={row.get('threads')}"
            yield key, row["dlop_s"]


def points(path: pathlib.Path):
    """(key, seconds) for every timed dlop point in one output file."""
    program = path.name.split(".")[0]
    if program == "ops":
        if path.suffix == ".json":
            yield from ops_points(path)
        return
    section = ""
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("dlop-bench "):
            fields = dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)
            if "seconds" in fields:
                key = " ".join(fields.get(k, "") for k in ("op", "dtype", "n", "path"))
                yield f"{program}: {key}", float(fields["seconds"])
        elif program == "elemwise-cpu":
            parts = line.split()
            if len(parts) >= 6 and parts[-4].isdigit() and parts[-3].replace(".", "").isdigit():
                yield f"{program}: {' '.join(parts[:-3])}", float(parts[-3]) * 1e-6
        elif program == "elementwise-gpu":
            match = re.match(r"^(.*?\))\s+(float\w+)\s+([0-9]+)\s+([0-9]+)\s", line)
            if match:  # GB/s of dlop and of the device copy: time per byte, relative to the copy
                yield f"{program}: {match.group(1)} {match.group(2)} (copy time = 1)", \
                    float(match.group(4)) / float(match.group(3))
        elif program == "python-calls":
            if line[:3] in ("(a)", "(b)"):
                section = line[:3]
            match = re.match(r"^\s+(\S(?:.*?\S)?)\s{2,}([0-9]+\.[0-9]+)\s", line)
            if match and match.group(1) != "name":
                yield f"{program} {section}: {match.group(1)}", float(match.group(2)) * 1e-6


def main() -> int:
    folder = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "build/before-after")
    times = collections.defaultdict(lambda: {"before": [], "after": []})
    for path in sorted(list(folder.glob("*.txt")) + list(folder.glob("ops.*.json"))):
        side = path.name.split(".")[1]
        for key, seconds in points(path):
            times[key][side].append(seconds)
    ratios = []
    print(f"{'point':64} {'before':>11} {'after':>11} {'after/before':>12}")
    for key, sides in times.items():
        if not sides["before"] or not sides["after"]:
            continue
        before, after = statistics.median(sides["before"]), statistics.median(sides["after"])
        ratios.append(after / before)
        print(f"{key:64} {before:>11.3e} {after:>11.3e} {after / before:>12.3f}")
    if ratios:
        geo = statistics.geometric_mean(ratios)
        print(f"{len(ratios)} points; after/before: geometric mean {geo:.3f}, "
              f"min {min(ratios):.3f}, max {max(ratios):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
