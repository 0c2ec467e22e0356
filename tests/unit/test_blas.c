/* test_blas.c — the blas plugin (dot, matmul, gemm) on the CPU, driven through its op
 * descriptors: float32 and float64 against a naive triple loop in double, for 0-size, 1x1 and
 * odd shapes, transposed and sliced operands (handed to BLAS without copies: the host pool sees
 * no scratch), copied layouts (no unit stride, negative, zero strides), batched matmul with
 * broadcast batch dims, 1-D promotion, gemm's alpha/beta/trans/c broadcast/in place, outputs
 * BLAS cannot write directly, concurrent runs, type/shape errors and a missing BLAS. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_runner.h"
#include "matmul_reference.h"
#include "op_runner.h"
#include "test_support.h"

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};

/* A layout (strides all zero: C-contiguous). */
typedef dlop_test_spec spec;

/* ---- the op's stages ------------------------------------------------------------------- */

/* Parameters: gemm (alpha, beta, trans_a, trans_b, allow_tf32); dot/matmul (allow_tf32). */
typedef dlop_test_gemm_params gemm_params;

/* make_node, then infer_shape when it succeeded (the output type the thunk gets). */
static int make_node(const dlop_op_desc *op, const dlop_param_value *params, const dlop_type *in,
                     int32_t num_inputs, dlop_type *out, char *error, size_t error_size) {
  int status = dlop_test_make_node(op, params, in, num_inputs, out, error, error_size);
  if (status == DLOP_OK) status = dlop_test_infer_shape(op, params, in, num_inputs, out, error, error_size);
  return status;
}

/* The CPU pool's allocations from the system so far. With the cache emptied first, any scratch
 * a run takes shows up as a new one. */
static uint64_t pool_allocations(void) { return dlop_test_memory_stats(CPU).driver_allocations; }

/* Run op on operands laid out per the specs against the reference; out_spec NULL: the output
 * C-contiguous. expect_copy: 0 asserts the run took no scratch memory (BLAS read the operands
 * as they lie), 1 that it did, -1 no assertion. inplace: gemm's output is c's memory. */
