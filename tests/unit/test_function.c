/* test_function.c — compiled functions on the CPU: results against plain C references, the
 * buffer plan (memory reuse, no driver allocation in steady state, in-place ops), input checks,
 * strided inputs, constants, explain(), no silent CPU fallback for CUDA, and concurrent runs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_runner.h"
#include "test_support.h"

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};

/* The running test's graph: every test gets a new one (graph_setup) and leaves it to
 * graph_teardown. */
static dlop_graph *graph;
static void graph_setup(void) { graph = dlop_test_new_graph(); }
static void graph_teardown(void) { dlop_graph_destroy(graph); }

static void check_equal(const void *expected, const dlop_array *actual, dlop_dtype dtype,
                        int64_t n) {
  char report[512];
  void *got = dlop_test_read_back(actual);
  double tolerance = dlop_test_tolerance(dtype);
  int64_t bad =
      dlop_test_compare(expected, got, dtype, n, tolerance, tolerance, report, sizeof report);
  free(got);
  ck_assert_msg(bad == 0, "%lld of %lld %s elements differ: %s", (long long)bad, (long long)n,
                dlop_dtype_name(dtype), report);
}

START_TEST(test_exp_double_matches_reference) {
  enum { N = 1001 };
  dlop_function *function =
      dlop_test_compile_exp_double(graph, DLOP_FLOAT32, DLOP_DIM_UNKNOWN, CPU);
  float x[N], expected[N];
  int64_t n = N;
  dlop_test_fill_random(x, DLOP_FLOAT32, N, 1, -3.0, 3.0);
  for (int i = 0; i < N; i++) expected[i] = expf(2.0f * x[i]);
  dlop_array *input = dlop_test_host_array(DLOP_FLOAT32, 1, &n, x), *output = NULL;
  DLOP_CK_OK(dlop_function_run(function, &input, 1, &output, 1, NULL));
  ck_assert_int_eq(dlop_function_node_count(function), 1); /* double and exp fused */
  ck_assert_int_eq(dlop_function_device(function).type, DLOP_DEVICE_CPU);
  ck_assert_int_eq(dlop_array_numel(output), N);
  ck_assert_int_eq(dlop_array_device(output).type, DLOP_DEVICE_CPU);
  check_equal(expected, output, DLOP_FLOAT32, N);
  dlop_array_release(output);
  dlop_array_release(input);
  dlop_function_destroy(function);
}
END_TEST

/* double on every dtype it declares, against 2x computed here. */
START_TEST(test_double_every_dtype) {
  static const dlop_dtype dtypes[] = {DLOP_INT8,     DLOP_INT16,   DLOP_INT32,
                                      DLOP_INT64,    DLOP_UINT8,   DLOP_FLOAT16,
                                      DLOP_BFLOAT16, DLOP_FLOAT32, DLOP_FLOAT64};
  enum { N = 37 };
  for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++) {
    dlop_dtype dtype = dtypes[k];
    dlop_graph *dtype_graph = dlop_test_new_graph();
    dlop_var *x, *y;
    int64_t n = N;
    uint64_t x_data[N], expected[N];
    DLOP_CK_OK(dlop_graph_input(dtype_graph, "x", dtype, 1, &n, &x));
    DLOP_CK_OK(dlop_graph_apply(dtype_graph, "double", &x, 1, NULL, 0, &y, 1));
    dlop_function *function = dlop_test_compile(dtype_graph, &x, 1, y, CPU);
    dlop_test_fill_random(x_data, dtype, N, 7 + k, dtype == DLOP_UINT8 ? 0 : -50, 50);
    for (int i = 0; i < N; i++)
      dlop_test_set(expected, dtype, i, 2 * dlop_test_get(x_data, dtype, i));
    dlop_array *input = dlop_test_host_array(dtype, 1, &n, x_data), *output = NULL;
    DLOP_CK_OK(dlop_function_run(function, &input, 1, &output, 1, NULL));
    ck_assert_int_eq(dlop_array_dtype(output), dtype);
    check_equal(expected, output, dtype, N);
    dlop_array_release(output);
    dlop_array_release(input);
    dlop_function_destroy(function);
    dlop_graph_destroy(dtype_graph);
  }
}
END_TEST

