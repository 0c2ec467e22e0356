/* test_function_cuda.c — the graphs of test_function.c compiled for cuda:0: results equal to
 * the CPU function's for every dtype, odd and zero sizes, strided inputs, no driver allocation
 * in steady state, explain() says cuda:0, and a CPU input is refused, never moved silently. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "graph_runner.h"
#include "test_support.h"

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};
static const dlop_device CUDA = {DLOP_DEVICE_CUDA, 0};

static const dlop_dtype FLOAT_DTYPES[] = {DLOP_FLOAT16, DLOP_BFLOAT16, DLOP_FLOAT32, DLOP_FLOAT64};
static const dlop_dtype INT_DTYPES[] = {DLOP_INT8, DLOP_INT16, DLOP_INT32, DLOP_INT64, DLOP_UINT8};

/* The running test's graph: every test gets a new one (graph_setup) and leaves it to
 * graph_teardown. The parity tests build graphs of their own. */
static dlop_graph *graph;
static void graph_setup(void) { graph = dlop_test_new_graph(); }
static void graph_teardown(void) { dlop_graph_destroy(graph); }

/* The same graph compiled for both devices. */
typedef struct pair {
  dlop_graph *graph;
  dlop_function *cpu, *cuda;
} pair;

static void compile_both(pair *p, dlop_var *const *inputs, int32_t num_inputs, dlop_var *output) {
  DLOP_CK_OK(dlop_function_compile(p->graph, inputs, num_inputs, &output, 1, CPU, &p->cpu));
  DLOP_CK_OK(dlop_function_compile(p->graph, inputs, num_inputs, &output, 1, CUDA, &p->cuda));
  ck_assert_int_eq(dlop_function_device(p->cuda).type, DLOP_DEVICE_CUDA);
}

static void destroy_pair(pair *p) {
  dlop_function_destroy(p->cpu);
  dlop_function_destroy(p->cuda);
  dlop_graph_destroy(p->graph);
}

/* Run both functions on the same host data; the CUDA result must equal the CPU result. */
static void check_parity(pair *p, int32_t num_inputs, dlop_dtype dtype, int32_t *ndims,
                         int64_t (*shapes)[2], void **data, const char *what) {
  dlop_array *cpu_in[2], *cuda_in[2], *cpu_out = NULL, *cuda_out = NULL;
  char report[512];
  for (int32_t i = 0; i < num_inputs; i++) {
    DLOP_CK_OK(dlop_array_from_host(CPU, dtype, ndims[i], shapes[i], data[i], &cpu_in[i]));
    DLOP_CK_OK(dlop_array_from_host(CUDA, dtype, ndims[i], shapes[i], data[i], &cuda_in[i]));
  }
  DLOP_CK_OK(dlop_function_run(p->cpu, cpu_in, num_inputs, &cpu_out, 1, NULL));
  DLOP_CK_OK(dlop_function_run(p->cuda, cuda_in, num_inputs, &cuda_out, 1, NULL));
  ck_assert_int_eq(dlop_array_device(cuda_out).type, DLOP_DEVICE_CUDA);
  ck_assert_int_eq(dlop_array_numel(cpu_out), dlop_array_numel(cuda_out));
  int64_t n = dlop_array_numel(cpu_out);
  void *expected = dlop_test_read_back(cpu_out), *actual = dlop_test_read_back(cuda_out);
  double tolerance = dlop_test_tolerance(dtype);
  int64_t bad =
      dlop_test_compare(expected, actual, dtype, n, tolerance, tolerance, report, sizeof report);
  ck_assert_msg(bad == 0, "%s %s: %lld of %lld elements differ between cpu and cuda:0: %s", what,
                dlop_dtype_name(dtype), (long long)bad, (long long)n, report);
  free(expected);
  free(actual);
  dlop_array_release(cpu_out);
  dlop_array_release(cuda_out);
  for (int32_t i = 0; i < num_inputs; i++) {
    dlop_array_release(cpu_in[i]);
    dlop_array_release(cuda_in[i]);
  }
}

