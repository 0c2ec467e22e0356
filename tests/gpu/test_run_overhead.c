/* test_run_overhead.c — how many CUDA driver calls a steady-state run of a compiled function
 * makes (the debug counter of cuda_call_counter.c), with the primary context current as under
 * PyTorch or CuPy, and with no context current as in a plain C program; results still right. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_driver.h"
#include "internal.h"
#include "test_support.h"

static const dlop_device CUDA = {DLOP_DEVICE_CUDA, 0};

enum { N = 230400, WARM = 20, RUNS = 200 };

typedef struct counts {
  double run;     /* per dlop_function_run */
  double release; /* per release of its output */
} counts;

/* f(x) RUNS times after WARM runs, each output released before the next run (a Python loop
 * `r = f(x)` keeps one alive; releasing first is the harder case for the pool: the block comes
 * back at once). The last output is checked against expf(scale * x). */
static counts measure(dlop_function *function, const float *host_x, float scale) {
  int64_t n = N;
  dlop_array *x = NULL, *out = NULL;
  counts result = {0, 0};
  uint64_t run_calls = 0, release_calls = 0;
  DLOP_CK_OK(dlop_array_from_host(CUDA, DLOP_FLOAT32, 1, &n, host_x, &x));
  for (int i = 0; i < WARM + RUNS; i++) {
    uint64_t before = dlop__cuda_driver_calls();
    DLOP_CK_OK(dlop_function_run(function, &x, 1, &out, 1, NULL));
    uint64_t between = dlop__cuda_driver_calls();
    if (i + 1 == WARM + RUNS) break; /* keep the last output to check it */
    dlop_array_release(out);
    uint64_t after = dlop__cuda_driver_calls();
    if (i >= WARM) {
      run_calls += between - before;
      release_calls += after - between;
    }
  }
  result.run = (double)run_calls / (RUNS - 1);
  result.release = (double)release_calls / (RUNS - 1);
  float *got = malloc(sizeof(float) * N);
  DLOP_CK_OK(dlop_array_to_host(out, got, sizeof(float) * N));
  for (int i = 0; i < N; i += 997) {
    float want = expf(scale * host_x[i]);
    ck_assert_msg(fabsf(got[i] - want) <= 1e-5f * fabsf(want) + 1e-6f,
                  "[%d]: expected %g, got %g", i, (double)want, (double)got[i]);
  }
  free(got);
  dlop_array_release(out);
  dlop_array_release(x);
  return result;
}

static float *random_input(void) {
  float *x = malloc(sizeof(float) * N);
  dlop_test_fill_random(x, DLOP_FLOAT32, N, 11, -4, 4);
  return x;
}

/* exp alone (scale 1) or exp(double(x)) (scale 2), input of unknown length; fusion off, so
 * that two ops are two launches (a fused function's one launch is the one-op case's). */
static dlop_function *compile(dlop_graph **graph, int with_double) {
  int64_t unknown = DLOP_DIM_UNKNOWN;
  dlop_var *x, *y, *z;
  dlop_function *function = NULL;
  dlop_test_load_bundled_plugins();
  DLOP_CK_OK(dlop_graph_create(graph));
  DLOP_CK_OK(dlop_graph_input(*graph, "x", DLOP_FLOAT32, 1, &unknown, &x));
  y = x;
  if (with_double) DLOP_CK_OK(dlop_graph_apply(*graph, "double", &x, 1, NULL, 0, &y, 1));
  DLOP_CK_OK(dlop_graph_apply(*graph, "exp", &y, 1, NULL, 0, &z, 1));
  dlop_function_options options = DLOP_FUNCTION_OPTIONS_INIT;
  options.fuse = 0;
  DLOP_CK_OK(dlop_function_compile_with_options(*graph, &x, 1, &z, 1, CUDA, &options, &function));
  return function;
}

static void require_counter(void) {
  ck_assert_msg(dlop__cuda_counting_calls(),
                "the driver-call counter is off (DLOP_COUNT_DRIVER_CALLS=1 must be set before "
                "CUDA loads)");
}

/* With the primary context current: the run asks for the current context once and launches
 * once (the pool and the launch trust the run's context); releasing the output makes no driver
 * call at all: the pool keeps the stream and records its event only if another stream asks
 * for the block (test_lazy_event_for_another_stream). */
START_TEST(test_one_op_with_context_current) {
  dlop_graph *graph = NULL;
  dlop_function *function = compile(&graph, 0);
  require_counter();
  DLOP_CK_OK(dlop__cuda_set_device(0)); /* leaves the primary context current, like PyTorch */
  float *x = random_input();
  counts c = measure(function, x, 1.0f);
  printf("one op, context current: %.2f driver calls per run, %.2f per release\n", c.run,
         c.release);
  ck_assert_msg(c.run <= 2.0, "%.2f driver calls per run (expected at most 2: cuCtxGetCurrent, "
                "cuLaunchKernel)", c.run);
  ck_assert_msg(c.release == 0.0, "%.2f driver calls per output release (expected none: the "
                "event is recorded lazily)", c.release);
  free(x);
  dlop_function_destroy(function);
  dlop_graph_destroy(graph);
}
END_TEST

/* Two ops: one more launch; the intermediate's free inside the run records nothing. */
START_TEST(test_two_ops_with_context_current) {
  dlop_graph *graph = NULL;
  dlop_function *function = compile(&graph, 1);
  require_counter();
  DLOP_CK_OK(dlop__cuda_set_device(0));
  float *x = random_input();
  counts c = measure(function, x, 2.0f);
  printf("two ops, context current: %.2f driver calls per run, %.2f per release\n", c.run,
         c.release);
  ck_assert_msg(c.run <= 3.0, "%.2f driver calls per run (expected at most 3: cuCtxGetCurrent, "
                "2 x cuLaunchKernel)", c.run);
  ck_assert_msg(c.release == 0.0, "%.2f driver calls per output release (expected none)",
                c.release);
  free(x);
  dlop_function_destroy(function);
  dlop_graph_destroy(graph);
}
END_TEST

