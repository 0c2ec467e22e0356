/* check_values.c — element values for the checks: reproducible random inputs, poison patterns
 * that mark unwritten output elements, and comparison within a tolerance fit for the dtype
 * (exact for integers) that reports the first mismatching elements. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <dlop/kit/half_float.h>

#include "check_suite.h"

static uint64_t next_random(uint64_t *state) { /* splitmix64: reproducible on every machine */
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void check_random_fill(void *data, int dtype, int64_t n, uint64_t seed) {
  uint64_t state = seed * 0x2545F4914F6CDD1Dull + 12345u;
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = next_random(&state);
    double u = (double)(r >> 11) * (1.0 / 9007199254740992.0); /* [0, 1) */
    double f = -2.0 + 4.0 * u;
    int64_t k = (int64_t)(r % 41) - 20; /* [-20, 20]: room for small products */
    switch (dtype) {
      case DLOP_BOOL: ((uint8_t *)data)[i] = (uint8_t)(r & 1); break;
      case DLOP_INT8: ((int8_t *)data)[i] = (int8_t)k; break;
      case DLOP_INT16: ((int16_t *)data)[i] = (int16_t)k; break;
      case DLOP_INT32: ((int32_t *)data)[i] = (int32_t)k; break;
      case DLOP_INT64: ((int64_t *)data)[i] = k; break;
      case DLOP_UINT8: ((uint8_t *)data)[i] = (uint8_t)(k + 20); break;
      case DLOP_FLOAT16: ((uint16_t *)data)[i] = dlop_float_to_half((float)f); break;
      case DLOP_BFLOAT16: ((uint16_t *)data)[i] = dlop_float_to_bfloat16((float)f); break;
      case DLOP_FLOAT32: ((float *)data)[i] = (float)f; break;
      case DLOP_FLOAT64: ((double *)data)[i] = f; break;
      default: break;
    }
  }
}

double check_value(const void *data, int dtype, int64_t i) {
  switch (dtype) {
    case DLOP_BOOL: return ((const uint8_t *)data)[i];
    case DLOP_INT8: return ((const int8_t *)data)[i];
    case DLOP_INT16: return ((const int16_t *)data)[i];
    case DLOP_INT32: return ((const int32_t *)data)[i];
    case DLOP_INT64: return (double)((const int64_t *)data)[i];
    case DLOP_UINT8: return ((const uint8_t *)data)[i];
    case DLOP_FLOAT16: return dlop_half_to_float(((const uint16_t *)data)[i]);
    case DLOP_BFLOAT16: return dlop_bfloat16_to_float(((const uint16_t *)data)[i]);
    case DLOP_FLOAT32: return ((const float *)data)[i];
    case DLOP_FLOAT64: return ((const double *)data)[i];
    default: return NAN;
  }
}

void check_poison_pattern(int dtype, int run, unsigned char *pattern) {
  size_t size = dlop_dtype_size((dlop_dtype)dtype);
  memset(pattern, run == 0 ? 0xAB : 0x5C, size);
  if (run != 0 || !dlop_dtype_is_float((dlop_dtype)dtype)) return;
  /* Run 0 poisons floats with a NaN whose payload no arithmetic produces (computed NaNs are
   * the canonical quiet NaN), so a NaN left there stands out in the report. */
  if (dtype == DLOP_FLOAT32) {
    uint32_t bits = 0x7FABCDEFu;
    memcpy(pattern, &bits, 4);
  } else if (dtype == DLOP_FLOAT64) {
    uint64_t bits = 0x7FFABCDEF0123456ull;
    memcpy(pattern, &bits, 8);
  } else if (dtype == DLOP_FLOAT16) {
    uint16_t bits = 0x7DAB;
    memcpy(pattern, &bits, 2);
  } else {
    uint16_t bits = 0x7FAB; /* bfloat16 */
    memcpy(pattern, &bits, 2);
  }
}

/* Relative and absolute tolerance. The relative term is a few units in the last place of the
 * dtype. The absolute term is that relative one at magnitude 1, the size of the suite's inputs
 * ([-2, 2]): where a result is near zero by cancellation (x*s - y, a dot product), a correct
 * kernel that rounds differently (a fused multiply-add, another summation order, CUDA against
 * the CPU) differs from the reference by a few ulps of its operands, not of the result. */