START_TEST(test_exp_double_parity_every_float_dtype) {
  static const int64_t sizes[] = {0, 1, 100, 1000003};
  for (size_t k = 0; k < 4; k++) {
    dlop_dtype dtype = FLOAT_DTYPES[k];
    pair p = {dlop_test_new_graph(), NULL, NULL};
    dlop_var *x;
    dlop_var *z = dlop_test_exp_double(p.graph, dtype, DLOP_DIM_UNKNOWN, &x);
    compile_both(&p, &x, 1, z);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      int64_t shape[1][2] = {{sizes[s], 0}};
      int32_t ndim = 1;
      void *data = malloc((size_t)sizes[s] * 8 + 8);
      dlop_test_fill_random(data, dtype, sizes[s], 3 + s, -2, 2);
      check_parity(&p, 1, dtype, &ndim, shape, &data, "exp(double(x))");
      free(data);
    }
    destroy_pair(&p);
  }
}
END_TEST

static void multiply_parity(dlop_dtype dtype, const int64_t *a_shape, const int64_t *b_shape) {
  pair p = {dlop_test_new_graph(), NULL, NULL};
  dlop_var *ab[2];
  int64_t shapes[2][2] = {{a_shape[0], a_shape[1]}, {b_shape[0], b_shape[1]}};
  int32_t ndims[2] = {2, 2};
  dlop_var *z = dlop_test_multiply_them(p.graph, dtype, 2, a_shape, 2, b_shape, ab);
  compile_both(&p, ab, 2, z);
  void *data[2];
  for (int i = 0; i < 2; i++) {
    data[i] = malloc((size_t)(shapes[i][0] * shapes[i][1]) * 8 + 8);
    dlop_test_fill_random(data[i], dtype, shapes[i][0] * shapes[i][1], 20 + i,
                          dlop_dtype_is_float(dtype) ? -3 : 0, dlop_dtype_is_float(dtype) ? 3 : 10);
  }
  check_parity(&p, 2, dtype, ndims, shapes, data, "multiply_them");
  free(data[0]);
  free(data[1]);
  destroy_pair(&p);
}

START_TEST(test_multiply_them_parity_every_dtype) {
  int64_t a[2] = {300, 1}, b[2] = {1, 401}, same[2] = {37, 1001};
  for (size_t k = 0; k < 4; k++) {
    multiply_parity(FLOAT_DTYPES[k], a, b);
    multiply_parity(FLOAT_DTYPES[k], same, same);
  }
  for (size_t k = 0; k < 5; k++) multiply_parity(INT_DTYPES[k], a, b);
}
END_TEST

/* Theano fell back to the CPU for float64; here float64 runs on the GPU. */
START_TEST(test_float64_runs_on_gpu) {
  dlop_var *x, *y;
  int64_t shape[2] = {4, 5};
  double ones[20], got[20];
  for (int i = 0; i < 20; i++) ones[i] = 1.0;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT64, 2, shape, &x));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &x, 1, NULL, 0, &y, 1));
  dlop_function *function = dlop_test_compile(graph, &x, 1, y, CUDA);
  dlop_array *input = NULL, *output = NULL;
  DLOP_CK_OK(dlop_array_from_host(CUDA, DLOP_FLOAT64, 2, shape, ones, &input));
  DLOP_CK_OK(dlop_function_run(function, &input, 1, &output, 1, NULL));
  ck_assert_int_eq(dlop_array_device(output).type, DLOP_DEVICE_CUDA);
  DLOP_CK_OK(dlop_array_to_host(output, got, sizeof got));
  for (int i = 0; i < 20; i++) ck_assert_msg(got[i] == 2.0, "[%d] = %g, expected 2", i, got[i]);
  dlop_test_release_arrays(2, output, input);
  dlop_function_destroy(function);
}
END_TEST

/* A chain of 10 doubles on 64 MiB buffers: five runs after the first make no cuMemAlloc, and
 * about 3 buffers stay alive (input + 2), not 11. */
START_TEST(test_steady_state_no_driver_allocation) {
  dlop_test_check_chain_plan(graph, CUDA, (int64_t)1 << 24, 10, 5, -1);
}
END_TEST

