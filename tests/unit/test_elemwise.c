/* test_elemwise.c — the elemwise plugin on the CPU, driven through its op descriptors: every op
 * and dtype against plain C references computed here (long double / wrapping uint64, rounded to
 * the dtype independently of the plugin), broadcasting ((3,1)x(1,4), 0-d, size-0 dims), strided
 * and negative-stride inputs, integer wraparound, NaN propagation, the cast table with
 * saturation, in-place runs, and type/shape errors with their messages. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_runner.h"
#include "test_support.h"

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};

/* ---- tensors ---------------------------------------------------------------------------- */

typedef struct tt {
  dlop_tensor t;
  int64_t shape[DLOP_MAX_NDIM], strides[DLOP_MAX_NDIM];
  unsigned char *allocation;
  int64_t span; /* elements the strides reach */
} tt;

/* strides NULL: C-contiguous; any strides, negative and zero included. */
static void tt_init(tt *x, dlop_dtype dtype, int32_t ndim, const int64_t *shape, const int64_t *strides) {
  size_t elsize = dlop_dtype_size(dtype);
  int64_t first;
  memset(x, 0, sizeof *x);
  if (ndim > 0) memcpy(x->shape, shape, sizeof(int64_t) * (size_t)ndim); /* 0-d: shape NULL */
  x->span = dlop_test_layout_span(ndim, shape, strides, x->strides, &first);
  if (dlop_test_numel(ndim, shape) == 0) x->span = 0; /* nothing to fill */
  x->allocation = calloc((size_t)x->span + 1, elsize);
  ck_assert_ptr_nonnull(x->allocation);
  dlop_test_host_tensor(&x->t, x->allocation, (uint64_t)(first * (int64_t)elsize), dtype, ndim,
                        x->shape, x->strides);
}

static void tt_free(tt *x) { free(x->allocation); }
static dlop_dtype tt_dtype(const tt *x) { return dlop_tensor_dtype(&x->t); }
static void *tt_base(const tt *x) { return (char *)x->t.data + x->t.byte_offset; }

/* Element offset of output index i (C order over out_shape) in x, broadcast NumPy's way. */
static int64_t bcast_offset(const tt *x, int32_t out_ndim, const int64_t *out_shape, int64_t i) {
  int64_t offset = 0;
  for (int32_t d = out_ndim - 1; d >= 0; d--) {
    int64_t index = i % out_shape[d];
    int32_t j = d - (out_ndim - x->t.ndim);
    i /= out_shape[d];
    if (j >= 0 && x->shape[j] != 1) offset += index * x->strides[j];
  }
  return offset;
}

/* ---- element access, independent of the plugin ----------------------------------------- */

static int64_t get_int(const void *p, dlop_dtype dt, int64_t i) {
  switch (dt) {
    case DLOP_BOOL: return ((const uint8_t *)p)[i] != 0;
    case DLOP_INT8: return ((const int8_t *)p)[i];
    case DLOP_INT16: return ((const int16_t *)p)[i];
    case DLOP_INT32: return ((const int32_t *)p)[i];
    case DLOP_INT64: return ((const int64_t *)p)[i];
    case DLOP_UINT8: return ((const uint8_t *)p)[i];
    default: return 0;
  }
}

/* Every value of every dtype, exactly (long double has a 64-bit mantissa on x86-64). */
static long double get_ld(const void *p, dlop_dtype dt, int64_t i) {
  switch (dt) {
    case DLOP_FLOAT16: return dlop_test_half_to_float(((const uint16_t *)p)[i]);
    case DLOP_BFLOAT16: return dlop_test_bfloat16_to_float(((const uint16_t *)p)[i]);
    case DLOP_FLOAT32: return ((const float *)p)[i];
    case DLOP_FLOAT64: return ((const double *)p)[i];
    default: return (long double)get_int(p, dt, i);
  }
}

/* Round x to a binary format of p significant bits, smallest normal exponent emin and largest
 * finite value max, to nearest even (subnormals and overflow to inf included). */
static long double round_format(long double x, int p, int emin, long double max) {
  int e;
  if (isnan(x) || isinf(x) || x == 0) return x;
  frexpl(x, &e);
  int lead = e - 1 < emin ? emin : e - 1;
  long double quantum = ldexpl(1.0L, lead - (p - 1));
  long double r = nearbyintl(x / quantum) * quantum;
  if (fabsl(r) > max) return x > 0 ? INFINITY : -INFINITY;
  return r;
}

static int is_float(dlop_dtype dt) { return dlop_dtype_is_float(dt); }

/* Store the correctly rounded value of x (x exact) in element i of a dtype; integers and bool
 * take the low bytes of v (wrapping). */
static void set_ld(void *p, dlop_dtype dt, int64_t i, long double x) {
  switch (dt) {
    case DLOP_FLOAT16:
      ((uint16_t *)p)[i] = dlop_test_float_to_half((float)round_format(x, 11, -14, 65504.0L));
      return;
    case DLOP_BFLOAT16:
      ((uint16_t *)p)[i] = dlop_test_float_to_bfloat16((float)round_format(x, 8, -126, 0x1.FEp127L));
      return;
    case DLOP_FLOAT32: ((float *)p)[i] = (float)round_format(x, 24, -126, 0x1.FFFFFEp127L); return;
    case DLOP_FLOAT64: ((double *)p)[i] = (double)x; return; /* callers pass double-exact x */
    default: break;
  }
}
static void set_wrapped(void *p, dlop_dtype dt, int64_t i, uint64_t v) {
  size_t size = dlop_dtype_size(dt);
  if (dt == DLOP_BOOL) v = v != 0;
  memcpy((char *)p + (size_t)i * size, &v, size); /* little-endian: the low bytes */
}

