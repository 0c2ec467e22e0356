/* test_fusion_reduce.c — reductions that take the group computing their input as their kernel's
 * input stage, on the CPU, through the C API: what explain() says of such a group, the
 * intermediate buffer gone, two reductions in a chain, a softmax as one row group (and run unfused
 * without a compiler: the row group undone), a third-party reduction taking a group of
 * the bundled ops, and the errors and fallbacks of reduction bodies that are wrong or missing
 * (tests/fixtures/fusion_reduce_ops.c) or of a missing compiler. The dtype, axes, size and
 * stride cases are tests/python/test_fusion_reduce.py's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_runner.h"
#include "test_support.h"

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};

static dlop_graph *graph;
static void graph_setup(void) { graph = dlop_test_new_graph(); }
static void graph_teardown(void) { dlop_graph_destroy(graph); }

static dlop_function *compile(dlop_var *const *inputs, int32_t num_inputs, dlop_var *output) {
  dlop_function *function = NULL;
  DLOP_CK_OK(dlop_function_compile(graph, inputs, num_inputs, &output, 1, CPU, &function));
  return function;
}

static const char *explain(const dlop_function *function) {
  static char text[16384];
  DLOP_CK_OK(dlop_function_explain(function, text, sizeof text));
  return text;
}

static void explain_has(const dlop_function *function, const char *needle) {
  const char *text = explain(function);
  ck_assert_msg(strstr(text, needle) != NULL, "explain lacks \"%s\":\n%s", needle, text);
}

static dlop_var *input(const char *name, dlop_dtype dtype, int64_t n) {
  dlop_var *x;
  DLOP_CK_OK(dlop_graph_input(graph, name, dtype, 1, &n, &x));
  return x;
}

static dlop_var *apply1(const char *op, dlop_var *x) {
  dlop_var *y;
  DLOP_CK_OK(dlop_graph_apply(graph, op, &x, 1, NULL, 0, &y, 1));
  return y;
}

static dlop_var *apply2(const char *op, dlop_var *a, dlop_var *b) {
  dlop_var *pair[2] = {a, b}, *y;
  DLOP_CK_OK(dlop_graph_apply(graph, op, pair, 2, NULL, 0, &y, 1));
  return y;
}

/* op over every axis, or the last one with keepdims when last is set. */
static dlop_var *reduce(const char *op, dlop_var *x, int last) {
  int64_t axis = -1;
  dlop_named_param params[2] = {
      {"axes", {.kind = DLOP_PARAM_INTS, .count = last ? 1 : 0, .u.ints = &axis}},
      {"keepdims", {.kind = DLOP_PARAM_BOOL, .count = 1, .u.i = last}}};
  dlop_var *y;
  DLOP_CK_OK(dlop_graph_apply(graph, op, &x, 1, params, 2, &y, 1));
  return y;
}

/* A host array of n values low + (high - low) * ((i * 37) % 1000) / 1000. */
static dlop_array *values(dlop_dtype dtype, int64_t n, double low, double high) {
  size_t size = dlop_dtype_size(dtype);
  char *data = malloc(size * (size_t)(n > 0 ? n : 1));
  ck_assert_ptr_nonnull(data);
  for (int64_t i = 0; i < n; i++) {
    double v = low + (high - low) * (double)((i * 37) % 1000) / 1000.0;
    if (dtype == DLOP_FLOAT32) ((float *)data)[i] = (float)v;
    else ((double *)data)[i] = v;
  }
  dlop_array *array = dlop_test_host_array(dtype, 1, &n, data);
  free(data);
  return array;
}

static double run_to_double(dlop_function *function, dlop_array *const *inputs, int32_t count) {
  dlop_array *out = NULL;
  DLOP_CK_OK(dlop_function_run(function, inputs, count, &out, 1, NULL));
  void *host = dlop_test_read_back(out);
  double value = dlop_array_dtype(out) == DLOP_FLOAT32 ? (double)*(float *)host : *(double *)host;
  free(host);
  dlop_array_release(out);
  return value;
}

