/* test_powd_fast.c — the elemwise plugin's AVX-512 double pow (plugins/elemwise/elemwise_cpu_powd.c)
 * against pow in x87 long double and libm's pow: within 1 ulp of the long double value on random
 * inputs (bit patterns of every kind, x near 1 with large exponents, the ranges where results
 * overflow, underflow and turn subnormal), every special case bit for bit as pow gives it
 * (zeros, infinities, NaN, subnormal and negative bases, results past the kernel's range), exact
 * where the result is (x^0, 1^y, x^1, powers of two), and a result that depends only on its
 * inputs: not on its position in the run, the run's length, or the output being an input.
 * Without AVX-512 the plugin never calls the kernel: the test prints why and exits 77 (skipped). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

#include "../../plugins/elemwise/elemwise_cpu_powd.c"

#define RANDOM_CASES (1 << 21)

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;
static uint64_t next_random(void) { return dlop_test_random_bits(&rng_state); }
static double uniform(void) { return dlop_test_random_unit(&rng_state); }
static double double_of_bits(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}
static uint64_t bits_of(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}
static int same(double a, double b) { return bits_of(a) == bits_of(b) || (isnan(a) && isnan(b)); }

/* Error of r in ulps of the double nearest to the long double v (subnormal ulp below 2^-1022). */
static double ulp_error(double r, long double v) {
  int e;
  frexpl(fabsl(v), &e);
  const long double ulp = ldexpl(1.0L, (e - 1 < -1022 ? -1022 : e - 1) - 52);
  return (double)(fabsl((long double)r - v) / ulp);
}

/* Whether r is right for pow(x, y): libm's bits where the result is not a finite nonzero number
 * or libm's is not (the kernel hands those lanes to libm, or must agree with it), else libm's
 * bits or within 1 ulp of powl. *error gets the ulp error of finite results. */
static int result_ok(double x, double y, double r, double *error) {
  const double libm = pow(x, y);
  *error = 0;
  if (same(r, libm)) return 1;
  if (!isfinite(libm) || libm == 0 || !isfinite(r) || r == 0 || !(x > 0)) return 0;
  *error = ulp_error(r, powl((long double)x, (long double)y));
  return *error <= 1.0;
}

static void check_all(const double *x, const double *y, int64_t n, const char *what) {
  double *z = malloc((size_t)n * sizeof *z);
  double worst = 0;
  ck_assert_ptr_nonnull(z);
  ew_cpu_powd_fast(z, x, y, n);
  for (int64_t i = 0; i < n; i++) {
    double error;
    if (!result_ok(x[i], y[i], z[i], &error))
      ck_abort_msg("%s: pow(%a, %a) gave %a; libm %a, powl %La", what, x[i], y[i], z[i], pow(x[i], y[i]),
                   powl((long double)x[i], (long double)y[i]));
    if (error > worst) worst = error;
  }
  printf("%s: %lld cases, worst %.4f ulp\n", what, (long long)n, worst);
  free(z);
}

/* Every pair of a grid of edge values, special or not. */
START_TEST(test_edge_grid) {
  static const double values[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5,
                                  3.0, -3.0, 0x1p-1074, -0x1p-1074, 0x1p-1023, 0x1p-1022, 0x1.fffffffffffffp1023,
                                  -0x1.fffffffffffffp1023, 0x1.0000000000001p0, 0x1.fffffffffffffp-1, 10.0, 0.1,
                                  1e-300, 1e300, 1023.0, 1024.0, -1022.0, -1074.0, -1075.0, 708.0, 709.7, -745.2,
                                  0.3333333333333333, 1e15, -1e15, 0x1p53, 0x1p53 + 2.0, -0x1p53 - 2.0, 7.0, -7.0,
                                  0.6953125, 1.390625, 0x1.fep-1, 0x1.02p0};
  enum { COUNT = sizeof values / sizeof values[0] };
  double x[COUNT * COUNT], y[COUNT * COUNT];
  for (int i = 0; i < COUNT; i++)
    for (int j = 0; j < COUNT; j++) x[i * COUNT + j] = values[i], y[i * COUNT + j] = values[j];
  check_all(x, y, COUNT * COUNT, "edge grid");
}
END_TEST

