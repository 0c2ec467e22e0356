/* plugin.c — the multiply_them plugin: its one op, multiply_them (z = a * b, from Theano's GPU
 * tutorial), declared over the kernels of multiply_them_cpu.c and multiply_them_cuda.cu (its
 * rules and thunk are the SDK's elementwise ones) with a scalar body for fusion, and the entry
 * point. */
#include "multiply_them_plugin.h"

DLOP_FATBIN_DECLARE(dlop_multiply_them_multiply_them_cuda_fatbin);

/* The scalar body (ABI 1.2) for fusion: the CPU kernels' element expressions as text, 16-bit
 * floats in float32 (the host rounds once, as the kernels do). Exact: no math library. */
static int multiply_them_scalar_body(dlop_scalar_body_args *args) {
  static const char *const code[DLOP_DTYPE_COUNT] = {
      [DLOP_INT8] = DLOP_SCALAR_CODE(out0 = MUL_INT8(in0, in1);),
      [DLOP_INT16] = DLOP_SCALAR_CODE(out0 = MUL_INT16(in0, in1);),
      [DLOP_INT32] = DLOP_SCALAR_CODE(out0 = MUL_INT32(in0, in1);),
      [DLOP_INT64] = DLOP_SCALAR_CODE(out0 = MUL_INT64(in0, in1);),
      [DLOP_UINT8] = DLOP_SCALAR_CODE(out0 = MUL_UINT8(in0, in1);),
      [DLOP_FLOAT16] = DLOP_SCALAR_CODE(out0 = MUL_FLOAT(in0, in1);),
      [DLOP_BFLOAT16] = DLOP_SCALAR_CODE(out0 = MUL_FLOAT(in0, in1);),
      [DLOP_FLOAT32] = DLOP_SCALAR_CODE(out0 = MUL_FLOAT(in0, in1);),
      [DLOP_FLOAT64] = DLOP_SCALAR_CODE(out0 = MUL_FLOAT(in0, in1);),
  };
  int32_t dtype = args->inputs[0].dtype;
  return dlop_scalar_body_one_dtype(args, dtype >= 0 && dtype < DLOP_DTYPE_COUNT ? code[dtype] : NULL,
                                    DLOP_SCALAR_BODY_EXACT, 1);
}

/* pointwise (element i of z reads only element i of a and b), so z may overwrite a */
static const int32_t multiply_them_inplace[] = {0};

DLOP_ELEMENTWISE_OP_WITH_BODY(
    multiply_them_op, "multiply_them", 2, MULTIPLY_THEM_DTYPES, multiply_them_inplace,
    multiply_them_scalar_body,
    "multiply_them(a, b) -> z = a * b, elementwise with NumPy broadcasting (from Theano's "
    "multiply_them tutorial). a and b must have the same dtype; z has it too, and the broadcast "
    "shape. Integers wrap on overflow like NumPy; float16 and bfloat16 round once. Any strides, "
    "negative and zero ones included.",
    .broadcast = 1, .cpu_kernels = multiply_them_cpu_kernels, /* z: a and b's broadcast shape */
    .cuda_fatbin = DLOP_FATBIN(dlop_multiply_them_multiply_them_cuda_fatbin),
    .cuda_kernel_prefix = "dlop_multiply_them", .cuda_rows = DLOP_ELEMENTWISE_ROWS,
    .cuda_contiguous_vectors = 1); /* one 16-byte vector per thread (multiply_them_cuda.cu) */

DLOP_PLUGIN_ENTRY("multiply_them", "1.0.0",
                  "The multiply_them op: z = a * b with broadcasting on the CPU and CUDA, every "
                  "float and integer dtype.",
                  &multiply_them_op)
