/* test_views.c — view ops (ABI 1.1 make_view) on the CPU through the C graph API: the shape
 * plugin's transpose, dimshuffle, reshape and broadcast_to against plain C loops over the
 * original, zero copies (the output's memory is the input's, the pool allocates nothing), the
 * copy path of reshape, views feeding kernels, in-place safety of viewed intermediates, and the
 * runtime's checks of what make_view hands back (fixtures/view_op). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_runner.h"
#include "test_support.h"

#define FIXTURE(name) DLOP_TEST_FIXTURE_DIR "/" name ".so"

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};

/* The running test's graph: every test gets a new one (graph_setup, or view_graph_setup for
 * the runtime checks) and leaves it to graph_teardown. */
static dlop_graph *graph;
static void graph_setup(void) { graph = dlop_test_new_graph(); }
static void graph_teardown(void) { dlop_graph_destroy(graph); }

static void check_doubles(const double *expected, const dlop_array *actual, int64_t n) {
  ck_assert_int_eq(dlop_array_numel(actual), n);
  double *got = (double *)dlop_test_read_back(actual);
  for (int64_t i = 0; i < n; i++)
    ck_assert_msg(got[i] == expected[i], "element %lld: expected %g, got %g", (long long)i,
                  expected[i], got[i]);
  free(got);
}

/* Bytes [low, high) that a tensor's elements cover, as addresses. */
static void address_span(const dlop_tensor *t, uintptr_t *low, uintptr_t *high) {
  int64_t first = 0, last = 0, size = (int64_t)dlop_dtype_size(dlop_tensor_dtype(t));
  for (int32_t d = 0; d < t->ndim; d++) {
    int64_t reach = (t->shape[d] - 1) * t->strides[d] * size;
    if (reach < 0) first += reach;
    else last += reach;
  }
  uintptr_t base = (uintptr_t)t->data + (uintptr_t)t->byte_offset;
  *low = base + (uintptr_t)first;
  *high = base + (uintptr_t)last + (uintptr_t)size;
}

/* The view's elements all lie in the input's memory: no copy was made. */
static void assert_aliases(const dlop_array *view, const dlop_array *input) {
  uintptr_t vl, vh, il, ih;
  address_span(dlop_array_tensor(view), &vl, &vh);
  address_span(dlop_array_tensor(input), &il, &ih);
  ck_assert_msg(vl >= il && vh <= ih, "the output [%#lx, %#lx) is not inside the input [%#lx, %#lx)",
                (unsigned long)vl, (unsigned long)vh, (unsigned long)il, (unsigned long)ih);
}

/* Run a one-input function; the pool allocates nothing during the run when no_alloc. */
static dlop_array *run_one(dlop_function *function, dlop_array *input, int no_alloc) {
  dlop_array *output = NULL;
  dlop_memory_stats before = dlop_test_memory_stats(CPU);
  DLOP_CK_OK(dlop_function_run(function, &input, 1, &output, 1, NULL));
  dlop_memory_stats after = dlop_test_memory_stats(CPU);
  if (no_alloc) {
    ck_assert_msg(after.bytes_in_use == before.bytes_in_use &&
                      after.peak_bytes_in_use == before.peak_bytes_in_use,
                  "a view allocated: %llu bytes in use before the run, %llu after (peak %llu)",
                  (unsigned long long)before.bytes_in_use, (unsigned long long)after.bytes_in_use,
                  (unsigned long long)after.peak_bytes_in_use);
    assert_aliases(output, input);
  }
  return output;
}

/* The run-time half of a shape rule that needs concrete dims: function (on one float32 matrix)
 * refuses a (2, 3) input of values with a shape error whose message contains refusal, then
 * views a good_shape input of the same values; returns that view (its input in *input). */
static dlop_array *refuse_then_view(dlop_function *function, float *values, const char *refusal,
                                    int64_t *good_shape, dlop_array **input) {
  int64_t shape[2] = {2, 3};
  dlop_array *out = NULL;
  *input = dlop_test_host_array(DLOP_FLOAT32, 2, shape, values);
  ck_assert_int_eq(dlop_function_run(function, input, 1, &out, 1, NULL), DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), refusal) != NULL, "%s", dlop_last_error());
  dlop_array_release(*input);
  *input = dlop_test_host_array(DLOP_FLOAT32, 2, good_shape, values);
  return run_one(function, *input, 1);
}

/* data[i] = i / 2 - 3 for the n elements. */
static void iota(double *data, int64_t n) {
  for (int64_t i = 0; i < n; i++) data[i] = (double)i * 0.5 - 3.0;
}