START_TEST(test_multiply_them_broadcasting) {
  dlop_var *inputs[2];
  int64_t a_shape[2] = {3, 1}, b_shape[2] = {1, 4};
  float a[3] = {1.5f, -2.0f, 3.0f}, b[4] = {2.0f, 0.5f, -1.0f, 10.0f}, expected[12];
  dlop_var *z = dlop_test_multiply_them(graph, DLOP_FLOAT32, 2, a_shape, 2, b_shape, inputs);
  dlop_function *function = dlop_test_compile(graph, inputs, 2, z, CPU);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) expected[i * 4 + j] = a[i] * b[j];
  dlop_array *arrays[2] = {dlop_test_host_array(DLOP_FLOAT32, 2, a_shape, a),
                           dlop_test_host_array(DLOP_FLOAT32, 2, b_shape, b)};
  dlop_array *output = NULL;
  DLOP_CK_OK(dlop_function_run(function, arrays, 2, &output, 1, NULL));
  ck_assert_int_eq(dlop_array_tensor(output)->ndim, 2);
  ck_assert_int_eq(dlop_array_tensor(output)->shape[0], 3);
  ck_assert_int_eq(dlop_array_tensor(output)->shape[1], 4);
  check_equal(expected, output, DLOP_FLOAT32, 12);
  dlop_test_release_arrays(3, output, arrays[0], arrays[1]);
  dlop_function_destroy(function);
}
END_TEST

/* Theano's multiply_them example: 100 random float32 pairs. */
START_TEST(test_multiply_them_theano_example) {
  enum { N = 100 };
  dlop_var *inputs[2];
  int64_t n = N;
  float a[N], b[N], expected[N];
  dlop_var *z = dlop_test_multiply_them(graph, DLOP_FLOAT32, 1, &n, 1, &n, inputs);
  dlop_function *function = dlop_test_compile(graph, inputs, 2, z, CPU);
  dlop_test_fill_random(a, DLOP_FLOAT32, N, 11, -1, 1);
  dlop_test_fill_random(b, DLOP_FLOAT32, N, 12, -1, 1);
  for (int i = 0; i < N; i++) expected[i] = a[i] * b[i];
  dlop_array *arrays[2] = {dlop_test_host_array(DLOP_FLOAT32, 1, &n, a),
                          dlop_test_host_array(DLOP_FLOAT32, 1, &n, b)};
  dlop_array *output = NULL;
  DLOP_CK_OK(dlop_function_run(function, arrays, 2, &output, 1, NULL));
  check_equal(expected, output, DLOP_FLOAT32, N);
  dlop_test_release_arrays(3, output, arrays[0], arrays[1]);
  dlop_function_destroy(function);
}
END_TEST

/* A chain of 10 doubles on a large vector (8 MiB of float32 a buffer) keeps about 3 buffers
 * alive (input + 2), not 11, with at most 3 driver allocations, and a second run takes every
 * buffer from the pool. */
START_TEST(test_buffer_plan_reuses_memory) {
  dlop_test_check_chain_plan(graph, CPU, (int64_t)1 << 21, 10, 1, 3);
}
END_TEST

/* ---- in-place ops (inplace_map) ------------------------------------------------------------ */

enum { INPLACE_N = 1 << 21 }; /* 8 MiB of float32 per buffer */

static float *inplace_data(void) {
  float *x = malloc(sizeof(float) * INPLACE_N);
  ck_assert_ptr_nonnull(x);
  dlop_test_fill_random(x, DLOP_FLOAT32, INPLACE_N, 7, -2.0, 2.0);
  return x;
}

/* The host's input array still holds what the caller put there. */
static void check_input_untouched(const float *x, const dlop_array *input) {
  float *now = dlop_test_read_back(input);
  ck_assert_msg(memcmp(now, x, sizeof(float) * INPLACE_N) == 0,
                "the run wrote into the function's input array");
  free(now);
}

/* Node #index's line of explain() contains `contains` (NULL: anything) and `in_place` (NULL:
 * the line must not say "in place" at all). */
static void check_node_line(const dlop_function *function, int index, const char *contains,
                            const char *in_place) {
  char text[2048], tag[16];
  DLOP_CK_OK(dlop_function_explain(function, text, sizeof text));
  snprintf(tag, sizeof tag, "\n#%d ", index);
  const char *start = strstr(text, tag);
  ck_assert_msg(start != NULL, "no node #%d in:\n%s", index, text);
  start++;
  const char *end = strchr(start, '\n');
  char line[256];
  snprintf(line, sizeof line, "%.*s", (int)(end ? end - start : (long)strlen(start)), start);
  if (contains) ck_assert_msg(strstr(line, contains) != NULL, "no '%s' in: %s", contains, line);
  if (in_place)
    ck_assert_msg(strstr(line, in_place) != NULL, "not '%s': %s", in_place, line);
  else
    ck_assert_msg(strstr(line, "in place") == NULL, "#%d must not run in place: %s", index, line);
}

/* x, y1 = double(x), y2 = double(y1), z = exp(y2) on x of float32[INPLACE_N]: writes x and y1,
 * returns z. */
