/* test_run_cache.c — what the fast run path caches must never change results: the per-node
 * shape cache (shapes alternating between runs, a run-time shape error between good runs,
 * threads running one function on different shapes at once), the per-thread free list of
 * array headers (wrapped arrays released on another thread, more than the list keeps), and
 * outputs handed over without a retain (one node output given twice, an input given back). */
#include <math.h>
#include <pthread.h>
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

/* Run f on x[0..n) and return the number of wrong elements (or -1 when the run failed or
 * the output has another shape), describing the first problem in message. */
static int run_and_check(dlop_function *function, const float *x, int64_t n, char *message,
                         size_t size) {
  dlop_array *input = NULL, *output = NULL;
  int bad = 0;
  if (dlop_array_from_host(CPU, DLOP_FLOAT32, 1, &n, x, &input) != DLOP_OK ||
      dlop_function_run(function, &input, 1, &output, 1, NULL) != DLOP_OK) {
    snprintf(message, size, "n=%lld: %s", (long long)n, dlop_last_error());
    dlop_array_release(input);
    return -1;
  }
  const dlop_tensor *t = dlop_array_tensor(output);
  if (t->ndim != 1 || t->shape[0] != n) {
    snprintf(message, size, "n=%lld: output has ndim %d and %lld elements", (long long)n,
             (int)t->ndim, (long long)(t->ndim ? t->shape[0] : -1));
    bad = -1;
  } else {
    const float *y = dlop_tensor_base(t);
    for (int64_t i = 0; i < n; i++) {
      float want = expf(2.0f * x[i]);
      if (fabsf(y[i] - want) <= 1e-5f * fabsf(want) + 1e-6f) continue;
      if (bad == 0)
        snprintf(message, size, "n=%lld [%lld]: expected %g, got %g", (long long)n, (long long)i,
                 (double)want, (double)y[i]);
      bad++;
    }
  }
  dlop_array_release(output);
  dlop_array_release(input);
  return bad;
}

/* Lengths that come back and change: the cache must follow every change, including to 0. */
START_TEST(test_alternating_shapes) {
  static const int64_t lengths[] = {3, 5, 3, 3, 0, 5, 1, 1000, 3, 0, 0, 7};
  dlop_function *function =
      dlop_test_compile_exp_double(graph, DLOP_FLOAT32, DLOP_DIM_UNKNOWN, CPU);
  float x[1000];
  char message[256] = "";
  dlop_test_fill_random(x, DLOP_FLOAT32, 1000, 7, -3, 3);
  for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
    int bad = run_and_check(function, x, lengths[k], message, sizeof message);
    ck_assert_msg(bad == 0, "run %d: %s", (int)k, message);
  }
  dlop_function_destroy(function);
}
END_TEST

/* A run whose shapes make infer_shape fail, between good runs: the failure is reported every
 * time (never cached as a success) and the good shapes still work afterwards. */
START_TEST(test_shape_error_between_good_runs) {
  int64_t unknown = DLOP_DIM_UNKNOWN;
  dlop_var *inputs[2];
  dlop_var *z = dlop_test_multiply_them(graph, DLOP_FLOAT32, 1, &unknown, 1, &unknown, inputs);
  dlop_function *function = dlop_test_compile(graph, inputs, 2, z, CPU);
  float a[5] = {1, 2, 3, 4, 5}, b[5] = {2, 2, 2, 2, 2};
  /* {a length, b length, expected output length or -1 for a shape error} */
  static const int64_t cases[][3] = {{3, 3, 3}, {3, 5, -1}, {3, 5, -1}, {3, 3, 3},
                                     {1, 5, 5}, {5, 1, 5}, {3, 5, -1}, {5, 5, 5}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    dlop_array *arrays[2] = {NULL, NULL}, *output = NULL;
    DLOP_CK_OK(dlop_array_from_host(CPU, DLOP_FLOAT32, 1, &cases[k][0], a, &arrays[0]));
    DLOP_CK_OK(dlop_array_from_host(CPU, DLOP_FLOAT32, 1, &cases[k][1], b, &arrays[1]));
    int status = dlop_function_run(function, arrays, 2, &output, 1, NULL);
    if (cases[k][2] < 0) {
      ck_assert_msg(status == DLOP_SHAPE_ERROR, "case %d: expected a shape error, got %s",
                    (int)k, dlop_status_name(status));
      ck_assert_msg(strstr(dlop_last_error(), "node #0 multiply_them") != NULL, "case %d: %s",
                    (int)k, dlop_last_error());
      ck_assert_ptr_null(output);
    } else {
      ck_assert_msg(status == DLOP_OK, "case %d: %s", (int)k, dlop_last_error());
      const dlop_tensor *t = dlop_array_tensor(output);
      ck_assert_int_eq(t->shape[0], cases[k][2]);
      const float *y = dlop_tensor_base(t);
      for (int64_t i = 0; i < cases[k][2]; i++) {
        float want = a[cases[k][0] == 1 ? 0 : i] * b[cases[k][1] == 1 ? 0 : i];
        ck_assert_msg(y[i] == want, "case %d [%d]: expected %g, got %g", (int)k, (int)i,
                      (double)want, (double)y[i]);
      }
    }
    dlop_test_release_arrays(3, output, arrays[0], arrays[1]);
  }
  dlop_function_destroy(function);
}
END_TEST