/* ---- calling the op --------------------------------------------------------------------- */

/* make_node with inputs' types; returns the status, the output type and the message. */
static int node(const char *op_name, const dlop_type *inputs, int32_t n, const char *cast_to,
                dlop_type *out, char *error, size_t error_size) {
  const dlop_op_desc *op = dlop_test_find_op(op_name);
  dlop_param_value param = {.kind = DLOP_PARAM_STRING, .count = 1, .u.s = cast_to};
  return dlop_test_make_node(op, op->num_params ? &param : NULL, inputs, n, out, error, error_size);
}

/* The whole life of a node on the CPU: make_node (output dtype and shape checked against the
 * expectation), infer_shape, make_thunk, run writing into out (whose tensor the caller made,
 * or NULL: one is made here of the inferred type, C-contiguous, poisoned). */
static void run_op(const char *op_name, const char *cast_to, tt *in, int32_t n, tt *out) {
  const dlop_op_desc *op = dlop_test_find_op(op_name);
  dlop_param_value param = {.kind = DLOP_PARAM_STRING, .count = 1, .u.s = cast_to};
  dlop_type in_types[3], out_type, inferred;
  char error[512];
  for (int32_t k = 0; k < n; k++) in_types[k] = dlop_test_type_of(&in[k].t);
  int status = node(op_name, in_types, n, cast_to, &out_type, error, sizeof error);
  ck_assert_msg(status == DLOP_OK, "%s make_node: %s", op_name, error);
  ck_assert_int_eq(out_type.dtype, tt_dtype(out));
  ck_assert_int_eq(out_type.ndim, out->t.ndim);
  for (int32_t d = 0; d < out->t.ndim; d++) ck_assert_int_eq(out_type.shape[d], out->shape[d]);
  /* infer_shape with the concrete shapes */
  const dlop_param_value *params = op->num_params ? &param : NULL;
  inferred = out_type;
  memset(inferred.shape, 0xFF, sizeof inferred.shape);
  status = dlop_test_infer_shape(op, params, in_types, n, &inferred, error, sizeof error);
  ck_assert_msg(status == DLOP_OK, "%s infer_shape: %s", op_name, error);
  for (int32_t d = 0; d < out->t.ndim; d++) ck_assert_int_eq(inferred.shape[d], out->shape[d]);
  /* make_thunk, run */
  dlop_thunk thunk;
  status = dlop_test_make_thunk(op, params, in_types, n, &out_type, CPU, &thunk, error, sizeof error);
  ck_assert_msg(status == DLOP_OK, "%s make_thunk: %s", op_name, error);
  dlop_tensor inputs[3];
  for (int32_t k = 0; k < n; k++) inputs[k] = in[k].t;
  status = dlop_test_run(&thunk, inputs, n, &out->t, NULL, error, sizeof error);
  ck_assert_msg(status == DLOP_OK, "%s run: %s", op_name, error);
  dlop_test_destroy_thunk(&thunk);
}

/* ---- input values ----------------------------------------------------------------------- */

/* Random values over the span; floats get specials sprinkled in (NaN, +-inf, +-0, 1) so that
 * NaN propagation and signed zeros are exercised; integers span their whole range (wrapping). */
static void fill(tt *x, uint64_t seed, double low, double high, int specials) {
  dlop_dtype dt = tt_dtype(x);
  if (x->span == 0) return;
  if (!is_float(dt) && low == 0 && high == 0) {
    switch (dt) {
      case DLOP_INT8: low = -128; high = 127; break;
      case DLOP_INT16: low = -32768; high = 32767; break;
      case DLOP_INT32: low = -2147483648.0; high = 2147483647.0; break;
      case DLOP_INT64: low = -9.2e18; high = 9.2e18; break;
      case DLOP_UINT8: low = 0; high = 255; break;
      default: low = 0; high = 1; break;
    }
  }
  dlop_test_fill_random(x->allocation, dt, x->span, seed, low, high);
  if (specials && is_float(dt)) {
    static const double values[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0};
    for (int64_t i = (int64_t)(seed % 7); i < x->span; i += 7)
      dlop_test_set(x->allocation, dt, i, values[(i / 7) % 6]);
  }
}

/* ---- comparing -------------------------------------------------------------------------- */

/* Exact: the same bits, except that any NaN matches an expected NaN. Tolerant (rtol > 0):
 * |a - e| <= rtol (|e| + 1e-30), infinities and NaN must match. */
static void compare_out(const char *what, const void *expected, const tt *out, double rtol) {
  dlop_dtype dt = tt_dtype(out);
  int64_t n = dlop_test_numel(out->t.ndim, out->shape);
  size_t size = dlop_dtype_size(dt);
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < n; i++) {
    const char *a = (const char *)tt_base(out) + size * (size_t)bcast_offset(out, out->t.ndim, out->shape, i);
    const char *e = (const char *)expected + size * (size_t)i;
    int ok;
    if (is_float(dt)) {
      long double ev = get_ld(e, dt, 0), av = get_ld(a, dt, 0);
      if (isnan(ev)) ok = isnan(av);
      else if (rtol > 0 && isfinite(ev)) ok = fabsl(av - ev) <= rtol * (fabsl(ev) + 1e-30L);
      else ok = memcmp(a, e, size) == 0;
    } else {
      ok = memcmp(a, e, size) == 0;
    }
    if (!ok && bad++ == 0) first = i;
  }
  if (bad) {
    const char *a = (const char *)tt_base(out) + size * (size_t)bcast_offset(out, out->t.ndim, out->shape, first);
    ck_abort_msg("%s: %lld of %lld elements wrong; first [%lld] expected %.17Lg, got %.17Lg", what,
                 (long long)bad, (long long)n, (long long)first,
                 get_ld((const char *)expected + size * (size_t)first, dt, 0), get_ld(a, dt, 0));
  }
}

