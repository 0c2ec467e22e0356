/* fusion_alone.h — an op's scalar body compiled on its own into the kernel that fusion makes of
 * a group holding just that node: the same body query and checks (fusion_group.c), generator
 * (fusion_source.c), compile, options and cache (function_fuse.c, jit.h) and thunk
 * (fusion_thunk.c). For dlop check, which runs that kernel against the op's own thunk
 * (sdk/check/check_tests_body.c). Several nodes of one op (one per dtype) go into one module,
 * so one compile serves them all. Internal: dlop-check links the runtime statically
 * (dlop_internal) to reach it; no part of the public ABI. */
#ifndef DLOP_FUSION_ALONE_H
#define DLOP_FUSION_ALONE_H

#include <stddef.h>
#include <stdint.h>

#include "dlop.h"

typedef struct dlop__fusion_alone dlop__fusion_alone;

/* One node of the op: make_node's input and output types (static types, as a compiled
 * function holds them; the body sees their dtypes). */
typedef struct dlop__fusion_alone_node {
  const dlop_type *inputs;  /* num_inputs types */
  const dlop_type *outputs; /* op->num_outputs types */
} dlop__fusion_alone_node;

/* Whether device's run-time compiler can be used (the host's C compiler on the CPU, NVRTC on
 * CUDA): 1, or 0 with the reason in why. */
int dlop__fusion_alone_available(dlop_device device, char *why, size_t why_size);

/* Asks op's scalar_body for each of the count nodes (params: op->num_params values in
 * declaration order; num_inputs inputs per node) and compiles the kernels of those it gives a
 * usable body for into one module for device, as fusion would. DLOP_OK with *result also when
 * some nodes got no kernel (dlop__fusion_alone_kernel says why for each). Otherwise a status
 * with why in error: DLOP_INVALID_ARGUMENT with the compiler's log for a source it rejects,
 * DLOP_NOT_FOUND for a missing compiler, DLOP_PLUGIN_ERROR for preludes of one name that
 * differ, a device or memory error. On CUDA the device's primary context must be current. */
int dlop__fusion_alone_compile(const dlop_op_desc *op, const dlop_param_value *params,
                               int32_t num_inputs, int32_t count,
                               const dlop__fusion_alone_node *nodes, dlop_device device,
                               dlop__fusion_alone **result, char *error, size_t error_size);

/* Node k's kernel: DLOP_OK with a thunk whose run is the generated kernel's (the op's inputs
 * and outputs as its own thunk takes them, any strides; the stream on CUDA; no workspace, no
 * destroy) and the body's DLOP_SCALAR_BODY_* flags. Otherwise the status of the body query
 * (DLOP_UNSUPPORTED: the op does not fuse these types; DLOP_PLUGIN_ERROR: a body the host
 * cannot use) with its message in *message. Both live as long as alone. */
int dlop__fusion_alone_kernel(const dlop__fusion_alone *alone, int32_t k, dlop_thunk *thunk,
                              uint32_t *flags, const char **message);

void dlop__fusion_alone_free(dlop__fusion_alone *alone);

#endif