static dlop_var *exp_double_double(dlop_var **x, dlop_var **y1) {
  int64_t n = INPLACE_N;
  dlop_var *y2, *z;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, &n, x));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", x, 1, NULL, 0, y1, 1));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", y1, 1, NULL, 0, &y2, 1));
  DLOP_CK_OK(dlop_graph_apply(graph, "exp", &y2, 1, NULL, 0, &z, 1));
  return z;
}

/* How many buffers of INPLACE_N float32 the pool's peak use has grown by since before (a run
 * since then), printed with what. */
static double peak_growth(dlop_memory_stats before, const char *what) {
  dlop_memory_stats after = dlop_test_memory_stats(CPU);
  double extra = (double)(after.peak_bytes_in_use - before.bytes_in_use) /
                 (double)(INPLACE_N * sizeof(float));
  fprintf(stderr, "%s: peak %.2f buffers (input + %.2f)\n", what, 1.0 + extra, extra);
  return extra;
}

/* exp(double(double(x))): #1 overwrites #0's output and #2 overwrites #1's, so the run keeps
 * the input and ONE intermediate alive (2 buffers), not 3; x itself is never written. */
START_TEST(test_inplace_chain_halves_peak) {
  int64_t n = INPLACE_N;
  const uint64_t buffer = (uint64_t)n * sizeof(float);
  dlop_var *x, *y1;
  dlop_var *z = exp_double_double(&x, &y1);
  dlop_function *function = dlop_test_compile_unfused(graph, &x, 1, &z, 1, CPU);
  check_node_line(function, 0, NULL, NULL); /* a function input is never overwritten */
  check_node_line(function, 1, " on cpu (in place of input 0)", "(in place of input 0)");
  check_node_line(function, 2, "#2 exp(", "(in place of input 0)");

  float *x_data = inplace_data(), *expected = malloc(sizeof(float) * INPLACE_N);
  ck_assert_ptr_nonnull(expected);
  for (int64_t i = 0; i < n; i++) expected[i] = expf(4.0f * x_data[i]);
  dlop_array *input = dlop_test_host_array(DLOP_FLOAT32, 1, &n, x_data), *output = NULL;
  dlop_memory_stats before = dlop_test_memory_stats(CPU);
  ck_assert_msg(before.peak_bytes_in_use < before.bytes_in_use + buffer / 4,
                "an earlier peak (%llu bytes) hides the run's",
                (unsigned long long)before.peak_bytes_in_use);
  DLOP_CK_OK(dlop_function_run(function, &input, 1, &output, 1, NULL));
  double extra = peak_growth(before, "in-place chain exp(double(double(x))), float32");
  ck_assert_msg(extra <= 1.25, "peak use grew by %.2f buffers during the run (expected 1: one "
                "intermediate reused in place)", extra);
  ck_assert_int_eq(dlop_array_numel(output), n);
  ck_assert_ptr_ne(dlop_array_tensor(output)->data, dlop_array_tensor(input)->data);
  check_equal(expected, output, DLOP_FLOAT32, n);
  check_input_untouched(x_data, input);
  dlop_array_release(output);

  /* a second run on the same function: same answer, the input still untouched */
  DLOP_CK_OK(dlop_function_run(function, &input, 1, &output, 1, NULL));
  check_equal(expected, output, DLOP_FLOAT32, n);
  check_input_untouched(x_data, input);
  dlop_test_release_arrays(2, output, input);
  free(expected);
  free(x_data);
  dlop_function_destroy(function);
}
END_TEST

/* The same chain with y1 also a function output: y1 must come back as 2x, so #1 allocates
 * (peak: input + 2 intermediates) and only exp overwrites y2. */
START_TEST(test_inplace_never_overwrites_a_function_output) {
  int64_t n = INPLACE_N;
  dlop_var *x, *y1;
  dlop_var *z = exp_double_double(&x, &y1);
  dlop_var *outs[2] = {z, y1};
  dlop_function *function = dlop_test_compile_unfused(graph, &x, 1, outs, 2, CPU);
  check_node_line(function, 1, NULL, NULL); /* #1 would overwrite an output */
  check_node_line(function, 2, NULL, "(in place of input 0)");

  float *x_data = inplace_data(), *twice = malloc(sizeof(float) * INPLACE_N),
        *expected = malloc(sizeof(float) * INPLACE_N);
  ck_assert_ptr_nonnull(twice);
  ck_assert_ptr_nonnull(expected);
  for (int64_t i = 0; i < n; i++) {
    twice[i] = 2.0f * x_data[i];
    expected[i] = expf(4.0f * x_data[i]);
  }
  dlop_array *input = dlop_test_host_array(DLOP_FLOAT32, 1, &n, x_data), *results[2] = {NULL, NULL};
  dlop_memory_stats before = dlop_test_memory_stats(CPU);
  DLOP_CK_OK(dlop_function_run(function, &input, 1, results, 2, NULL));
  double extra = peak_growth(before, "chain with y1 also an output");
  ck_assert_msg(extra >= 1.75 && extra <= 2.25, "peak use grew by %.2f buffers (expected 2)",
                extra);
  ck_assert_ptr_ne(dlop_array_tensor(results[0])->data, dlop_array_tensor(results[1])->data);
  check_equal(expected, results[0], DLOP_FLOAT32, n);
  check_equal(twice, results[1], DLOP_FLOAT32, n);
  check_input_untouched(x_data, input);
  dlop_test_release_arrays(3, results[0], results[1], input);
  free(expected);
  free(twice);
  free(x_data);
  dlop_function_destroy(function);
}
END_TEST