/* ---- layouts ---------------------------------------------------------------------------- */

typedef struct shape_case {
  const char *name;
  int32_t ndim[2];
  int64_t shape[2][3];
  int64_t strides[2][3]; /* all zero: contiguous */
} shape_case;

static const shape_case CASES[] = {
    {"contiguous 1003", {1, 1}, {{1003}, {1003}}, {{0}, {0}}},
    {"(3,1)x(1,4)", {2, 2}, {{3, 1}, {1, 4}}, {{0}, {0}}},
    {"0-d x (2,3)", {0, 2}, {{0}, {2, 3}}, {{0}, {0}}},
    {"(2,3) x 0-d", {2, 0}, {{2, 3}, {0}}, {{0}, {0}}},
    {"negative strides (4,5)x(5,)", {2, 1}, {{4, 5}, {5}}, {{-7, 2}, {-1}}},
    {"size 0 (2,0,3)x(3,)", {3, 1}, {{2, 0, 3}, {3}}, {{0}, {0}}},
    {"column (5,6)x(5,1)", {2, 2}, {{5, 6}, {5, 1}}, {{0}, {0}}},
    {"row (300,300)x(300,) parallel", {2, 1}, {{300, 300}, {300}}, {{0}, {0}}},
    {"strided 3-d (2,3,4)x(3,1)", {3, 2}, {{2, 3, 4}, {3, 1}}, {{24, -8, 2}, {5, 1}}},
};
#define NUM_CASES ((int)(sizeof CASES / sizeof CASES[0]))

static const int64_t *case_strides(const shape_case *c, int k) {
  for (int d = 0; d < c->ndim[k]; d++)
    if (c->strides[k][d] != 0) return c->strides[k];
  return NULL;
}

/* The broadcast shape of the inputs (the tests' own rule). */
static int32_t bcast_shape(const tt *in, int32_t n, int64_t *shape) {
  int32_t ndim = 0;
  for (int32_t k = 0; k < n; k++) ndim = in[k].t.ndim > ndim ? in[k].t.ndim : ndim;
  for (int32_t d = 0; d < ndim; d++) {
    shape[d] = 1;
    for (int32_t k = 0; k < n; k++) {
      int32_t j = d - (ndim - in[k].t.ndim);
      if (j >= 0 && in[k].shape[j] != 1) shape[d] = in[k].shape[j];
    }
  }
  return ndim;
}

/* ---- references ------------------------------------------------------------------------- */

enum { ADD, SUB, MUL, MAXIMUM, MINIMUM, DIV, POW, NEG, ABS, LOG, SQRT, TANH, SIGMOID };
static const char *const ARITH_NAMES[] = {"add", "sub", "mul", "maximum", "minimum", "div", "pow",
                                          "neg", "abs", "log", "sqrt", "tanh", "sigmoid"};

/* expected[i] of an arithmetic op (pow, log, tanh and sigmoid: libm's double result rounded to
 * the dtype, compared within math_tolerance). */
static void ref_arith(int op, dlop_dtype dt, const void *a, int64_t ia, const void *b, int64_t ib,
                      void *out, int64_t i) {
  size_t size = dlop_dtype_size(dt);
  if (op == MAXIMUM || op == MINIMUM) { /* one of the inputs, bit for bit; NaN first */
    long double x = get_ld(a, dt, ia), y = get_ld(b, dt, ib);
    int take_a = op == MAXIMUM ? (x > y || isnan(x)) : (x < y || isnan(x)); /* equal: b */
    memcpy((char *)out + size * (size_t)i, take_a ? (const char *)a + size * (size_t)ia
                                                  : (const char *)b + size * (size_t)ib, size);
    return;
  }
  if (!is_float(dt)) {
    uint64_t x = (uint64_t)get_int(a, dt, ia), y = op >= NEG ? 0 : (uint64_t)get_int(b, dt, ib);
    uint64_t r = op == ADD ? x + y : op == SUB ? x - y : op == MUL ? x * y
               : op == NEG ? 0 - x : ((int64_t)x < 0 ? 0 - x : x);
    set_wrapped(out, dt, i, r);
    return;
  }
  double x = (double)get_ld(a, dt, ia), y = op >= NEG ? 0 : (double)get_ld(b, dt, ib), r;
  switch (op) {
    case ADD: r = x + y; break;
    case SUB: r = x - y; break;
    case MUL: r = x * y; break;
    case DIV: r = x / y; break;
    case POW: r = pow(x, y); break;
    case NEG: r = -x; break;
    case ABS: r = fabs(x); break;
    case LOG: r = log(x); break;
    case SQRT: r = sqrt(x); break;
    case TANH: r = tanh(x); break;
    default: r = 1.0 / (1.0 + exp(-x)); break;
  }
  set_ld(out, dt, i, r); /* double to the dtype: one rounding, from an exact or libm result */
}

static double math_tolerance(int op, dlop_dtype dt) {
  if (op != POW && op != LOG && op != TANH && op != SIGMOID) return 0; /* exact */
  switch (dt) {
    case DLOP_FLOAT16: return 1e-3;
    case DLOP_BFLOAT16: return 8e-3;
    case DLOP_FLOAT32: return 1e-6;
    default: return 1e-14;
  }
}

