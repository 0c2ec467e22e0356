"""dlop.export_plugin: from ops defined with ``dlop.elementwise`` to a plugin project, C and CUDA
sources and a CMakeLists.txt that builds with ``find_package(dlop)`` and no Python
(docs/source-ops.md, "From prototype to a plugin").  The op's body is copied once, into
``src/<op>_body.h``; the CPU kernels, the CUDA kernels and the scalar body that fusion inlines
all expand it, so the plugin computes what the Python definition computed."""
from __future__ import annotations

import os
import re
from typing import Any, Iterable

from . import _C, _errors, _source
from ._export_runtime import CUDA_CUH, ELEMENTWISE_H
from ._ops import Op

# storage C type, compute C type, load, store: as dlop's generated kernels treat each dtype
_DTYPES = {
    "float16": ("uint16_t", "float", "exported_load_float16", "exported_store_float16"),
    "bfloat16": ("uint16_t", "float", "exported_load_bfloat16", "exported_store_bfloat16"),
    "float32": ("float", "float", "EXPORTED_SAME", "EXPORTED_SAME"),
    "float64": ("double", "double", "EXPORTED_SAME", "EXPORTED_SAME"),
    "int8": ("int8_t", "int8_t", "EXPORTED_SAME", "EXPORTED_SAME"),
    "int16": ("int16_t", "int16_t", "EXPORTED_SAME", "EXPORTED_SAME"),
    "int32": ("int32_t", "int32_t", "EXPORTED_SAME", "EXPORTED_SAME"),
    "int64": ("int64_t", "int64_t", "EXPORTED_SAME", "EXPORTED_SAME"),
    "uint8": ("uint8_t", "uint8_t", "EXPORTED_SAME", "EXPORTED_SAME"),
}
_MAX_OPERANDS = 4  # the kit's loop: DLOP_KERNEL_MAX_OPERANDS
_MAX_PARAMS = 8    # EXPORTED_MAX_PARAMS
_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _definition(op: Any) -> dict:
    """The dlop.elementwise definition of op (an Op or its name), or a clear refusal."""
    from ._source_module import SourceModule
    if isinstance(op, SourceModule) or hasattr(op, "arg_types"):
        raise _errors.make(
            _C.UnsupportedError, "UNSUPPORTED",
            "dlop.export_plugin: a SourceModule kernel is raw CUDA that your code launches, not an "
            "op with a type rule and a CPU body: it cannot be exported; write it as a plugin op "
            "(docs/tutorial.md) or as dlop.elementwise")
    if isinstance(op, str):
        name = op
    elif isinstance(op, Op):
        if type(op) is not Op:
            raise _errors.make(
                _C.UnsupportedError, "UNSUPPORTED",
                f"dlop.export_plugin: op {getattr(op, 'name', type(op).__name__)} is a dlop.Op "
                "written in Python "
                f"({type(op).__name__}): its make_node, perform and make_thunk are Python "
                "callbacks that a C plugin cannot run; only dlop.elementwise ops are exported")
        name = op.name
    else:
        raise _errors.type_error(
            f"dlop.export_plugin: ops must be dlop.elementwise ops or their names, got {op!r}")
    d = _source.definitions.get(name)
    if d is None:
        raise _errors.make(
            _C.UnsupportedError, "UNSUPPORTED",
            f"dlop.export_plugin: op {name} was not defined by dlop.elementwise in this process "
            "(a plugin's op is already shipped; a dlop.Op has Python callbacks): nothing to export")
    return d


def _check_exportable(d: dict) -> None:
    name = d["name"]
    operands = len(d["inputs"]) + len(d["outputs"])
    if operands > _MAX_OPERANDS:
        raise _errors.make(
            _C.UnsupportedError, "UNSUPPORTED",
            f"dlop.export_plugin: op {name} has {len(d['inputs'])} inputs and "
            f"{len(d['outputs'])} outputs; an exported op has at most {_MAX_OPERANDS} together "
            "(the kit's elementwise loop): split it into several ops")
    if len(d["params"]) > _MAX_PARAMS:
        raise _errors.make(
            _C.UnsupportedError, "UNSUPPORTED",
            f"dlop.export_plugin: op {name} has {len(d['params'])} parameters, at most "
            f"{_MAX_PARAMS} are exported")
    if "#" in d["body"]:
        raise _errors.invalid(
            f"dlop.export_plugin: op {name}'s body has a '#': the body becomes a C macro "
            "(src/<op>_body.h), which cannot hold preprocessor lines or stringized tokens")


