/* dlop/source_ops.h — ops defined from source at run time, inside this process: an elementwise
 * op from one scalar body of C (docs/source-ops.md). What it registers is what a plugin could:
 * an in-process plugin (registry.h, dlop_register_plugin) with one op. */
#ifndef DLOP_SOURCE_OPS_H
#define DLOP_SOURCE_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "export.h"
#include "op.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An elementwise op from a body. A struct_size struct: set struct_size to
 * sizeof(dlop_elementwise_source); fields are appended, never moved. */
typedef struct dlop_elementwise_source {
  uint32_t struct_size;
  /* DLOP_DTYPE_BIT mask of the dtypes it computes, on the CPU and on CUDA: floats and
   * integers, not bool; 0 means DLOP_DTYPES_FLOAT. Every input has one of them, the same one,
   * and every output has it too; float16 and bfloat16 are computed in float32. */
  uint32_t dtypes;
  const char *name; /* the op's name: [A-Za-z_][A-Za-z0-9_]*, not taken by another op */
  const char *doc;  /* NULL: one made from the body */
  /* C statements (a final ';' may be left out) that read the inputs and assign every output
   * by name, as a C compiler and NVRTC both accept them: docs/source-ops.md says what they may
   * use (T, the compute type; the <math.h> functions; the parameters by name). */
  const char *body;
  const char *const *inputs;  /* num_inputs names */
  const char *const *outputs; /* num_outputs names */
  /* Parameters, usable in the body by name: DLOP_PARAM_FLOAT (a double there) or
   * DLOP_PARAM_INT (an int64_t), each with its default. */
  const dlop_param_decl *params;
  int32_t num_inputs;  /* >= 1 */
  int32_t num_outputs; /* >= 1; inputs and outputs together at most 16 */
  int32_t num_params;
  int32_t reserved; /* 0 */
} dlop_elementwise_source;

/* Define the op and register it (dlop_find_op finds it; graphs, compiled functions, which fuse
 * it with its elementwise neighbours, and listings see it). Its CPU and CUDA kernels are the
 * generated kernel of a fused group holding its node alone, compiled at run time (the host's C
 * compiler, NVRTC) behind the run-time compilation cache. The body is compiled here with the C
 * compiler, for every dtype, before anything is registered, so a body that does not compile
 * leaves nothing behind: DLOP_INVALID_ARGUMENT with the compiler's messages against the body's
 * own lines (where no C compiler can be run, this check is skipped, and the first compile for
 * a device reports such errors the same way). Defining an op again with an identical source returns the op already defined;
 * another source under a taken name is DLOP_DUPLICATE (ops stay registered for the life of the
 * process). *op is the registry's descriptor. Other errors: DLOP_INVALID_ARGUMENT naming the
 * field that is wrong. */
DLOP_API int dlop_define_elementwise(const dlop_elementwise_source *source,
                                     const dlop_op_desc **op);

#ifdef __cplusplus
}
#endif

#endif