/* No context current (a plain C program): the run switches to the device's context and back,
 * as dlop promises, and nothing more; the release needs no context at all. */
START_TEST(test_one_op_without_context) {
  dlop_graph *graph = NULL;
  dlop_function *function = compile(&graph, 0);
  require_counter();
  ck_assert_int_eq(dlop__cuda.cuCtxSetCurrent(NULL), DLOP_CUDA_SUCCESS);
  float *x = random_input();
  counts c = measure(function, x, 1.0f);
  printf("one op, no context: %.2f driver calls per run, %.2f per release\n", c.run, c.release);
  ck_assert_msg(c.run <= 5.0, "%.2f driver calls per run (expected at most 5: get, set, launch, "
                "get, set back)", c.run);
  ck_assert_msg(c.release == 0.0, "%.2f driver calls per output release (expected none: no "
                "event, so no context switch)", c.release);
  CUcontext current = (CUcontext)1;
  ck_assert_int_eq(dlop__cuda.cuCtxGetCurrent(&current), DLOP_CUDA_SUCCESS);
  ck_assert_ptr_null(current); /* the caller's (absent) context came back */
  free(x);
  dlop_function_destroy(function);
  dlop_graph_destroy(graph);
}
END_TEST

/* The lazy side: an output released after a run on stream A, then a run on stream B that
 * wants a block of that size. B must not get A's block before A's work is done, so the pool
 * records A's event then (cuEventRecord) and queries it (cuEventQuery): B's run makes at least
 * 2 calls more than a steady-state run. Both results stay right. */
START_TEST(test_lazy_event_for_another_stream) {
  dlop_graph *graph = NULL;
  dlop_function *function = compile(&graph, 0);
  require_counter();
  DLOP_CK_OK(dlop__cuda_set_device(0));
  float *host_x = random_input();
  int64_t n = N;
  dlop_array *x = NULL, *out_a = NULL, *out_b = NULL;
  dlop_stream *a = NULL, *b = NULL;
  DLOP_CK_OK(dlop_array_from_host(CUDA, DLOP_FLOAT32, 1, &n, host_x, &x));
  DLOP_CK_OK(dlop_stream_create(CUDA, &a));
  DLOP_CK_OK(dlop_stream_create(CUDA, &b));
  DLOP_CK_OK(dlop_memory_release_cached(CUDA)); /* only A's block will be cached */
  DLOP_CK_OK(dlop_function_run(function, &x, 1, &out_a, 1, a));
  uint64_t before = dlop__cuda_driver_calls();
  dlop_array_release(out_a);
  uint64_t released = dlop__cuda_driver_calls();
  dlop_stream_destroy(a); /* the pool's reference keeps A's CUstream valid for the event */
  uint64_t destroyed = dlop__cuda_driver_calls();
  DLOP_CK_OK(dlop_function_run(function, &x, 1, &out_b, 1, b));
  uint64_t after = dlop__cuda_driver_calls();
  printf("lazy event: release %llu calls, destroy %llu, run on another stream %llu\n",
         (unsigned long long)(released - before), (unsigned long long)(destroyed - released),
         (unsigned long long)(after - destroyed));
  ck_assert_msg(released - before == 0, "releasing A's output made %llu driver calls (expected 0)",
                (unsigned long long)(released - before));
  ck_assert_msg(destroyed - released == 0,
                "destroying A made %llu driver calls while the pool still holds it (expected 0)",
                (unsigned long long)(destroyed - released));
  ck_assert_msg(after - destroyed >= 4,
                "the run on B made %llu driver calls; expected at least 4 (cuCtxGetCurrent, "
                "cuEventCreate or reuse, cuEventRecord on A, cuEventQuery, launch)",
                (unsigned long long)(after - destroyed));
  float *got = malloc(sizeof(float) * N);
  DLOP_CK_OK(dlop_array_to_host(out_b, got, sizeof(float) * N));
  for (int i = 0; i < N; i += 997) {
    float want = expf(host_x[i]);
    ck_assert_msg(fabsf(got[i] - want) <= 1e-5f * fabsf(want) + 1e-6f,
                  "[%d]: expected %g, got %g", i, (double)want, (double)got[i]);
  }
  free(got);
  dlop_array_release(out_b);
  dlop_array_release(x);
  dlop_stream_destroy(b);
  /* release_cached waits for A's (lazy or recorded) work and drops the last reference to A. */
  DLOP_CK_OK(dlop_memory_release_cached(CUDA));
  free(host_x);
  dlop_function_destroy(function);
  dlop_graph_destroy(graph);
}
END_TEST

int main(void) {
  /* Before CUDA loads anywhere (the probe below runs in a child that inherits it). */
  setenv("DLOP_COUNT_DRIVER_CALLS", "1", 1);
  dlop_test_require_cuda_or_skip();
  Suite *suite = suite_create("run_overhead");
  TCase *tc = dlop_test_tcase(suite, "driver calls per run", 0, NULL, NULL);
  dlop_test_add_tests(tc,
                      test_one_op_with_context_current,
                      test_two_ops_with_context_current,
                      test_one_op_without_context,
                      test_lazy_event_for_another_stream,
                      NULL);
  return dlop_test_run_suite(suite);
}
