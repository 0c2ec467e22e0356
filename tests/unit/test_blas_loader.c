/* test_blas_loader.c — which CBLAS the blas plugin's CPU path uses, and that every kind works:
 * DLOP_BLAS_LIBRARY wins (over a loaded scipy-openblas too) and a bad one fails clearly with no
 * fall back; a scipy-openblas the process loaded first is reused; otherwise the wheel the build
 * recorded, else the system's. Fake libraries (tests/fixtures/fake_cblas.c) under
 * scipy-openblas64's names (ILP64) and scipy-openblas32's (LP64) make the choice deterministic
 * and count their calls; the real ILP64 wheel's products are compared with the system's LP64
 * OpenBLAS called directly; a leading dimension past INT_MAX runs through ILP64 and is refused
 * through LP64. Also dlop_op_runtime_info, the ABI 1.2 stage `dlop info` prints.
 * Each test runs in its own process (Check's fork mode): the plugin loads its BLAS once. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "matmul_reference.h"
#include "op_runner.h"
#include "test_support.h"

#ifndef DLOP_TEST_BLAS_WHEEL_LIBRARIES
#define DLOP_TEST_BLAS_WHEEL_LIBRARIES ""
#endif

#define FAKE64 DLOP_TEST_FIXTURE_DIR "/blas/libscipy_openblas64_fake.so"
#define FAKE32 DLOP_TEST_FIXTURE_DIR "/blas/libscipy_openblas_fake.so"

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};

/* Products of every path the CPU backend takes: gemm, gemv (one column, one row), dot. */
static const int64_t shapes[][3] = {{5, 7, 3}, {6, 1, 4}, {1, 5, 4}, {1, 1, 9}, {33, 17, 65}};
#define NUM_SHAPES ((int)(sizeof shapes / sizeof shapes[0]))

/* matmul of a deterministic (m x k) by (k x n) through the plugin into out (m * n doubles). */
static void plugin_matmul(dlop_dtype dtype, int64_t m, int64_t n, int64_t k, double *out) {
  const dlop_op_desc *op = dlop_test_find_op("matmul");
  dlop_param_value params[2];
  dlop_test_gemm_param_values(op, NULL, params);
  int64_t shape_a[2] = {m, k}, shape_b[2] = {k, n}, shape_c[2] = {m, n};
  int64_t strides_a[2] = {k, 1}, strides_b[2] = {n, 1}, strides_c[2] = {n, 1};
  size_t size = dtype == DLOP_FLOAT32 ? 4 : 8;
  char *a = malloc((size_t)(m * k) * size), *b = malloc((size_t)(k * n) * size);
  char *c = malloc((size_t)(m * n) * size);
  for (int64_t i = 0; i < m * k; i++) {
    double v = (double)((i * 7) % 11) - 5.0;
    if (dtype == DLOP_FLOAT32) ((float *)a)[i] = (float)v; else ((double *)a)[i] = v;
  }
  for (int64_t i = 0; i < k * n; i++) {
    double v = (double)((i * 5) % 13) * 0.25 - 1.5;
    if (dtype == DLOP_FLOAT32) ((float *)b)[i] = (float)v; else ((double *)b)[i] = v;
  }
  dlop_tensor in[2], result;
  dlop_test_host_tensor(&in[0], a, 0, dtype, 2, shape_a, strides_a);
  dlop_test_host_tensor(&in[1], b, 0, dtype, 2, shape_b, strides_b);
  dlop_test_host_tensor(&result, c, 0, dtype, 2, shape_c, strides_c);
  dlop_type types[2] = {dlop_test_type_of(&in[0]), dlop_test_type_of(&in[1])}, out_type;
  char error[2048];
  ck_assert_int_eq(dlop_test_make_node(op, params, types, 2, &out_type, error, sizeof error), DLOP_OK);
  ck_assert_int_eq(dlop_test_infer_shape(op, params, types, 2, &out_type, error, sizeof error), DLOP_OK);
  dlop_thunk thunk;
  dlop_test_make_thunk_ok(op, params, types, 2, &out_type, CPU, &thunk);
  dlop_test_run_ok(&thunk, in, 2, &result, NULL, "matmul");
  dlop_test_destroy_thunk(&thunk);
  for (int64_t i = 0; i < m * n; i++) out[i] = dlop_test_tensor_get(&result, i);
  /* the reference: the same product in double */
  double *expected = malloc((size_t)(m * n) * sizeof(double));
  dlop_test_matmul_reference("matmul", NULL, &in[0], &in[1], NULL, &out_type, expected);
  for (int64_t i = 0; i < m * n; i++)
    ck_assert_msg(fabs(out[i] - expected[i]) <= 1e-4 * (1 + fabs(expected[i])),
                  "%s %lldx%lldx%lld element %lld: %g, expected %g", dlop_dtype_name(dtype),
                  (long long)m, (long long)n, (long long)k, (long long)i, out[i], expected[i]);
  free(expected), free(a), free(b), free(c);
}

