/* test_plugin_parity.c — CPU vs CUDA parity of the seed plugins (double, multiply_them, exp):
 * random data for every declared dtype, sizes 0, 1, 1000, 2^16 + 1 and 2^20 + 3, strided,
 * negative-stride, misaligned and broadcast inputs, rows whose width is not a power of two,
 * exp's edge values, in-place runs and misaligned outputs; each thunk run directly on a dlop
 * stream with its output poisoned (0xFF bytes) first, so an element it fails to write shows up
 * as a mismatch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_runner.h"
#include "test_support.h"

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};
static const dlop_device CUDA = {DLOP_DEVICE_CUDA, 0};

typedef struct layout {
  int32_t ndim;
  int64_t shape[3];
  int64_t strides[3]; /* elements; all zero means C-contiguous */
  int64_t offset;     /* extra elements before the first one (misalignment) */
} layout;

/* Strides of a layout (contiguous when none given) and the element span it needs (just the
 * offset when empty), with *first the element index of element 0 inside that span. */
static int64_t layout_span(const layout *l, int64_t *strides, int64_t *first) {
  int64_t span = dlop_test_layout_span(l->ndim, l->shape, dlop_test_strides_given(l->ndim, l->strides),
                                       strides, first);
  *first += l->offset;
  return l->offset + (dlop_test_numel(l->ndim, l->shape) > 0 ? span : 0);
}

/* One input: the same random span on the host and on the GPU, viewed with the layout. */
typedef dlop_test_operand operand;

/* values: when not NULL, the span holds values[i % num_values] instead of random data. */
static void operand_init(operand *o, dlop_dtype dtype, const layout *l, uint64_t seed, double low,
                         double high, const double *values, int64_t num_values) {
  int64_t first, span = layout_span(l, o->strides, &first);
  size_t elsize = dlop_dtype_size(dtype);
  memcpy(o->shape, l->shape, sizeof o->shape);
  o->span = malloc((size_t)span * elsize + 16);
  ck_assert_ptr_nonnull(o->span);
  dlop_test_fill_random(o->span, dtype, span, seed, low, high);
  if (values != NULL && num_values > 0)
    for (int64_t i = 0; i < span; i++)
      dlop_test_set(o->span, dtype, i, values[i % num_values]);
  dlop_test_operand_upload(o, dtype, l->ndim, span, first, CUDA);
}

static void value_range(const char *op_name, dlop_dtype dtype, double *low, double *high) {
  if (dlop_test_integer_range(dtype, low, high)) return;
  int is_exp = strcmp(op_name, "exp") == 0;
  *low = is_exp ? (dtype == DLOP_FLOAT16 ? -9 : -80) : -100;
  *high = is_exp ? (dtype == DLOP_FLOAT16 ? 10 : 80) : 100;
}

/* Variations of one parity check (all zero: random inputs, output a fresh aligned array). */
typedef struct parity_options {
  const double *values;  /* input a's span holds these, cycled, instead of random data */
  int64_t num_values;
  int exact_specials;    /* an infinite, NaN or zero result on either side must match exactly */
  double atol;           /* absolute tolerance, when larger than the default */
  int64_t output_offset; /* CUDA output this many elements into a larger buffer (misaligned) */
  int in_place;          /* also run CUDA with the output tensor == input a's tensor */
} parity_options;

/* Results that are infinite or NaN must be so on both sides, with the same sign (
 * dlop_test_compare lets a finite value pass for an infinite one: |inf - x| <= rtol * inf).
 * A zero must be matched exactly too, except by a value within atol of it: at the bottom of
 * the subnormal range one side may round to the smallest subnormal and the other to 0 (CUDA's
 * exp is accurate to an ulp there, e.g. exp(-745.1) = 0 vs 4.94e-324). */