def _body_macro(d: dict) -> str:
    """The body as the lines of a macro: // comments become /* */ ones (a line comment would
    swallow the continuation), a final ';' is added."""
    lines = []
    for line in d["body"].strip().splitlines():
        code, sep, comment = line.partition("//")
        if sep:
            if "*/" in comment:
                raise _errors.invalid(
                    f"dlop.export_plugin: op {d['name']}'s body has a // comment holding '*/': "
                    "it cannot become a /* */ comment in the body's macro")
            line = f"{code}/* {comment.strip()} */"
        lines.append(line.rstrip())
    if not lines[-1].rstrip().endswith(";"):
        lines[-1] += ";"
    return " \\\n".join("  " + line for line in lines)


def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _param_literal(kind: str, default: Any) -> str:
    if kind == "float":
        value = float(default)
        if value != value:
            return "NAN"
        if value in (float("inf"), float("-inf")):
            return "INFINITY" if value > 0 else "-INFINITY"
        return value.hex()  # exact
    return "(-9223372036854775807ll - 1)" if default == -2 ** 63 else f"{int(default)}ll"


def _body_h(d: dict) -> str:
    name, upper = d["name"], d["name"].upper()
    ins, outs = d["inputs"], d["outputs"]
    fields = " ".join(f"{'double' if kind == 'float' else 'int64_t'} {p};"
                      for p, kind, _ in d["params"]) or "int64_t unused; /* no parameters */"
    args = "".join(f"const TYPE {i}, " for i in ins)
    params = "".join(f"    const {'double' if kind == 'float' else 'int64_t'} {p} = dlop_params->{p}; \\\n"
                     f"    (void){p}; \\\n" for p, kind, _ in d["params"])
    if params:
        params = (f"    const {name}_params *dlop_params = (const {name}_params *)dlop_block; \\\n"
                  + params)
    else:
        params = "    (void)dlop_block; /* no parameters */ \\\n"
    stores = "".join(f"    dlop_out[{k}] = {o}; \\\n" for k, o in enumerate(outs))
    n_out = len(outs)
    ins_macro = " ".join(f"EXPORTED_IN(STORAGE, LOAD, {n_out + k})," for k in range(len(ins)))
    outs_macro = " ".join(f"EXPORTED_OUT(STORAGE, STORE, {k})" for k in range(n_out))
    return f"""/* {name}_body.h — {name}'s maths, as dlop.elementwise defined it: the parameter block, the
 * body, and the element function that the CPU kernels ({name}.c) and the CUDA kernels
 * ({name}_cuda.cu) call. {upper}_BODY is also the text of the scalar body that fusion inlines
 * ({name}.c): change the maths here, once. In the body, T is the compute type: float for float16,
 * bfloat16 and float32, double for float64, an integer dtype's own type. */
#ifndef {upper}_BODY_H
#define {upper}_BODY_H

/* The kernels' parameter block: one 8-byte slot per parameter, in declaration order
 * (exported_make_thunk fills it). */
typedef struct {name}_params {{ {fields} }} {name}_params;

/* Reads {", ".join(ins)}; assigns {", ".join(outs)}. */
#define {upper}_BODY \\
{_body_macro(d)}

/* One element in compute type TYPE: the inputs by value, the outputs into dlop_out. */
#define {upper}_ELEMENT(TYPE) \\
  EXPORTED_FN void {name}_element_##TYPE({args}TYPE *dlop_out, const void *dlop_block) {{ \\
    typedef TYPE T; \\
{params}    T {", ".join(outs)}; \\
    {{ {upper}_BODY }} \\
{stores}  }}

/* The element's inputs (the loop's operands after the outputs) and the outputs' stores. */
#define {upper}_INS(STORAGE, LOAD) {ins_macro}
#define {upper}_OUTS(STORAGE, STORE) {outs_macro}

#endif
"""