static void load_fixture(void) {
  const dlop_plugin *plugin = NULL;
  DLOP_CK_OK(dlop_load_plugin(DLOP_TEST_FIXTURE_DIR "/fusion/fusion_reduce_ops.so", &plugin));
}

/* ---- the group and its reduction --------------------------------------------------------- */

/* sum(exp(x) * b): one node, exp and mul in its kernel, the sum its output. */
START_TEST(group_is_the_reduction_input) {
  int64_t unknown = DLOP_DIM_UNKNOWN, n = 100003;
  dlop_var *x = input("x", DLOP_FLOAT32, unknown), *b = input("b", DLOP_FLOAT32, unknown);
  dlop_var *s = reduce("sum", apply2("mul", apply1("exp", x), b), 0), *inputs[2] = {x, b};
  dlop_function *fused = compile(inputs, 2, s);
  ck_assert_int_eq(dlop_function_node_count(fused), 1);
  explain_has(fused, "function on cpu: 1 node (3 of the graph's nodes run in fused kernels)\n");
  explain_has(fused, "#0 fused(x: float32[?], b: float32[?]) -> float32[] on cpu (group 0: 3 nodes "
                     "in one kernel, dlop_fused_g0; sum over every axis of values computed in the "
                     "kernel)\n"
                     "    exp(x: float32[?]) -> exp.0: float32[?] (in the kernel)\n"
                     "    mul(exp.0: float32[?], b: float32[?]) -> mul.1: float32[?] (in the kernel)\n"
                     "    sum(mul.1: float32[?]) -> sum.2: float32[] (output 0)\n");
  explain_has(fused, "\nfusion: 3 nodes in 1 generated kernel (C, compiled by the host's C compiler)");
  dlop_array *in[2] = {values(DLOP_FLOAT32, n, -2, 1), values(DLOP_FLOAT32, n, -1, 1)};
  float *xs = dlop_test_read_back(in[0]), *bs = dlop_test_read_back(in[1]);
  double want = 0, scale = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = (double)((float)expf(xs[i]) * bs[i]);
    want += v;
    scale += fabs(v);
  }
  double got = run_to_double(fused, in, 2);
  ck_assert_msg(fabs(got - want) <= 4e-6 * scale + 2e-6 * fabs(want), "got %.9g, want %.9g", got, want);
  free(xs);
  free(bs);
  dlop_test_release_arrays(2, in[0], in[1]);
  dlop_function_destroy(fused);
}
END_TEST

/* sum of a chain of 8 doubles over 2^21 float32: the run allocates its 4-byte output and no
 * buffer for the chain's values; unfused, at least one buffer of them. */
START_TEST(intermediate_buffer_disappears) {
  enum { N = 1 << 21, CHAIN = 8 };
  dlop_var *x, *chain = dlop_test_double_chain(graph, N, CHAIN, &x);
  dlop_var *s = reduce("sum", chain, 0);
  dlop_function *fused = compile(&x, 1, s);
  dlop_function *unfused = dlop_test_compile_unfused(graph, &x, 1, &s, 1, CPU);
  dlop_array *in = values(DLOP_FLOAT32, N, 0, 1), *out = NULL;
  double buffer = (double)N * sizeof(float);
  dlop_memory_stats before = dlop_test_memory_stats(CPU);
  DLOP_CK_OK(dlop_function_run(fused, &in, 1, &out, 1, NULL));
  dlop_memory_stats after = dlop_test_memory_stats(CPU);
  double extra = (double)(after.peak_bytes_in_use - before.bytes_in_use) / buffer;
  ck_assert_msg(extra < 0.01, "fused: peak use grew by %.3f buffers (expected none)", extra);
  dlop_array_release(out);
  before = dlop_test_memory_stats(CPU);
  DLOP_CK_OK(dlop_function_run(unfused, &in, 1, &out, 1, NULL));
  after = dlop_test_memory_stats(CPU);
  extra = (double)(after.peak_bytes_in_use - before.bytes_in_use) / buffer;
  ck_assert_msg(extra >= 0.99, "unfused: peak use grew by %.3f buffers (expected one at least)", extra);
  dlop_test_release_arrays(2, out, in);
  dlop_function_destroy(fused);
  dlop_function_destroy(unfused);
}
END_TEST

