/* test_blas_cuda.c — the blas plugin (dot, matmul, gemm) on CUDA against a naive triple loop in
 * double over the same host data: float32 and float64 at tight tolerances (so TF32, off by
 * default, would fail them), float16 and bfloat16 at loose ones; transposed, sliced, copied
 * and broadcast layouts, batched matmul through one strided-batched call and through a loop,
 * k = 0, m = 0, gemm's alpha/beta/trans/c broadcast/in place, outputs written through scratch;
 * the dot kernel (one output element) over lengths from 0 to 2^22 + 3, misaligned and strided
 * vectors, against a double sum, rerun for the same bits.
 * Outputs are poisoned (0xFF) first. Exits 77 without a GPU (1 with DLOP_REQUIRE_GPU=1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_runner.h"
#include "matmul_reference.h"
#include "op_runner.h"
#include "test_support.h"

static const dlop_device CUDA = {DLOP_DEVICE_CUDA, 0};

/* A layout (strides all zero: C-contiguous). */
typedef dlop_test_spec spec;

/* A tensor over a span of host data and the same span on the GPU. */
typedef struct tensor {
  dlop_test_span_tensor host; /* what the reference reads */
  dlop_tensor device;         /* the same layout over the GPU copy */
  dlop_array *span;
} tensor;

static void tensor_init(tensor *x, dlop_dtype dtype, const spec *s, uint64_t seed) {
  memset(x, 0, sizeof *x);
  dlop_test_span_tensor_init(&x->host, dtype, s, seed);
  int64_t span = (int64_t)x->host.span_elements;
  DLOP_CK_OK(dlop_array_from_host(CUDA, dtype, 1, &span, x->host.allocation, &x->span));
  DLOP_CK_OK(dlop_array_synchronize(x->span));
  x->device = x->host.t;
  x->device.data = dlop_array_tensor(x->span)->data;
  x->device.byte_offset = dlop_array_tensor(x->span)->byte_offset + x->host.t.byte_offset;
  x->device.device = CUDA;
}

/* Bring the GPU span back into the host span. */
static void tensor_download(tensor *x) {
  DLOP_CK_OK(dlop_array_to_host(x->span, x->host.allocation,
                                x->host.span_elements *
                                    dlop_dtype_size(dlop_tensor_dtype(&x->host.t))));
}

static void tensor_free(tensor *x) {
  dlop_array_release(x->span);
  free(x->host.allocation);
}

typedef dlop_test_gemm_params gemm_params;

static void fill_params(const dlop_op_desc *op, const gemm_params *g, int allow_tf32,
                        dlop_param_value *v) {
  dlop_test_gemm_param_values(op, g, v);
  v[op->num_params - 1].u.i = allow_tf32; /* allow_tf32 is every op's last parameter */
}

static double tolerance(dlop_dtype dtype, int allow_tf32) {
  switch (dtype) {
    case DLOP_FLOAT64: return 1e-12;
    case DLOP_FLOAT32: return allow_tf32 ? 2e-2 : 2e-5; /* TF32 would miss 2e-5 by far */
    case DLOP_FLOAT16: return 8e-3;
    default: return 4e-2; /* bfloat16: 8 bits of mantissa in the output */
  }
}

