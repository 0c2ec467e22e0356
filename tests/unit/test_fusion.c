/* test_fusion.c — elementwise fusion in compiled functions on the CPU: which nodes group (chains,
 * trees, constants written into the code, a node that cannot fuse splitting groups, the operand
 * limit), what explain() says about each group and about fusion being off or unavailable, which
 * buffers disappear, a member's value also needed outside its group, outputs whose shapes differ
 * at run time, views and broadcasting feeding a group, a third-party op fusing with the bundled
 * ones, and the errors of bodies that are wrong. Results are checked against the same graph
 * compiled with fusion off (bit for bit where the maths is exact) and against C references.
 * test_fusion_parity.c covers every fusable op and dtype. */
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

static dlop_function *compile(dlop_var *const *inputs, int32_t num_inputs,
                              dlop_var *const *outputs, int32_t num_outputs) {
  dlop_function *function = NULL;
  DLOP_CK_OK(dlop_function_compile(graph, inputs, num_inputs, outputs, num_outputs, CPU, &function));
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

static void explain_lacks(const dlop_function *function, const char *needle) {
  const char *text = explain(function);
  ck_assert_msg(strstr(text, needle) == NULL, "explain has \"%s\":\n%s", needle, text);
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

static dlop_var *input(const char *name, dlop_dtype dtype, int32_t ndim, const int64_t *shape) {
  dlop_var *x;
  DLOP_CK_OK(dlop_graph_input(graph, name, dtype, ndim, shape, &x));
  return x;
}

/* A 0-d constant of dtype holding value (converted as dlop_test_set does). */
static dlop_var *scalar_constant(const char *name, dlop_dtype dtype, double value) {
  uint64_t bits = 0;
  dlop_var *c;
  dlop_test_set(&bits, dtype, 0, value);
  dlop_array *array = dlop_test_host_array(dtype, 0, NULL, &bits);
  DLOP_CK_OK(dlop_graph_constant(graph, name, array, &c));
  dlop_array_release(array);
  return c;
}

/* Runs both functions on inputs and compares every output: bit for bit when rtol is 0 (NaN
 * equal to NaN), else within rtol relative. */
static void check_same(dlop_function *fused, dlop_function *unfused, dlop_array *const *inputs,
                       int32_t num_inputs, int32_t num_outputs, double rtol) {
  dlop_array *got[8] = {NULL}, *want[8] = {NULL};
  char report[1024];
  DLOP_CK_OK(dlop_function_run(fused, inputs, num_inputs, got, num_outputs, NULL));
  DLOP_CK_OK(dlop_function_run(unfused, inputs, num_inputs, want, num_outputs, NULL));
  for (int32_t o = 0; o < num_outputs; o++) {
    dlop_dtype dtype = dlop_array_dtype(want[o]);
    int64_t n = dlop_array_numel(want[o]);
    ck_assert_int_eq(dlop_array_dtype(got[o]), dtype);
    ck_assert_int_eq(dlop_array_tensor(got[o])->ndim, dlop_array_tensor(want[o])->ndim);
    for (int32_t d = 0; d < dlop_array_tensor(want[o])->ndim; d++)
      ck_assert_int_eq(dlop_array_tensor(got[o])->shape[d], dlop_array_tensor(want[o])->shape[d]);
    void *a = dlop_test_read_back(got[o]), *e = dlop_test_read_back(want[o]);
    int64_t bad = rtol == 0 ? dlop_test_compare_bits(e, a, dtype, n, report, sizeof report)
                            : dlop_test_compare(e, a, dtype, n, 0, rtol, report, sizeof report);
    free(a);
    free(e);
    ck_assert_msg(bad == 0, "output %d: %lld of %lld %s elements differ from the unfused run: %s",
                  (int)o, (long long)bad, (long long)n, dlop_dtype_name(dtype), report);
    dlop_array_release(got[o]);
    dlop_array_release(want[o]);
  }
}

static dlop_array *random_array(dlop_dtype dtype, int32_t ndim, const int64_t *shape,
                                uint64_t seed, double low, double high) {
  int64_t n = 1;
  for (int32_t d = 0; d < ndim; d++) n *= shape[d];
  void *data = malloc((size_t)n * dlop_dtype_size(dtype) + 1);
  ck_assert_ptr_nonnull(data);
  dlop_test_fill_random(data, dtype, n, seed, low, high);
  dlop_array *array = dlop_test_host_array(dtype, ndim, shape, data);
  free(data);
  return array;
}

/* ---- decisions and explain ------------------------------------------------------------------ */

/* exp(double(x)): one node, the intermediate in the kernel; any size, 0 and odd included. */
START_TEST(chain_is_one_kernel) {
  dlop_var *x, *z = dlop_test_exp_double(graph, DLOP_FLOAT32, DLOP_DIM_UNKNOWN, &x);
  dlop_function *fused = compile(&x, 1, &z, 1);
  dlop_function *unfused = dlop_test_compile_unfused(graph, &x, 1, &z, 1, CPU);
  ck_assert_int_eq(dlop_function_node_count(fused), 1);
  ck_assert_int_eq(dlop_function_node_count(unfused), 2);
  explain_has(fused, "function on cpu: 1 node (2 of the graph's nodes run in fused kernels)\n");
  explain_has(fused, "\n#0 fused(x: float32[?]) -> float32[?] on cpu (group 0: 2 nodes in one "
                     "kernel, dlop_fused_g0)\n");
  explain_has(fused, "\n    double(x: float32[?]) -> double.0: float32[?] (in the kernel)\n");
  explain_has(fused, "\n    exp(double.0: float32[?]) -> exp.1: float32[?] (output 0)\n");
  explain_has(fused, "\nfusion: 2 nodes in 1 generated kernel (C, compiled by the host's C "
                     "compiler), source ");
  static const int64_t sizes[] = {0, 1, 7, 1000, 100003};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    dlop_array *in = random_array(DLOP_FLOAT32, 1, &sizes[k], 3 + k, -3, 3);
    /* exp's polynomial, one code, but the plugin's AVX2/AVX-512 copies may contract multiply-adds
   * into FMAs (gcc's default) where the fused kernel does not (-ffp-contract=off): a few ulp */
  check_same(fused, unfused, &in, 1, 1, 2e-6);
    dlop_array_release(in);
  }
  dlop_function_destroy(fused);
  dlop_function_destroy(unfused);
}
END_TEST

/* The seed chain y = exp(2x) * b + tanh(x) - 1: a tree of 6 nodes, its constants in the code. */
START_TEST(tree_with_constants_is_one_kernel) {
  int64_t unknown = DLOP_DIM_UNKNOWN;
  dlop_var *x = input("x", DLOP_FLOAT64, 1, &unknown), *b = input("b", DLOP_FLOAT64, 1, &unknown);
  dlop_var *two = scalar_constant("two", DLOP_FLOAT64, 2), *one = scalar_constant("one", DLOP_FLOAT64, 1);
  dlop_var *y = apply2("sub", apply2("add", apply2("mul", apply1("exp", apply2("mul", two, x)), b),
                                     apply1("tanh", x)),
                       one);
  dlop_var *inputs[2] = {x, b};
  dlop_function *fused = compile(inputs, 2, &y, 1);
  dlop_function *unfused = dlop_test_compile_unfused(graph, inputs, 2, &y, 1, CPU);
  ck_assert_int_eq(dlop_function_node_count(fused), 1);
  explain_has(fused, "(group 0: 6 nodes in one kernel, dlop_fused_g0)");
  explain_has(fused, "    mul(two: float64[] (in the code), x: float64[?])");
  explain_has(fused, "    sub(add.4: float64[?], one: float64[] (in the code)) -> sub.5: float64[?] (output 0)");
  int64_t n = 4099;
  dlop_array *in[2] = {random_array(DLOP_FLOAT64, 1, &n, 5, -4, 4),
                       random_array(DLOP_FLOAT64, 1, &n, 6, -1, 1)};
  check_same(fused, unfused, in, 2, 1, 1e-13); /* tanh: libmvec's per ISA, a few ulp (cancellation near 0) */
  /* and against C */
  dlop_array *out = NULL;
  DLOP_CK_OK(dlop_function_run(fused, in, 2, &out, 1, NULL));
  double *xs = dlop_test_read_back(in[0]), *bs = dlop_test_read_back(in[1]), *ys = dlop_test_read_back(out);
  for (int64_t i = 0; i < n; i++) {
    double want = exp(2 * xs[i]) * bs[i] + tanh(xs[i]) - 1;
    ck_assert_msg(fabs(ys[i] - want) <= 1e-13 * (1 + fabs(want)), "[%lld] %.17g, want %.17g",
                  (long long)i, ys[i], want);
  }
  free(xs);
  free(bs);
  free(ys);
  dlop_test_release_arrays(3, out, in[0], in[1]);
  dlop_function_destroy(fused);
  dlop_function_destroy(unfused);
}
END_TEST

/* a = double(x) is read by sum (not elementwise) as well as by exp: the group {double, exp}
 * writes both a and exp(a), a read outside it and b a function output, and a also comes back. */
START_TEST(member_read_outside_is_an_output) {
  int64_t unknown = DLOP_DIM_UNKNOWN;
  dlop_var *x = input("x", DLOP_FLOAT32, 1, &unknown);
  dlop_var *a = apply1("double", x), *b = apply1("exp", a), *s = apply1("sum", a);
  dlop_var *outputs[3] = {b, s, a};
  dlop_function *fused = compile(&x, 1, outputs, 3);
  dlop_function *unfused = dlop_test_compile_unfused(graph, &x, 1, outputs, 3, CPU);
  ck_assert_int_eq(dlop_function_node_count(fused), 2);
  explain_has(fused, "#0 fused(x: float32[?]) -> (float32[?], float32[?]) on cpu (group 0: 2 nodes");
  explain_has(fused, "    double(x: float32[?]) -> double.0: float32[?] (output 0)\n");
  explain_has(fused, "    exp(double.0: float32[?]) -> exp.1: float32[?] (output 1)\n");
  explain_has(fused, "\n#1 sum(double.0: float32[?]) -> float32[] on cpu");
  int64_t n = 777;
  dlop_array *in = random_array(DLOP_FLOAT32, 1, &n, 9, -2, 2);
  check_same(fused, unfused, &in, 1, 3, 2e-6); /* exp: FMA contraction, as above */
  dlop_array_release(in);
  dlop_function_destroy(fused);
  dlop_function_destroy(unfused);
}
END_TEST

/* sum over a leading axis between elementwise nodes: y = exp(double(x)), s = sum(y, axis 0,
 * keepdims), z = neg(y * s). A fused reduction covers every axis or the last ones, so sum reads
 * y from memory (explain says why), and multiply_them reads y and s: joining y's group would
 * make the group wait for sum, which waits for the group: it starts a group of its own with neg.
 * (test_fusion_reduce.c has sum over the last axis, which takes y's group as its input.) */
START_TEST(node_that_cannot_fuse_splits_groups) {
  int64_t unknown[2] = {DLOP_DIM_UNKNOWN, DLOP_DIM_UNKNOWN};
  dlop_var *x = input("x", DLOP_FLOAT64, 2, unknown);
  dlop_var *y = apply1("exp", apply1("double", x)), *s;
  int64_t axis = 0;
  dlop_named_param params[2] = {{"axes", {.kind = DLOP_PARAM_INTS, .count = 1, .u.ints = &axis}},
                                {"keepdims", {.kind = DLOP_PARAM_BOOL, .count = 1, .u.i = 1}}};
  DLOP_CK_OK(dlop_graph_apply(graph, "sum", &y, 1, params, 2, &s, 1));
  dlop_var *z = apply1("neg", apply2("multiply_them", y, s));
  dlop_function *fused = compile(&x, 1, &z, 1);
  dlop_function *unfused = dlop_test_compile_unfused(graph, &x, 1, &z, 1, CPU);
  ck_assert_int_eq(dlop_function_node_count(fused), 3);
  explain_has(fused, "#0 fused(x: float64[?,?]) -> float64[?,?] on cpu (group 0: 2 nodes");
  explain_has(fused, "    exp(double.0: float64[?,?]) -> exp.1: float64[?,?] (output 0)");
  explain_has(fused, "\n#1 sum(exp.1: float64[?,?]) -> float64[1,?] on cpu (not fused: it reduces "
                     "axes (0) of a rank-2 input, and a fused reduction covers every axis or the "
                     "last ones: it reads its input exp.1 from memory)\n");
  explain_has(fused, "\n#2 fused(exp.1: float64[?,?], sum.2: float64[1,?]) -> float64[?,?] on cpu (group 1: 2 nodes");
  explain_has(fused, "    multiply_them(exp.1: float64[?,?], sum.2: float64[1,?]) -> multiply_them.3: float64[?,?] (in the kernel)");
  explain_has(fused, "fusion: 4 nodes in 2 generated kernels");
  int64_t shape[2] = {50, 100};
  dlop_array *in = random_array(DLOP_FLOAT64, 2, shape, 11, -1, 1);
  check_same(fused, unfused, &in, 1, 1, 1e-13); /* exp: FMA contraction, as above */
  dlop_array_release(in);
  dlop_function_destroy(fused);
  dlop_function_destroy(unfused);
}
END_TEST

/* A sum of 20 inputs: a group takes at most 16 tensors, so the chain splits into groups that
 * each stay within the limit; the result is the same. */
START_TEST(operand_limit_splits_a_long_tree) {
  enum { COUNT = 20 };
  int64_t n = 257;
  dlop_var *xs[COUNT], *total;
  dlop_array *in[COUNT];
  char name[16];
  for (int i = 0; i < COUNT; i++) {
    snprintf(name, sizeof name, "x%d", i);
    xs[i] = input(name, DLOP_INT32, 1, &n);
    in[i] = random_array(DLOP_INT32, 1, &n, 100 + (uint64_t)i, -1000, 1000);
  }
  total = xs[0];
  for (int i = 1; i < COUNT; i++) total = apply2("add", total, xs[i]);
  dlop_function *fused = compile(xs, COUNT, &total, 1);
  dlop_function *unfused = dlop_test_compile_unfused(graph, xs, COUNT, &total, 1, CPU);
  explain_has(fused, "group 1:");
  ck_assert_int_lt(dlop_function_node_count(fused), 19);
  check_same(fused, unfused, in, COUNT, 1, 0);
  for (int i = 0; i < COUNT; i++) dlop_array_release(in[i]);
  dlop_function_destroy(fused);
  dlop_function_destroy(unfused);
}
END_TEST

/* ---- buffers ---------------------------------------------------------------------------------- */

/* A chain of 8 doubles on 2^21 float32: fused, the run allocates the output and nothing else
 * (every intermediate lives in the kernel); unfused, the in-place plan still keeps one
 * intermediate beside the output. */
START_TEST(intermediate_buffers_disappear) {
  enum { N = 1 << 21, CHAIN = 8 };
  int64_t n = N;
  dlop_var *x, *y = dlop_test_double_chain(graph, n, CHAIN, &x);
  dlop_function *fused = compile(&x, 1, &y, 1);
  const char *text = explain(fused);
  int in_kernel = 0;
  for (const char *p = text; (p = strstr(p, "(in the kernel)")) != NULL; p++) in_kernel++;
  ck_assert_msg(in_kernel == CHAIN - 1, "%d intermediates in the kernel:\n%s", in_kernel, text);
  float *data = malloc(sizeof(float) * N);
  ck_assert_ptr_nonnull(data);
  for (int64_t i = 0; i < n; i++) data[i] = (float)(i % 1000) * 0.25f;
  dlop_array *in = dlop_test_host_array(DLOP_FLOAT32, 1, &n, data), *out = NULL;
  dlop_memory_stats before = dlop_test_memory_stats(CPU);
  DLOP_CK_OK(dlop_function_run(fused, &in, 1, &out, 1, NULL));
  dlop_memory_stats after = dlop_test_memory_stats(CPU);
  double extra = (double)(after.peak_bytes_in_use - before.bytes_in_use) / (double)(N * sizeof(float));
  ck_assert_msg(extra <= 1.05, "peak use grew by %.2f buffers (expected 1: the output only)", extra);
  float *got = dlop_test_read_back(out);
  for (int64_t i = 0; i < n; i++)
    if (got[i] != data[i] * 256.0f)
      ck_abort_msg("[%lld] %g, want %g", (long long)i, (double)got[i], (double)(data[i] * 256.0f));
  free(got);
  free(data);
  dlop_test_release_arrays(2, out, in);
  dlop_function_destroy(fused);
}
END_TEST

/* ---- shapes, views, broadcasting ---------------------------------------------------------------- */

/* t = exp(x) and y = t * b are both outputs; unknown lengths allow x of 1 element and b of 5, so
 * t and y differ in shape at run time: each gets a pass of its own, over its own shape. */
START_TEST(outputs_of_different_shapes) {
  int64_t unknown = DLOP_DIM_UNKNOWN, one = 1, five = 5;
  dlop_var *x = input("x", DLOP_FLOAT32, 1, &unknown), *b = input("b", DLOP_FLOAT32, 1, &unknown);
  dlop_var *t = apply1("exp", x), *y = apply2("mul", t, b);
  dlop_var *inputs[2] = {x, b}, *outputs[2] = {y, t};
  dlop_function *fused = compile(inputs, 2, outputs, 2);
  dlop_function *unfused = dlop_test_compile_unfused(graph, inputs, 2, outputs, 2, CPU);
  ck_assert_int_eq(dlop_function_node_count(fused), 1);
  dlop_array *in[2] = {random_array(DLOP_FLOAT32, 1, &one, 1, -1, 1),
                       random_array(DLOP_FLOAT32, 1, &five, 2, -1, 1)};
  check_same(fused, unfused, in, 2, 2, 0);
  dlop_test_release_arrays(2, in[0], in[1]);
  /* and the same shape: one pass */
  in[0] = random_array(DLOP_FLOAT32, 1, &five, 3, -1, 1);
  in[1] = random_array(DLOP_FLOAT32, 1, &five, 4, -1, 1);
  check_same(fused, unfused, in, 2, 2, 0);
  dlop_test_release_arrays(2, in[0], in[1]);
  dlop_function_destroy(fused);
  dlop_function_destroy(unfused);
}
END_TEST

/* A transposed view and a broadcast_to view feed a group through their strides. */
START_TEST(views_feed_a_group_through_strides) {
  int64_t shape[2] = {3, 4}, row = 4, target[2] = {3, 4};
  dlop_var *x = input("x", DLOP_FLOAT64, 2, shape), *c = input("c", DLOP_FLOAT64, 2, shape);
  dlop_var *r = input("r", DLOP_FLOAT64, 1, &row), *t, *v, *inputs[3] = {x, c, r};
  DLOP_CK_OK(dlop_test_apply_ints(graph, "transpose", x, NULL, NULL, 0, &t)); /* (4, 3) */
  DLOP_CK_OK(dlop_test_apply_ints(graph, "transpose", t, NULL, NULL, 0, &t)); /* (3, 4), strided twice */
  DLOP_CK_OK(dlop_test_apply_ints(graph, "broadcast_to", r, "shape", target, 2, &v));
  dlop_var *y = apply1("tanh", apply2("add", apply2("mul", t, c), v));
  dlop_function *fused = compile(inputs, 3, &y, 1);
  dlop_function *unfused = dlop_test_compile_unfused(graph, inputs, 3, &y, 1, CPU);
  explain_has(fused, "(group 0: 3 nodes in one kernel");
  explain_has(fused, "(view of input 0)");
  dlop_array *in[3] = {random_array(DLOP_FLOAT64, 2, shape, 1, -2, 2),
                       random_array(DLOP_FLOAT64, 2, shape, 2, -2, 2),
                       random_array(DLOP_FLOAT64, 1, &row, 3, -2, 2)};
  check_same(fused, unfused, in, 3, 1, 1e-15);
  /* a strided input given by the caller: every other column of a (3, 8) matrix */
  int64_t wide[2] = {3, 8}, strides[2] = {8, 2};
  dlop_array *base = random_array(DLOP_FLOAT64, 2, wide, 4, -2, 2), *view = NULL;
  DLOP_CK_OK(dlop_array_view(base, 2, shape, strides, 8, &view));
  dlop_array *strided[3] = {view, in[1], in[2]};
  check_same(fused, unfused, strided, 3, 1, 1e-15);
  dlop_test_release_arrays(5, view, base, in[0], in[1], in[2]);
  dlop_function_destroy(fused);
  dlop_function_destroy(unfused);
}
END_TEST

/* NumPy broadcasting inside a group: a column (M, 1), a row (N,) and a scalar input. */
START_TEST(broadcasting_inside_a_group) {
  int64_t column[2] = {37, 1}, row = 53;
  dlop_var *a = input("a", DLOP_FLOAT32, 2, column), *b = input("b", DLOP_FLOAT32, 1, &row);
  dlop_var *s = input("s", DLOP_FLOAT32, 0, NULL), *inputs[3] = {a, b, s};
  dlop_var *y = apply2("maximum", apply2("sub", apply2("mul", a, b), s), b);
  dlop_function *fused = compile(inputs, 3, &y, 1);
  dlop_function *unfused = dlop_test_compile_unfused(graph, inputs, 3, &y, 1, CPU);
  ck_assert_int_eq(dlop_function_node_count(fused), 1);
  explain_has(fused, "fused(a: float32[37,1], b: float32[53], s: float32[]) -> float32[37,53]");
  dlop_array *in[3] = {random_array(DLOP_FLOAT32, 2, column, 1, -2, 2),
                       random_array(DLOP_FLOAT32, 1, &row, 2, -2, 2),
                       random_array(DLOP_FLOAT32, 0, NULL, 3, -2, 2)};
  check_same(fused, unfused, in, 3, 1, 0);
  dlop_test_release_arrays(3, in[0], in[1], in[2]);
  dlop_function_destroy(fused);
  dlop_function_destroy(unfused);
}
END_TEST

/* float16 rounds after every node, as its unfused buffers would: y = (x * x + x) * x. */
START_TEST(float16_rounds_between_nodes) {
  int64_t n = 3001;
  dlop_var *x = input("x", DLOP_FLOAT16, 1, &n);
  dlop_var *y = apply2("mul", apply2("add", apply2("mul", x, x), x), x);
  dlop_function *fused = compile(&x, 1, &y, 1);
  dlop_function *unfused = dlop_test_compile_unfused(graph, &x, 1, &y, 1, CPU);
  explain_has(fused, "(group 0: 3 nodes");
  dlop_array *in = random_array(DLOP_FLOAT16, 1, &n, 8, -30, 30);
  check_same(fused, unfused, &in, 1, 1, 0);
  dlop_array_release(in);
  dlop_function_destroy(fused);
  dlop_function_destroy(unfused);
}
END_TEST

/* ---- turning it off, and without a compiler ---------------------------------------------------- */

START_TEST(option_turns_fusion_off) {
  dlop_var *x, *z = dlop_test_exp_double(graph, DLOP_FLOAT32, DLOP_DIM_UNKNOWN, &x);
  dlop_function_options options = DLOP_FUNCTION_OPTIONS_INIT;
  dlop_function *function = NULL;
  options.fuse = 0;
  DLOP_CK_OK(dlop_function_compile_with_options(graph, &x, 1, &z, 1, CPU, &options, &function));
  ck_assert_int_eq(dlop_function_node_count(function), 2);
  explain_has(function, "\n#1 exp(double.0: float32[?]) -> float32[?] on cpu");
  explain_has(function, "\nfusion: off (turned off when the function was compiled)\n");
  explain_lacks(function, "fused(");
  dlop_function_destroy(function);
  /* NULL options: the defaults */
  DLOP_CK_OK(dlop_function_compile_with_options(graph, &x, 1, &z, 1, CPU, NULL, &function));
  ck_assert_int_eq(dlop_function_node_count(function), 1);
  dlop_function_destroy(function);
  /* options the library cannot read are refused, naming what was wrong */
  options.struct_size = 4;
  ck_assert_int_eq(dlop_function_compile_with_options(graph, &x, 1, &z, 1, CPU, &options, &function),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_msg(strstr(dlop_last_error(), "options.struct_size is 4, too small for any option"),
                "%s", dlop_last_error());
  ck_assert_ptr_null(function);
  dlop_function_options_init(&options);
  ck_assert_int_eq(options.fuse, 1);
  options.fuse = 2;
  ck_assert_int_eq(dlop_function_compile_with_options(graph, &x, 1, &z, 1, CPU, &options, &function),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_msg(strstr(dlop_last_error(), "options.fuse is 2 (expected 0 or 1)"), "%s",
                dlop_last_error());
}
END_TEST

/* No C compiler: the function runs unfused on the CPU, and explain says so and why. */
START_TEST(without_a_compiler_the_function_runs_unfused) {
  setenv("DLOP_CC", "/nonexistent/cc", 1); /* this test's own process: read at first use */
  dlop_var *x, *z = dlop_test_exp_double(graph, DLOP_FLOAT64, DLOP_DIM_UNKNOWN, &x);
  dlop_function *function = compile(&x, 1, &z, 1);
  ck_assert_int_eq(dlop_function_node_count(function), 2);
  ck_assert_int_eq(dlop_function_device(function).type, DLOP_DEVICE_CPU);
  explain_has(function, "\nfusion: unavailable, the function runs unfused: ");
  explain_has(function, "/nonexistent/cc");
  int64_t n = 100;
  dlop_array *in = random_array(DLOP_FLOAT64, 1, &n, 1, -1, 1), *out = NULL;
  DLOP_CK_OK(dlop_function_run(function, &in, 1, &out, 1, NULL));
  double *xs = dlop_test_read_back(in), *ys = dlop_test_read_back(out);
  for (int64_t i = 0; i < n; i++)
    ck_assert_msg(fabs(ys[i] - exp(2 * xs[i])) <= 1e-15 * exp(2 * xs[i]), "[%lld]", (long long)i);
  free(xs);
  free(ys);
  dlop_test_release_arrays(2, out, in);
  dlop_function_destroy(function);
}
END_TEST

/* ---- ops of another plugin ----------------------------------------------------------------------- */

static void load_fusion_fixture(void) {
  const dlop_plugin *plugin = NULL;
  DLOP_CK_OK(dlop_load_plugin(DLOP_TEST_FIXTURE_DIR "/fusion/fusion_ops.so", &plugin));
}

/* fixture_triple (another plugin, its own prelude) fuses with the bundled double and neg. */
START_TEST(third_party_body_fuses_with_bundled_ops) {
  load_fusion_fixture();
  int64_t unknown = DLOP_DIM_UNKNOWN;
  dlop_var *x = input("x", DLOP_FLOAT32, 1, &unknown);
  dlop_var *y = apply1("neg", apply1("fixture_triple", apply1("double", x)));
  dlop_function *fused = compile(&x, 1, &y, 1);
  dlop_function *unfused = dlop_test_compile_unfused(graph, &x, 1, &y, 1, CPU);
  ck_assert_int_eq(dlop_function_node_count(fused), 1);
  explain_has(fused, "    fixture_triple(double.0: float32[?]) -> fixture_triple.1: float32[?] (in the kernel)");
  int64_t n = 1001;
  dlop_array *in = random_array(DLOP_FLOAT32, 1, &n, 1, -100, 100);
  check_same(fused, unfused, &in, 1, 1, 0);
  dlop_array_release(in);
  dlop_function_destroy(fused);
  dlop_function_destroy(unfused);
}
END_TEST

/* A body that does not compile: the function still runs, unfused, and says why (warning too). */
START_TEST(body_that_does_not_compile_runs_unfused) {
  load_fusion_fixture();
  int64_t n = 64;
  dlop_var *x = input("x", DLOP_FLOAT64, 1, &n);
  dlop_var *y = apply1("fixture_broken_body", apply1("double", x));
  dlop_test_capture_stderr();
  dlop_function *function = compile(&x, 1, &y, 1);
  const char *warnings = dlop_test_captured_stderr();
  ck_assert_int_eq(dlop_function_node_count(function), 2);
  explain_has(function, "\nfusion: the generated kernels did not compile, the function runs "
                        "unfused (the host's C compiler): ");
  explain_has(function, "error");
  ck_assert_msg(strstr(warnings, "fusion: the generated kernels did not compile"), "%s", warnings);
  dlop_array *in = random_array(DLOP_FLOAT64, 1, &n, 1, -1, 1), *out = NULL;
  DLOP_CK_OK(dlop_function_run(function, &in, 1, &out, 1, NULL));
  double *xs = dlop_test_read_back(in), *ys = dlop_test_read_back(out);
  for (int64_t i = 0; i < n; i++) ck_assert(ys[i] == 6 * xs[i]);
  free(xs);
  free(ys);
  dlop_test_release_arrays(2, out, in);
  dlop_function_destroy(function);
}
END_TEST

/* A compute dtype the host cannot convert is the plugin's error, named. */
START_TEST(bad_compute_dtype_is_a_plugin_error) {
  load_fusion_fixture();
  int64_t n = 8;
  dlop_var *x = input("x", DLOP_FLOAT32, 1, &n), *y = apply1("fixture_bad_compute", apply1("double", x));
  dlop_function *function = NULL;
  ck_assert_int_eq(dlop_function_compile(graph, &x, 1, &y, 1, CPU, &function), DLOP_PLUGIN_ERROR);
  ck_assert_ptr_null(function);
  ck_assert_msg(strstr(dlop_last_error(), "fixture_bad_compute: scalar_body gave input 0 (float32) "
                                          "the compute dtype 1 (int8)"),
                "%s", dlop_last_error());
}
END_TEST

/* Two preludes of one name must be one text. */
START_TEST(prelude_name_clash_is_a_plugin_error) {
  load_fusion_fixture();
  int64_t n = 8;
  dlop_var *x = input("x", DLOP_FLOAT64, 1, &n);
  dlop_var *y = apply1("fixture_prelude_clash", apply1("fixture_triple", x));
  dlop_function *function = NULL;
  ck_assert_int_eq(dlop_function_compile(graph, &x, 1, &y, 1, CPU, &function), DLOP_PLUGIN_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "both name their body's prelude \"fixture.triple.1\""),
                "%s", dlop_last_error());
}
END_TEST

/* A body's op whose shape rule is not elementwise: the run says so, naming the op. */
START_TEST(shape_rule_must_be_elementwise) {
  load_fusion_fixture();
  int64_t unknown = DLOP_DIM_UNKNOWN, n = 10;
  dlop_var *x = input("x", DLOP_FLOAT64, 1, &unknown);
  dlop_var *y = apply1("fixture_longer", apply1("double", x));
  dlop_function *function = compile(&x, 1, &y, 1);
  dlop_array *in = random_array(DLOP_FLOAT64, 1, &n, 1, -1, 1), *out = NULL;
  ck_assert_int_eq(dlop_function_run(function, &in, 1, &out, 1, NULL), DLOP_PLUGIN_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "op 'fixture_longer' declares a scalar body (elementwise "
                                          "with broadcasting) but infer_shape gave output 0 as "
                                          "float64[11]"),
                "%s", dlop_last_error());
  dlop_array_release(in);
  dlop_function_destroy(function);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("fusion");
  TCase *decisions = dlop_test_tcase(suite, "decisions", 0, graph_setup, graph_teardown);
  dlop_test_add_tests(decisions, chain_is_one_kernel, tree_with_constants_is_one_kernel,
                      member_read_outside_is_an_output, node_that_cannot_fuse_splits_groups,
                      operand_limit_splits_a_long_tree, intermediate_buffers_disappear, NULL);
  TCase *shapes = dlop_test_tcase(suite, "shapes", 0, graph_setup, graph_teardown);
  dlop_test_add_tests(shapes, outputs_of_different_shapes, views_feed_a_group_through_strides,
                      broadcasting_inside_a_group, float16_rounds_between_nodes, NULL);
  TCase *off = dlop_test_tcase(suite, "off", 0, graph_setup, graph_teardown);
  dlop_test_add_tests(off, option_turns_fusion_off, without_a_compiler_the_function_runs_unfused,
                      NULL);
  TCase *plugins = dlop_test_tcase(suite, "plugins", 0, graph_setup, graph_teardown);
  dlop_test_add_tests(plugins, third_party_body_fuses_with_bundled_ops,
                      body_that_does_not_compile_runs_unfused, bad_compute_dtype_is_a_plugin_error,
                      prelude_name_clash_is_a_plugin_error, shape_rule_must_be_elementwise, NULL);
  return dlop_test_run_suite(suite);
}
