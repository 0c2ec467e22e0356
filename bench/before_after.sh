#!/usr/bin/env bash
# bench/before_after.sh BASE_SOURCE — the same benchmarks on two source trees in one run, for
# "measure before and after": BASE_SOURCE is the tree before the change (e.g. made with
# `git archive REV | tar -x -C DIR`), this checkout the tree after. Each is built in its own
# folder (tests off), then every benchmark runs on both, alternating before/after ROUNDS times
# (default 2), so that drift of the machine hits both alike. CPU: dlop-bench-cpu (seed ops,
# thunk and function paths) and bench/elemwise_cpu.py; GPU, where nvidia-smi sees one:
# dlop-bench-gpu, bench/elementwise_gpu.py and bench/python_calls.py. Every output goes to $DLOP_AB_OUT (default
# build/before-after) as <program>.<before|after>.<round>.txt; DLOP_ELEMWISE_CPU_ARGS is passed
# to elemwise_cpu.py (e.g. "--seconds 0.15" for a shorter run). With DLOP_OPS_ARGS set (even
# empty) bench/ops.py runs too, with those arguments (e.g. "--ops tanh,reduce --sizes 16 20"),
# and writes ops.<side>.<round>.json.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
base=$(cd "${1:?usage: bench/before_after.sh BASE_SOURCE}" && pwd)
out=${DLOP_AB_OUT:-$root/build/before-after}
rounds=${ROUNDS:-2}
python=${DLOP_PYTHON:-python3}
export PATH="$PATH:/usr/local/cuda/bin"
mkdir -p "$out"

build_tree() { # source build-dir
  cmake -S "$1" -B "$2" -DDLOP_BUILD_TESTS=OFF -DDLOP_PYTHON="$(command -v "$python")" \
    ${DLOP_CMAKE_ARGS:-} >/dev/null && cmake --build "$2" -j "$(nproc)" >"$2.log" 2>&1 ||
    { echo "before_after: building $1 failed (see $2.log)"; exit 1; }
}
build_tree "$base" "$out/build-before"
build_tree "$root" "$out/build-after"

gpu=0
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && gpu=1
for round in $(seq 1 "$rounds"); do
  for side in before after; do
    b=$out/build-$side
    tag=$side.$round
    echo "before_after: round $round, $side"
    "$b/bin/dlop-bench-cpu" --min-log2 16 --max-log2 22 --step 6 --paths thunk,function \
      >"$out/bench-cpu.$tag.txt" 2>&1
    DLOP_PLUGIN_PATH= PYTHONPATH="$b/python" "$python" "$root/bench/elemwise_cpu.py" \
      ${DLOP_ELEMWISE_CPU_ARGS:-} >"$out/elemwise-cpu.$tag.txt" 2>&1
    if [ -n "${DLOP_OPS_ARGS+set}" ]; then
      DLOP_PLUGIN_PATH= PYTHONPATH="$b/python" "$python" "$root/bench/ops.py" $DLOP_OPS_ARGS \
        --json "$out/ops.$tag.json" >"$out/ops.$tag.txt" 2>&1
    fi
    if [ "$gpu" = 1 ]; then
      "$b/bin/dlop-bench-gpu" >"$out/bench-gpu.$tag.txt" 2>&1
      DLOP_PLUGIN_PATH= PYTHONPATH="$b/python" "$python" "$root/bench/elementwise_gpu.py" \
        >"$out/elementwise-gpu.$tag.txt" 2>&1
      DLOP_PLUGIN_PATH= PYTHONPATH="$b/python" "$python" "$root/bench/python_calls.py" \
        >"$out/python-calls.$tag.txt" 2>&1
    fi
  done
done
echo "before_after: outputs in $out"