static int64_t count_special_mismatches(const void *expected, const void *actual,
                                        dlop_dtype dtype, int64_t n, double atol, char *report,
                                        size_t report_size) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    double e = dlop_test_get(expected, dtype, i), a = dlop_test_get(actual, dtype, i);
    int special_e = isinf(e) || isnan(e) || e == 0.0, special_a = isinf(a) || isnan(a) || a == 0.0;
    if (!special_e && !special_a) continue;
    if ((isnan(e) && isnan(a)) || (!isnan(e) && e == a)) continue;
    if ((e == 0.0 || a == 0.0) && isfinite(e) && isfinite(a) && fabs(a - e) <= atol) continue;
    if (bad == 0) snprintf(report, report_size, "[%lld] expected %.17g, got %.17g", (long long)i, e, a);
    bad++;
  }
  return bad;
}

/* Run op on the CPU and on CUDA with the same inputs; the outputs must agree. */
static void check_parity_with(const char *op_name, dlop_dtype dtype, const layout *a_layout,
                              const layout *b_layout, uint64_t seed, const parity_options *opt) {
  static const parity_options defaults;
  if (opt == NULL) opt = &defaults;
  const dlop_op_desc *op = dlop_test_find_op(op_name);
  const dlop_host_api *host = dlop_host_api_table();
  int32_t num_inputs = b_layout ? 2 : 1;
  const layout *layouts[2] = {a_layout, b_layout};
  operand in[2];
  dlop_type in_types[2], out_type;
  double low, high;
  value_range(op_name, dtype, &low, &high);
  for (int k = 0; k < num_inputs; k++) {
    operand_init(&in[k], dtype, layouts[k], seed + (uint64_t)k, low, high,
                 k == 0 ? opt->values : NULL, k == 0 ? opt->num_values : 0);
    in_types[k] = dlop_test_type(dtype, layouts[k]->ndim, layouts[k]->shape);
  }
  /* output type and shape from the op's own rules */
  char error[512] = "";
  int status = dlop_test_make_node(op, NULL, in_types, num_inputs, &out_type, error, sizeof error);
  ck_assert_msg(status == DLOP_OK, "make_node: %s", error);
  status = dlop_test_infer_shape(op, NULL, in_types, num_inputs, &out_type, error, sizeof error);
  ck_assert_msg(status == DLOP_OK, "infer_shape: %s", error);
  int64_t n = dlop_test_numel(out_type.ndim, out_type.shape);
  size_t bytes = (size_t)n * dlop_dtype_size(dtype);
  char what[160];
  snprintf(what, sizeof what, "%s %s n=%lld (a ndim %d%s%s%s)", op_name, dlop_dtype_name(dtype),
           (long long)n, (int)a_layout->ndim, b_layout ? ", broadcast pair" : "",
           opt->values ? ", given values" : "", opt->output_offset ? ", misaligned output" : "");

  /* CPU */
  void *cpu_out = malloc(bytes + 16), *gpu_out = malloc(bytes + 16);
  ck_assert(cpu_out && gpu_out);
  memset(cpu_out, 0xFF, bytes);
  dlop_tensor cpu_output; /* C-contiguous (strides NULL) */
  dlop_test_host_tensor(&cpu_output, cpu_out, 0, dtype, out_type.ndim, out_type.shape, NULL);
  dlop_thunk cpu_thunk, gpu_thunk;
  dlop_test_make_thunk_ok(op, NULL, in_types, num_inputs, &out_type, CPU, &cpu_thunk);
  dlop_tensor cpu_inputs[2] = {in[0].host, in[num_inputs - 1].host};
  dlop_test_run_ok(&cpu_thunk, cpu_inputs, num_inputs, &cpu_output, NULL, what);
  if (cpu_thunk.destroy) cpu_thunk.destroy(cpu_thunk.state);

  /* CUDA: the output is a view output_offset elements into a buffer with one element to
   * spare after it, all poisoned on the same stream first (the spare elements must stay so) */
  dlop_stream *stream = NULL;
  dlop_array *output_buffer = NULL, *output = NULL;
  size_t elsize = dlop_dtype_size(dtype);
  int64_t buffer_n = n + opt->output_offset + 1, out_strides[DLOP_MAX_NDIM];
  int64_t step = 1;
  for (int32_t d = out_type.ndim - 1; d >= 0; d--) {
    out_strides[d] = step;
    step *= out_type.shape[d];
  }
  DLOP_CK_OK(dlop_stream_create(CUDA, &stream));
  DLOP_CK_OK(dlop_array_empty(CUDA, dtype, 1, &buffer_n, &output_buffer));
  DLOP_CK_OK(dlop_array_view(output_buffer, out_type.ndim, out_type.shape, out_strides,
                             (uint64_t)opt->output_offset * elsize, &output));
  const dlop_tensor *gpu_output = dlop_array_tensor(output);
  ck_assert_int_eq(host->cuda_memset_async(dlop_tensor_base(dlop_array_tensor(output_buffer)),
                                           0xFF, (size_t)buffer_n * elsize,
                                           dlop_stream_handle(stream)), DLOP_OK);
  dlop_test_make_thunk_ok(op, NULL, in_types, num_inputs, &out_type, CUDA, &gpu_thunk);
  dlop_tensor gpu_inputs[2] = {*dlop_array_tensor(in[0].device_view),
                               *dlop_array_tensor(in[num_inputs - 1].device_view)};
  dlop_test_run_ok(&gpu_thunk, gpu_inputs, num_inputs, gpu_output, dlop_stream_handle(stream), what);
  /* twice: a second run on the same thunk (module loaded once) must give the same result */
  dlop_test_run_ok(&gpu_thunk, gpu_inputs, num_inputs, gpu_output, dlop_stream_handle(stream), what);
  DLOP_CK_OK(dlop_stream_synchronize(stream));
  unsigned char *buffer_host = malloc((size_t)buffer_n * elsize);
  ck_assert_ptr_nonnull(buffer_host);
  DLOP_CK_OK(dlop_array_to_host(output_buffer, buffer_host, (size_t)buffer_n * elsize));
  if (bytes > 0) memcpy(gpu_out, buffer_host + (size_t)opt->output_offset * elsize, bytes);
  for (int64_t i = 0; i < buffer_n; i++) {
    if (i == opt->output_offset) i += n; /* the output itself */
    for (size_t b = 0; b < elsize; b++)
      ck_assert_msg(buffer_host[(size_t)i * elsize + b] == 0xFF,
                    "%s: CUDA wrote element %lld of the output buffer, outside the output "
                    "(elements %lld to %lld)", what, (long long)i,
                    (long long)opt->output_offset, (long long)(opt->output_offset + n - 1));
  }
  free(buffer_host);

  char report[512];
  double atol = dtype == DLOP_FLOAT32 ? 1.5e-45 : dtype == DLOP_FLOAT64 ? 5e-324 : 0.0;
  if (opt->atol > atol) atol = opt->atol;
  int64_t bad = dlop_test_compare(cpu_out, gpu_out, dtype, n, atol, dlop_test_tolerance(dtype),
                                  report, sizeof report);
  ck_assert_msg(bad == 0, "%s: %lld of %lld differ between CPU (expected) and CUDA (got): %s",
                what, (long long)bad, (long long)n, report);
  if (opt->exact_specials) {
    bad = count_special_mismatches(cpu_out, gpu_out, dtype, n, atol, report, sizeof report);
    ck_assert_msg(bad == 0, "%s: %lld of %lld infinite, NaN or zero results differ between CPU "
                  "(expected) and CUDA (got), first: %s", what, (long long)bad, (long long)n,
                  report);
  }

  /* In place: the output tensor is input a's own tensor (same pointer); it must end up equal
   * to the out-of-place result. Input a must be laid out as the output (C-contiguous, from
   * element 0 of its span), which the caller guarantees and this checks. */
  if (opt->in_place) {
    int64_t a_first, a_strides[3];
    int64_t a_span = layout_span(a_layout, a_strides, &a_first);
    ck_assert_msg(a_layout->ndim == out_type.ndim && a_first == 0 && a_span == n &&
                  dlop_test_numel(a_layout->ndim, a_layout->shape) == n,
                  "%s: in place needs input a contiguous and shaped as the output", what);
    for (int32_t d = 0; d < out_type.ndim; d++)
      ck_assert_int_eq(a_layout->shape[d], out_type.shape[d]);
    dlop_test_run_ok(&gpu_thunk, gpu_inputs, num_inputs, &gpu_inputs[0], dlop_stream_handle(stream), what);
    DLOP_CK_OK(dlop_stream_synchronize(stream));
    void *in_place_out = malloc(bytes + 16);
    ck_assert_ptr_nonnull(in_place_out);
    DLOP_CK_OK(dlop_array_to_host(in[0].device_span, in_place_out, bytes));
    bad = dlop_test_compare(gpu_out, in_place_out, dtype, n, atol, dlop_test_tolerance(dtype),
                            report, sizeof report);
    ck_assert_msg(bad == 0, "%s in place: %lld of %lld differ from the out-of-place CUDA result "
                  "(expected): %s", what, (long long)bad, (long long)n, report);
    free(in_place_out);
  }
  if (gpu_thunk.destroy) gpu_thunk.destroy(gpu_thunk.state);

  dlop_array_release(output);
  dlop_array_release(output_buffer);
  dlop_stream_destroy(stream);
  for (int k = 0; k < num_inputs; k++) dlop_test_operand_free(&in[k]);
  free(cpu_out);
  free(gpu_out);
}