static const dlop_dtype NUMERIC[] = {DLOP_INT8, DLOP_INT16, DLOP_INT32, DLOP_INT64, DLOP_UINT8,
                                     DLOP_FLOAT16, DLOP_BFLOAT16, DLOP_FLOAT32, DLOP_FLOAT64};
static const dlop_dtype ALL[] = {DLOP_BOOL, DLOP_INT8, DLOP_INT16, DLOP_INT32, DLOP_INT64,
                                 DLOP_UINT8, DLOP_FLOAT16, DLOP_BFLOAT16, DLOP_FLOAT32, DLOP_FLOAT64};

/* Run op over case c (unary ops take the case's first operand) and compare with ref_arith. */
static void check_arith_case(int op, dlop_dtype dt, const shape_case *c, uint64_t seed) {
  int32_t n = op >= NEG ? 1 : 2;
  tt in[2], out;
  int64_t shape[DLOP_MAX_NDIM];
  char what[160];
  for (int k = 0; k < n; k++) {
    tt_init(&in[k], dt, c->ndim[k], c->shape[k], case_strides(c, k));
    /* pow: small bases and exponents; log/sqrt: mostly positive; the rest: [-50, 50] */
    double low = op == POW ? (k ? -3 : 0) : (op == LOG || op == SQRT) ? -1 : -50;
    double high = op == POW ? 3 : 50;
    if (!is_float(dt)) low = high = 0; /* full range */
    fill(&in[k], seed + (uint64_t)k, low, high, 1);
  }
  int32_t ndim = bcast_shape(in, n, shape);
  tt_init(&out, dt, ndim, shape, NULL);
  memset(out.allocation, 0xA5, (size_t)out.span * dlop_dtype_size(dt)); /* poison */
  int64_t total = dlop_test_numel(ndim, shape);
  void *expected = calloc((size_t)total + 1, dlop_dtype_size(dt));
  for (int64_t i = 0; i < total; i++)
    ref_arith(op, dt, tt_base(&in[0]), bcast_offset(&in[0], ndim, shape, i),
              n > 1 ? tt_base(&in[1]) : NULL, n > 1 ? bcast_offset(&in[1], ndim, shape, i) : 0,
              expected, i);
  run_op(ARITH_NAMES[op], NULL, in, n, &out);
  snprintf(what, sizeof what, "%s %s %s", ARITH_NAMES[op], dlop_dtype_name(dt), c->name);
  compare_out(what, expected, &out, math_tolerance(op, dt));
  free(expected);
  tt_free(&out);
  for (int k = 0; k < n; k++) tt_free(&in[k]);
}

START_TEST(test_arith_every_dtype_and_layout) {
  for (int op = ADD; op <= SIGMOID; op++)
    for (size_t d = 0; d < sizeof NUMERIC / sizeof NUMERIC[0]; d++) {
      int float_only = op == DIV || op == POW || op >= LOG;
      if (float_only && !is_float(NUMERIC[d])) continue;
      for (int c = 0; c < NUM_CASES; c++)
        check_arith_case(op, NUMERIC[d], &CASES[c], 1000u * (uint64_t)op + 10u * d + (uint64_t)c);
    }
}
END_TEST

/* Integer wraparound and NaN propagation on chosen values, spelled out. */
START_TEST(test_wraparound_and_nan) {
  int64_t shape[1] = {4};
  tt a, b, out;
  tt_init(&a, DLOP_INT8, 1, shape, NULL);
  tt_init(&b, DLOP_INT8, 1, shape, NULL);
  tt_init(&out, DLOP_INT8, 1, shape, NULL);
  int8_t av[4] = {127, -128, 100, -128}, bv[4] = {1, -1, 100, 0};
  memcpy(tt_base(&a), av, 4);
  memcpy(tt_base(&b), bv, 4);
  run_op("add", NULL, (tt[]){a, b}, 2, &out);
  int8_t *o = tt_base(&out);
  ck_assert_int_eq(o[0], -128);
  ck_assert_int_eq(o[1], 127);
  ck_assert_int_eq(o[2], -56);
  run_op("mul", NULL, (tt[]){a, b}, 2, &out);
  ck_assert_int_eq(o[0], 127);
  ck_assert_int_eq(o[1], -128);
  ck_assert_int_eq(o[2], 16); /* 10000 mod 256 */
  run_op("abs", NULL, (tt[]){b}, 1, &out);
  ck_assert_int_eq(o[1], 1);
  run_op("neg", NULL, (tt[]){a}, 1, &out);
  ck_assert_int_eq(o[1], -128);
  run_op("abs", NULL, (tt[]){a}, 1, &out);
  ck_assert_int_eq(o[1], -128);
  tt_free(&a), tt_free(&b), tt_free(&out);

  tt_init(&a, DLOP_FLOAT32, 1, shape, NULL);
  tt_init(&b, DLOP_FLOAT32, 1, shape, NULL);
  tt_init(&out, DLOP_FLOAT32, 1, shape, NULL);
  float fa[4] = {NAN, 1.0f, -0.0f, 2.0f}, fb[4] = {1.0f, NAN, 0.0f, -INFINITY};
  memcpy(tt_base(&a), fa, sizeof fa);
  memcpy(tt_base(&b), fb, sizeof fb);
  float *f = tt_base(&out);
  run_op("maximum", NULL, (tt[]){a, b}, 2, &out);
  ck_assert(isnan(f[0]) && isnan(f[1]));
  ck_assert(f[2] == 0.0f && !signbit(f[2])); /* equal values give b, as NumPy 2's float32 loop */
  ck_assert(f[3] == 2.0f);
  run_op("minimum", NULL, (tt[]){a, b}, 2, &out);
  ck_assert(isnan(f[0]) && isnan(f[1]));
  ck_assert(f[2] == 0.0f && !signbit(f[2]));
  ck_assert(f[3] == -INFINITY);
  run_op("maximum", NULL, (tt[]){b, a}, 2, &out);
  ck_assert(f[2] == 0.0f && signbit(f[2])); /* now b is -0.0 */
  tt_free(&a), tt_free(&b), tt_free(&out);
}
END_TEST

