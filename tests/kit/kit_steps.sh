#!/usr/bin/env bash
# kit_steps.sh STEP — one step of the author-kit test (tests/kit/CMakeLists.txt runs each as a
# ctest entry): install the SDK into a fresh prefix, build examples/plugin-template out of tree
# against it, load it with the installed `dlop`, build a pkg-config consumer, `dlop check`, Python,
# and the tutorial's steps end to end: the plugin installed among the bundled ones, seen by both.
# Configuration comes from DLOP_KIT_* environment variables set by CMake. Exit 0 pass, 1 fail,
# 77 skipped (with the reason printed).
set -euo pipefail

step=${1:?usage: kit_steps.sh install|template|load|pkgconfig|host|check|python|oneinstall|export}
source_dir=${DLOP_KIT_SOURCE_DIR:?}
build_dir=${DLOP_KIT_BUILD_DIR:?}
work=${DLOP_KIT_WORK_DIR:?}
libdir=${DLOP_KIT_LIBDIR:?}
cmake=${DLOP_KIT_CMAKE:-cmake}
prefix=$work/prefix
template_build=$work/template-build
template_so=$template_build/libscale_add.so

fail() { echo "kit $step: FAIL: $*" >&2; exit 1; }
skip() { echo "kit $step: SKIPPED: $*"; exit 77; }
run() { echo "+ $*"; "$@"; }

# The plugin's CPU path (and nothing else of the environment) decides what the host loads.
export DLOP_PLUGIN_PATH=

