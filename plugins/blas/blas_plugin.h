/* blas_plugin.h — declarations shared by the files of the blas plugin (dot, matmul, gemm):
 * the ops' parameters, the run-time problem (a batch of row-major GEMMs over strided
 * operands), and the two backends (CBLAS on the CPU, cuBLAS on CUDA) that execute it. */
#ifndef DLOP_BLAS_PLUGIN_H
#define DLOP_BLAS_PLUGIN_H

#include <dlop/kit/kernel_util.h>
#include <dlop/plugin.h>

#define BLAS_CPU_DTYPES (DLOP_DTYPE_BIT(DLOP_FLOAT32) | DLOP_DTYPE_BIT(DLOP_FLOAT64))
#define BLAS_CUDA_DTYPES DLOP_DTYPES_FLOAT
/* What make_node accepts: the dtypes some device of this build declares (CUDA's only where its
 * kernels were compiled; the descriptors in plugin.c say the same). */
#define BLAS_CUDA_DECLARED_DTYPES (DLOP_HAVE_CUDA_KERNELS ? BLAS_CUDA_DTYPES : 0u)
#define BLAS_ANY_DTYPES (BLAS_CPU_DTYPES | BLAS_CUDA_DECLARED_DTYPES)

typedef enum blas_op_kind { BLAS_DOT = 0, BLAS_MATMUL = 1, BLAS_GEMM = 2 } blas_op_kind;

/* The op's own data (dlop_op_desc.op_data): which op, and where its parameters are. */
typedef struct blas_op_info {
  blas_op_kind kind;
  const char *name;
  int32_t alpha_index, beta_index, trans_a_index, trans_b_index; /* -1 where the op has none */
  int32_t allow_tf32_index;
} blas_op_info;

/* The parameters, read once at make_thunk (or from node args). */
typedef struct blas_params {
  double alpha, beta;
  int trans_a, trans_b, allow_tf32;
} blas_params;

const dlop_host_api *blas_host(void);

int blas_make_node(const dlop_node_args *args);
int blas_infer_shape(const dlop_node_args *args);
int blas_make_thunk(const dlop_thunk_args *args);
/* The type and shape rule (blas_node.c): output type from input types (static or concrete). */
int blas_shape_rule(const blas_op_info *info, const blas_params *params, const dlop_type *inputs,
                    int32_t num_inputs, int32_t num_outputs, dlop_type *out, char *error,
                    size_t error_size);
/* Parameters from a params array (declaration order); defaults where absent. */
blas_params blas_read_params(const blas_op_info *info, const dlop_param_value *params,
                             int32_t num_params);

/* ---- the run-time problem ------------------------------------------------------------- */

/* A matrix operand as rows x cols with element strides (any sign, zero included). */
typedef struct blas_matrix {
  int64_t rows, cols, row_stride, col_stride;
} blas_matrix;

/* Operands of the problem: A (m x k), B (k x n), C (m x n, the output or its scratch). */
enum { BLAS_A = 0, BLAS_B = 1, BLAS_C = 2, BLAS_OPERANDS = 3 };

/* out[batch] = alpha * A[batch] @ B[batch] + beta * out[batch], batch over NumPy-broadcast
 * batch dims; operand p's batch element i starts at base[p] + sum(index_d * batch_stride[p][d])
 * elements. */
typedef struct blas_problem {
  dlop_dtype dtype;
  int64_t m, n, k;
  int32_t batch_ndim;
  int64_t batch_shape[DLOP_MAX_NDIM];
  int64_t batch_count;
  int64_t batch_stride[BLAS_OPERANDS][DLOP_MAX_NDIM];
  char *base[BLAS_OPERANDS];
  blas_matrix matrix[BLAS_OPERANDS];
} blas_problem;

/* Describe op(kind) on tensors a, b and output out (gemm: trans flags from params) as a
 * problem. The tensors' shapes have been checked against the op's shape rule. */
int blas_problem_init(blas_problem *p, blas_op_kind kind, const blas_params *params,
                      const dlop_tensor *a, const dlop_tensor *b, const dlop_tensor *out,
                      const char *op_name, char *error, size_t error_size);

/* How BLAS can read a matrix without a copy: row-major as is (transpose 0) or as the transpose
 * of a row-major matrix (transpose 1), with leading dimension ld. 0 when neither works
 * (both strides != 1, negative or zero strides, overlapping rows). */
int blas_matrix_direct(const blas_matrix *m, int *transpose, int64_t *ld);

/* C^T = B^T A^T: the same products with the output read transposed. */
void blas_problem_transpose(blas_problem *p);

