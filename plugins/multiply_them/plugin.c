/* plugin.c — the multiply_them plugin's entry point: checks the host's ABI and hands back the
 * descriptor of its one op, multiply_them (z = a * b, from Theano's GPU tutorial). */
#include "multiply_them_plugin.h"

static const dlop_host_api *host_table;

const dlop_host_api *multiply_them_host(void) { return host_table; }

/* pointwise (element i of y reads only element i of x), so y may overwrite x */
static const int32_t multiply_them_inplace[] = {0};

static const dlop_op_desc multiply_them_op = {
    .struct_size = sizeof(dlop_op_desc),
    .flags = DLOP_OP_DETERMINISTIC | DLOP_OP_CUDA_GRAPH_SAFE,
    .name = "multiply_them",
    .doc = "multiply_them(a, b) -> z = a * b, elementwise with NumPy broadcasting (from Theano's "
           "multiply_them tutorial). a and b must have the same dtype; z has it too, and the "
           "broadcast shape. Integers wrap on overflow like NumPy; float16 and bfloat16 round "
           "once. Any strides, negative and zero ones included.",
    .num_inputs = 2,
    .num_outputs = 1,
    .params = NULL,
    .num_params = 0,
    .cpu_dtypes = MULTIPLY_THEM_DTYPES,
    /* a build without CUDA kernels must not advertise them: make_thunk would always fail */
    .cuda_dtypes = DLOP_HAVE_CUDA_KERNELS ? MULTIPLY_THEM_DTYPES : 0,
    .inplace_map = multiply_them_inplace,
    .view_map = NULL,
    .make_node = multiply_them_make_node,
    .infer_shape = multiply_them_infer_shape,
    .make_thunk = multiply_them_make_thunk,
    .op_data = NULL,
};

static const dlop_op_desc *const multiply_them_ops[] = {&multiply_them_op};

static const dlop_plugin_desc multiply_them_plugin = {
    .struct_size = sizeof(dlop_plugin_desc),
    .abi_version = DLOP_ABI_VERSION,
    .name = "multiply_them",
    .version = "1.0.0",
    .doc = "The multiply_them op: z = a * b with broadcasting on the CPU and CUDA, every float and integer dtype.",
    .ops = multiply_them_ops,
    .num_ops = 1,
};

DLOP_PLUGIN_EXPORT int dlop_plugin_init(const dlop_host_api *host, uint32_t host_abi_version,
                                        const dlop_plugin_desc **plugin, char *error,
                                        size_t error_size) {
  return dlop_plugin_init_standard(host, host_abi_version, plugin, error, error_size,
                                   &multiply_them_plugin, &host_table);
}