static void check_parity(const char *op_name, dlop_dtype dtype, const layout *a_layout,
                         const layout *b_layout, uint64_t seed) {
  check_parity_with(op_name, dtype, a_layout, b_layout, seed, NULL);
}

/* (1 << 16) + 1: whole chunks of exp's float32 and float64 chunk-form kernels (1024 and 512
 * elements a block) and one element more */
static const int64_t sizes[] = {0, 1, 1000, (1 << 16) + 1, (1 << 20) + 3};

static void check_unary(const char *op_name) {
  const dlop_op_desc *op = dlop_test_find_op(op_name);
  uint64_t seed = 1;
  for (int dt = 0; dt < DLOP_DTYPE_COUNT; dt++) {
    if (!(op->cuda_dtypes & DLOP_DTYPE_BIT(dt))) continue;
    ck_assert_msg(op->cpu_dtypes & DLOP_DTYPE_BIT(dt), "%s: %s on CUDA only", op_name,
                  dlop_dtype_name((dlop_dtype)dt));
    dlop_dtype dtype = (dlop_dtype)dt;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      layout flat = {1, {sizes[s]}, {0}, 0};
      layout misaligned = {1, {sizes[s]}, {0}, 1}; /* not on a 16-byte boundary: scalar path */
      layout stepped = {1, {sizes[s]}, {2}, 0};
      layout reversed = {1, {sizes[s]}, {-1}, 0};
      check_parity(op_name, dtype, &flat, NULL, seed++);
      check_parity(op_name, dtype, &misaligned, NULL, seed++);
      check_parity(op_name, dtype, &stepped, NULL, seed++);
      check_parity(op_name, dtype, &reversed, NULL, seed++);
    }
    layout transposed = {2, {513, 257}, {1, 513}, 0};
    layout rows_reversed = {3, {3, 70, 51}, {-70 * 51, 51, 1}, 0};
    layout broadcast_rows = {2, {1000, 77}, {0, 1}, 0};
    check_parity(op_name, dtype, &transposed, NULL, seed++);
    check_parity(op_name, dtype, &rows_reversed, NULL, seed++);
    check_parity(op_name, dtype, &broadcast_rows, NULL, seed++);
    /* 2-d with the inner dim contiguous (the kernels' rows fast path when rows start 16-byte
     * aligned; the general path otherwise): padded, reversed, broadcast and odd-pitch rows */
    layout padded = {2, {300, 64}, {128, 1}, 0}, flipped = {2, {300, 64}, {-64, 1}, 0};
    layout repeated = {2, {1000, 64}, {0, 1}, 0}, odd_pitch = {2, {300, 64}, {67, 1}, 0};
    layout padded_misaligned = {2, {300, 64}, {128, 1}, 1};
    check_parity(op_name, dtype, &padded, NULL, seed++);
    check_parity(op_name, dtype, &flipped, NULL, seed++);
    check_parity(op_name, dtype, &repeated, NULL, seed++);
    check_parity(op_name, dtype, &odd_pitch, NULL, seed++);
    check_parity(op_name, dtype, &padded_misaligned, NULL, seed++);
    /* rows whose width in 16-byte vectors is not a power of two (the rows kernel's divider by
     * a magic number): 48 and 80 columns (12 and 20 float32 vectors), 24 and 40 (12 and 20
     * float64 vectors); rows padded to a multiple of 16 elements (16-byte aligned for every
     * dtype), a large odd row count, and the same widths broadcast down the rows */
    const int64_t widths[] = {24, 40, 48, 80};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
      int64_t cols = widths[w], pitch = (cols + 16 + 15) / 16 * 16;
      layout padded_rows = {2, {20001, cols}, {pitch, 1}, 0};
      layout repeated_rows = {2, {1001, cols}, {0, 1}, 0};
      check_parity(op_name, dtype, &padded_rows, NULL, seed++);
      check_parity(op_name, dtype, &repeated_rows, NULL, seed++);
    }
  }
}

