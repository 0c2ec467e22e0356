/* test_powf_fast.c — the elemwise plugin's AVX-512 float pow (plugins/elemwise/elemwise_cpu_powf.c)
 * against pow in double and libm's powf: within 1 ulp of the double value on random inputs (bit
 * patterns of every kind, and the ranges where results overflow, underflow and turn subnormal),
 * every special case bit for bit as powf gives it (zeros, infinities, NaN, negative bases with
 * integer and other exponents), exact where the result is (x^0, 1^y, x^1, powers of two), and a
 * result that depends only on its inputs: not on its position in the run, the run's length, or
 * the output being an input. Without AVX-512 the plugin never calls the kernel: the test prints
 * why and exits 77 (skipped). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

#include "../../plugins/elemwise/elemwise_cpu_powf.c"

#define RANDOM_CASES (1 << 22)

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t next_random(void) { return dlop_test_random_bits(&rng_state); }
static double uniform(void) { return dlop_test_random_unit(&rng_state); }
static float float_of_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* The lanes the kernel hands to libm: x NaN, zero, infinite or negative; y NaN or infinite. */
static int special(float x, float y) { return !(x > 0.0f) || isinf(x) || !isfinite(y); }

/* Error of r in ulps of the float nearest to the double d (subnormal ulp below 2^-126). */
static double ulp_error(float r, double d) {
  int e;
  frexp(fabs(d), &e);
  const double ulp = ldexp(1.0, (e - 1 < -126 ? -126 : e - 1) - 23);
  return fabs((double)r - d) / ulp;
}

/* Whether r is right for powf(x, y): bit for bit powf's where the kernel hands the lane to libm;
 * else (float)pow in double exactly, or within 1 ulp of the double value (an infinite or zero r
 * only where the double value rounds to it). *error gets the ulp error of finite results. */
static int result_ok(float x, float y, float r, double *error) {
  const float libm = powf(x, y);
  *error = 0;
  if (special(x, y)) return bits_of(r) == bits_of(libm) || (isnan(r) && isnan(libm));
  const double d = pow((double)x, (double)y);
  if (bits_of(r) == bits_of((float)d)) return 1;
  if (isinf(r) || isinf((float)d)) return 0;
  *error = ulp_error(r, d);
  return *error <= 1.0;
}

static void check_all(const float *x, const float *y, int64_t n, const char *what) {
  float *z = malloc((size_t)n * sizeof *z);
  double worst = 0;
  ck_assert_ptr_nonnull(z);
  ew_cpu_powf_fast(z, x, y, n);
  for (int64_t i = 0; i < n; i++) {
    double error;
    if (!result_ok(x[i], y[i], z[i], &error))
      ck_abort_msg("%s: powf(%a, %a) gave %a; powf %a, pow in double %a", what, (double)x[i],
                   (double)y[i], (double)z[i], (double)powf(x[i], y[i]), pow((double)x[i], (double)y[i]));
    if (error > worst) worst = error;
  }
  printf("%s: %lld cases, worst %.4f ulp\n", what, (long long)n, worst);
  free(z);
}

/* Every pair of a grid of edge values, special or not. */
START_TEST(test_edge_grid) {
  static const float values[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1.0f, -1.0f, 2.0f, -2.0f,
                                 0.5f, -0.5f, 3.0f, -3.0f, 0x1p-149f, -0x1p-149f, 0x1p-127f, 0x1p-126f,
                                 0x1.fffffep127f, -0x1.fffffep127f, 0x1.000002p0f, 0x1.fffffep-1f, 10.0f,
                                 0.1f, 1e-30f, 1e30f, 127.0f, -126.0f, 128.0f, -149.0f, -150.0f, 0.33333334f,
                                 1e9f, -1e9f, 0x1p24f, 0x1p24f + 2.0f, -0x1p24f - 2.0f, 7.0f, -7.0f};
  enum { COUNT = sizeof values / sizeof values[0] };
  float x[COUNT * COUNT], y[COUNT * COUNT];
  for (int i = 0; i < COUNT; i++)
    for (int j = 0; j < COUNT; j++) x[i * COUNT + j] = values[i], y[i * COUNT + j] = values[j];
  check_all(x, y, COUNT * COUNT, "edge grid");
}
END_TEST

