/* plugin.c — the multiply_them plugin: the descriptor of its one op, multiply_them (z = a * b,
 * from Theano's GPU tutorial), whose rules and thunk are the SDK's elementwise ones over the
 * kernels of multiply_them_cpu.c and multiply_them_cuda.cu, and the entry point. */
#include "multiply_them_plugin.h"

DLOP_FATBIN_DECLARE(dlop_multiply_them_multiply_them_cuda_fatbin);

static const dlop_elementwise_spec multiply_them_spec = {
    .op_name = "multiply_them",
    .host = dlop_plugin_host,
    .num_inputs = 2,
    .broadcast = 1, /* z has the broadcast shape of a and b */
    .cpu_dtypes = MULTIPLY_THEM_DTYPES,
    .cuda_dtypes = MULTIPLY_THEM_DTYPES,
    .cpu_kernels = multiply_them_cpu_kernels,
    .cuda_fatbin = DLOP_FATBIN(dlop_multiply_them_multiply_them_cuda_fatbin),
    .cuda_kernel_prefix = "dlop_multiply_them",
    .cuda_contiguous_vectors = 1, /* one 16-byte vector per thread (multiply_them_cuda.cu) */
    .cuda_rows = DLOP_ELEMENTWISE_ROWS,
};

/* pointwise (element i of z reads only element i of a and b), so z may overwrite a */
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
    .cpu_dtypes = MULTIPLY_THEM_DTYPES,
    /* a build without CUDA kernels must not advertise them: make_thunk would always fail */
    .cuda_dtypes = DLOP_HAVE_CUDA_KERNELS ? MULTIPLY_THEM_DTYPES : 0,
    .inplace_map = multiply_them_inplace,
    .make_node = dlop_elementwise_op_make_node,
    .infer_shape = dlop_elementwise_op_infer_shape,
    .make_thunk = dlop_elementwise_op_make_thunk,
    .op_data = (void *)&multiply_them_spec,
};

static const dlop_op_desc *const multiply_them_ops[] = {&multiply_them_op};

DLOP_PLUGIN_ENTRY("multiply_them", "1.0.0",
                  "The multiply_them op: z = a * b with broadcasting on the CPU and CUDA, every "
                  "float and integer dtype.",
                  multiply_them_ops)