/* In place (output tensor == input tensor) and misaligned outputs: contiguous inputs of the
 * sizes above, and 1001 x 48 rows. */
static void check_unary_outputs(const char *op_name) {
  const dlop_op_desc *op = dlop_test_find_op(op_name);
  uint64_t seed = 5000;
  for (int dt = 0; dt < DLOP_DTYPE_COUNT; dt++) {
    if (!(op->cuda_dtypes & DLOP_DTYPE_BIT(dt))) continue;
    dlop_dtype dtype = (dlop_dtype)dt;
    parity_options in_place = {0}, out_misaligned = {0};
    in_place.in_place = 1;
    out_misaligned.output_offset = 1; /* one element: off the 16-byte boundary */
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      layout flat = {1, {sizes[s]}, {0}, 0};
      layout misaligned = {1, {sizes[s]}, {0}, 1};
      check_parity_with(op_name, dtype, &flat, NULL, seed++, &in_place);
      check_parity_with(op_name, dtype, &flat, NULL, seed++, &out_misaligned);  /* in aligned */
      check_parity_with(op_name, dtype, &misaligned, NULL, seed++, NULL);       /* out aligned */
      check_parity_with(op_name, dtype, &misaligned, NULL, seed++, &out_misaligned);
    }
    layout rows = {2, {1001, 48}, {0}, 0};
    check_parity_with(op_name, dtype, &rows, NULL, seed++, &in_place);
    check_parity_with(op_name, dtype, &rows, NULL, seed++, &out_misaligned);
  }
}