static void explain_has(const dlop_function *function, const char *needle) {
  char text[4096];
  DLOP_CK_OK(dlop_function_explain(function, text, sizeof text));
  ck_assert_msg(strstr(text, needle) != NULL, "explain lacks \"%s\":\n%s", needle, text);
}

/* transpose of a (2, 3, 4) float64: axes (2, 0, 1) and the default (reversed), zero copies,
 * unknown dims propagated while the graph is built. */
START_TEST(transpose_values_and_zero_copy) {
  int64_t shape[3] = {2, 3, 4}, unknown[3] = {DLOP_DIM_UNKNOWN, 3, DLOP_DIM_UNKNOWN};
  const int64_t axes[3] = {2, 0, 1};
  dlop_var *x, *y, *t;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT64, 3, unknown, &x));
  DLOP_CK_OK(dlop_test_apply_ints(graph, "transpose", x, "axes", axes, 3, &y));
  DLOP_CK_OK(dlop_test_apply_ints(graph, "transpose", x, NULL, NULL, 0, &t));
  const dlop_type *type = dlop_var_type(y);
  ck_assert_int_eq(type->ndim, 3);
  ck_assert_int_eq(type->shape[0], DLOP_DIM_UNKNOWN);
  ck_assert_int_eq(type->shape[1], DLOP_DIM_UNKNOWN);
  ck_assert_int_eq(type->shape[2], 3);
  ck_assert_int_eq(dlop_var_type(t)->shape[1], 3);
  dlop_function *f_axes = dlop_test_compile(graph, &x, 1, y, CPU);
  dlop_function *f_reverse = dlop_test_compile(graph, &x, 1, t, CPU);
  explain_has(f_axes, "#0 transpose(x: float64[?,3,?]) -> float64[?,?,3] on cpu (view of input 0)");

  double data[24], expected[24];
  iota(data, 24);
  dlop_array *input = dlop_test_host_array(DLOP_FLOAT64, 3, shape, data);
  dlop_array *out = run_one(f_axes, input, 1);
  /* y[k][i][j] = x[i][j][k] */
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 3; j++) expected[(k * 2 + i) * 3 + j] = data[(i * 3 + j) * 4 + k];
  ck_assert_int_eq(dlop_array_tensor(out)->shape[0], 4);
  check_doubles(expected, out, 24);
  dlop_array_release(out);

  out = run_one(f_reverse, input, 1);
  for (int k = 0; k < 4; k++)
    for (int j = 0; j < 3; j++)
      for (int i = 0; i < 2; i++) expected[(k * 3 + j) * 2 + i] = data[(i * 3 + j) * 4 + k];
  check_doubles(expected, out, 24);
  /* the view keeps the input's memory alive after the caller lets the input go */
  dlop_array_release(input);
  check_doubles(expected, out, 24);
  dlop_array_release(out);
  dlop_function_destroy(f_axes);
  dlop_function_destroy(f_reverse);
}
END_TEST

/* Every dtype: a transposed (3, 5) matrix, byte for byte. */
START_TEST(transpose_every_dtype) {
  for (int dtype = 0; dtype < DLOP_DTYPE_COUNT; dtype++) {
    dlop_graph *dtype_graph = dlop_test_new_graph();
    int64_t shape[2] = {3, 5};
    dlop_var *x, *y;
    DLOP_CK_OK(dlop_graph_input(dtype_graph, "x", (dlop_dtype)dtype, 2, NULL, &x));
    DLOP_CK_OK(dlop_test_apply_ints(dtype_graph, "transpose", x, NULL, NULL, 0, &y));
    dlop_function *function = dlop_test_compile(dtype_graph, &x, 1, y, CPU);
    size_t size = dlop_dtype_size((dlop_dtype)dtype);
    unsigned char data[15 * 8], got[15 * 8], expected[15 * 8];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i * 37 + 11);
    if (dtype == DLOP_BOOL)
      for (size_t i = 0; i < sizeof data; i++) data[i] &= 1;
    dlop_array *input = dlop_test_host_array((dlop_dtype)dtype, 2, shape, data);
    dlop_array *out = run_one(function, input, 1);
    for (int i = 0; i < 5; i++)
      for (int j = 0; j < 3; j++)
        memcpy(expected + (size_t)(i * 3 + j) * size, data + (size_t)(j * 5 + i) * size, size);
    DLOP_CK_OK(dlop_array_to_host(out, got, 15 * size));
    ck_assert_msg(memcmp(got, expected, 15 * size) == 0, "transpose of %s differs",
                  dlop_dtype_name((dlop_dtype)dtype));
    dlop_test_release_arrays(2, out, input);
    dlop_function_destroy(function);
    dlop_graph_destroy(dtype_graph);
  }
}
END_TEST

