/* check_edges.c — the inputs that tell two implementations of one element function apart: the
 * edge values of each dtype (NaN, infinities, signed zeros, subnormals, the largest finite and
 * smallest normal values, integer extremes) written as storage bits, random bit patterns over
 * a dtype's whole range, and elements written out exactly (value and bits) for reports. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_suite.h"

/* An IEEE format: exponent and mantissa bits (float16 5/10, bfloat16 8/7, ...). */
static void float_format(int dtype, int *exponent, int *mantissa) {
  switch (dtype) {
    case DLOP_FLOAT16: *exponent = 5, *mantissa = 10; break;
    case DLOP_BFLOAT16: *exponent = 8, *mantissa = 7; break;
    case DLOP_FLOAT32: *exponent = 8, *mantissa = 23; break;
    default: *exponent = 11, *mantissa = 52; break;
  }
}

static void store_bits(void *out, int dtype, int index, uint64_t bits) {
  size_t size = dlop_dtype_size((dlop_dtype)dtype);
  memcpy((unsigned char *)out + (size_t)index * size, &bits, size); /* little-endian hosts */
}

static int float_edges(int dtype, void *out) {
  int e, m, count = 0;
  float_format(dtype, &e, &m);
  const uint64_t sign = 1ull << (e + m), top = 1ull << (m - 1), low = (1ull << m) - 1;
  const uint64_t all_ones = ((1ull << e) - 1) << m, bias = (1ull << (e - 1)) - 1;
  const uint64_t values[] = {
      all_ones | top,              /* NaN (quiet) */
      sign | all_ones | top,       /* -NaN */
      all_ones | top | 1,          /* a NaN with a payload */
      all_ones,                    /* inf */
      sign | all_ones,             /* -inf */
      0,                           /* 0 */
      sign,                        /* -0 */
      bias << m,                   /* 1 */
      sign | bias << m,            /* -1 */
      (bias - 1) << m,             /* 0.5 */
      (bias + 1) << m,             /* 2 */
      sign | (bias + 1) << m | top >> 1, /* -2.5 */
      1,                           /* the smallest subnormal */
      sign | 1,                    /* its negative */
      low,                         /* the largest subnormal */
      1ull << m,                   /* the smallest normal */
      sign | 1ull << m,            /* its negative */
      (all_ones - (1ull << m)) | low,        /* the largest finite value */
      sign | (all_ones - (1ull << m)) | low, /* the most negative */
  };
  for (size_t k = 0; k < sizeof values / sizeof values[0]; k++)
    store_bits(out, dtype, count++, values[k]);
  return count;
}

int check_edge_values(int dtype, void *out) {
  if (dlop_dtype_is_float((dlop_dtype)dtype)) return float_edges(dtype, out);
  if (dtype == DLOP_BOOL) {
    store_bits(out, dtype, 0, 0);
    store_bits(out, dtype, 1, 1);
    return 2;
  }
  if (dtype == DLOP_UINT8) {
    static const uint8_t values[] = {0, 1, 2, 100, 127, 128, 254, 255};
    memcpy(out, values, sizeof values);
    return (int)sizeof values;
  }
  int bits = 8 * (int)dlop_dtype_size((dlop_dtype)dtype);
  int64_t max = (int64_t)((1ull << (bits - 1)) - 1), min = -max - 1;
  const int64_t values[] = {0, 1, -1, 2, -2, 100, -100, min, min + 1, max, max - 1};
  for (size_t k = 0; k < sizeof values / sizeof values[0]; k++)
    store_bits(out, dtype, (int)k, (uint64_t)values[k]);
  return (int)(sizeof values / sizeof values[0]);
}

void check_random_bits_fill(void *data, int dtype, int64_t n, uint64_t seed) {
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  size_t size = dlop_dtype_size((dlop_dtype)dtype);
  for (int64_t i = 0; i < n; i++) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull); /* splitmix64, as check_values.c */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    if (dtype == DLOP_BOOL) z &= 1;
    memcpy((unsigned char *)data + (size_t)i * size, &z, size);
  }
}

const char *check_element_text(const void *data, int dtype, int64_t i, char *buffer,
                               size_t size) {
  size_t bytes = dlop_dtype_size((dlop_dtype)dtype);
  uint64_t bits = 0;
  memcpy(&bits, (const unsigned char *)data + (size_t)i * bytes, bytes);
  if (!dlop_dtype_is_float((dlop_dtype)dtype)) {
    long long v = dtype == DLOP_INT8 ? (int8_t)bits : dtype == DLOP_INT16 ? (int16_t)bits
                : dtype == DLOP_INT32 ? (int32_t)bits : (long long)bits;
    snprintf(buffer, size, "%lld", v);
    return buffer;
  }
  double v = check_value(data, dtype, i);
  snprintf(buffer, size, dtype == DLOP_FLOAT64 ? "%.17g (bits 0x%0*llx)" : "%.9g (bits 0x%0*llx)",
           v, (int)(2 * bytes), (unsigned long long)bits);
  return buffer;
}