/* y = double(x) read by exp (#1) and by double (#2): #1 must leave y alone for #2; #2, its last
 * reader, may overwrite it. multiply_them(y2, y2) reads its input twice: never in place. */
START_TEST(test_inplace_shared_intermediate) {
  int64_t n = INPLACE_N;
  dlop_var *x, *y, *a, *b, *y2, *c;
  dlop_function *function = NULL;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, &n, &x));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &x, 1, NULL, 0, &y, 1));
  DLOP_CK_OK(dlop_graph_apply(graph, "exp", &y, 1, NULL, 0, &a, 1));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &y, 1, NULL, 0, &b, 1));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &x, 1, NULL, 0, &y2, 1));
  dlop_var *square[2] = {y2, y2};
  DLOP_CK_OK(dlop_graph_apply(graph, "multiply_them", square, 2, NULL, 0, &c, 1));
  dlop_var *outs[3] = {a, b, c};
  function = dlop_test_compile_unfused(graph, &x, 1, outs, 3, CPU);
  check_node_line(function, 1, "#1 exp(", NULL);
  check_node_line(function, 2, "#2 double(", "(in place of input 0)");
  check_node_line(function, 4, "#4 multiply_them(", NULL);

  float *x_data = inplace_data();
  float *want_a = malloc(sizeof(float) * INPLACE_N), *want_b = malloc(sizeof(float) * INPLACE_N),
        *want_c = malloc(sizeof(float) * INPLACE_N);
  ck_assert(want_a && want_b && want_c);
  for (int64_t i = 0; i < n; i++) {
    want_a[i] = expf(2.0f * x_data[i]);
    want_b[i] = 4.0f * x_data[i];
    want_c[i] = (2.0f * x_data[i]) * (2.0f * x_data[i]);
  }
  dlop_array *input = dlop_test_host_array(DLOP_FLOAT32, 1, &n, x_data), *results[3] = {NULL, NULL, NULL};
  DLOP_CK_OK(dlop_function_run(function, &input, 1, results, 3, NULL));
  check_equal(want_a, results[0], DLOP_FLOAT32, n);
  check_equal(want_b, results[1], DLOP_FLOAT32, n);
  check_equal(want_c, results[2], DLOP_FLOAT32, n);
  check_input_untouched(x_data, input);
  dlop_test_release_arrays(4, results[0], results[1], results[2], input);
  free(want_a);
  free(want_b);
  free(want_c);
  free(x_data);
  dlop_function_destroy(function);
}
END_TEST

/* Unknown static shapes: the plan keeps the candidate and the run checks the concrete shapes.
 * multiply_them(double(x), w) with x of 1 element and w of 5 broadcasts to 5: the output is
 * larger than double(x), so it must get its own buffer; with equal lengths it reuses it. */
