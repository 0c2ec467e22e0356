/* test_reduce_cuda.c — the reduce plugin on CUDA against its CPU results: every op and dtype
 * over axes and keepdims, strided, negative-stride and broadcast inputs, empty axes, 0-d, long
 * reductions (a 2^24 + 7 full sum: the two-pass path), columns, and bit-identical reruns.
 * Without a usable GPU it prints why and exits 77 (skipped); DLOP_REQUIRE_GPU=1 makes that a failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_runner.h"
#include "reduce_case.h"
#include "test_support.h"

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};
static const dlop_device CUDA = {DLOP_DEVICE_CUDA, 0};

typedef dlop_test_reduce_case reduce_case;

/* Runs c on device over data (a span of span elements, element 0 at first) and returns the
 * output as doubles (*outputs of them) and its dtype. */
static double *run_on(const reduce_case *c, dlop_device device, const void *data, int64_t span,
                      int64_t first, const int64_t *strides, int64_t *outputs, dlop_dtype *out_dtype,
                      int reruns) {
  dlop_graph *graph;
  dlop_var *x, *y;
  dlop_function *function;
  dlop_array *span_array, *input, *output;
  dlop_named_param params[2] = {
      {"axes", {.kind = DLOP_PARAM_INTS, .count = c->naxes, .u = {.ints = c->axes}}},
      {"keepdims", {.kind = DLOP_PARAM_BOOL, .count = 1, .u = {.i = c->keepdims}}}};
  size_t elsize = dlop_dtype_size(c->dtype);
  DLOP_CK_OK(dlop_graph_create(&graph));
  DLOP_CK_OK(dlop_graph_input(graph, "x", c->dtype, c->ndim, c->shape, &x));
  DLOP_CK_OK(dlop_graph_apply(graph, c->op, &x, 1, params, 2, &y, 1));
  const dlop_type *t = dlop_var_type(y);
  *out_dtype = (dlop_dtype)t->dtype;
  *outputs = 1;
  for (int32_t d = 0; d < t->ndim; d++) *outputs *= t->shape[d];
  DLOP_CK_OK(dlop_function_compile(graph, &x, 1, &y, 1, device, &function));
  DLOP_CK_OK(dlop_array_from_host(device, c->dtype, 1, &span, data, &span_array));
  DLOP_CK_OK(dlop_array_view(span_array, c->ndim, c->shape, strides, (uint64_t)first * elsize, &input));
  size_t bytes = (size_t)*outputs * dlop_dtype_size(*out_dtype);
  unsigned char *host = malloc(bytes + 8), *again = malloc(bytes + 8);
  DLOP_CK_OK(dlop_function_run(function, &input, 1, &output, 1, NULL));
  DLOP_CK_OK(dlop_array_to_host(output, host, bytes));
  dlop_array_release(output);
  for (int i = 0; i < reruns; i++) { /* the same inputs give the same bits */
    DLOP_CK_OK(dlop_function_run(function, &input, 1, &output, 1, NULL));
    DLOP_CK_OK(dlop_array_to_host(output, again, bytes));
    dlop_array_release(output);
    ck_assert_msg(memcmp(host, again, bytes) == 0, "%s %s: rerun %d gave different bits", c->op,
                  dlop_dtype_name(c->dtype), i);
  }
  double *values = calloc((size_t)*outputs + 1, sizeof(double));
  for (int64_t m = 0; m < *outputs; m++) values[m] = dlop_test_get(host, *out_dtype, m);
  free(host);
  free(again);
  dlop_array_release(input);
  dlop_array_release(span_array);
  dlop_function_destroy(function);
  dlop_graph_destroy(graph);
  return values;
}

/* CUDA against the CPU on the same random data; tolerance from the dtype's rounding and the
 * accumulation (different summation trees) relative to the reduced count. */
static void check_parity(const reduce_case *c, uint64_t seed, int reruns) {
  int64_t strides[4], first, n_cpu, n_cuda, total = dlop_test_numel(c->ndim, c->shape);
  int64_t span = dlop_test_layout_span(c->ndim, c->shape, dlop_test_strides_given(c->ndim, c->strides),
                                       strides, &first);
  int is_int = !dlop_dtype_is_float(c->dtype);
  void *data = malloc((size_t)span * dlop_dtype_size(c->dtype));
  dlop_test_fill_random(data, c->dtype, span, seed, is_int ? -100 : -2, is_int ? 100 : 2);
  dlop_dtype out_dtype;
  double *cpu = run_on(c, CPU, data, span, first, strides, &n_cpu, &out_dtype, 0);
  double *cuda = run_on(c, CUDA, data, span, first, strides, &n_cuda, &out_dtype, reruns);
  ck_assert_int_eq(n_cpu, n_cuda);
  int64_t count = n_cpu > 0 ? total / n_cpu : 0;
  double rounding = dlop_test_tolerance(out_dtype);
  double accumulation = c->dtype == DLOP_FLOAT64 ? 1e-14 : is_int ? 0 : 4e-6;
  int extreme = strcmp(c->op, "max") == 0 || strcmp(c->op, "min") == 0;
  for (int64_t m = 0; m < n_cpu; m++) {
    double scale = strcmp(c->op, "mean") == 0 ? 2.0 : 2.0 * (double)count;
    double tol = extreme ? 0 : rounding * fabs(cpu[m]) + accumulation * scale * sqrt((double)count + 1);
    int ok = (isnan(cpu[m]) && isnan(cuda[m])) || fabs(cpu[m] - cuda[m]) <= tol || cpu[m] == cuda[m];
    ck_assert_msg(ok, "%s %s shape (%lld, %lld, %lld) naxes %d: [%lld] cpu %.17g, cuda %.17g (tol %g)",
                  c->op, dlop_dtype_name(c->dtype), (long long)c->shape[0], (long long)c->shape[1],
                  (long long)c->shape[2], (int)c->naxes, (long long)m, cpu[m], cuda[m], tol);
  }
  free(cpu);
  free(cuda);
  free(data);
}

