/* test_elemwise_cuda.c — the elemwise plugin on CUDA against its CPU results (the CPU kernels
 * are checked against plain C references in tests/unit/test_elemwise.c): every op on random
 * inputs with NaN/inf/signed-zero specials, several dtypes each (every dtype for comparisons,
 * where and the 10x10 cast table, which must agree bit for bit, casts to 16-bit floats next
 * to their rounding boundaries and from floats to integers at their saturation ends; sqrt,
 * log, tanh and sigmoid of every float16 and bfloat16 value), contiguous (vector kernels of
 * every op, misaligned too, shorter than a chunk, whole chunks and one element more), row and
 * column broadcasts (rows kernels), 0-d, size-0, negative strides.
 * Each CUDA output is poisoned first. Without a GPU it exits 77 (skipped). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_runner.h"
#include "op_runner.h"
#include "test_support.h"

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};
static const dlop_device CUDA = {DLOP_DEVICE_CUDA, 0};

typedef struct layout {
  int32_t ndim;
  int64_t shape[3];
  int64_t strides[3]; /* elements; all zero: C-contiguous */
  int64_t offset;     /* extra elements before element 0 (misaligned data) */
} layout;

/* One input: the same span on the host and on the GPU, viewed with the layout. */
typedef dlop_test_operand operand;

static void operand_init(operand *o, dlop_dtype dtype, const layout *l, uint64_t seed, double low,
                         double high) {
  int64_t first;
  size_t elsize = dlop_dtype_size(dtype);
  memset(o, 0, sizeof *o);
  memcpy(o->shape, l->shape, sizeof o->shape);
  int64_t span = l->offset + dlop_test_layout_span(l->ndim, l->shape,
                                                   dlop_test_strides_given(l->ndim, l->strides),
                                                   o->strides, &first);
  o->span = malloc((size_t)span * elsize);
  ck_assert_ptr_nonnull(o->span);
  dlop_test_fill_random(o->span, dtype, span, seed, low, high);
  if (dlop_dtype_is_float(dtype)) { /* specials: NaN propagation, infinities, signed zeros */
    static const double specials[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1e30, 3e9};
    for (int64_t i = (int64_t)(seed % 5); i < span; i += 5)
      dlop_test_set(o->span, dtype, i, specials[(i / 5) % 8]);
  }
  dlop_test_operand_upload(o, dtype, l->ndim, span, l->offset + first, CUDA);
}

/* Run op on both devices with the same inputs (dtypes[k], layouts[k]); rtol 0 means the CUDA
 * output must equal the CPU's bit for bit (any NaN matching a NaN). */