/* ---- comparisons and where -------------------------------------------------------------- */

static const char *const COMPARE_NAMES[] = {"equal", "not_equal", "less", "less_equal", "greater",
                                            "greater_equal"};

static int ref_compare(int op, long double x, long double y) {
  switch (op) {
    case 0: return x == y;
    case 1: return x != y;
    case 2: return x < y;
    case 3: return x <= y;
    case 4: return x > y;
    default: return x >= y;
  }
}

START_TEST(test_comparisons_every_dtype) {
  for (int op = 0; op < 6; op++)
    for (size_t d = 0; d < sizeof ALL / sizeof ALL[0]; d++)
      for (int c = 0; c < NUM_CASES; c++) {
        dlop_dtype dt = ALL[d];
        const shape_case *sc = &CASES[c];
        tt in[2], out;
        int64_t shape[DLOP_MAX_NDIM];
        char what[160];
        for (int k = 0; k < 2; k++) {
          tt_init(&in[k], dt, sc->ndim[k], sc->shape[k], case_strides(sc, k));
          /* few distinct values, so that equal pairs are common */
          fill(&in[k], 77u * (uint64_t)op + 7u * d + (uint64_t)(c + k), dt == DLOP_UINT8 ? 0 : -3,
               dt == DLOP_BOOL ? 1 : 3, 1);
          if (is_float(dt)) /* whole numbers: equal pairs for floats too */
            for (int64_t i = 0; i < in[k].span; i++) {
              double v = dlop_test_get(in[k].allocation, dt, i);
              if (isfinite(v)) dlop_test_set(in[k].allocation, dt, i, floor(v));
            }
        }
        int32_t ndim = bcast_shape(in, 2, shape);
        tt_init(&out, DLOP_BOOL, ndim, shape, NULL);
        memset(out.allocation, 0xA5, (size_t)out.span);
        int64_t total = dlop_test_numel(ndim, shape);
        uint8_t *expected = calloc((size_t)total + 1, 1);
        for (int64_t i = 0; i < total; i++)
          expected[i] = (uint8_t)ref_compare(op, get_ld(tt_base(&in[0]), dt, bcast_offset(&in[0], ndim, shape, i)),
                                             get_ld(tt_base(&in[1]), dt, bcast_offset(&in[1], ndim, shape, i)));
        run_op(COMPARE_NAMES[op], NULL, in, 2, &out);
        snprintf(what, sizeof what, "%s %s %s", COMPARE_NAMES[op], dlop_dtype_name(dt), sc->name);
        compare_out(what, expected, &out, 0);
        free(expected);
        tt_free(&out), tt_free(&in[0]), tt_free(&in[1]);
      }
}
END_TEST

START_TEST(test_where_every_dtype) {
  /* condition (3,1) strided, x (1,4), y 0-d; and all three contiguous (1000,) */
  for (size_t d = 0; d < sizeof ALL / sizeof ALL[0]; d++)
    for (int layout = 0; layout < 2; layout++) {
      dlop_dtype dt = ALL[d];
      tt in[3], out;
      int64_t shape[DLOP_MAX_NDIM];
      int64_t cs[2] = {3, 1}, xs[2] = {1, 4}, big[1] = {1000}, cstr[2] = {-2, 1};
      if (layout == 0) {
        tt_init(&in[0], DLOP_BOOL, 2, cs, cstr);
        tt_init(&in[1], dt, 2, xs, NULL);
        tt_init(&in[2], dt, 0, NULL, NULL);
      } else {
        for (int k = 0; k < 3; k++) tt_init(&in[k], k ? dt : DLOP_BOOL, 1, big, NULL);
      }
      for (int k = 0; k < 3; k++) fill(&in[k], 5u * d + (uint64_t)k, k ? -5 : 0, k ? 5 : 1, 1);
      ((uint8_t *)in[0].allocation)[0] = 7; /* any nonzero byte is true */
      int32_t ndim = bcast_shape(in, 3, shape);
      tt_init(&out, dt, ndim, shape, NULL);
      int64_t total = dlop_test_numel(ndim, shape);
      size_t size = dlop_dtype_size(dt);
      char *expected = calloc((size_t)total + 1, size);
      for (int64_t i = 0; i < total; i++) {
        int take_x = ((uint8_t *)tt_base(&in[0]))[bcast_offset(&in[0], ndim, shape, i)] != 0;
        const tt *src = take_x ? &in[1] : &in[2];
        memcpy(expected + size * (size_t)i,
               (char *)tt_base(src) + size * (size_t)bcast_offset(src, ndim, shape, i), size);
      }
      run_op("where", NULL, in, 3, &out);
      /* where copies bits: NaN payloads too */
      ck_assert_msg(memcmp(expected, tt_base(&out), size * (size_t)total) == 0, "where %s layout %d",
                    dlop_dtype_name(dt), layout);
      free(expected);
      tt_free(&out);
      for (int k = 0; k < 3; k++) tt_free(&in[k]);
    }
}
END_TEST

