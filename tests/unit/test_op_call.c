/* test_op_call.c — dlop_op_call on the CPU: an op prepared once runs on the caller's memory
 * (strided inputs, broadcasting, parameters, contiguous copies for ops that need them, in place
 * where inplace_map allows), and every bad argument is refused with a message naming it.
 * tests/gpu/test_op_call_cuda.c runs calls on CUDA, on dlop's and on wrapped foreign streams. */
#include <math.h>
#include <string.h>

#include "test_support.h"

static const dlop_device cpu = {DLOP_DEVICE_CPU, 0};

static void setup(void) { dlop_test_load_bundled_plugins(); }

static dlop_type type_of(dlop_dtype dtype, int32_t ndim, const int64_t *shape) {
  dlop_type type;
  memset(&type, 0, sizeof type);
  type.dtype = dtype;
  type.ndim = ndim;
  for (int32_t d = 0; d < ndim; d++) type.shape[d] = shape[d];
  return type;
}

static dlop_tensor tensor_of(void *data, dlop_dtype dtype, int32_t ndim, int64_t *shape,
                             int64_t *strides) {
  dlop_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device = cpu;
  t.ndim = ndim;
  t.dtype = dlop_dtype_to_dl(dtype);
  t.shape = shape;
  t.strides = strides;
  return t;
}

/* Prepared for float32[?], run on a strided input into the caller's buffer. */
START_TEST(test_exp_on_caller_memory) {
  int64_t unknown = DLOP_DIM_UNKNOWN;
  dlop_type in_type = type_of(DLOP_FLOAT32, 1, &unknown);
  dlop_op_call *call = NULL;
  DLOP_CK_OK(dlop_op_call_create("exp", &in_type, 1, NULL, 0, cpu, &call));
  ck_assert_str_eq(dlop_op_call_op(call)->name, "exp");
  ck_assert_int_eq(dlop_op_call_num_outputs(call), 1);
  const dlop_type *out_type = dlop_op_call_output_type(call, 0);
  ck_assert_int_eq(out_type->dtype, DLOP_FLOAT32);
  ck_assert_int_eq(out_type->ndim, 1);
  ck_assert_int_eq(out_type->shape[0], DLOP_DIM_UNKNOWN);
  ck_assert_ptr_null(dlop_op_call_output_type(call, 1));

  float source[10], result[5];
  for (int i = 0; i < 10; i++) source[i] = (float)i * 0.25f - 1.0f;
  int64_t shape = 5, stride = 2;
  dlop_type concrete = type_of(DLOP_FLOAT32, 1, &shape), inferred;
  DLOP_CK_OK(dlop_op_call_infer_shapes(call, &concrete, 1, &inferred, 1));
  ck_assert_int_eq(inferred.shape[0], 5);
  for (int round = 0; round < 2; round++) { /* the call is reused as is */
    memset(result, 0, sizeof result);
    dlop_tensor x = tensor_of(source, DLOP_FLOAT32, 1, &shape, &stride);
    dlop_tensor y = tensor_of(result, DLOP_FLOAT32, 1, &shape, NULL);
    DLOP_CK_OK(dlop_op_call_run(call, &x, 1, &y, 1, NULL));
    for (int i = 0; i < 5; i++)
      ck_assert_msg(fabsf(result[i] - expf(source[2 * i])) <= 1e-6f * expf(source[2 * i]),
                    "exp(%g) gave %g", (double)source[2 * i], (double)result[i]);
  }
  dlop_op_call_destroy(call);
  dlop_op_call_destroy(NULL); /* allowed */
}
END_TEST

/* Broadcasting: the output's shape comes from the op's infer_shape on concrete shapes. */
START_TEST(test_add_broadcasts) {
  int64_t a_shape[2] = {2, 3}, b_shape[1] = {3};
  dlop_type types[2] = {type_of(DLOP_FLOAT64, 2, a_shape), type_of(DLOP_FLOAT64, 1, b_shape)};
  dlop_op_call *call = NULL;
  DLOP_CK_OK(dlop_op_call_create("add", types, 2, NULL, 0, cpu, &call));
  ck_assert_int_eq(dlop_op_call_output_type(call, 0)->shape[0], 2);
  ck_assert_int_eq(dlop_op_call_output_type(call, 0)->shape[1], 3);
  double a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30}, y[6];
  dlop_tensor inputs[2] = {tensor_of(a, DLOP_FLOAT64, 2, a_shape, NULL),
                           tensor_of(b, DLOP_FLOAT64, 1, b_shape, NULL)};
  dlop_tensor output = tensor_of(y, DLOP_FLOAT64, 2, a_shape, NULL);
  DLOP_CK_OK(dlop_op_call_run(call, inputs, 2, &output, 1, NULL));
  for (int i = 0; i < 6; i++) ck_assert_double_eq(y[i], a[i] + b[i % 3]);
  dlop_op_call_destroy(call);
}
END_TEST