static void parity(const char *op_name, const char *cast_to, int32_t n, const dlop_dtype *dtypes,
                   const layout *const *layouts, uint64_t seed, double rtol) {
  const dlop_op_desc *op = dlop_test_find_op(op_name);
  dlop_param_value param = {.kind = DLOP_PARAM_STRING, .count = 1, .u.s = cast_to};
  const dlop_param_value *params = op->num_params ? &param : NULL;
  operand in[3];
  dlop_type types[3], out_type;
  int log_like = strcmp(op_name, "log") == 0 || strcmp(op_name, "sqrt") == 0;
  int is_pow = strcmp(op_name, "pow") == 0;
  for (int32_t k = 0; k < n; k++) {
    double low = is_pow ? (k ? -3 : 0) : log_like ? -1 : -100, high = is_pow ? 3 : 100;
    if (dtypes[k] == DLOP_BOOL) low = 0, high = 1;
    if (!dlop_dtype_is_float(dtypes[k]) && dtypes[k] != DLOP_BOOL) low = -1e4, high = 1e4;
    if (dtypes[k] == DLOP_UINT8) low = 0, high = 255;
    if (dtypes[k] == DLOP_INT8) low = -128, high = 127;
    operand_init(&in[k], dtypes[k], layouts[k], seed + (uint64_t)k, low, high);
    types[k] = dlop_test_type_of(&in[k].host);
  }
  char error[512] = "";
  int status = dlop_test_make_node(op, params, types, n, &out_type, error, sizeof error);
  ck_assert_msg(status == DLOP_OK, "%s make_node: %s", op_name, error);
  status = dlop_test_infer_shape(op, params, types, n, &out_type, error, sizeof error);
  ck_assert_msg(status == DLOP_OK, "%s infer_shape: %s", op_name, error);
  dlop_dtype out_dtype = (dlop_dtype)out_type.dtype;
  size_t elsize = dlop_dtype_size(out_dtype);
  int64_t total = dlop_test_numel(out_type.ndim, out_type.shape);
  size_t bytes = (size_t)total * elsize;
  char what[200];
  snprintf(what, sizeof what, "%s %s%s%s n=%lld (input 0 ndim %d)", op_name,
           dlop_dtype_name(dtypes[n > 2 ? 1 : 0]), cast_to ? " -> " : "", cast_to ? cast_to : "",
           (long long)total, (int)layouts[0]->ndim);

  /* CPU */
  unsigned char *cpu_out = malloc(bytes + 1), *gpu_out = malloc(bytes + 1);
  ck_assert(cpu_out && gpu_out);
  dlop_tensor cpu_output; /* C-contiguous (strides NULL) */
  dlop_test_host_tensor(&cpu_output, cpu_out, 0, out_dtype, out_type.ndim, out_type.shape, NULL);
  dlop_tensor host_in[3], device_in[3];
  for (int32_t k = 0; k < n; k++) {
    host_in[k] = in[k].host;
    device_in[k] = *dlop_array_tensor(in[k].device_view);
  }
  dlop_thunk cpu_thunk, gpu_thunk;
  dlop_test_make_thunk_ok(op, params, types, n, &out_type, CPU, &cpu_thunk);
  dlop_test_run_ok(&cpu_thunk, host_in, n, &cpu_output, NULL, what);
  if (cpu_thunk.destroy) cpu_thunk.destroy(cpu_thunk.state);

  /* CUDA, output poisoned first on the same stream */
  dlop_stream *stream = NULL;
  dlop_array *output = NULL;
  const dlop_host_api *host = dlop_host_api_table();
  DLOP_CK_OK(dlop_stream_create(CUDA, &stream));
  DLOP_CK_OK(dlop_array_empty(CUDA, out_dtype, out_type.ndim, out_type.shape, &output));
  if (bytes > 0)
    ck_assert_int_eq(host->cuda_memset_async(dlop_tensor_base(dlop_array_tensor(output)), 0xA5,
                                             bytes, dlop_stream_handle(stream)), DLOP_OK);
  dlop_test_make_thunk_ok(op, params, types, n, &out_type, CUDA, &gpu_thunk);
  dlop_test_run_ok(&gpu_thunk, device_in, n, dlop_array_tensor(output), dlop_stream_handle(stream),
                   what);
  DLOP_CK_OK(dlop_stream_synchronize(stream));
  if (bytes > 0) DLOP_CK_OK(dlop_array_to_host(output, gpu_out, bytes));
  if (gpu_thunk.destroy) gpu_thunk.destroy(gpu_thunk.state);

  int64_t bad = 0, first = -1;
  if (rtol > 0) {
    char report[512];
    bad = dlop_test_compare(cpu_out, gpu_out, out_dtype, total, 1e-30, rtol, report, sizeof report);
    ck_assert_msg(bad == 0, "%s: %lld of %lld differ beyond rtol %g between CPU (expected) and "
                  "CUDA (got): %s", what, (long long)bad, (long long)total, rtol, report);
  } else {
    for (int64_t i = 0; i < total; i++) {
      int same = memcmp(cpu_out + (size_t)i * elsize, gpu_out + (size_t)i * elsize, elsize) == 0;
      if (!same && dlop_dtype_is_float(out_dtype))
        same = isnan(dlop_test_get(cpu_out, out_dtype, i)) && isnan(dlop_test_get(gpu_out, out_dtype, i));
      if (!same && bad++ == 0) first = i;
    }
    ck_assert_msg(bad == 0, "%s: %lld of %lld differ between CPU and CUDA; first [%lld] CPU %.17g, CUDA %.17g",
                  what, (long long)bad, (long long)total, (long long)first,
                  first >= 0 ? dlop_test_get(cpu_out, out_dtype, first) : 0.0,
                  first >= 0 ? dlop_test_get(gpu_out, out_dtype, first) : 0.0);
  }
  dlop_array_release(output);
  dlop_stream_destroy(stream);
  for (int32_t k = 0; k < n; k++) dlop_test_operand_free(&in[k]);
  free(cpu_out);
  free(gpu_out);
}

/* ---- layouts: (input 0, input 1) pairs; unary ops use input 0 -------------------------- */