/* dimshuffle (2, -1, 0) of a (2, 1, 3): axis 1 (size 1) dropped, a new axis inserted. */
START_TEST(dimshuffle_values) {
  int64_t shape[3] = {2, 1, 3};
  const int64_t pattern[3] = {2, -1, 0};
  dlop_var *x, *y;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT64, 3, shape, &x));
  DLOP_CK_OK(dlop_test_apply_ints(graph, "dimshuffle", x, "pattern", pattern, 3, &y));
  const dlop_type *type = dlop_var_type(y);
  ck_assert_int_eq(type->ndim, 3);
  ck_assert(type->shape[0] == 3 && type->shape[1] == 1 && type->shape[2] == 2);
  dlop_function *function = dlop_test_compile(graph, &x, 1, y, CPU);
  double data[6], expected[6];
  iota(data, 6);
  dlop_array *input = dlop_test_host_array(DLOP_FLOAT64, 3, shape, data);
  dlop_array *out = run_one(function, input, 1);
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < 2; i++) expected[k * 2 + i] = data[i * 3 + k];
  check_doubles(expected, out, 6);
  dlop_test_release_arrays(2, out, input);
  dlop_function_destroy(function);
}
END_TEST

START_TEST(dimshuffle_errors) {
  int64_t shape[2] = {2, 3}, unknown[2] = {2, DLOP_DIM_UNKNOWN}, two = 2;
  const int64_t keep0[1] = {0}, twice[2] = {0, 0}, bad[2] = {0, 5};
  dlop_var *x, *u, *y;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 2, shape, &x));
  ck_assert_int_eq(dlop_test_apply_ints(graph, "dimshuffle", x, "pattern", keep0, 1, &y), DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "drops input axis 1 of size 3") != NULL, "%s",
                dlop_last_error());
  ck_assert_int_eq(dlop_test_apply_ints(graph, "dimshuffle", x, "pattern", twice, 2, &y), DLOP_TYPE_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "uses input axis 0 twice") != NULL, "%s",
                dlop_last_error());
  ck_assert_int_eq(dlop_test_apply_ints(graph, "dimshuffle", x, "pattern", bad, 2, &y), DLOP_TYPE_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "entry 5 is neither an input axis") != NULL, "%s",
                dlop_last_error());
  /* an unknown dim may be dropped while the graph is built; the run checks it */
  DLOP_CK_OK(dlop_graph_input(graph, "u", DLOP_FLOAT32, 2, unknown, &u));
  DLOP_CK_OK(dlop_test_apply_ints(graph, "dimshuffle", u, "pattern", keep0, 1, &y));
  ck_assert_int_eq(dlop_var_type(y)->shape[0], 2);
  dlop_function *function = dlop_test_compile(graph, &u, 1, y, CPU);
  float values[6] = {1, 2, 3, 4, 5, 6};
  int64_t column[2] = {2, 1};
  dlop_array *input;
  dlop_array *out = refuse_then_view(
      function, values, "node #0 dimshuffle: pattern (0,) drops input axis 1 of size 3", column,
      &input);
  float got[2];
  DLOP_CK_OK(dlop_array_to_host(out, got, sizeof got));
  ck_assert(got[0] == 1.0f && got[1] == 2.0f);
  ck_assert_int_eq(dlop_array_tensor(out)->shape[0], two);
  dlop_test_release_arrays(2, out, input);
  dlop_function_destroy(function);
}
END_TEST

