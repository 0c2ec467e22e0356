/* bench_graph.h — the same op through the public graph API (dlop_graph_apply,
 * dlop_function_compile, dlop_function_run), to measure what a user's call costs on top of
 * the kernel: output allocation from the pool, argument checks, scheduling. */
#ifndef DLOP_BENCH_GRAPH_H
#define DLOP_BENCH_GRAPH_H

#include <stddef.h>

#include "dlop.h"

/* A one-node function op_name(inputs...) compiled for device, with static shapes taken from
 * the example arrays. On failure returns a status and writes a message into error. */
int bench_function_prepare(const char *op_name, dlop_device device, dlop_array *const *inputs,
                           int32_t num_inputs, dlop_function **function, char *error,
                           size_t error_size);

/* One dlop_function_run; the single output is handed back in *output (caller releases). */
int bench_function_call(dlop_function *function, dlop_array *const *inputs, int32_t num_inputs,
                        dlop_stream *stream, dlop_array **output, char *error, size_t error_size);

#endif
