/* graph_runner.c — graph, array, pool and thread helpers for the tests (see graph_runner.h).
 * Errors fail the current Check test with dlop_last_error(). */
#include "graph_runner.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

dlop_graph *dlop_test_new_graph(void) {
  dlop_graph *graph = NULL;
  dlop_test_load_bundled_plugins();
  DLOP_CK_OK(dlop_graph_create(&graph));
  return graph;
}

dlop_var *dlop_test_exp_double(dlop_graph *graph, dlop_dtype dtype, int64_t n, dlop_var **x) {
  dlop_var *y, *z;
  DLOP_CK_OK(dlop_graph_input(graph, "x", dtype, 1, &n, x));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", x, 1, NULL, 0, &y, 1));
  DLOP_CK_OK(dlop_graph_apply(graph, "exp", &y, 1, NULL, 0, &z, 1));
  return z;
}

dlop_function *dlop_test_compile_exp_double(dlop_graph *graph, dlop_dtype dtype, int64_t n,
                                            dlop_device device) {
  dlop_var *x;
  dlop_var *z = dlop_test_exp_double(graph, dtype, n, &x);
  return dlop_test_compile(graph, &x, 1, z, device);
}

dlop_var *dlop_test_multiply_them(dlop_graph *graph, dlop_dtype dtype, int32_t a_ndim,
                                  const int64_t *a_shape, int32_t b_ndim, const int64_t *b_shape,
                                  dlop_var **inputs) {
  dlop_var *z;
  DLOP_CK_OK(dlop_graph_input(graph, "a", dtype, a_ndim, a_shape, &inputs[0]));
  DLOP_CK_OK(dlop_graph_input(graph, "b", dtype, b_ndim, b_shape, &inputs[1]));
  DLOP_CK_OK(dlop_graph_apply(graph, "multiply_them", inputs, 2, NULL, 0, &z, 1));
  return z;
}

dlop_var *dlop_test_double_chain(dlop_graph *graph, int64_t n, int count, dlop_var **x) {
  dlop_var *v;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, &n, x));
  v = *x;
  for (int i = 0; i < count; i++)
    DLOP_CK_OK(dlop_graph_apply(graph, "double", &v, 1, NULL, 0, &v, 1));
  return v;
}

dlop_function *dlop_test_compile(dlop_graph *graph, dlop_var *const *inputs, int32_t num_inputs,
                                 dlop_var *output, dlop_device device) {
  dlop_function *function = NULL;
  DLOP_CK_OK(dlop_function_compile(graph, inputs, num_inputs, &output, 1, device, &function));
  return function;
}

dlop_function *dlop_test_compile_unfused(dlop_graph *graph, dlop_var *const *inputs,
                                         int32_t num_inputs, dlop_var *const *outputs,
                                         int32_t num_outputs, dlop_device device) {
  dlop_function_options options = DLOP_FUNCTION_OPTIONS_INIT;
  dlop_function *function = NULL;
  options.fuse = 0;
  DLOP_CK_OK(dlop_function_compile_with_options(graph, inputs, num_inputs, outputs, num_outputs,
                                                device, &options, &function));
  return function;
}

void dlop_test_check_chain_plan(dlop_graph *graph, dlop_device device, int64_t n, int chain,
                                int more_runs, int first_allocations) {
  const uint64_t buffer_bytes = (uint64_t)n * sizeof(float);
  const float factor = ldexpf(1.0f, chain);
  dlop_var *x;
  dlop_var *v = dlop_test_double_chain(graph, n, chain, &x);
  dlop_function *function = dlop_test_compile_unfused(graph, &x, 1, &v, 1, device);
  float *data = malloc((size_t)buffer_bytes);
  ck_assert_ptr_nonnull(data);
  for (int64_t i = 0; i < n; i++) data[i] = (float)(i % 1000) * 0.25f;
  dlop_array *input = NULL, *output = NULL;
  DLOP_CK_OK(dlop_array_from_host(device, DLOP_FLOAT32, 1, &n, data, &input));
  dlop_memory_stats before = dlop_test_memory_stats(device);

  dlop_memory_stats first = before, steady = before;
  for (int run = 0; run < 2; run++) {
    DLOP_CK_OK(dlop_function_run(function, &input, 1, &output, 1, NULL));
    float *result = dlop_test_read_back(output);
    for (int64_t i = 0; i < n; i++)
      if (result[i] != data[i] * factor)
        ck_abort_msg("run %d [%lld] expected %g, got %g", run, (long long)i,
                     (double)(data[i] * factor), (double)result[i]);
    free(result);
    dlop_array_release(output);
    if (run == 0) first = dlop_test_memory_stats(device);
  }
  steady = dlop_test_memory_stats(device);

  for (int run = 0; run < more_runs; run++) {
    DLOP_CK_OK(dlop_function_run(function, &input, 1, &output, 1, NULL));
    dlop_array_release(output);
  }
  DLOP_CK_OK(dlop_array_synchronize(input));
  dlop_memory_stats later = dlop_test_memory_stats(device);
  ck_assert_msg(later.driver_allocations == steady.driver_allocations,
                "the %d runs after the first two made %llu new driver allocations", more_runs,
                (unsigned long long)(later.driver_allocations - steady.driver_allocations));
  uint64_t extra = later.peak_bytes_in_use - before.bytes_in_use;
  ck_assert_msg(extra <= 2 * buffer_bytes + buffer_bytes / 2,
                "peak use grew by %.1f buffers during a chain of %d ops (expected about 2)",
                (double)extra / (double)buffer_bytes, chain);
  if (first_allocations >= 0)
    ck_assert_msg(first.driver_allocations - before.driver_allocations <=
                      (uint64_t)first_allocations,
                  "the first run made %llu driver allocations for a chain of %d",
                  (unsigned long long)(first.driver_allocations - before.driver_allocations),
                  chain);
  dlop_array_release(input);
  free(data);
  dlop_function_destroy(function);
}

