/* fusion_cases.c — the parity cases of fusion_cases.h: every fusable op of one dtype in one
 * graph, each in a group of its own (its inputs' bit-copy casts and itself), so that one
 * compile covers them all; inputs with the edge values; and the comparison of outputs. */
#include "fusion_cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_runner.h"
#include "test_support.h"

/* op, inputs, the dtypes it takes, its body exact */
typedef struct fusable_op {
  const char *name;
  int32_t inputs;
  uint32_t dtypes;
  int exact;
} fusable_op;

#define FLOATS DLOP_DTYPES_FLOAT
#define NUMERIC (DLOP_DTYPES_FLOAT | DLOP_DTYPES_INT)
#define ALL DLOP_DTYPES_ALL

static const fusable_op ops[] = {
    {"add", 2, NUMERIC, 1},      {"sub", 2, NUMERIC, 1},       {"mul", 2, NUMERIC, 1},
    {"div", 2, FLOATS, 1},       {"pow", 2, FLOATS, 0},        {"maximum", 2, NUMERIC, 1},
    {"minimum", 2, NUMERIC, 1},  {"neg", 1, NUMERIC, 1},       {"abs", 1, NUMERIC, 1},
    {"log", 1, FLOATS, 0},       {"sqrt", 1, FLOATS, 1},       {"tanh", 1, FLOATS, 0},
    {"sigmoid", 1, FLOATS, 0},   {"equal", 2, ALL, 1},         {"not_equal", 2, ALL, 1},
    {"less", 2, ALL, 1},         {"less_equal", 2, ALL, 1},    {"greater", 2, ALL, 1},
    {"greater_equal", 2, ALL, 1}, {"where", 3, ALL, 1},        {"double", 1, NUMERIC, 1},
    {"multiply_them", 2, NUMERIC, 1}, {"exp", 1, FLOATS, 0},
};

static dlop_var *cast_to(dlop_graph *graph, dlop_var *x, dlop_dtype dtype) {
  dlop_named_param param = {"dtype", {.kind = DLOP_PARAM_STRING, .count = 1,
                                       .u.s = dlop_dtype_name(dtype)}};
  dlop_var *y;
  DLOP_CK_OK(dlop_graph_apply(graph, "cast", &x, 1, &param, 1, &y, 1));
  return y;
}

void dlop_test_fusion_cases_build(dlop_graph *graph, dlop_dtype dtype, dlop_test_fusion_cases *cases) {
  int64_t unknown = DLOP_DIM_UNKNOWN;
  memset(cases, 0, sizeof *cases);
  DLOP_CK_OK(dlop_graph_input(graph, "a", dtype, 1, &unknown, &cases->inputs[0]));
  DLOP_CK_OK(dlop_graph_input(graph, "b", dtype, 1, &unknown, &cases->inputs[1]));
  DLOP_CK_OK(dlop_graph_input(graph, "c", DLOP_BOOL, 1, &unknown, &cases->inputs[2]));
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
    const fusable_op *op = &ops[k];
    if (!(op->dtypes & DLOP_DTYPE_BIT(dtype))) continue;
    dlop_var *operands[3];
    int where = strcmp(op->name, "where") == 0;
    for (int32_t i = 0; i < op->inputs; i++) {
      /* a fresh bit-copy cast per operand: the op joins its operands' group, of its own */
      int32_t which = where ? (i == 0 ? 2 : i - 1) : i;
      operands[i] = cast_to(graph, cases->inputs[which], which == 2 ? DLOP_BOOL : dtype);
    }
    int32_t c = cases->count++;
    DLOP_CK_OK(dlop_graph_apply(graph, op->name, operands, op->inputs, NULL, 0, &cases->outputs[c], 1));
    cases->exact[c] = op->exact;
    snprintf(cases->labels[c], sizeof cases->labels[c], "%s %s", op->name, dlop_dtype_name(dtype));
  }
  for (int32_t to = 0; to < DLOP_DTYPE_COUNT; to++) {
    int32_t c = cases->count++;
    cases->outputs[c] = cast_to(graph, cast_to(graph, cases->inputs[0], dtype), (dlop_dtype)to);
    cases->exact[c] = 1;
    snprintf(cases->labels[c], sizeof cases->labels[c], "cast %s to %s", dlop_dtype_name(dtype),
             dlop_dtype_name((dlop_dtype)to));
  }
}

