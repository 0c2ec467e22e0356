/* blas_cuda.c — the CUDA backend of the blas ops: row-major GEMMs as cuBLAS column-major ones
 * (C^T = B^T A^T: operands swapped), cublasGemmEx or cublasGemmStridedBatchedEx with the
 * dtype's compute type, functions found through the host's cublas_symbol (the plugin never
 * links cuBLAS), a handle per run from the host's cublas_handle; a GEMM of one output element
 * (a dot of two vectors) through the plugin's own dot kernels instead (blas_cuda_dot.c); copies
 * through the plugin's own copy kernels (blas_copy_cuda.cu). */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <dlop/kit/fatbin.h> /* DLOP_FATBIN_DECLARE, DLOP_FATBIN */

#include "blas_plugin.h"

DLOP_FATBIN_DECLARE(dlop_blas_blas_copy_cuda_fatbin);

/* Values of the CUDA 13 toolkit's headers, as constants: the plugin builds without them. */
enum {
  BLAS_CUBLAS_OP_N = 0, BLAS_CUBLAS_OP_T = 1,          /* cublas_api.h: cublasOperation_t */
  BLAS_CUBLAS_GEMM_DEFAULT = -1,                       /* cublas_api.h: cublasGemmAlgo_t */
  BLAS_CUBLAS_COMPUTE_32F = 68,                        /* cublas_api.h: cublasComputeType_t */
  BLAS_CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
  BLAS_CUBLAS_COMPUTE_64F = 70,
  BLAS_CUBLAS_POINTER_MODE_HOST = 0,                   /* cublas_api.h: cublasPointerMode_t */
  BLAS_CUBLAS_DEFAULT_MATH = 0,                        /* cublas_api.h: cublasMath_t */
  BLAS_CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16,
  BLAS_CUDA_R_16F = 2, BLAS_CUDA_R_16BF = 14,          /* library_types.h: cudaDataType */
  BLAS_CUDA_R_32F = 0, BLAS_CUDA_R_64F = 1
};

typedef int (*gemm_ex_fn)(void *handle, int transa, int transb, int m, int n, int k,
                          const void *alpha, const void *a, int a_type, int lda, const void *b,
                          int b_type, int ldb, const void *beta, void *c, int c_type, int ldc,
                          int compute_type, int algo);
typedef int (*gemm_strided_batched_ex_fn)(void *handle, int transa, int transb, int m, int n,
                                          int k, const void *alpha, const void *a, int a_type,
                                          int lda, long long stride_a, const void *b, int b_type,
                                          int ldb, long long stride_b, const void *beta, void *c,
                                          int c_type, int ldc, long long stride_c,
                                          int batch_count, int compute_type, int algo);
typedef int (*set_mode_fn)(void *handle, int mode);
typedef const char *(*status_string_fn)(int status);