START_TEST(test_double_parity) { check_unary("double"); }
END_TEST

START_TEST(test_exp_parity) { check_unary("exp"); }
END_TEST

START_TEST(test_double_outputs) { check_unary_outputs("double"); }
END_TEST

START_TEST(test_exp_outputs) { check_unary_outputs("exp"); }
END_TEST

/* exp at the edges of float32 and float64: zeros, infinities, NaN, the last finite results
 * and the first infinite ones, subnormal and zero results, and the float64 kernel's switch
 * to CUDA's exp at |x| = 707; float64 also 20000 random values in [-750, 712], float32 in
 * [-110, 95] (both beyond the overflow and underflow points). Infinite, NaN and zero results
 * must match exactly; subnormal results within 4 units of the smallest subnormal (each side
 * may be an ulp off, and an ulp there is the whole relative error). */
START_TEST(test_exp_edge_values) {
  static const double edges[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 88.72, -103.9, 706.9,
                                 707.1, 709.78, 709.79, -708, -745.1, -746, 88.73, -87.3,
                                 -104.0, -707.0, 707.0, -706.9, -707.1, 1.0, -1.0, 1e-300};
  enum { EDGES = sizeof edges / sizeof edges[0], RANDOM = 20000 };
  const dlop_dtype dtypes[] = {DLOP_FLOAT32, DLOP_FLOAT64};
  uint64_t seed = 9000;
  for (size_t t = 0; t < 2; t++) {
    dlop_dtype dtype = dtypes[t];
    double *values = malloc((EDGES + RANDOM) * sizeof(double));
    ck_assert_ptr_nonnull(values);
    memcpy(values, edges, sizeof edges);
    if (dtype == DLOP_FLOAT64)
      dlop_test_fill_random(values + EDGES, DLOP_FLOAT64, RANDOM, seed++, -750, 712);
    else
      dlop_test_fill_random(values + EDGES, DLOP_FLOAT64, RANDOM, seed++, -110, 95);
    parity_options opt = {0};
    opt.values = values;
    opt.num_values = EDGES + RANDOM;
    opt.exact_specials = 1;
    opt.atol = dtype == DLOP_FLOAT32 ? 4 * 0x1p-149 : 4 * 0x1p-1074;
    /* contiguous (every edge once), a misaligned span (scalar path), rows and strided */
    layout flat = {1, {EDGES + RANDOM}, {0}, 0};
    layout misaligned = {1, {EDGES + RANDOM}, {0}, 1};
    layout rows = {2, {(EDGES + RANDOM) / 48, 48}, {64, 1}, 0};
    layout reversed = {1, {EDGES + RANDOM}, {-1}, 0};
    check_parity_with("exp", dtype, &flat, NULL, seed++, &opt);
    check_parity_with("exp", dtype, &misaligned, NULL, seed++, &opt);
    check_parity_with("exp", dtype, &rows, NULL, seed++, &opt);
    check_parity_with("exp", dtype, &reversed, NULL, seed++, &opt);
    opt.in_place = 1;
    check_parity_with("exp", dtype, &flat, NULL, seed++, &opt);
    free(values);
  }
}
END_TEST