/* Node by node (fusion off) and fused, every line says cuda:0. */
START_TEST(test_explain_says_cuda) {
  dlop_var *x;
  dlop_var *z = dlop_test_exp_double(graph, DLOP_FLOAT32, 5, &x);
  dlop_function *function = dlop_test_compile_unfused(graph, &x, 1, &z, 1, CUDA);
  char text[2048];
  DLOP_CK_OK(dlop_function_explain(function, text, sizeof text));
  ck_assert_msg(strstr(text, "#0 double(x: float32[5]) -> float32[5] on cuda:0") != NULL, "%s",
                text);
  ck_assert_msg(strstr(text, "#1 exp(double.0: float32[5]) -> float32[5] on cuda:0") != NULL, "%s",
                text);
  ck_assert_msg(strstr(text, "on cpu") == NULL, "%s", text);
  dlop_function_destroy(function);
  function = dlop_test_compile(graph, &x, 1, z, CUDA);
  DLOP_CK_OK(dlop_function_explain(function, text, sizeof text));
  ck_assert_msg(strstr(text, "#0 fused(x: float32[5]) -> float32[5] on cuda:0 (group 0: 2 nodes") != NULL,
                "%s", text);
  ck_assert_msg(strstr(text, "(CUDA, compiled by NVRTC)") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "on cpu") == NULL, "%s", text);
  dlop_function_destroy(function);
}
END_TEST

START_TEST(test_cpu_input_to_cuda_function_is_refused) {
  dlop_var *x;
  dlop_var *y = dlop_test_double_chain(graph, 4, 1, &x);
  dlop_function *function = dlop_test_compile(graph, &x, 1, y, CUDA);
  int64_t four = 4;
  float data[4] = {1, 2, 3, 4};
  dlop_array *input = NULL, *output = NULL;
  DLOP_CK_OK(dlop_array_from_host(CPU, DLOP_FLOAT32, 1, &four, data, &input));
  ck_assert_int_eq(dlop_function_run(function, &input, 1, &output, 1, NULL), DLOP_DEVICE_MISMATCH);
  ck_assert_ptr_null(output);
  ck_assert_msg(
      strstr(dlop_last_error(), "input 0 ('x') is on cpu but the function runs on cuda:0") != NULL,
      "%s", dlop_last_error());
  ck_assert_msg(strstr(dlop_last_error(), "dlop_array_copy_to") != NULL, "%s", dlop_last_error());
  dlop_array_release(input);
  dlop_function_destroy(function);
}
END_TEST

START_TEST(test_strided_inputs_on_cuda) {
  dlop_var *t, *dt;
  int64_t unknown2[2] = {DLOP_DIM_UNKNOWN, DLOP_DIM_UNKNOWN};
  int64_t base_shape[2] = {33, 65}, t_shape[2] = {65, 33}, t_strides[2] = {1, 65};
  int64_t r_shape[2] = {33, 65}, r_strides[2] = {-65, -1};
  float m[33 * 65], got[33 * 65];
  for (int i = 0; i < 33 * 65; i++) m[i] = (float)i * 0.125f - 100.0f;
  DLOP_CK_OK(dlop_graph_input(graph, "t", DLOP_FLOAT32, 2, unknown2, &t));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &t, 1, NULL, 0, &dt, 1));
  dlop_function *function = dlop_test_compile(graph, &t, 1, dt, CUDA);
  dlop_array *base = NULL, *view = NULL, *out = NULL;
  DLOP_CK_OK(dlop_array_from_host(CUDA, DLOP_FLOAT32, 2, base_shape, m, &base));
  DLOP_CK_OK(dlop_array_view(base, 2, t_shape, t_strides, 0, &view));
  DLOP_CK_OK(dlop_function_run(function, &view, 1, &out, 1, NULL));
  DLOP_CK_OK(dlop_array_to_host(out, got, sizeof got));
  for (int i = 0; i < 65; i++)
    for (int j = 0; j < 33; j++)
      ck_assert_msg(got[i * 33 + j] == 2.0f * m[j * 65 + i], "transposed [%d,%d]", i, j);
  dlop_test_release_arrays(2, out, view);
  DLOP_CK_OK(dlop_array_view(base, 2, r_shape, r_strides, (33 * 65 - 1) * sizeof(float), &view));
  DLOP_CK_OK(dlop_function_run(function, &view, 1, &out, 1, NULL));
  DLOP_CK_OK(dlop_array_to_host(out, got, sizeof got));
  for (int i = 0; i < 33 * 65; i++)
    ck_assert_msg(got[i] == 2.0f * m[33 * 65 - 1 - i], "reversed [%d]", i);
  dlop_test_release_arrays(3, out, view, base);
  dlop_function_destroy(function);
}
END_TEST

