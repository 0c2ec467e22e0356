/* dlop/kit/elementwise.h — everything the C side of an elementwise op needs, in one include:
 * the thunk from a spec, the type and shape rules, CPU kernels from an element function, the
 * plugin entry point, the rest of the kit, and DLOP_ELEMENTWISE_OP, which declares an op of one
 * dtype and no parameters. The op's .cu file includes cuda_kernel_util.cuh. */
#ifndef DLOP_ELEMENTWISE_H
#define DLOP_ELEMENTWISE_H

#include "kernel_util.h"       /* errors, broadcasting, tensor checks, loops, CUDA launches */
#include "elementwise_thunk.h" /* dlop_elementwise_spec and its make_thunk */
#include "elementwise_node.h"  /* make_node and infer_shape of an op of one dtype */
#include "elementwise_cpu.h"   /* DLOP_CPU_UNARY_KERNEL, DLOP_CPU_BINARY_KERNEL */
#include "plugin_entry.h"      /* DLOP_PLUGIN_ENTRY: the plugin descriptor and dlop_plugin_init */

/* Declares an elementwise op of one dtype throughout and without parameters: its spec
 * VAR##_spec (op_name NAME, NUM_INPUTS inputs, DTYPES on both devices, the host table that
 * DLOP_PLUGIN_ENTRY keeps, then the spec fields given after DOC: .broadcast, .cpu_kernels,
 * .cuda_...) and its descriptor VAR: the kit's three stages over the spec, one output, DOC,
 * INPLACE (an inplace_map or NULL), no CUDA dtypes in a build without CUDA kernels, and the
 * flags the kit's thunk earns (deterministic; one launch, no allocation and no synchronization:
 * safe in a CUDA graph). An op with parameters or rules of its own writes both (the template). */
#define DLOP_ELEMENTWISE_OP(VAR, NAME, NUM_INPUTS, DTYPES, INPLACE, DOC, ...) \
  DLOP_ELEMENTWISE_OP_WITH_BODY(VAR, NAME, NUM_INPUTS, DTYPES, INPLACE, NULL, DOC, __VA_ARGS__)

/* The same, with SCALAR_BODY (a dlop_scalar_body_fn, ABI 1.2) as the descriptor's scalar_body,
 * so that the host may fuse the op with its neighbours. */
#define DLOP_ELEMENTWISE_OP_WITH_BODY(VAR, NAME, NUM_INPUTS, DTYPES, INPLACE, SCALAR_BODY, DOC, ...) \
  static const dlop_elementwise_spec VAR##_spec = {                                        \
      .op_name = NAME, .host = dlop_plugin_host, .num_inputs = NUM_INPUTS,                 \
      .cpu_dtypes = DTYPES, .cuda_dtypes = DTYPES, __VA_ARGS__};                           \
  static const dlop_op_desc VAR = {                                                        \
      .struct_size = sizeof(dlop_op_desc), .flags = DLOP_OP_DETERMINISTIC | DLOP_OP_CUDA_GRAPH_SAFE, \
      .name = NAME, .doc = DOC, .num_inputs = NUM_INPUTS, .num_outputs = 1,                \
      .cpu_dtypes = DTYPES, .cuda_dtypes = DLOP_HAVE_CUDA_KERNELS ? (DTYPES) : 0,          \
      .inplace_map = INPLACE, .make_node = dlop_elementwise_op_make_node,                  \
      .infer_shape = dlop_elementwise_op_infer_shape,                                      \
      .make_thunk = dlop_elementwise_op_make_thunk, .op_data = (void *)&VAR##_spec,        \
      .scalar_body = SCALAR_BODY}

/* The text of a statement after macro expansion: a scalar body written with the macros the
 * op's CPU kernels use, DLOP_SCALAR_CODE(out0 = MY_OP(in0);), is the kernels' own expression. */
#define DLOP_SCALAR_CODE_TEXT_(...) #__VA_ARGS__
#define DLOP_SCALAR_CODE(...) DLOP_SCALAR_CODE_TEXT_(__VA_ARGS__)

/* Fills a scalar body's results for an op of one dtype throughout: code (static text), flags,
 * and float32 as the compute dtype of every input and output when the dtype is float16 or
 * bfloat16 and in_float32 is set (the host converts around the code). */
static inline int dlop_scalar_body_one_dtype(dlop_scalar_body_args *args, const char *code,
                                             uint32_t flags, int in_float32) {
  int32_t dtype = args->num_inputs > 0 ? args->inputs[0].dtype : -1, i;
  if (code == NULL) {
    dlop_set_error(args->error, args->error_size, "%s: no scalar body for dtype %s", args->op->name,
                   dtype >= 0 && dtype < DLOP_DTYPE_COUNT ? dlop_dtype_name((dlop_dtype)dtype) : "?");
    return DLOP_UNSUPPORTED;
  }
  if (in_float32 && (dtype == DLOP_FLOAT16 || dtype == DLOP_BFLOAT16)) {
    for (i = 0; i < args->num_inputs; i++) args->input_compute_dtypes[i] = DLOP_FLOAT32;
    for (i = 0; i < args->num_outputs; i++) args->output_compute_dtypes[i] = DLOP_FLOAT32;
  }
  args->code = code;
  args->flags = flags;
  return DLOP_OK;
}

#endif