static const layout BIG = {1, {(1 << 20) + 3}, {0}, 0};
static const layout BIG_MISALIGNED = {1, {(1 << 20) + 3}, {0}, 1};
static const layout MATRIX = {2, {333, 64}, {0}, 0};
static const layout ROW = {1, {64}, {0}, 0};
static const layout WIDE = {2, {257, 96}, {0}, 0};
static const layout COLUMN = {2, {257, 1}, {0}, 0};
static const layout COL3 = {2, {3, 1}, {0}, 0};
static const layout ROW4 = {2, {1, 4}, {0}, 0};
static const layout SCALAR = {0, {0}, {0}, 0};
static const layout VEC1000 = {1, {1000}, {0}, 0};
static const layout NEGATIVE = {2, {40, 50}, {-100, 2}, 0};
static const layout NEG_ROW = {1, {50}, {-1}, 0};
static const layout EMPTY = {2, {0, 5}, {0}, 0};
static const layout FIVE = {1, {5}, {0}, 0};
/* Contiguous and shorter than one chunk of the vector kernels plus a tail (comparisons and
 * casts take chunks of 4 to 16 elements, elemwise_cuda.cuh) */
static const layout SEVEN = {1, {7}, {0}, 0};
/* Whole chunks of the chunk-form kernels (log, tanh, sigmoid of float32 and float64: 1024 and
 * 512 elements a 128-thread block) and one element after them, which only the last block,
 * holding no chunk, writes. */
static const layout CHUNKS_AND_ONE = {1, {(1 << 16) + 1}, {0}, 0};
/* Rows long enough for the 2-d broadcast kernel (at least half a block of 16-byte vectors per
 * row for 2- to 8-byte types), with the row or the column on either side. */
static const layout LONG_ROWS = {2, {67, 2048}, {0}, 0};
static const layout LONG_ROW = {1, {2048}, {0}, 0};
static const layout LONG_COLUMN = {2, {67, 1}, {0}, 0};

static const layout *const PAIRS[][2] = {
    {&BIG, &BIG},         {&BIG_MISALIGNED, &BIG}, {&MATRIX, &ROW},     {&COLUMN, &WIDE},
    {&COL3, &ROW4},       {&SCALAR, &VEC1000},     {&NEGATIVE, &NEG_ROW}, {&EMPTY, &FIVE},
    {&LONG_ROWS, &LONG_ROW}, {&LONG_ROW, &LONG_ROWS}, {&LONG_COLUMN, &LONG_ROWS},
    {&LONG_ROWS, &LONG_COLUMN}, {&SEVEN, &SEVEN}, {&BIG, &BIG_MISALIGNED},
    {&CHUNKS_AND_ONE, &CHUNKS_AND_ONE},
};
#define NUM_PAIRS ((int)(sizeof PAIRS / sizeof PAIRS[0]))

static const dlop_dtype NUMERIC[] = {DLOP_INT8, DLOP_INT16, DLOP_INT32, DLOP_INT64, DLOP_UINT8,
                                     DLOP_FLOAT16, DLOP_BFLOAT16, DLOP_FLOAT32, DLOP_FLOAT64};
static const dlop_dtype ALL[] = {DLOP_BOOL, DLOP_INT8, DLOP_INT16, DLOP_INT32, DLOP_INT64,
                                 DLOP_UINT8, DLOP_FLOAT16, DLOP_BFLOAT16, DLOP_FLOAT32, DLOP_FLOAT64};

/* libm and CUDA's math library differ by an ulp or so; their float16/bfloat16 results may then
 * round to neighbours */
static double math_rtol(dlop_dtype dt) {
  switch (dt) {
    case DLOP_FLOAT16: return 2e-3;
    case DLOP_BFLOAT16: return 1.6e-2;
    case DLOP_FLOAT32: return 4e-6;
    default: return 1e-14;
  }
}

START_TEST(test_binary_arith) {
  static const char *const exact[] = {"add", "sub", "mul", "maximum", "minimum", "div"};
  for (int op = 0; op < 7; op++)
    for (size_t d = 0; d < sizeof NUMERIC / sizeof NUMERIC[0]; d++) {
      dlop_dtype dt = NUMERIC[d];
      int float_only = op >= 5;
      if (float_only && !dlop_dtype_is_float(dt)) continue;
      for (int p = 0; p < NUM_PAIRS; p++) {
        dlop_dtype dtypes[2] = {dt, dt};
        parity(op < 6 ? exact[op] : "pow", NULL, 2, dtypes, PAIRS[p], 100u * (uint64_t)op + 10u * d + (uint64_t)p,
               op < 6 ? 0.0 : math_rtol(dt));
      }
    }
}
END_TEST