/* The two lengths each thread of test_threads_with_different_shapes alternates between, so
 * that its own shapes also change from run to run. */
static const int64_t thread_lengths[4][2] = {{1, 2}, {7, 7}, {1000, 3}, {0, 33}};

static void run_shapes(dlop_test_thread *thread) {
  const int64_t *lengths = thread_lengths[thread->index];
  int64_t most = lengths[0] > lengths[1] ? lengths[0] : lengths[1];
  float *x = malloc((size_t)(most + 1) * sizeof(float));
  dlop_test_fill_random(x, DLOP_FLOAT32, most, (uint64_t)most, -2, 2);
  for (int run = 0; run < 300 && thread->failures == 0; run++)
    if (run_and_check(thread->function, x, lengths[run & 1], thread->message,
                      sizeof thread->message) != 0)
      thread->failures++;
  free(x);
}

/* Four threads run one function on different shapes at once: whichever thread's shapes the
 * cache holds, every run gets outputs of its own shape and correct values. */
START_TEST(test_threads_with_different_shapes) {
  dlop_function *function =
      dlop_test_compile_exp_double(graph, DLOP_FLOAT32, DLOP_DIM_UNKNOWN, CPU);
  dlop_test_run_threads(4, function, NULL, run_shapes);
  dlop_function_destroy(function);
}
END_TEST

/* Outputs (z, z, x, y): a node output given twice, the function's input, and an intermediate
 * that is also an output. The run moves each node output's reference to the caller once and
 * retains every other: each output is released once, its values are right, and nothing is
 * leaked or freed twice (bytes in use come back to where they were). */
START_TEST(test_outputs_moved_or_retained) {
  int64_t unknown = DLOP_DIM_UNKNOWN, n = 7;
  dlop_var *x, *y, *z;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, &unknown, &x));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &x, 1, NULL, 0, &y, 1));
  DLOP_CK_OK(dlop_graph_apply(graph, "exp", &y, 1, NULL, 0, &z, 1));
  dlop_var *wanted[4] = {z, z, x, y};
  dlop_function *function = NULL;
  DLOP_CK_OK(dlop_function_compile(graph, &x, 1, wanted, 4, CPU, &function));
  float data[7] = {0.5f, -1.0f, 2.0f, 0.0f, 1.5f, -0.25f, 3.0f};
  dlop_array *input = NULL;
  DLOP_CK_OK(dlop_array_from_host(CPU, DLOP_FLOAT32, 1, &n, data, &input));
  dlop_memory_stats before = {.struct_size = sizeof before};
  DLOP_CK_OK(dlop_memory_stats_get(CPU, &before));
  for (int round = 0; round < 3; round++) {
    dlop_array *outputs[4] = {NULL, NULL, NULL, NULL};
    DLOP_CK_OK(dlop_function_run(function, &input, 1, outputs, 4, NULL));
    ck_assert_ptr_eq(outputs[0], outputs[1]);
    ck_assert_ptr_eq(outputs[2], input);
    ck_assert_ptr_ne(outputs[3], outputs[0]);
    const float *zs = dlop_tensor_base(dlop_array_tensor(outputs[0]));
    const float *ys = dlop_tensor_base(dlop_array_tensor(outputs[3]));
    for (int i = 0; i < 7; i++) {
      ck_assert_msg(fabsf(ys[i] - 2.0f * data[i]) <= 1e-6f, "y[%d] = %g", i, (double)ys[i]);
      float want = expf(2.0f * data[i]);
      ck_assert_msg(fabsf(zs[i] - want) <= 1e-5f * want, "z[%d] = %g, expected %g", i,
                    (double)zs[i], (double)want);
    }
    for (int i = 0; i < 4; i++) dlop_array_release(outputs[i]);
    dlop_memory_stats after = {.struct_size = sizeof after};
    DLOP_CK_OK(dlop_memory_stats_get(CPU, &after));
    ck_assert_uint_eq(after.bytes_in_use, before.bytes_in_use);
  }
  /* The input is still ours (retained for outputs[2], released once): usable, then freed. */
  ck_assert_float_eq(((const float *)dlop_tensor_base(dlop_array_tensor(input)))[6], 3.0f);
  dlop_array_release(input);
  dlop_function_destroy(function);
}
END_TEST