/* Exact results: x^0 = 1, 1^y = 1, x^1 = x, 2^k over the whole double range. */
START_TEST(test_exact_results) {
  double x[1], y[1], z[1];
  for (int i = 0; i < 100000; i++) {
    const double v = double_of_bits(next_random() & 0x7fffffffffffffffULL);
    if (!(v > 0.0) || isinf(v)) continue;
    x[0] = v, y[0] = 0.0;
    ew_cpu_powd_fast(z, x, y, 1);
    ck_assert_msg(z[0] == 1.0, "pow(%a, 0) gave %a", v, z[0]);
    x[0] = 1.0, y[0] = v;
    ew_cpu_powd_fast(z, x, y, 1);
    ck_assert_msg(z[0] == 1.0, "pow(1, %a) gave %a", v, z[0]);
    x[0] = v, y[0] = 1.0;
    ew_cpu_powd_fast(z, x, y, 1);
    ck_assert_msg(bits_of(z[0]) == bits_of(v), "pow(%a, 1) gave %a", v, z[0]);
  }
  for (int k = -1074; k <= 1023; k++) {
    x[0] = 2.0, y[0] = (double)k;
    ew_cpu_powd_fast(z, x, y, 1);
    ck_assert_msg(z[0] == ldexp(1.0, k), "pow(2, %d) gave %a", k, z[0]);
  }
  x[0] = 2.0, y[0] = 1024.0;
  ew_cpu_powd_fast(z, x, y, 1);
  ck_assert(isinf(z[0]) && z[0] > 0);
}
END_TEST

/* Random inputs of several kinds: any bit patterns; x near 1 with large exponents; x and y over
 * the ranges where results overflow, underflow or are subnormal; every binade of x with small y;
 * integer y with negative x; the benchmark's range. */
START_TEST(test_random) {
  double *x = malloc(RANDOM_CASES * sizeof *x), *y = malloc(RANDOM_CASES * sizeof *y);
  const char *const kinds[] = {"bit patterns",
                               "x near 1, |y| up to 1e15",
                               "x in [1e-3, 1e3], y in [-120, 120]",
                               "x in [1e-300, 1e300], y in [-2.4, 2.4]",
                               "negative x, integer y",
                               "x in [0.5, 2), y in [-3, 3)"};
  ck_assert(x && y);
  for (int kind = 0; kind < 6; kind++) {
    for (int64_t i = 0; i < RANDOM_CASES; i++) {
      switch (kind) {
        case 0:
          x[i] = double_of_bits(next_random());
          y[i] = i % 2 ? double_of_bits(next_random()) : -40.0 + 80.0 * uniform();
          break;
        case 1:
          x[i] = 1.0 + (uniform() - 0.5) * ldexp(1.0, -(int)(next_random() % 50));
          y[i] = (uniform() - 0.5) * ldexp(1.0, (int)(next_random() % 51));
          break;
        case 2:
          x[i] = exp(log(1e-3) + uniform() * log(1e6));
          y[i] = -120.0 + 240.0 * uniform();
          break;
        case 3:
          x[i] = exp(log(1e-300) + uniform() * 2 * log(1e300));
          y[i] = -2.4 + 4.8 * uniform();
          break;
        case 4:
          x[i] = -exp(-20.0 + 40.0 * uniform());
          y[i] = (double)((int)(uniform() * 41.0) - 20);
          break;
        default:
          x[i] = 0.5 + 1.5 * uniform();
          y[i] = -3.0 + 6.0 * uniform();
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
  double x[N + 8], y[N + 8], whole[N], part[N + 8], alias[N + 8];
  for (int i = 0; i < N + 8; i++) {
    x[i] = i % 37 == 0 ? -x[i > 0 ? i - 1 : 0] : 1e-2 + 10.0 * uniform();
    y[i] = i % 53 == 0 ? INFINITY : -8.0 + 16.0 * uniform();
  }
  ew_cpu_powd_fast(whole, x, y, N);
  for (int offset = 0; offset < 8; offset++)
    for (int length = 1; length <= 24; length++) {
      ew_cpu_powd_fast(part, x + offset, y + offset, length);
      for (int i = 0; i < length; i++)
        if (offset + i < N)
          ck_assert_msg(same(part[i], whole[offset + i]), "element %d at offset %d of a run of %d: %a, alone %a",
                        offset + i, offset, length, part[i], whole[offset + i]);
    }
  memcpy(alias, x, sizeof alias);
  ew_cpu_powd_fast(alias, alias, y, N);
  for (int i = 0; i < N; i++) ck_assert(same(alias[i], whole[i]));
}
END_TEST

int main(void) {
  if (!ew_cpu_avx512_kernels_available()) {
    printf("SKIP: this CPU has no AVX-512 F, DQ, BW and VL: the plugin calls libmvec's pow\n");
    return 77;
  }
  Suite *suite = suite_create("powd_fast");
  TCase *tc = dlop_test_tcase(suite, "powd", 120, NULL, NULL);
  dlop_test_add_tests(tc, test_edge_grid, test_exact_results, test_random, test_position_and_aliasing, NULL);
  return dlop_test_run_suite(suite);
}