START_TEST(test_inplace_decided_at_run_time) {
  int64_t unknown = DLOP_DIM_UNKNOWN;
  dlop_var *x, *w, *y, *z;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, &unknown, &x));
  DLOP_CK_OK(dlop_graph_input(graph, "w", DLOP_FLOAT32, 1, &unknown, &w));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &x, 1, NULL, 0, &y, 1));
  dlop_var *operands[2] = {y, w}, *inputs[2] = {x, w};
  DLOP_CK_OK(dlop_graph_apply(graph, "multiply_them", operands, 2, NULL, 0, &z, 1));
  dlop_function *function = dlop_test_compile_unfused(graph, inputs, 2, &z, 1, CPU);
  check_node_line(function, 1, NULL, "(in place of input 0 when the run's shapes match)");

  float xs[5] = {1.5f, -2.0f, 0.25f, 3.0f, -0.5f}, ws[5] = {2.0f, 3.0f, -1.0f, 0.5f, 4.0f};
  float expected[5];
  int64_t one = 1, five = 5;
  dlop_array *args[2], *output = NULL;
  /* broadcast: z has 5 elements, double(x) only 1 */
  args[0] = dlop_test_host_array(DLOP_FLOAT32, 1, &one, xs);
  args[1] = dlop_test_host_array(DLOP_FLOAT32, 1, &five, ws);
  for (int i = 0; i < 5; i++) expected[i] = 2.0f * xs[0] * ws[i];
  DLOP_CK_OK(dlop_function_run(function, args, 2, &output, 1, NULL));
  ck_assert_int_eq(dlop_array_numel(output), 5);
  check_equal(expected, output, DLOP_FLOAT32, 5);
  dlop_test_release_arrays(2, output, args[0]);
  /* equal lengths: reuse allowed, the answer the same */
  args[0] = dlop_test_host_array(DLOP_FLOAT32, 1, &five, xs);
  for (int i = 0; i < 5; i++) expected[i] = 2.0f * xs[i] * ws[i];
  DLOP_CK_OK(dlop_function_run(function, args, 2, &output, 1, NULL));
  check_equal(expected, output, DLOP_FLOAT32, 5);
  float *w_now = dlop_test_read_back(args[1]);
  ck_assert(memcmp(w_now, ws, sizeof ws) == 0);
  free(w_now);
  dlop_test_release_arrays(3, output, args[0], args[1]);
  dlop_function_destroy(function);
}
END_TEST

START_TEST(test_input_errors) {
  int64_t four = 4, five = 5, two_by_two[2] = {2, 2};
  dlop_var *x, *y;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, &four, &x));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &x, 1, NULL, 0, &y, 1));
  dlop_function *function = dlop_test_compile(graph, &x, 1, y, CPU);
  float f32[5] = {0}, f32_4[4] = {0};
  double f64[4] = {0};
  dlop_array *wrong_dtype = dlop_test_host_array(DLOP_FLOAT64, 1, &four, f64);
  dlop_array *wrong_shape = dlop_test_host_array(DLOP_FLOAT32, 1, &five, f32);
  dlop_array *wrong_rank = dlop_test_host_array(DLOP_FLOAT32, 2, two_by_two, f32);
  dlop_array *good = dlop_test_host_array(DLOP_FLOAT32, 1, &four, f32_4);
  dlop_array *output = (dlop_array *)&output, *two[2] = {good, good};

  ck_assert_int_eq(dlop_function_run(function, &wrong_dtype, 1, &output, 1, NULL), DLOP_TYPE_ERROR);
  ck_assert_ptr_null(output);
  ck_assert_msg(strstr(dlop_last_error(), "input 0 ('x') is float64") != NULL, "%s",
                dlop_last_error());
  ck_assert_int_eq(dlop_function_run(function, &wrong_shape, 1, &output, 1, NULL),
                   DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "float32[4]") != NULL, "%s", dlop_last_error());
  ck_assert_int_eq(dlop_function_run(function, &wrong_rank, 1, &output, 1, NULL), DLOP_TYPE_ERROR);
  ck_assert_int_eq(dlop_function_run(function, two, 2, &output, 1, NULL), DLOP_INVALID_ARGUMENT);
  ck_assert_msg(strstr(dlop_last_error(), "takes 1 input, got 2") != NULL, "%s", dlop_last_error());
  ck_assert_int_eq(dlop_function_run(function, NULL, 0, &output, 1, NULL), DLOP_INVALID_ARGUMENT);
  ck_assert_int_eq(dlop_function_run(function, &good, 1, two, 2, NULL), DLOP_INVALID_ARGUMENT);
  DLOP_CK_OK(dlop_function_run(function, &good, 1, &output, 1, NULL));
  dlop_test_release_arrays(5, output, wrong_dtype, wrong_shape, wrong_rank, good);
  dlop_function_destroy(function);
}
END_TEST

/* Static shapes unknown when compiling, incompatible at run time: the node names itself. */
START_TEST(test_runtime_shape_error_names_node) {
  dlop_var *inputs[2];
  int64_t unknown = DLOP_DIM_UNKNOWN, three = 3, five = 5;
  float data[5] = {0};
  dlop_var *z = dlop_test_multiply_them(graph, DLOP_FLOAT32, 1, &unknown, 1, &unknown, inputs);
  dlop_function *function = dlop_test_compile(graph, inputs, 2, z, CPU);
  dlop_array *arrays[2] = {dlop_test_host_array(DLOP_FLOAT32, 1, &three, data),
                           dlop_test_host_array(DLOP_FLOAT32, 1, &five, data)};
  dlop_array *output = NULL;
  ck_assert_int_eq(dlop_function_run(function, arrays, 2, &output, 1, NULL), DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "node #0 multiply_them") != NULL, "%s",
                dlop_last_error());
  dlop_test_release_arrays(2, arrays[0], arrays[1]);
  dlop_function_destroy(function);
}
END_TEST

