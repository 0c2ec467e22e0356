/* blas_problem.c — a dot/matmul/gemm call on concrete tensors as a batch of row-major GEMMs:
 * each operand's matrix (rows, cols, strides) and batch strides (0 where broadcast), whether
 * BLAS can read a matrix as it lies (as is or as a transpose, with its leading dimension), the
 * transposed problem (C^T = B^T A^T) and the merging of batch dims. */
#include <string.h>

#include "blas_plugin.h"

/* The tensor's strides in elements (C-contiguous ones when it has none); 1 when its shape
 * breaks checked_size.h's rule (which the run's dlop_check_tensors refused already). */
static int strides_of(const dlop_tensor *t, int64_t *strides) {
  if (t->strides == NULL) return dlop_contiguous_strides(t->shape, t->ndim, strides);
  for (int32_t d = 0; d < t->ndim; d++) strides[d] = t->strides[d];
  return 0;
}

/* The matrix of a or b: its last two dims, or a 1-D operand promoted to (1, k) for a (row)
 * and to (k, 1) for b (column); stride 0 along the added dim (it has size 1). */
static void matrix_of(const dlop_tensor *t, const int64_t *strides, int as_row, blas_matrix *m) {
  if (t->ndim == 1) {
    if (as_row) {
      m->rows = 1, m->cols = t->shape[0], m->row_stride = 0, m->col_stride = strides[0];
    } else {
      m->rows = t->shape[0], m->cols = 1, m->row_stride = strides[0], m->col_stride = 0;
    }
    return;
  }
  m->rows = t->shape[t->ndim - 2];
  m->cols = t->shape[t->ndim - 1];
  m->row_stride = strides[t->ndim - 2];
  m->col_stride = strides[t->ndim - 1];
}

static void matrix_transpose(blas_matrix *m) {
  int64_t t = m->rows;
  m->rows = m->cols, m->cols = t;
  t = m->row_stride;
  m->row_stride = m->col_stride, m->col_stride = t;
}

/* Operand p's batch strides over the problem's batch dims (right-aligned, NumPy rules): 0
 * where the operand lacks the dim or has size 1 there. */
static void batch_strides_of(blas_problem *p, int32_t operand, const dlop_tensor *t,
                             const int64_t *strides, int32_t operand_batch_ndim) {
  for (int32_t d = 0; d < p->batch_ndim; d++) {
    int32_t j = d - (p->batch_ndim - operand_batch_ndim);
    p->batch_stride[operand][d] = (j < 0 || t->shape[j] == 1) ? 0 : strides[j];
  }
}

int blas_problem_init(blas_problem *p, blas_op_kind kind, const blas_params *params,
                      const dlop_tensor *a, const dlop_tensor *b, const dlop_tensor *out,
                      const char *op_name, char *error, size_t error_size) {
  int64_t sa[DLOP_MAX_NDIM], sb[DLOP_MAX_NDIM], sc[DLOP_MAX_NDIM];
  memset(p, 0, sizeof *p);
  p->dtype = dlop_tensor_dtype(a);
  if (strides_of(a, sa) || strides_of(b, sb) || strides_of(out, sc)) {
    dlop_set_error(error, error_size, "%s: an operand's shape has more than "
                   DLOP_SIZE_LIMIT_TEXT " elements", op_name);
    return DLOP_SHAPE_ERROR;
  }
  matrix_of(a, sa, 1, &p->matrix[BLAS_A]);
  matrix_of(b, sb, 0, &p->matrix[BLAS_B]);
  if (kind == BLAS_GEMM) {
    if (params->trans_a) matrix_transpose(&p->matrix[BLAS_A]);
    if (params->trans_b) matrix_transpose(&p->matrix[BLAS_B]);
  }
  p->m = p->matrix[BLAS_A].rows;
  p->k = p->matrix[BLAS_A].cols;
  p->n = p->matrix[BLAS_B].cols;
  if (p->matrix[BLAS_B].rows != p->k) {
    dlop_set_error(error, error_size, "%s: inner dimensions %lld and %lld differ", op_name,
                   (long long)p->k, (long long)p->matrix[BLAS_B].rows);
    return DLOP_SHAPE_ERROR;
  }
  /* the output: batch dims, then m unless a was 1-D, then n unless b was 1-D (gemm: (m, n)) */
  int has_m = kind == BLAS_GEMM || a->ndim > 1, has_n = kind == BLAS_GEMM || b->ndim > 1;
  int32_t matrix_dims = has_m + has_n;
  p->batch_ndim = out->ndim - matrix_dims;
  if (p->batch_ndim < 0) {
    dlop_set_error(error, error_size, "%s: the output has rank %d, expected at least %d", op_name,
                   (int)out->ndim, (int)matrix_dims);
    return DLOP_SHAPE_ERROR;
  }
  blas_matrix *c = &p->matrix[BLAS_C];
  c->rows = p->m;
  c->cols = p->n;
  c->row_stride = has_m ? sc[out->ndim - matrix_dims] : 0;
  c->col_stride = has_n ? sc[out->ndim - 1] : 0;
  if ((has_m && out->shape[out->ndim - matrix_dims] != p->m) ||
      (has_n && out->shape[out->ndim - 1] != p->n)) {
    dlop_set_error(error, error_size, "%s: the output's matrix dims are not (%lld, %lld)", op_name,
                   (long long)p->m, (long long)p->n);
    return DLOP_SHAPE_ERROR;
  }
  /* broadcast batch dims of zero-stride operands can multiply past int64 (2^32 x 2^32) */
  for (int32_t d = 0; d < p->batch_ndim; d++) p->batch_shape[d] = out->shape[d];
  if (dlop_shape_size(p->batch_shape, p->batch_ndim, 0, &p->batch_count, NULL) != DLOP_SIZE_FITS ||
      p->batch_count < 0) {
    char text[DLOP_MAX_NDIM * 22 + 4];
    dlop_set_error(error, error_size, "%s: the batch dims %s of the output have more than "
                   DLOP_SIZE_LIMIT_TEXT " elements", op_name,
                   dlop_format_shape(p->batch_shape, p->batch_ndim, text, sizeof text));
    return DLOP_SHAPE_ERROR;
  }
  batch_strides_of(p, BLAS_A, a, sa, a->ndim > 2 ? a->ndim - 2 : 0);
  batch_strides_of(p, BLAS_B, b, sb, b->ndim > 2 ? b->ndim - 2 : 0);
  batch_strides_of(p, BLAS_C, out, sc, p->batch_ndim);
  p->base[BLAS_A] = (char *)dlop_tensor_base(a);
  p->base[BLAS_B] = (char *)dlop_tensor_base(b);
  p->base[BLAS_C] = (char *)dlop_tensor_base(out);
  return DLOP_OK;
}

