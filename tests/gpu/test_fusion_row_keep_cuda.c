/* test_fusion_row_keep_cuda.c — CUDA row kernels that keep values in registers (exp(x - max)
 * and the like, which later phases and the outputs read) give the bits of the same kernels
 * computing those values again in each phase: every graph below is compiled twice, once as
 * usual and once with dlop__fusion_row_kept_bytes at 0 (no kernel keeps a value), and both
 * run on the same rows, of every length whose kernel keeps them (each R packs a thread) and
 * of lengths past that, with NaN, -inf and +inf rows among them. Graphs: a softmax (one kept
 * value), its probabilities over their sum of squares (the kept value written by phase 2 and
 * read by phase 3 and the output), a softmax of tanh(x) times tanh(x) (two kept values, one
 * read by all three parts), and a softmax beside its exp (a kept value that is an output);
 * float16, bfloat16, float32 and float64. Without a GPU it exits 77. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusion.h"
#include "graph_runner.h"
#include "test_support.h"

static const dlop_device CUDA = {DLOP_DEVICE_CUDA, 0};

static dlop_var *reduce(dlop_graph *graph, const char *op, dlop_var *x) {
  int64_t axis = -1;
  dlop_named_param params[2] = {
      {"axes", {.kind = DLOP_PARAM_INTS, .count = 1, .u.ints = &axis}},
      {"keepdims", {.kind = DLOP_PARAM_BOOL, .count = 1, .u.i = 1}}};
  dlop_var *y = NULL;
  DLOP_CK_OK(dlop_graph_apply(graph, op, &x, 1, params, 2, &y, 1));
  return y;
}

static dlop_var *apply(dlop_graph *graph, const char *op, dlop_var *a, dlop_var *b) {
  dlop_var *pair[2] = {a, b}, *y = NULL;
  DLOP_CK_OK(dlop_graph_apply(graph, op, pair, b != NULL ? 2 : 1, NULL, 0, &y, 1));
  return y;
}

/* exp(x - max(x)) */
static dlop_var *shifted_exp(dlop_graph *graph, dlop_var *x) {
  return apply(graph, "exp", apply(graph, "sub", x, reduce(graph, "max", x)), NULL);
}

enum { SOFTMAX, OVER_SUM_OF_SQUARES, TANH_TWO_KEPT, EXP_AS_OUTPUT, GRAPHS };
static const char *const graph_names[GRAPHS] = {
    "softmax", "softmax over its sum of squares", "softmax of tanh(x) times tanh(x)",
    "softmax and its exp as outputs"};

/* The graph's outputs (1 or 2) of x. */
static int32_t build(dlop_graph *graph, int which, dlop_var *x, dlop_var **outputs) {
  if (which == TANH_TWO_KEPT) {
    dlop_var *t = apply(graph, "tanh", x, NULL), *e = shifted_exp(graph, t);
    outputs[0] = apply(graph, "mul", apply(graph, "div", e, reduce(graph, "sum", e)), t);
    return 1;
  }
  dlop_var *e = shifted_exp(graph, x), *p = apply(graph, "div", e, reduce(graph, "sum", e));
  if (which == OVER_SUM_OF_SQUARES)
    p = apply(graph, "div", p, reduce(graph, "sum", apply(graph, "mul", p, p)));
  outputs[0] = p;
  outputs[1] = e;
  return which == EXP_AS_OUTPUT ? 2 : 1;
}

/* rows x n values in [-8, 8], row 1 holding a NaN, row 2 -inf and +inf, row 3 all -inf */
static dlop_array *rows_of(dlop_dtype dtype, int64_t rows, int64_t n, uint64_t seed) {
  size_t size = dlop_dtype_size(dtype);
  void *data = malloc((size_t)(rows * n) * size + 1);
  ck_assert_ptr_nonnull(data);
  dlop_test_fill_random(data, dtype, rows * n, seed, -8.0, 8.0);
  dlop_test_set(data, dtype, 1 * n + n / 2, 0.0 / 0.0);
  dlop_test_set(data, dtype, 2 * n, -1.0 / 0.0);
  dlop_test_set(data, dtype, 2 * n + n - 1, 1.0 / 0.0);
  for (int64_t i = 0; i < n; i++) dlop_test_set(data, dtype, 3 * n + i, -1.0 / 0.0);
  int64_t shape[2] = {rows, n};
  dlop_array *array = NULL;
  DLOP_CK_OK(dlop_array_from_host(CUDA, dtype, 2, shape, data, &array));
  free(data);
  return array;
}

/* The kernels' source states the bound they are built for (`... <= N;` after keep's other
 * terms); it is generated again from dlop__fusion_row_kept_bytes, so asked while that holds. */