/* Parameters by name (others at their defaults), and an op that needs contiguous inputs gets a
 * contiguous copy of a transposed one. */
START_TEST(test_parameters_and_contiguous_copy) {
  const dlop_plugin *plugin = NULL;
  DLOP_CK_OK(dlop_load_plugin(DLOP_TEST_FIXTURE_DIR "/good.so", &plugin));
  int64_t shape[2] = {4, 3}, strides[2] = {1, 4};
  dlop_type type = type_of(DLOP_FLOAT64, 2, shape);
  dlop_named_param params[1] = {{"scale", {DLOP_PARAM_FLOAT, 1, {.f = 0.5}}}};
  dlop_op_call *call = NULL;
  DLOP_CK_OK(dlop_op_call_create("fixture_scale", &type, 1, params, 1, cpu, &call));
  double m[12], y[12];
  for (int i = 0; i < 12; i++) m[i] = (double)i * 1.5 - 4.0;
  dlop_tensor x = tensor_of(m, DLOP_FLOAT64, 2, shape, strides); /* m (3x4) transposed */
  dlop_tensor out = tensor_of(y, DLOP_FLOAT64, 2, shape, NULL);
  DLOP_CK_OK(dlop_op_call_run(call, &x, 1, &out, 1, NULL));
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) ck_assert_double_eq(y[i * 3 + j], 0.5 * m[j * 4 + i]);
  dlop_op_call_destroy(call);

  dlop_named_param wrong[1] = {{"scale", {DLOP_PARAM_STRING, 1, {.s = "big"}}}};
  ck_assert_int_eq(dlop_op_call_create("fixture_scale", &type, 1, wrong, 1, cpu, &call),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_null(call);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "scale"));
  dlop_named_param unknown[1] = {{"size", {DLOP_PARAM_INT, 1, {.i = 1}}}};
  ck_assert_int_eq(dlop_op_call_create("fixture_scale", &type, 1, unknown, 1, cpu, &call),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "size"));
}
END_TEST

/* exp declares its output in place of its input: the very same buffer is allowed; an output
 * that overlaps the input otherwise, or for an op without that declaration, is refused. */
START_TEST(test_in_place_only_where_declared) {
  int64_t n = 4, half = 2;
  dlop_type type = type_of(DLOP_FLOAT32, 1, &n);
  dlop_op_call *call = NULL;
  DLOP_CK_OK(dlop_op_call_create("exp", &type, 1, NULL, 0, cpu, &call));
  float data[4] = {0.0f, 1.0f, -1.0f, 2.0f}, before[4];
  memcpy(before, data, sizeof data);
  dlop_tensor x = tensor_of(data, DLOP_FLOAT32, 1, &n, NULL);
  DLOP_CK_OK(dlop_op_call_run(call, &x, 1, &x, 1, NULL));
  for (int i = 0; i < 4; i++) ck_assert_float_eq_tol(data[i], expf(before[i]), 1e-6f * expf(before[i]));
  dlop_op_call_destroy(call);

  /* exp of 2 elements into memory shifted by one element: overlapping, not the same layout */
  dlop_type small = type_of(DLOP_FLOAT32, 1, &half);
  DLOP_CK_OK(dlop_op_call_create("exp", &small, 1, NULL, 0, cpu, &call));
  dlop_tensor a = tensor_of(data, DLOP_FLOAT32, 1, &half, NULL);
  dlop_tensor b = tensor_of(data + 1, DLOP_FLOAT32, 1, &half, NULL);
  ck_assert_int_eq(dlop_op_call_run(call, &a, 1, &b, 1, NULL), DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "overlaps input 0"));
  dlop_op_call_destroy(call);

  /* add may overwrite input 0 but not input 1 */
  dlop_type pair[2] = {type, type};
  DLOP_CK_OK(dlop_op_call_create("add", pair, 2, NULL, 0, cpu, &call));
  float other[4] = {1, 1, 1, 1};
  dlop_tensor inputs[2] = {tensor_of(other, DLOP_FLOAT32, 1, &n, NULL), x};
  ck_assert_int_eq(dlop_op_call_run(call, inputs, 2, &x, 1, NULL), DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "inplace_map"));
  dlop_op_call_destroy(call);
}
END_TEST