static void check_case(const char *op_name, dlop_dtype dtype, const spec *sa, const spec *sb,
                       const spec *sc, const gemm_params *g, const spec *out_spec,
                       int expect_copy, int inplace, const char *what) {
  const dlop_op_desc *op = dlop_test_find_op(op_name);
  dlop_param_value params[8];
  dlop_test_span_tensor x[3], out;
  dlop_type types[3], out_type;
  dlop_tensor inputs[3];
  dlop_thunk thunk;
  char error[1024];
  int32_t num_inputs = sc ? 3 : 2;
  dlop_test_gemm_param_values(op, g, params);
  dlop_test_span_tensor_init(&x[0], dtype, sa, 11);
  dlop_test_span_tensor_init(&x[1], dtype, sb, 22);
  if (sc) dlop_test_span_tensor_init(&x[2], dtype, sc, 33);
  for (int32_t i = 0; i < num_inputs; i++) types[i] = dlop_test_type_of(&x[i].t), inputs[i] = x[i].t;
  int status = make_node(op, params, types, num_inputs, &out_type, error, sizeof error);
  ck_assert_msg(status == DLOP_OK, "%s %s: make_node: %s", op_name, what, error);
  spec os = {out_type.ndim, {0}, {0}};
  for (int32_t d = 0; d < out_type.ndim; d++) os.shape[d] = out_type.shape[d];
  if (out_spec) {
    ck_assert_int_eq(out_spec->ndim, out_type.ndim);
    memcpy(os.strides, out_spec->strides, sizeof os.strides);
  }
  int64_t n = dlop_test_numel(out_type.ndim, out_type.shape);
  double *expected = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  dlop_test_matmul_reference(op_name, g, &x[0].t, &x[1].t, sc ? &x[2].t : NULL, &out_type, expected);
  if (inplace) {
    out = x[2]; /* the host handed c's memory (of the output's shape) as the output */
    out.t.shape = out.shape;
    out.t.strides = out.strides;
  } else {
    dlop_test_span_tensor_init(&out, dtype, &os, 44);
    for (size_t i = 0; i < out.span_elements; i++) dlop_test_set(out.allocation, dtype, (int64_t)i, NAN);
  }
  status = dlop_test_make_thunk(op, params, types, num_inputs, &out_type, CPU, &thunk, error, sizeof error);
  ck_assert_msg(status == DLOP_OK, "%s %s: make_thunk: %s", op_name, what, error);
  DLOP_CK_OK(dlop_memory_release_cached(CPU));
  uint64_t allocations = pool_allocations();
  status = dlop_test_run(&thunk, inputs, num_inputs, &out.t, NULL, error, sizeof error);
  ck_assert_msg(status == DLOP_OK, "%s %s: run: %s (%s)", op_name, what, dlop_status_name(status), error);
  if (expect_copy == 0)
    ck_assert_msg(pool_allocations() == allocations, "%s %s: the run took scratch memory (a copy)", op_name, what);
  if (expect_copy == 1)
    ck_assert_msg(pool_allocations() > allocations, "%s %s: the run took no scratch memory", op_name, what);
  int64_t k = 1;
  for (int32_t i = 0; i < 2; i++) k = k > x[i].shape[0] ? k : x[i].shape[0];
  double tol = dtype == DLOP_FLOAT32 ? 2e-5 * (double)k : 1e-13 * (double)k;
  for (int64_t i = 0; i < n; i++) {
    double got = dlop_test_tensor_get(&out.t, i);
    DLOP_CK_EACH(fabs(got - expected[i]) <= tol * (1 + fabs(expected[i])),
                  "%s %s %s: element %lld: expected %.17g, got %.17g", op_name,
                  dlop_dtype_name(dtype), what, (long long)i, expected[i], got);
  }
  dlop_test_destroy_thunk(&thunk);
  free(expected);
  for (int32_t i = 0; i < num_inputs; i++) free(x[i].allocation);
  if (!inplace) free(out.allocation);
}

#define S1(a) {1, {a}, {0}}
#define S2(a, b) {2, {a, b}, {0}}
#define S3(a, b, c) {3, {a, b, c}, {0}}
#define S4(a, b, c, d) {4, {a, b, c, d}, {0}}

static const dlop_dtype DTYPES[2] = {DLOP_FLOAT32, DLOP_FLOAT64};

/* Two operands and what they are, for the tables of the tests below. */
typedef struct pair_case {
  spec a, b;
  const char *what;
} pair_case;

/* check_case of op_name on dtype for each of count cases: no c, default parameters, the output
 * C-contiguous, expect_copy as check_case takes it. */
static void check_pairs(const char *op_name, dlop_dtype dtype, const pair_case *cases, size_t count,
                        int expect_copy) {
  for (size_t i = 0; i < count; i++)
    check_case(op_name, dtype, &cases[i].a, &cases[i].b, NULL, NULL, NULL, expect_copy, 0,
               cases[i].what);
}

/* ---- tests -------------------------------------------------------------------------------- */

START_TEST(matmul_shapes) {
  static const pair_case cases[] = {
      {S2(37, 53), S2(53, 29), "37x53 @ 53x29"},
      {S2(1, 1), S2(1, 1), "1x1"},
      {S2(0, 5), S2(5, 3), "m = 0"},
      {S2(4, 5), S2(5, 0), "n = 0"},
      {S2(4, 0), S2(0, 3), "k = 0: zeros"},
      {S1(7), S1(7), "(n)(n) -> ()"},
      {S1(0), S1(0), "(0)(0) -> () = 0"},
      {S2(6, 7), S1(7), "(m,k)(k) -> (m)"},
      {S1(7), S2(7, 5), "(k)(k,n) -> (n)"},
      {S3(4, 6, 7), S2(7, 5), "batch (4,6,7) @ (7,5)"},
      {S2(6, 7), S3(4, 7, 5), "(6,7) @ batch (4,7,5)"},
      {S4(2, 1, 3, 4), S3(5, 4, 2), "broadcast batch (2,1) with (5,)"},
      {S3(3, 4, 5), S1(5), "batch (3,4,5) @ (5)"},
      {S1(4), S3(3, 4, 5), "(4) @ batch (3,4,5)"},
      {S3(2, 3, 0), S3(2, 0, 4), "batched k = 0"},
      {S3(0, 3, 4), S3(0, 4, 2), "batch of 0"},
  };
  check_pairs("matmul", DTYPES[_i], cases, sizeof cases / sizeof cases[0], -1);
}
END_TEST