step_install() {
  rm -rf "$work"
  mkdir -p "$work"
  run "$cmake" --install "$build_dir" --prefix "$prefix" >"$work/install.log" ||
    fail "cmake --install $build_dir --prefix $prefix failed (see $work/install.log)"
  local missing=() header
  # Every public header, the kit's subfolder included (a folder itself is not a file to check).
  while IFS= read -r header; do
    [[ -f "$prefix/include/$header" ]] || missing+=("include/$header")
  done < <(cd "$source_dir/sdk/include" && find . -type f | sed 's|^\./||' | sort)
  local file
  for file in bin/dlop "$libdir/libdlop.so" "$libdir/libdlop.so.0" \
      "$libdir/dlop/plugins/libdlop_double.so" "$libdir/dlop/plugins/libdlop_exp.so" \
      "$libdir/dlop/plugins/libdlop_multiply_them.so" \
      "$libdir/cmake/dlop/dlopConfig.cmake" "$libdir/cmake/dlop/dlopConfigVersion.cmake" \
      "$libdir/cmake/dlop/dlopTargets.cmake" "$libdir/cmake/dlop/DlopPlugin.cmake" \
      "$libdir/cmake/dlop/DlopCuda.cmake" "$libdir/pkgconfig/dlop.pc" \
      ${DLOP_KIT_EXTRA_INSTALLED:-}; do
    [[ -e "$prefix/$file" ]] || missing+=("$file")
  done
  ((${#missing[@]} == 0)) || fail "not installed under $prefix: ${missing[*]}"
  # No file of the installed CMake package may point back into the source or build tree.
  if grep -l -e "$source_dir" -e "$build_dir" "$prefix/$libdir"/cmake/dlop/*.cmake "$prefix/$libdir/pkgconfig/dlop.pc"; then
    fail "the installed package files above name the source or build tree"
  fi
  # The installed dlop finds libdlop through its RUNPATH and the bundled plugins next to it.
  if command -v readelf >/dev/null; then
    readelf -d "$prefix/bin/dlop" | grep -q "R.*PATH.*\[\$ORIGIN/../$libdir\]" ||
      fail "bin/dlop's RUNPATH is not \$ORIGIN/../$libdir: $(readelf -d "$prefix/bin/dlop" | grep PATH)"
  fi
  local listing
  listing=$(env -u LD_LIBRARY_PATH "$prefix/bin/dlop" list) || fail "installed dlop list failed"
  echo "$listing"
  grep -q "file: $prefix/$libdir/dlop/plugins/libdlop_double.so" <<<"$listing" ||
    fail "installed dlop did not load its bundled plugins from $prefix/$libdir/dlop/plugins"
  echo "kit install: ok ($prefix)"
}

step_template() {
  [[ -d "$prefix" ]] || fail "no installed SDK at $prefix (the kit.install test sets it up)"
  rm -rf "$template_build"
  # Out of the source tree, found only through CMAKE_PREFIX_PATH: no package registry.
  run "$cmake" -S "$source_dir/examples/plugin-template" -B "$template_build" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -DDLOP_WITH_CUDA="${DLOP_KIT_WITH_CUDA:-ON}" -DDLOP_CUDA_ARCHS="${DLOP_KIT_CUDA_ARCHS:-80;90}" \
    -DCMAKE_BUILD_TYPE=Release || fail "configuring the plugin template against $prefix failed"
  run "$cmake" --build "$template_build" -j2 || fail "building the plugin template failed"
  [[ -f "$template_so" ]] || fail "the template build made no $template_so"
  if [[ "${DLOP_KIT_WITH_CUDA:-ON}" == ON ]]; then
    [[ -s "$template_build/scale_add_scale_add_cuda_fatbin.fatbin" ]] ||
      fail "nvcc built no fatbin for src/scale_add_cuda.cu in $template_build"
  fi
  # A plugin exports exactly one symbol and needs neither libdlop nor libcuda.
  if command -v nm >/dev/null; then
    local exported
    exported=$(nm -D --defined-only "$template_so" | awk '{print $3}' | sort | tr '\n' ' ')
    [[ "$exported" == "dlop_plugin_init " ]] || fail "libscale_add.so exports '$exported', expected only dlop_plugin_init"
  fi
  if command -v readelf >/dev/null && readelf -d "$template_so" | grep -E "NEEDED.*(libdlop|libcuda)"; then
    fail "libscale_add.so links libdlop or libcuda (plugins get the host table instead)"
  fi
  echo "kit template: ok ($template_so)"
}

step_load() {
  [[ -f "$template_so" ]] || fail "no $template_so (the kit.template test builds it)"
  local out
  out=$("$prefix/bin/dlop" load "$template_so") || fail "dlop load $template_so failed: $out"
  echo "$out"
  grep -q "^ok: $template_so: plugin scale_add 1.0.0 (ABI [0-9.]*), 1 op: scale_add" <<<"$out" ||
    fail "dlop load did not report scale_add"
  out=$(DLOP_PLUGIN_PATH="$template_so" "$prefix/bin/dlop" list) || fail "dlop list failed"
  echo "$out"
  grep -q "op scale_add: 2 inputs -> 1 output" <<<"$out" || fail "dlop list does not show op scale_add"
  grep -q "alpha (float, default 1)" <<<"$out" || fail "dlop list does not show scale_add's alpha parameter"
  local cuda_expected="float32 float64"
  [[ "${DLOP_KIT_WITH_CUDA:-ON}" == ON ]] || cuda_expected="(not supported)"
  grep -qF "cuda: $cuda_expected" <<<"$out" || fail "dlop list: scale_add's CUDA dtypes are not '$cuda_expected'"
  echo "kit load: ok"
}

step_pkgconfig() {
  [[ -f "$template_so" ]] || fail "no $template_so (the kit.template test builds it)"
  command -v pkg-config >/dev/null || skip "pkg-config is not installed"
  local cc=${DLOP_KIT_CC:-cc} flags
  export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
  flags=$(pkg-config --cflags --libs dlop) || fail "pkg-config --cflags --libs dlop failed"
  echo "pkg-config --cflags --libs dlop: $flags"
  [[ "$(pkg-config --modversion dlop)" == "${DLOP_KIT_VERSION:?}" ]] ||
    fail "pkg-config --modversion dlop is $(pkg-config --modversion dlop), expected $DLOP_KIT_VERSION"
  # word splitting of $flags is what pkg-config output is for
  # shellcheck disable=SC2086
  run "$cc" -std=gnu11 -Wall -Wextra -Werror -ffp-contract=off -o "$work/kit_consumer" \
    "$source_dir/tests/kit/kit_consumer.c" $flags \
    -Wl,-rpath,"$(pkg-config --variable=libdir dlop)" || fail "building the consumer with pkg-config flags failed"
  run "$work/kit_consumer" "$template_so" || fail "the pkg-config consumer failed"
}

# The same host program through CMake: find_package(dlop) and the exported dlop::dlop target.
# Runs the template on CUDA too when a GPU is usable (DLOP_REQUIRE_GPU=1: a missing one fails).
step_host() {
  [[ -f "$template_so" ]] || fail "no $template_so (the kit.template test builds it)"
  rm -rf "$work/host-build"
  run "$cmake" -S "$source_dir/tests/kit/host_project" -B "$work/host-build" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF ||
    fail "configuring a host project with find_package(dlop) against $prefix failed"
  run "$cmake" --build "$work/host-build" || fail "building the host project against dlop::dlop failed"
  run "$work/host-build/kit_consumer" "$template_so" || fail "the host built with dlop::dlop failed"
}

step_check() {
  [[ -f "$template_so" ]] || fail "no $template_so (the kit.template test builds it)"
  [[ -n "${DLOP_KIT_CHECK_COMMAND:-}" ]] ||
    skip "this build has no dlop-check (sdk/check builds it only where Check is found)"
  run "$prefix/bin/dlop" check "$template_so" || fail "dlop check $template_so failed"
}

step_python() {
  [[ -f "$template_so" ]] || fail "no $template_so (the kit.template test builds it)"
  local python=${DLOP_KIT_PYTHON:-}
  [[ -n "$python" && -x "$python" ]] || skip "no Python front end in this build (${python:-no interpreter})"
  PYTHONPATH="$build_dir/python${PYTHONPATH:+:$PYTHONPATH}" run "$python" \
    "$source_dir/tests/kit/kit_python.py" "$template_so" || fail "loading the template from Python failed"
}

# The tutorial's own steps (docs/tutorial.md 1, 4 and 6) in a prefix of their own, so the other
# steps' prefix keeps only the bundled plugins: `cmake --install` the SDK, `cmake --install` the
# template among its bundled plugins, then the prefix's `dlop list` and `dlop info` and
# `import dlop` from the prefix (PYTHONPATH=$SDK) must name one libdlop and one bundled plugin
# directory, both must list the plugin, and Python must run it without dlop.load_plugin.
step_oneinstall() {
  [[ -f "$template_so" ]] || fail "no $template_so (the kit.template test builds it)"
  local python=${DLOP_KIT_PYTHON:-}
  [[ -n "$python" && -x "$python" ]] || skip "no Python front end in this build (${python:-no interpreter})"
  local sdk=$work/tutorial-sdk
  rm -rf "$sdk"
  run "$cmake" --install "$build_dir" --prefix "$sdk" >"$work/tutorial-install.log" ||
    fail "cmake --install $build_dir --prefix $sdk failed (see $work/tutorial-install.log)"
  [[ -f "$sdk/dlop/__init__.py" ]] || fail "cmake --install put no Python package in $sdk/dlop"
  [[ ! -e "$sdk/dlop/lib" ]] ||
    fail "the installed Python package carries a libdlop or plugins of its own ($sdk/dlop/lib): one prefix, one libdlop"
  run "$cmake" --install "$template_build" --prefix "$sdk" || fail "installing the template into $sdk failed"
  local installed
  installed=$(realpath "$sdk/$libdir/dlop/plugins/libscale_add.so") ||
    fail "cmake --install of the template put no libscale_add.so in $sdk/$libdir/dlop/plugins"
  local listing where
  listing=$(env -u LD_LIBRARY_PATH "$sdk/bin/dlop" list) || fail "the SDK's dlop list failed: $listing"
  grep -qF "file: $installed" <<<"$listing" || fail "the SDK's dlop list does not show $installed:
$listing"
  where=$(env -u LD_LIBRARY_PATH "$sdk/bin/dlop" info) || fail "the SDK's dlop info failed: $where"
  echo "$where"
  local libdlop bundled
  libdlop=$(sed -n 's/^  libdlop: //p' <<<"$where")
  bundled=$(sed -n 's/^  bundled plugins: \(.*\) (beside libdlop)$/\1/p' <<<"$where")
  [[ "$libdlop" == "$(realpath "$sdk/$libdir/libdlop.so.0")" ]] ||
    fail "the SDK's dlop info names libdlop '$libdlop', not the prefix's $sdk/$libdir/libdlop.so.0"
  [[ "$bundled" == "$(dirname "$installed")" ]] ||
    fail "the SDK's dlop info names the bundled plugins '$bundled', not $(dirname "$installed")"
  # From another directory, so nothing of the source or build tree is imported.
  (cd "$work" && env -u LD_LIBRARY_PATH PYTHONPATH="$sdk" "$python" \
    "$source_dir/tests/kit/kit_oneinstall.py" "$sdk" "$libdlop" "$bundled" "$installed") ||
    fail "import dlop from $sdk does not see or run what the SDK's dlop sees"
  # The package copied away from its prefix has no libdlop to run, and its import says so.
  local lone=$work/lone-package out
  rm -rf "$lone" && mkdir -p "$lone" && cp -r "$sdk/dlop" "$lone/"
  if out=$(cd "$work" && env -u LD_LIBRARY_PATH PYTHONPATH="$lone" "$python" -c "import dlop" 2>&1); then
    fail "import dlop from a copy of the package without a libdlop beside it succeeded"
  fi
  grep -qF "the dlop package in $lone/dlop runs the libdlop of its own installation" <<<"$out" ||
    fail "import dlop without a libdlop beside it did not say why: $out"
  echo "kit oneinstall: ok ($sdk: one libdlop, $libdlop; one bundled plugin directory, $bundled)"
}

# dlop.export_plugin end to end (docs/source-ops.md, "From prototype to a plugin"): two ops
# defined in Python and run there, exported, the project built against the installed SDK with
# find_package(dlop) and no Python, `dlop check` on the .so, and in a fresh process the plugin's
# results against the Python definition's, bit for bit (tests/kit/kit_export.py).
step_export() {
  local python=${DLOP_KIT_PYTHON:-}
  [[ -n "$python" && -x "$python" ]] || skip "no Python front end in this build (${python:-no interpreter})"
  [[ -d "$prefix" ]] || fail "no installed SDK at $prefix (the kit.install test sets it up)"
  local export_work=$work/export so
  rm -rf "$export_work" && mkdir -p "$export_work"
  PYTHONPATH="$build_dir/python${PYTHONPATH:+:$PYTHONPATH}" run "$python" \
    "$source_dir/tests/kit/kit_export.py" define "$export_work" || fail "defining and exporting the ops failed"
  # The project builds with no Python on PATH or PYTHONPATH: only CMake, the compilers and the SDK.
  run env -u PYTHONPATH "$cmake" -S "$export_work/project" -B "$export_work/build" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -DDLOP_WITH_CUDA="${DLOP_KIT_WITH_CUDA:-ON}" -DDLOP_CUDA_ARCHS="${DLOP_KIT_CUDA_ARCHS:-80;90}" ||
    fail "configuring the exported project against $prefix failed"
  run env -u PYTHONPATH "$cmake" --build "$export_work/build" -j2 || fail "building the exported project failed"
  so=$export_work/build/libkitexport.so
  [[ -f "$so" ]] || fail "the exported project built no $so"
  if [[ "${DLOP_KIT_WITH_CUDA:-ON}" == ON ]]; then
    local cu
    for cu in kx_scale_shift kx_sum_prod; do
      [[ -s "$export_work/build/kitexport_${cu}_cuda_fatbin.fatbin" ]] ||
        fail "nvcc built no fatbin for src/${cu}_cuda.cu"
    done
  fi
  if command -v nm >/dev/null; then
    local exported
    exported=$(nm -D --defined-only "$so" | awk '{print $3}' | sort | tr '\n' ' ')
    [[ "$exported" == "dlop_plugin_init " ]] || fail "libkitexport.so exports '$exported', expected only dlop_plugin_init"
  fi
  if [[ -n "${DLOP_KIT_CHECK_COMMAND:-}" ]]; then
    run "$prefix/bin/dlop" check "$so" || fail "dlop check $so failed"
  else
    echo "kit export: dlop check not run (this build has no dlop-check)"
  fi
  PYTHONPATH="$build_dir/python${PYTHONPATH:+:$PYTHONPATH}" run "$python" \
    "$source_dir/tests/kit/kit_export.py" compare "$export_work" "$so" ||
    fail "the exported plugin does not compute what the Python definitions computed"
  echo "kit export: ok ($so)"
}

"step_$step"