int dlop_test_apply_ints(dlop_graph *graph, const char *op, dlop_var *x, const char *name,
                         const int64_t *ints, int32_t count, dlop_var **y) {
  dlop_named_param param = {name, {DLOP_PARAM_INTS, count, {.ints = ints}}};
  return dlop_graph_apply(graph, op, &x, 1, name ? &param : NULL, name ? 1 : 0, y, 1);
}

dlop_array *dlop_test_host_array(dlop_dtype dtype, int32_t ndim, const int64_t *shape,
                                 const void *data) {
  dlop_array *array = NULL;
  DLOP_CK_OK(dlop_array_from_host((dlop_device){DLOP_DEVICE_CPU, 0}, dtype, ndim, shape, data,
                                  &array));
  return array;
}

void dlop_test_release_arrays(int count, ...) {
  va_list arrays;
  va_start(arrays, count);
  for (int i = 0; i < count; i++) dlop_array_release(va_arg(arrays, dlop_array *));
  va_end(arrays);
}

void *dlop_test_read_back(const dlop_array *array) {
  size_t bytes = (size_t)dlop_array_numel(array) * dlop_dtype_size(dlop_array_dtype(array));
  void *data = malloc(bytes + 1);
  ck_assert_ptr_nonnull(data);
  DLOP_CK_OK(dlop_array_to_host(array, data, bytes));
  return data;
}

dlop_memory_stats dlop_test_memory_stats(dlop_device device) {
  dlop_memory_stats stats;
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  DLOP_CK_OK(dlop_memory_stats_get(device, &stats));
  return stats;
}

/* pthread_create's signature around a dlop_test_run_threads body. */
typedef struct thread_start {
  void (*body)(dlop_test_thread *thread);
  dlop_test_thread *thread;
} thread_start;

static void *start_thread(void *context) {
  thread_start *start = context;
  start->body(start->thread);
  return NULL;
}

void dlop_test_run_threads(int count, dlop_function *function, const void *context,
                           void (*body)(dlop_test_thread *thread)) {
  enum { MOST = 8 };
  pthread_t threads[MOST];
  dlop_test_thread jobs[MOST];
  thread_start starts[MOST];
  ck_assert_msg(count >= 1 && count <= MOST, "dlop_test_run_threads: %d threads (1 to %d)",
                count, (int)MOST);
  memset(jobs, 0, sizeof jobs);
  for (int i = 0; i < count; i++) {
    jobs[i].index = i;
    jobs[i].function = function;
    jobs[i].context = context;
    starts[i] = (thread_start){body, &jobs[i]};
    ck_assert_int_eq(pthread_create(&threads[i], NULL, start_thread, &starts[i]), 0);
  }
  for (int i = 0; i < count; i++) pthread_join(threads[i], NULL);
  for (int i = 0; i < count; i++)
    ck_assert_msg(jobs[i].failures == 0, "thread %d: %s", i, jobs[i].message);
}

void dlop_test_exp_double_runs(dlop_test_thread *thread) {
  const dlop_test_repeated_runs *runs = thread->context;
  int64_t n = runs->n;
  float *x = malloc((size_t)n * sizeof(float)), *got = malloc((size_t)n * sizeof(float));
  dlop_array *input = NULL;
  dlop_test_fill_random(x, DLOP_FLOAT32, n, runs->first_seed + (uint64_t)thread->index, -2, 2);
  if (dlop_array_from_host(runs->device, DLOP_FLOAT32, 1, &n, x, &input) != DLOP_OK) {
    snprintf(thread->message, sizeof thread->message, "input: %s", dlop_last_error());
    thread->failures++;
  }
  for (int run = 0; run < runs->runs && thread->failures == 0; run++) {
    dlop_array *output = NULL;
    if (dlop_function_run(thread->function, &input, 1, &output, 1, NULL) != DLOP_OK ||
        dlop_array_to_host(output, got, (size_t)n * sizeof(float)) != DLOP_OK) {
      snprintf(thread->message, sizeof thread->message, "run %d: %s", run, dlop_last_error());
      thread->failures++;
    }
    for (int64_t i = 0; i < n && thread->failures == 0; i++) {
      float want = expf(2.0f * x[i]);
      if (fabsf(got[i] - want) > 1e-5f * fabsf(want) + 1e-6f) {
        snprintf(thread->message, sizeof thread->message, "run %d [%lld]: expected %g, got %g",
                 run, (long long)i, (double)want, (double)got[i]);
        thread->failures++;
      }
    }
    dlop_array_release(output);
  }
  dlop_array_release(input);
  free(x);
  free(got);
}

void dlop_test_exp_double_in_threads(dlop_graph *graph, int threads,
                                     const dlop_test_repeated_runs *runs) {
  dlop_function *function =
      dlop_test_compile_exp_double(graph, DLOP_FLOAT32, DLOP_DIM_UNKNOWN, runs->device);
  dlop_test_run_threads(threads, function, runs, dlop_test_exp_double_runs);
  dlop_function_destroy(function);
}