static int deleter_calls;
static void count_deleter(void *context) {
  (void)context;
  __atomic_add_fetch(&deleter_calls, 1, __ATOMIC_RELAXED);
}

static void *release_all(void *context) {
  dlop_array **arrays = context;
  for (int i = 0; i < 100; i++) dlop_array_release(arrays[i]);
  return NULL;
}

/* Headers wrapped on this thread and released on another (which keeps them in its list) and
 * more than a list keeps: each deleter runs once, and headers taken from a list come back
 * fully initialized (shape, strides, no stale deleter or stream). */
START_TEST(test_headers_across_threads) {
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t shape[1] = {8}, strides[1] = {1};
  dlop_tensor tensor = {data, CPU, 1, dlop_dtype_to_dl(DLOP_FLOAT32), shape, strides, 0};
  dlop_array *arrays[100];
  pthread_t thread;
  deleter_calls = 0;
  for (int i = 0; i < 100; i++) DLOP_CK_OK(dlop_array_wrap(&tensor, count_deleter, NULL, &arrays[i]));
  ck_assert_int_eq(pthread_create(&thread, NULL, release_all, arrays), 0);
  pthread_join(thread, NULL);
  ck_assert_int_eq(deleter_calls, 100);
  /* Recycled headers on this thread: release in this thread, then make pool arrays. */
  for (int i = 0; i < 100; i++) DLOP_CK_OK(dlop_array_wrap(&tensor, count_deleter, NULL, &arrays[i]));
  for (int i = 0; i < 100; i++) dlop_array_release(arrays[i]);
  ck_assert_int_eq(deleter_calls, 200);
  int64_t matrix[2] = {3, 4};
  for (int i = 0; i < 100; i++) {
    DLOP_CK_OK(dlop_array_empty(CPU, DLOP_FLOAT64, 2, matrix, &arrays[i]));
    const dlop_tensor *t = dlop_array_tensor(arrays[i]);
    ck_assert_int_eq(t->ndim, 2);
    ck_assert_int_eq(t->shape[0], 3);
    ck_assert_int_eq(t->strides[0], 4);
    ck_assert_int_eq(t->strides[1], 1);
    ck_assert_int_eq((long long)t->byte_offset, 0);
    ck_assert_ptr_null(dlop_array_stream(arrays[i]));
  }
  for (int i = 0; i < 100; i++) dlop_array_release(arrays[i]);
  ck_assert_int_eq(deleter_calls, 200); /* pool arrays have no deleter, stale or not */
}
END_TEST

int main(void) {
  Suite *suite = suite_create("run_cache");
  TCase *shapes = dlop_test_tcase(suite, "shape cache", 0, graph_setup, graph_teardown);
  dlop_test_add_tests(shapes,
                      test_alternating_shapes,
                      test_shape_error_between_good_runs,
                      test_threads_with_different_shapes,
                      test_outputs_moved_or_retained,
                      NULL);
  TCase *headers = dlop_test_tcase(suite, "array headers", 0, NULL, NULL);
  tcase_add_test(headers, test_headers_across_threads);
  return dlop_test_run_suite(suite);
}
