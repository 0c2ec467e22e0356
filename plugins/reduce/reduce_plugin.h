/* reduce_plugin.h — declarations shared by the files of the reduce plugin (sum, mean, max and
 * min along any axes, with keepdims): the op kinds, the parsed parameters, the collapsed
 * (kept dims, reduced dims) layout that CPU and CUDA kernels share, and the stage functions. */
#ifndef DLOP_REDUCE_PLUGIN_H
#define DLOP_REDUCE_PLUGIN_H

#include <dlop/kit/kernel_util.h>
#include <dlop/plugin.h>

#include "reduce_layout.h"

#define REDUCE_NUMERIC_DTYPES (DLOP_DTYPES_FLOAT | DLOP_DTYPES_INT)

typedef enum reduce_kind { REDUCE_SUM = 0, REDUCE_MEAN = 1, REDUCE_MAX = 2, REDUCE_MIN = 3 } reduce_kind;

/* What an op descriptor's op_data points to. */
typedef struct reduce_op_info {
  const char *name;
  reduce_kind kind;
  uint32_t dtypes;
} reduce_op_info;

/* The op's parameters, checked against an input rank: mask bit d set when axis d is reduced. */
typedef struct reduce_params {
  uint32_t mask;
  int keepdims;
} reduce_params;

/* The host table given to dlop_plugin_init (NULL before it ran). */
const dlop_host_api *reduce_host(void);

/* Parses axes and keepdims for an input of rank ndim; DLOP_TYPE_ERROR with a message naming
 * the axes and the rank when an axis is repeated or out of range. */
int reduce_parse_params(const reduce_op_info *info, const dlop_param_value *params,
                        int32_t num_params, int32_t ndim, reduce_params *out, char *error,
                        size_t error_size);
/* The output dtype of an op for an input dtype (integer sums give int64). */
dlop_dtype reduce_output_dtype(reduce_kind kind, dlop_dtype input);
/* The output shape (unknown dims propagate); DLOP_SHAPE_ERROR for max/min over an empty axis. */
int reduce_output_shape(const reduce_op_info *info, const reduce_params *p, int32_t ndim,
                        const int64_t *shape, int32_t *out_ndim, int64_t *out_shape,
                        char *error, size_t error_size);

int reduce_make_node(const dlop_node_args *args);
int reduce_infer_shape(const dlop_node_args *args);
int reduce_make_thunk(const dlop_thunk_args *args);
/* The reduction body (ABI 1.2, reduce_body.c): what fusion needs to reduce a fused group. */
int reduce_body(dlop_reduce_body_args *args);

/* The CPU kernel: reduces input into output over a layout from reduce_layout_init, of tensors
 * that passed the run's checks (so max and min never see an empty reduction). */
int reduce_cpu_run(const reduce_op_info *info, dlop_dtype dtype, const reduce_layout *layout,
                   const void *input, void *output, char *error, size_t error_size);

#endif
