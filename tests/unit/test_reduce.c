/* test_reduce.c — the reduce plugin (sum, mean, max, min) on the CPU through the graph API:
 * every op and dtype against a plain C double-precision reference, axes and keepdims, strided,
 * negative-stride and broadcast inputs, empty axes, 0-d inputs, a long reduction, bit-identical
 * results with 1 and 4 threads, and type/shape errors with their messages. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "op_runner.h"
#include "reduce_case.h"
#include "test_support.h"

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};

typedef dlop_test_reduce_case reduce_case;

typedef struct reduce_result {
  dlop_dtype out_dtype;
  int32_t out_ndim;
  int64_t out_shape[4];
  int64_t outputs;
  double *actual, *expected, *scale; /* scale: sum of |x| reduced into each output */
  int64_t count;                     /* elements per output */
} reduce_result;

/* Applies c's op to a fresh input; DLOP_OK or the apply's status (message in last error). */
static int apply_case(const reduce_case *c, dlop_graph **graph, dlop_var **x, dlop_var **y) {
  dlop_named_param params[2];
  int32_t n = 0;
  DLOP_CK_OK(dlop_graph_create(graph));
  DLOP_CK_OK(dlop_graph_input(*graph, "x", c->dtype, c->ndim, c->shape, x));
  if (c->naxes >= 0) {
    params[n].name = "axes";
    params[n].value.kind = DLOP_PARAM_INTS;
    params[n].value.count = c->naxes;
    params[n].value.u.ints = c->axes;
    n++;
  }
  params[n].name = "keepdims";
  params[n].value.kind = DLOP_PARAM_BOOL;
  params[n].value.count = 1;
  params[n].value.u.i = c->keepdims;
  n++;
  return dlop_graph_apply(*graph, c->op, x, 1, params, n, y, 1);
}

static int reduced(const reduce_case *c, int32_t d) {
  if (c->naxes <= 0) return 1;
  for (int32_t i = 0; i < c->naxes; i++)
    if ((c->axes[i] < 0 ? c->axes[i] + c->ndim : c->axes[i]) == d) return 1;
  return 0;
}

/* Runs c on the CPU over random data in [low, high] (values: when not NULL, the span repeats
 * them) and fills r with the output and a double reference. */