START_TEST(dot_shapes) {
  static const pair_case cases[] = {
      {S1(33), S1(33), "(n)(n)"},           {S2(9, 33), S1(33), "(m,k)(k)"},
      {S1(33), S2(33, 8), "(k)(k,n)"},      {S2(9, 33), S2(33, 8), "(m,k)(k,n)"},
      {S2(3, 0), S2(0, 2), "k = 0"},
  };
  check_pairs("dot", DTYPES[_i], cases, sizeof cases / sizeof cases[0], -1);
}
END_TEST

/* Transposed views (strides swapped) and slices (row stride > cols) go to BLAS as they are. */
START_TEST(direct_layouts_take_no_copy) {
  static const pair_case cases[] = {
      {{2, {37, 53}, {1, 37}}, S2(53, 29), "a transposed"},
      {S2(37, 53), {2, {53, 29}, {1, 53}}, "b transposed"},
      {{2, {37, 53}, {1, 40}}, {2, {53, 29}, {1, 60}}, "both column-major with padding"},
      {{2, {37, 53}, {64, 1}}, {2, {53, 29}, {31, 1}}, "sliced rows (lda > cols)"},
      {{3, {3, 5, 4}, {40, 8, 1}}, {3, {3, 4, 6}, {24, 1, 4}}, "batched, sliced and transposed"},
      {{1, {17}, {3}}, {2, {17, 4}, {4, 1}}, "strided vector as a row (its stride is lda)"},
  };
  check_pairs("matmul", DTYPES[_i], cases, sizeof cases / sizeof cases[0], 0);
}
END_TEST

/* No unit stride, negative or zero strides: copied to scratch first. */
START_TEST(other_layouts_are_copied) {
  static const pair_case cases[] = {
      {{2, {7, 9}, {20, 2}}, S2(9, 5), "a with no unit stride"},
      {S2(7, 9), {2, {9, 5}, {-5, -1}}, "b with negative strides"},
      {{2, {7, 9}, {0, 1}}, S2(9, 5), "a broadcast along rows (stride 0)"},
      {{3, {2, 7, 9}, {200, 3, 27}}, {3, {2, 9, 5}, {-45, 5, 1}}, "batched, copied"},
  };
  check_pairs("matmul", DTYPES[_i], cases, sizeof cases / sizeof cases[0], 1);
}
END_TEST

START_TEST(batch_broadcast_with_zero_strides) {
  dlop_dtype dt = DTYPES[_i];
  spec a = {3, {4, 6, 5}, {0, 5, 1}}; /* one matrix broadcast over 4 (stride 0) */
  spec b = {4, {2, 4, 5, 3}, {60, 15, 3, 1}};
  check_case("matmul", dt, &a, &b, NULL, NULL, NULL, 0, 0, "stride-0 batch");
}
END_TEST

/* Outputs BLAS cannot write as they lie go through scratch; column-major ones are written as
 * the transposed problem. */
START_TEST(output_layouts) {
  dlop_dtype dt = DTYPES[_i];
  spec a = S2(6, 7), b = S2(7, 5);
  spec column_major = {2, {0}, {1, 6}}, strided = {2, {0}, {10, 2}};
  check_case("matmul", dt, &a, &b, NULL, NULL, &column_major, 0, 0, "column-major output");
  check_case("matmul", dt, &a, &b, NULL, NULL, &strided, 1, 0, "strided output");
}
END_TEST