static void tolerance(int dtype, double *rtol, double *atol) {
  switch (dtype) {
    case DLOP_FLOAT16: *rtol = 2e-3; *atol = 2e-3; break;
    case DLOP_BFLOAT16: *rtol = 1.6e-2; *atol = 1.6e-2; break;
    case DLOP_FLOAT32: *rtol = 1e-5; *atol = 1e-5; break;
    case DLOP_FLOAT64: *rtol = 1e-13; *atol = 1e-13; break;
    default: *rtol = 0; *atol = 0; break;
  }
}

int check_close(double expected, double actual, int dtype) {
  double rtol, atol;
  tolerance(dtype, &rtol, &atol);
  if (isnan(expected) && isnan(actual)) return 1;
  if (expected == actual) return 1; /* +0 and -0, equal infinities */
  return !isnan(expected) && !isnan(actual) && !isinf(expected) && !isinf(actual) &&
         fabs(expected - actual) <= atol + rtol * fabs(expected);
}

const char *check_tolerance_text(int dtype, char *buffer, size_t size) {
  double rtol, atol;
  tolerance(dtype, &rtol, &atol);
  snprintf(buffer, size, "|expected - actual| <= %g + %g |expected|", atol, rtol);
  return buffer;
}

int64_t check_compare(const void *expected, const void *actual, int dtype, int64_t n, int exact,
                      char *report, size_t report_size) {
  size_t size = dlop_dtype_size((dlop_dtype)dtype), used = 0;
  int64_t mismatches = 0;
  report[0] = '\0';
  for (int64_t i = 0; i < n; i++) {
    const unsigned char *e = (const unsigned char *)expected + (size_t)i * size;
    const unsigned char *a = (const unsigned char *)actual + (size_t)i * size;
    if (memcmp(e, a, size) == 0) continue;
    if (!exact && dlop_dtype_is_float((dlop_dtype)dtype) &&
        check_close(check_value(expected, dtype, i), check_value(actual, dtype, i), dtype))
      continue;
    if (++mismatches <= 4 && used < report_size) {
      double ev = check_value(expected, dtype, i), av = check_value(actual, dtype, i);
      unsigned long long abits = 0;
      memcpy(&abits, a, size < 8 ? size : 8);
      used += (size_t)snprintf(report + used, report_size - used,
                               "%s[%lld] expected %.9g, got %.9g (bits 0x%llx)",
                               mismatches > 1 ? "; " : "", (long long)i, ev, av, abits);
    }
  }
  return mismatches;
}

void check_store_value(void *data, int dtype, int64_t i, double v) {
  switch (dtype) {
    case DLOP_BOOL: ((uint8_t *)data)[i] = v != 0; break;
    case DLOP_INT8: ((int8_t *)data)[i] = (int8_t)v; break;
    case DLOP_INT16: ((int16_t *)data)[i] = (int16_t)v; break;
    case DLOP_INT32: ((int32_t *)data)[i] = (int32_t)v; break;
    case DLOP_INT64: ((int64_t *)data)[i] = (int64_t)v; break;
    case DLOP_UINT8: ((uint8_t *)data)[i] = (uint8_t)v; break;
    case DLOP_FLOAT16: ((uint16_t *)data)[i] = dlop_float_to_half((float)v); break;
    case DLOP_BFLOAT16: ((uint16_t *)data)[i] = dlop_float_to_bfloat16((float)v); break;
    case DLOP_FLOAT32: ((float *)data)[i] = (float)v; break;
    case DLOP_FLOAT64: ((double *)data)[i] = v; break;
    default: break;
  }
}

/* Element i of an integer dtype as the integer it is (check_value goes through a double). */
static int64_t integer_value(const void *data, int dtype, int64_t i) {
  switch (dtype) {
    case DLOP_INT8: return ((const int8_t *)data)[i];
    case DLOP_INT16: return ((const int16_t *)data)[i];
    case DLOP_INT32: return ((const int32_t *)data)[i];
    case DLOP_INT64: return ((const int64_t *)data)[i];
    case DLOP_UINT8: return ((const uint8_t *)data)[i];
    default: return ((const uint8_t *)data)[i]; /* bool */
  }
}