static void check_case(const char *op_name, dlop_dtype dtype, const spec *sa, const spec *sb,
                       const spec *sc, const gemm_params *g, const spec *out_strides,
                       int allow_tf32, int inplace, const char *what) {
  const dlop_op_desc *op = dlop_test_find_op(op_name);
  tensor x[3], out;
  dlop_param_value params[8];
  dlop_type types[3], out_type;
  dlop_tensor inputs[3];
  dlop_thunk thunk;
  dlop_stream *stream = NULL;
  char error[1024] = "";
  int32_t num_inputs = sc ? 3 : 2;
  fill_params(op, g, allow_tf32, params);
  tensor_init(&x[0], dtype, sa, 11);
  tensor_init(&x[1], dtype, sb, 22);
  if (sc) tensor_init(&x[2], dtype, sc, 33);
  for (int32_t i = 0; i < num_inputs; i++) {
    types[i] = dlop_test_type_of(&x[i].host.t);
    inputs[i] = x[i].device;
  }
  int status = dlop_test_make_node(op, params, types, num_inputs, &out_type, error, sizeof error);
  ck_assert_msg(status == DLOP_OK, "%s %s: make_node: %s", op_name, what, error);
  spec os = {out_type.ndim, {0}, {0}};
  for (int32_t d = 0; d < out_type.ndim; d++) os.shape[d] = out_type.shape[d];
  if (out_strides) memcpy(os.strides, out_strides->strides, sizeof os.strides);
  int64_t n = dlop_test_numel(out_type.ndim, out_type.shape);
  double *expected = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  dlop_test_matmul_reference(op_name, g, &x[0].host.t, &x[1].host.t, sc ? &x[2].host.t : NULL,
                             &out_type, expected);
  DLOP_CK_OK(dlop_stream_create(CUDA, &stream));
  if (inplace) {
    out = x[2];
    out.host.t.shape = out.device.shape = out.host.shape;
    out.host.t.strides = out.device.strides = out.host.strides;
  } else {
    tensor_init(&out, dtype, &os, 44);
    const dlop_tensor *span = dlop_array_tensor(out.span);
    size_t bytes = out.host.span_elements * dlop_dtype_size(dtype);
    ck_assert_int_eq(dlop_host_api_table()->cuda_memset_async(
                         (char *)span->data + span->byte_offset, 0xFF, bytes,
                         dlop_stream_handle(stream)),
                     DLOP_OK);
  }
  status = dlop_test_make_thunk(op, params, types, num_inputs, &out_type, CUDA, &thunk, error,
                                sizeof error);
  ck_assert_msg(status == DLOP_OK, "%s %s: make_thunk: %s (%s)", op_name, what, dlop_status_name(status), error);
  status = dlop_test_run(&thunk, inputs, num_inputs, &out.device, dlop_stream_handle(stream), error,
                         sizeof error);
  ck_assert_msg(status == DLOP_OK, "%s %s %s: run: %s (%s)", op_name, dlop_dtype_name(dtype), what,
                dlop_status_name(status), error);
  DLOP_CK_OK(dlop_stream_synchronize(stream));
  tensor_download(&out);
  double tol = tolerance(dtype, allow_tf32);
  for (int64_t i = 0; i < n; i++) {
    double got = dlop_test_tensor_get(&out.host.t, i);
    ck_assert_msg(fabs(got - expected[i]) <= tol * (1 + fabs(expected[i])),
                  "%s %s %s: element %lld of %lld: expected %.10g, got %.10g", op_name,
                  dlop_dtype_name(dtype), what, (long long)i, (long long)n, expected[i], got);
  }
  thunk.destroy(thunk.state);
  dlop_stream_destroy(stream);
  free(expected);
  for (int32_t i = 0; i < num_inputs; i++) tensor_free(&x[i]);
  if (!inplace) tensor_free(&out);
}

#define S1(a) {1, {a}, {0}}
#define S2(a, b) {2, {a, b}, {0}}
#define S3(a, b, c) {3, {a, b, c}, {0}}
#define S4(a, b, c, d) {4, {a, b, c, d}, {0}}

static const dlop_dtype DTYPES[4] = {DLOP_FLOAT32, DLOP_FLOAT64, DLOP_FLOAT16, DLOP_BFLOAT16};

