/* plugin.c — the plugin's entry point and its descriptors: what the host reads when it loads
 * libscale_add.so. The op's rules and kernels live in the other files of src/. */
#include "scale_add.h"

static const dlop_host_api *host_table;

const dlop_host_api *scale_add_host(void) { return host_table; }

/* Parameters are declared once, with a kind and a default; the host fills in defaults and
 * checks kinds, so the stages always see num_params values in this order. */
static const dlop_param_decl scale_add_params[] = {
    {.name = "alpha",
     .kind = DLOP_PARAM_FLOAT,
     .doc = "the factor x is multiplied by",
     .default_value = {.kind = DLOP_PARAM_FLOAT, .count = 1, .u.f = 1.0}},
};

static const dlop_op_desc scale_add_op = {
    .struct_size = sizeof(dlop_op_desc), /* lets a newer host read this older layout */
    /* one kernel launch per run, no allocation or synchronization: safe in a CUDA graph;
     * each element is computed the same way every time: deterministic */
    .flags = DLOP_OP_DETERMINISTIC | DLOP_OP_CUDA_GRAPH_SAFE,
    .name = "scale_add",
    .doc = "scale_add(x, y; alpha=1.0) -> z = alpha * x + y, elementwise with NumPy broadcasting. "
           "x and y have the same dtype (float32 or float64); z has it too, and the broadcast "
           "shape. The product is rounded before the sum (no fused multiply-add), so the CPU and "
           "CUDA agree bit for bit. Any strides, negative and zero ones included.",
    .num_inputs = 2,
    .num_outputs = 1,
    .params = scale_add_params,
    .num_params = 1,
    .cpu_dtypes = SCALE_ADD_DTYPES,
    /* a build without nvcc (DLOP_WITH_CUDA=OFF) has no kernels, so it declares no CUDA dtypes:
     * the host then refuses CUDA at compile time instead of failing at make_thunk */
    .cuda_dtypes = DLOP_HAVE_CUDA_KERNELS ? SCALE_ADD_DTYPES : 0,
    .inplace_map = NULL,
    .view_map = NULL, /* not a view op (ABI 1.1 view ops set it and make_view) */
    .make_node = scale_add_make_node,
    .infer_shape = scale_add_infer_shape,
    .make_thunk = scale_add_make_thunk,
    .op_data = NULL,
};

static const dlop_op_desc *const scale_add_ops[] = {&scale_add_op};

static const dlop_plugin_desc scale_add_plugin = {
    .struct_size = sizeof(dlop_plugin_desc),
    .abi_version = DLOP_ABI_VERSION,
    .name = "scale_add",
    .version = "1.0.0",
    .doc = "The dlop plugin template: scale_add (z = alpha * x + y) on the CPU and CUDA.",
    .ops = scale_add_ops,
    .num_ops = 1,
};

/* The one exported symbol: checks the host's ABI major, keeps the host table, and hands back
 * the descriptor (which lives as long as the plugin is loaded: it is static). */
DLOP_PLUGIN_EXPORT int dlop_plugin_init(const dlop_host_api *host, uint32_t host_abi_version,
                                        const dlop_plugin_desc **plugin, char *error,
                                        size_t error_size) {
  return dlop_plugin_init_standard(host, host_abi_version, plugin, error, error_size,
                                   &scale_add_plugin, &host_table);
}