/* v wrapped into an integer dtype of bits bits, read back as the dtype reads it. */
static int64_t wrapped(int64_t v, int dtype) {
  switch (dtype) {
    case DLOP_INT8: return (int8_t)(uint8_t)(uint64_t)v;
    case DLOP_INT16: return (int16_t)(uint16_t)(uint64_t)v;
    case DLOP_INT32: return (int32_t)(uint32_t)(uint64_t)v;
    case DLOP_UINT8: return (uint8_t)(uint64_t)v;
    default: return v;
  }
}

const char *check_reference_rule(int dtype, int tolerance_dtype, char *buffer, size_t size) {
  if (dtype == DLOP_BOOL) {
    snprintf(buffer, size, "as bool (nonzero is true), exactly");
  } else if (!dlop_dtype_is_float((dlop_dtype)dtype)) {
    snprintf(buffer, size, "as %s, exactly, modulo 2^%d (integer results wrap)",
             dlop_dtype_name((dlop_dtype)dtype), 8 * (int)dlop_dtype_size((dlop_dtype)dtype));
  } else {
    double rtol, atol;
    tolerance(tolerance_dtype, &rtol, &atol);
    snprintf(buffer, size, "rounded to %s, within %s's tolerance (|expected - actual| <= %g + %g "
             "|expected|)", dlop_dtype_name((dlop_dtype)dtype),
             dlop_dtype_name((dlop_dtype)tolerance_dtype), atol, rtol);
  }
  return buffer;
}

int64_t check_compare_reference(const double *reference, const void *actual, int dtype,
                                int tolerance_dtype, int64_t n, char *report, size_t report_size,
                                int64_t *first) {
  size_t size = dlop_dtype_size((dlop_dtype)dtype), used = 0;
  int is_float = dlop_dtype_is_float((dlop_dtype)dtype);
  double rtol, atol;
  tolerance(tolerance_dtype, &rtol, &atol);
  int64_t mismatches = 0;
  report[0] = '\0';
  *first = -1;
  for (int64_t i = 0; i < n; i++) {
    double v = reference[i];
    char expected[96];
    int ok;
    if (is_float) {
      unsigned char held[8];
      check_store_value(held, dtype, 0, v); /* the reference as dtype holds it */
      double e = check_value(held, dtype, 0), a = check_value(actual, dtype, i);
      ok = (isnan(e) && isnan(a)) || e == a ||
           (isfinite(e) && isfinite(a) && fabs(e - a) <= atol + rtol * fabs(e));
      snprintf(expected, sizeof expected, "%.9g", e);
    } else if (dtype == DLOP_BOOL) {
      int e = v != 0; /* NaN too, as NumPy's bool(nan) */
      ok = integer_value(actual, dtype, i) == e;
      snprintf(expected, sizeof expected, "%d", e);
    } else if (!isfinite(v) || v != floor(v) || fabs(v) >= 9.2e18) {
      ok = 0;
      snprintf(expected, sizeof expected, "%.9g (which %s cannot hold)", v,
               dlop_dtype_name((dlop_dtype)dtype));
    } else {
      int64_t e = wrapped((int64_t)v, dtype);
      ok = integer_value(actual, dtype, i) == e;
      if (e != (int64_t)v)
        snprintf(expected, sizeof expected, "%lld (%.0f wrapped)", (long long)e, v);
      else
        snprintf(expected, sizeof expected, "%lld", (long long)e);
    }
    if (ok) continue;
    if (*first < 0) *first = i;
    if (++mismatches <= 4 && used < report_size) {
      unsigned long long bits = 0;
      memcpy(&bits, (const unsigned char *)actual + (size_t)i * size, size < 8 ? size : 8);
      char got[64];
      if (is_float)
        snprintf(got, sizeof got, "%.9g", check_value(actual, dtype, i));
      else
        snprintf(got, sizeof got, "%lld", (long long)integer_value(actual, dtype, i));
      used += (size_t)snprintf(report + used, report_size - used,
                               "%s[%lld] expected %s, got %s (bits 0x%llx)",
                               mismatches > 1 ? "; " : "", (long long)i, expected, got, bits);
    }
  }
  return mismatches;
}
