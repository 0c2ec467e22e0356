/* plugin.c — the elemwise plugin's entry point and op table: add, sub, mul, maximum, minimum,
 * div, pow, neg, abs, log, sqrt, tanh, sigmoid, the six comparisons, where and cast, each an
 * ordinary op descriptor over the shared stages (elemwise_node.c, elemwise_thunk.c). */
#include "elemwise_plugin.h"

static const dlop_host_api *host_table;

const dlop_host_api *elemwise_host(void) { return host_table; }

#define FLOATS DLOP_DTYPES_FLOAT
#define NUMERIC ELEMWISE_NUMERIC
#define ALL DLOP_DTYPES_ALL

/* id, kind, inputs, dtypes, CUDA file, vectorized contiguous kernel, rows kernel */
static const elemwise_op_info infos[EW_OP_COUNT] = {
    [EW_ADD] = {EW_ADD, EW_KIND_BINARY, 2, NUMERIC, EW_CUDA_ARITH, 1, 1},
    [EW_SUB] = {EW_SUB, EW_KIND_BINARY, 2, NUMERIC, EW_CUDA_ARITH, 1, 1},
    [EW_MUL] = {EW_MUL, EW_KIND_BINARY, 2, NUMERIC, EW_CUDA_ARITH, 1, 1},
    [EW_MAXIMUM] = {EW_MAXIMUM, EW_KIND_BINARY, 2, NUMERIC, EW_CUDA_ARITH, 1, 1},
    [EW_MINIMUM] = {EW_MINIMUM, EW_KIND_BINARY, 2, NUMERIC, EW_CUDA_ARITH, 1, 1},
    [EW_DIV] = {EW_DIV, EW_KIND_BINARY, 2, FLOATS, EW_CUDA_ARITH, 1, 1},
    [EW_POW] = {EW_POW, EW_KIND_BINARY, 2, FLOATS, EW_CUDA_ARITH, 0, 0},
    [EW_NEG] = {EW_NEG, EW_KIND_UNARY, 1, NUMERIC, EW_CUDA_UNARY, 1, 0},
    [EW_ABS] = {EW_ABS, EW_KIND_UNARY, 1, NUMERIC, EW_CUDA_UNARY, 1, 0},
    [EW_LOG] = {EW_LOG, EW_KIND_UNARY, 1, FLOATS, EW_CUDA_UNARY, 0, 0},
    [EW_SQRT] = {EW_SQRT, EW_KIND_UNARY, 1, FLOATS, EW_CUDA_UNARY, 1, 0},
    [EW_TANH] = {EW_TANH, EW_KIND_UNARY, 1, FLOATS, EW_CUDA_UNARY, 0, 0},
    [EW_SIGMOID] = {EW_SIGMOID, EW_KIND_UNARY, 1, FLOATS, EW_CUDA_UNARY, 0, 0},
    [EW_EQUAL] = {EW_EQUAL, EW_KIND_COMPARE, 2, ALL, EW_CUDA_COMPARE, 0, 0},
    [EW_NOT_EQUAL] = {EW_NOT_EQUAL, EW_KIND_COMPARE, 2, ALL, EW_CUDA_COMPARE, 0, 0},
    [EW_LESS] = {EW_LESS, EW_KIND_COMPARE, 2, ALL, EW_CUDA_COMPARE, 0, 0},
    [EW_LESS_EQUAL] = {EW_LESS_EQUAL, EW_KIND_COMPARE, 2, ALL, EW_CUDA_COMPARE, 0, 0},
    [EW_GREATER] = {EW_GREATER, EW_KIND_COMPARE, 2, ALL, EW_CUDA_COMPARE, 0, 0},
    [EW_GREATER_EQUAL] = {EW_GREATER_EQUAL, EW_KIND_COMPARE, 2, ALL, EW_CUDA_COMPARE, 0, 0},
    [EW_WHERE] = {EW_WHERE, EW_KIND_WHERE, 3, ALL, EW_CUDA_COMPARE, 0, 0},
    [EW_CAST] = {EW_CAST, EW_KIND_CAST, 1, ALL, EW_CUDA_CAST, 0, 0},
};

static const char *const names[EW_OP_COUNT] = {
    "add", "sub", "mul", "maximum", "minimum", "div", "pow", "neg", "abs", "log", "sqrt", "tanh",
    "sigmoid", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "where",
    "cast"};