START_TEST(gemm_params_and_c) {
  dlop_dtype dt = DTYPES[_i];
  spec a = S2(37, 53), b = S2(53, 29), at = S2(53, 37), bt = S2(29, 53);
  spec c_full = S2(37, 29), c_row = S2(1, 29), c_vec = S1(29), c_col = S2(37, 1), c_scalar = {0, {0}, {0}};
  gemm_params plain = {1.0, 1.0, 0, 0}, scaled = {-0.5, 2.0, 0, 0}, no_c = {1.5, 0.0, 0, 0};
  gemm_params ta = {0.75, 0.25, 1, 0}, tb = {1.0, -1.0, 0, 1}, both = {2.0, 0.5, 1, 1};
  check_case("gemm", dt, &a, &b, &c_full, &plain, NULL, 0, 0, "c (m,n)");
  check_case("gemm", dt, &a, &b, &c_full, &scaled, NULL, 0, 0, "alpha -0.5 beta 2");
  check_case("gemm", dt, &a, &b, &c_row, &scaled, NULL, 0, 0, "c (1,n)");
  check_case("gemm", dt, &a, &b, &c_vec, &scaled, NULL, 0, 0, "c (n)");
  check_case("gemm", dt, &a, &b, &c_col, &scaled, NULL, 0, 0, "c (m,1)");
  check_case("gemm", dt, &a, &b, &c_scalar, &scaled, NULL, 0, 0, "c ()");
  check_case("gemm", dt, &a, &b, &c_full, &no_c, NULL, 0, 0, "beta 0 ignores c");
  check_case("gemm", dt, &at, &b, &c_full, &ta, NULL, 0, 0, "trans_a");
  check_case("gemm", dt, &a, &bt, &c_full, &tb, NULL, 0, 0, "trans_b");
  check_case("gemm", dt, &at, &bt, &c_row, &both, NULL, 0, 0, "trans_a and trans_b");
  spec at_view = {2, {53, 37}, {1, 53}}; /* trans_a of a transposed view: a plain row-major read */
  check_case("gemm", dt, &at_view, &b, &c_full, &ta, NULL, 0, 0, "trans_a of a transposed view");
  spec a_k0 = S2(5, 0), b_k0 = S2(0, 4), c_k0 = S2(5, 4);
  check_case("gemm", dt, &a_k0, &b_k0, &c_k0, &scaled, NULL, -1, 0, "k = 0: beta * c");
  check_case("gemm", dt, &a, &b, &c_full, &scaled, NULL, 0, 1, "in place on c");
  spec a_odd = {2, {37, 53}, {3, 120}};
  check_case("gemm", dt, &a_odd, &b, &c_full, &scaled, NULL, 1, 1, "in place on c, a copied");
}
END_TEST

