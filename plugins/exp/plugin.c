/* plugin.c — the exp plugin's entry point: checks the host's ABI and hands back the
 * descriptor of its one op, exp (y = e^x). */
#include "exp_plugin.h"

static const dlop_host_api *host_table;

const dlop_host_api *exp_host(void) { return host_table; }

/* pointwise (element i of y reads only element i of x), so y may overwrite x */
static const int32_t exp_inplace[] = {0};

static const dlop_op_desc exp_op = {
    .struct_size = sizeof(dlop_op_desc),
    .flags = DLOP_OP_DETERMINISTIC | DLOP_OP_CUDA_GRAPH_SAFE,
    .name = "exp",
    .doc = "exp(x) -> y = e^x, elementwise. Float dtypes only; float16 and bfloat16 compute in "
           "float32 and round once. exp(-inf) = 0, exp(+inf) = +inf, NaN stays NaN, overflow "
           "gives +inf. Any strides, negative and zero ones included.",
    .num_inputs = 1,
    .num_outputs = 1,
    .params = NULL,
    .num_params = 0,
    .cpu_dtypes = EXP_DTYPES,
    /* a build without CUDA kernels must not advertise them: make_thunk would always fail */
    .cuda_dtypes = DLOP_HAVE_CUDA_KERNELS ? EXP_DTYPES : 0,
    .inplace_map = exp_inplace,
    .view_map = NULL,
    .make_node = exp_make_node,
    .infer_shape = exp_infer_shape,
    .make_thunk = exp_make_thunk,
    .op_data = NULL,
};

static const dlop_op_desc *const exp_ops[] = {&exp_op};

static const dlop_plugin_desc exp_plugin = {
    .struct_size = sizeof(dlop_plugin_desc),
    .abi_version = DLOP_ABI_VERSION,
    .name = "exp",
    .version = "1.0.0",
    .doc = "The exp op: y = e^x on the CPU and CUDA, float16, bfloat16, float32 and float64.",
    .ops = exp_ops,
    .num_ops = 1,
};

DLOP_PLUGIN_EXPORT int dlop_plugin_init(const dlop_host_api *host, uint32_t host_abi_version,
                                        const dlop_plugin_desc **plugin, char *error,
                                        size_t error_size) {
  return dlop_plugin_init_standard(host, host_abi_version, plugin, error, error_size,
                                   &exp_plugin, &host_table);
}
