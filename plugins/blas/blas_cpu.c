/* blas_cpu.c — the CPU backend of the blas ops: row-major GEMMs through the process's CBLAS
 * library (cblas_sgemm/cblas_dgemm in the library's integer width, LP64 or ILP64; one call per
 * batch element: the library parallelizes each call itself; one row or column of output goes
 * to its dot or gemv), and the strided copies that lay out operands BLAS cannot read. */
#include <limits.h>
#include <string.h>

#include "blas_plugin.h"

/* CBLAS's enum values (cblas.h; the plugin does not depend on that header). */
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

/* Elements per parallel chunk of a copy: a copy runs on dlop's thread pool only when it is
 * large (2^21 elements and up), because its workers spin for a while after a job and the
 * BLAS call that follows every copy needs those cores for its own threads. A 256 x 256
 * float32 gemm whose c was copied through the pool took 370 us instead of 295 on 2 cores
 * (the matmul alone: 285); on the 16-core H200 host the gemm took 5.5x its matmul, likely
 * the same (the pool wakes every worker for each job). */
#define BLAS_COPY_GRAIN ((int64_t)1 << 20)

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

/* LP64 libraries take int dimensions: a GEMM past INT_MAX is refused there with the sizes
 * (an ILP64 library, such as scipy-openblas64 or NumPy's, runs it). */
static int fits_int(const blas_thunk_state *s, const dlop_run_args *args, const blas_gemm_call *c) {
  const int64_t values[] = {c->m, c->n, c->k, c->lda, c->ldb, c->ldc};
  if (s->cpu->ilp64) return 1;
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
    if (values[i] > INT_MAX) {
      dlop_set_error(args->error, args->error_size,
                     "%s: a GEMM of m=%lld n=%lld k=%lld (leading dims %lld, %lld, %lld) exceeds "
                     "the int range (%d) of the LP64 CBLAS %s; an ILP64 one (pip install "
                     "scipy-openblas64, or DLOP_BLAS_LIBRARY) takes 64-bit sizes",
                     s->info->name, (long long)c->m, (long long)c->n, (long long)c->k,
                     (long long)c->lda, (long long)c->ldb, (long long)c->ldc, INT_MAX,
                     s->cpu->path);
      return 0;
    }
  }
  return 1;
}

