/* blas_cpu.c — the CPU backend of the blas ops: row-major GEMMs through the process's CBLAS
 * library (cblas_sgemm/cblas_dgemm, one call per batch element: the library parallelizes each
 * call itself; one row or column of output goes to its dot or gemv), and the strided copies
 * that lay out operands BLAS cannot read. */
#include <limits.h>
#include <string.h>

#include "blas_plugin.h"

/* CBLAS's enum values (cblas.h; the plugin does not depend on that header). */
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

/* Elements per parallel chunk of a copy. */
#define BLAS_COPY_GRAIN 32768

int blas_cpu_prepare(blas_thunk_state *s, const dlop_thunk_args *args) {
  char why[1536];
  s->backend = &blas_cpu_backend;
  s->cpu = blas_cpu_library_get(why, sizeof why);
  if (s->cpu == NULL) {
    dlop_set_error(args->error, args->error_size, "%s on the CPU: %s", s->info->name, why);
    return DLOP_UNSUPPORTED;
  }
  return DLOP_OK;
}

/* CBLAS takes int dimensions (LP64 builds such as Debian's OpenBLAS). */
static int fits_int(const blas_thunk_state *s, const dlop_run_args *args, const blas_gemm_call *c) {
  const int64_t values[] = {c->m, c->n, c->k, c->lda, c->ldb, c->ldc};
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
    if (values[i] > INT_MAX) {
      dlop_set_error(args->error, args->error_size,
                     "%s: a GEMM of m=%lld n=%lld k=%lld (leading dims %lld, %lld, %lld) exceeds "
                     "CBLAS's int range (%d)",
                     s->info->name, (long long)c->m, (long long)c->n, (long long)c->k,
                     (long long)c->lda, (long long)c->ldb, (long long)c->ldc, INT_MAX);
      return 0;
    }
  }
  return 1;
}

/* A GEMM with one row or one column of output as a dot or a matrix-vector product (BLAS 1 and
 * 2): 1 when it ran, 0 when the library lacks the function (the GEMM runs instead).
 * Row-major op(A) is m x k: element (r, p) at a[r * lda + p], or a[p * lda + r] transposed;
 * op(B) is k x n likewise; C is m x n with ldc. */
static int cpu_vector_product(const blas_thunk_state *s, const blas_gemm_call *c, int64_t i) {
  const blas_cpu_library *lib = s->cpu;
  const int k = (int)c->k, lda = (int)c->lda, ldb = (int)c->ldb, ldc = (int)c->ldc;
  const int a_step = c->trans_a ? lda : 1;  /* along p in row 0 of op(A) */
  const int b_step = c->trans_b ? 1 : ldb;  /* along p in column 0 of op(B) */
  const int single = c->dtype == DLOP_FLOAT32;
  const char *a = (const char *)c->a + i * c->stride_a * (single ? 4 : 8);
  const char *b = (const char *)c->b + i * c->stride_b * (single ? 4 : 8);
  char *out = (char *)c->c + i * c->stride_c * (single ? 4 : 8);
  if (c->m == 1 && c->n == 1) { /* a dot; beta 0 does not read C */
    if (single ? lib->sdot == NULL : lib->ddot == NULL) return 0;
    if (single) {
      float dot = lib->sdot(k, (const float *)a, a_step, (const float *)b, b_step);
      float *y = (float *)out;
      *y = c->beta == 0 ? (float)c->alpha * dot : (float)c->alpha * dot + (float)c->beta * *y;
    } else {
      double dot = lib->ddot(k, (const double *)a, a_step, (const double *)b, b_step);
      double *y = (double *)out;
      *y = c->beta == 0 ? c->alpha * dot : c->alpha * dot + c->beta * *y;
    }
    return 1;
  }
  if (single ? lib->sgemv == NULL : lib->dgemv == NULL) return 0;
  if (c->beta == 0) { /* y is not to be read: some gemvs scale it by 0, which keeps a NaN */
    const int64_t count = c->n == 1 ? c->m : c->n, step = c->n == 1 ? c->ldc : 1;
    for (int64_t r = 0; r < count; r++) {
      if (single) ((float *)out)[r * step] = 0.0f;
      else ((double *)out)[r * step] = 0.0;
    }
  }
  if (c->n == 1) { /* y (m) = op(A) x, x = column 0 of op(B), y = column 0 of C */
    int trans = c->trans_a ? CBLAS_TRANS : CBLAS_NO_TRANS;
    int rows = c->trans_a ? k : (int)c->m, cols = c->trans_a ? (int)c->m : k;
    if (single)
      lib->sgemv(CBLAS_ROW_MAJOR, trans, rows, cols, (float)c->alpha, (const float *)a, lda,
                 (const float *)b, b_step, (float)c->beta, (float *)out, ldc);
    else
      lib->dgemv(CBLAS_ROW_MAJOR, trans, rows, cols, c->alpha, (const double *)a, lda,
                 (const double *)b, b_step, c->beta, (double *)out, ldc);
  } else { /* m == 1: y (n) = op(B)^T x, x = row 0 of op(A), y = row 0 of C */
    int trans = c->trans_b ? CBLAS_NO_TRANS : CBLAS_TRANS;
    int rows = c->trans_b ? (int)c->n : k, cols = c->trans_b ? k : (int)c->n;
    if (single)
      lib->sgemv(CBLAS_ROW_MAJOR, trans, rows, cols, (float)c->alpha, (const float *)b, ldb,
                 (const float *)a, a_step, (float)c->beta, (float *)out, 1);
    else
      lib->dgemv(CBLAS_ROW_MAJOR, trans, rows, cols, c->alpha, (const double *)b, ldb,
                 (const double *)a, a_step, c->beta, (double *)out, 1);
  }
  return 1;
}

