/* reduce_body.c — the reduce ops' reduction bodies (ABI 1.2): what fusion needs to run sum,
 * mean, max and min over a fused group's values without materializing them. The rules are the
 * kernels' own (reduce_cpu_runs.c, reduce_cuda.cu): float16 and bfloat16 accumulate in float32,
 * integers in int64 (sums wrap), max and min propagate NaN (a NaN running value stays, a NaN
 * new value wins), mean divides in the accumulator type (an empty mean is 0 / 0, NaN). */
#include "reduce_plugin.h"

/* The accumulator of an input dtype, as both kernels use it. */
static dlop_dtype accumulator_of(dlop_dtype input) {
  if (input == DLOP_FLOAT16 || input == DLOP_BFLOAT16) return DLOP_FLOAT32;
  if (dlop_dtype_is_float(input)) return input;
  return DLOP_INT64;
}

/* The identity's bits: 0 for sums; for max the lowest value (-inf, INT64_MIN), for min the
 * highest. */
static uint64_t identity_of(reduce_kind kind, dlop_dtype accumulator) {
  int highest = kind == REDUCE_MIN;
  if (kind == REDUCE_SUM || kind == REDUCE_MEAN) return 0;
  if (accumulator == DLOP_FLOAT32) return highest ? 0x7F800000u : 0xFF800000u;
  if (accumulator == DLOP_FLOAT64) return highest ? 0x7FF0000000000000ull : 0xFFF0000000000000ull;
  return highest ? 0x7FFFFFFFFFFFFFFFull : 0x8000000000000000ull;
}

static const char *combine_of(reduce_kind kind, dlop_dtype accumulator) {
  int is_float = accumulator != DLOP_INT64;
  switch (kind) {
    case REDUCE_MAX:
      return is_float ? "out0 = in0 != in0 ? in0 : in1 != in1 ? in1 : in1 >= in0 ? in1 : in0;"
                      : "out0 = in1 > in0 ? in1 : in0;";
    case REDUCE_MIN:
      return is_float ? "out0 = in0 != in0 ? in0 : in1 != in1 ? in1 : in1 <= in0 ? in1 : in0;"
                      : "out0 = in1 < in0 ? in1 : in0;";
    default:
      return is_float ? "out0 = in0 + in1;" : "out0 = (int64_t)((uint64_t)in0 + (uint64_t)in1);";
  }
}

/* The output from the accumulator: mean divides by the count; max and min of integers narrow
 * back to the input's type (the accumulator holds one of its values). */
static const char *finalize_of(reduce_kind kind, dlop_dtype accumulator, dlop_dtype output) {
  if (kind == REDUCE_MEAN)
    return accumulator == DLOP_FLOAT64 ? "out0 = in0 / (double)count;"
                                       : "out0 = in0 / (float)count;";
  switch (accumulator == DLOP_INT64 ? output : DLOP_FLOAT32) {
    case DLOP_INT8: return "out0 = (int8_t)in0;";
    case DLOP_INT16: return "out0 = (int16_t)in0;";
    case DLOP_INT32: return "out0 = (int32_t)in0;";
    case DLOP_UINT8: return "out0 = (uint8_t)in0;";
    default: return "out0 = in0;";
  }
}

int reduce_body(dlop_reduce_body_args *args) {
  const reduce_op_info *info = (const reduce_op_info *)args->op->op_data;
  const dlop_type *x = args->input;
  reduce_params p;
  int status = reduce_parse_params(info, args->params, args->num_params, x->ndim, &p, args->error,
                                   args->error_size);
  if (status != DLOP_OK) return status;
  dlop_dtype input = (dlop_dtype)x->dtype, output = (dlop_dtype)args->output->dtype;
  if (!(info->dtypes & DLOP_DTYPE_BIT(input))) {
    dlop_set_error(args->error, args->error_size, "%s: dtype %s is not supported", info->name,
                   dlop_dtype_name(input));
    return DLOP_UNSUPPORTED;
  }
  dlop_dtype accumulator = accumulator_of(input);
  args->axes = p.mask;
  args->keepdims = p.keepdims;
  args->accumulator_dtype = accumulator;
  /* 16-bit float outputs are computed in float32 and stored by the host, as from_acc does */
  args->output_compute_dtype =
      accumulator == DLOP_FLOAT32 && output != DLOP_FLOAT32 ? DLOP_FLOAT32 : output;
  args->identity = identity_of(info->kind, accumulator);
  args->combine = combine_of(info->kind, accumulator);
  args->finalize = finalize_of(info->kind, accumulator, output);
  return DLOP_OK;
}