def _compute_types(d: dict) -> list:
    seen = []
    for dtype in d["dtypes"]:
        compute = _DTYPES[dtype][1]
        if compute not in seen:
            seen.append(compute)
    return seen


def _kernel_lines(d: dict, macro: str, lead: str) -> str:
    name, upper = d["name"], d["name"].upper()
    lines = []
    for dtype in d["dtypes"]:
        storage, compute, load, store = _DTYPES[dtype]
        lines.append(f"{macro}({name}_{lead}{dtype}, {'' if lead else name + '_params, '}"
                     f"{name}_element_{compute}, {storage}, {compute}, {load}, {store}, "
                     f"{len(d['outputs'])}, {upper}_INS, {upper}_OUTS)")
    return "\n".join(lines)


def _op_c(d: dict, target: str) -> str:
    name, upper = d["name"], d["name"].upper()
    ins, outs = d["inputs"], d["outputs"]
    doc = d["doc"] or (f"{name}({', '.join(ins)}) -> {', '.join(outs)}: elementwise with NumPy "
                       f"broadcasting, exported from dlop.elementwise. Body: {d['body'].strip()}")
    elements = "\n".join(f"{upper}_ELEMENT({c})" for c in _compute_types(d))
    kernels = _kernel_lines(d, "EXPORTED_CPU_KERNEL", "cpu_")
    table = ",\n    ".join(f"[DLOP_{t.upper()}] = {name}_cpu_{t}" for t in d["dtypes"])
    mask = " | ".join(f"DLOP_DTYPE_BIT(DLOP_{t.upper()})" for t in d["dtypes"])
    decls = ""
    if d["params"]:
        rows = []
        for p, kind, default in d["params"]:
            field = "f" if kind == "float" else "i"
            rows.append(f'    {{.name = "{p}", .kind = DLOP_PARAM_{kind.upper()}, .doc = "a {kind} '
                        f'parameter of the body", .default_value = {{.kind = DLOP_PARAM_{kind.upper()}, '
                        f'.count = 1, .u.{field} = {_param_literal(kind, default)}}}}}')
        decls = (f"/* Declared with a kind and a default: the host fills in the default and checks "
                 f"kinds. */\nstatic const dlop_param_decl {name}_param_decls[] = {{\n"
                 + ",\n".join(rows) + "};\n\n")
    fatbin = f"{target}_{name}_cuda_fatbin"
    return f"""/* {name}.c — the op {name}, exported by dlop.export_plugin from its dlop.elementwise
 * definition: its CPU kernels (the body of {name}_body.h per dtype), its parameters and its
 * descriptor. The type rule, shape rule, scalar body and thunks are exported_elementwise.h's. */
#include <math.h>

#include "exported_elementwise.h"
#include "{name}_body.h"

{elements}

/* The CPU kernels: name, element function, storage and compute types, load, store, outputs. */
{kernels}

static const dlop_elementwise_cpu_kernel {name}_cpu_kernels[DLOP_DTYPE_COUNT] = {{
    {table}}};

static const char *const {name}_inputs[] = {{{", ".join(f'"{i}"' for i in ins)}}};
static const char *const {name}_outputs[] = {{{", ".join(f'"{o}"' for o in outs)}}};

DLOP_FATBIN_DECLARE({fatbin}); /* {name}_cuda.cu, embedded by dlop_add_plugin */

static const exported_op {name}_exported = {{
    .name = "{name}",
    .num_inputs = {len(ins)},
    .num_outputs = {len(outs)},
    .inputs = {name}_inputs,
    .outputs = {name}_outputs,
    .dtypes = {upper}_DTYPES,
    .cpu_kernels = {name}_cpu_kernels,
    .cuda_fatbin = DLOP_FATBIN({fatbin}), /* NULL without nvcc */
    .cuda_prefix = "{name}",
    .body = DLOP_SCALAR_CODE({upper}_BODY), /* the scalar body fusion inlines: the same maths */
}};

{decls}const dlop_op_desc {name}_op = {{
    .struct_size = sizeof(dlop_op_desc),
    /* one launch per run, no allocation or synchronization; the same bits every time */
    .flags = DLOP_OP_DETERMINISTIC | DLOP_OP_CUDA_GRAPH_SAFE,
    .name = "{name}",
    .doc = {_c_string(doc)},
    .num_inputs = {len(ins)},
    .num_outputs = {len(outs)},
    .params = {f"{name}_param_decls" if d["params"] else "NULL"},
    .num_params = {len(d["params"])},
    .cpu_dtypes = {upper}_DTYPES,
    /* a build without nvcc declares no CUDA dtypes: the host refuses CUDA at compile time */
    .cuda_dtypes = DLOP_HAVE_CUDA_KERNELS ? {upper}_DTYPES : 0,
    .make_node = exported_make_node,
    .infer_shape = exported_infer_shape,
    .make_thunk = exported_make_thunk,
    .op_data = (void *)&{name}_exported,
    .scalar_body = exported_scalar_body, /* so compiled functions fuse it with its neighbours */
}};
""".replace(f"{upper}_DTYPES", f"({mask})")