static void run_case(const reduce_case *c, uint64_t seed, double low, double high,
                     const double *values, int64_t num_values, reduce_result *r) {
  dlop_graph *graph;
  dlop_var *x, *y;
  dlop_function *function;
  dlop_array *span_array, *input, *output;
  int64_t strides[4], span, first;
  size_t elsize = dlop_dtype_size(c->dtype);
  int status = apply_case(c, &graph, &x, &y);
  ck_assert_msg(status == DLOP_OK, "%s apply: %s", c->op, dlop_last_error());
  memset(r, 0, sizeof *r);
  r->out_dtype = (dlop_dtype)dlop_var_type(y)->dtype;
  r->out_ndim = dlop_var_type(y)->ndim;
  memcpy(r->out_shape, dlop_var_type(y)->shape, sizeof(int64_t) * (size_t)r->out_ndim);
  r->outputs = dlop_test_numel(r->out_ndim, r->out_shape);
  DLOP_CK_OK(dlop_function_compile(graph, &x, 1, &y, 1, CPU, &function));
  span = dlop_test_layout_span(c->ndim, c->shape, dlop_test_strides_given(c->ndim, c->strides), strides,
                               &first);
  void *data = malloc((size_t)span * elsize);
  ck_assert_ptr_nonnull(data);
  dlop_test_fill_random(data, c->dtype, span, seed, low, high);
  if (values)
    for (int64_t i = 0; i < span; i++) dlop_test_set(data, c->dtype, i, values[i % num_values]);
  DLOP_CK_OK(dlop_array_from_host(CPU, c->dtype, 1, &span, data, &span_array));
  DLOP_CK_OK(dlop_array_view(span_array, c->ndim, c->shape, strides, (uint64_t)first * elsize, &input));
  DLOP_CK_OK(dlop_function_run(function, &input, 1, &output, 1, NULL));
  void *out_host = malloc((size_t)(r->outputs + 1) * 8);
  ck_assert_ptr_nonnull(out_host);
  DLOP_CK_OK(dlop_array_to_host(output, out_host, (size_t)r->outputs * dlop_dtype_size(r->out_dtype)));
  r->actual = calloc((size_t)r->outputs + 1, sizeof(double));
  r->expected = calloc((size_t)r->outputs + 1, sizeof(double));
  r->scale = calloc((size_t)r->outputs + 1, sizeof(double));
  for (int64_t m = 0; m < r->outputs; m++) r->actual[m] = dlop_test_get(out_host, r->out_dtype, m);
  /* the reference: every input element in C order, into its output element */
  int is_max = strcmp(c->op, "max") == 0, is_min = strcmp(c->op, "min") == 0;
  int *seen = calloc((size_t)r->outputs + 1, sizeof(int));
  int64_t n = dlop_test_numel(c->ndim, c->shape);
  r->count = r->outputs > 0 ? n / r->outputs : 0;
  if (r->outputs > 0 && n == 0) r->count = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t rest = i, offset = 0, m = 0, weight = 1;
    for (int32_t d = c->ndim - 1; d >= 0; d--) {
      int64_t index = rest % c->shape[d];
      rest /= c->shape[d];
      offset += index * strides[d];
      if (!reduced(c, d)) {
        m += index * weight;
        weight *= c->shape[d];
      }
    }
    double v = dlop_test_get(data, c->dtype, first + offset);
    if (is_max || is_min) {
      double *e = &r->expected[m];
      if (!seen[m] || isnan(v) || (!isnan(*e) && (is_max ? v > *e : v < *e))) *e = v;
      seen[m] = 1;
    } else {
      r->expected[m] += v;
      r->scale[m] += fabs(v);
    }
  }
  if (strcmp(c->op, "mean") == 0)
    for (int64_t m = 0; m < r->outputs; m++) {
      r->expected[m] = r->count > 0 ? r->expected[m] / (double)r->count : NAN;
      r->scale[m] = r->count > 0 ? r->scale[m] / (double)r->count : 0.0;
    }
  if (r->out_dtype == DLOP_INT64 && !is_max && !is_min)
    for (int64_t m = 0; m < r->outputs; m++) r->expected[m] = (double)(int64_t)r->expected[m];
  free(seen);
  free(out_host);
  free(data);
  dlop_array_release(output);
  dlop_array_release(input);
  dlop_array_release(span_array);
  dlop_function_destroy(function);
  dlop_graph_destroy(graph);
}

static void result_free(reduce_result *r) {
  free(r->actual);
  free(r->expected);
  free(r->scale);
}

/* Accumulation error bound relative to sum |x| (float32 accumulators, pairwise), and the
 * output's own rounding relative to |result|. */
static void check_result(const reduce_case *c, const reduce_result *r) {
  double rounding = dlop_test_tolerance(r->out_dtype);
  double accumulation = c->dtype == DLOP_FLOAT64 ? 1e-14 : dlop_dtype_is_float(c->dtype) ? 4e-6 : 0.0;
  for (int64_t m = 0; m < r->outputs; m++) {
    double e = r->expected[m], a = r->actual[m];
    double tol = rounding * fabs(e) + accumulation * r->scale[m];
    int ok = (isnan(e) && isnan(a)) || (!isnan(a) && fabs(a - e) <= tol) ||
             (isinf(e) && a == e);
    ck_assert_msg(ok, "%s %s ndim %d axes %d keepdims %d: output [%lld] expected %.17g, got %.17g (tol %g)",
                  c->op, dlop_dtype_name(c->dtype), (int)c->ndim, (int)c->naxes, c->keepdims,
                  (long long)m, e, a, tol);
  }
}

static void check_case(const reduce_case *c, uint64_t seed) {
  reduce_result r;
  int is_int = !dlop_dtype_is_float(c->dtype);
  run_case(c, seed, is_int ? -100 : -2.0, is_int ? 100 : 2.0, NULL, 0, &r);
  check_result(c, &r);
  result_free(&r);
}

/* ---- every op, dtype, axes and keepdims on a (5, 7, 9) tensor ---------------------------- */