/* reshape of a contiguous (2, 3, 4): (6, -1) and the default flatten are views. */
START_TEST(reshape_contiguous_is_a_view) {
  int64_t shape[3] = {2, 3, 4};
  const int64_t target[2] = {6, -1};
  dlop_var *x, *y, *flat;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT64, 3, shape, &x));
  DLOP_CK_OK(dlop_test_apply_ints(graph, "reshape", x, "shape", target, 2, &y));
  DLOP_CK_OK(dlop_test_apply_ints(graph, "reshape", x, NULL, NULL, 0, &flat));
  ck_assert(dlop_var_type(y)->ndim == 2 && dlop_var_type(y)->shape[1] == 4);
  ck_assert(dlop_var_type(flat)->ndim == 1 && dlop_var_type(flat)->shape[0] == 24);
  dlop_function *f_target = dlop_test_compile(graph, &x, 1, y, CPU);
  dlop_function *f_flat = dlop_test_compile(graph, &x, 1, flat, CPU);
  double data[24];
  iota(data, 24);
  dlop_array *input = dlop_test_host_array(DLOP_FLOAT64, 3, shape, data);
  dlop_array *out = run_one(f_target, input, 1);
  ck_assert_ptr_eq(dlop_array_tensor(out)->data, dlop_array_tensor(input)->data);
  check_doubles(data, out, 24);
  dlop_array_release(out);
  out = run_one(f_flat, input, 1);
  check_doubles(data, out, 24);
  dlop_test_release_arrays(2, out, input);
  dlop_function_destroy(f_target);
  dlop_function_destroy(f_flat);
}
END_TEST

/* A (4, 3) window of a (4, 6) matrix (strides (6, 1)): to (2, 2, 3) splits the first axis, a
 * view; to (12,) cannot merge the rows, so the host copies it contiguous first. */
START_TEST(reshape_strided_view_or_copy) {
  int64_t full[2] = {4, 6}, window[2] = {4, 3}, window_strides[2] = {6, 1};
  const int64_t split[3] = {2, 2, 3}, flat[1] = {12};
  dlop_var *x, *y, *z;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT64, 2, NULL, &x));
  DLOP_CK_OK(dlop_test_apply_ints(graph, "reshape", x, "shape", split, 3, &y));
  DLOP_CK_OK(dlop_test_apply_ints(graph, "reshape", x, "shape", flat, 1, &z));
  dlop_function *f_split = dlop_test_compile(graph, &x, 1, y, CPU);
  dlop_function *f_flat = dlop_test_compile(graph, &x, 1, z, CPU);
  double data[24], expected[12];
  iota(data, 24);
  dlop_array *base = dlop_test_host_array(DLOP_FLOAT64, 2, full, data), *input = NULL;
  DLOP_CK_OK(dlop_array_view(base, 2, window, window_strides, 2 * sizeof(double), &input));
  /* element (i, j) of the window is data[2 + 6 i + j] */
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) expected[i * 3 + j] = data[2 + i * 6 + j];
  dlop_array *out = run_one(f_split, input, 1);
  const dlop_tensor *t = dlop_array_tensor(out);
  ck_assert(t->strides[0] == 12 && t->strides[1] == 6 && t->strides[2] == 1);
  check_doubles(expected, out, 12);
  dlop_array_release(out);

  dlop_memory_stats before = dlop_test_memory_stats(CPU);
  out = NULL;
  DLOP_CK_OK(dlop_function_run(f_flat, &input, 1, &out, 1, NULL));
  ck_assert_msg(dlop_test_memory_stats(CPU).bytes_in_use > before.bytes_in_use,
                "the copy path keeps a contiguous copy alive under the view");
  uintptr_t ol, oh, il, ih;
  address_span(dlop_array_tensor(out), &ol, &oh);
  address_span(dlop_array_tensor(base), &il, &ih);
  ck_assert_msg(oh <= il || ol >= ih, "the reshape of a non-mergeable layout must be a copy");
  check_doubles(expected, out, 12);
  dlop_test_release_arrays(3, out, input, base);
  dlop_function_destroy(f_split);
  dlop_function_destroy(f_flat);
}
END_TEST

/* reshape(transpose(x)): the transposed view cannot be flattened by strides; the values are
 * those of NumPy's x.T.reshape(-1). */
START_TEST(reshape_of_transpose_copies) {
  int64_t shape[2] = {3, 4};
  dlop_var *x, *t, *flat;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT64, 2, shape, &x));
  DLOP_CK_OK(dlop_test_apply_ints(graph, "transpose", x, NULL, NULL, 0, &t));
  DLOP_CK_OK(dlop_test_apply_ints(graph, "reshape", t, NULL, NULL, 0, &flat));
  dlop_function *function = dlop_test_compile(graph, &x, 1, flat, CPU);
  explain_has(function, "#1 reshape(");
  double data[12], expected[12];
  iota(data, 12);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) expected[i * 3 + j] = data[j * 4 + i];
  dlop_array *input = dlop_test_host_array(DLOP_FLOAT64, 2, shape, data);
  dlop_array *out = run_one(function, input, 0);
  ck_assert(dlop_tensor_is_contiguous(dlop_array_tensor(out)));
  check_doubles(expected, out, 12);
  /* the input is untouched */
  check_doubles(data, input, 12);
  dlop_test_release_arrays(2, out, input);
  dlop_function_destroy(function);
}
END_TEST

