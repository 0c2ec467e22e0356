/* plugin.c — the double plugin: the descriptor of its one op, double (y = 2x, Theano's
 * PyCUDADoubleOp), whose rules and thunk are the SDK's elementwise ones over the kernels of
 * double_cpu.c and double_cuda.cu, and the entry point. */
#include "double_plugin.h"

DLOP_FATBIN_DECLARE(dlop_double_double_cuda_fatbin);

static const dlop_elementwise_spec double_spec = {
    .op_name = "double",
    .host = dlop_plugin_host,
    .num_inputs = 1,
    .broadcast = 0, /* y has x's shape */
    .cpu_dtypes = DOUBLE_DTYPES,
    .cuda_dtypes = DOUBLE_DTYPES,
    .cpu_kernels = double_cpu_kernels,
    .cuda_fatbin = DLOP_FATBIN(dlop_double_double_cuda_fatbin),
    .cuda_kernel_prefix = "dlop_double",
    .cuda_contiguous_vectors = 1, /* one 16-byte vector per thread (double_cuda.cu) */
    .cuda_rows = DLOP_ELEMENTWISE_ROWS,
};

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
    .cpu_dtypes = DOUBLE_DTYPES,
    /* a build without CUDA kernels must not advertise them: make_thunk would always fail */
    .cuda_dtypes = DLOP_HAVE_CUDA_KERNELS ? DOUBLE_DTYPES : 0,
    .inplace_map = double_inplace,
    .make_node = dlop_elementwise_op_make_node,
    .infer_shape = dlop_elementwise_op_infer_shape,
    .make_thunk = dlop_elementwise_op_make_thunk,
    .op_data = (void *)&double_spec,
};

static const dlop_op_desc *const double_ops[] = {&double_op};

DLOP_PLUGIN_ENTRY("double", "1.0.0",
                  "The double op: y = 2x on the CPU and CUDA, every float and integer dtype.",
                  double_ops)