/* More rows than a grid's y dimension holds (65535): the 2-d broadcast kernel strides over
 * the rest. One row broadcast and one column broadcast, float32 and float16. */
START_TEST(test_broadcast_rows_beyond_grid_y) {
  static const layout TALL = {2, {66000, 512}, {0}, 0};
  static const layout TALL_ROW = {1, {512}, {0}, 0};
  static const layout TALL_COLUMN = {2, {66000, 1}, {0}, 0};
  const layout *row_pair[2] = {&TALL, &TALL_ROW}, *column_pair[2] = {&TALL_COLUMN, &TALL};
  const dlop_dtype types[] = {DLOP_FLOAT32, DLOP_FLOAT16};
  for (int t = 0; t < 2; t++) {
    dlop_dtype dtypes[2] = {types[t], types[t]};
    parity("add", NULL, 2, dtypes, row_pair, 9001u + (uint64_t)t, 0.0);
    parity("sub", NULL, 2, dtypes, column_pair, 9101u + (uint64_t)t, 0.0);
  }
}
END_TEST

START_TEST(test_unary) {
  static const char *const names[] = {"neg", "abs", "sqrt", "log", "tanh", "sigmoid"};
  for (int op = 0; op < 6; op++)
    for (size_t d = 0; d < sizeof NUMERIC / sizeof NUMERIC[0]; d++) {
      dlop_dtype dt = NUMERIC[d];
      if (op >= 2 && !dlop_dtype_is_float(dt)) continue;
      for (int p = 0; p < NUM_PAIRS; p++)
        parity(names[op], NULL, 1, &dt, PAIRS[p], 31u * (uint64_t)op + 7u * d + (uint64_t)p,
               op < 3 ? 0.0 : math_rtol(dt)); /* neg, abs, sqrt are exact on both */
    }
}
END_TEST

START_TEST(test_comparisons_and_where) {
  static const char *const names[] = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"};
  for (int op = 0; op < 6; op++)
    for (size_t d = 0; d < sizeof ALL / sizeof ALL[0]; d++)
      for (int p = 0; p < NUM_PAIRS; p++) { /* BIG_MISALIGNED too: the contiguous kernel's scalar path */
        dlop_dtype dtypes[2] = {ALL[d], ALL[d]};
        parity(names[op], NULL, 2, dtypes, PAIRS[p], 13u * (uint64_t)op + 3u * d + (uint64_t)p, 0.0);
      }
  static const layout COND = {2, {3, 1}, {-2, 0}, 0};
  /* contiguous (vector and, misaligned condition or value, scalar paths), broadcasts */
  static const layout *const where_layouts[][3] = {{&BIG, &BIG, &BIG}, {&COND, &ROW4, &SCALAR},
                                                   {&COLUMN, &WIDE, &ROW},
                                                   {&BIG_MISALIGNED, &BIG, &BIG},
                                                   {&BIG, &BIG_MISALIGNED, &BIG}};
  for (size_t d = 0; d < sizeof ALL / sizeof ALL[0]; d++)
    for (int l = 0; l < 5; l++) {
      dlop_dtype dtypes[3] = {DLOP_BOOL, ALL[d], ALL[d]};
      const layout *const *ls = where_layouts[l];
      if (l == 2) { /* condition (257, 1), x (257, 96), y (96,) */
        static const layout Y = {1, {96}, {0}, 0};
        static const layout *const col[3] = {&COLUMN, &WIDE, &Y};
        ls = col;
      }
      parity("where", NULL, 3, dtypes, ls, 17u * d + (uint64_t)l, 0.0);
    }
}
END_TEST

