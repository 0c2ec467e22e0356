/* plugin.c — the blas plugin's entry point and the descriptors of its ops: dot, matmul and
 * gemm (docs/ops.md, "blas"), their parameters, dtypes and flags. */
#include "blas_plugin.h"

static const dlop_host_api *host_table;

const dlop_host_api *blas_host(void) { return host_table; }

#define BLAS_BOOL_PARAM(param_name, text, value)                                           \
  {.name = param_name, .kind = DLOP_PARAM_BOOL, .doc = text,                               \
   .default_value = {.kind = DLOP_PARAM_BOOL, .count = 1, .u = {.i = value}}}
#define BLAS_FLOAT_PARAM(param_name, text, value)                                          \
  {.name = param_name, .kind = DLOP_PARAM_FLOAT, .doc = text,                              \
   .default_value = {.kind = DLOP_PARAM_FLOAT, .count = 1, .u = {.f = value}}}

#define BLAS_TF32_DOC                                                                      \
  "CUDA float32 only: let cuBLAS use TF32 tensor cores (about 10 bits of mantissa); off by " \
  "default, so float32 products are computed in float32"

static const dlop_param_decl blas_tf32_params[] = {
    BLAS_BOOL_PARAM("allow_tf32", BLAS_TF32_DOC, 0),
};

static const dlop_param_decl gemm_params[] = {
    BLAS_FLOAT_PARAM("alpha", "scale of op(a) @ op(b)", 1.0),
    BLAS_FLOAT_PARAM("beta", "scale of c (0: c is not read, as in BLAS)", 1.0),
    BLAS_BOOL_PARAM("trans_a", "op(a) is a transposed", 0),
    BLAS_BOOL_PARAM("trans_b", "op(b) is b transposed", 0),
    BLAS_BOOL_PARAM("allow_tf32", BLAS_TF32_DOC, 0),
};

static const blas_op_info dot_info = {BLAS_DOT, "dot", -1, -1, -1, -1, 0};
static const blas_op_info matmul_info = {BLAS_MATMUL, "matmul", -1, -1, -1, -1, 0};
static const blas_op_info gemm_info = {BLAS_GEMM, "gemm", 0, 1, 2, 3, 4};

/* gemm's output may take c's memory: c is copied into the output (a no-op when they alias)
 * and then updated in place by the GEMM, which reads element (i, j) of c only to write
 * element (i, j) of the output. */
static const int32_t gemm_inplace[] = {2};

/* Not DLOP_OP_DETERMINISTIC: cuBLAS promises bit-identical results only while one stream is
 * active (with several concurrent streams it may pick other internal implementations), and
 * OpenBLAS's results depend on its thread count. Not DLOP_OP_CUDA_GRAPH_SAFE: cuBLAS may
 * allocate its workspace, and layouts BLAS cannot read are copied through memory allocated
 * during the run. */
#define BLAS_FLAGS 0u

/* What the three descriptors share: one output, the dtypes (CUDA needs the copy kernels),
 * the flags, the same make_node/infer_shape/make_thunk told apart by op_data. Each op below
 * spells out only what is its own: name, doc, inputs, parameters, in-place map. */
#define BLAS_OP_COMMON(info)                                                               \
  .struct_size = sizeof(dlop_op_desc), .flags = BLAS_FLAGS, .num_outputs = 1,              \
  .cpu_dtypes = BLAS_CPU_DTYPES, .cuda_dtypes = BLAS_CUDA_DECLARED_DTYPES,                 \
  .make_node = blas_make_node, .infer_shape = blas_infer_shape,                            \
  .make_thunk = blas_make_thunk, .op_data = (void *)&(info), .runtime_info = blas_runtime_info

#define BLAS_COUNT(array) ((int32_t)(sizeof(array) / sizeof((array)[0])))

static const dlop_op_desc dot_op = {
    BLAS_OP_COMMON(dot_info),
    .name = "dot",
    .doc = "dot(a, b): a and b of rank 1 or 2; (n)·(n) -> (), (m,k)·(k) -> (m), (k)·(k,n) -> (n), "
           "(m,k)·(k,n) -> (m,n). One dtype for both. cuBLAS on CUDA (float16/bfloat16 "
           "accumulate in float32), a CBLAS library (OpenBLAS) on the CPU.",
    .num_inputs = 2,
    .params = blas_tf32_params,
    .num_params = BLAS_COUNT(blas_tf32_params),
};

static const dlop_op_desc matmul_op = {
    BLAS_OP_COMMON(matmul_info),
    .name = "matmul",
    .doc = "matmul(a, b): NumPy's matmul: a and b of rank >= 1, batch dims broadcast, a 1-D "
           "operand is promoted to a matrix and the added dim dropped. One dtype for both.",
    .num_inputs = 2,
    .params = blas_tf32_params,
    .num_params = BLAS_COUNT(blas_tf32_params),
};

static const dlop_op_desc gemm_op = {
    BLAS_OP_COMMON(gemm_info),
    .name = "gemm",
    .doc = "gemm(a, b, c) = alpha * op(a) @ op(b) + beta * c, a and b of rank 2, op(x) = x or "
           "x.T (trans_a, trans_b), c of rank <= 2 broadcast to (m, n); beta = 0 ignores c. "
           "One dtype for all three.",
    .num_inputs = 3,
    .params = gemm_params,
    .num_params = BLAS_COUNT(gemm_params),
    .inplace_map = gemm_inplace,
};

static const dlop_op_desc *const blas_ops[] = {&dot_op, &matmul_op, &gemm_op};

static const dlop_plugin_desc blas_plugin = {
    .struct_size = sizeof(dlop_plugin_desc),
    .abi_version = DLOP_ABI_VERSION,
    .name = "blas",
    .version = "1.0.0",
    .doc = "dot, matmul and gemm: cuBLAS on CUDA (float16, bfloat16, float32, float64), a CBLAS "
           "library loaded at run time on the CPU (float32, float64; OpenBLAS, or "
           "DLOP_BLAS_LIBRARY).",
    .ops = blas_ops,
    .num_ops = BLAS_COUNT(blas_ops),
};

DLOP_PLUGIN_EXPORT int dlop_plugin_init(const dlop_host_api *host, uint32_t host_abi_version,
                                        const dlop_plugin_desc **plugin, char *error,
                                        size_t error_size) {
  return dlop_plugin_init_standard(host, host_abi_version, plugin, error, error_size,
                                   &blas_plugin, &host_table);
}