static const dlop_dtype numeric[] = {DLOP_INT8, DLOP_INT16, DLOP_INT32, DLOP_INT64, DLOP_UINT8,
                                     DLOP_FLOAT16, DLOP_BFLOAT16, DLOP_FLOAT32, DLOP_FLOAT64};
static const char *const ops[] = {"sum", "mean", "max", "min"};

START_TEST(test_ops_dtypes_axes) {
  static const struct { int32_t n; int64_t axes[3]; } axes_sets[] = {
      {-1, {0}}, {0, {0}}, {1, {0}}, {1, {1}}, {2, {0, 2}}, {1, {-1}}, {3, {0, 1, 2}}, {2, {2, -3}}};
  dlop_test_load_bundled_plugins();
  for (size_t o = 0; o < 4; o++)
    for (size_t t = 0; t < sizeof numeric / sizeof numeric[0]; t++) {
      if (strcmp(ops[o], "mean") == 0 && !dlop_dtype_is_float(numeric[t])) continue;
      for (size_t a = 0; a < sizeof axes_sets / sizeof axes_sets[0]; a++)
        for (int keepdims = 0; keepdims <= 1; keepdims++) {
          reduce_case c = {ops[o], numeric[t], 3, {5, 7, 9}, {0}, axes_sets[a].n, {0}, keepdims};
          memcpy(c.axes, axes_sets[a].axes, sizeof c.axes[0] * 3);
          check_case(&c, 11 + o * 100 + t * 10 + a);
        }
    }
}
END_TEST

START_TEST(test_output_types_and_shapes) {
  reduce_result r;
  reduce_case c = {"sum", DLOP_INT8, 3, {2, 3, 4}, {0}, 2, {0, 2}, 1};
  dlop_test_load_bundled_plugins();
  run_case(&c, 1, 100, 120, NULL, 0, &r); /* 8 int8 values of ~110 overflow int8, not int64 */
  ck_assert_int_eq(r.out_dtype, DLOP_INT64);
  ck_assert_int_eq(r.out_ndim, 3);
  ck_assert(r.out_shape[0] == 1 && r.out_shape[1] == 3 && r.out_shape[2] == 1);
  check_result(&c, &r);
  ck_assert(r.actual[0] > 127 * 8 / 2);
  result_free(&r);
  reduce_case m = {"max", DLOP_UINT8, 2, {3, 4}, {0}, 1, {0}, 0};
  run_case(&m, 2, 0, 255, NULL, 0, &r);
  ck_assert_int_eq(r.out_dtype, DLOP_UINT8);
  ck_assert(r.out_ndim == 1 && r.out_shape[0] == 4);
  check_result(&m, &r);
  result_free(&r);
}
END_TEST

/* ---- layouts: strided, negative, broadcast (zero stride), transposed ------------------- */

START_TEST(test_strided_layouts) {
  static const int64_t layouts[][3] = {{120, -10, 2}, {0, 5, 1}, {1, 4, 24}, {-30, 1, -6}, {0, 0, 1}};
  static const int64_t axes[][2] = {{0, 0}, {1, 0}, {2, 0}, {0, 2}, {1, 2}};
  static const int32_t naxes[] = {1, 1, 1, 2, 2};
  static const dlop_dtype dtypes[] = {DLOP_FLOAT32, DLOP_FLOAT16, DLOP_INT32, DLOP_FLOAT64};
  dlop_test_load_bundled_plugins();
  for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++)
    for (size_t a = 0; a < sizeof naxes / sizeof naxes[0]; a++)
      for (size_t t = 0; t < 4; t++)
        for (size_t o = 0; o < 4; o++) {
          if (strcmp(ops[o], "mean") == 0 && !dlop_dtype_is_float(dtypes[t])) continue;
          reduce_case c = {ops[o], dtypes[t], 3, {4, 6, 5}, {layouts[l][0], layouts[l][1], layouts[l][2]},
                           naxes[a], {axes[a][0], axes[a][1]}, (int)(a & 1)};
          check_case(&c, 500 + l * 50 + a * 10 + t);
        }
}
END_TEST

/* ---- empty axes, 0-d inputs, NaN ---------------------------------------------------------- */