START_TEST(test_create_errors) {
  int64_t n = 3;
  dlop_type f32 = type_of(DLOP_FLOAT32, 1, &n), i32 = type_of(DLOP_INT32, 1, &n);
  dlop_op_call *call = (dlop_op_call *)&call; /* reset to NULL on failure */
  ck_assert_int_eq(dlop_op_call_create("no_such_op", &f32, 1, NULL, 0, cpu, &call), DLOP_NOT_FOUND);
  ck_assert_ptr_null(call);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "no_such_op"));
  dlop_type two[2] = {f32, f32};
  ck_assert_int_eq(dlop_op_call_create("exp", two, 2, NULL, 0, cpu, &call), DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "takes 1 input"));
  /* the op's own type rule refuses integers */
  int status = dlop_op_call_create("exp", &i32, 1, NULL, 0, cpu, &call);
  ck_assert_int_ne(status, DLOP_OK);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "exp"));
  ck_assert_int_eq(dlop_op_call_create(NULL, &f32, 1, NULL, 0, cpu, &call), DLOP_INVALID_ARGUMENT);
  ck_assert_int_eq(dlop_op_call_create("exp", NULL, 1, NULL, 0, cpu, &call), DLOP_INVALID_ARGUMENT);
  ck_assert_int_eq(dlop_op_call_create("exp", &f32, 1, NULL, 0, cpu, NULL), DLOP_INVALID_ARGUMENT);
  dlop_type bad = f32;
  bad.ndim = DLOP_MAX_NDIM + 1;
  ck_assert_int_eq(dlop_op_call_create("exp", &bad, 1, NULL, 0, cpu, &call), DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "input 0's type"));
  /* a view op has no kernel to run into the caller's memory */
  int64_t m[2] = {2, 3};
  dlop_type matrix = type_of(DLOP_FLOAT32, 2, m);
  ck_assert_int_eq(dlop_op_call_create("transpose", &matrix, 1, NULL, 0, cpu, &call),
                   DLOP_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "view op"));
  /* never another device: without a GPU, CUDA is refused, naming what is missing */
  dlop_device cuda0 = {DLOP_DEVICE_CUDA, 0};
  if (dlop_device_check(cuda0) != DLOP_OK) {
    ck_assert_int_eq(dlop_op_call_create("exp", &f32, 1, NULL, 0, cuda0, &call), DLOP_NO_DEVICE);
    ck_assert_ptr_nonnull(strstr(dlop_last_error(), "cannot run on cuda:0"));
  }
}
END_TEST