def _op_cu(d: dict) -> str:
    name, upper = d["name"], d["name"].upper()
    elements = "\n".join(f"{upper}_ELEMENT({c})" for c in _compute_types(d))
    return f"""/* {name}_cuda.cu — the CUDA kernels of {name}, {name}_<dtype>, one per dtype: the body of
 * {name}_body.h on each element of the loop. dlop_add_plugin compiles this file with nvcc into a
 * fatbin embedded in the plugin (CMakeLists.txt: --fmad=false, as dlop's run-time compiler). */
#include "exported_cuda.cuh"
#include "{name}_body.h"

{elements}

/* name, parameter block, element function, storage and compute types, load, store, outputs */
{_kernel_lines(d, "EXPORTED_CUDA_KERNEL", "")}
"""


def _plugin_c(defs: list, name: str, version: str) -> str:
    externs = "\n".join(f"extern const dlop_op_desc {d['name']}_op; /* {d['name']}.c */" for d in defs)
    ops = ", ".join(f"&{d['name']}_op" for d in defs)
    doc = f"{name}: {', '.join(d['name'] for d in defs)}, exported from dlop.elementwise definitions"
    return f"""/* plugin.c — the plugin {name}'s entry point: its descriptor and dlop_plugin_init, the only
 * symbol it exports. */
#include "exported_elementwise.h"

{externs}

DLOP_PLUGIN_ENTRY("{name}", "{version}", {_c_string(doc)}, {ops})
"""


def _cmake(defs: list, name: str, version: str) -> str:
    sources = ["src/plugin.c"]
    for d in defs:
        sources += [f"src/{d['name']}.c", f"src/{d['name']}_cuda.cu"]
    listed = "\n  ".join(sources)
    return f"""# {name} — a dlop plugin exported by dlop.export_plugin from dlop.elementwise ops
# ({", ".join(d["name"] for d in defs)}). Builds against an installed dlop SDK, with no Python:
#   cmake -S . -B build -DCMAKE_PREFIX_PATH=<dlop prefix> && cmake --build build
#   <dlop prefix>/bin/dlop check build/lib{name}.so
cmake_minimum_required(VERSION 3.24)
project({name} VERSION {version} LANGUAGES C)
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE) # kernels want optimization
endif()
set(CMAKE_C_STANDARD 11)
include(GNUInstallDirs)

# dlop::headers and dlop_add_plugin(); -DDLOP_WITH_CUDA=OFF builds CPU kernels only.
find_package(dlop 0.1 REQUIRED)

# The CUDA kernels round each operation as dlop's run-time compiler does (no fused multiply-add).
set(DLOP_NVCC_FLAGS --fmad=false)
dlop_add_plugin({name} SOURCES
  {listed})
# As dlop compiles the body at run time: no contraction into fused multiply-adds (so exact
# maths gives the same bits), no errno from math functions. No -march=native: the .so is shipped.
target_compile_options({name} PRIVATE -Wall -O3 -ffp-contract=off -fno-math-errno -fno-trapping-math)

# Installed into the SDK's own prefix it is one of the bundled plugins, loaded by default;
# anywhere else, add the directory to DLOP_PLUGIN_PATH.
install(TARGETS {name} LIBRARY DESTINATION ${{CMAKE_INSTALL_LIBDIR}}/dlop/plugins)
"""