START_TEST(test_empty_axes) {
  reduce_result r;
  dlop_graph *graph;
  dlop_var *x, *y;
  dlop_test_load_bundled_plugins();
  reduce_case s = {"sum", DLOP_FLOAT32, 2, {3, 0}, {0}, 1, {1}, 0};
  run_case(&s, 1, -1, 1, NULL, 0, &r);
  ck_assert(r.out_ndim == 1 && r.out_shape[0] == 3);
  for (int m = 0; m < 3; m++) ck_assert(r.actual[m] == 0.0);
  result_free(&r);
  reduce_case si = {"sum", DLOP_INT16, 2, {3, 0}, {0}, 1, {1}, 1};
  run_case(&si, 1, -1, 1, NULL, 0, &r);
  ck_assert(r.out_ndim == 2 && r.out_shape[0] == 3 && r.out_shape[1] == 1);
  for (int m = 0; m < 3; m++) ck_assert(r.actual[m] == 0.0);
  result_free(&r);
  reduce_case mean = {"mean", DLOP_FLOAT16, 2, {3, 0}, {0}, 1, {1}, 0};
  run_case(&mean, 1, -1, 1, NULL, 0, &r);
  for (int m = 0; m < 3; m++) ck_assert_msg(isnan(r.actual[m]), "mean of nothing is %g", r.actual[m]);
  result_free(&r);
  reduce_case max0 = {"max", DLOP_FLOAT32, 2, {3, 0}, {0}, 1, {0}, 0}; /* axis 0 has 3 */
  run_case(&max0, 1, -1, 1, NULL, 0, &r);
  ck_assert(r.out_ndim == 1 && r.out_shape[0] == 0 && r.outputs == 0);
  result_free(&r);
  reduce_case max = {"max", DLOP_FLOAT32, 2, {3, 0}, {0}, 1, {1}, 0};
  ck_assert_int_eq(apply_case(&max, &graph, &x, &y), DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(dlop_last_error(),
                       "max: cannot reduce an empty axis (axis 1 of (3, 0)): max has no identity") != NULL,
                "message: %s", dlop_last_error());
  dlop_graph_destroy(graph);
  reduce_case min = {"min", DLOP_INT8, 2, {3, 0}, {0}, -1, {0}, 0};
  ck_assert_int_eq(apply_case(&min, &graph, &x, &y), DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "min: cannot reduce an empty axis (axis 1 of (3, 0))") != NULL,
                "message: %s", dlop_last_error());
  dlop_graph_destroy(graph);
}
END_TEST

START_TEST(test_zero_d) {
  reduce_result r;
  dlop_graph *graph;
  dlop_var *x, *y;
  const double value[] = {-2.5};
  dlop_test_load_bundled_plugins();
  for (size_t o = 0; o < 4; o++) {
    reduce_case c = {ops[o], DLOP_FLOAT64, 0, {0}, {0}, 0, {0}, o & 1};
    run_case(&c, 1, 0, 0, value, 1, &r);
    ck_assert_int_eq(r.out_ndim, 0);
    ck_assert_msg(r.actual[0] == -2.5, "%s of a 0-d -2.5 gave %g", ops[o], r.actual[0]);
    result_free(&r);
  }
  reduce_case bad = {"sum", DLOP_FLOAT32, 0, {0}, {0}, 1, {0}, 0};
  ck_assert_int_eq(apply_case(&bad, &graph, &x, &y), DLOP_TYPE_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "rank 0") != NULL, "message: %s", dlop_last_error());
  dlop_graph_destroy(graph);
}
END_TEST

START_TEST(test_nan_propagates) {
  reduce_result r;
  const double values[] = {1.0, NAN, -3.0, 7.0, 2.0};
  static const dlop_dtype dtypes[] = {DLOP_FLOAT32, DLOP_FLOAT16, DLOP_BFLOAT16, DLOP_FLOAT64};
  dlop_test_load_bundled_plugins();
  for (size_t t = 0; t < 4; t++)
    for (size_t o = 0; o < 4; o++) {
      /* (4, 5): row i holds values[(5 i + j) % 5], so every row has one NaN in column 1;
       * reducing axis 0, only column 1 is NaN */
      reduce_case c = {ops[o], dtypes[t], 2, {4, 5}, {0}, 1, {0}, 0};
      run_case(&c, 1, 0, 0, values, 5, &r);
      check_result(&c, &r);
      ck_assert(isnan(r.actual[1]) && !isnan(r.actual[0]) && !isnan(r.actual[3]));
      result_free(&r);
      reduce_case rows = {ops[o], dtypes[t], 2, {4, 5}, {0}, 1, {1}, 0};
      run_case(&rows, 1, 0, 0, values, 5, &r);
      for (int m = 0; m < 4; m++) ck_assert(isnan(r.actual[m]));
      result_free(&r);
    }
}
END_TEST