START_TEST(test_constant_copied_to_gpu) {
  int64_t four = 4;
  float c_data[4] = {1.0f, -2.0f, 0.5f, 4.0f}, x_data[4] = {3.0f, 3.0f, -8.0f, 0.25f}, got[4];
  dlop_array *c_array = NULL, *input = NULL, *output = NULL;
  dlop_var *xc[2], *p;
  DLOP_CK_OK(dlop_array_from_host(CPU, DLOP_FLOAT32, 1, &four, c_data, &c_array));
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, &four, &xc[0]));
  DLOP_CK_OK(dlop_graph_constant(graph, "c", c_array, &xc[1]));
  DLOP_CK_OK(dlop_graph_apply(graph, "multiply_them", xc, 2, NULL, 0, &p, 1));
  dlop_function *function = dlop_test_compile(graph, xc, 1, p, CUDA);
  DLOP_CK_OK(dlop_array_from_host(CUDA, DLOP_FLOAT32, 1, &four, x_data, &input));
  DLOP_CK_OK(dlop_function_run(function, &input, 1, &output, 1, NULL));
  DLOP_CK_OK(dlop_array_to_host(output, got, sizeof got));
  for (int i = 0; i < 4; i++)
    ck_assert_msg(got[i] == x_data[i] * c_data[i], "[%d] = %g", i, (double)got[i]);
  dlop_test_release_arrays(3, output, input, c_array);
  dlop_function_destroy(function);
}
END_TEST

/* An op that declares no CUDA kernel is refused when compiling for CUDA, never run on the CPU. */
START_TEST(test_op_without_cuda_kernel_is_unsupported) {
  const dlop_plugin *plugin = NULL;
  dlop_var *x, *y;
  dlop_function *function = NULL;
  DLOP_CK_OK(dlop_load_plugin(DLOP_TEST_FIXTURE_DIR "/good.so", &plugin));
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, NULL, &x));
  DLOP_CK_OK(dlop_graph_apply(graph, "fixture_scale", &x, 1, NULL, 0, &y, 1));
  ck_assert_int_eq(dlop_function_compile(graph, &x, 1, &y, 1, CUDA, &function), DLOP_UNSUPPORTED);
  ck_assert_ptr_null(function);
  ck_assert_msg(strstr(dlop_last_error(), "'fixture_scale' has no kernel for cuda:0") != NULL,
                "%s", dlop_last_error());
}
END_TEST

/* An input read by a run on the function's stream S1 and released right after must not be
 * handed to another function's stream S2 while S1 still reads it: x came from the host, so its
 * last write is on no stream, and only the read recorded at the run keeps the pool waiting.
 * f multiplies by x twenty times (late nodes read x milliseconds after the release); g writes
 * 3 * 2 into a fresh buffer of x's size on S2, which a too-early reuse would put into x. */
START_TEST(test_released_input_not_reused_while_read) {
  enum { CHAIN = 20 };
  const int64_t n = (int64_t)1 << 26;
  dlop_var *x, *v, *w, *g_out;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, &n, &x));
  DLOP_CK_OK(dlop_graph_input(graph, "w", DLOP_FLOAT32, 1, &n, &w));
  v = x;
  for (int i = 0; i < CHAIN; i++) {
    dlop_var *pair_in[2] = {v, x};
    DLOP_CK_OK(dlop_graph_apply(graph, "multiply_them", pair_in, 2, NULL, 0, &v, 1));
  }
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &w, 1, NULL, 0, &g_out, 1));
  dlop_function *f = dlop_test_compile(graph, &x, 1, v, CUDA);
  dlop_function *g = dlop_test_compile(graph, &w, 1, g_out, CUDA);
  float *data = malloc((size_t)n * sizeof(float)), *threes = malloc((size_t)n * sizeof(float));
  ck_assert_ptr_nonnull(data);
  ck_assert_ptr_nonnull(threes);
  /* +-1: x^(CHAIN + 1) = x exactly, and any 6 that leaks in shows */
  for (int64_t i = 0; i < n; i++) data[i] = (i % 3 == 0) ? -1.0f : 1.0f;
  for (int64_t i = 0; i < n; i++) threes[i] = 3.0f;
  dlop_array *input_w = NULL;
  DLOP_CK_OK(dlop_array_from_host(CUDA, DLOP_FLOAT32, 1, &n, threes, &input_w));
  for (int round = 0; round < 3; round++) {
    dlop_array *input_x = NULL, *y = NULL, *z = NULL;
    DLOP_CK_OK(dlop_array_from_host(CUDA, DLOP_FLOAT32, 1, &n, data, &input_x));
    DLOP_CK_OK(dlop_function_run(f, &input_x, 1, &y, 1, NULL));
    dlop_array_release(input_x); /* f's kernels still read it on f's stream */
    DLOP_CK_OK(dlop_function_run(g, &input_w, 1, &z, 1, NULL));
    float *result = dlop_test_read_back(y), *doubled = dlop_test_read_back(z);
    for (int64_t i = 0; i < n; i++) {
      if (result[i] != data[i])
        ck_abort_msg("round %d: y[%lld] = %g, expected %g (x's memory was reused by g's stream "
                     "while f still read it)",
                     round, (long long)i, (double)result[i], (double)data[i]);
      if (doubled[i] != 6.0f)
        ck_abort_msg("round %d: z[%lld] = %g, expected 6", round, (long long)i,
                     (double)doubled[i]);
    }
    free(result);
    free(doubled);
    dlop_test_release_arrays(2, y, z);
  }
  dlop_array_release(input_w);
  free(data);
  free(threes);
  dlop_function_destroy(f);
  dlop_function_destroy(g);
}
END_TEST