/* The six calls in both integer widths; sizes fit the library's (fits_int). */
static void sgemm(const blas_cpu_library *l, int ta, int tb, int64_t m, int64_t n, int64_t k,
                  float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                  float beta, float *c, int64_t ldc) {
  if (l->ilp64) l->sgemm64(CBLAS_ROW_MAJOR, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else l->sgemm(CBLAS_ROW_MAJOR, ta, tb, (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb,
                beta, c, (int)ldc);
}
static void dgemm(const blas_cpu_library *l, int ta, int tb, int64_t m, int64_t n, int64_t k,
                  double alpha, const double *a, int64_t lda, const double *b, int64_t ldb,
                  double beta, double *c, int64_t ldc) {
  if (l->ilp64) l->dgemm64(CBLAS_ROW_MAJOR, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else l->dgemm(CBLAS_ROW_MAJOR, ta, tb, (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb,
                beta, c, (int)ldc);
}
static float sdot(const blas_cpu_library *l, int64_t n, const float *x, int64_t incx,
                  const float *y, int64_t incy) {
  return l->ilp64 ? l->sdot64(n, x, incx, y, incy) : l->sdot((int)n, x, (int)incx, y, (int)incy);
}
static double ddot(const blas_cpu_library *l, int64_t n, const double *x, int64_t incx,
                   const double *y, int64_t incy) {
  return l->ilp64 ? l->ddot64(n, x, incx, y, incy) : l->ddot((int)n, x, (int)incx, y, (int)incy);
}
static void sgemv(const blas_cpu_library *l, int trans, int64_t m, int64_t n, float alpha,
                  const float *a, int64_t lda, const float *x, int64_t incx, float beta, float *y,
                  int64_t incy) {
  if (l->ilp64) l->sgemv64(CBLAS_ROW_MAJOR, trans, m, n, alpha, a, lda, x, incx, beta, y, incy);
  else l->sgemv(CBLAS_ROW_MAJOR, trans, (int)m, (int)n, alpha, a, (int)lda, x, (int)incx, beta, y,
                (int)incy);
}
static void dgemv(const blas_cpu_library *l, int trans, int64_t m, int64_t n, double alpha,
                  const double *a, int64_t lda, const double *x, int64_t incx, double beta,
                  double *y, int64_t incy) {
  if (l->ilp64) l->dgemv64(CBLAS_ROW_MAJOR, trans, m, n, alpha, a, lda, x, incx, beta, y, incy);
  else l->dgemv(CBLAS_ROW_MAJOR, trans, (int)m, (int)n, alpha, a, (int)lda, x, (int)incx, beta, y,
                (int)incy);
}

/* A GEMM with one row or one column of output as a dot or a matrix-vector product (BLAS 1 and
 * 2): 1 when it ran, 0 when the library lacks the function (the GEMM runs instead).
 * Row-major op(A) is m x k: element (r, p) at a[r * lda + p], or a[p * lda + r] transposed;
 * op(B) is k x n likewise; C is m x n with ldc. */
static int cpu_vector_product(const blas_thunk_state *s, const blas_gemm_call *c, int64_t i) {
  const blas_cpu_library *lib = s->cpu;
  const int64_t k = c->k, lda = c->lda, ldb = c->ldb, ldc = c->ldc;
  const int64_t a_step = c->trans_a ? lda : 1;  /* along p in row 0 of op(A) */
  const int64_t b_step = c->trans_b ? 1 : ldb;  /* along p in column 0 of op(B) */
  const int single = c->dtype == DLOP_FLOAT32;
  const char *a = (const char *)c->a + i * c->stride_a * (single ? 4 : 8);
  const char *b = (const char *)c->b + i * c->stride_b * (single ? 4 : 8);
  char *out = (char *)c->c + i * c->stride_c * (single ? 4 : 8);
  if (c->m == 1 && c->n == 1) { /* a dot; beta 0 does not read C */
    if (lib->ilp64 ? (single ? lib->sdot64 == NULL : lib->ddot64 == NULL)
                   : (single ? lib->sdot == NULL : lib->ddot == NULL))
      return 0;
    if (single) {
      float dot = sdot(lib, k, (const float *)a, a_step, (const float *)b, b_step);
      float *y = (float *)out;
      *y = c->beta == 0 ? (float)c->alpha * dot : (float)c->alpha * dot + (float)c->beta * *y;
    } else {
      double dot = ddot(lib, k, (const double *)a, a_step, (const double *)b, b_step);
      double *y = (double *)out;
      *y = c->beta == 0 ? c->alpha * dot : c->alpha * dot + c->beta * *y;
    }
    return 1;
  }
  if (lib->ilp64 ? (single ? lib->sgemv64 == NULL : lib->dgemv64 == NULL)
                 : (single ? lib->sgemv == NULL : lib->dgemv == NULL))
    return 0;
  if (c->beta == 0) { /* y is not to be read: some gemvs scale it by 0, which keeps a NaN */
    const int64_t count = c->n == 1 ? c->m : c->n, step = c->n == 1 ? c->ldc : 1;
    for (int64_t r = 0; r < count; r++) {
      if (single) ((float *)out)[r * step] = 0.0f;
      else ((double *)out)[r * step] = 0.0;
    }
  }
  if (c->n == 1) { /* y (m) = op(A) x, x = column 0 of op(B), y = column 0 of C */
    int trans = c->trans_a ? CBLAS_TRANS : CBLAS_NO_TRANS;
    int64_t rows = c->trans_a ? k : c->m, cols = c->trans_a ? c->m : k;
    if (single)
      sgemv(lib, trans, rows, cols, (float)c->alpha, (const float *)a, lda, (const float *)b,
            b_step, (float)c->beta, (float *)out, ldc);
    else
      dgemv(lib, trans, rows, cols, c->alpha, (const double *)a, lda, (const double *)b, b_step,
            c->beta, (double *)out, ldc);
  } else { /* m == 1: y (n) = op(B)^T x, x = row 0 of op(A), y = row 0 of C */
    int trans = c->trans_b ? CBLAS_NO_TRANS : CBLAS_TRANS;
    int64_t rows = c->trans_b ? c->n : k, cols = c->trans_b ? k : c->n;
    if (single)
      sgemv(lib, trans, rows, cols, (float)c->alpha, (const float *)b, ldb, (const float *)a,
            a_step, (float)c->beta, (float *)out, 1);
    else
      dgemv(lib, trans, rows, cols, c->alpha, (const double *)b, ldb, (const double *)a, a_step,
            c->beta, (double *)out, 1);
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
      sgemm(s->cpu, ta, tb, c->m, c->n, c->k, (float)c->alpha, a, c->lda, b, c->ldb,
            (float)c->beta, out, c->ldc);
    } else if (c->dtype == DLOP_FLOAT64) {
      const double *a = (const double *)c->a + i * c->stride_a, *b = (const double *)c->b + i * c->stride_b;
      double *out = (double *)c->c + i * c->stride_c;
      dgemm(s->cpu, ta, tb, c->m, c->n, c->k, c->alpha, a, c->lda, b, c->ldb, c->beta, out,
            c->ldc);
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