/* ---- long reductions and thread-count independence ---------------------------------------- */

START_TEST(test_large) {
  static const dlop_dtype dtypes[] = {DLOP_FLOAT32, DLOP_FLOAT16, DLOP_FLOAT64, DLOP_INT32};
  dlop_test_load_bundled_plugins();
  for (size_t t = 0; t < 4; t++)
    for (size_t o = 0; o < 4; o++) {
      if (strcmp(ops[o], "mean") == 0 && !dlop_dtype_is_float(dtypes[t])) continue;
      reduce_case full = {ops[o], dtypes[t], 1, {1000003}, {0}, 0, {0}, 0};
      check_case(&full, 77 + t);
      reduce_case columns = {ops[o], dtypes[t], 2, {333334, 3}, {0}, 1, {0}, 0};
      check_case(&columns, 78 + t);
    }
  /* over the first axis of inputs larger than the caches, rows far apart: the lane leaves'
   * passes of four rows, then of one row (48 rows: 8 + 32 + 8), and a tail (45 rows) */
  reduce_case far32 = {"sum", DLOP_FLOAT32, 2, {48, 90000}, {0}, 1, {0}, 0};
  check_case(&far32, 81);
  reduce_case far64 = {"sum", DLOP_FLOAT64, 2, {45, 50000}, {0}, 1, {0}, 0};
  check_case(&far64, 82);
  /* positive values: the relative error of the float32 sum itself is bounded */
  reduce_result r;
  reduce_case positive = {"sum", DLOP_FLOAT32, 1, {1000003}, {0}, 0, {0}, 0};
  run_case(&positive, 5, 0.5, 1.5, NULL, 0, &r);
  ck_assert_msg(fabs(r.actual[0] - r.expected[0]) <= 1e-6 * r.expected[0], "sum %.9g, expected %.9g",
                r.actual[0], r.expected[0]);
  result_free(&r);
}
END_TEST