/* Every shape in both dtypes, checked against the reference. */
static void run_products(void) {
  double out[33 * 17];
  for (int d = 0; d < 2; d++)
    for (int s = 0; s < NUM_SHAPES; s++)
      plugin_matmul(d ? DLOP_FLOAT64 : DLOP_FLOAT32, shapes[s][0], shapes[s][1], shapes[s][2], out);
}

/* The blas ops' run-time report for the CPU (what `dlop info dot` prints). */
static void cpu_report(char *text, size_t size) {
  ck_assert_int_eq(dlop_op_runtime_info(dlop_test_find_op("dot"), DLOP_DEVICE_CPU, text, size), DLOP_OK);
}

static void expect_in_report(const char *text, const char *want) {
  ck_assert_msg(strstr(text, want) != NULL, "expected \"%s\" in the report:\n%s", want, text);
}

/* How many calls a fake library has counted (it is loaded: RTLD_NOLOAD). */
static long fake_calls(const char *path) {
  void *handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (handle == NULL) return 0; /* never loaded: never called */
  long *calls = (long *)dlsym(handle, "fake_cblas_calls");
  ck_assert_ptr_nonnull(calls);
  long value = *calls;
  dlclose(handle);
  return value;
}

START_TEST(environment_picks_fake_ilp64) {
  char text[4096];
  setenv("DLOP_BLAS_LIBRARY", FAKE64, 1);
  run_products();
  cpu_report(text, sizeof text);
  expect_in_report(text, "blas library: " FAKE64 "\n");
  expect_in_report(text, "blas found as: DLOP_BLAS_LIBRARY\n");
  expect_in_report(text, "blas symbols: scipy_cblas_sgemm64_\n");
  expect_in_report(text, "blas integers: 64-bit (ILP64)\n");
  expect_in_report(text, "blas kernels: FakeCore\n");
  expect_in_report(text, "blas threads: 3\n");
  /* every product ran in the fake, each one call, with sane 64-bit arguments */
  ck_assert_int_eq(fake_calls(FAKE64), 2 * NUM_SHAPES);
}
END_TEST

START_TEST(environment_picks_fake_lp64) {
  char text[4096];
  setenv("DLOP_BLAS_LIBRARY", FAKE32, 1);
  run_products();
  cpu_report(text, sizeof text);
  expect_in_report(text, "blas symbols: scipy_cblas_sgemm\n");
  expect_in_report(text, "blas integers: 32-bit (LP64");
  ck_assert_int_eq(fake_calls(FAKE32), 2 * NUM_SHAPES);
}
END_TEST