/* Exact results: x^0 = 1, 1^y = 1, x^1 = x, 2^k at the ends of the float range. */
START_TEST(test_exact_results) {
  float x[1], y[1], z[1];
  for (int i = 0; i < 100000; i++) {
    const float v = float_of_bits((uint32_t)next_random() & 0x7fffffffu);
    if (!(v > 0.0f) || isinf(v)) continue;
    x[0] = v, y[0] = 0.0f;
    ew_cpu_powf_fast(z, x, y, 1);
    ck_assert_msg(z[0] == 1.0f, "powf(%a, 0) gave %a", (double)v, (double)z[0]);
    x[0] = 1.0f, y[0] = v;
    ew_cpu_powf_fast(z, x, y, 1);
    ck_assert_msg(z[0] == 1.0f, "powf(1, %a) gave %a", (double)v, (double)z[0]);
    x[0] = v, y[0] = 1.0f;
    ew_cpu_powf_fast(z, x, y, 1);
    ck_assert_msg(bits_of(z[0]) == bits_of(v), "powf(%a, 1) gave %a", (double)v, (double)z[0]);
  }
  for (int k = -149; k <= 127; k++) {
    x[0] = 2.0f, y[0] = (float)k;
    ew_cpu_powf_fast(z, x, y, 1);
    ck_assert_msg(z[0] == ldexpf(1.0f, k), "powf(2, %d) gave %a", k, (double)z[0]);
  }
  x[0] = 2.0f, y[0] = 128.0f;
  ew_cpu_powf_fast(z, x, y, 1);
  ck_assert(isinf(z[0]) && z[0] > 0);
  x[0] = 2.0f, y[0] = -150.0f; /* half the smallest subnormal: to even, 0 */
  ew_cpu_powf_fast(z, x, y, 1);
  ck_assert(z[0] == 0.0f && !signbit(z[0]));
}
END_TEST

/* Random inputs of several kinds: any bit patterns; x near 1 with large exponents; x and y over
 * the ranges where results overflow, underflow or are subnormal; integer y with negative x. */
START_TEST(test_random) {
  float *x = malloc(RANDOM_CASES * sizeof *x), *y = malloc(RANDOM_CASES * sizeof *y);
  const char *const kinds[] = {"bit patterns", "x near 1, |y| up to 1e7", "x in [1e-3, 1e3], y in [-60, 60]",
                               "negative x, integer y", "x in [0.5, 2), y in [-3, 3)"};
  ck_assert(x && y);
  for (int kind = 0; kind < 5; kind++) {
    for (int64_t i = 0; i < RANDOM_CASES; i++) {
      switch (kind) {
        case 0:
          x[i] = float_of_bits((uint32_t)next_random());
          y[i] = i % 2 ? float_of_bits((uint32_t)next_random()) : (float)(-40.0 + 80.0 * uniform());
          break;
        case 1:
          x[i] = (float)(1.0 + (uniform() - 0.5) * 0x1p-10);
          y[i] = (float)((uniform() - 0.5) * 2e7);
          break;
        case 2:
          x[i] = (float)exp(log(1e-3) + uniform() * log(1e6));
          y[i] = (float)(-60.0 + 120.0 * uniform());
          break;
        case 3:
          x[i] = (float)-exp(-20.0 + 40.0 * uniform());
          y[i] = (float)((int)(uniform() * 41.0) - 20);
          break;
        default:
          x[i] = (float)(0.5 + 1.5 * uniform());
          y[i] = (float)(-3.0 + 6.0 * uniform());
      }
    }
    check_all(x, y, RANDOM_CASES, kinds[kind]);
  }
  free(x);
  free(y);
}
END_TEST

/* The same inputs give the same bits at every offset, in runs of every length (the last few
 * padded), and when the output is an input. */
START_TEST(test_position_and_aliasing) {
  enum { N = 1000 };
  float x[N + 16], y[N + 16], whole[N], part[N + 16], alias[N + 16];
  for (int i = 0; i < N + 16; i++) {
    x[i] = i % 37 == 0 ? -x[i > 0 ? i - 1 : 0] : (float)(1e-2 + 10.0 * uniform());
    y[i] = i % 53 == 0 ? INFINITY : (float)(-8.0 + 16.0 * uniform());
  }
  ew_cpu_powf_fast(whole, x, y, N);
  for (int offset = 0; offset < 16; offset++)
    for (int length = 1; length <= 40; length++) {
      ew_cpu_powf_fast(part, x + offset, y + offset, length);
      for (int i = 0; i < length; i++)
        if (offset + i < N)
          ck_assert_msg(bits_of(part[i]) == bits_of(whole[offset + i]) ||
                            (isnan(part[i]) && isnan(whole[offset + i])),
                        "element %d at offset %d of a run of %d: %a, alone %a", offset + i, offset, length,
                        (double)part[i], (double)whole[offset + i]);
    }
  memcpy(alias, x, sizeof alias);
  ew_cpu_powf_fast(alias, alias, y, N);
  for (int i = 0; i < N; i++)
    ck_assert(bits_of(alias[i]) == bits_of(whole[i]) || (isnan(alias[i]) && isnan(whole[i])));
}
END_TEST

int main(void) {
  if (!ew_cpu_avx512_kernels_available()) {
    printf("SKIP: this CPU has no AVX-512 F, DQ, BW and VL: the plugin calls libmvec's powf\n");
    return 77;
  }
  Suite *suite = suite_create("powf_fast");
  TCase *tc = dlop_test_tcase(suite, "powf", 120, NULL, NULL);
  dlop_test_add_tests(tc, test_edge_grid, test_exact_results, test_random, test_position_and_aliasing, NULL);
  return dlop_test_run_suite(suite);
}