/* Every (from, to) pair must agree bit for bit: the same element code runs on both. */
START_TEST(test_cast_table) {
  static const layout NEG_BIG = {1, {100003}, {-3}, 0};
  for (size_t f = 0; f < sizeof ALL / sizeof ALL[0]; f++)
    for (size_t t = 0; t < sizeof ALL / sizeof ALL[0]; t++) {
      const layout *big[1] = {&BIG}, *neg[1] = {&NEG_BIG}, *scalar[1] = {&SCALAR};
      const layout *misaligned[1] = {&BIG_MISALIGNED}, *seven[1] = {&SEVEN};
      parity("cast", dlop_dtype_name(ALL[t]), 1, &ALL[f], big, 11u * f + t, 0.0);
      parity("cast", dlop_dtype_name(ALL[t]), 1, &ALL[f], misaligned, 11u * f + t + 3, 0.0);
      parity("cast", dlop_dtype_name(ALL[t]), 1, &ALL[f], neg, 11u * f + t + 1, 0.0);
      parity("cast", dlop_dtype_name(ALL[t]), 1, &ALL[f], scalar, 11u * f + t + 2, 0.0);
      parity("cast", dlop_dtype_name(ALL[t]), 1, &ALL[f], seven, 11u * f + t + 4, 0.0);
    }
}
END_TEST

/* ---- casts to 16-bit floats next to their rounding boundaries ----------------------------- */

/* op(x) (cast: to dtype to; other ops: to is NULL) of the n host elements at data + offset
 * elements on device (an offset breaks the 16-byte alignment of the vector kernels: they go
 * element by element), the output's bytes into out. */
static void unary_on(dlop_device device, const char *op, dlop_dtype from, const void *data,
                     int64_t n, int64_t offset, const char *to, void *out, size_t out_bytes) {
  dlop_graph *graph = dlop_test_new_graph();
  dlop_var *x, *y;
  dlop_named_param param = {"dtype", {.kind = DLOP_PARAM_STRING, .count = 1, .u = {.s = to}}};
  DLOP_CK_OK(dlop_graph_input(graph, "x", from, 1, &n, &x));
  DLOP_CK_OK(dlop_graph_apply(graph, op, &x, 1, to ? &param : NULL, to ? 1 : 0, &y, 1));
  dlop_function *function = dlop_test_compile(graph, &x, 1, y, device);
  dlop_array *span, *input, *output;
  const int64_t total = n + offset, one = 1;
  DLOP_CK_OK(dlop_array_from_host(device, from, 1, &total, data, &span));
  DLOP_CK_OK(dlop_array_view(span, 1, &n, &one, (uint64_t)offset * dlop_dtype_size(from), &input));
  DLOP_CK_OK(dlop_function_run(function, &input, 1, &output, 1, NULL));
  DLOP_CK_OK(dlop_array_to_host(output, out, out_bytes));
  dlop_test_release_arrays(3, input, span, output);
  dlop_function_destroy(function);
  dlop_graph_destroy(graph);
}

/* Values next to the rounding boundaries of a float with p stored mantissa bits and exponents
 * from emin (the smallest normal) to emax: for each chosen exponent and mantissa, the midpoint
 * between two neighbours exactly and nudged by 2^-2, 2^-13, 2^-29 and 2^-40 of a step either
 * way (a double rounding through float32 gets the last ones wrong), signed; subnormal steps;
 * the largest finite value's midpoint to infinity; zeros, infinities, NaN, far out of range.
 * Returns the count written (at most 4096). */
static int64_t rounding_edges(double *v, int p, int emin, int emax) {
  static const int nudges[] = {2, 13, 29, 40};
  const int exponents[] = {emin - 1, emin, emin + 1, -1, 0, 1, 7, emax - 1, emax};
  const int64_t top = ((int64_t)1 << p) - 1;
  const int64_t mantissas[] = {0, 1, 2, 3, top / 2, top - 1, top};
  int64_t n = 0;
  for (size_t e = 0; e < sizeof exponents / sizeof exponents[0]; e++)
    for (size_t m = 0; m < sizeof mantissas / sizeof mantissas[0]; m++) {
      /* exponents[e] below emin: the subnormal steps of 2^(emin - p) */
      const int subnormal = exponents[e] < emin;
      const double step = ldexp(1.0, (subnormal ? emin : exponents[e]) - p);
      const double low = subnormal ? (double)mantissas[m] * step
                                   : ldexp((double)(((int64_t)1 << p) + mantissas[m]), exponents[e] - p);
      const double mid = low + step / 2;
      for (int sign = -1; sign <= 1; sign += 2) {
        v[n++] = sign * mid;
        for (size_t k = 0; k < sizeof nudges / sizeof nudges[0]; k++) {
          v[n++] = sign * (mid + ldexp(step, -nudges[k]));
          v[n++] = sign * (mid - ldexp(step, -nudges[k]));
        }
        v[n++] = sign * low;
      }
    }
  static const double specials[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN, 1e300, -1e300, 1e-300};
  for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++) v[n++] = specials[k];
  return n;
}