START_TEST(reshape_errors) {
  int64_t shape[2] = {2, 3}, unknown[2] = {DLOP_DIM_UNKNOWN, 3};
  const int64_t four[1] = {4}, four_any[2] = {4, -1}, two_any[2] = {-1, -1}, negative[1] = {-2};
  dlop_var *x, *u, *y;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 2, shape, &x));
  ck_assert_int_eq(dlop_test_apply_ints(graph, "reshape", x, "shape", four, 1, &y), DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(dlop_last_error(),
                       "cannot reshape (2, 3) (6 elements) to (4,) (4 elements)") != NULL,
                "%s", dlop_last_error());
  ck_assert_int_eq(dlop_test_apply_ints(graph, "reshape", x, "shape", four_any, 2, &y), DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "6 is not a multiple of 4") != NULL, "%s",
                dlop_last_error());
  ck_assert_int_eq(dlop_test_apply_ints(graph, "reshape", x, "shape", two_any, 2, &y), DLOP_TYPE_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "more than one -1") != NULL, "%s", dlop_last_error());
  ck_assert_int_eq(dlop_test_apply_ints(graph, "reshape", x, "shape", negative, 1, &y), DLOP_TYPE_ERROR);
  /* unknown dims: the size check happens at run time, naming the node */
  DLOP_CK_OK(dlop_graph_input(graph, "u", DLOP_FLOAT32, 2, unknown, &u));
  DLOP_CK_OK(dlop_test_apply_ints(graph, "reshape", u, "shape", four_any, 2, &y));
  ck_assert_int_eq(dlop_var_type(y)->shape[0], 4);
  ck_assert_int_eq(dlop_var_type(y)->shape[1], DLOP_DIM_UNKNOWN);
  dlop_function *function = dlop_test_compile(graph, &u, 1, y, CPU);
  float values[12] = {0};
  int64_t rows[2] = {4, 3};
  dlop_array *input;
  dlop_array *out = refuse_then_view(function, values,
                                     "node #0 reshape: cannot reshape (2, 3) (6 elements) to "
                                     "(4, -1): 6 is not a multiple of 4",
                                     rows, &input);
  ck_assert_int_eq(dlop_array_tensor(out)->shape[1], 3);
  dlop_test_release_arrays(2, out, input);
  dlop_function_destroy(function);
}
END_TEST

/* broadcast_to (3,) -> (4, 3): stride 0 along the new axis; multiply_them and double consume
 * the zero strides. */
START_TEST(broadcast_to_feeds_kernels) {
  int64_t three = 3, matrix[2] = {4, 3};
  const int64_t target[2] = {4, 3};
  dlop_var *x, *m, *b, *products, *doubled, *pair[2];
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, &three, &x));
  DLOP_CK_OK(dlop_graph_input(graph, "m", DLOP_FLOAT32, 2, matrix, &m));
  DLOP_CK_OK(dlop_test_apply_ints(graph, "broadcast_to", x, "shape", target, 2, &b));
  pair[0] = b;
  pair[1] = m;
  DLOP_CK_OK(dlop_graph_apply(graph, "multiply_them", pair, 2, NULL, 0, &products, 1));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &b, 1, NULL, 0, &doubled, 1));
  dlop_var *inputs[2] = {x, m};
  dlop_function *f_view = dlop_test_compile(graph, &x, 1, b, CPU);
  dlop_function *f_mul = dlop_test_compile(graph, inputs, 2, products, CPU);
  dlop_function *f_double = dlop_test_compile(graph, &x, 1, doubled, CPU);
  float xv[3] = {1.5f, -2.0f, 4.0f}, mv[12], got[12];
  for (int i = 0; i < 12; i++) mv[i] = (float)i - 6.0f;
  dlop_array *xa = dlop_test_host_array(DLOP_FLOAT32, 1, &three, xv);
  dlop_array *ma = dlop_test_host_array(DLOP_FLOAT32, 2, matrix, mv);
  dlop_array *out = run_one(f_view, xa, 1);
  const dlop_tensor *t = dlop_array_tensor(out);
  ck_assert(t->strides[0] == 0 && t->strides[1] == 1);
  DLOP_CK_OK(dlop_array_to_host(out, got, sizeof got));
  for (int i = 0; i < 12; i++) ck_assert(got[i] == xv[i % 3]);
  dlop_array_release(out);

  dlop_array *args[2] = {xa, ma};
  DLOP_CK_OK(dlop_function_run(f_mul, args, 2, &out, 1, NULL));
  DLOP_CK_OK(dlop_array_to_host(out, got, sizeof got));
  for (int i = 0; i < 12; i++)
    ck_assert_msg(got[i] == xv[i % 3] * mv[i], "[%d] %g", i, (double)got[i]);
  dlop_array_release(out);
  DLOP_CK_OK(dlop_function_run(f_double, &xa, 1, &out, 1, NULL));
  DLOP_CK_OK(dlop_array_to_host(out, got, sizeof got));
  for (int i = 0; i < 12; i++) ck_assert(got[i] == 2.0f * xv[i % 3]);
  dlop_test_release_arrays(3, out, xa, ma);
  dlop_function_destroy(f_view);
  dlop_function_destroy(f_mul);
  dlop_function_destroy(f_double);
}
END_TEST