START_TEST(matmul_cases) {
  dlop_dtype dt = DTYPES[_i];
  static const struct { spec a, b; const char *what; } cases[] = {
      {S2(37, 53), S2(53, 29), "37x53 @ 53x29"},
      {S2(1, 1), S2(1, 1), "1x1"},
      {S2(0, 5), S2(5, 3), "m = 0"},
      {S2(4, 0), S2(0, 3), "k = 0: zeros"},
      {S1(7), S1(7), "(n)(n) -> ()"},
      {S1((1 << 20) + 5), S1((1 << 20) + 5), "(n)(n), long: the dot kernel's vectors, many blocks"},
      {{1, {100003}, {3}}, S1(100003), "(n)(n), a strided: element by element"},
      {S2(1, 4099), S2(4099, 1), "(1,k)(k,1): the dot kernel"},
      {{2, {1, 4099}, {1, 1}}, {2, {4099, 1}, {1, 2}}, "(1,k)(k,1), b strided"},
      {S2(6, 7), S1(7), "(m,k)(k)"},
      {S1(7), S2(7, 5), "(k)(k,n)"},
      {{2, {37, 53}, {1, 37}}, {2, {53, 29}, {1, 53}}, "both transposed"},
      {{2, {37, 53}, {64, 1}}, {2, {53, 29}, {31, 1}}, "sliced rows"},
      {{2, {7, 9}, {20, 2}}, {2, {9, 5}, {-5, -1}}, "copied: no unit stride, negative"},
      {{2, {7, 9}, {0, 1}}, S2(9, 5), "copied: zero stride"},
      {S3(4, 6, 7), S2(7, 5), "batch, b broadcast (stride 0): one strided-batched call"},
      {S4(2, 1, 3, 4), S3(5, 4, 2), "batch (2,1) with (5,): a loop of strided-batched calls"},
      {{3, {3, 5, 4}, {40, 8, 1}}, {3, {3, 4, 6}, {24, 1, 4}}, "batched, sliced and transposed"},
      {S2(300, 200), S2(200, 250), "300x200x250"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    check_case("matmul", dt, &cases[i].a, &cases[i].b, NULL, NULL, NULL, 0, 0, cases[i].what);
  spec a = S2(6, 7), b = S2(7, 5), column_major = {2, {0}, {1, 6}}, strided = {2, {0}, {10, 2}};
  check_case("matmul", dt, &a, &b, NULL, NULL, &column_major, 0, 0, "column-major output");
  check_case("matmul", dt, &a, &b, NULL, NULL, &strided, 0, 0, "strided output (scratch)");
  spec d1 = S2(9, 33), d2 = S1(33);
  check_case("dot", dt, &d1, &d2, NULL, NULL, NULL, 0, 0, "dot (m,k)(k)");
}
END_TEST

START_TEST(gemm_cases) {
  dlop_dtype dt = DTYPES[_i];
  spec a = S2(37, 53), b = S2(53, 29), at = S2(53, 37), bt = S2(29, 53);
  spec c_full = S2(37, 29), c_row = S2(1, 29), c_scalar = {0, {0}, {0}};
  gemm_params plain = {1.0, 1.0, 0, 0}, scaled = {-0.5, 2.0, 0, 0}, no_c = {1.5, 0.0, 0, 0};
  gemm_params both = {2.0, 0.5, 1, 1};
  spec row = S2(1, 1000), column = S2(1000, 1), c_one = S2(1, 1);
  check_case("gemm", dt, &row, &column, &c_one, &scaled, NULL, 0, 0, "1 x 1: the dot kernel reads c");
  check_case("gemm", dt, &row, &column, &c_one, &no_c, NULL, 0, 0, "1 x 1, beta 0: c not read");
  check_case("gemm", dt, &row, &column, &c_one, &scaled, NULL, 0, 1, "1 x 1 in place on c");
  check_case("gemm", dt, &a, &b, &c_full, &plain, NULL, 0, 0, "c (m,n)");
  check_case("gemm", dt, &a, &b, &c_row, &scaled, NULL, 0, 0, "c (1,n)");
  check_case("gemm", dt, &a, &b, &c_scalar, &scaled, NULL, 0, 0, "c ()");
  check_case("gemm", dt, &a, &b, &c_full, &no_c, NULL, 0, 0, "beta 0");
  check_case("gemm", dt, &at, &bt, &c_row, &both, NULL, 0, 0, "trans_a and trans_b");
  spec a_k0 = S2(5, 0), b_k0 = S2(0, 4), c_k0 = S2(5, 4);
  check_case("gemm", dt, &a_k0, &b_k0, &c_k0, &scaled, NULL, 0, 0, "k = 0: beta * c");
  check_case("gemm", dt, &a, &b, &c_full, &scaled, NULL, 0, 1, "in place on c");
}
END_TEST

/* allow_tf32 = true still gives float32 products within TF32's error (and is accepted). */
START_TEST(tf32_opt_in) {
  spec a = S2(256, 512), b = S2(512, 128);
  check_case("matmul", DLOP_FLOAT32, &a, &b, NULL, NULL, NULL, 0, 0, "TF32 off (default): tight");
  check_case("matmul", DLOP_FLOAT32, &a, &b, NULL, NULL, NULL, 1, 0, "TF32 on: loose");
}
END_TEST

/* ---- the dot kernel: lengths, offsets that break 16-byte alignment, strides ----------------- */

/* dot(a, b) on CUDA of a[i * a_step] and b[i * b_step] (i < n), a and b starting a_offset and
 * b_offset elements into their spans, against a double sum of the same rounded values; a rerun
 * gives the same bits. With integers, the values are integers in [-4, 4], whose products and
 * partial sums the accumulator holds exactly in any order: the result is the exact sum rounded
 * once to the output (a lost or doubled element shows). Otherwise values in [-1, 1], within the
 * output's rounding plus the accumulator's over the sum of |a_i b_i| (float for 16-bit and
 * float32 inputs, double for float64). */
static void check_dot(dlop_dtype dtype, int64_t n, int64_t a_offset, int64_t a_step,
                      int64_t b_offset, int64_t b_step, int integers) {
  const size_t elsize = dlop_dtype_size(dtype);
  const int64_t a_span = a_offset + (n > 0 ? (n - 1) * a_step + 1 : 0) + 1;
  const int64_t b_span = b_offset + (n > 0 ? (n - 1) * b_step + 1 : 0) + 1;
  void *a = malloc((size_t)a_span * elsize), *b = malloc((size_t)b_span * elsize);
  ck_assert(a && b);
  dlop_test_fill_random(a, dtype, a_span, (uint64_t)(n + 3 * a_offset + 5 * a_step), -1.0, 1.0);
  dlop_test_fill_random(b, dtype, b_span, (uint64_t)(n + 7 * b_offset + 11 * b_step + 1), -1.0, 1.0);
  for (int64_t i = 0; integers && i < a_span; i++) dlop_test_set(a, dtype, i, nearbyint(4 * dlop_test_get(a, dtype, i)));
  for (int64_t i = 0; integers && i < b_span; i++) dlop_test_set(b, dtype, i, nearbyint(4 * dlop_test_get(b, dtype, i)));
  double expected = 0, magnitude = 0;
  for (int64_t i = 0; i < n; i++) {
    const double p = dlop_test_get(a, dtype, a_offset + i * a_step) * dlop_test_get(b, dtype, b_offset + i * b_step);
    expected += p;
    magnitude += fabs(p);
  }
  dlop_graph *graph = dlop_test_new_graph();
  dlop_var *inputs[2], *y;
  DLOP_CK_OK(dlop_graph_input(graph, "a", dtype, 1, &n, &inputs[0]));
  DLOP_CK_OK(dlop_graph_input(graph, "b", dtype, 1, &n, &inputs[1]));
  DLOP_CK_OK(dlop_graph_apply(graph, "dot", inputs, 2, NULL, 0, &y, 1));
  dlop_function *function = dlop_test_compile(graph, inputs, 2, y, CUDA);
  dlop_array *spans[2], *views[2], *out;
  DLOP_CK_OK(dlop_array_from_host(CUDA, dtype, 1, &a_span, a, &spans[0]));
  DLOP_CK_OK(dlop_array_from_host(CUDA, dtype, 1, &b_span, b, &spans[1]));
  DLOP_CK_OK(dlop_array_view(spans[0], 1, &n, &a_step, (uint64_t)a_offset * elsize, &views[0]));
  DLOP_CK_OK(dlop_array_view(spans[1], 1, &n, &b_step, (uint64_t)b_offset * elsize, &views[1]));
  unsigned char got[8], again[8];
  for (int run = 0; run < 2; run++) {
    DLOP_CK_OK(dlop_function_run(function, views, 2, &out, 1, NULL));
    DLOP_CK_OK(dlop_array_to_host(out, run ? again : got, elsize));
    dlop_array_release(out);
  }
  const double out_eps = dtype == DLOP_FLOAT16 ? 0x1p-10 : dtype == DLOP_BFLOAT16 ? 0x1p-7
                         : dtype == DLOP_FLOAT32 ? 0x1p-23 : 0x1p-52;
  const double acc_eps = integers ? 0 : dtype == DLOP_FLOAT64 ? 0x1p-45 : 0x1p-18;
  const double value = dlop_test_get(got, dtype, 0), tol = out_eps * fabs(expected) + acc_eps * magnitude;
  ck_assert_msg(fabs(value - expected) <= tol,
                "dot %s n=%lld a at %lld step %lld, b at %lld step %lld%s: expected %.17g, got %.17g (tol %g)",
                dlop_dtype_name(dtype), (long long)n, (long long)a_offset, (long long)a_step,
                (long long)b_offset, (long long)b_step, integers ? ", integers" : "", expected, value, tol);
  ck_assert_msg(memcmp(got, again, elsize) == 0, "dot %s n=%lld: a rerun gave different bits",
                dlop_dtype_name(dtype), (long long)n);
  dlop_test_release_arrays(4, views[0], views[1], spans[0], spans[1]);
  dlop_function_destroy(function);
  dlop_graph_destroy(graph);
  free(a);
  free(b);
}

START_TEST(dot_kernel_cases) {
  dlop_dtype dt = DTYPES[_i];
  static const int64_t lengths[] = {0, 1, 2, 7, 8, 9, 31, 33, 1000, 65537, (1 << 22) + 3};
  for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
    const int64_t n = lengths[l];
    for (int integers = 0; integers < 2; integers++) {
      check_dot(dt, n, 0, 1, 0, 1, integers); /* aligned: vector loads (and the tail) */
      check_dot(dt, n, 1, 1, 0, 1, integers); /* a misaligned: element by element */
      check_dot(dt, n, 0, 1, 3, 1, integers); /* b misaligned */
      check_dot(dt, n, 0, 2, 1, 3, integers); /* both strided */
    }
  }
}
END_TEST

int main(void) {
  dlop_test_require_cuda_or_skip();
  Suite *suite = suite_create("blas_cuda");
  TCase *tc = tcase_create("cuda");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, matmul_cases, 0, 4);
  tcase_add_loop_test(tc, gemm_cases, 0, 4);
  tcase_add_loop_test(tc, dot_kernel_cases, 0, 4);
  tcase_add_test(tc, tf32_opt_in);
  suite_add_tcase(suite, tc);
  return dlop_test_run_suite(suite);
}
