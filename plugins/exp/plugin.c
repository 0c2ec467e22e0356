/* plugin.c — the exp plugin: its one op, exp (y = e^x), declared over the kernels of exp_cpu.c
 * and exp_cuda.cu (its rules and thunk are the SDK's elementwise ones) with a scalar body for
 * fusion, and the entry point. */
#include "exp_plugin.h"

DLOP_FATBIN_DECLARE(dlop_exp_exp_cuda_fatbin);

/* exp_math.h's text (dlop_embed_text in CMakeLists.txt): the scalar body's prelude. */
extern const char exp_math_prelude[] __attribute__((visibility("hidden")));

/* The scalar body (ABI 1.2) for fusion: exp_math.h's exp_of_float / exp_of_double, the functions
 * the kernels call on each device, 16-bit floats in float32 (the host rounds once, as the
 * kernels do). Not declared exact: on CUDA it is the math library's expf. */
static int exp_scalar_body(dlop_scalar_body_args *args) {
  int32_t dtype = args->inputs[0].dtype;
  const char *code = dtype == DLOP_FLOAT64 ? "out0 = exp_of_double(in0);"
                     : (DLOP_DTYPES_FLOAT & DLOP_DTYPE_BIT(dtype)) ? "out0 = exp_of_float(in0);"
                                                                  : NULL;
  int status = dlop_scalar_body_one_dtype(args, code, 0, 1);
  if (status == DLOP_OK) {
    args->prelude = exp_math_prelude;
    args->prelude_name = "exp.math.1";
  }
  return status;
}

/* pointwise (element i of y reads only element i of x), so y may overwrite x */
static const int32_t exp_inplace[] = {0};

DLOP_ELEMENTWISE_OP_WITH_BODY(exp_op, "exp", 1, EXP_DTYPES, exp_inplace, exp_scalar_body,
                    "exp(x) -> y = e^x, elementwise. Float dtypes only; float16 and bfloat16 "
                    "compute in float32 and round once. exp(-inf) = 0, exp(+inf) = +inf, NaN stays "
                    "NaN, overflow gives +inf. Any strides, negative and zero ones included.",
                    .broadcast = 0, /* y has x's shape */
                    .cpu_kernels = exp_cpu_kernels, .cuda_rows = DLOP_ELEMENTWISE_ROWS,
                    .cuda_fatbin = DLOP_FATBIN(dlop_exp_exp_cuda_fatbin), .cuda_kernel_prefix = "dlop_exp",
                    .cuda_contiguous_vectors = 2, /* EXP_CUDA_UNROLL in exp_cuda.cu */
                    .cuda_chunk_dtypes = DLOP_DTYPE_BIT(DLOP_FLOAT32) | DLOP_DTYPE_BIT(DLOP_FLOAT64));

DLOP_PLUGIN_ENTRY("exp", "1.0.0",
                  "The exp op: y = e^x on the CPU and CUDA, float16, bfloat16, float32 and float64.",
                  &exp_op)
