/* scale_add.c — the plugin template: one elementwise op, scale_add(x, y; alpha=1.0) ->
 * z = alpha * x + y with NumPy broadcasting, float32 and float64, on the CPU and CUDA. The kit
 * (<dlop/kit/elementwise.h>) gives the rules, the thunk and the entry point; here are the maths,
 * the parameter and the descriptors. */
#include <math.h>

#include <dlop/kit/elementwise.h>

#define SCALE_ADD_DTYPES (DLOP_DTYPE_BIT(DLOP_FLOAT32) | DLOP_DTYPE_BIT(DLOP_FLOAT64))

/* The CPU kernel of one run of n elements: p[0] = z, p[1] = x, p[2] = y, s their strides in
 * elements (0 for a broadcast operand). -ffp-contract=off (CMakeLists.txt) rounds alpha * x
 * before the sum, as the CUDA kernel does, so both devices give the same bits. */
#define SCALE_ADD_CPU(T)                                                                     \
  static void scale_add_##T(char *const *p, const int64_t *s, int64_t n, const void *params) { \
    const T alpha = *(const T *)params, *x = (const T *)p[1], *y = (const T *)p[2];          \
    T *z = (T *)p[0];                                                                        \
    if (s[0] == 1 && s[1] == 1 && s[2] == 1)                                                 \
      for (int64_t i = 0; i < n; i++) z[i] = alpha * x[i] + y[i];                            \
    else                                                                                     \
      for (int64_t i = 0; i < n; i++) z[i * s[0]] = alpha * x[i * s[1]] + y[i * s[2]];       \
  }
SCALE_ADD_CPU(float)
SCALE_ADD_CPU(double)

/* The kernels by dtype; on CUDA scale_add_{contiguous,rows,strided}_<dtype> (scale_add_cuda.cu). */
static const dlop_elementwise_cpu_kernel scale_add_cpu[DLOP_DTYPE_COUNT] = {
    [DLOP_FLOAT32] = scale_add_float, [DLOP_FLOAT64] = scale_add_double};

/* alpha as the host resolved it (the declared default when the caller gave none): finite. */
static int scale_add_alpha(const dlop_param_value *params, int32_t count, double *alpha,
                           char *error, size_t size) {
  *alpha = count == 1 && params[0].kind == DLOP_PARAM_FLOAT ? params[0].u.f : NAN;
  if (isfinite(*alpha)) return DLOP_OK;
  dlop_set_error(error, size, "scale_add: alpha must be finite, got %g", *alpha);
  return DLOP_INVALID_ARGUMENT;
}

/* The kernels' parameter block: alpha in the dtype they compute in. */
static int scale_add_params(const dlop_thunk_args *args, void *params, char *error, size_t size) {
  double alpha;
  int status = scale_add_alpha(args->params, args->num_params, &alpha, error, size);
  if (args->outputs[0].dtype == DLOP_FLOAT32) *(float *)params = (float)alpha;
  else *(double *)params = alpha;
  return status;
}

DLOP_FATBIN_DECLARE(scale_add_scale_add_cuda_fatbin); /* <target>_<.cu file stem>_fatbin */

static const dlop_elementwise_spec scale_add_spec = {
    .op_name = "scale_add",
    .host = dlop_plugin_host, /* the table dlop_plugin_init kept */
    .num_inputs = 2,
    .broadcast = 1, /* z has the broadcast shape of x and y */
    .cpu_dtypes = SCALE_ADD_DTYPES, /* what the kit's make_node accepts, and its make_thunk */
    .cuda_dtypes = SCALE_ADD_DTYPES,
    .cpu_kernels = scale_add_cpu,
    .make_params = scale_add_params,
    .cuda_fatbin = DLOP_FATBIN(scale_add_scale_add_cuda_fatbin), /* NULL without nvcc */
    .cuda_kernel_prefix = "scale_add",
    .cuda_contiguous_vectors = 1, /* 16-byte vectors per thread, as in scale_add_cuda.cu */
    .cuda_rows = DLOP_ELEMENTWISE_ROWS,
};

/* The type rule: a finite alpha, then the kit's (one dtype of SCALE_ADD_DTYPES, broadcasting). */
static int scale_add_make_node(const dlop_node_args *args) {
  double alpha;
  int status = scale_add_alpha(args->params, args->num_params, &alpha, args->error, args->error_size);
  return status == DLOP_OK ? dlop_elementwise_make_node(&scale_add_spec, args) : status;
}

/* Declared once with a kind and a default: the host fills in the default and checks kinds. */
static const dlop_param_decl scale_add_param_decls[] = {
    {.name = "alpha", .kind = DLOP_PARAM_FLOAT, .doc = "the factor x is multiplied by",
     .default_value = {.kind = DLOP_PARAM_FLOAT, .count = 1, .u.f = 1.0}}};

static const dlop_op_desc scale_add_op = {
    .struct_size = sizeof(dlop_op_desc), /* lets a newer host read this older layout */
    /* one launch per run, no allocation or synchronization; the same bits every time */
    .flags = DLOP_OP_DETERMINISTIC | DLOP_OP_CUDA_GRAPH_SAFE,
    .name = "scale_add",
    .doc = "scale_add(x, y; alpha=1.0) -> z = alpha * x + y, elementwise with NumPy broadcasting. "
           "x and y have the same dtype (float32 or float64); z has it too, and the broadcast "
           "shape. The product is rounded before the sum (no fused multiply-add), so the CPU and "
           "CUDA agree bit for bit. Any strides, negative and zero ones included.",
    .num_inputs = 2,
    .num_outputs = 1,
    .params = scale_add_param_decls,
    .num_params = 1,
    .cpu_dtypes = SCALE_ADD_DTYPES,
    /* a build without nvcc declares no CUDA dtypes: the host refuses CUDA at compile time */
    .cuda_dtypes = DLOP_HAVE_CUDA_KERNELS ? SCALE_ADD_DTYPES : 0,
    .make_node = scale_add_make_node,
    .infer_shape = dlop_elementwise_op_infer_shape,
    .make_thunk = dlop_elementwise_op_make_thunk,
    .op_data = (void *)&scale_add_spec, /* what the kit's stages read */
};

DLOP_PLUGIN_ENTRY("scale_add", "1.0.0",
                  "The dlop plugin template: scale_add (z = alpha * x + y) on the CPU and CUDA.",
                  &scale_add_op)