/* m = max(exp(x), last axis, keepdims), then sum(m * 2): the second reduction's input stage
 * reads the first's output. Two reduction groups, no elementwise node left on its own. */
START_TEST(reductions_in_a_chain) {
  int64_t shape[2] = {DLOP_DIM_UNKNOWN, DLOP_DIM_UNKNOWN}, concrete[2] = {300, 77};
  dlop_var *x;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT64, 2, shape, &x));
  dlop_var *m = reduce("max", apply1("exp", x), 1);
  dlop_var *s = reduce("sum", apply1("double", m), 0);
  dlop_function *fused = compile(&x, 1, s);
  dlop_function *unfused = dlop_test_compile_unfused(graph, &x, 1, &s, 1, CPU);
  ck_assert_int_eq(dlop_function_node_count(fused), 2);
  explain_has(fused, "(group 0: 2 nodes in one kernel, dlop_fused_g0; max over the last axis of "
                     "values computed in the kernel)");
  explain_has(fused, "(group 1: 2 nodes in one kernel, dlop_fused_g1; sum over every axis of "
                     "values computed in the kernel)");
  double *data = malloc(sizeof(double) * 300 * 77);
  for (int i = 0; i < 300 * 77; i++) data[i] = sin(i * 0.37) * 3;
  dlop_array *in = dlop_test_host_array(DLOP_FLOAT64, 2, concrete, data);
  double got = run_to_double(fused, &in, 1), want = run_to_double(unfused, &in, 1);
  ck_assert_msg(fabs(got - want) <= 1e-13 * fabs(want), "fused %.17g, unfused %.17g", got, want);
  free(data);
  dlop_array_release(in);
  dlop_function_destroy(fused);
  dlop_function_destroy(unfused);
}
END_TEST

/* Without a compiler the function runs unfused, the reduction reading its input as before. */
START_TEST(without_a_compiler_the_reduction_reads_its_input) {
  setenv("DLOP_CC", "/nonexistent/cc", 1); /* this test's own process: read at first use */
  int64_t n = 1000;
  dlop_var *x = input("x", DLOP_FLOAT64, n), *s = reduce("sum", apply1("exp", x), 0);
  dlop_function *function = compile(&x, 1, s);
  ck_assert_int_eq(dlop_function_node_count(function), 2);
  explain_has(function, "\n#1 sum(exp.0: float64[1000]) -> float64[] on cpu\n");
  explain_has(function, "\nfusion: unavailable, the function runs unfused: ");
  dlop_array *in = values(DLOP_FLOAT64, n, -1, 1);
  double *xs = dlop_test_read_back(in), want = 0;
  for (int64_t i = 0; i < n; i++) want += exp(xs[i]);
  double got = run_to_double(function, &in, 1);
  ck_assert_msg(fabs(got - want) <= 1e-13 * want, "got %.17g, want %.17g", got, want);
  free(xs);
  dlop_array_release(in);
  dlop_function_destroy(function);
}
END_TEST

/* A softmax of a vector is a row group (one row); without a compiler it runs unfused: the
 * pass puts the schedule back and frees the group (the sanitizer tree checks the frees). */
