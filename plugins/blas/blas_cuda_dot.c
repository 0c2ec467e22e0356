/* blas_cuda_dot.c — a GEMM of one output element on CUDA (a dot of two vectors: dot, matmul of
 * two 1-d operands, gemm of 1 x k by k x 1) through the plugin's own two-pass kernel
 * (blas_dot_cuda.cu) rather than cuBLAS: the kernels are loaded at make_thunk, the partials
 * live in the thunk's workspace (BLAS_DOT_WORKSPACE_BYTES), and both passes run on the run's
 * stream. */
#include <stdio.h>

#include <dlop/kit/fatbin.h> /* DLOP_FATBIN_DECLARE, DLOP_FATBIN */

#include "blas_dot_plan.h"
#include "blas_plugin.h"

DLOP_FATBIN_DECLARE(dlop_blas_blas_dot_cuda_fatbin);

int blas_cuda_dot_prepare(blas_thunk_state *s, const dlop_thunk_args *args) {
  const dlop_host_api *host = s->host;
  const unsigned char *fatbin = DLOP_FATBIN(dlop_blas_blas_dot_cuda_fatbin);
  const char *dtype = dlop_dtype_name((dlop_dtype)s->output.dtype);
  char partials[64], finish[64];
  int status;
  if (fatbin == NULL) {
    dlop_set_error(args->error, args->error_size,
                   "%s: this build of the plugin has no CUDA kernels (built with DLOP_WITH_CUDA=OFF)",
                   s->info->name);
    return DLOP_UNSUPPORTED;
  }
  snprintf(partials, sizeof partials, "dlop_blas_dot_partials_%s", dtype);
  snprintf(finish, sizeof finish, "dlop_blas_dot_finish_%s", dtype);
  status = host->cuda_module_load(args->device.id, fatbin, &s->dot_module, args->error,
                                  args->error_size);
  if (status == DLOP_OK)
    status = host->cuda_module_function(s->dot_module, partials, &s->dot_partials, args->error,
                                        args->error_size);
  if (status == DLOP_OK)
    status = host->cuda_module_function(s->dot_module, finish, &s->dot_finish, args->error,
                                        args->error_size);
  return status;
}

void blas_cuda_dot_release(blas_thunk_state *s) {
  if (s->dot_module != NULL && DLOP_HOST_HAS(s->host, cuda_module_unload))
    s->host->cuda_module_unload(s->dot_module);
  s->dot_module = NULL;
}

int blas_cuda_dot(const blas_thunk_state *s, const dlop_run_args *args, const blas_gemm_call *c) {
  const char *name = s->info->name;
  /* row-major op(A) is 1 x k, op(B) k x 1 (blas_plugin.h): element p of each vector */
  int64_t a_step = c->trans_a ? c->lda : 1, b_step = c->trans_b ? 1 : c->ldb, n = c->k;
  int32_t read_out = c->beta != 0.0, count;
  double alpha = c->alpha, beta = c->beta;
  const void *a = c->a, *b = c->b;
  void *out = c->c, *partials = args->workspace;
  uint32_t block[3] = {BLAS_DOT_BLOCK, 1, 1}, grid[3] = {1, 1, 1};
  int status;
  if (partials == NULL || args->workspace_bytes < BLAS_DOT_WORKSPACE_BYTES) {
    dlop_set_error(args->error, args->error_size,
                   "%s: a dot on CUDA needs the thunk's %zu-byte workspace, got %zu bytes at %p",
                   name, (size_t)BLAS_DOT_WORKSPACE_BYTES, args->workspace_bytes, args->workspace);
    return DLOP_INVALID_ARGUMENT;
  }
  grid[0] = blas_dot_blocks(n, (int64_t)dlop_dtype_size(c->dtype), s->sm_count);
  count = (int32_t)grid[0];
  void *first[] = {&a, &a_step, &b, &b_step, &n, &partials};
  void *second[] = {&partials, &count, &out, &alpha, &beta, &read_out};
  status = s->host->cuda_launch(s->dot_partials, grid, block, 0, args->stream, first, args->error,
                                args->error_size);
  grid[0] = 1;
  if (status == DLOP_OK)
    status = s->host->cuda_launch(s->dot_finish, grid, block, 0, args->stream, second,
                                  args->error, args->error_size);
  if (status != DLOP_OK && args->error != NULL && args->error_size > 0 && args->error[0] == '\0')
    dlop_set_error(args->error, args->error_size, "%s: the dot kernel's launch failed with status %d",
                   name, status);
  return status;
}