/* A function destroyed right after a run on a caller's stream must wait for that run (its
 * thunks and constants go away): the result, read after the destroy, is complete. */
START_TEST(test_destroy_waits_for_caller_stream) {
  enum { CHAIN = 20 };
  const int64_t n = (int64_t)1 << 24;
  dlop_var *x;
  dlop_var *v = dlop_test_double_chain(graph, n, CHAIN, &x);
  dlop_function *f = dlop_test_compile(graph, &x, 1, v, CUDA);
  dlop_stream *stream = NULL;
  DLOP_CK_OK(dlop_stream_create(CUDA, &stream));
  float *data = malloc((size_t)n * sizeof(float));
  ck_assert_ptr_nonnull(data);
  for (int64_t i = 0; i < n; i++) data[i] = (float)(i % 7);
  dlop_array *input = NULL, *y = NULL;
  DLOP_CK_OK(dlop_array_from_host(CUDA, DLOP_FLOAT32, 1, &n, data, &input));
  DLOP_CK_OK(dlop_function_run(f, &input, 1, &y, 1, stream));
  dlop_function_destroy(f); /* must wait for the run on `stream` */
  float *result = dlop_test_read_back(y);
  for (int64_t i = 0; i < n; i++)
    if (result[i] != data[i] * 1048576.0f)
      ck_abort_msg("[%lld] = %g, expected %g", (long long)i, (double)result[i],
                   (double)(data[i] * 1048576.0f));
  free(result);
  free(data);
  dlop_test_release_arrays(2, y, input);
  dlop_stream_destroy(stream);
}
END_TEST

START_TEST(test_four_threads_one_cuda_function) {
  static const dlop_test_repeated_runs runs = {CUDA, 100003, 20, 200};
  dlop_test_exp_double_in_threads(graph, 4, &runs);
}
END_TEST

int main(void) {
  /* probes in a child: this process never touches CUDA */
  dlop_test_require_cuda_or_skip();
  Suite *suite = suite_create("function_cuda");
  TCase *parity = dlop_test_tcase(suite, "parity", 300, graph_setup, graph_teardown);
  dlop_test_add_tests(parity,
                      test_exp_double_parity_every_float_dtype,
                      test_multiply_them_parity_every_dtype,
                      test_float64_runs_on_gpu,
                      test_strided_inputs_on_cuda,
                      test_constant_copied_to_gpu,
                      test_four_threads_one_cuda_function,
                      NULL);
  TCase *runtime = dlop_test_tcase(suite, "runtime", 300, graph_setup, graph_teardown);
  dlop_test_add_tests(runtime,
                      test_steady_state_no_driver_allocation,
                      test_explain_says_cuda,
                      test_op_without_cuda_kernel_is_unsupported,
                      test_cpu_input_to_cuda_function_is_refused,
                      test_released_input_not_reused_while_read,
                      test_destroy_waits_for_caller_stream,
                      NULL);
  return dlop_test_run_suite(suite);
}
