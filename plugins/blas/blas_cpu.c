/* blas_cpu.c — the CPU backend of the blas ops: row-major GEMMs through the process's CBLAS
 * library (cblas_sgemm/cblas_dgemm, one call per batch element: the library parallelizes each
 * call itself), and the strided copies that lay out operands BLAS cannot read. */
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

static int cpu_gemm(const blas_thunk_state *s, const dlop_run_args *args, const blas_gemm_call *c) {
  if (!fits_int(s, args, c)) return DLOP_UNSUPPORTED;
  int ta = c->trans_a ? CBLAS_TRANS : CBLAS_NO_TRANS, tb = c->trans_b ? CBLAS_TRANS : CBLAS_NO_TRANS;
  for (int64_t i = 0; i < c->batch_count; i++) {
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