/* The edge values of a dtype, written from element 0; how many. */
static int64_t edge_values(void *data, dlop_dtype dtype, int64_t n) {
  static const double floats[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0, 0.5,
                                  -2.5, 1e-300, 1e300, -1e300};
  static const double ints[] = {0, 1, -1, 127, -128, 255, 32767, -32768, 2147483647.0,
                                -2147483648.0, 9.2e18, -9.2e18};
  int64_t count = 0;
  if (DLOP_DTYPES_FLOAT & DLOP_DTYPE_BIT(dtype)) {
    /* the smallest subnormal and the largest finite value of the dtype itself */
    double tiny = dtype == DLOP_FLOAT16 ? ldexp(1, -24) : dtype == DLOP_BFLOAT16 ? ldexp(1, -133)
                  : dtype == DLOP_FLOAT32 ? ldexp(1, -149) : ldexp(1, -1074);
    double huge = dtype == DLOP_FLOAT16 ? 65504.0 : dtype == DLOP_BFLOAT16 ? 3.3895313892515355e38
                  : dtype == DLOP_FLOAT32 ? 3.4028234663852886e38 : 1.7976931348623157e308;
    for (size_t k = 0; k < sizeof floats / sizeof floats[0] && count < n; k++)
      dlop_test_set(data, dtype, count++, floats[k]);
    if (count < n) dlop_test_set(data, dtype, count++, tiny);
    if (count < n) dlop_test_set(data, dtype, count++, -tiny);
    if (count < n) dlop_test_set(data, dtype, count++, huge);
    if (count < n) dlop_test_set(data, dtype, count++, -huge);
    return count;
  }
  double low, high;
  if (!dlop_test_integer_range(dtype, &low, &high)) { /* bool */
    for (; count < n && count < 2; count++) dlop_test_set(data, dtype, count, (double)count);
    return count;
  }
  for (size_t k = 0; k < sizeof ints / sizeof ints[0] && count < n; k++) {
    double v = ints[k] < low ? low : ints[k] > high ? high : ints[k];
    dlop_test_set(data, dtype, count++, v);
  }
  return count;
}

static dlop_array *make_input(dlop_dtype dtype, int64_t n, int32_t stride, int32_t offset,
                              uint64_t seed, int with_edges, dlop_device device) {
  int64_t total = n * stride + offset;
  size_t size = dlop_dtype_size(dtype);
  void *data = malloc((size_t)total * size + 1);
  double low = -5, high = 5;
  if (data == NULL) ck_abort_msg("out of memory");
  dlop_test_integer_range(dtype, &low, &high);
  if (dtype == DLOP_BOOL) {
    low = 0;
    high = 1;
  }
  dlop_test_fill_random(data, dtype, total, seed, low, high);
  if (with_edges) {
    /* the edge values at the elements the view reads, the others random */
    void *edges = malloc(32 * size);
    if (edges == NULL) ck_abort_msg("out of memory");
    int64_t count = edge_values(edges, dtype, n < 32 ? n : 32);
    for (int64_t i = 0; i < count; i++)
      memcpy((char *)data + (size_t)(offset + i * stride) * size, (char *)edges + (size_t)i * size,
             size);
    free(edges);
  }
  dlop_array *array = NULL;
  DLOP_CK_OK(dlop_array_from_host(device, dtype, 1, &total, data, &array));
  free(data);
  if (stride == 1 && offset == 0) return array;
  dlop_array *view = NULL;
  int64_t strides = stride;
  DLOP_CK_OK(dlop_array_view(array, 1, &n, &strides, (uint64_t)offset * size, &view));
  dlop_array_release(array);
  return view;
}

void dlop_test_fusion_inputs(dlop_dtype dtype, int64_t n, int64_t b_n, int32_t stride,
                             int32_t offset, uint64_t seed, dlop_device device,
                             dlop_array **arrays) {
  arrays[0] = make_input(dtype, n, stride, offset, seed, 1, device);
  /* b: the edge values too, so that edge meets edge (and random values) */
  arrays[1] = make_input(dtype, b_n, stride, offset, seed + 1, b_n > 1, device);
  arrays[2] = make_input(DLOP_BOOL, n, 1, offset, seed + 2, 0, device);
}

/* One ulp of a dtype, relative. */
static double ulp_of(dlop_dtype dtype) {
  switch (dtype) {
    case DLOP_FLOAT16: return ldexp(1, -10);
    case DLOP_BFLOAT16: return ldexp(1, -7);
    case DLOP_FLOAT32: return ldexp(1, -23);
    case DLOP_FLOAT64: return ldexp(1, -52);
    default: return 0;
  }
}

void dlop_test_fusion_compare(const dlop_array *expected, const dlop_array *actual, int exact,
                              double ulps, const char *label, const char *what) {
  char report[1024];
  dlop_dtype dtype = dlop_array_dtype(expected);
  int64_t n = dlop_array_numel(expected);
  ck_assert_msg(dlop_array_dtype(actual) == dtype && dlop_array_numel(actual) == n,
                "%s, %s: %s[%lld] against %s[%lld]", label, what,
                dlop_dtype_name(dlop_array_dtype(actual)), (long long)dlop_array_numel(actual),
                dlop_dtype_name(dtype), (long long)n);
  void *e = dlop_test_read_back(expected), *a = dlop_test_read_back(actual);
  double rtol = ulps * ulp_of(dtype);
  /* below the smallest normal, relative error means nothing: an absolute floor of a few
   * subnormal steps */
  double atol = dtype == DLOP_FLOAT64 ? 1e-300 : dtype == DLOP_FLOAT16 ? 1e-6 : 1e-37;
  int64_t bad = exact ? dlop_test_compare_bits(e, a, dtype, n, report, sizeof report)
                      : dlop_test_compare(e, a, dtype, n, atol, rtol, report, sizeof report);
  free(e);
  free(a);
  ck_assert_msg(bad == 0, "%s, %s: %lld of %lld elements differ%s: %s", label, what,
                (long long)bad, (long long)n, exact ? " (bits)" : "", report);
}