def _readme(defs: list, name: str, version: str) -> str:
    rows = "\n".join(f"| `{d['name']}({', '.join(d['inputs'])}"
                     + "".join(f"; {p}={v!r}" for p, _, v in d["params"])
                     + f") -> {', '.join(d['outputs'])}` | {' '.join(d['dtypes'])} |" for d in defs)
    files = "\n".join(f"| `src/{d['name']}_body.h` | {d['name']}'s body and element function (the maths: edit here) |\n"
                      f"| `src/{d['name']}.c` | its CPU kernels, parameters and descriptor |\n"
                      f"| `src/{d['name']}_cuda.cu` | its CUDA kernels |" for d in defs)
    return f"""# {name} {version}

A dlop plugin written by `dlop.export_plugin` from ops defined with `dlop.elementwise`:

| op | dtypes |
|---|---|
{rows}

Each op has NumPy broadcasting, one dtype throughout, runs on the CPU and on CUDA with any
strides, and declares its body as a scalar body, so compiled functions still fuse it.

    cmake -S . -B build -DCMAKE_PREFIX_PATH=$DLOP     # $DLOP: where the dlop SDK is installed
    cmake --build build
    $DLOP/bin/dlop check build/lib{name}.so
    DLOP_PLUGIN_PATH=$PWD/build python -c "import dlop; print(dlop.ops.{defs[0]['name']})"

| file | what it is |
|---|---|
| `CMakeLists.txt` | `find_package(dlop)` and `dlop_add_plugin({name} ...)` |
| `src/plugin.c` | the plugin's entry point |
| `src/exported_elementwise.h` | the type rule, shape rule, scalar body and thunks every op shares |
| `src/exported_cuda.cuh` | the CUDA kernels' shared part |
{files}

Register the plugin under another name than the Python definitions' process uses: an op defined
by `dlop.elementwise` and the same op from this plugin cannot be loaded into one process.
"""


def export_plugin(ops: Any, path: str, name: str = "myops", version: str = "0.1.0",
                  overwrite: bool = False) -> list:
    """Write a plugin project for ``ops`` (``dlop.elementwise`` ops, or their names) into the
    folder ``path``: C and CUDA sources and a CMakeLists.txt that builds ``lib<name>.so`` with
    ``find_package(dlop)``.  Returns the paths written.  Refuses (UnsupportedError) what cannot
    be exported: a dlop.Op with Python callbacks, a SourceModule kernel, a plugin's op.  An
    existing non-empty ``path`` is refused unless ``overwrite``."""
    if isinstance(ops, (str, Op)) or not isinstance(ops, Iterable):
        ops = [ops]
    defs = [_definition(op) for op in ops]
    if not defs:
        raise _errors.invalid("dlop.export_plugin: no ops given")
    if len({d["name"] for d in defs}) != len(defs):
        raise _errors.invalid("dlop.export_plugin: an op is given twice")
    for d in defs:
        _check_exportable(d)
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise _errors.invalid(f"dlop.export_plugin: name must be a C identifier (the library is "
                              f"lib<name>.so), got {name!r}")
    if not isinstance(version, str) or not _VERSION.match(version):
        raise _errors.invalid(f"dlop.export_plugin: version must be MAJOR.MINOR.PATCH, got {version!r}")
    if os.path.isdir(path) and os.listdir(path) and not overwrite:
        raise _errors.invalid(f"dlop.export_plugin: {path} exists and is not empty (pass "
                              "overwrite=True to write over it)")
    files = {"CMakeLists.txt": _cmake(defs, name, version),
             "README.md": _readme(defs, name, version),
             "src/plugin.c": _plugin_c(defs, name, version),
             "src/exported_elementwise.h": ELEMENTWISE_H,
             "src/exported_cuda.cuh": CUDA_CUH}
    for d in defs:
        files[f"src/{d['name']}_body.h"] = _body_h(d)
        files[f"src/{d['name']}.c"] = _op_c(d, name)
        files[f"src/{d['name']}_cuda.cu"] = _op_cu(d)
    written = []
    os.makedirs(os.path.join(path, "src"), exist_ok=True)
    for relative, text in files.items():
        target = os.path.join(path, relative)
        with open(target, "w") as f:
            f.write(text)
        written.append(target)
    return written