/* Merge batch dims so that every operand steps through adjacent dims as one (size-1 dims
 * dropped): after it a batch that is one stride per operand has batch_ndim <= 1. */
void blas_problem_collapse_batch(blas_problem *p);

/* ---- backends ------------------------------------------------------------------------- */

/* One row-major GEMM call, batch_count times with element strides between batch elements:
 * C = alpha * op(A) @ op(B) + beta * C (beta 0: C is not read). */
typedef struct blas_gemm_call {
  dlop_dtype dtype;
  int trans_a, trans_b;
  int64_t m, n, k;
  double alpha, beta;
  const void *a;
  int64_t lda, stride_a;
  const void *b;
  int64_t ldb, stride_b;
  void *c;
  int64_t ldc, stride_c;
  int64_t batch_count;
} blas_gemm_call;

typedef struct blas_thunk_state blas_thunk_state;

typedef struct blas_backend {
  int (*gemm)(const blas_thunk_state *s, const dlop_run_args *args, const blas_gemm_call *call);
  /* dst = src broadcast to dst's shape (any strides on both; dtype of the thunk) */
  int (*copy)(const blas_thunk_state *s, const dlop_run_args *args, const dlop_tensor *dst,
              const dlop_tensor *src);
  /* bytes of zeros at pointer (device memory of the thunk) */
  int (*zero)(const blas_thunk_state *s, const dlop_run_args *args, void *pointer, size_t bytes);
} blas_backend;

/* The CPU BLAS, loaded once per process (cpu_blas_loader.c). Two integer widths: LP64
 * libraries (Debian's OpenBLAS, scipy-openblas32) take int dimensions, ILP64 ones (NumPy's
 * bundled OpenBLAS, scipy-openblas64) take 64-bit ones; each has its own pointer types. */
typedef void (*blas_cblas_sgemm_fn)(int order, int trans_a, int trans_b, int m, int n, int k,
                                    float alpha, const float *a, int lda, const float *b,
                                    int ldb, float beta, float *c, int ldc);
typedef void (*blas_cblas_dgemm_fn)(int order, int trans_a, int trans_b, int m, int n, int k,
                                    double alpha, const double *a, int lda, const double *b,
                                    int ldb, double beta, double *c, int ldc);
/* Level 1 and 2: a GEMM with one row or one column (a dot or a matrix-vector product) is
 * several times faster through them (OpenBLAS's sgemm of 1 x k by k x 1 ran at a tenth of
 * its sdot). Optional: NULL where the library lacks them (every CBLAS has them). */
typedef float (*blas_cblas_sdot_fn)(int n, const float *x, int incx, const float *y, int incy);
typedef double (*blas_cblas_ddot_fn)(int n, const double *x, int incx, const double *y, int incy);
typedef void (*blas_cblas_sgemv_fn)(int order, int trans, int m, int n, float alpha, const float *a,
                                    int lda, const float *x, int incx, float beta, float *y, int incy);
typedef void (*blas_cblas_dgemv_fn)(int order, int trans, int m, int n, double alpha,
                                    const double *a, int lda, const double *x, int incx,
                                    double beta, double *y, int incy);
/* The ILP64 forms: the enums stay int (CBLAS_ORDER etc. are C enums in every CBLAS). */
typedef void (*blas_cblas64_sgemm_fn)(int order, int trans_a, int trans_b, int64_t m, int64_t n,
                                      int64_t k, float alpha, const float *a, int64_t lda,
                                      const float *b, int64_t ldb, float beta, float *c,
                                      int64_t ldc);
typedef void (*blas_cblas64_dgemm_fn)(int order, int trans_a, int trans_b, int64_t m, int64_t n,
                                      int64_t k, double alpha, const double *a, int64_t lda,
                                      const double *b, int64_t ldb, double beta, double *c,
                                      int64_t ldc);
typedef float (*blas_cblas64_sdot_fn)(int64_t n, const float *x, int64_t incx, const float *y,
                                      int64_t incy);
typedef double (*blas_cblas64_ddot_fn)(int64_t n, const double *x, int64_t incx, const double *y,
                                       int64_t incy);
typedef void (*blas_cblas64_sgemv_fn)(int order, int trans, int64_t m, int64_t n, float alpha,
                                      const float *a, int64_t lda, const float *x, int64_t incx,
                                      float beta, float *y, int64_t incy);
typedef void (*blas_cblas64_dgemv_fn)(int order, int trans, int64_t m, int64_t n, double alpha,
                                      const double *a, int64_t lda, const double *x, int64_t incx,
                                      double beta, double *y, int64_t incy);