/* ---- cast ------------------------------------------------------------------------------- */

/* The cast of one value, by the rules of docs/ops.md, computed in long double. */
static void ref_cast(const void *in, dlop_dtype from, int64_t i, void *out, dlop_dtype to, int64_t j) {
  size_t size = dlop_dtype_size(to);
  if (from == to) {
    memcpy((char *)out + size * (size_t)j, (const char *)in + dlop_dtype_size(from) * (size_t)i, size);
    return;
  }
  long double v = get_ld(in, from, i);
  if (to == DLOP_BOOL) {
    ((uint8_t *)out)[j] = v != 0; /* NaN != 0 */
    return;
  }
  if (!is_float(to)) {
    if (!is_float(from)) {
      set_wrapped(out, to, j, (uint64_t)get_int(in, from, i));
      return;
    }
    long double lo, hi;
    switch (to) {
      case DLOP_INT8: lo = -128; hi = 127; break;
      case DLOP_INT16: lo = -32768; hi = 32767; break;
      case DLOP_INT32: lo = -2147483648.0L; hi = 2147483647.0L; break;
      case DLOP_INT64: lo = -9223372036854775808.0L; hi = 9223372036854775807.0L; break;
      default: lo = 0; hi = 255; break;
    }
    long double t = isnan(v) ? 0 : truncl(v);
    if (t > hi) t = hi;
    if (t < lo) t = lo;
    set_wrapped(out, to, j, (uint64_t)(int64_t)t);
    return;
  }
  if (to == DLOP_FLOAT64) {
    ((double *)out)[j] = (double)v; /* long double to double: nearest (v has <= 64 bits) */
    if (!is_float(from)) ((double *)out)[j] = (double)get_int(in, from, i);
    return;
  }
  set_ld(out, to, j, v);
}

START_TEST(test_cast_table) {
  static const double specials[] = {0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.7, 127.9, 128.0,
                                    -128.9, -129.0, 255.5, 256.0, -1.0, 32767.5, 32768.0,
                                    -32769.0, 65504.0, 65519.9, 65520.0, 1e10, -1e10,
                                    2147483647.0, 2147483648.0, -2147483649.0, 9.2233720368547758e18,
                                    -9.2233720368547758e18, 1e19, -1e19, 3.4e38, 1e300, -1e300,
                                    1e-8, 1e-40, 1e-310, 0x1.0020000001p0, 0x1.0100000001p0,
                                    NAN, -NAN, INFINITY, -INFINITY};
  enum { NS = sizeof specials / sizeof specials[0], NR = 600 };
  for (size_t f = 0; f < sizeof ALL / sizeof ALL[0]; f++)
    for (size_t t = 0; t < sizeof ALL / sizeof ALL[0]; t++) {
      dlop_dtype from = ALL[f], to = ALL[t];
      int64_t shape[1] = {NS + NR}, stride[1] = {-3};
      tt in, out;
      char what[96];
      tt_init(&in, from, 1, shape, stride); /* negative stride */
      fill(&in, 31u * f + t, 0, 0, 0);
      for (int64_t i = 0; i < NS; i++) { /* specials (through double: float16 etc. round) */
        if (is_float(from)) dlop_test_set(tt_base(&in), from, i * -3, specials[i]);
      }
      if (from == DLOP_INT64) { /* values double cannot hold: rounding to odd matters */
        int64_t *p = tt_base(&in);
        p[0] = INT64_MIN, p[-3] = INT64_MAX, p[-6] = (1LL << 40) + (1LL << 15) + 1;
        p[-9] = -((1LL << 60) + (1LL << 52) + 1), p[-12] = (1LL << 24) + 1;
      }
      if (from == DLOP_INT32) {
        int32_t *p = tt_base(&in);
        p[0] = INT32_MIN, p[-3] = INT32_MAX, p[-6] = (1 << 24) + (1 << 16) + 1;
      }
      tt_init(&out, to, 1, shape, NULL);
      memset(out.allocation, 0xA5, (size_t)out.span * dlop_dtype_size(to));
      void *expected = calloc((size_t)shape[0], dlop_dtype_size(to));
      for (int64_t i = 0; i < shape[0]; i++) ref_cast(tt_base(&in), from, -3 * i, expected, to, i);
      run_op("cast", dlop_dtype_name(to), &in, 1, &out);
      snprintf(what, sizeof what, "cast %s -> %s", dlop_dtype_name(from), dlop_dtype_name(to));
      compare_out(what, expected, &out, 0);
      free(expected);
      tt_free(&in), tt_free(&out);
    }
}
END_TEST

/* float32 and float64 to every integer dtype and bool next to the target's ends, against
 * ref_cast: contiguous (the vector loops; for int64 also the blocks of 256 the CPU kernel
 * checks at once: the first block holds only in-range values, each later one a single end
 * value, at a different place in each) and strided. */
