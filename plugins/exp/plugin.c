/* plugin.c — the exp plugin: its one op, exp (y = e^x), declared over the kernels of exp_cpu.c
 * and exp_cuda.cu (its rules and thunk are the SDK's elementwise ones), and the entry point. */
#include "exp_plugin.h"

DLOP_FATBIN_DECLARE(dlop_exp_exp_cuda_fatbin);

/* pointwise (element i of y reads only element i of x), so y may overwrite x */
static const int32_t exp_inplace[] = {0};

DLOP_ELEMENTWISE_OP(exp_op, "exp", 1, EXP_DTYPES, exp_inplace,
                    "exp(x) -> y = e^x, elementwise. Float dtypes only; float16 and bfloat16 "
                    "compute in float32 and round once. exp(-inf) = 0, exp(+inf) = +inf, NaN stays "
                    "NaN, overflow gives +inf. Any strides, negative and zero ones included.",
                    .broadcast = 0, /* y has x's shape */
                    .cpu_kernels = exp_cpu_kernels, .cuda_rows = DLOP_ELEMENTWISE_ROWS,
                    .cuda_fatbin = DLOP_FATBIN(dlop_exp_exp_cuda_fatbin), .cuda_kernel_prefix = "dlop_exp",
                    .cuda_contiguous_vectors = 2); /* EXP_CUDA_UNROLL in exp_cuda.cu */

DLOP_PLUGIN_ENTRY("exp", "1.0.0",
                  "The exp op: y = e^x on the CPU and CUDA, float16, bfloat16, float32 and float64.",
                  &exp_op)