/* The error a wrong node gets: both dtypes named; inner dims named with both shapes. */
START_TEST(type_and_shape_errors) {
  const dlop_op_desc *matmul = dlop_test_find_op("matmul"), *dot = dlop_test_find_op("dot");
  const dlop_op_desc *gemm = dlop_test_find_op("gemm");
  dlop_param_value params[8];
  dlop_type in[3], out;
  char error[512];
  memset(in, 0, sizeof in);
  dlop_test_gemm_param_values(matmul, NULL, params);
  in[0] = (dlop_type){DLOP_FLOAT32, 2, {2, 3}};
  in[1] = (dlop_type){DLOP_FLOAT64, 2, {3, 5}};
  ck_assert_int_eq(make_node(matmul, params, in, 2, &out, error, sizeof error), DLOP_TYPE_ERROR);
  ck_assert_msg(strstr(error, "float32") && strstr(error, "float64"), "%s", error);
  in[1] = (dlop_type){DLOP_FLOAT32, 2, {4, 5}};
  ck_assert_int_eq(make_node(matmul, params, in, 2, &out, error, sizeof error), DLOP_SHAPE_ERROR);
  ck_assert_str_eq(error, "matmul: a (2, 3) and b (4, 5): inner dimensions 3 and 4 differ");
  in[1] = (dlop_type){DLOP_FLOAT32, 2, {DLOP_DIM_UNKNOWN, 5}};
  ck_assert_int_eq(make_node(matmul, params, in, 2, &out, error, sizeof error), DLOP_OK);
  ck_assert_int_eq(out.ndim, 2);
  in[0] = (dlop_type){DLOP_INT32, 2, {2, 3}};
  in[1] = (dlop_type){DLOP_INT32, 2, {3, 5}};
  ck_assert_int_eq(make_node(matmul, params, in, 2, &out, error, sizeof error), DLOP_TYPE_ERROR);
  ck_assert_msg(strstr(error, "int32") != NULL, "%s", error);
  in[0] = (dlop_type){DLOP_FLOAT32, 3, {2, 2, 3}};
  in[1] = (dlop_type){DLOP_FLOAT32, 2, {3, 5}};
  dlop_test_gemm_param_values(dot, NULL, params);
  ck_assert_int_eq(make_node(dot, params, in, 2, &out, error, sizeof error), DLOP_TYPE_ERROR);
  ck_assert_msg(strstr(error, "rank 3") != NULL, "%s", error);
  in[0] = (dlop_type){DLOP_FLOAT32, 0, {0}};
  ck_assert_int_eq(make_node(matmul, params, in, 2, &out, error, sizeof error), DLOP_TYPE_ERROR);
  in[0] = (dlop_type){DLOP_FLOAT32, 3, {2, 4, 3}};
  in[1] = (dlop_type){DLOP_FLOAT32, 3, {3, 3, 5}};
  ck_assert_int_eq(make_node(matmul, params, in, 2, &out, error, sizeof error), DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(error, "batch dims") != NULL, "%s", error);
  dlop_test_gemm_param_values(gemm, &(gemm_params){1, 1, 0, 0}, params);
  in[0] = (dlop_type){DLOP_FLOAT32, 2, {2, 3}};
  in[1] = (dlop_type){DLOP_FLOAT32, 2, {3, 5}};
  in[2] = (dlop_type){DLOP_FLOAT32, 2, {3, 5}};
  ck_assert_int_eq(make_node(gemm, params, in, 3, &out, error, sizeof error), DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(error, "does not broadcast") != NULL, "%s", error);
  in[2] = (dlop_type){DLOP_FLOAT64, 2, {2, 5}};
  ck_assert_int_eq(make_node(gemm, params, in, 3, &out, error, sizeof error), DLOP_TYPE_ERROR);
  ck_assert_msg(strstr(error, "c is float64") != NULL, "%s", error);
  /* trans_a: a (2,3) -> (3,2) */
  dlop_test_gemm_param_values(gemm, &(gemm_params){1, 1, 1, 0}, params);
  in[2] = (dlop_type){DLOP_FLOAT32, 2, {2, 5}};
  ck_assert_int_eq(make_node(gemm, params, in, 3, &out, error, sizeof error), DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(error, "inner dimensions 2 and 3 differ") != NULL, "%s", error);
}
END_TEST

/* A run whose tensors disagree with the shape rule is refused, not computed. */
START_TEST(run_checks_shapes) {
  const dlop_op_desc *op = dlop_test_find_op("matmul");
  dlop_param_value params[2];
  dlop_test_gemm_param_values(op, NULL, params);
  dlop_type in[2] = {{DLOP_FLOAT32, 2, {DLOP_DIM_UNKNOWN, DLOP_DIM_UNKNOWN}},
                     {DLOP_FLOAT32, 2, {DLOP_DIM_UNKNOWN, DLOP_DIM_UNKNOWN}}}, out;
  dlop_thunk thunk;
  char error[512];
  ck_assert_int_eq(make_node(op, params, in, 2, &out, error, sizeof error), DLOP_OK);
  ck_assert_int_eq(dlop_test_make_thunk(op, params, in, 2, &out, CPU, &thunk, error, sizeof error), DLOP_OK);
  dlop_test_span_tensor a, b, c;
  spec sa = S2(3, 4), sb = S2(5, 2), sc = S2(3, 2);
  dlop_test_span_tensor_init(&a, DLOP_FLOAT32, &sa, 1);
  dlop_test_span_tensor_init(&b, DLOP_FLOAT32, &sb, 2);
  dlop_test_span_tensor_init(&c, DLOP_FLOAT32, &sc, 3);
  dlop_tensor inputs[2] = {a.t, b.t};
  ck_assert_int_eq(dlop_test_run(&thunk, inputs, 2, &c.t, NULL, error, sizeof error), DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(error, "inner dimensions 4 and 5 differ") != NULL, "%s", error);
  thunk.destroy(thunk.state);
  free(a.allocation), free(b.allocation), free(c.allocation);
}
END_TEST

