/* plugin.c — the reduce plugin's entry point and op descriptors: sum, mean, max and min along
 * any axes (parameter axes, empty for all) with keepdims, on the CPU and CUDA, each with a
 * reduction body (reduce_body.c) so that fusion can feed it a group. */
#include "reduce_plugin.h"

static const dlop_host_api *host_table;

const dlop_host_api *reduce_host(void) { return host_table; }

static const dlop_param_decl reduce_params_decl[] = {
    {.name = "axes",
     .kind = DLOP_PARAM_INTS,
     .doc = "axes to reduce; negative values count from the end; empty (the default) reduces "
            "every axis. Repeated or out-of-range axes are a type error.",
     .default_value = {.kind = DLOP_PARAM_INTS, .count = 0, .u = {.ints = NULL}}},
    {.name = "keepdims",
     .kind = DLOP_PARAM_BOOL,
     .doc = "keep each reduced axis with size 1 (true) or drop it (false, the default)",
     .default_value = {.kind = DLOP_PARAM_BOOL, .count = 1, .u = {.i = 0}}},
};

static const reduce_op_info sum_info = {"sum", REDUCE_SUM, REDUCE_NUMERIC_DTYPES};
static const reduce_op_info mean_info = {"mean", REDUCE_MEAN, DLOP_DTYPES_FLOAT};
static const reduce_op_info max_info = {"max", REDUCE_MAX, REDUCE_NUMERIC_DTYPES};
static const reduce_op_info min_info = {"min", REDUCE_MIN, REDUCE_NUMERIC_DTYPES};

/* Every run of the same inputs gives the same bits (fixed summation orders on both devices,
 * no atomics); the CUDA thunk allocates nothing and never synchronizes (its two-pass partials
 * live in the fixed workspace), so it may be captured in a CUDA graph. */
#define REDUCE_OP(var, op_name, info_var, dtype_mask, doc_text)                             \
  static const dlop_op_desc var = {                                                         \
      .struct_size = sizeof(dlop_op_desc),                                                  \
      .flags = DLOP_OP_DETERMINISTIC | DLOP_OP_CUDA_GRAPH_SAFE,                             \
      .name = op_name,                                                                      \
      .doc = doc_text,                                                                      \
      .num_inputs = 1,                                                                      \
      .num_outputs = 1,                                                                     \
      .params = reduce_params_decl,                                                         \
      .num_params = 2,                                                                      \
      .cpu_dtypes = dtype_mask,                                                             \
      .cuda_dtypes = DLOP_HAVE_CUDA_KERNELS ? (dtype_mask) : 0,                             \
      .inplace_map = NULL,                                                                  \
      .view_map = NULL,                                                                     \
      .make_node = reduce_make_node,                                                        \
      .infer_shape = reduce_infer_shape,                                                    \
      .make_thunk = reduce_make_thunk,                                                      \
      .op_data = (void *)&info_var,                                                         \
      .reduce_body = reduce_body,                                                           \
  }

REDUCE_OP(sum_op, "sum", sum_info, REDUCE_NUMERIC_DTYPES,
          "sum(x; axes=(), keepdims=false): the sum over axes. Floats give their own dtype "
          "(float16 and bfloat16 accumulate in float32, float32 sums pairwise), integers give "
          "int64 (wrapping). An empty reduction gives 0. Deterministic.");
REDUCE_OP(mean_op, "mean", mean_info, DLOP_DTYPES_FLOAT,
          "mean(x; axes=(), keepdims=false): the sum over axes divided by the number of "
          "elements, in the accumulator type (float32 for 16-bit floats). Empty gives NaN.");
REDUCE_OP(max_op, "max", max_info, REDUCE_NUMERIC_DTYPES,
          "max(x; axes=(), keepdims=false): the largest element over axes; NaN propagates. "
          "Reducing an empty axis is a shape error (max has no identity).");
REDUCE_OP(min_op, "min", min_info, REDUCE_NUMERIC_DTYPES,
          "min(x; axes=(), keepdims=false): the smallest element over axes; NaN propagates. "
          "Reducing an empty axis is a shape error (min has no identity).");

static const dlop_op_desc *const reduce_ops[] = {&sum_op, &mean_op, &max_op, &min_op};

static const dlop_plugin_desc reduce_plugin = {
    .struct_size = sizeof(dlop_plugin_desc),
    .abi_version = DLOP_ABI_VERSION,
    .name = "reduce",
    .version = "1.0.0",
    .doc = "Reductions: sum, mean, max and min along any axes, with keepdims, on the CPU and "
           "CUDA, deterministic.",
    .ops = reduce_ops,
    .num_ops = 4,
};

DLOP_PLUGIN_EXPORT int dlop_plugin_init(const dlop_host_api *host, uint32_t host_abi_version,
                                        const dlop_plugin_desc **plugin, char *error,
                                        size_t error_size) {
  return dlop_plugin_init_standard(host, host_abi_version, plugin, error, error_size,
                                   &reduce_plugin, &host_table);
}
