/* matmul_reference.h — the blas plugin's ops (dot, matmul, gemm) computed naively in double on
 * host tensors of any strides: the reference both the CPU and the CUDA blas tests compare to. */
#ifndef DLOP_TEST_MATMUL_REFERENCE_H
#define DLOP_TEST_MATMUL_REFERENCE_H

#include "dlop.h"

/* gemm's parameters (dot and matmul have none of these). */
typedef struct dlop_test_gemm_params {
  double alpha, beta;
  int trans_a, trans_b;
} dlop_test_gemm_params;

/* The values of op's parameters into values: its defaults, and g's alpha, beta, trans_a and
 * trans_b (gemm's first four parameters) when g is not NULL. */
void dlop_test_gemm_param_values(const dlop_op_desc *op, const dlop_test_gemm_params *g,
                                 dlop_param_value *values);

/* NumPy's matmul (dot for ranks <= 2 is the same) of a and b, or, when op is "gemm",
 * alpha * op(a) op(b) + beta * c (c broadcast from rank 0-2; beta 0 ignores c, NaN included).
 * Writes the elements of out_type's shape in C order into out. c is NULL for dot/matmul. */
void dlop_test_matmul_reference(const char *op, const dlop_test_gemm_params *g,
                                const dlop_tensor *a, const dlop_tensor *b, const dlop_tensor *c,
                                const dlop_type *out_type, double *out);

#endif
