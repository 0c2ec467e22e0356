/* elemwise_body.c — the scalar body (ABI 1.2) of every elemwise op: what it computes on one
 * element, as C statements over elemwise_scalar.h (its prelude, embedded at build time), so the
 * host may put the op into a fused kernel with its neighbours. The statements call the very
 * element functions the op's CPU and CUDA kernels call, so a fused result has their bits
 * (DLOP_SCALAR_BODY_EXACT) except where a math library is involved (pow, log, tanh, sigmoid:
 * within docs/ops.md's bounds). Arithmetic and math on float16 and bfloat16 compute in float32
 * (the host converts), as the kernels do; the ops that return one of their inputs' bits
 * unchanged (maximum, minimum, neg, abs, where, comparisons, cast) take the storage bits, so a
 * NaN's payload stays what the kernels leave. */
#include "elemwise_plugin.h"

/* elemwise_scalar.h's text (dlop_embed_text in CMakeLists.txt) */
extern const char elemwise_scalar_prelude[] __attribute__((visibility("hidden")));

static int is_16_bit_float(int32_t dtype) { return dtype == DLOP_FLOAT16 || dtype == DLOP_BFLOAT16; }
static int is_float(int32_t dtype) { return (DLOP_DTYPES_FLOAT & DLOP_DTYPE_BIT(dtype)) != 0; }

/* The source class of a cast: the int, float or double path of elemwise_scalar.h. */
static const char *cast_class(int32_t dtype) {
  if (dtype == DLOP_FLOAT64) return "double";
  return is_float(dtype) ? "float" : "int";
}

/* The statements of one op on its value dtype into code (size bytes); 1 when the op computes
 * in float32 for 16-bit floats (the host converts around the statements). */
static int write_code(const elemwise_op_info *info, int32_t value, int32_t out, char *code,
                      size_t size) {
  const char *name = dlop_dtype_name((dlop_dtype)value);
  const char *math = value == DLOP_FLOAT64 ? "d" : "f"; /* ew_logf or ew_logd */
  static const char *const operators[] = {[EW_ADD] = "+", [EW_SUB] = "-", [EW_MUL] = "*",
                                          [EW_DIV] = "/"};
  static const char *const functions[] = {
      [EW_ADD] = "add", [EW_SUB] = "sub", [EW_MUL] = "mul", [EW_MAXIMUM] = "maximum",
      [EW_MINIMUM] = "minimum", [EW_DIV] = "div", [EW_POW] = "pow", [EW_NEG] = "neg",
      [EW_ABS] = "abs", [EW_LOG] = "log", [EW_SQRT] = "sqrt", [EW_TANH] = "tanh",
      [EW_SIGMOID] = "sigmoid", [EW_EQUAL] = "equal", [EW_NOT_EQUAL] = "not_equal",
      [EW_LESS] = "less", [EW_LESS_EQUAL] = "less_equal", [EW_GREATER] = "greater",
      [EW_GREATER_EQUAL] = "greater_equal"};
  switch (info->id) {
    case EW_ADD:
    case EW_SUB:
    case EW_MUL:
    case EW_DIV:
      if (is_float(value)) {
        snprintf(code, size, "out0 = in0 %s in1;", operators[info->id]);
        return 1;
      }
      snprintf(code, size, "out0 = ew_%s_%s(in0, in1);", functions[info->id], name);
      return 0;
    case EW_POW:
      snprintf(code, size, "out0 = ew_pow%s(in0, in1);", math);
      return 1;
    case EW_LOG:
    case EW_SQRT:
    case EW_TANH:
    case EW_SIGMOID: {
      /* 16-bit sqrt and sigmoid have their own float functions (elemwise_scalar.h) */
      int own = is_16_bit_float(value) && (info->id == EW_SQRT || info->id == EW_SIGMOID);
      snprintf(code, size, "out0 = ew_%s%s(in0);", functions[info->id],
               own ? (value == DLOP_BFLOAT16 ? "b16f" : "16f") : math);
      return 1;
    }
    case EW_WHERE:
      snprintf(code, size, "out0 = in0 ? in1 : in2;"); /* any nonzero condition byte is true */
      return 0;
    case EW_CAST:
      if (value == out) {
        snprintf(code, size, "out0 = in0;"); /* a cast to the same dtype copies bits */
      } else {
        snprintf(code, size, "out0 = ew_%s_of_%s(ew_%s_of_%s(in0));",
                 dlop_dtype_name((dlop_dtype)out), cast_class(value), cast_class(value), name);
      }
      return 0;
    default: /* maximum, minimum, neg, abs and the comparisons, on the storage bits */
      if (info->kind == EW_KIND_UNARY)
        snprintf(code, size, "out0 = ew_%s_%s(in0);", functions[info->id], name);
      else
        snprintf(code, size, "out0 = ew_%s_%s(in0, in1);", functions[info->id], name);
      return 0;
  }
}

int elemwise_scalar_body(dlop_scalar_body_args *args) {
  const elemwise_op_info *info = (const elemwise_op_info *)args->op->op_data;
  const char *op = info->spec.op_name;
  int32_t first = info->kind == EW_KIND_WHERE ? 1 : 0, value, out, i;
  if (args->num_inputs != info->spec.num_inputs || args->num_outputs != 1) {
    dlop_set_error(args->error, args->error_size, "%s: scalar body for %d inputs and %d outputs, expected %d and 1",
                   op, (int)args->num_inputs, (int)args->num_outputs, (int)info->spec.num_inputs);
    return DLOP_INVALID_ARGUMENT;
  }
  value = args->inputs[first].dtype;
  out = args->outputs[0].dtype;
  if (value < 0 || value >= DLOP_DTYPE_COUNT || !(info->spec.cpu_dtypes & DLOP_DTYPE_BIT(value)) ||
      out < 0 || out >= DLOP_DTYPE_COUNT) {
    dlop_set_error(args->error, args->error_size, "%s: no scalar body for dtype %d", op, (int)value);
    return DLOP_UNSUPPORTED;
  }
  if (args->code_buffer == NULL || args->code_buffer_size < 96) {
    dlop_set_error(args->error, args->error_size, "%s: the host's code buffer is too small (%zu bytes)",
                   op, args->code_buffer_size);
    return DLOP_INVALID_ARGUMENT;
  }
  int in_float32 = write_code(info, value, out, args->code_buffer, args->code_buffer_size);
  if (in_float32 && is_16_bit_float(value)) {
    for (i = 0; i < args->num_inputs; i++) args->input_compute_dtypes[i] = DLOP_FLOAT32;
    args->output_compute_dtypes[0] = DLOP_FLOAT32;
  }
  args->code = args->code_buffer;
  args->prelude = elemwise_scalar_prelude;
  args->prelude_name = "elemwise.scalar.1";
  args->flags = (info->id == EW_POW || info->id == EW_LOG || info->id == EW_TANH ||
                   info->id == EW_SIGMOID)
                      ? 0u
                      : DLOP_SCALAR_BODY_EXACT;
  return DLOP_OK;
}