START_TEST(test_cast_float_to_int_at_the_ends) {
  static const dlop_dtype sources[] = {DLOP_FLOAT32, DLOP_FLOAT64};
  static const dlop_dtype targets[] = {DLOP_BOOL, DLOP_INT8, DLOP_INT16, DLOP_INT32, DLOP_INT64, DLOP_UINT8};
  double ends[256];
  for (size_t f = 0; f < 2; f++)
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++)
      for (int64_t stride = 1; stride <= 2; stride++) {
        const dlop_dtype from = sources[f], to = targets[t];
        const int64_t n_ends = dlop_test_int_cast_ends(ends, from);
        int64_t shape[1] = {256 * (n_ends + 1)}, strides[1] = {stride};
        tt in, out;
        char what[96];
        tt_init(&in, from, 1, shape, strides);
        fill(&in, 7u * f + t, -1000, 1000, 0);
        for (int64_t i = 0; i < n_ends; i++)
          dlop_test_set(tt_base(&in), from, (256 * (i + 1) + i * 37 % 256) * stride, ends[i]);
        tt_init(&out, to, 1, shape, NULL);
        memset(out.allocation, 0xA5, (size_t)out.span * dlop_dtype_size(to));
        void *expected = calloc((size_t)shape[0], dlop_dtype_size(to));
        for (int64_t i = 0; i < shape[0]; i++) ref_cast(tt_base(&in), from, i * stride, expected, to, i);
        run_op("cast", dlop_dtype_name(to), &in, 1, &out);
        snprintf(what, sizeof what, "cast %s -> %s, stride %lld", dlop_dtype_name(from),
                 dlop_dtype_name(to), (long long)stride);
        compare_out(what, expected, &out, 0);
        free(expected);
        tt_free(&in), tt_free(&out);
      }
}
END_TEST

START_TEST(test_cast_saturates_and_rounds) {
  int64_t shape[1] = {8};
  tt in, out;
  tt_init(&in, DLOP_FLOAT64, 1, shape, NULL);
  double v[8] = {NAN, 1e300, -1e300, -1.9, 2.5, 0x1.0100000001p0, 2147483647.5, -2147483648.9};
  memcpy(tt_base(&in), v, sizeof v);
  tt_init(&out, DLOP_INT32, 1, shape, NULL);
  run_op("cast", "int32", &in, 1, &out);
  int32_t *o = tt_base(&out);
  ck_assert_int_eq(o[0], 0);
  ck_assert_int_eq(o[1], INT32_MAX);
  ck_assert_int_eq(o[2], INT32_MIN);
  ck_assert_int_eq(o[3], -1);
  ck_assert_int_eq(o[4], 2);
  ck_assert_int_eq(o[6], INT32_MAX);
  ck_assert_int_eq(o[7], INT32_MIN);
  tt_free(&out);
  tt_init(&out, DLOP_UINT8, 1, shape, NULL);
  run_op("cast", "uint8", &in, 1, &out);
  uint8_t *u = tt_base(&out);
  ck_assert_int_eq(u[1], 255);
  ck_assert_int_eq(u[2], 0);
  ck_assert_int_eq(u[3], 0);
  tt_free(&out);
  tt_init(&out, DLOP_BFLOAT16, 1, shape, NULL);
  run_op("cast", "bfloat16", &in, 1, &out);
  /* 1 + 2^-8 + 2^-40 lies just above halfway between bfloat16's 1 and 1 + 2^-7: it rounds up.
   * Through float to nearest it would become the tie 1 + 2^-8 and round down to 1 (even). */
  ck_assert_uint_eq(((uint16_t *)tt_base(&out))[5], 0x3F81);
  tt_free(&out);
  tt_init(&out, DLOP_BOOL, 1, shape, NULL);
  run_op("cast", "bool", &in, 1, &out);
  ck_assert_int_eq(((uint8_t *)tt_base(&out))[0], 1); /* NaN is true */
  tt_free(&out), tt_free(&in);
}
END_TEST

/* ---- in place --------------------------------------------------------------------------- */

START_TEST(test_in_place_output_is_input_0) {
  int64_t shape[1] = {1000};
  tt a, b;
  tt_init(&a, DLOP_FLOAT32, 1, shape, NULL);
  tt_init(&b, DLOP_FLOAT32, 1, shape, NULL);
  fill(&a, 1, -10, 10, 0);
  fill(&b, 2, -10, 10, 0);
  float expected[1000];
  for (int i = 0; i < 1000; i++) expected[i] = ((float *)tt_base(&a))[i] - ((float *)tt_base(&b))[i];
  run_op("sub", NULL, (tt[]){a, b}, 2, &a);
  ck_assert(memcmp(expected, tt_base(&a), sizeof expected) == 0);
  for (int i = 0; i < 1000; i++) expected[i] = -((float *)tt_base(&a))[i];
  run_op("neg", NULL, &a, 1, &a);
  ck_assert(memcmp(expected, tt_base(&a), sizeof expected) == 0);
  ck_assert_int_eq(dlop_test_find_op("add")->inplace_map[0], 0);
  ck_assert_int_eq(dlop_test_find_op("where")->inplace_map[0], 1);
  tt_free(&a), tt_free(&b);
}
END_TEST

/* ---- errors ----------------------------------------------------------------------------- */

static dlop_type ty(dlop_dtype dtype, int32_t ndim, int64_t d0, int64_t d1) {
  dlop_type t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.ndim = ndim;
  t.shape[0] = d0;
  t.shape[1] = d1;
  return t;
}

static void expect_error(const char *op, const dlop_type *in, int32_t n, const char *cast_to,
                         int status, const char *message) {
  dlop_type out;
  char error[512];
  int got = node(op, in, n, cast_to, &out, error, sizeof error);
  ck_assert_msg(got == status, "%s: status %s, expected %s (%s)", op, dlop_status_name(got),
                dlop_status_name(status), error);
  ck_assert_msg(strstr(error, message) != NULL, "%s: message '%s' lacks '%s'", op, error, message);
}