const char *elemwise_op_name(int32_t id) {
  return id >= 0 && id < EW_OP_COUNT ? names[id] : "elemwise";
}

/* Element k of the output reads only element k of each input (the host reuses an input only
 * when it has the output's dtype and shape), so the output may overwrite input 0, or where's x
 * (input 1). */
static const int32_t inplace_first[] = {0};
static const int32_t inplace_where[] = {1};

static const dlop_param_decl cast_params[] = {
    {.name = "dtype",
     .kind = DLOP_PARAM_STRING,
     .doc = "the output dtype's name: bool, int8, int16, int32, int64, uint8, float16, bfloat16, "
            "float32 or float64",
     .default_value = {.kind = DLOP_PARAM_STRING, .count = 1, .u.s = "float32"}},
};

#define CUDA_DTYPES(mask) (DLOP_HAVE_CUDA_KERNELS ? (mask) : 0u)

/* name and num_inputs repeat names[] and infos[]: descriptors are constant data */
#define OP(var, ID, NAME, INPUTS, DTYPES, DOC, PARAMS, NUM_PARAMS, INPLACE)                  \
  static const dlop_op_desc var = {                                                          \
      .struct_size = sizeof(dlop_op_desc),                                                   \
      .flags = DLOP_OP_DETERMINISTIC | DLOP_OP_CUDA_GRAPH_SAFE,                              \
      .name = NAME,                                                                          \
      .doc = DOC,                                                                            \
      .num_inputs = INPUTS,                                                                  \
      .num_outputs = 1,                                                                      \
      .params = PARAMS,                                                                      \
      .num_params = NUM_PARAMS,                                                              \
      .cpu_dtypes = DTYPES,                                                                  \
      .cuda_dtypes = CUDA_DTYPES(DTYPES),                                                    \
      .inplace_map = INPLACE,                                                                \
      .view_map = NULL,                                                                      \
      .make_node = elemwise_make_node,                                                       \
      .infer_shape = elemwise_infer_shape,                                                   \
      .make_thunk = elemwise_make_thunk,                                                     \
      .op_data = (void *)&infos[ID],                                                         \
      .make_view = NULL,                                                                     \
  }

#define BINARY_DOC(expr) \
  expr ", elementwise with NumPy broadcasting. a and b must have the same dtype (cast one " \
  "otherwise); the output has it and the broadcast shape. Any strides."
#define INT_WRAP " Integers wrap on overflow, like NumPy."
#define HALF_NOTE " float16 and bfloat16 compute in float32 and round once."

OP(add_op, EW_ADD, "add", 2, NUMERIC, BINARY_DOC("add(a, b) -> a + b") INT_WRAP HALF_NOTE, NULL, 0, inplace_first);
OP(sub_op, EW_SUB, "sub", 2, NUMERIC, BINARY_DOC("sub(a, b) -> a - b") INT_WRAP HALF_NOTE, NULL, 0, inplace_first);
OP(mul_op, EW_MUL, "mul", 2, NUMERIC, BINARY_DOC("mul(a, b) -> a * b") INT_WRAP HALF_NOTE, NULL, 0, inplace_first);
OP(maximum_op, EW_MAXIMUM, "maximum", 2, NUMERIC,
   BINARY_DOC("maximum(a, b) -> the larger of a and b") " NaN propagates, as in NumPy.", NULL, 0, inplace_first);
OP(minimum_op, EW_MINIMUM, "minimum", 2, NUMERIC,
   BINARY_DOC("minimum(a, b) -> the smaller of a and b") " NaN propagates, as in NumPy.", NULL, 0, inplace_first);
OP(div_op, EW_DIV, "div", 2, FLOATS, BINARY_DOC("div(a, b) -> a / b (floats)") HALF_NOTE, NULL, 0, inplace_first);
OP(pow_op, EW_POW, "pow", 2, FLOATS, BINARY_DOC("pow(a, b) -> a ** b (floats)") HALF_NOTE, NULL, 0, inplace_first);
OP(neg_op, EW_NEG, "neg", 1, NUMERIC, "neg(x) -> -x, elementwise." INT_WRAP, NULL, 0, inplace_first);
OP(abs_op, EW_ABS, "abs", 1, NUMERIC,
   "abs(x) -> |x|, elementwise. Integers wrap: abs of the most negative value is itself, as in NumPy.",
   NULL, 0, inplace_first);
