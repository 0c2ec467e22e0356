/* source_elementwise.h — an elementwise op defined from a body at run time
 * (dlop_define_elementwise, dlop/source_ops.h): the op's own copy of its source, its stages
 * (source_elementwise_stages.c: the type and shape rules, the scalar body, make_thunk over the
 * fusion pass's generator) and the compiler's log read against the body's lines
 * (source_elementwise_log.c). Internal. */
#ifndef DLOP_SOURCE_ELEMENTWISE_H
#define DLOP_SOURCE_ELEMENTWISE_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* The code a scalar body may write (DLOP__FUSION_CODE_SIZE): the wrapped body must fit. */
#define DLOP__SOURCE_CODE_SIZE 4096

/* What the op owns, for the life of the process (the op's op_data). */
typedef struct dlop__source_elementwise {
  char *name, *doc, *body;
  char *body_file; /* "NAME (body)": the file name the compilers' messages give the body */
  char **inputs, **outputs;
  int32_t num_inputs, num_outputs, num_params;
  dlop_param_decl *params; /* names and docs owned */
  uint32_t dtypes;
  char *plugin_name, *origin;
  dlop_op_desc op;
  const dlop_op_desc *op_list[1];
  dlop_plugin_desc plugin;
} dlop__source_elementwise;

/* Whether op is one dlop_define_elementwise made (its scalar body reads its parameters as
 * run-time values: DLOP__SCALAR_BODY_RUNTIME_PARAMS). */
int dlop__source_elementwise_is(const dlop_op_desc *op);

/* Fills source->op's stages (make_node, infer_shape, make_thunk, scalar_body). */
void dlop__source_elementwise_stages(dlop__source_elementwise *source);

/* The body wrapped as a scalar body's code for dtype (inputs loaded as, outputs computed in,
 * its compute type T), each parameter read from the host's dlop_p<k> (k in declaration order:
 * DLOP__SCALAR_BODY_RUNTIME_PARAMS), into code. DLOP_INVALID_ARGUMENT when it does not fit in
 * size bytes. */
int dlop__source_elementwise_code(const dlop__source_elementwise *source, int32_t dtype,
                                  char *code, size_t size);

/* The compile's error for the user: "NAME: the body does not compile with COMPILER:" and the
 * log's lines about the body, each followed by the body line it names ("  2 | y = ..."), into
 * out; the whole log where no line names the body (an error in what wraps it: an unbalanced
 * brace). */
void dlop__source_elementwise_log(const dlop__source_elementwise *source, const char *compiler,
                                  const char *log, char *out, size_t size);

#endif
