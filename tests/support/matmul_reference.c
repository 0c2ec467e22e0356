/* matmul_reference.c — the naive double-precision reference for dot/matmul/gemm, and their
 * parameter values, shared by tests/unit/test_blas.c and tests/gpu/test_blas_cuda.c (see
 * matmul_reference.h). */
#include "matmul_reference.h"

#include <stdlib.h>
#include <string.h>

#include "op_runner.h"

void dlop_test_gemm_param_values(const dlop_op_desc *op, const dlop_test_gemm_params *g,
                                 dlop_param_value *values) {
  for (int32_t i = 0; i < op->num_params; i++) values[i] = op->params[i].default_value;
  if (g != NULL) {
    values[0].u.f = g->alpha;
    values[1].u.f = g->beta;
    values[2].u.i = g->trans_a;
    values[3].u.i = g->trans_b;
  }
}

void dlop_test_matmul_reference(const char *op, const dlop_test_gemm_params *g,
                                const dlop_tensor *a, const dlop_tensor *b, const dlop_tensor *c,
                                const dlop_type *out_type, double *out) {
  double *va = dlop_test_gather_doubles(a), *vb = dlop_test_gather_doubles(b);
  double *vc = c ? dlop_test_gather_doubles(c) : NULL;
  int32_t na = a->ndim, nb = b->ndim, no = out_type->ndim;
  int is_gemm = strcmp(op, "gemm") == 0;
  int64_t m = na == 1 ? 1 : a->shape[na - 2], k = a->shape[na - 1];
  int64_t n = nb == 1 ? 1 : b->shape[nb - 1];
  if (is_gemm && g->trans_a) m = a->shape[1], k = a->shape[0];
  if (is_gemm && g->trans_b) n = b->shape[0];
  int has_m = is_gemm || na > 1, has_n = is_gemm || nb > 1;
  int32_t batch = no - has_m - has_n, batch_a = na > 2 ? na - 2 : 0, batch_b = nb > 2 ? nb - 2 : 0;
  int64_t total = dlop_test_numel(no, out_type->shape);
  for (int64_t o = 0; o < total; o++) {
    int64_t index[DLOP_MAX_NDIM], rest = o;
    for (int32_t d = no - 1; d >= 0; d--) index[d] = rest % out_type->shape[d], rest /= out_type->shape[d];
    int64_t i = has_m ? index[batch] : 0, j = has_n ? index[no - 1] : 0;
    int64_t base_a = 0, base_b = 0; /* linear element of the batch's matrix start */
    for (int32_t d = 0; d < batch_a; d++) {
      int64_t idx = a->shape[d] == 1 ? 0 : index[batch - batch_a + d];
      base_a = base_a * a->shape[d] + idx;
    }
    for (int32_t d = 0; d < batch_b; d++) {
      int64_t idx = b->shape[d] == 1 ? 0 : index[batch - batch_b + d];
      base_b = base_b * b->shape[d] + idx;
    }
    base_a *= (na == 1 ? k : m * k);
    base_b *= (nb == 1 ? k : k * n);
    double sum = 0;
    for (int64_t q = 0; q < k; q++) {
      double x = is_gemm && g->trans_a ? va[q * m + i] : va[base_a + i * k + q];
      double y = is_gemm && g->trans_b ? vb[j * k + q] : vb[base_b + q * n + j];
      sum += x * y;
    }
    if (is_gemm) {
      double cv = 0;
      if (c->ndim == 2) cv = vc[(c->shape[0] == 1 ? 0 : i) * c->shape[1] + (c->shape[1] == 1 ? 0 : j)];
      else if (c->ndim == 1) cv = vc[c->shape[0] == 1 ? 0 : j];
      else cv = vc[0];
      sum = g->alpha * sum + (g->beta != 0 ? g->beta * cv : 0);
    }
    out[o] = sum;
  }
  free(va);
  free(vb);
  free(vc);
}