START_TEST(test_missing_input_is_named) {
  dlop_var *inputs[2], *z;
  dlop_function *function = (dlop_function *)&function;
  DLOP_CK_OK(dlop_graph_input(graph, "a", DLOP_FLOAT32, 1, NULL, &inputs[0]));
  DLOP_CK_OK(dlop_graph_input(graph, "weights", DLOP_FLOAT32, 1, NULL, &inputs[1]));
  DLOP_CK_OK(dlop_graph_apply(graph, "multiply_them", inputs, 2, NULL, 0, &z, 1));
  ck_assert_int_eq(dlop_function_compile(graph, inputs, 1, &z, 1, CPU, &function),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_null(function);
  ck_assert_msg(strstr(dlop_last_error(), "'weights'") != NULL, "%s", dlop_last_error());
}
END_TEST

/* Never a silent CPU fallback: without a GPU, compiling for CUDA fails and says why. */
START_TEST(test_cuda_without_gpu_is_an_error) {
  dlop_device cuda = {DLOP_DEVICE_CUDA, 0};
  dlop_var *x, *y;
  dlop_function *function = NULL;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, NULL, &x));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &x, 1, NULL, 0, &y, 1));
  int have_gpu = dlop_device_check(cuda) == DLOP_OK;
  int status = dlop_function_compile(graph, &x, 1, &y, 1, cuda, &function);
  if (have_gpu) {
    /* a GPU is here: the function must then really be a CUDA one */
    DLOP_CK_OK(status);
    ck_assert_int_eq(dlop_function_device(function).type, DLOP_DEVICE_CUDA);
    dlop_function_destroy(function);
  } else {
    ck_assert_int_eq(status, DLOP_NO_DEVICE);
    ck_assert_ptr_null(function);
    ck_assert_msg(strstr(dlop_last_error(), "cuda:0") != NULL, "%s", dlop_last_error());
    ck_assert_msg(strlen(dlop_last_error()) > strlen("cannot compile a function for cuda:0: "),
                  "no reason given: %s", dlop_last_error());
  }
}
END_TEST

/* The node-by-node listing (fusion off; test_fusion.c has the fused one). */
START_TEST(test_explain_lists_nodes_and_device) {
  dlop_var *x;
  dlop_var *z = dlop_test_exp_double(graph, DLOP_FLOAT32, DLOP_DIM_UNKNOWN, &x);
  dlop_function *function = dlop_test_compile_unfused(graph, &x, 1, &z, 1, CPU);
  char text[1024], small[16];
  DLOP_CK_OK(dlop_function_explain(function, text, sizeof text));
  ck_assert_msg(strstr(text, "#0 double(x: float32[?]) -> float32[?] on cpu") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "#1 exp(double.0: float32[?]) -> float32[?] on cpu") != NULL, "%s",
                text);
  ck_assert_msg(strstr(text, "inputs: x: float32[?]") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "outputs: exp.1: float32[?]") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "\nfusion: off (turned off when the function was compiled)\n") != NULL,
                "%s", text);
  /* a buffer too small is an error, never a silently cut listing */
  ck_assert_int_eq(dlop_function_explain(function, small, sizeof small), DLOP_INVALID_ARGUMENT);
  ck_assert_msg(strstr(dlop_last_error(), "needs") != NULL, "%s", dlop_last_error());
  ck_assert_int_eq(strlen(small), sizeof small - 1);
  dlop_function_destroy(function);
}
END_TEST