/* Where the library came from, in the loader's order of preference. */
typedef enum blas_cpu_source {
  BLAS_SOURCE_ENVIRONMENT = 0, /* DLOP_BLAS_LIBRARY */
  BLAS_SOURCE_PROCESS = 1,     /* a scipy-openblas the process had loaded (NumPy's, SciPy's) */
  BLAS_SOURCE_WHEEL = 2,       /* a scipy-openblas wheel's library (recorded by the build) */
  BLAS_SOURCE_SYSTEM = 3       /* libopenblas.so.0, libcblas.so.3, libblas.so.3 */
} blas_cpu_source;

typedef struct blas_cpu_library {
  int ilp64; /* 1: the blas_cblas64_* pointers are set, 0: the LP64 ones */
  blas_cblas_sgemm_fn sgemm;
  blas_cblas_dgemm_fn dgemm;
  blas_cblas_sdot_fn sdot;
  blas_cblas_ddot_fn ddot;
  blas_cblas_sgemv_fn sgemv;
  blas_cblas_dgemv_fn dgemv;
  blas_cblas64_sgemm_fn sgemm64;
  blas_cblas64_dgemm_fn dgemm64;
  blas_cblas64_sdot_fn sdot64;
  blas_cblas64_ddot_fn ddot64;
  blas_cblas64_sgemv_fn sgemv64;
  blas_cblas64_dgemv_fn dgemv64;
  /* OpenBLAS's own queries, NULL for other libraries */
  char *(*corename)(void);
  char *(*config)(void);
  int (*num_threads)(void);
  const char *path;   /* what was loaded */
  const char *sgemm_symbol; /* the name its sgemm was found under (shows prefix and suffix) */
  blas_cpu_source source;
} blas_cpu_library;

/* The process's CBLAS, or NULL with a message saying what was tried and what to install. */
const blas_cpu_library *blas_cpu_library_get(char *error, size_t error_size);

/* Resolve the CBLAS functions of an open library into *lib (cpu_blas_symbols.c): the plain,
 * scipy_-prefixed and 64_-suffixed names. 0 with a reason in why when it has no GEMMs. */
int blas_cpu_resolve(void *handle, blas_cpu_library *lib, const char **why);

/* Paths of scipy-openblas libraries already loaded in this process (cpu_blas_loaded.c): up to
 * max of them into paths (static storage), returns how many. */
int blas_cpu_loaded_scipy_openblas(const char **paths, int max);

/* What the library is, for dlop info (cpu_blas_info.c): lines of "key: value". */
void blas_cpu_library_describe(const blas_cpu_library *lib, char *text, size_t text_size);
/* The ops' runtime_info stage (ABI 1.2): the CPU library's description. */
int blas_runtime_info(const dlop_runtime_info_args *args);

/* Function pointers resolved through the host's cublas_symbol at make_thunk. */
typedef struct blas_cuda_functions {
  void *gemm_ex, *gemm_strided_batched_ex, *set_pointer_mode, *set_math_mode, *status_string;
} blas_cuda_functions;

struct blas_thunk_state {
  const blas_op_info *info;
  const dlop_host_api *host;
  blas_params params;
  dlop_type inputs[3], output;
  int32_t num_inputs;
  dlop_device device;
  const blas_backend *backend;
  const blas_cpu_library *cpu; /* CPU thunks */
  void *module;                /* CUDA thunks: the copy kernels' module */
  dlop_cuda_elementwise copy_kernels;
  blas_cuda_functions cublas;
  void *dot_module, *dot_partials, *dot_finish; /* CUDA thunks: the dot kernels */
  uint32_t sm_count;                            /* CUDA thunks: the device's */
};

extern const blas_backend blas_cpu_backend;
extern const blas_backend blas_cuda_backend;

/* The run shared by both devices: checks, copies where BLAS cannot read a layout, the GEMM
 * calls, and the copy back when the output could not be written directly. */
int blas_run(void *state, const dlop_run_args *args);

/* make_thunk's device parts. */
int blas_cpu_prepare(blas_thunk_state *s, const dlop_thunk_args *args);
int blas_cuda_prepare(blas_thunk_state *s, const dlop_thunk_args *args);
void blas_cuda_release(blas_thunk_state *s);

/* A GEMM of one output element (m = n = 1, one batch element) on CUDA: the plugin's own dot
 * kernels (blas_cuda_dot.c), loaded by blas_cuda_dot_prepare, unloaded by
 * blas_cuda_dot_release. */
int blas_cuda_dot_prepare(blas_thunk_state *s, const dlop_thunk_args *args);
void blas_cuda_dot_release(blas_thunk_state *s);
int blas_cuda_dot(const blas_thunk_state *s, const dlop_run_args *args, const blas_gemm_call *c);

#endif