OP(log_op, EW_LOG, "log", 1, FLOATS, "log(x) -> natural logarithm of x, elementwise." HALF_NOTE, NULL, 0, inplace_first);
OP(sqrt_op, EW_SQRT, "sqrt", 1, FLOATS, "sqrt(x) -> square root of x, elementwise." HALF_NOTE, NULL, 0, inplace_first);
OP(tanh_op, EW_TANH, "tanh", 1, FLOATS, "tanh(x) -> hyperbolic tangent of x, elementwise." HALF_NOTE, NULL, 0, inplace_first);
OP(sigmoid_op, EW_SIGMOID, "sigmoid", 1, FLOATS, "sigmoid(x) -> 1 / (1 + e^-x), elementwise." HALF_NOTE, NULL, 0, inplace_first);

#define COMPARE_DOC(expr) \
  expr ", elementwise with NumPy broadcasting: a bool output of the broadcast shape. a and b " \
  "must have the same dtype (any dtype). NaN compares unequal to everything."
OP(equal_op, EW_EQUAL, "equal", 2, ALL, COMPARE_DOC("equal(a, b) -> a == b"), NULL, 0, inplace_first);
OP(not_equal_op, EW_NOT_EQUAL, "not_equal", 2, ALL, COMPARE_DOC("not_equal(a, b) -> a != b"), NULL, 0, inplace_first);
OP(less_op, EW_LESS, "less", 2, ALL, COMPARE_DOC("less(a, b) -> a < b"), NULL, 0, inplace_first);
OP(less_equal_op, EW_LESS_EQUAL, "less_equal", 2, ALL, COMPARE_DOC("less_equal(a, b) -> a <= b"), NULL, 0, inplace_first);
OP(greater_op, EW_GREATER, "greater", 2, ALL, COMPARE_DOC("greater(a, b) -> a > b"), NULL, 0, inplace_first);
OP(greater_equal_op, EW_GREATER_EQUAL, "greater_equal", 2, ALL, COMPARE_DOC("greater_equal(a, b) -> a >= b"), NULL, 0, inplace_first);
OP(where_op, EW_WHERE, "where", 3, ALL,
   "where(condition, x, y) -> x where condition is true, else y, elementwise with NumPy "
   "broadcasting of all three. condition must be bool; x and y the same dtype (any), which the "
   "output has.",
   NULL, 0, inplace_where);
OP(cast_op, EW_CAST, "cast", 1, ALL,
   "cast(x; dtype='float32') -> x converted to dtype, same shape. Float to integer rounds toward "
   "zero, NaN gives 0 and values beyond the range saturate; integer to integer wraps; to bool is "
   "x != 0; between floats (and integer to float) rounds to nearest even; NaN to a float dtype "
   "is its quiet NaN with the sign kept. The CPU and CUDA agree bit for bit.",
   cast_params, 1, inplace_first);

static const dlop_op_desc *const ops[EW_OP_COUNT] = {
    &add_op, &sub_op, &mul_op, &maximum_op, &minimum_op, &div_op, &pow_op, &neg_op, &abs_op,
    &log_op, &sqrt_op, &tanh_op, &sigmoid_op, &equal_op, &not_equal_op, &less_op,
    &less_equal_op, &greater_op, &greater_equal_op, &where_op, &cast_op};

static const dlop_plugin_desc plugin = {
    .struct_size = sizeof(dlop_plugin_desc),
    .abi_version = DLOP_ABI_VERSION,
    .name = "elemwise",
    .version = "1.0.0",
    .doc = "Elementwise algebra with NumPy broadcasting on the CPU and CUDA: arithmetic, "
           "maximum/minimum, unary math, comparisons, where and cast.",
    .ops = ops,
    .num_ops = EW_OP_COUNT,
};

DLOP_PLUGIN_EXPORT int dlop_plugin_init(const dlop_host_api *host, uint32_t host_abi_version,
                                        const dlop_plugin_desc **plugin_out, char *error,
                                        size_t error_size) {
  return dlop_plugin_init_standard(host, host_abi_version, plugin_out, error, error_size, &plugin,
                                   &host_table);
}