START_TEST(without_a_compiler_a_row_group_runs_unfused) {
  setenv("DLOP_CC", "/nonexistent/cc", 1); /* this test's own process: read at first use */
  int64_t n = 1000;
  dlop_var *x = input("x", DLOP_FLOAT64, n), *m = reduce("max", x, 1);
  dlop_var *e = apply1("exp", apply2("sub", x, m)), *s = reduce("sum", e, 1);
  dlop_var *y = reduce("sum", apply2("div", e, s), 0); /* 1 up to rounding */
  dlop_function *function = compile(&x, 1, y);
  ck_assert_int_eq(dlop_function_node_count(function), 6);
  explain_has(function, "\nfusion: unavailable, the function runs unfused: ");
  dlop_array *in = values(DLOP_FLOAT64, n, -1, 1);
  double got = run_to_double(function, &in, 1);
  ck_assert_msg(fabs(got - 1.0) <= 1e-13, "got %.17g, want 1", got);
  dlop_array_release(in);
  dlop_function_destroy(function);
}
END_TEST

/* The same softmax with the compiler: one row group, then the sum over every axis. */
START_TEST(a_softmax_is_one_row_group) {
  int64_t n = 1000;
  dlop_var *x = input("x", DLOP_FLOAT64, n), *m = reduce("max", x, 1);
  dlop_var *e = apply1("exp", apply2("sub", x, m)), *s = reduce("sum", e, 1);
  dlop_var *y = reduce("sum", apply2("div", e, s), 0);
  dlop_function *function = compile(&x, 1, y);
  ck_assert_int_eq(dlop_function_node_count(function), 2);
  explain_has(function, "\n#0 fused(x: float64[1000]) -> float64[1000] on cpu (row group 0: 5 "
                        "nodes in one kernel, dlop_fused_g0; 2 reductions over the last axis, "
                        "each row of the inputs read once)\n");
  dlop_array *in = values(DLOP_FLOAT64, n, -1, 1);
  double got = run_to_double(function, &in, 1);
  ck_assert_msg(fabs(got - 1.0) <= 1e-13, "got %.17g, want 1", got);
  dlop_array_release(in);
  dlop_function_destroy(function);
}
END_TEST

/* ---- a reduction of another plugin ------------------------------------------------------- */

/* fixture_prod (another plugin, its own body) takes the bundled exp as its input stage. */
START_TEST(third_party_reduction_takes_a_group) {
  load_fixture();
  int64_t n = 2000;
  dlop_var *x = input("x", DLOP_FLOAT64, n), *p = apply1("fixture_prod", apply1("exp", x));
  dlop_function *fused = compile(&x, 1, p);
  dlop_function *unfused = dlop_test_compile_unfused(graph, &x, 1, &p, 1, CPU);
  ck_assert_int_eq(dlop_function_node_count(fused), 1);
  explain_has(fused, "; fixture_prod over every axis of values computed in the kernel)\n"
                     "    exp(x: float64[2000]) -> exp.0: float64[2000] (in the kernel)\n"
                     "    fixture_prod(exp.0: float64[2000]) -> fixture_prod.1: float64[] (output 0)\n");
  dlop_array *in = values(DLOP_FLOAT64, n, -0.01, 0.01);
  double got = run_to_double(fused, &in, 1), want = run_to_double(unfused, &in, 1);
  ck_assert_msg(fabs(got - want) <= 1e-13 * fabs(want), "fused %.17g, unfused %.17g", got, want);
  dlop_array_release(in);
  dlop_function_destroy(fused);
  dlop_function_destroy(unfused);
}
END_TEST

static void expect_plugin_error(const char *op, const char *message) {
  load_fixture();
  int64_t n = 16;
  dlop_var *x = input("x", DLOP_FLOAT64, n), *p = apply1(op, apply1("exp", x));
  dlop_function *function = NULL;
  ck_assert_int_eq(dlop_function_compile(graph, &x, 1, &p, 1, CPU, &function), DLOP_PLUGIN_ERROR);
  ck_assert_ptr_null(function);
  ck_assert_msg(strstr(dlop_last_error(), message), "%s", dlop_last_error());
}

START_TEST(body_without_combine_is_a_plugin_error) {
  expect_plugin_error("fixture_prod_no_combine",
                      "node #1 fixture_prod_no_combine: reduce_body succeeded but gave no combine code");
}
END_TEST