/* A transposed view (strides 1, 4) and a reversed view (stride -1) give correct results. */
START_TEST(test_strided_inputs) {
  int64_t matrix_shape[2] = {3, 4}, t_shape[2] = {4, 3}, t_strides[2] = {1, 4};
  int64_t n = 7, reversed_stride = -1;
  float m[12], v[7], w[7];
  for (int i = 0; i < 12; i++) m[i] = (float)i - 5.5f;
  for (int i = 0; i < 7; i++) v[i] = (float)(i + 1), w[i] = 0.5f * (float)i;
  dlop_var *t, *dt, *ab[2];
  int64_t unknown2[2] = {DLOP_DIM_UNKNOWN, DLOP_DIM_UNKNOWN};
  DLOP_CK_OK(dlop_graph_input(graph, "t", DLOP_FLOAT32, 2, unknown2, &t));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &t, 1, NULL, 0, &dt, 1));
  dlop_function *f_double = dlop_test_compile(graph, &t, 1, dt, CPU);
  dlop_var *p = dlop_test_multiply_them(graph, DLOP_FLOAT32, 1, &n, 1, &n, ab);
  dlop_function *f_mul = dlop_test_compile(graph, ab, 2, p, CPU);

  dlop_array *base = dlop_test_host_array(DLOP_FLOAT32, 2, matrix_shape, m), *view = NULL, *out = NULL;
  DLOP_CK_OK(dlop_array_view(base, 2, t_shape, t_strides, 0, &view));
  DLOP_CK_OK(dlop_function_run(f_double, &view, 1, &out, 1, NULL));
  float expected_t[12];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) expected_t[i * 3 + j] = 2.0f * m[j * 4 + i];
  check_equal(expected_t, out, DLOP_FLOAT32, 12);
  dlop_test_release_arrays(2, out, view);

  dlop_array *va = dlop_test_host_array(DLOP_FLOAT32, 1, &n, v);
  dlop_array *wb = dlop_test_host_array(DLOP_FLOAT32, 1, &n, w);
  dlop_array *reversed = NULL;
  DLOP_CK_OK(
      dlop_array_view(va, 1, &n, &reversed_stride, (uint64_t)(n - 1) * sizeof(float), &reversed));
  dlop_array *pair[2] = {reversed, wb};
  DLOP_CK_OK(dlop_function_run(f_mul, pair, 2, &out, 1, NULL));
  float expected_r[7];
  for (int i = 0; i < 7; i++) expected_r[i] = v[6 - i] * w[i];
  check_equal(expected_r, out, DLOP_FLOAT32, 7);
  dlop_test_release_arrays(5, out, reversed, va, wb, base);
  dlop_function_destroy(f_double);
  dlop_function_destroy(f_mul);
}
END_TEST

/* Constants are fed to every run; outputs that are inputs or constants come back as is. */
START_TEST(test_constants_and_passthrough_outputs) {
  int64_t four = 4;
  float c_data[4] = {1.0f, -2.0f, 0.5f, 4.0f}, x_data[4] = {3.0f, 3.0f, -8.0f, 0.25f};
  dlop_array *c_array = dlop_test_host_array(DLOP_FLOAT32, 1, &four, c_data);
  dlop_var *c, *x, *xc[2], *p, *outputs[3];
  dlop_function *function = NULL;
  DLOP_CK_OK(dlop_graph_constant(graph, "c", c_array, &c));
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, &four, &x));
  xc[0] = x;
  xc[1] = c;
  DLOP_CK_OK(dlop_graph_apply(graph, "multiply_them", xc, 2, NULL, 0, &p, 1));
  outputs[0] = p;
  outputs[1] = c;
  outputs[2] = x;
  DLOP_CK_OK(dlop_function_compile(graph, &x, 1, outputs, 3, CPU, &function));
  char text[1024];
  DLOP_CK_OK(dlop_function_explain(function, text, sizeof text));
  ck_assert_msg(strstr(text, "constants: c: float32[4]") != NULL, "%s", text);
  dlop_array *input = dlop_test_host_array(DLOP_FLOAT32, 1, &four, x_data), *results[3];
  for (int run = 0; run < 2; run++) {
    DLOP_CK_OK(dlop_function_run(function, &input, 1, results, 3, NULL));
    float expected[4];
    for (int i = 0; i < 4; i++) expected[i] = x_data[i] * c_data[i];
    check_equal(expected, results[0], DLOP_FLOAT32, 4);
    check_equal(c_data, results[1], DLOP_FLOAT32, 4);
    ck_assert_ptr_eq(results[2], input); /* retained, not copied */
    dlop_test_release_arrays(3, results[0], results[1], results[2]);
  }
  dlop_test_release_arrays(2, input, c_array);
  dlop_function_destroy(function);
}
END_TEST

START_TEST(test_empty_input) {
  dlop_function *function =
      dlop_test_compile_exp_double(graph, DLOP_FLOAT32, DLOP_DIM_UNKNOWN, CPU);
  int64_t zero = 0;
  float nothing[1] = {0};
  dlop_array *input = dlop_test_host_array(DLOP_FLOAT32, 1, &zero, nothing), *output = NULL;
  DLOP_CK_OK(dlop_function_run(function, &input, 1, &output, 1, NULL));
  ck_assert_int_eq(dlop_array_numel(output), 0);
  dlop_test_release_arrays(2, output, input);
  dlop_function_destroy(function);
}
END_TEST


/* fixture_scale (the loader's good fixture) takes its parameters from apply, defaults
 * included, and declares DLOP_OP_NEEDS_CONTIGUOUS_INPUTS: a transposed view is copied first. */
