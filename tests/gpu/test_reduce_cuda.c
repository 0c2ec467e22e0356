/* test_reduce_cuda.c — the reduce plugin on CUDA against its CPU results: every op and dtype
 * over axes and keepdims, strided, negative-stride and broadcast inputs, empty axes, 0-d, long
 * reductions (a 2^24 + 7 full sum: the two-pass path), columns, and bit-identical reruns. The
 * columns kernel (first and middle axes) and the rows kernel's vector loads get every op and
 * dtype on integer-valued data, whose sums are exact in any order, so CUDA must equal the CPU
 * bit for bit (a lost or doubled element shows), with NaN and infinities mixed in, over odd,
 * tiny, empty, transposed, negative-stride, broadcast and misaligned layouts (packs of 2, 4
 * and 8 outputs per thread, vector loads and element by element); and long float32, float16
 * and bfloat16 columns against a double reference within a few ulps of their sum of magnitudes.
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

/* ---- the columns kernel and the rows kernel's vectors: exact comparisons ------------------ */

/* Integer values in [-8, 8] ([0, 16] for uint8): every sum of them is exact in the accumulator
 * (float32 holds integers to 2^24) whatever the order, and a mean or a 16-bit float output
 * rounds that one exact value on both devices. With specials, float inputs also get NaN, +inf
 * and -inf at scattered elements: outputs then hold NaN, infinities or exact values on both
 * devices alike (NaN propagates through max and min, inf - inf is NaN in a sum). */
static void fill_exact(void *data, dlop_dtype dtype, int64_t n, uint64_t seed, int specials) {
  uint64_t state = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int64_t i = 0; i < n; i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    int value = (int)((state >> 33) % 17);
    dlop_test_set(data, dtype, i, dtype == DLOP_UINT8 ? (double)value : (double)(value - 8));
  }
  if (specials && dlop_dtype_is_float(dtype))
    for (int64_t i = 0; i < n; i++) {
      uint64_t h = (uint64_t)i * 2654435761u % 1009;
      if (h == 3) dlop_test_set(data, dtype, i, NAN);
      else if (h == 5 || h == 6) dlop_test_set(data, dtype, i, INFINITY);
      else if (h == 7) dlop_test_set(data, dtype, i, -INFINITY);
    }
}

/* offset: extra elements before the tensor's first one (a start that breaks the alignment of
 * the columns kernel's vector loads). */
static void check_exact(const reduce_case *c, uint64_t seed, int specials, int64_t offset) {
  int64_t strides[4], first, n_cpu, n_cuda;
  int64_t span = dlop_test_layout_span(c->ndim, c->shape, dlop_test_strides_given(c->ndim, c->strides),
                                       strides, &first);
  span += offset;
  first += offset;
  void *data = malloc((size_t)(span > 0 ? span : 1) * dlop_dtype_size(c->dtype));
  ck_assert_ptr_nonnull(data);
  fill_exact(data, c->dtype, span, seed, specials);
  dlop_dtype out_dtype;
  double *cpu = run_on(c, CPU, data, span, first, strides, &n_cpu, &out_dtype, 0);
  double *cuda = run_on(c, CUDA, data, span, first, strides, &n_cuda, &out_dtype, 1);
  ck_assert_int_eq(n_cpu, n_cuda);
  for (int64_t m = 0; m < n_cpu; m++) {
    int ok = (isnan(cpu[m]) && isnan(cuda[m])) || cpu[m] == cuda[m];
    ck_assert_msg(ok, "%s %s shape (%lld, %lld, %lld, %lld) strides (%lld, %lld, %lld, %lld) axes "
                  "(%lld, %lld) naxes %d offset %lld%s: [%lld] cpu %.17g, cuda %.17g",
                  c->op, dlop_dtype_name(c->dtype), (long long)c->shape[0], (long long)c->shape[1],
                  (long long)c->shape[2], (long long)c->shape[3], (long long)strides[0],
                  (long long)strides[1], (long long)strides[2], (long long)strides[3],
                  (long long)c->axes[0], (long long)c->axes[1], (int)c->naxes, (long long)offset,
                  specials ? " with NaN and inf" : "", (long long)m, cpu[m], cuda[m]);
  }
  free(cpu);
  free(cuda);
  free(data);
}

/* Layouts of the columns kernel (reduce_cuda_plan.h: consecutive outputs closer in memory than
 * consecutive reduced elements; pairs of outputs per thread for the float dtypes where the
 * layout has them) and of short contiguous reductions (the rows kernel). offset: elements
 * before the first one. */
typedef struct axis_layout {
  int32_t ndim;
  int64_t shape[4];
  int64_t strides[4];
  int32_t naxes;
  int64_t axes[2];
  int keepdims;
  int64_t offset;
} axis_layout;