START_TEST(accumulator_the_host_does_not_load_is_a_plugin_error) {
  expect_plugin_error("fixture_prod_bad_accumulator",
                      "fixture_prod_bad_accumulator: reduce_body gave the accumulator dtype 1 (int8) "
                      "for a float64 input");
}
END_TEST

START_TEST(axes_that_disagree_with_make_node_are_a_plugin_error) {
  expect_plugin_error("fixture_prod_bad_axes",
                      "fixture_prod_bad_axes: reduce_body reduces 1 of 1 axes keeping them, which "
                      "gives rank 1, but make_node gave the output rank 0");
}
END_TEST

/* Code that does not compile: the function runs unfused, says why, and is right. */
START_TEST(body_that_does_not_compile_runs_unfused) {
  load_fixture();
  int64_t n = 500;
  dlop_var *x = input("x", DLOP_FLOAT64, n), *p = apply1("fixture_prod_broken_code", apply1("exp", x));
  dlop_test_capture_stderr();
  dlop_function *function = compile(&x, 1, p);
  const char *warnings = dlop_test_captured_stderr();
  ck_assert_msg(strstr(warnings, "fusion: the generated kernels did not compile"), "%s", warnings);
  ck_assert_int_eq(dlop_function_node_count(function), 2);
  explain_has(function, "\n#0 exp(x: float64[500]) -> float64[500] on cpu\n"
                        "#1 fixture_prod_broken_code(exp.0: float64[500]) -> float64[] on cpu\n");
  dlop_array *in = values(DLOP_FLOAT64, n, -0.01, 0.01);
  double *xs = dlop_test_read_back(in), sum = 0;
  for (int64_t i = 0; i < n; i++) sum += xs[i];
  double got = run_to_double(function, &in, 1);
  ck_assert_msg(fabs(got - exp(sum)) <= 1e-12, "got %.17g, want %.17g", got, exp(sum));
  free(xs);
  dlop_array_release(in);
  dlop_function_destroy(function);
}
END_TEST

/* A body the op gives for float32 only: float32 fuses, float64 reads its input and says why. */
START_TEST(body_for_some_dtypes_only) {
  load_fixture();
  int64_t n = 64;
  dlop_var *x32 = input("x32", DLOP_FLOAT32, n), *x64 = input("x64", DLOP_FLOAT64, n);
  dlop_var *p32 = apply1("fixture_prod_float32_only", apply1("exp", x32));
  dlop_var *p64 = apply1("fixture_prod_float32_only", apply1("exp", x64));
  dlop_function *f32 = compile(&x32, 1, p32), *f64 = compile(&x64, 1, p64);
  explain_has(f32, "fixture_prod_float32_only over every axis of values computed in the kernel)");
  explain_has(f64, "#1 fixture_prod_float32_only(exp.2: float64[64]) -> float64[] on cpu (not "
                   "fused: node #1 fixture_prod_float32_only: reduce_body: no reduction body for "
                   "float64)\n");
  dlop_function_destroy(f32);
  dlop_function_destroy(f64);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("fusion_reduce");
  TCase *groups = dlop_test_tcase(suite, "groups", 0, graph_setup, graph_teardown);
  dlop_test_add_tests(groups, group_is_the_reduction_input, intermediate_buffer_disappears,
                      reductions_in_a_chain, a_softmax_is_one_row_group,
                      without_a_compiler_the_reduction_reads_its_input,
                      without_a_compiler_a_row_group_runs_unfused, NULL);
  TCase *plugins = dlop_test_tcase(suite, "plugins", 0, graph_setup, graph_teardown);
  dlop_test_add_tests(plugins, third_party_reduction_takes_a_group,
                      body_without_combine_is_a_plugin_error,
                      accumulator_the_host_does_not_load_is_a_plugin_error,
                      axes_that_disagree_with_make_node_are_a_plugin_error,
                      body_that_does_not_compile_runs_unfused, body_for_some_dtypes_only, NULL);
  return dlop_test_run_suite(suite);
}