static int source_states_bound(dlop_function *function, int32_t bound) {
  char *source = NULL, needle[32];
  DLOP_CK_OK(dlop__function_fused_source(function, DLOP__FUSION_TARGET_CUDA, &source));
  snprintf(needle, sizeof needle, " <= %d;\n", (int)bound);
  int found = strstr(source, "constexpr bool keep") != NULL && strstr(source, needle) != NULL;
  free(source);
  return found;
}

static dlop_function *compile(dlop_graph *graph, dlop_var *x, dlop_var **outputs, int32_t count,
                              int32_t kept_bytes, const char *what) {
  dlop_function *function = NULL;
  dlop__fusion_row_kept_bytes = kept_bytes;
  int status = dlop_function_compile(graph, &x, 1, outputs, count, CUDA, &function);
  int stated = status == DLOP_OK && source_states_bound(function, kept_bytes);
  dlop__fusion_row_kept_bytes = DLOP__FUSION_ROW_KEPT_BYTES;
  ck_assert_msg(status == DLOP_OK, "%s: %s", what, dlop_last_error());
  ck_assert_msg(dlop_function_node_count(function) == 1, "%s: not one row group", what);
  ck_assert_msg(stated, "%s: the kernels' source does not state the bound of %d bytes", what,
                (int)kept_bytes);
  return function;
}

START_TEST(kept_values_give_the_bits_of_values_computed_again) {
  static const dlop_dtype dtypes[] = {DLOP_FLOAT16, DLOP_BFLOAT16, DLOP_FLOAT32, DLOP_FLOAT64};
  static const int64_t lengths[] = {1, 5, 1000, 1025, 2049, 4096, 4097, 6000, 8192, 8193, 16384};
  int which = _i % GRAPHS;
  dlop_dtype dtype = dtypes[_i / GRAPHS];
  dlop_graph *graph = dlop_test_new_graph();
  int64_t unknown[2] = {DLOP_DIM_UNKNOWN, DLOP_DIM_UNKNOWN};
  dlop_var *x = NULL, *outputs[2];
  DLOP_CK_OK(dlop_graph_input(graph, "x", dtype, 2, unknown, &x));
  int32_t count = build(graph, which, x, outputs);
  char what[96];
  snprintf(what, sizeof what, "%s %s", graph_names[which], dlop_dtype_name(dtype));
  dlop_function *keeping = compile(graph, x, outputs, count, DLOP__FUSION_ROW_KEPT_BYTES, what);
  dlop_function *again = compile(graph, x, outputs, count, 0, what);
  size_t size = dlop_dtype_size(dtype);
  for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
    const int64_t rows = 6, n = lengths[l];
    dlop_array *in = rows_of(dtype, rows, n, 40 + l), *got[2] = {NULL}, *want[2] = {NULL};
    DLOP_CK_OK(dlop_function_run(keeping, &in, 1, got, count, NULL));
    DLOP_CK_OK(dlop_function_run(again, &in, 1, want, count, NULL));
    for (int32_t o = 0; o < count; o++) {
      size_t bytes = (size_t)(rows * n) * size;
      unsigned char *a = malloc(bytes), *b = malloc(bytes);
      ck_assert(a != NULL && b != NULL);
      DLOP_CK_OK(dlop_array_to_host(got[o], a, bytes));
      DLOP_CK_OK(dlop_array_to_host(want[o], b, bytes));
      for (size_t i = 0; i < bytes; i++)
        ck_assert_msg(a[i] == b[i],
                      "%s, rows of %lld, output %d: element [%lld, %lld] differs from the "
                      "kernel that keeps no value: %.9g against %.9g",
                      what, (long long)n, (int)o,
                      (long long)(i / size / (size_t)n), (long long)(i / size % (size_t)n),
                      dlop_test_get(a, dtype, (int64_t)(i / size)),
                      dlop_test_get(b, dtype, (int64_t)(i / size)));
      free(a);
      free(b);
      dlop_test_release_arrays(2, got[o], want[o]);
    }
    dlop_array_release(in);
  }
  dlop_function_destroy(keeping);
  dlop_function_destroy(again);
  dlop_graph_destroy(graph);
}
END_TEST

int main(void) {
  dlop_test_require_cuda_or_skip();
  Suite *suite = suite_create("fusion_row_keep_cuda");
  TCase *bits = dlop_test_tcase(suite, "bits", 300, NULL, NULL);
  tcase_add_loop_test(bits, kept_values_give_the_bits_of_values_computed_again, 0, 4 * GRAPHS);
  return dlop_test_run_suite(suite);
}