static void *concurrent_runs(void *unused) {
  spec a = S2(64, 48), b = S2(48, 40), c = S2(64, 40);
  gemm_params g = {0.5, 2.0, 0, 0};
  for (int i = 0; i < 20; i++) check_case("gemm", DLOP_FLOAT64, &a, &b, &c, &g, NULL, -1, 0, "thread");
  return unused;
}

/* Host threads may run thunks at the same time (OpenBLAS's pthread build serializes them). */
START_TEST(threads_at_once) {
  pthread_t threads[3];
  dlop_test_find_op("gemm"); /* load the plugins once, before the threads */
  for (int i = 0; i < 3; i++) ck_assert_int_eq(pthread_create(&threads[i], NULL, concurrent_runs, NULL), 0);
  for (int i = 0; i < 3; i++) pthread_join(threads[i], NULL);
}
END_TEST

/* DLOP_BLAS_LIBRARY names the library; when it cannot be used, CPU make_thunk says what was
 * tried and what to do (each test runs in its own process: the library is loaded once). */
static void expect_missing_blas(const char *path, const char *why) {
  setenv("DLOP_BLAS_LIBRARY", path, 1);
  const dlop_op_desc *op = dlop_test_find_op("matmul");
  dlop_param_value params[2];
  dlop_test_gemm_param_values(op, NULL, params);
  dlop_type in[2] = {{DLOP_FLOAT32, 2, {2, 3}}, {DLOP_FLOAT32, 2, {3, 4}}}, out;
  dlop_thunk thunk;
  char error[2048];
  ck_assert_int_eq(make_node(op, params, in, 2, &out, error, sizeof error), DLOP_OK);
  ck_assert_int_eq(dlop_test_make_thunk(op, params, in, 2, &out, CPU, &thunk, error, sizeof error),
                   DLOP_UNSUPPORTED);
  ck_assert_msg(strstr(error, "tried DLOP_BLAS_LIBRARY=") && strstr(error, path) && strstr(error, why) &&
                    strstr(error, "apt-get install libopenblas0-pthread") &&
                    strstr(error, "DLOP_BLAS_LIBRARY"),
                "message: %s", error);
}

START_TEST(missing_blas_library) { expect_missing_blas("/nonexistent/libblas.so", "No such file"); }
END_TEST

START_TEST(library_without_cblas) { expect_missing_blas("libm.so.6", "no cblas_sgemm"); }
END_TEST

int main(void) {
  Suite *suite = suite_create("blas");
  TCase *tc = tcase_create("cpu");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, matmul_shapes, 0, 2);
  tcase_add_loop_test(tc, dot_shapes, 0, 2);
  tcase_add_loop_test(tc, direct_layouts_take_no_copy, 0, 2);
  tcase_add_loop_test(tc, other_layouts_are_copied, 0, 2);
  tcase_add_loop_test(tc, batch_broadcast_with_zero_strides, 0, 2);
  tcase_add_loop_test(tc, output_layouts, 0, 2);
  tcase_add_loop_test(tc, gemm_params_and_c, 0, 2);
  tcase_add_test(tc, type_and_shape_errors);
  tcase_add_test(tc, run_checks_shapes);
  tcase_add_test(tc, threads_at_once);
  tcase_add_test(tc, missing_blas_library);
  tcase_add_test(tc, library_without_cblas);
  suite_add_tcase(suite, tc);
  return dlop_test_run_suite(suite);
}