START_TEST(test_run_errors) {
  int64_t n = 3, four = 4, unit = 1, two = 2, matrix[2] = {3, 1}, stride3 = 3;
  dlop_type type = type_of(DLOP_FLOAT32, 1, &n);
  dlop_op_call *call = NULL;
  DLOP_CK_OK(dlop_op_call_create("exp", &type, 1, NULL, 0, cpu, &call));
  float x[12] = {0}, y[12];
  double d[3];
  dlop_tensor input = tensor_of(x, DLOP_FLOAT32, 1, &n, NULL);
  dlop_tensor output = tensor_of(y, DLOP_FLOAT32, 1, &n, NULL);

  ck_assert_int_eq(dlop_op_call_run(call, &input, 2, &output, 1, NULL), DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "takes 1 input and 1 output"));
  ck_assert_int_eq(dlop_op_call_run(NULL, &input, 1, &output, 1, NULL), DLOP_INVALID_ARGUMENT);

  dlop_tensor wrong_dtype = tensor_of(d, DLOP_FLOAT64, 1, &n, NULL);
  ck_assert_int_eq(dlop_op_call_run(call, &wrong_dtype, 1, &output, 1, NULL), DLOP_TYPE_ERROR);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "input 0 is float64"));

  dlop_tensor wrong_size = tensor_of(x, DLOP_FLOAT32, 1, &four, NULL);
  ck_assert_int_eq(dlop_op_call_run(call, &wrong_size, 1, &output, 1, NULL), DLOP_SHAPE_ERROR);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "dimension 0 is 4"));

  dlop_tensor wrong_rank = tensor_of(x, DLOP_FLOAT32, 2, matrix, NULL);
  ck_assert_int_eq(dlop_op_call_run(call, &wrong_rank, 1, &output, 1, NULL), DLOP_TYPE_ERROR);

  dlop_tensor short_output = tensor_of(y, DLOP_FLOAT32, 1, &two, NULL);
  ck_assert_int_eq(dlop_op_call_run(call, &input, 1, &short_output, 1, NULL), DLOP_SHAPE_ERROR);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "output 0 is float32[2]"));

  dlop_tensor double_output = tensor_of(d, DLOP_FLOAT64, 1, &n, NULL);
  ck_assert_int_eq(dlop_op_call_run(call, &input, 1, &double_output, 1, NULL), DLOP_TYPE_ERROR);

  dlop_tensor strided_output = tensor_of(y, DLOP_FLOAT32, 1, &n, &stride3);
  ck_assert_int_eq(dlop_op_call_run(call, &input, 1, &strided_output, 1, NULL),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "not C-contiguous"));

  dlop_tensor cuda_output = output;
  cuda_output.device.type = DLOP_DEVICE_CUDA;
  ck_assert_int_eq(dlop_op_call_run(call, &input, 1, &cuda_output, 1, NULL), DLOP_DEVICE_MISMATCH);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "output 0 is on cuda:0"));

  dlop_tensor unknown_dtype = input;
  unknown_dtype.dtype.code = 5; /* DLPack's complex */
  ck_assert_int_eq(dlop_op_call_run(call, &unknown_dtype, 1, &output, 1, NULL), DLOP_TYPE_ERROR);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "DLPack dtype"));

  /* the stream must be of the call's device (a CPU stream is fine on the CPU) */
  dlop_stream *stream = NULL;
  DLOP_CK_OK(dlop_stream_create(cpu, &stream));
  DLOP_CK_OK(dlop_op_call_run(call, &input, 1, &output, 1, stream));
  dlop_stream_destroy(stream);

  dlop_type concrete = type_of(DLOP_FLOAT32, 1, &unit), outputs[1];
  ck_assert_int_eq(dlop_op_call_infer_shapes(call, &concrete, 1, outputs, 1), DLOP_SHAPE_ERROR);
  ck_assert_int_eq(dlop_op_call_infer_shapes(call, &concrete, 1, outputs, 2), DLOP_INVALID_ARGUMENT);
  dlop_op_call_destroy(call);
}
END_TEST

/* dlop_stream_wrap is for CUDA streams only; its arguments are checked before the driver. */
START_TEST(test_stream_wrap_arguments) {
  dlop_stream *stream = (dlop_stream *)&stream;
  int dummy;
  ck_assert_int_eq(dlop_stream_wrap(cpu, &dummy, &stream), DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_null(stream);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "CUDA device"));
  dlop_device cuda0 = {DLOP_DEVICE_CUDA, 0};
  ck_assert_int_eq(dlop_stream_wrap(cuda0, NULL, &stream), DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "cuda_stream is NULL"));
  ck_assert_int_eq(dlop_stream_wrap(cuda0, &dummy, NULL), DLOP_INVALID_ARGUMENT);
  if (dlop_device_check(cuda0) != DLOP_OK) {
    ck_assert_int_eq(dlop_stream_wrap(cuda0, (void *)1, &stream), DLOP_NO_DEVICE);
    ck_assert_ptr_null(stream);
  }
  ck_assert_int_eq(dlop_stream_is_wrapped(NULL), 0);
  DLOP_CK_OK(dlop_stream_create(cpu, &stream));
  ck_assert_int_eq(dlop_stream_is_wrapped(stream), 0);
  dlop_stream_destroy(stream);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("op_call");
  TCase *tc = dlop_test_tcase(suite, "cpu", 0, setup, NULL);
  dlop_test_add_tests(tc, test_exp_on_caller_memory, test_add_broadcasts,
                      test_parameters_and_contiguous_copy, test_in_place_only_where_declared,
                      test_create_errors, test_run_errors, test_stream_wrap_arguments, NULL);
  return dlop_test_run_suite(suite);
}