START_TEST(broadcast_to_errors) {
  int64_t three = 3, matrix[2] = {2, 3};
  const int64_t four[1] = {4}, vector[1] = {3};
  dlop_var *x, *m, *y;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, &three, &x));
  DLOP_CK_OK(dlop_graph_input(graph, "m", DLOP_FLOAT32, 2, matrix, &m));
  ck_assert_int_eq(dlop_test_apply_ints(graph, "broadcast_to", x, "shape", four, 1, &y), DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "cannot broadcast (3,) to (4,): input axis 0 has size "
                                          "3, expected 1 or 4") != NULL,
                "%s", dlop_last_error());
  ck_assert_int_eq(dlop_test_apply_ints(graph, "broadcast_to", m, "shape", vector, 1, &y), DLOP_TYPE_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "more axes (2) than the target (1)") != NULL, "%s",
                dlop_last_error());
  /* the default (the 0-d shape) takes only a 0-d input */
  ck_assert_int_eq(dlop_test_apply_ints(graph, "broadcast_to", x, NULL, NULL, 0, &y), DLOP_TYPE_ERROR);
}
END_TEST

/* transpose errors name the axes and the rank. */
START_TEST(transpose_errors) {
  int64_t shape[2] = {2, 3};
  const int64_t short_axes[1] = {0}, repeated[2] = {1, 1}, out_of_range[2] = {0, 2};
  dlop_var *x, *y;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 2, shape, &x));
  ck_assert_int_eq(dlop_test_apply_ints(graph, "transpose", x, "axes", short_axes, 1, &y), DLOP_TYPE_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "axes (0,) has 1 entries but the input has rank 2"),
                "%s", dlop_last_error());
  ck_assert_int_eq(dlop_test_apply_ints(graph, "transpose", x, "axes", repeated, 2, &y), DLOP_TYPE_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "not a permutation: axis 1 appears twice"), "%s",
                dlop_last_error());
  ck_assert_int_eq(dlop_test_apply_ints(graph, "transpose", x, "axes", out_of_range, 2, &y),
                   DLOP_TYPE_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "axis 2 is out of range for rank 2"), "%s",
                dlop_last_error());
}
END_TEST

/* a = double(x); v = transpose(a) (a view of a); b = exp(a) where exp may overwrite a (a dies
 * at exp, read once); out = multiply_them(v, b). The run must not let exp write over a while
 * v still reads it: out = 2x * exp(2x), not exp(2x)^2. */
