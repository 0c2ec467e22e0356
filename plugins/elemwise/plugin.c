/* plugin.c — the elemwise plugin's entry point and op table: add, sub, mul, maximum, minimum,
 * div, pow, neg, abs, log, sqrt, tanh, sigmoid, the six comparisons, where and cast, each a spec
 * for the SDK's elementwise thunk and an ordinary op descriptor over the shared stages, with a
 * scalar body for fusion (ABI 1.2, elemwise_body.c). */
#include "elemwise_plugin.h"

/* The CUDA kernels, split over four .cu files so that nvcc builds them in parallel. */
DLOP_FATBIN_DECLARE(dlop_elemwise_elemwise_cuda_arith_fatbin);
DLOP_FATBIN_DECLARE(dlop_elemwise_elemwise_cuda_unary_fatbin);
DLOP_FATBIN_DECLARE(dlop_elemwise_elemwise_cuda_compare_fatbin);
DLOP_FATBIN_DECLARE(dlop_elemwise_elemwise_cuda_cast_fatbin);
#define ARITH DLOP_FATBIN(dlop_elemwise_elemwise_cuda_arith_fatbin)
#define UNARY DLOP_FATBIN(dlop_elemwise_elemwise_cuda_unary_fatbin)
#define COMPARE DLOP_FATBIN(dlop_elemwise_elemwise_cuda_compare_fatbin)
#define CAST DLOP_FATBIN(dlop_elemwise_elemwise_cuda_cast_fatbin)

#define FLOATS DLOP_DTYPES_FLOAT
#define NUMERIC ELEMWISE_NUMERIC
#define ALL DLOP_DTYPES_ALL

/* CUDA kernels beyond "strided": every op has a vectorized contiguous one (the last but one
 * column: its 16-byte vectors per thread and step, 2 for the ops whose arithmetic outweighs a
 * load; for comparisons, where and cast the step is one vector of the output), and the binary
 * arithmetic ones a 2-d rows one (matrix with a broadcast row, column or scalar); other
 * layouts go to the strided kernel, whose 1-d case needs no division (elemwise_cuda.cuh). */
#define ROWS_2D DLOP_ELEMENTWISE_ROWS_2D
#define NO_ROWS DLOP_ELEMENTWISE_NO_ROWS

/* The CPU kernels of an op by its value dtype (cast: by from and to). */
#define CPU_ARITH(ID) elemwise_cpu_arith_kernels[(ID) - EW_ADD]
#define CPU_UNARY(ID) elemwise_cpu_unary_kernels[(ID) - EW_NEG]
#define CPU_COMPARE(ID) elemwise_cpu_compare_kernels[(ID) - EW_EQUAL]
#define CPU_CAST(ID) (&elemwise_cpu_cast_kernels[0][0])

#define INFO(ID, NAME, KIND, INPUTS, DTYPES, CPU, FATBIN, CONTIGUOUS_VECTORS, ROWS, CHUNKS) \
  [ID] = {.spec = {.op_name = NAME,                                                          \
                   .host = dlop_plugin_host,                                                    \
                   .num_inputs = INPUTS,                                                     \
                   .broadcast = 1,                                                           \
                   .cpu_dtypes = DTYPES, /* of the value inputs (not where's condition) */   \
                   .cuda_dtypes = DTYPES,                                                    \
                   .cpu_kernels = CPU(ID),                                                   \
                   .cuda_fatbin = FATBIN,                                                    \
                   .cuda_kernel_prefix = "dlop_elemwise_" NAME,                              \
                   .cuda_contiguous_vectors = CONTIGUOUS_VECTORS,                            \
                   .cuda_rows = ROWS,                                                        \
                   .kernel_dtypes = elemwise_kernel_dtypes,                                  \
                   .cuda_chunk_dtypes = CHUNKS},                                             \
          .id = ID,                                                                          \
          .kind = KIND}

/* The dtypes whose contiguous kernel is in the kit's chunk form (elemwise_cuda_unary.cu says
 * which ops; blocks of DLOP_CUDA_CHUNK_BLOCK threads). */
#define F32_F64 (DLOP_DTYPE_BIT(DLOP_FLOAT32) | DLOP_DTYPE_BIT(DLOP_FLOAT64))

/* id, name, kind, inputs, value dtypes, CPU kernels, CUDA file, contiguous vectors, rows,
 * chunk dtypes */