static const char *status_text(const blas_thunk_state *s, int status) {
  static const struct { int code; const char *name; } names[] = {
      {1, "CUBLAS_STATUS_NOT_INITIALIZED"}, {3, "CUBLAS_STATUS_ALLOC_FAILED"},
      {7, "CUBLAS_STATUS_INVALID_VALUE"},   {8, "CUBLAS_STATUS_ARCH_MISMATCH"},
      {11, "CUBLAS_STATUS_MAPPING_ERROR"},  {13, "CUBLAS_STATUS_EXECUTION_FAILED"},
      {14, "CUBLAS_STATUS_INTERNAL_ERROR"}, {15, "CUBLAS_STATUS_NOT_SUPPORTED"},
      {16, "CUBLAS_STATUS_LICENSE_ERROR"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (names[i].code == status) return names[i].name;
  if (s->cublas.status_string) {
    const char *text = ((status_string_fn)s->cublas.status_string)(status);
    if (text) return text;
  }
  return "unknown cuBLAS status";
}

void blas_cuda_release(blas_thunk_state *s) {
  blas_cuda_dot_release(s);
  if (s->module != NULL && DLOP_HOST_HAS(s->host, cuda_module_unload))
    s->host->cuda_module_unload(s->module);
  s->module = NULL;
}

static int find_kernel(blas_thunk_state *s, const dlop_thunk_args *args, const char *kind,
                       void **function) {
  char name[64];
  snprintf(name, sizeof name, "dlop_blas_copy_%s_b%zu", kind,
           dlop_dtype_size((dlop_dtype)s->output.dtype));
  return s->host->cuda_module_function(s->module, name, function, args->error, args->error_size);
}

int blas_cuda_prepare(blas_thunk_state *s, const dlop_thunk_args *args) {
  const dlop_host_api *host = s->host;
  const char *name = s->info->name;
  const unsigned char *fatbin = DLOP_FATBIN(dlop_blas_blas_copy_cuda_fatbin);
  int status;
  s->backend = &blas_cuda_backend;
  if (fatbin == NULL) {
    dlop_set_error(args->error, args->error_size,
                   "%s: this build of the plugin has no CUDA kernels (built with DLOP_WITH_CUDA=OFF)",
                   name);
    return DLOP_UNSUPPORTED;
  }
  if (!DLOP_HOST_HAS(host, cublas_handle) || !DLOP_HOST_HAS(host, cublas_symbol) ||
      !DLOP_HOST_HAS(host, cuda_module_load) || !DLOP_HOST_HAS(host, cuda_module_function) ||
      !DLOP_HOST_HAS(host, cuda_launch) || !DLOP_HOST_HAS(host, cuda_memset_async)) {
    dlop_set_error(args->error, args->error_size,
                   "%s: the host offers no cuBLAS, CUDA module loading, launch or memset", name);
    return DLOP_UNSUPPORTED;
  }
  s->cublas.gemm_ex = host->cublas_symbol("cublasGemmEx");
  s->cublas.gemm_strided_batched_ex = host->cublas_symbol("cublasGemmStridedBatchedEx");
  s->cublas.set_pointer_mode = host->cublas_symbol("cublasSetPointerMode_v2");
  s->cublas.set_math_mode = host->cublas_symbol("cublasSetMathMode");
  s->cublas.status_string = host->cublas_symbol("cublasGetStatusString");
  if (s->cublas.gemm_ex == NULL || s->cublas.gemm_strided_batched_ex == NULL ||
      s->cublas.set_pointer_mode == NULL || s->cublas.set_math_mode == NULL) {
    dlop_set_error(args->error, args->error_size,
                   "%s: cuBLAS is missing or lacks cublasGemmEx, cublasGemmStridedBatchedEx, "
                   "cublasSetPointerMode_v2 or cublasSetMathMode (install the CUDA toolkit's "
                   "libcublas, CUDA 11 or newer, or add it to LD_LIBRARY_PATH)",
                   name);
    return DLOP_UNSUPPORTED;
  }
  status = dlop_cuda_max_blocks(host, args->device.id, &s->copy_kernels.max_blocks, name,
                                args->error, args->error_size);
  if (status == DLOP_OK)
    status = host->cuda_module_load(args->device.id, fatbin, &s->module, args->error,
                                    args->error_size);
  if (status == DLOP_OK) status = find_kernel(s, args, "contiguous", &s->copy_kernels.contiguous);
  if (status == DLOP_OK) status = find_kernel(s, args, "rows", &s->copy_kernels.rows);
  if (status == DLOP_OK) status = find_kernel(s, args, "strided", &s->copy_kernels.strided);
  s->copy_kernels.contiguous_elements = (int32_t)(16 / dlop_dtype_size((dlop_dtype)s->output.dtype));
  s->sm_count = s->copy_kernels.max_blocks / DLOP_CUDA_BLOCKS_PER_SM; /* what dlop_cuda_max_blocks multiplied */
  if (status == DLOP_OK) status = blas_cuda_dot_prepare(s, args);
  return status;
}

static int cuda_type_of(dlop_dtype dtype) {
  switch (dtype) {
    case DLOP_FLOAT16: return BLAS_CUDA_R_16F;
    case DLOP_BFLOAT16: return BLAS_CUDA_R_16BF;
    case DLOP_FLOAT32: return BLAS_CUDA_R_32F;
    default: return BLAS_CUDA_R_64F;
  }
}

static int cuda_gemm(const blas_thunk_state *s, const dlop_run_args *args, const blas_gemm_call *c) {
  const char *name = s->info->name;
  void *handle = NULL;
  int status, result;
  const int64_t dims[] = {c->m, c->n, c->k, c->lda, c->ldb, c->ldc, c->batch_count};
  if (args->stream == NULL) {
    dlop_set_error(args->error, args->error_size,
                   "%s: no CUDA stream given (thunks never use the default stream)", name);
    return DLOP_INVALID_ARGUMENT;
  }
  if (c->m == 1 && c->n == 1 && c->batch_count == 1) return blas_cuda_dot(s, args, c);
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
    if (dims[i] > INT_MAX) {
      dlop_set_error(args->error, args->error_size,
                     "%s: a GEMM of m=%lld n=%lld k=%lld (leading dims %lld, %lld, %lld, batch "
                     "%lld) exceeds cuBLAS's int range (%d)",
                     name, (long long)c->m, (long long)c->n, (long long)c->k, (long long)c->lda,
                     (long long)c->ldb, (long long)c->ldc, (long long)c->batch_count, INT_MAX);
      return DLOP_UNSUPPORTED;
    }
  }
  status = s->host->cublas_handle(s->device.id, args->stream, &handle, args->error, args->error_size);
  if (status != DLOP_OK) return status;
  /* The handle is shared with other plugins on this thread: set what this call relies on.
   * Alpha and beta live on the host; 16-bit types reduce in float32 (cuBLAS may otherwise
   * reduce split-K partial sums in the output type), TF32 only through the compute type. */
  int math = BLAS_CUBLAS_DEFAULT_MATH;
  if (c->dtype == DLOP_FLOAT16 || c->dtype == DLOP_BFLOAT16)
    math |= BLAS_CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
  result = ((set_mode_fn)s->cublas.set_pointer_mode)(handle, BLAS_CUBLAS_POINTER_MODE_HOST);
  if (result == 0) result = ((set_mode_fn)s->cublas.set_math_mode)(handle, math);
  if (result != 0) {
    dlop_set_error(args->error, args->error_size,
                   "%s: cublasSetPointerMode_v2/cublasSetMathMode on cuda:%d failed: status %d (%s)",
                   name, (int)s->device.id, result, status_text(s, result));
    return DLOP_CUBLAS_ERROR;
  }
  int type = cuda_type_of(c->dtype), compute;
  float alpha_f = (float)c->alpha, beta_f = (float)c->beta;
  double alpha_d = c->alpha, beta_d = c->beta;
  const void *alpha = &alpha_f, *beta = &beta_f;
  if (c->dtype == DLOP_FLOAT64) {
    compute = BLAS_CUBLAS_COMPUTE_64F;
    alpha = &alpha_d, beta = &beta_d;
  } else if (c->dtype == DLOP_FLOAT32 && s->params.allow_tf32) {
    compute = BLAS_CUBLAS_COMPUTE_32F_FAST_TF32;
  } else {
    compute = BLAS_CUBLAS_COMPUTE_32F;
  }
  /* row-major C (m x n) is column-major C^T (n x m) = op(B)^T op(A)^T: B first */
  int op_b = c->trans_b ? BLAS_CUBLAS_OP_T : BLAS_CUBLAS_OP_N;
  int op_a = c->trans_a ? BLAS_CUBLAS_OP_T : BLAS_CUBLAS_OP_N;
  const char *function;
  if (c->batch_count == 1) {
    function = "cublasGemmEx";
    result = ((gemm_ex_fn)s->cublas.gemm_ex)(handle, op_b, op_a, (int)c->n, (int)c->m, (int)c->k,
                                             alpha, c->b, type, (int)c->ldb, c->a, type,
                                             (int)c->lda, beta, c->c, type, (int)c->ldc, compute,
                                             BLAS_CUBLAS_GEMM_DEFAULT);
  } else {
    function = "cublasGemmStridedBatchedEx";
    result = ((gemm_strided_batched_ex_fn)s->cublas.gemm_strided_batched_ex)(
        handle, op_b, op_a, (int)c->n, (int)c->m, (int)c->k, alpha, c->b, type, (int)c->ldb,
        (long long)c->stride_b, c->a, type, (int)c->lda, (long long)c->stride_a, beta, c->c,
        type, (int)c->ldc, (long long)c->stride_c, (int)c->batch_count, compute,
        BLAS_CUBLAS_GEMM_DEFAULT);
  }
  if (result != 0) {
    dlop_set_error(args->error, args->error_size,
                   "%s: %s on cuda:%d failed: status %d (%s) for %s m=%lld n=%lld k=%lld, "
                   "lda=%lld ldb=%lld ldc=%lld, batch %lld",
                   name, function, (int)s->device.id, result, status_text(s, result),
                   dlop_dtype_name(c->dtype), (long long)c->m, (long long)c->n, (long long)c->k,
                   (long long)c->lda, (long long)c->ldb, (long long)c->ldc,
                   (long long)c->batch_count);
    return DLOP_CUBLAS_ERROR;
  }
  return DLOP_OK;
}

static int cuda_copy(const blas_thunk_state *s, const dlop_run_args *args, const dlop_tensor *dst,
                     const dlop_tensor *src) {
  dlop_strided_loop loop;
  int status = dlop_strided_loop_init(&loop, dst, src, 1, s->info->name, args->error, args->error_size);
  if (status != DLOP_OK) return status;
  return dlop_cuda_launch_elementwise(s->host, &loop, &s->copy_kernels, args->stream,
                                      s->info->name, args->error, args->error_size);
}

static int cuda_zero(const blas_thunk_state *s, const dlop_run_args *args, void *pointer, size_t bytes) {
  int status = s->host->cuda_memset_async(pointer, 0, bytes, args->stream);
  if (status != DLOP_OK)
    dlop_set_error(args->error, args->error_size, "%s: cuda_memset_async of %zu bytes failed (status %d)",
                   s->info->name, bytes, status);
  return status;
}

const blas_backend blas_cuda_backend = {cuda_gemm, cuda_copy, cuda_zero};