/* Runs c in a child with DLOP_NUM_THREADS=threads and returns its output's bytes. */
static void bits_with_threads(const reduce_case *c, const char *threads, unsigned char *bits,
                              size_t size) {
  int pipe_fds[2];
  ck_assert_int_eq(pipe(pipe_fds), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    reduce_result r;
    close(pipe_fds[0]);
    setenv("DLOP_NUM_THREADS", threads, 1);
    dlop_test_load_bundled_plugins();
    run_case(c, 99, -1, 1, NULL, 0, &r);
    size_t n = (size_t)r.outputs * sizeof(double);
    ssize_t w = write(pipe_fds[1], r.actual, n < size ? n : size);
    _exit(w == (ssize_t)(n < size ? n : size) ? 0 : 1);
  }
  close(pipe_fds[1]);
  size_t got = 0;
  while (got < size) {
    ssize_t n = read(pipe_fds[0], bits + got, size - got);
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(pipe_fds[0]);
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  ck_assert_msg(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0 && got == size,
                "the child with %s threads failed (read %zu of %zu bytes)", threads, got, size);
}

START_TEST(test_thread_count_independent) {
  /* a full reduction (split into chunks across threads), few outputs, many outputs */
  static const reduce_case cases[] = {
      {"sum", DLOP_FLOAT32, 1, {1000003}, {0}, 0, {0}, 0},
      {"mean", DLOP_FLOAT16, 2, {3, 400001}, {0}, 1, {1}, 0},
      {"sum", DLOP_FLOAT32, 2, {200003, 5}, {0}, 1, {0}, 0},
      {"sum", DLOP_FLOAT64, 2, {5000, 201}, {0}, 1, {1}, 0},
  };
  static const size_t outputs[] = {1, 3, 5, 5000};
  for (size_t i = 0; i < 4; i++) {
    size_t size = outputs[i] * sizeof(double);
    unsigned char *one = malloc(size), *four = malloc(size);
    bits_with_threads(&cases[i], "1", one, size);
    bits_with_threads(&cases[i], "4", four, size);
    ck_assert_msg(memcmp(one, four, size) == 0, "case %zu: 1 and 4 threads differ", i);
    free(one);
    free(four);
  }
}
END_TEST

/* ---- errors ------------------------------------------------------------------------------- */

static void expect_error(const reduce_case *c, int status, const char *fragment) {
  dlop_graph *graph;
  dlop_var *x, *y;
  int got = apply_case(c, &graph, &x, &y);
  ck_assert_msg(got == status, "%s: status %s, expected %s (%s)", c->op, dlop_status_name(got),
                dlop_status_name(status), dlop_last_error());
  ck_assert_msg(strstr(dlop_last_error(), fragment) != NULL, "message \"%s\" lacks \"%s\"",
                dlop_last_error(), fragment);
  dlop_graph_destroy(graph);
}

START_TEST(test_errors) {
  dlop_test_load_bundled_plugins();
  reduce_case repeated = {"sum", DLOP_FLOAT32, 3, {2, 3, 4}, {0}, 2, {1, -2}, 0};
  expect_error(&repeated, DLOP_TYPE_ERROR,
               "sum: axes (1, -2) are invalid for an input of rank 3: axis -2 is repeated");
  /* -1 is an axis here, not an unknown dim: the message quotes it as given */
  reduce_case repeated_last = {"sum", DLOP_FLOAT32, 1, {4}, {0}, 2, {0, -1}, 0};
  expect_error(&repeated_last, DLOP_TYPE_ERROR,
               "sum: axes (0, -1) are invalid for an input of rank 1: axis -1 is repeated");
  reduce_case range = {"max", DLOP_INT32, 3, {2, 3, 4}, {0}, 2, {0, 3}, 0};
  expect_error(&range, DLOP_TYPE_ERROR,
               "max: axes (0, 3) are invalid for an input of rank 3: axis 3 is out of range [-3, 2]");
  reduce_case negative = {"min", DLOP_FLOAT64, 2, {2, 3}, {0}, 1, {-3}, 0};
  expect_error(&negative, DLOP_TYPE_ERROR, "axis -3 is out of range [-2, 1]");
  reduce_case mean_int = {"mean", DLOP_INT32, 1, {4}, {0}, 0, {0}, 0};
  expect_error(&mean_int, DLOP_TYPE_ERROR, "mean: dtype int32 is not supported");
  reduce_case sum_bool = {"sum", DLOP_BOOL, 1, {4}, {0}, 0, {0}, 0};
  expect_error(&sum_bool, DLOP_TYPE_ERROR, "sum: dtype bool is not supported");
}
END_TEST

/* Unknown dims propagate through make_node. */
START_TEST(test_unknown_dims) {
  dlop_graph *graph;
  dlop_var *x, *y;
  reduce_case c = {"sum", DLOP_FLOAT32, 3, {DLOP_DIM_UNKNOWN, 4, DLOP_DIM_UNKNOWN}, {0}, 1, {1}, 1};
  dlop_test_load_bundled_plugins();
  DLOP_CK_OK(apply_case(&c, &graph, &x, &y));
  const dlop_type *t = dlop_var_type(y);
  ck_assert(t->ndim == 3 && t->shape[0] == DLOP_DIM_UNKNOWN && t->shape[1] == 1 &&
            t->shape[2] == DLOP_DIM_UNKNOWN);
  dlop_graph_destroy(graph);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("reduce");
  TCase *tc = dlop_test_tcase(suite, "cpu", 120, NULL, NULL);
  dlop_test_add_tests(tc,
                      test_ops_dtypes_axes,
                      test_output_types_and_shapes,
                      test_strided_layouts,
                      test_empty_axes,
                      test_zero_d,
                      test_nan_propagates,
                      test_large,
                      test_thread_count_independent,
                      test_errors,
                      test_unknown_dims,
                      NULL);
  return dlop_test_run_suite(suite);
}