/* A scipy-openblas the process loaded before the first CPU thunk (as NumPy does) is reused. */
START_TEST(loaded_scipy_openblas_is_reused) {
  char text[4096];
  unsetenv("DLOP_BLAS_LIBRARY");
  void *handle = dlopen(FAKE64, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(handle != NULL, "%s", dlerror());
  run_products();
  cpu_report(text, sizeof text);
  expect_in_report(text, "blas library: " FAKE64 "\n");
  expect_in_report(text, "blas found as: scipy-openblas already loaded in this process");
  ck_assert_int_eq(fake_calls(FAKE64), 2 * NUM_SHAPES);
}
END_TEST

START_TEST(environment_wins_over_loaded) {
  char text[4096];
  void *handle = dlopen(FAKE64, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(handle != NULL, "%s", dlerror());
  setenv("DLOP_BLAS_LIBRARY", FAKE32, 1);
  run_products();
  cpu_report(text, sizeof text);
  expect_in_report(text, "blas library: " FAKE32 "\n");
  ck_assert_int_eq(fake_calls(FAKE64), 0);
  ck_assert_int_eq(fake_calls(FAKE32), 2 * NUM_SHAPES);
}
END_TEST

/* A DLOP_BLAS_LIBRARY that cannot be used is reported, never replaced by a loaded one. */
START_TEST(bad_environment_never_falls_back) {
  char text[4096], error[2048];
  void *handle = dlopen(FAKE64, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(handle != NULL, "%s", dlerror());
  setenv("DLOP_BLAS_LIBRARY", "/nonexistent/libscipy_openblas64_.so", 1);
  const dlop_op_desc *op = dlop_test_find_op("matmul");
  dlop_param_value params[2];
  dlop_test_gemm_param_values(op, NULL, params);
  dlop_type in[2] = {{DLOP_FLOAT32, 2, {2, 3}}, {DLOP_FLOAT32, 2, {3, 4}}}, out;
  dlop_thunk thunk;
  ck_assert_int_eq(dlop_test_make_node(op, params, in, 2, &out, error, sizeof error), DLOP_OK);
  ck_assert_int_eq(dlop_test_infer_shape(op, params, in, 2, &out, error, sizeof error), DLOP_OK);
  ck_assert_int_eq(dlop_test_make_thunk(op, params, in, 2, &out, CPU, &thunk, error, sizeof error),
                   DLOP_UNSUPPORTED);
  ck_assert_msg(strstr(error, "tried DLOP_BLAS_LIBRARY=/nonexistent/libscipy_openblas64_.so (") &&
                    strstr(error, "No such file") && strstr(error, "unset it"),
                "message: %s", error);
  cpu_report(text, sizeof text); /* says why, and succeeds */
  expect_in_report(text, "blas library: none: no CBLAS library could be loaded");
  ck_assert_int_eq(fake_calls(FAKE64), 0);
}
END_TEST

/* No DLOP_BLAS_LIBRARY, nothing loaded: the wheel the build recorded, else the system's. */
START_TEST(default_choice) {
  char text[4096];
  unsetenv("DLOP_BLAS_LIBRARY");
  run_products();
  cpu_report(text, sizeof text);
  if (DLOP_TEST_BLAS_WHEEL_LIBRARIES[0] != '\0') {
    char first[1024];
    snprintf(first, sizeof first, "%s", DLOP_TEST_BLAS_WHEEL_LIBRARIES);
    first[strcspn(first, ":")] = '\0';
    expect_in_report(text, "blas found as: scipy-openblas wheel\n");
    expect_in_report(text, first); /* the first recorded path that loads: the first one here */
    expect_in_report(text, strstr(first, "64_") ? "blas integers: 64-bit (ILP64)\n"
                                                : "blas integers: 32-bit (LP64");
  } else {
    expect_in_report(text, "blas found as: system library\n");
  }
}
END_TEST

/* The real ILP64 path (the scipy-openblas64 wheel) gives the LP64 system OpenBLAS's products. */
START_TEST(ilp64_wheel_equals_lp64_system) {
  typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int,
                           const float *, int, float, float *, int);
  typedef void (*dgemm_fn)(int, int, int, int, int, int, double, const double *, int,
                           const double *, int, double, double *, int);
  char wheel[1024];
  snprintf(wheel, sizeof wheel, "%s", DLOP_TEST_BLAS_WHEEL_LIBRARIES);
  wheel[strcspn(wheel, ":")] = '\0';
  void *system = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (wheel[0] == '\0' || strstr(wheel, "64_") == NULL || system == NULL) {
    printf("ilp64_wheel_equals_lp64_system: skipped: needs the scipy-openblas64 wheel recorded "
           "by the build (%s) and libopenblas.so.0 (%s)\n", wheel[0] ? wheel : "none",
           system ? "found" : "missing");
    return;
  }
  setenv("DLOP_BLAS_LIBRARY", wheel, 1);
  sgemm_fn sgemm = (sgemm_fn)dlsym(system, "cblas_sgemm");
  dgemm_fn dgemm = (dgemm_fn)dlsym(system, "cblas_dgemm");
  ck_assert(sgemm != NULL && dgemm != NULL);
  for (int d = 0; d < 2; d++)
    for (int s = 0; s < NUM_SHAPES; s++) {
      const int m = (int)shapes[s][0], n = (int)shapes[s][1], k = (int)shapes[s][2];
      double got[33 * 17];
      float af[33 * 65], bf[65 * 17], cf[33 * 17];
      double ad[33 * 65], bd[65 * 17], cd[33 * 17];
      plugin_matmul(d ? DLOP_FLOAT64 : DLOP_FLOAT32, m, n, k, got);
      for (int i = 0; i < m * k; i++) ad[i] = (double)((i * 7) % 11) - 5.0, af[i] = (float)ad[i];
      for (int i = 0; i < k * n; i++) bd[i] = (double)((i * 5) % 13) * 0.25 - 1.5, bf[i] = (float)bd[i];
      if (d) dgemm(101, 111, 111, m, n, k, 1.0, ad, k, bd, n, 0.0, cd, n);
      else sgemm(101, 111, 111, m, n, k, 1.0f, af, k, bf, n, 0.0f, cf, n);
      for (int i = 0; i < m * n; i++) {
        double want = d ? cd[i] : (double)cf[i];
        ck_assert_msg(fabs(got[i] - want) <= (d ? 1e-12 : 1e-5) * (1 + fabs(want)),
                      "%dx%dx%d %s element %d: ILP64 %g, LP64 %g", m, n, k, d ? "float64" : "float32",
                      i, got[i], want);
      }
    }
  char text[4096];
  cpu_report(text, sizeof text);
  expect_in_report(text, "blas symbols: scipy_cblas_sgemm64_\n");
}
END_TEST

/* A leading dimension past INT_MAX: A (2 x 3) with rows 2^31 + 16 floats apart, in a mapping
 * of which only the two touched pages are ever backed. The ILP64 fake runs it with the exact
 * values; the LP64 one is refused with the sizes and what to use instead. */
static int run_wide_rows(const char *library, float *out, char *error, size_t error_size) {
  const int64_t row_stride = ((int64_t)1 << 31) + 16;
  const size_t bytes = (size_t)(row_stride + 3) * sizeof(float);
  float *a = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                  -1, 0);
  ck_assert_msg(a != MAP_FAILED, "mmap of %zu bytes", bytes);
  float b[6] = {1, 2, 3, 4, 5, 6};
  for (int p = 0; p < 3; p++) a[p] = (float)(p + 1), a[row_stride + p] = (float)(10 * (p + 1));
  int64_t shape_a[2] = {2, 3}, strides_a[2] = {row_stride, 1};
  int64_t shape_b[2] = {3, 2}, strides_b[2] = {2, 1}, shape_c[2] = {2, 2}, strides_c[2] = {2, 1};
  dlop_tensor in[2], result;
  dlop_test_host_tensor(&in[0], a, 0, DLOP_FLOAT32, 2, shape_a, strides_a);
  dlop_test_host_tensor(&in[1], b, 0, DLOP_FLOAT32, 2, shape_b, strides_b);
  dlop_test_host_tensor(&result, out, 0, DLOP_FLOAT32, 2, shape_c, strides_c);
  setenv("DLOP_BLAS_LIBRARY", library, 1);
  const dlop_op_desc *op = dlop_test_find_op("matmul");
  dlop_param_value params[2];
  dlop_test_gemm_param_values(op, NULL, params);
  dlop_type types[2] = {dlop_test_type_of(&in[0]), dlop_test_type_of(&in[1])}, out_type;
  ck_assert_int_eq(dlop_test_make_node(op, params, types, 2, &out_type, error, error_size), DLOP_OK);
  ck_assert_int_eq(dlop_test_infer_shape(op, params, types, 2, &out_type, error, error_size), DLOP_OK);
  dlop_thunk thunk;
  dlop_test_make_thunk_ok(op, params, types, 2, &out_type, CPU, &thunk);
  int status = dlop_test_run(&thunk, in, 2, &result, NULL, error, error_size);
  dlop_test_destroy_thunk(&thunk);
  munmap(a, bytes);
  return status;
}

START_TEST(ilp64_takes_a_leading_dimension_past_int_max) {
  float out[4] = {0};
  char error[1024];
  ck_assert_int_eq(run_wide_rows(FAKE64, out, error, sizeof error), DLOP_OK);
  /* rows (1 2 3) and (10 20 30) times ((1 2) (3 4) (5 6)) */
  ck_assert(out[0] == 22 && out[1] == 28 && out[2] == 220 && out[3] == 280);
  ck_assert_int_eq(fake_calls(FAKE64), 1);
}
END_TEST

START_TEST(lp64_refuses_a_leading_dimension_past_int_max) {
  float out[4] = {0};
  char error[1024];
  ck_assert_int_eq(run_wide_rows(FAKE32, out, error, sizeof error), DLOP_UNSUPPORTED);
  ck_assert_msg(strstr(error, "leading dims 2147483664") && strstr(error, "LP64 CBLAS") &&
                    strstr(error, "scipy-openblas64"),
                "message: %s", error);
  ck_assert_int_eq(fake_calls(FAKE32), 0);
}
END_TEST

/* dlop_op_runtime_info on what cannot answer: clear errors, never a crash. */
START_TEST(runtime_info_errors) {
  char text[256] = "junk";
  const dlop_op_desc *dot = dlop_test_find_op("dot"), *exp_op = dlop_test_find_op("exp");
  ck_assert_int_eq(dlop_op_runtime_info(exp_op, DLOP_DEVICE_CPU, text, sizeof text), DLOP_UNSUPPORTED);
  ck_assert_msg(strstr(dlop_last_error(), "exp reports no run-time facts"), "%s", dlop_last_error());
  ck_assert_str_eq(text, "");
  ck_assert_int_eq(dlop_op_runtime_info(dot, DLOP_DEVICE_CUDA, text, sizeof text), DLOP_UNSUPPORTED);
  ck_assert_msg(strstr(dlop_last_error(), "cuBLAS"), "%s", dlop_last_error());
  ck_assert_int_eq(dlop_op_runtime_info(dot, (dlop_device_type)7, text, sizeof text),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_msg(strstr(dlop_last_error(), "device type 7"), "%s", dlop_last_error());
  ck_assert_int_eq(dlop_op_runtime_info(dot, DLOP_DEVICE_CPU, text, 0), DLOP_INVALID_ARGUMENT);
  ck_assert_int_eq(dlop_op_runtime_info(NULL, DLOP_DEVICE_CPU, text, sizeof text), DLOP_INVALID_ARGUMENT);
  /* a small buffer gets a truncated, terminated report */
  char small[16];
  setenv("DLOP_BLAS_LIBRARY", FAKE64, 1);
  ck_assert_int_eq(dlop_op_runtime_info(dot, DLOP_DEVICE_CPU, small, sizeof small), DLOP_OK);
  ck_assert_uint_eq(strlen(small), sizeof small - 1);
  ck_assert(strncmp(small, "blas library: ", 14) == 0);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("blas_loader");
  TCase *tc = tcase_create("cpu");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, environment_picks_fake_ilp64);
  tcase_add_test(tc, environment_picks_fake_lp64);
  tcase_add_test(tc, loaded_scipy_openblas_is_reused);
  tcase_add_test(tc, environment_wins_over_loaded);
  tcase_add_test(tc, bad_environment_never_falls_back);
  tcase_add_test(tc, default_choice);
  tcase_add_test(tc, ilp64_wheel_equals_lp64_system);
  tcase_add_test(tc, runtime_info_errors);
  tcase_add_test(tc, ilp64_takes_a_leading_dimension_past_int_max);
  tcase_add_test(tc, lp64_refuses_a_leading_dimension_past_int_max);
  suite_add_tcase(suite, tc);
  return dlop_test_run_suite(suite);
}