START_TEST(inplace_never_overwrites_a_viewed_intermediate) {
  int64_t n = 1000;
  dlop_var *x, *a, *v, *b, *out_var, *pair[2];
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT64, 1, &n, &x));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &x, 1, NULL, 0, &a, 1));
  DLOP_CK_OK(dlop_test_apply_ints(graph, "transpose", a, NULL, NULL, 0, &v));
  DLOP_CK_OK(dlop_graph_apply(graph, "exp", &a, 1, NULL, 0, &b, 1));
  pair[0] = v;
  pair[1] = b;
  DLOP_CK_OK(dlop_graph_apply(graph, "multiply_them", pair, 2, NULL, 0, &out_var, 1));
  /* node by node: fused, exp would write no buffer at all (test_fusion.c has that case) */
  dlop_function *function = dlop_test_compile_unfused(graph, &x, 1, &out_var, 1, CPU);
  /* the plan alone would allow it: the run must refuse */
  explain_has(function, "#2 exp(");
  double *data = malloc(sizeof(double) * (size_t)n), *expected = malloc(sizeof(double) * (size_t)n);
  ck_assert(data && expected);
  for (int64_t i = 0; i < n; i++) {
    data[i] = (double)(i % 17) * 0.125 - 1.0;
    expected[i] = (2.0 * data[i]) * exp(2.0 * data[i]);
  }
  dlop_array *input = dlop_test_host_array(DLOP_FLOAT64, 1, &n, data), *out = NULL;
  for (int run = 0; run < 2; run++) {
    DLOP_CK_OK(dlop_function_run(function, &input, 1, &out, 1, NULL));
    double *got = (double *)dlop_test_read_back(out);
    for (int64_t i = 0; i < n; i++)
      ck_assert_msg(fabs(got[i] - expected[i]) <= 1e-12 * (1.0 + fabs(expected[i])),
                    "run %d, element %lld: expected %.17g, got %.17g", run, (long long)i,
                    expected[i], got[i]);
    free(got);
    dlop_array_release(out);
  }
  check_doubles(data, input, n);
  dlop_array_release(input);
  free(data);
  free(expected);
  dlop_function_destroy(function);
}
END_TEST

/* v = reshape(x) views the caller's input; double may work in place of v (an intermediate
 * dying there): it must not, or it would write into the caller's array. */
START_TEST(inplace_never_writes_through_a_view_of_an_input) {
  int64_t shape[2] = {4, 5};
  const int64_t flat[1] = {20};
  dlop_var *x, *v, *d;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT64, 2, shape, &x));
  DLOP_CK_OK(dlop_test_apply_ints(graph, "reshape", x, "shape", flat, 1, &v));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &v, 1, NULL, 0, &d, 1));
  dlop_function *function = dlop_test_compile(graph, &x, 1, d, CPU);
  double data[20], expected[20];
  iota(data, 20);
  for (int i = 0; i < 20; i++) expected[i] = 2.0 * data[i];
  dlop_array *input = dlop_test_host_array(DLOP_FLOAT64, 2, shape, data), *out = NULL;
  DLOP_CK_OK(dlop_function_run(function, &input, 1, &out, 1, NULL));
  check_doubles(expected, out, 20);
  check_doubles(data, input, 20);
  dlop_test_release_arrays(2, out, input);
  dlop_function_destroy(function);
}
END_TEST

/* ---- the runtime's checks, through fixtures/view_op ------------------------------------- */

/* The runtime checks' graph: fixtures/view_op loaded, the bundled plugins not. */
static void view_graph_setup(void) {
  const dlop_plugin *plugin = NULL;
  DLOP_CK_OK(dlop_load_plugin(FIXTURE("view_op"), &plugin));
  DLOP_CK_OK(dlop_graph_create(&graph));
}

/* fixture_view_op(x; mode) on a float64 vector of n elements, compiled for the CPU. */
static dlop_function *compile_view_op(const char *mode, int64_t n) {
  dlop_var *x, *y;
  dlop_named_param param = {"mode", {DLOP_PARAM_STRING, 1, {.s = mode}}};
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT64, 1, &n, &x));
  DLOP_CK_OK(dlop_graph_apply(graph, "fixture_view_op", &x, 1, &param, 1, &y, 1));
  return dlop_test_compile(graph, &x, 1, y, CPU);
}

static void expect_run_error(const char *mode, int expected, const char *needle) {
  int64_t n = 6;
  dlop_function *function = compile_view_op(mode, n);
  double data[6];
  iota(data, n);
  dlop_array *input = dlop_test_host_array(DLOP_FLOAT64, 1, &n, data), *out = (dlop_array *)&out;
  int status = dlop_function_run(function, &input, 1, &out, 1, NULL);
  ck_assert_msg(status == expected, "mode %s: expected %s, got %s (%s)", mode,
                dlop_status_name(expected), dlop_status_name(status), dlop_last_error());
  ck_assert_ptr_null(out);
  ck_assert_msg(strstr(dlop_last_error(), needle) != NULL, "mode %s: message lacks \"%s\": %s",
                mode, needle, dlop_last_error());
  dlop_array_release(input);
  dlop_function_destroy(function);
}

START_TEST(view_out_of_bounds_is_a_plugin_error) {
  expect_run_error("out_of_bounds", DLOP_PLUGIN_ERROR,
                   "node #0 fixture_view_op: make_view laid output 0 (shape (6,)) out with "
                   "strides (1,) and byte offset 8, which reach bytes [8, 56) of the memory, "
                   "but input 0's elements cover only [0, 48)");
}
END_TEST