START_TEST(test_multiply_them_parity) {
  const dlop_op_desc *op = dlop_test_find_op("multiply_them");
  uint64_t seed = 1000;
  for (int dt = 0; dt < DLOP_DTYPE_COUNT; dt++) {
    if (!(op->cuda_dtypes & DLOP_DTYPE_BIT(dt))) continue;
    dlop_dtype dtype = (dlop_dtype)dt;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      layout flat = {1, {sizes[s]}, {0}, 0};
      layout misaligned = {1, {sizes[s]}, {0}, 1};
      layout reversed = {1, {sizes[s]}, {-1}, 0};
      check_parity("multiply_them", dtype, &flat, &flat, seed++);
      check_parity("multiply_them", dtype, &misaligned, &flat, seed++);
      check_parity("multiply_them", dtype, &reversed, &flat, seed++);
    }
    layout col = {2, {3, 1}, {0}, 0}, row = {2, {1, 4}, {0}, 0};
    layout v5 = {1, {5}, {0}, 0}, m25 = {2, {2, 5}, {0}, 0};
    layout scalar = {0, {0}, {0}, 0}, big = {2, {1024, 1025}, {0}, 0};
    layout big_col = {2, {1024, 1}, {0}, 0}, big_row = {1, {1025}, {-1}, 0};
    layout transposed = {2, {513, 257}, {1, 513}, 0}, m = {2, {513, 257}, {0}, 0};
    check_parity("multiply_them", dtype, &col, &row, seed++);
    check_parity("multiply_them", dtype, &v5, &m25, seed++);
    check_parity("multiply_them", dtype, &scalar, &big, seed++);
    check_parity("multiply_them", dtype, &big_col, &big_row, seed++);
    check_parity("multiply_them", dtype, &transposed, &m, seed++);
    /* matrix times a row / column / scalar with rows of a multiple of 16 bytes (rows path) */
    layout m64 = {2, {1000, 64}, {0}, 0}, row64 = {1, {64}, {0}, 0}, col64 = {2, {1000, 1}, {0}, 0};
    layout padded = {2, {1000, 64}, {96, 1}, 0}, flat4k = {1, {4096}, {0}, 0};
    check_parity("multiply_them", dtype, &m64, &row64, seed++);
    check_parity("multiply_them", dtype, &row64, &m64, seed++);
    check_parity("multiply_them", dtype, &col64, &m64, seed++);
    check_parity("multiply_them", dtype, &padded, &row64, seed++);
    check_parity("multiply_them", dtype, &scalar, &flat4k, seed++);
    check_parity("multiply_them", dtype, &flat4k, &scalar, seed++);
    /* rows of 24, 40, 48 and 80 columns (not a power of two in vectors), a large odd row
     * count: a matrix times a row, a row times a matrix, a column times a matrix */
    const int64_t widths[] = {24, 40, 48, 80};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
      layout mat = {2, {1001, widths[w]}, {0}, 0}, vec = {1, {widths[w]}, {0}, 0};
      layout column = {2, {1001, 1}, {0}, 0};
      check_parity("multiply_them", dtype, &mat, &vec, seed++);
      check_parity("multiply_them", dtype, &vec, &mat, seed++);
      check_parity("multiply_them", dtype, &column, &mat, seed++);
    }
    /* in place on a (output tensor == a's tensor) and misaligned outputs */
    parity_options in_place = {0}, out_misaligned = {0};
    in_place.in_place = 1;
    out_misaligned.output_offset = 1;
    layout m48 = {2, {1001, 48}, {0}, 0}, row48 = {1, {48}, {0}, 0};
    layout n_flat = {1, {(1 << 20) + 3}, {0}, 0}, n_misaligned = {1, {(1 << 20) + 3}, {0}, 1};
    check_parity_with("multiply_them", dtype, &m48, &row48, seed++, &in_place);
    check_parity_with("multiply_them", dtype, &m48, &m48, seed++, &in_place);
    check_parity_with("multiply_them", dtype, &n_flat, &n_flat, seed++, &in_place);
    check_parity_with("multiply_them", dtype, &m48, &row48, seed++, &out_misaligned);
    check_parity_with("multiply_them", dtype, &n_flat, &n_flat, seed++, &out_misaligned);
    check_parity_with("multiply_them", dtype, &n_misaligned, &n_flat, seed++, NULL);
    check_parity_with("multiply_them", dtype, &n_misaligned, &n_misaligned, seed++,
                      &out_misaligned);
  }
}
END_TEST

int main(void) {
  dlop_test_require_cuda_or_skip();
  /* The check above initialized CUDA in this process, and a CUDA context does not survive
   * fork(): run the tests in this process (a crash then fails the whole binary, as it should). */
  setenv("CK_FORK", "no", 1);
  Suite *suite = suite_create("plugin_parity");
  TCase *parity = tcase_create("parity");
  tcase_set_timeout(parity, 300);
  tcase_add_unchecked_fixture(parity, dlop_test_load_bundled_plugins, NULL);
  tcase_add_test(parity, test_double_parity);
  tcase_add_test(parity, test_exp_parity);
  tcase_add_test(parity, test_multiply_them_parity);
  tcase_add_test(parity, test_double_outputs);
  tcase_add_test(parity, test_exp_outputs);
  tcase_add_test(parity, test_exp_edge_values);
  suite_add_tcase(suite, parity);
  return dlop_test_run_suite(suite);
}