static const dlop_dtype numeric[] = {DLOP_INT8, DLOP_INT16, DLOP_INT32, DLOP_INT64, DLOP_UINT8,
                                     DLOP_FLOAT16, DLOP_BFLOAT16, DLOP_FLOAT32, DLOP_FLOAT64};
static const char *const ops[] = {"sum", "mean", "max", "min"};

START_TEST(test_ops_dtypes_axes) {
  static const struct { int32_t n; int64_t axes[3]; } sets[] = {
      {0, {0}}, {1, {0}}, {1, {1}}, {2, {0, 2}}, {1, {-1}}, {3, {0, 1, 2}}};
  dlop_test_load_bundled_plugins();
  for (size_t o = 0; o < 4; o++)
    for (size_t t = 0; t < 9; t++) {
      if (strcmp(ops[o], "mean") == 0 && !dlop_dtype_is_float(numeric[t])) continue;
      for (size_t a = 0; a < 6; a++) {
        reduce_case c = {ops[o], numeric[t], 3, {5, 7, 9}, {0}, sets[a].n, {0}, (int)(a & 1)};
        memcpy(c.axes, sets[a].axes, sizeof c.axes[0] * 3);
        check_parity(&c, 10 + t * 10 + a, 1);
      }
    }
}
END_TEST

START_TEST(test_layouts_and_sizes) {
  static const reduce_case cases[] = {
      {"sum", DLOP_FLOAT32, 3, {4, 6, 5}, {120, -10, 2}, 1, {1}, 0},
      {"max", DLOP_FLOAT16, 3, {4, 6, 5}, {0, 5, 1}, 2, {0, 2}, 1},
      {"mean", DLOP_FLOAT64, 3, {4, 6, 5}, {1, 4, 24}, 1, {2}, 0},
      {"min", DLOP_INT32, 3, {4, 6, 5}, {-30, 1, -6}, 0, {0}, 0},
      {"sum", DLOP_FLOAT32, 2, {3, 0}, {0}, 1, {1}, 0},
      {"mean", DLOP_FLOAT32, 2, {3, 0}, {0}, 1, {1}, 0},
      {"sum", DLOP_FLOAT64, 0, {0}, {0}, 0, {0}, 0},
      {"sum", DLOP_FLOAT32, 1, {(1 << 24) + 7}, {0}, 0, {0}, 0},      /* two passes */
      {"sum", DLOP_BFLOAT16, 1, {(1 << 24) + 7}, {0}, 0, {0}, 0},
      {"max", DLOP_FLOAT32, 1, {(1 << 24) + 7}, {0}, 0, {0}, 0},
      {"sum", DLOP_INT8, 1, {(1 << 22) + 3}, {0}, 0, {0}, 0},
      {"sum", DLOP_FLOAT32, 2, {3, 1000003}, {0}, 1, {1}, 0},          /* few long rows */
      {"sum", DLOP_FLOAT32, 2, {1000003, 3}, {0}, 1, {1}, 0},          /* many short rows */
      {"mean", DLOP_FLOAT32, 2, {10007, 5003}, {0}, 1, {0}, 0},        /* columns */
      {"min", DLOP_FLOAT64, 2, {2001, 8191}, {0}, 1, {0}, 1},
      {"sum", DLOP_FLOAT16, 3, {17, 4099, 3}, {0}, 2, {0, 2}, 0},      /* strided block path */
      {"max", DLOP_INT64, 2, {4099, 1}, {1, 0}, 1, {0}, 0},
  };
  dlop_test_load_bundled_plugins();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_parity(&cases[i], 300 + i, 2);
}
END_TEST

int main(void) {
  dlop_test_require_cuda_or_skip();
  Suite *suite = suite_create("reduce_cuda");
  TCase *tc = dlop_test_tcase(suite, "parity", 300, NULL, NULL);
  dlop_test_add_tests(tc,
                      test_ops_dtypes_axes,
                      test_layouts_and_sizes,
                      NULL);
  return dlop_test_run_suite(suite);
}