START_TEST(view_off_grid_is_a_plugin_error) {
  expect_run_error("off_grid", DLOP_PLUGIN_ERROR, "not on the grid");
}
END_TEST

START_TEST(view_asking_contiguous_twice_is_a_plugin_error) {
  expect_run_error("always_contiguous", DLOP_PLUGIN_ERROR,
                   "asked for a C-contiguous input, but the input already is one");
}
END_TEST

START_TEST(make_view_failure_is_reported) {
  expect_run_error("fail", DLOP_PLUGIN_ERROR,
                   "node #0 fixture_view_op: make_view of output 0: asked to fail (mode 'fail')");
}
END_TEST

START_TEST(view_of_another_dtype_is_refused_at_compile) {
  int64_t n = 3;
  dlop_var *x, *y;
  dlop_function *function = NULL;
  dlop_named_param param = {"mode", {DLOP_PARAM_STRING, 1, {.s = "wrong_dtype"}}};
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, &n, &x));
  DLOP_CK_OK(dlop_graph_apply(graph, "fixture_view_op", &x, 1, &param, 1, &y, 1));
  ck_assert_int_eq(dlop_function_compile(graph, &x, 1, &y, 1, CPU, &function), DLOP_PLUGIN_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "a view has its input's dtype") != NULL, "%s",
                dlop_last_error());
  ck_assert_ptr_null(function);
}
END_TEST

/* contiguous_only on a reversed (stride -1) input: the host copies it contiguous and asks
 * again; reverse on that input gives x back in order, through a negative stride. */
START_TEST(view_copy_path_and_negative_strides) {
  int64_t n = 7, minus_one = -1;
  dlop_function *f_contiguous = compile_view_op("contiguous_only", n);
  dlop_function *f_reverse = compile_view_op("reverse", n);
  explain_has(f_reverse, "(view of input 0)");
  double data[7], reversed_values[7];
  iota(data, n);
  for (int i = 0; i < 7; i++) reversed_values[i] = data[6 - i];
  dlop_array *base = dlop_test_host_array(DLOP_FLOAT64, 1, &n, data), *reversed = NULL;
  DLOP_CK_OK(dlop_array_view(base, 1, &n, &minus_one, 6 * sizeof(double), &reversed));
  dlop_array *out = run_one(f_contiguous, reversed, 0);
  ck_assert_int_eq(dlop_array_tensor(out)->strides[0], 1);
  check_doubles(reversed_values, out, n);
  dlop_array_release(out);
  out = run_one(f_reverse, reversed, 1);
  ck_assert_int_eq(dlop_array_tensor(out)->strides[0], 1);
  check_doubles(data, out, n);
  dlop_array_release(out);
  out = run_one(f_reverse, base, 1);
  ck_assert_int_eq(dlop_array_tensor(out)->strides[0], -1);
  check_doubles(reversed_values, out, n);
  dlop_test_release_arrays(3, out, reversed, base);
  dlop_function_destroy(f_contiguous);
  dlop_function_destroy(f_reverse);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("views");
  TCase *ops = dlop_test_tcase(suite, "shape_ops", 0, graph_setup, graph_teardown);
  dlop_test_add_tests(ops,
                      transpose_values_and_zero_copy,
                      transpose_every_dtype,
                      transpose_errors,
                      dimshuffle_values,
                      dimshuffle_errors,
                      reshape_contiguous_is_a_view,
                      reshape_strided_view_or_copy,
                      reshape_of_transpose_copies,
                      reshape_errors,
                      broadcast_to_feeds_kernels,
                      broadcast_to_errors,
                      NULL);
  TCase *plan = dlop_test_tcase(suite, "buffer_plan", 0, graph_setup, graph_teardown);
  dlop_test_add_tests(plan,
                      inplace_never_overwrites_a_viewed_intermediate,
                      inplace_never_writes_through_a_view_of_an_input,
                      NULL);
  TCase *checks = dlop_test_tcase(suite, "runtime_checks", 0, view_graph_setup, graph_teardown);
  dlop_test_add_tests(checks,
                      view_out_of_bounds_is_a_plugin_error,
                      view_off_grid_is_a_plugin_error,
                      view_asking_contiguous_twice_is_a_plugin_error,
                      make_view_failure_is_reported,
                      view_of_another_dtype_is_refused_at_compile,
                      view_copy_path_and_negative_strides,
                      NULL);
  return dlop_test_run_suite(suite);
}
