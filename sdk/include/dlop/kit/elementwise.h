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
#define DLOP_ELEMENTWISE_OP(VAR, NAME, NUM_INPUTS, DTYPES, INPLACE, DOC, ...)                \
  static const dlop_elementwise_spec VAR##_spec = {                                        \
      .op_name = NAME, .host = dlop_plugin_host, .num_inputs = NUM_INPUTS,                 \
      .cpu_dtypes = DTYPES, .cuda_dtypes = DTYPES, __VA_ARGS__};                           \
  static const dlop_op_desc VAR = {                                                        \
      .struct_size = sizeof(dlop_op_desc), .flags = DLOP_OP_DETERMINISTIC | DLOP_OP_CUDA_GRAPH_SAFE, \
      .name = NAME, .doc = DOC, .num_inputs = NUM_INPUTS, .num_outputs = 1,                \
      .cpu_dtypes = DTYPES, .cuda_dtypes = DLOP_HAVE_CUDA_KERNELS ? (DTYPES) : 0,          \
      .inplace_map = INPLACE, .make_node = dlop_elementwise_op_make_node,                  \
      .infer_shape = dlop_elementwise_op_infer_shape,                                      \
      .make_thunk = dlop_elementwise_op_make_thunk, .op_data = (void *)&VAR##_spec}

#endif