static const elemwise_op_info infos[EW_OP_COUNT] = {
    INFO(EW_ADD, "add", EW_KIND_BINARY, 2, NUMERIC, CPU_ARITH, ARITH, 1, ROWS_2D, 0),
    INFO(EW_SUB, "sub", EW_KIND_BINARY, 2, NUMERIC, CPU_ARITH, ARITH, 1, ROWS_2D, 0),
    INFO(EW_MUL, "mul", EW_KIND_BINARY, 2, NUMERIC, CPU_ARITH, ARITH, 1, ROWS_2D, 0),
    INFO(EW_MAXIMUM, "maximum", EW_KIND_BINARY, 2, NUMERIC, CPU_ARITH, ARITH, 1, ROWS_2D, 0),
    INFO(EW_MINIMUM, "minimum", EW_KIND_BINARY, 2, NUMERIC, CPU_ARITH, ARITH, 1, ROWS_2D, 0),
    INFO(EW_DIV, "div", EW_KIND_BINARY, 2, FLOATS, CPU_ARITH, ARITH, 1, ROWS_2D, 0),
    INFO(EW_POW, "pow", EW_KIND_BINARY, 2, FLOATS, CPU_ARITH, ARITH, 2, ROWS_2D, 0),
    INFO(EW_NEG, "neg", EW_KIND_UNARY, 1, NUMERIC, CPU_UNARY, UNARY, 1, NO_ROWS, 0),
    INFO(EW_ABS, "abs", EW_KIND_UNARY, 1, NUMERIC, CPU_UNARY, UNARY, 1, NO_ROWS, 0),
    INFO(EW_LOG, "log", EW_KIND_UNARY, 1, FLOATS, CPU_UNARY, UNARY, 2, NO_ROWS, F32_F64),
    INFO(EW_SQRT, "sqrt", EW_KIND_UNARY, 1, FLOATS, CPU_UNARY, UNARY, 2, NO_ROWS, 0),
    INFO(EW_TANH, "tanh", EW_KIND_UNARY, 1, FLOATS, CPU_UNARY, UNARY, 2, NO_ROWS, F32_F64),
    INFO(EW_SIGMOID, "sigmoid", EW_KIND_UNARY, 1, FLOATS, CPU_UNARY, UNARY, 2, NO_ROWS, F32_F64),
    INFO(EW_EQUAL, "equal", EW_KIND_COMPARE, 2, ALL, CPU_COMPARE, COMPARE, 1, NO_ROWS, 0),
    INFO(EW_NOT_EQUAL, "not_equal", EW_KIND_COMPARE, 2, ALL, CPU_COMPARE, COMPARE, 1, NO_ROWS, 0),
    INFO(EW_LESS, "less", EW_KIND_COMPARE, 2, ALL, CPU_COMPARE, COMPARE, 1, NO_ROWS, 0),
    INFO(EW_LESS_EQUAL, "less_equal", EW_KIND_COMPARE, 2, ALL, CPU_COMPARE, COMPARE, 1, NO_ROWS, 0),
    INFO(EW_GREATER, "greater", EW_KIND_COMPARE, 2, ALL, CPU_COMPARE, COMPARE, 1, NO_ROWS, 0),
    INFO(EW_GREATER_EQUAL, "greater_equal", EW_KIND_COMPARE, 2, ALL, CPU_COMPARE, COMPARE, 1, NO_ROWS, 0),
    INFO(EW_WHERE, "where", EW_KIND_WHERE, 3, ALL, CPU_COMPARE, COMPARE, 1, NO_ROWS, 0),
    INFO(EW_CAST, "cast", EW_KIND_CAST, 1, ALL, CPU_CAST, CAST, 1, NO_ROWS, 0),
};

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

/* name and num_inputs repeat infos[]: descriptors are constant data */
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
      .infer_shape = dlop_elementwise_op_infer_shape,                                        \
      .make_thunk = dlop_elementwise_op_make_thunk,                                          \
      .op_data = (void *)&infos[ID],                                                         \
      .make_view = NULL,                                                                     \
      .scalar_body = elemwise_scalar_body,                                                   \
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

DLOP_PLUGIN_ENTRY("elemwise", "1.0.0",
                  "Elementwise algebra with NumPy broadcasting on the CPU and CUDA: arithmetic, "
                  "maximum/minimum, unary math, comparisons, where and cast.",
                  &add_op, &sub_op, &mul_op, &maximum_op, &minimum_op, &div_op, &pow_op,
                  &neg_op, &abs_op, &log_op, &sqrt_op, &tanh_op, &sigmoid_op, &equal_op,
                  &not_equal_op, &less_op, &less_equal_op, &greater_op, &greater_equal_op,
                  &where_op, &cast_op)
