/* plugin.c — the double plugin: its one op, double (y = 2x, Theano's PyCUDADoubleOp), declared
 * over the kernels of double_cpu.c and double_cuda.cu (its rules and thunk are the SDK's
 * elementwise ones), and the entry point. */
#include "double_plugin.h"

DLOP_FATBIN_DECLARE(dlop_double_double_cuda_fatbin);

/* pointwise (element i of y reads only element i of x), so y may overwrite x */
static const int32_t double_inplace[] = {0};

DLOP_ELEMENTWISE_OP(double_op, "double", 1, DOUBLE_DTYPES, double_inplace,
                    "double(x) -> y = 2 * x, elementwise (Theano's PyCUDADoubleOp). Same dtype and "
                    "shape as x; integers wrap on overflow like NumPy. Any strides, negative and "
                    "zero ones included.",
                    .broadcast = 0, /* y has x's shape */
                    .cpu_kernels = double_cpu_kernels,
                    .cuda_fatbin = DLOP_FATBIN(dlop_double_double_cuda_fatbin),
                    .cuda_kernel_prefix = "dlop_double", .cuda_rows = DLOP_ELEMENTWISE_ROWS,
                    .cuda_contiguous_vectors = 1); /* one 16-byte vector per thread (double_cuda.cu) */

DLOP_PLUGIN_ENTRY("double", "1.0.0",
                  "The double op: y = 2x on the CPU and CUDA, every float and integer dtype.",
                  &double_op)