int blas_matrix_direct(const blas_matrix *m, int *transpose, int64_t *ld) {
  int64_t min_row_ld = m->cols > 1 ? m->cols : 1, min_col_ld = m->rows > 1 ? m->rows : 1;
  /* row-major: unit steps along a row (or one column), rows at least a row apart (or one row) */
  if (m->cols <= 1 || m->col_stride == 1) {
    int64_t lead = m->rows <= 1 ? min_row_ld : m->row_stride;
    if (lead >= min_row_ld) {
      *transpose = 0;
      *ld = lead;
      return 1;
    }
  }
  /* column-major, i.e. the transpose of a row-major (cols x rows) matrix */
  if (m->rows <= 1 || m->row_stride == 1) {
    int64_t lead = m->cols <= 1 ? min_col_ld : m->col_stride;
    if (lead >= min_col_ld) {
      *transpose = 1;
      *ld = lead;
      return 1;
    }
  }
  return 0;
}

void blas_problem_transpose(blas_problem *p) {
  blas_matrix a = p->matrix[BLAS_A];
  char *base = p->base[BLAS_A];
  int64_t strides[DLOP_MAX_NDIM], t;
  p->matrix[BLAS_A] = p->matrix[BLAS_B];
  p->matrix[BLAS_B] = a;
  p->base[BLAS_A] = p->base[BLAS_B];
  p->base[BLAS_B] = base;
  memcpy(strides, p->batch_stride[BLAS_A], sizeof strides);
  memcpy(p->batch_stride[BLAS_A], p->batch_stride[BLAS_B], sizeof strides);
  memcpy(p->batch_stride[BLAS_B], strides, sizeof strides);
  for (int32_t i = 0; i < BLAS_OPERANDS; i++) matrix_transpose(&p->matrix[i]);
  t = p->m;
  p->m = p->n, p->n = t;
}

void blas_problem_collapse_batch(blas_problem *p) {
  int32_t kept = 0;
  for (int32_t d = 0; d < p->batch_ndim; d++) {
    int mergeable = kept > 0;
    if (p->batch_shape[d] == 1) continue;
    for (int32_t k = 0; k < BLAS_OPERANDS && mergeable; k++) {
      int64_t step;
      mergeable = !dlop_mul_overflow(p->batch_stride[k][d], p->batch_shape[d], &step) &&
                  p->batch_stride[k][kept - 1] == step;
    }
    if (mergeable) {
      p->batch_shape[kept - 1] *= p->batch_shape[d];
      for (int32_t k = 0; k < BLAS_OPERANDS; k++) p->batch_stride[k][kept - 1] = p->batch_stride[k][d];
    } else {
      p->batch_shape[kept] = p->batch_shape[d];
      for (int32_t k = 0; k < BLAS_OPERANDS; k++) p->batch_stride[k][kept] = p->batch_stride[k][d];
      kept++;
    }
  }
  p->batch_ndim = kept;
}
