/* plugin.c — the double plugin: its one op, double (y = 2x, Theano's PyCUDADoubleOp), declared
 * over the kernels of double_cpu.c and double_cuda.cu (its rules and thunk are the SDK's
 * elementwise ones) with a scalar body for fusion, and the entry point. */
#include "double_plugin.h"

DLOP_FATBIN_DECLARE(dlop_double_double_cuda_fatbin);

/* The scalar body (ABI 1.2) for fusion: the CPU kernels' element expressions as text, 16-bit
 * floats in float32 (the host rounds once, as the kernels do). Exact: no math library. */
static int double_scalar_body(dlop_scalar_body_args *args) {
  static const char *const code[DLOP_DTYPE_COUNT] = {
      [DLOP_INT8] = DLOP_SCALAR_CODE(out0 = DOUBLE_INT8(in0);),
      [DLOP_INT16] = DLOP_SCALAR_CODE(out0 = DOUBLE_INT16(in0);),
      [DLOP_INT32] = DLOP_SCALAR_CODE(out0 = DOUBLE_INT32(in0);),
      [DLOP_INT64] = DLOP_SCALAR_CODE(out0 = DOUBLE_INT64(in0);),
      [DLOP_UINT8] = DLOP_SCALAR_CODE(out0 = DOUBLE_UINT8(in0);),
      [DLOP_FLOAT16] = DLOP_SCALAR_CODE(out0 = DOUBLE_FLOAT32(in0);),
      [DLOP_BFLOAT16] = DLOP_SCALAR_CODE(out0 = DOUBLE_FLOAT32(in0);),
      [DLOP_FLOAT32] = DLOP_SCALAR_CODE(out0 = DOUBLE_FLOAT32(in0);),
      [DLOP_FLOAT64] = DLOP_SCALAR_CODE(out0 = DOUBLE_FLOAT64(in0);),
  };
  int32_t dtype = args->inputs[0].dtype;
  return dlop_scalar_body_one_dtype(args, dtype >= 0 && dtype < DLOP_DTYPE_COUNT ? code[dtype] : NULL,
                                    DLOP_SCALAR_BODY_EXACT, 1);
}

/* pointwise (element i of y reads only element i of x), so y may overwrite x */
static const int32_t double_inplace[] = {0};

DLOP_ELEMENTWISE_OP_WITH_BODY(double_op, "double", 1, DOUBLE_DTYPES, double_inplace, double_scalar_body,
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