START_TEST(test_type_and_shape_errors) {
  dlop_type f32 = ty(DLOP_FLOAT32, 1, 3, 0), f64 = ty(DLOP_FLOAT64, 1, 3, 0);
  dlop_type i32 = ty(DLOP_INT32, 1, 3, 0), b = ty(DLOP_BOOL, 1, 3, 0), f32_4 = ty(DLOP_FLOAT32, 1, 4, 0);
  expect_error("add", (dlop_type[]){f32, f64}, 2, NULL, DLOP_TYPE_ERROR,
               "add: input dtypes float32 and float64 differ; cast one (the Python operators promote for you)");
  expect_error("div", (dlop_type[]){i32, i32}, 2, NULL, DLOP_TYPE_ERROR,
               "div: dtype int32 is not supported (expected one of float16, bfloat16, float32, float64)");
  expect_error("log", (dlop_type[]){i32}, 1, NULL, DLOP_TYPE_ERROR, "log: dtype int32 is not supported");
  expect_error("add", (dlop_type[]){b, b}, 2, NULL, DLOP_TYPE_ERROR, "add: dtype bool is not supported");
  expect_error("mul", (dlop_type[]){f32, f32_4}, 2, NULL, DLOP_SHAPE_ERROR,
               "mul: cannot broadcast (3,) with (4,)");
  expect_error("where", (dlop_type[]){i32, f32, f32}, 3, NULL, DLOP_TYPE_ERROR,
               "where: the condition (input 0) must be bool, got int32");
  expect_error("where", (dlop_type[]){b, f32, f64}, 3, NULL, DLOP_TYPE_ERROR,
               "where: input dtypes float32 and float64 differ");
  expect_error("cast", (dlop_type[]){f32}, 1, "float8", DLOP_TYPE_ERROR, "cast: unknown dtype 'float8'");
  expect_error("add", (dlop_type[]){f32}, 1, NULL, DLOP_TYPE_ERROR,
               "add: takes 2 inputs and gives 1 output, got 1 inputs and 1 outputs");
  /* comparisons give bool; unknown dims broadcast */
  dlop_type out;
  char error[256];
  dlop_type unknown = ty(DLOP_FLOAT32, 2, DLOP_DIM_UNKNOWN, 1), row = ty(DLOP_FLOAT32, 1, 5, 0);
  ck_assert_int_eq(node("less", (dlop_type[]){unknown, row}, 2, NULL, &out, error, sizeof error), DLOP_OK);
  ck_assert_int_eq(out.dtype, DLOP_BOOL);
  ck_assert_int_eq(out.ndim, 2);
  ck_assert_int_eq(out.shape[0], DLOP_DIM_UNKNOWN);
  ck_assert_int_eq(out.shape[1], 5);
  ck_assert_int_eq(node("cast", (dlop_type[]){f32}, 1, "int8", &out, error, sizeof error), DLOP_OK);
  ck_assert_int_eq(out.dtype, DLOP_INT8);
}
END_TEST

START_TEST(test_run_rejects_a_wrong_output_shape) {
  const dlop_op_desc *op = dlop_test_find_op("add");
  int64_t s3[1] = {3}, s4[1] = {4};
  tt a, b, out;
  tt_init(&a, DLOP_FLOAT32, 1, s3, NULL);
  tt_init(&b, DLOP_FLOAT32, 1, s3, NULL);
  tt_init(&out, DLOP_FLOAT32, 1, s4, NULL);
  dlop_type types[2] = {dlop_test_type_of(&a.t), dlop_test_type_of(&b.t)};
  dlop_type out_type = dlop_test_type_of(&a.t);
  out_type.shape[0] = DLOP_DIM_UNKNOWN;
  types[0].shape[0] = types[1].shape[0] = DLOP_DIM_UNKNOWN;
  dlop_thunk thunk;
  char error[256] = "";
  DLOP_CK_OK(dlop_test_make_thunk(op, NULL, types, 2, &out_type, CPU, &thunk, error, sizeof error));
  dlop_tensor inputs[2] = {a.t, b.t};
  ck_assert_int_eq(dlop_test_run(&thunk, inputs, 2, &out.t, NULL, error, sizeof error), DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(error, "add: output shape (4,) differs from the inputs' broadcast shape (3,)"),
                "%s", error);
  thunk.destroy(thunk.state);
  /* a thunk for int32 refuses float32 inputs at make_thunk */
  types[0].dtype = types[1].dtype = DLOP_INT32;
  ck_assert_int_eq(dlop_test_make_thunk(op, NULL, types, 2, &out_type, CPU, &thunk, error, sizeof error),
                   DLOP_UNSUPPORTED);
  ck_assert_msg(strstr(error, "add: no kernel for input dtypes (int32, int32) and output dtype float32"),
                "%s", error);
  tt_free(&a), tt_free(&b), tt_free(&out);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("elemwise");
  TCase *kernels = tcase_create("kernels");
  tcase_set_timeout(kernels, 120);
  tcase_add_test(kernels, test_arith_every_dtype_and_layout);
  tcase_add_test(kernels, test_wraparound_and_nan);
  tcase_add_test(kernels, test_comparisons_every_dtype);
  tcase_add_test(kernels, test_where_every_dtype);
  tcase_add_test(kernels, test_cast_table);
  tcase_add_test(kernels, test_cast_saturates_and_rounds);
  tcase_add_test(kernels, test_cast_float_to_int_at_the_ends);
  tcase_add_test(kernels, test_in_place_output_is_input_0);
  suite_add_tcase(suite, kernels);
  TCase *errors = tcase_create("errors");
  tcase_add_test(errors, test_type_and_shape_errors);
  tcase_add_test(errors, test_run_rejects_a_wrong_output_shape);
  suite_add_tcase(suite, errors);
  return dlop_test_run_suite(suite);
}