static int cpu_gemm(const blas_thunk_state *s, const dlop_run_args *args, const blas_gemm_call *c) {
  if (!fits_int(s, args, c)) return DLOP_UNSUPPORTED;
  int ta = c->trans_a ? CBLAS_TRANS : CBLAS_NO_TRANS, tb = c->trans_b ? CBLAS_TRANS : CBLAS_NO_TRANS;
  int vector = (c->m == 1 || c->n == 1) && c->k > 0 &&
               (c->dtype == DLOP_FLOAT32 || c->dtype == DLOP_FLOAT64);
  for (int64_t i = 0; i < c->batch_count; i++) {
    if (vector && cpu_vector_product(s, c, i)) continue;
    if (c->dtype == DLOP_FLOAT32) {
      const float *a = (const float *)c->a + i * c->stride_a, *b = (const float *)c->b + i * c->stride_b;
      float *out = (float *)c->c + i * c->stride_c;
      s->cpu->sgemm(CBLAS_ROW_MAJOR, ta, tb, (int)c->m, (int)c->n, (int)c->k, (float)c->alpha, a,
                    (int)c->lda, b, (int)c->ldb, (float)c->beta, out, (int)c->ldc);
    } else if (c->dtype == DLOP_FLOAT64) {
      const double *a = (const double *)c->a + i * c->stride_a, *b = (const double *)c->b + i * c->stride_b;
      double *out = (double *)c->c + i * c->stride_c;
      s->cpu->dgemm(CBLAS_ROW_MAJOR, ta, tb, (int)c->m, (int)c->n, (int)c->k, c->alpha, a,
                    (int)c->lda, b, (int)c->ldb, c->beta, out, (int)c->ldc);
    } else {
      dlop_set_error(args->error, args->error_size, "%s: no CPU GEMM for dtype %s", s->info->name,
                     dlop_dtype_name(c->dtype));
      return DLOP_UNSUPPORTED;
    }
  }
  return DLOP_OK;
}

static void copy_chunk(void *context, int64_t begin, int64_t end) {
  const dlop_strided_loop *loop = (const dlop_strided_loop *)context;
  const dlop_nd_offsets *l = &loop->layout;
  int64_t size = loop->element_size[0];
  int64_t dst_step = l->strides[0][l->ndim - 1] * size, src_step = l->strides[1][l->ndim - 1] * size;
  char *pointers[DLOP_KERNEL_MAX_OPERANDS];
  dlop_strided_cursor cursor;
  int64_t n;
  dlop_strided_cursor_init(&cursor, loop, begin, end);
  while ((n = dlop_strided_cursor_next(&cursor, loop, pointers)) > 0) {
    char *dst = pointers[0];
    const char *src = pointers[1];
    if (dst_step == size && src_step == size) {
      memmove(dst, src, (size_t)(n * size));
      continue;
    }
    for (int64_t i = 0; i < n; i++, dst += dst_step, src += src_step) memcpy(dst, src, (size_t)size);
  }
}

static int cpu_copy(const blas_thunk_state *s, const dlop_run_args *args, const dlop_tensor *dst,
                    const dlop_tensor *src) {
  dlop_strided_loop loop;
  int status = dlop_strided_loop_init(&loop, dst, src, 1, s->info->name, args->error, args->error_size);
  if (status != DLOP_OK) return status;
  return dlop_strided_loop_run(s->host, &loop, BLAS_COPY_GRAIN, copy_chunk, &loop, s->info->name,
                               args->error, args->error_size);
}

static int cpu_zero(const blas_thunk_state *s, const dlop_run_args *args, void *pointer, size_t bytes) {
  memset(pointer, 0, bytes);
  return DLOP_OK;
}

const blas_backend blas_cpu_backend = {cpu_gemm, cpu_copy, cpu_zero};
