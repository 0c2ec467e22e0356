/* plugin.c — the double plugin's entry point: checks the host's ABI and hands back the
 * descriptor of its one op, double (y = 2x, Theano's PyCUDADoubleOp). */
#include "double_plugin.h"

static const dlop_host_api *host_table;

const dlop_host_api *double_host(void) { return host_table; }

/* pointwise (element i of y reads only element i of x), so y may overwrite x */
static const int32_t double_inplace[] = {0};

static const dlop_op_desc double_op = {
    .struct_size = sizeof(dlop_op_desc),
    .flags = DLOP_OP_DETERMINISTIC | DLOP_OP_CUDA_GRAPH_SAFE,
    .name = "double",
    .doc = "double(x) -> y = 2 * x, elementwise (Theano's PyCUDADoubleOp). Same dtype and shape "
           "as x; integers wrap on overflow like NumPy. Any strides, negative and zero ones "
           "included.",
    .num_inputs = 1,
    .num_outputs = 1,
    .params = NULL,
    .num_params = 0,
    .cpu_dtypes = DOUBLE_DTYPES,
    /* a build without CUDA kernels must not advertise them: make_thunk would always fail */
    .cuda_dtypes = DLOP_HAVE_CUDA_KERNELS ? DOUBLE_DTYPES : 0,
    .inplace_map = double_inplace,
    .view_map = NULL,
    .make_node = double_make_node,
    .infer_shape = double_infer_shape,
    .make_thunk = double_make_thunk,
    .op_data = NULL,
};

static const dlop_op_desc *const double_ops[] = {&double_op};

static const dlop_plugin_desc double_plugin = {
    .struct_size = sizeof(dlop_plugin_desc),
    .abi_version = DLOP_ABI_VERSION,
    .name = "double",
    .version = "1.0.0",
    .doc = "The double op: y = 2x on the CPU and CUDA, every float and integer dtype.",
    .ops = double_ops,
    .num_ops = 1,
};

DLOP_PLUGIN_EXPORT int dlop_plugin_init(const dlop_host_api *host, uint32_t host_abi_version,
                                        const dlop_plugin_desc **plugin, char *error,
                                        size_t error_size) {
  return dlop_plugin_init_standard(host, host_abi_version, plugin, error, error_size,
                                   &double_plugin, &host_table);
}