static const axis_layout COLUMN_LAYOUTS[] = {
    {2, {4096, 300}, {0}, 1, {0}, 0, 0},           /* first axis: strips in 32 parts */
    {2, {1000, 2048}, {0}, 1, {0}, 0, 0},          /* first axis, wide: pairs in 8 parts */
    {2, {(1 << 18) + 3, 3}, {0}, 1, {0}, 0, 0},    /* three long columns: 4-wide strips, 64 groups */
    {2, {7, 33}, {0}, 1, {0}, 1, 0},               /* odd and tiny, keepdims */
    {3, {5, 1001, 37}, {0}, 1, {1}, 0, 0},         /* middle axis, odd sizes */
    {3, {64, 512, 256}, {0}, 1, {1}, 0, 0},        /* middle axis: 16-byte packs in 32 groups, one pass */
    {3, {300, 3, 4}, {0}, 1, {1}, 0, 0},           /* middle axis, short: a thread per output */
    {3, {9, 4099, 3}, {0}, 1, {1}, 1, 0},          /* middle axis, narrow, keepdims */
    {3, {40, 60, 50}, {0}, 2, {0, 1}, 0, 0},       /* first two axes */
    {4, {3, 70, 5, 40}, {0}, 2, {0, 2}, 0, 0},     /* two reduced dims that do not merge */
    {2, {40, 50}, {-100, 2}, 1, {0}, 0, 0},        /* negative and gapped strides */
    {2, {700, 300}, {1, 700}, 1, {1}, 0, 0},       /* a transposed matrix's last axis */
    {2, {1000, 64}, {1, 0}, 1, {0}, 0, 0},         /* broadcast outputs (stride 0) */
    {2, {1, 5000}, {0}, 1, {0}, 0, 0},             /* a 1-element reduction: a copy */
    {2, {5000, 1}, {0}, 1, {0}, 0, 0},             /* one output (the block kernel) */
    {2, {1, 1}, {0}, 1, {0}, 0, 0},                /* one element */
    {3, {64, 64, 256}, {0}, 1, {2}, 0, 0},         /* last axis, aligned rows: vector loads */
    {2, {64, 257}, {0}, 1, {1}, 0, 0},             /* last axis, rows mostly misaligned */
    {3, {65, 33, 255}, {0}, 1, {2}, 1, 0},         /* last axis, odd, keepdims */
    {2, {4096, 300}, {0}, 1, {0}, 0, 1},           /* first axis, pairs misaligned: one by one */
    {3, {64, 512, 256}, {0}, 1, {1}, 0, 3},        /* middle axis likewise */
    {2, {(1 << 16) + 1, 6}, {0}, 1, {0}, 0, 0},    /* three pairs, long: many groups and parts */
    {2, {1000, 2048}, {0}, 1, {0}, 0, 2},          /* first axis, pairs 4 (16-bit) or 8 bytes off a line */
    {3, {64, 256, 68}, {0}, 1, {1}, 0, 0},         /* kept dim of 68: 16-bit packs of 4, 16 groups */
    {3, {64, 256, 68}, {0}, 1, {1}, 0, 2},         /* the same, 4 bytes off: element by element */
    {3, {64, 256, 64}, {0}, 1, {1}, 0, 0},         /* middle axis in one pass: 16 groups */
};
#define NUM_COLUMN_LAYOUTS ((int)(sizeof COLUMN_LAYOUTS / sizeof COLUMN_LAYOUTS[0]))

static reduce_case case_of(const char *op, dlop_dtype dtype, const axis_layout *a) {
  reduce_case c;
  memset(&c, 0, sizeof c);
  c.op = op;
  c.dtype = dtype;
  c.ndim = a->ndim;
  memcpy(c.shape, a->shape, sizeof c.shape);
  memcpy(c.strides, a->strides, sizeof c.strides);
  c.naxes = a->naxes;
  c.axes[0] = a->axes[0];
  c.axes[1] = a->axes[1];
  c.keepdims = a->keepdims;
  return c;
}

START_TEST(test_columns_every_op_and_dtype) {
  dlop_test_load_bundled_plugins();
  for (int l = 0; l < NUM_COLUMN_LAYOUTS; l++)
    for (size_t o = 0; o < 4; o++)
      for (size_t t = 0; t < 9; t++) {
        if (strcmp(ops[o], "mean") == 0 && !dlop_dtype_is_float(numeric[t])) continue;
        reduce_case c = case_of(ops[o], numeric[t], &COLUMN_LAYOUTS[l]);
        check_exact(&c, 1000u + 37u * (uint64_t)l + 7u * t + o, 0, COLUMN_LAYOUTS[l].offset);
      }
}
END_TEST

