/* plugin.c — the exp plugin: the descriptor of its one op, exp (y = e^x), whose rules and
 * thunk are the SDK's elementwise ones over the kernels of exp_cpu.c and exp_cuda.cu, and the
 * entry point. */
#include "exp_plugin.h"

DLOP_FATBIN_DECLARE(dlop_exp_exp_cuda_fatbin);

static const dlop_elementwise_spec exp_spec = {
    .op_name = "exp",
    .host = dlop_plugin_host,
    .num_inputs = 1,
    .broadcast = 0, /* y has x's shape */
    .cpu_dtypes = EXP_DTYPES,
    .cuda_dtypes = EXP_DTYPES,
    .cpu_kernels = exp_cpu_kernels,
    .cuda_fatbin = DLOP_FATBIN(dlop_exp_exp_cuda_fatbin),
    .cuda_kernel_prefix = "dlop_exp",
    .cuda_contiguous_vectors = 2, /* EXP_CUDA_UNROLL in exp_cuda.cu */
    .cuda_rows = DLOP_ELEMENTWISE_ROWS,
};

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
    .cpu_dtypes = EXP_DTYPES,
    /* a build without CUDA kernels must not advertise them: make_thunk would always fail */
    .cuda_dtypes = DLOP_HAVE_CUDA_KERNELS ? EXP_DTYPES : 0,
    .inplace_map = exp_inplace,
    .make_node = dlop_elementwise_op_make_node,
    .infer_shape = dlop_elementwise_op_infer_shape,
    .make_thunk = dlop_elementwise_op_make_thunk,
    .op_data = (void *)&exp_spec,
};

static const dlop_op_desc *const exp_ops[] = {&exp_op};

DLOP_PLUGIN_ENTRY("exp", "1.0.0",
                  "The exp op: y = e^x on the CPU and CUDA, float16, bfloat16, float32 and float64.",
                  exp_ops)
