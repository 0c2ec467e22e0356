/* plugin.c — the shape plugin's entry point and its four op descriptors: transpose,
 * dimshuffle, reshape and broadcast_to, views of their input (ABI 1.1 view_map and make_view):
 * no kernel, no allocation, every dtype, the same on the CPU and on CUDA. */
#include "shape_plugin.h"

static const dlop_host_api *host_table;

/* the one output is a view of the one input */
static const int32_t shape_view_map[] = {0};

static const int64_t flatten[] = {-1};

static const dlop_param_decl transpose_params[] = {
    {"axes", DLOP_PARAM_INTS, 0,
     "the input axes in their new order (negative ones count from the end); empty reverses them",
     {DLOP_PARAM_INTS, 0, {.ints = NULL}}},
};
static const dlop_param_decl dimshuffle_params[] = {
    {"pattern", DLOP_PARAM_INTS, 0,
     "input axes in their new order, -1 for a new axis of size 1; axes left out must have size "
     "1; empty drops every axis",
     {DLOP_PARAM_INTS, 0, {.ints = NULL}}},
};
static const dlop_param_decl reshape_params[] = {
    {"shape", DLOP_PARAM_INTS, 0, "the new shape; one entry may be -1 (inferred); [-1] flattens",
     {DLOP_PARAM_INTS, 1, {.ints = flatten}}},
};
static const dlop_param_decl broadcast_to_params[] = {
    {"shape", DLOP_PARAM_INTS, 0, "the target shape (NumPy broadcasting); empty is the 0-d shape",
     {DLOP_PARAM_INTS, 0, {.ints = NULL}}},
};

/* Views run no kernel: nothing to capture or to differ between runs. */
#define SHAPE_OP(op_name, op_doc, prefix)                                                     \
  {.struct_size = sizeof(dlop_op_desc), .flags = DLOP_OP_DETERMINISTIC | DLOP_OP_CUDA_GRAPH_SAFE, \
   .name = op_name, .doc = op_doc, .num_inputs = 1, .num_outputs = 1, .params = prefix##_params, \
   .num_params = 1, .cpu_dtypes = SHAPE_DTYPES, .cuda_dtypes = SHAPE_DTYPES,                  \
   .inplace_map = NULL, .view_map = shape_view_map, .make_node = prefix##_make_node,          \
   .infer_shape = prefix##_infer_shape, .make_thunk = NULL, .op_data = NULL,                  \
   .make_view = prefix##_make_view}

static const dlop_op_desc transpose_op = SHAPE_OP(
    "transpose",
    "transpose(x; axes) -> x with its axes permuted (NumPy's x.transpose(axes); empty axes, the "
    "default, reverses them: x.T). A view: no copy.",
    transpose);
static const dlop_op_desc dimshuffle_op = SHAPE_OP(
    "dimshuffle",
    "dimshuffle(x; pattern) -> Theano's dimshuffle: input axes in their new order, -1 for a new "
    "axis of size 1; dropped axes must have size 1. A view: no copy.",
    dimshuffle);
static const dlop_op_desc reshape_op = SHAPE_OP(
    "reshape",
    "reshape(x; shape) -> NumPy's reshape (one -1 inferred; the default [-1] flattens). A view "
    "when the input's strides allow it; otherwise the host copies the input contiguous first.",
    reshape);
static const dlop_op_desc broadcast_to_op = SHAPE_OP(
    "broadcast_to",
    "broadcast_to(x; shape) -> NumPy's broadcast_to: stride 0 along broadcast axes. A view: no "
    "copy (read-only in spirit: its elements alias).",
    broadcast_to);

static const dlop_op_desc *const shape_ops[] = {&transpose_op, &dimshuffle_op, &reshape_op,
                                                &broadcast_to_op};

static const dlop_plugin_desc shape_plugin = {
    .struct_size = sizeof(dlop_plugin_desc),
    .abi_version = DLOP_ABI_VERSION,
    .name = "shape",
    .version = "1.0.0",
    .doc = "Shape ops as views without copies: transpose, dimshuffle, reshape, broadcast_to.",
    .ops = shape_ops,
    .num_ops = 4,
};

DLOP_PLUGIN_EXPORT int dlop_plugin_init(const dlop_host_api *host, uint32_t host_abi_version,
                                        const dlop_plugin_desc **plugin, char *error,
                                        size_t error_size) {
  return dlop_plugin_init_standard(host, host_abi_version, plugin, error, error_size,
                                   &shape_plugin, &host_table);
}