START_TEST(test_columns_nan_and_inf) {
  static const dlop_dtype floats[] = {DLOP_FLOAT16, DLOP_BFLOAT16, DLOP_FLOAT32, DLOP_FLOAT64};
  dlop_test_load_bundled_plugins();
  for (int l = 0; l < NUM_COLUMN_LAYOUTS; l++)
    for (size_t o = 0; o < 4; o++)
      for (size_t t = 0; t < 4; t++) {
        reduce_case c = case_of(ops[o], floats[t], &COLUMN_LAYOUTS[l]);
        check_exact(&c, 5000u + 37u * (uint64_t)l + 7u * t + o, 1, COLUMN_LAYOUTS[l].offset);
      }
}
END_TEST

/* Empty reductions along a first or middle axis: sum 0 and mean NaN for every output. */
START_TEST(test_columns_empty) {
  static const axis_layout empty[] = {{2, {0, 77}, {0}, 1, {0}, 0, 0},
                                       {3, {4, 0, 9}, {0}, 1, {1}, 1, 0}};
  dlop_test_load_bundled_plugins();
  for (int l = 0; l < 2; l++)
    for (size_t t = 0; t < 9; t++) {
      reduce_case c = case_of("sum", numeric[t], &empty[l]);
      check_exact(&c, 77u + t, 0, 0);
      if (!dlop_dtype_is_float(numeric[t])) continue;
      c.op = "mean";
      check_exact(&c, 78u + t, 0, 0);
    }
}
END_TEST

/* Long float columns (parts and the finish pass) against a double reference. float32: within
 * 4 ulps of the column's sum of magnitudes (each thread's sum is compensated, the parts too).
 * float16 and bfloat16 (summed in float32 without compensation): within half an ulp of the
 * 16-bit result (its own rounding) plus 8 float32 ulps of the sum of magnitudes. */
START_TEST(test_columns_float_accuracy) {
  static const int64_t shapes[][2] = {{1 << 20, 3}, {8192, 1024}, {3001, 4099}};
  static const char *const mean_or_sum[] = {"sum", "mean"};
  static const dlop_dtype dtypes[] = {DLOP_FLOAT32, DLOP_FLOAT16, DLOP_BFLOAT16};
  dlop_test_load_bundled_plugins();
  for (int t = 0; t < 3; t++)
    for (int s = 0; s < 3; s++)
      for (int o = 0; o < 2; o++) {
        const dlop_dtype dtype = dtypes[t];
        const int64_t rows = shapes[s][0], cols = shapes[s][1], n = rows * cols;
        reduce_case c = {mean_or_sum[o], dtype, 2, {rows, cols}, {0}, 1, {0}, 0};
        int64_t strides[4] = {cols, 1}, outputs;
        void *data = malloc((size_t)n * dlop_dtype_size(dtype));
        double *expected = calloc((size_t)cols, sizeof(double)), *magnitude = calloc((size_t)cols, sizeof(double));
        ck_assert(data && expected && magnitude);
        dlop_test_fill_random(data, dtype, n, 900u + (uint64_t)(s + 3 * t), -2.0, 2.0);
        for (int64_t r = 0; r < rows; r++)
          for (int64_t k = 0; k < cols; k++) {
            double v = dlop_test_get(data, dtype, r * cols + k);
            expected[k] += v;
            magnitude[k] += fabs(v);
          }
        /* half an ulp of a 16-bit result is at most 2^-11 (float16) or 2^-8 (bfloat16) of it */
        const double half_ulp = dtype == DLOP_FLOAT16 ? 0x1p-11 : dtype == DLOP_BFLOAT16 ? 0x1p-8 : 0.0;
        const double float32_ulps = dtype == DLOP_FLOAT32 ? 4.0 : 8.0;
        dlop_dtype out_dtype;
        double *cuda = run_on(&c, CUDA, data, n, 0, strides, &outputs, &out_dtype, 1);
        ck_assert_int_eq(outputs, cols);
        for (int64_t k = 0; k < cols; k++) {
          double divisor = o ? (double)rows : 1.0, want = expected[k] / divisor;
          double tol = half_ulp * fabs(want) + float32_ulps * 0x1p-24 * magnitude[k] / divisor;
          ck_assert_msg(fabs(cuda[k] - want) <= tol,
                        "%s %s (%lld, %lld) axis 0: [%lld] cuda %.9g, expected %.9g (tol %g)", c.op,
                        dlop_dtype_name(dtype), (long long)rows, (long long)cols, (long long)k,
                        cuda[k], want, tol);
        }
        free(cuda);
        free(expected);
        free(magnitude);
        free(data);
      }
}
END_TEST

int main(void) {
  dlop_test_require_cuda_or_skip();
  Suite *suite = suite_create("reduce_cuda");
  TCase *tc = dlop_test_tcase(suite, "parity", 300, NULL, NULL);
  dlop_test_add_tests(tc,
                      test_ops_dtypes_axes,
                      test_layouts_and_sizes,
                      test_columns_every_op_and_dtype,
                      test_columns_nan_and_inf,
                      test_columns_empty,
                      test_columns_float_accuracy,
                      NULL);
  return dlop_test_run_suite(suite);
}