START_TEST(test_parameters_and_contiguous_copies) {
  const dlop_plugin *plugin = NULL;
  DLOP_CK_OK(dlop_load_plugin(DLOP_TEST_FIXTURE_DIR "/good.so", &plugin));
  int64_t unknown2[2] = {DLOP_DIM_UNKNOWN, DLOP_DIM_UNKNOWN};
  int64_t shape[2] = {3, 4}, t_shape[2] = {4, 3}, t_strides[2] = {1, 4};
  dlop_var *x, *outputs[2];
  dlop_named_param params[2] = {{"scale", {DLOP_PARAM_FLOAT, 1, {.f = 0.5}}},
                                {"negate", {DLOP_PARAM_BOOL, 1, {.i = 1}}}};
  dlop_function *function = NULL;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT64, 2, unknown2, &x));
  DLOP_CK_OK(dlop_graph_apply(graph, "fixture_scale", &x, 1, NULL, 0, &outputs[0], 1));
  DLOP_CK_OK(dlop_graph_apply(graph, "fixture_scale", &x, 1, params, 2, &outputs[1], 1));
  DLOP_CK_OK(dlop_function_compile(graph, &x, 1, outputs, 2, CPU, &function));
  double m[12], by_default[12], by_params[12];
  for (int i = 0; i < 12; i++) m[i] = (double)i * 1.5 - 4.0;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) {
      by_default[i * 3 + j] = 2.0 * m[j * 4 + i];
      by_params[i * 3 + j] = -0.5 * m[j * 4 + i];
    }
  dlop_array *base = dlop_test_host_array(DLOP_FLOAT64, 2, shape, m), *view = NULL, *results[2];
  DLOP_CK_OK(dlop_array_view(base, 2, t_shape, t_strides, 0, &view));
  DLOP_CK_OK(dlop_function_run(function, &view, 1, results, 2, NULL));
  check_equal(by_default, results[0], DLOP_FLOAT64, 12);
  check_equal(by_params, results[1], DLOP_FLOAT64, 12);
  dlop_test_release_arrays(4, results[0], results[1], view, base);
  dlop_function_destroy(function);
}
END_TEST

/* A function is independent of its graph once compiled. */
START_TEST(test_function_outlives_graph) {
  dlop_graph *own_graph = dlop_test_new_graph(); /* not the fixture's: destroyed here */
  dlop_function *function = dlop_test_compile_exp_double(own_graph, DLOP_FLOAT64, 3, CPU);
  dlop_graph_destroy(own_graph);
  int64_t three = 3;
  double x[3] = {0.0, 0.5, -1.0}, expected[3];
  for (int i = 0; i < 3; i++) expected[i] = exp(2.0 * x[i]);
  dlop_array *input = dlop_test_host_array(DLOP_FLOAT64, 1, &three, x), *output = NULL;
  DLOP_CK_OK(dlop_function_run(function, &input, 1, &output, 1, NULL));
  check_equal(expected, output, DLOP_FLOAT64, 3);
  dlop_test_release_arrays(2, output, input);
  dlop_function_destroy(function);
}
END_TEST

START_TEST(test_four_threads_one_function) {
  setenv("DLOP_NUM_THREADS", "4", 0); /* a pool with workers even on 1-core machines */
  /* n at least twice the plugins' 32768-element grain (and odd), so every run goes through the
   * host's parallel_for and the four threads really contend for the pool (one owns it, the
   * others find it busy and run inline). */
  static const dlop_test_repeated_runs runs = {CPU, (1 << 17) + 3, 25, 100};
  dlop_test_exp_double_in_threads(graph, 4, &runs);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("function");
  TCase *results = dlop_test_tcase(suite, "results", 120, graph_setup, graph_teardown);
  dlop_test_add_tests(results,
                      test_exp_double_matches_reference,
                      test_double_every_dtype,
                      test_multiply_them_broadcasting,
                      test_multiply_them_theano_example,
                      test_strided_inputs,
                      test_constants_and_passthrough_outputs,
                      test_empty_input,
                      test_four_threads_one_function,
                      test_function_outlives_graph,
                      test_parameters_and_contiguous_copies,
                      NULL);
  TCase *plan = dlop_test_tcase(suite, "buffer_plan", 120, graph_setup, graph_teardown);
  dlop_test_add_tests(plan,
                      test_buffer_plan_reuses_memory,
                      test_inplace_chain_halves_peak,
                      test_inplace_never_overwrites_a_function_output,
                      test_inplace_shared_intermediate,
                      test_inplace_decided_at_run_time,
                      NULL);
  TCase *errors = dlop_test_tcase(suite, "errors", 0, graph_setup, graph_teardown);
  dlop_test_add_tests(errors,
                      test_input_errors,
                      test_runtime_shape_error_names_node,
                      test_missing_input_is_named,
                      test_cuda_without_gpu_is_an_error,
                      test_explain_lists_nodes_and_device,
                      NULL);
  return dlop_test_run_suite(suite);
}