/* float64 and float32 to float16 and bfloat16 (CUDA rounds float64 once in hardware, the CPU
 * through a round-to-odd float): bit for bit, through the contiguous kernel (chunks and tail). */
START_TEST(test_cast_rounding_edges) {
  static const struct { const char *to; dlop_dtype dtype; int p, emin, emax; } targets[] = {
      {"float16", DLOP_FLOAT16, 10, -14, 15}, {"bfloat16", DLOP_BFLOAT16, 7, -126, 127}};
  static const dlop_dtype sources[] = {DLOP_FLOAT64, DLOP_FLOAT32};
  double *values = malloc(4096 * sizeof(double));
  unsigned char *data = malloc(4096 * 8), *cpu = malloc(4096 * 2), *cuda = malloc(4096 * 2);
  ck_assert(values && data && cpu && cuda);
  for (int t = 0; t < 2; t++)
    for (int s = 0; s < 2; s++) {
      const int64_t n = rounding_edges(values, targets[t].p, targets[t].emin, targets[t].emax);
      for (int64_t i = 0; i < n; i++) dlop_test_set(data, sources[s], i, values[i]);
      unary_on(CPU, "cast", sources[s], data, n, 0, targets[t].to, cpu, (size_t)n * 2);
      unary_on(CUDA, "cast", sources[s], data, n, 0, targets[t].to, cuda, (size_t)n * 2);
      for (int64_t i = 0; i < n; i++) {
        uint16_t a, b;
        memcpy(&a, cpu + 2 * i, 2);
        memcpy(&b, cuda + 2 * i, 2);
        ck_assert_msg(a == b, "cast %s -> %s of %.17g: CPU 0x%04x, CUDA 0x%04x",
                      dlop_dtype_name(sources[s]), targets[t].to, dlop_test_get(data, sources[s], i),
                      a, b);
      }
    }
  free(values);
  free(data);
  free(cpu);
  free(cuda);
}
END_TEST

/* float32 and float64 to every integer dtype and bool at and next to the targets' ends
 * (dlop_test_int_cast_ends, one in each block of 256 random in-range values): bit for bit,
 * contiguous, aligned and misaligned (CUDA's vector and element paths; the CPU's vector loops
 * and int64 blocks). */
START_TEST(test_cast_float_to_int_at_the_ends) {
  static const dlop_dtype sources[] = {DLOP_FLOAT32, DLOP_FLOAT64};
  static const dlop_dtype targets[] = {DLOP_BOOL, DLOP_INT8, DLOP_INT16, DLOP_INT32, DLOP_INT64, DLOP_UINT8};
  double ends[256];
  enum { N = 256 * 257 };
  unsigned char *data = malloc((N + 1) * 8), *cpu = malloc(N * 8), *cuda = malloc(N * 8);
  ck_assert(data && cpu && cuda);
  for (int s = 0; s < 2; s++)
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++)
      for (int64_t offset = 0; offset <= 1; offset++) {
        const int64_t n_ends = dlop_test_int_cast_ends(ends, sources[s]), n = 256 * (n_ends + 1);
        const dlop_dtype to = targets[t];
        const size_t size = dlop_dtype_size(to);
        dlop_test_fill_random(data, sources[s], n + offset, 3u * (uint64_t)s + t, -1000, 1000);
        for (int64_t i = 0; i < n_ends; i++)
          dlop_test_set(data, sources[s], offset + 256 * (i + 1) + i * 37 % 256, ends[i]);
        unary_on(CPU, "cast", sources[s], data, n, offset, dlop_dtype_name(to), cpu, (size_t)n * size);
        unary_on(CUDA, "cast", sources[s], data, n, offset, dlop_dtype_name(to), cuda, (size_t)n * size);
        for (int64_t i = 0; i < n; i++)
          ck_assert_msg(memcmp(cpu + (size_t)i * size, cuda + (size_t)i * size, size) == 0,
                        "cast %s -> %s of %.17g (offset %lld): CPU %.17g, CUDA %.17g",
                        dlop_dtype_name(sources[s]), dlop_dtype_name(to),
                        dlop_test_get(data, sources[s], offset + i), (long long)offset,
                        dlop_test_get(cpu, to, i), dlop_test_get(cuda, to, i));
      }
  free(data);
  free(cpu);
  free(cuda);
}
END_TEST

/* ---- 16-bit unary math on every value ----------------------------------------------------- */

/* The distance between two 16-bit floats of one sign in units in the last place (their bits
 * are ordered like their magnitudes); opposite signs count from zero on both sides. */
static int64_t ulps16(uint16_t a, uint16_t b) {
  const int64_t x = a & 0x8000u ? -(int64_t)(a & 0x7FFFu) : (int64_t)a;
  const int64_t y = b & 0x8000u ? -(int64_t)(b & 0x7FFFu) : (int64_t)b;
  return x > y ? x - y : y - x;
}

static int is_nan16(uint16_t h, dlop_dtype dtype) {
  return dtype == DLOP_FLOAT16 ? (h & 0x7FFFu) > 0x7C00u : (h & 0x7FFFu) > 0x7F80u;
}

/* sqrt, log, tanh and sigmoid of every float16 and every bfloat16 value (all 65536 bit
 * patterns, so every subnormal, both zeros, the infinities and NaNs): the packed kernel of two
 * elements per word gives the element function's bits (the same input one element later,
 * misaligned, goes element by element; and a length that leaves a tail); against the CPU,
 * sqrt bit for bit (NaN for NaN), the others within 2 ulp of the 16-bit type (each device's
 * result is within 1 of the true value), NaN for NaN, infinities alike. */
START_TEST(test_unary_every_16_bit_value) {
  static const char *const names[] = {"sqrt", "log", "tanh", "sigmoid"};
  static const dlop_dtype types[] = {DLOP_FLOAT16, DLOP_BFLOAT16};
  const int64_t n = 65536 + 5; /* a tail of five after whole vectors */
  uint16_t *data = malloc((size_t)(n + 1) * 2), *cpu = malloc((size_t)n * 2);
  uint16_t *cuda = malloc((size_t)n * 2), *shifted = malloc((size_t)n * 2);
  ck_assert(data && cpu && cuda && shifted);
  data[0] = 0x3C00u; /* the shifted run's first element is data[1] */
  for (int64_t i = 0; i < n; i++) data[i + 1] = (uint16_t)(i & 0xFFFF);
  for (int t = 0; t < 2; t++)
    for (int o = 0; o < 4; o++) {
      const dlop_dtype dt = types[t];
      unary_on(CPU, names[o], dt, data + 1, n, 0, NULL, cpu, (size_t)n * 2);
      unary_on(CUDA, names[o], dt, data, n, 1, NULL, shifted, (size_t)n * 2);
      unary_on(CUDA, names[o], dt, data + 1, n, 0, NULL, cuda, (size_t)n * 2);
      for (int64_t i = 0; i < n; i++) {
        const uint16_t x = data[i + 1], a = cpu[i], b = cuda[i];
        ck_assert_msg(b == shifted[i], "%s %s of 0x%04x: 0x%04x aligned (packed), 0x%04x misaligned",
                      names[o], dlop_dtype_name(dt), x, b, shifted[i]);
        const int nan_a = is_nan16(a, dt), nan_b = is_nan16(b, dt);
        const int64_t tol = o == 0 ? 0 : 2;
        const int inf = (a & 0x7FFFu) == (dt == DLOP_FLOAT16 ? 0x7C00u : 0x7F80u);
        const int ok = nan_a || nan_b ? nan_a == nan_b : inf ? a == b : ulps16(a, b) <= tol;
        ck_assert_msg(ok, "%s %s of 0x%04x (%g): CPU 0x%04x (%g), CUDA 0x%04x (%g)", names[o],
                      dlop_dtype_name(dt), x, dlop_test_get(&x, dt, 0), a, dlop_test_get(&a, dt, 0),
                      b, dlop_test_get(&b, dt, 0));
      }
    }
  free(data);
  free(cpu);
  free(cuda);
  free(shifted);
}
END_TEST

int main(void) {
  dlop_test_require_cuda_or_skip();
  Suite *suite = suite_create("elemwise_cuda");
  TCase *tc = dlop_test_tcase(suite, "parity", 300, NULL, NULL);
  dlop_test_add_tests(tc,
                      test_binary_arith,
                      test_broadcast_rows_beyond_grid_y,
                      test_unary,
                      test_comparisons_and_where,
                      test_cast_table,
                      test_cast_rounding_edges,
                      test_cast_float_to_int_at_the_ends,
                      test_unary_every_16_bit_value,
                      NULL);
  return dlop_test_run_suite(suite);
}
