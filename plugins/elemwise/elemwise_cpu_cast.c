/* elemwise_cpu_cast.c — the CPU kernels of cast, one per (from, to) pair of dtypes, around
 * elemwise_scalar.h's ew_cast_<from>_<to> (the same code the CUDA kernels run, so both devices
 * agree bit for bit). A cast to the same dtype copies bits (elemwise_kernel_dtypes picks the
 * same-size integer kernel). Casts from float32 and float64 get three copies (AVX-512, AVX2,
 * baseline; EW_CPU_HOT_<dtype>), the others the baseline. */
#include <math.h>

#include "elemwise_cpu.h"

#define CAST_KERNEL(from, TF, DTF, to, TT, DTT)                                              \
  EW_CAST_ONE(from, TF, to, TT)                                                              \
  EW_CPU_UNARY(cast_##from##_##to, TT, TF, EW_CPU_HOT_##from)
#define CAST_ENTRY(from, TF, DTF, to, TT, DTT) [DTF][DTT] = cast_##from##_##to,

/* float32 and float64 to int64. Below AVX-512DQ no x86 vector converts to int64, and the
 * element function, with its branches for NaN and the ends, is scalar code (about half of
 * NumPy's rate on an AVX2 machine, where NumPy's plain loop keeps a scalar conversion busy).
 * So a block whose elements all lie below 2^51 in magnitude (one vectorized check; NaN and
 * the infinities fail it) is converted in one vectorized pass of double arithmetic, exact
 * there: x + 1.5 * 2^52 holds x rounded to an integer (ties to even) in the low bits of its
 * mantissa; one step toward zero undoes a rounding away from zero; the bits of that integer
 * plus 1.5 * 2^52, less the bits of 1.5 * 2^52, are the integer, negative ones too. Any other
 * block takes the element function. Checking first (the block is in L1 for the second pass)
 * keeps a cast in place (z over x) right; the kernels' -ffp-contract=off keeps (x + M) - M
 * two roundings. */
#define CAST_INT64_BLOCK 256
#define CAST_INT64_MAGIC 0x1.8p52
#define CAST_ABS_float32 fabsf
#define CAST_ABS_float64 fabs
static inline int64_t cast_int64_below_2p51(double x) {
  const double nearest = (x + CAST_INT64_MAGIC) - CAST_INT64_MAGIC;
  const double toward_zero = nearest - copysign(fabs(nearest) > fabs(x) ? 1.0 : 0.0, x);
  return (int64_t)(ew_f64_bits(toward_zero + CAST_INT64_MAGIC) - ew_f64_bits(CAST_INT64_MAGIC));
}
#define CAST_KERNEL_TO_INT64(from, TF, DTF, to, TT, DTT)                                     \
  EW_CAST_ONE(from, TF, to, TT)                                                              \
  EW_CPU_HOT_##from static void cast_##from##_##to##_contiguous(TT *z, const TF *x, int64_t n) { \
    for (int64_t b = 0; b < n; b += CAST_INT64_BLOCK) {                                      \
      const int64_t end = n - b < CAST_INT64_BLOCK ? n : b + CAST_INT64_BLOCK;               \
      TF outside = 0; /* a select in the source's width, not a flag: gcc vectorizes that */  \
      for (int64_t i = b; i < end; i++) outside = CAST_ABS_##from(x[i]) < (TF)0x1p51 ? outside : 1; \
      if (outside == 0) {                                                                    \
        _Pragma("GCC ivdep") for (int64_t i = b; i < end; i++) z[i] = cast_int64_below_2p51(x[i]); \
      } else {                                                                               \
        for (int64_t i = b; i < end; i++) z[i] = ew_cast_##from##_##to(x[i]);                \
      }                                                                                      \
    }                                                                                        \
  }                                                                                          \
  static void cast_##from##_##to(char *const *p, const int64_t *s, int64_t n, const void *params) { \
    TT *z = (TT *)p[0];                                                                      \
    const TF *x = (const TF *)p[1];                                                          \
    (void)params;                                                                            \
    if (s[0] == 1 && s[1] == 1) {                                                            \
      cast_##from##_##to##_contiguous(z, x, n);                                              \
      return;                                                                                \
    }                                                                                        \
    for (int64_t i = 0; i < n; i++) z[i * s[0]] = ew_cast_##from##_##to(x[i * s[1]]);        \
  }

/* Expand the pairs by hand-listed sources: the preprocessor cannot nest an X-macro in itself.
 * X64 makes the pair's int64 column (CAST_KERNEL_TO_INT64 for float32 and float64). */
#define CAST_ROW(X, X64, from, TF, DTF)                                                      \
  X(from, TF, DTF, bool, uint8_t, DLOP_BOOL) X(from, TF, DTF, int8, int8_t, DLOP_INT8)       \
  X(from, TF, DTF, int16, int16_t, DLOP_INT16) X(from, TF, DTF, int32, int32_t, DLOP_INT32)  \
  X64(from, TF, DTF, int64, int64_t, DLOP_INT64) X(from, TF, DTF, uint8, uint8_t, DLOP_UINT8) \
  X(from, TF, DTF, float16, uint16_t, DLOP_FLOAT16)                                          \
  X(from, TF, DTF, bfloat16, uint16_t, DLOP_BFLOAT16)                                        \
  X(from, TF, DTF, float32, float, DLOP_FLOAT32) X(from, TF, DTF, float64, double, DLOP_FLOAT64)
#define CAST_ALL(X, X64)                                                                     \
  CAST_ROW(X, X, bool, uint8_t, DLOP_BOOL) CAST_ROW(X, X, int8, int8_t, DLOP_INT8)           \
  CAST_ROW(X, X, int16, int16_t, DLOP_INT16) CAST_ROW(X, X, int32, int32_t, DLOP_INT32)      \
  CAST_ROW(X, X, int64, int64_t, DLOP_INT64) CAST_ROW(X, X, uint8, uint8_t, DLOP_UINT8)      \
  CAST_ROW(X, X, float16, uint16_t, DLOP_FLOAT16)                                            \
  CAST_ROW(X, X, bfloat16, uint16_t, DLOP_BFLOAT16)                                          \
  CAST_ROW(X, X64, float32, float, DLOP_FLOAT32) CAST_ROW(X, X64, float64, double, DLOP_FLOAT64)

CAST_ALL(CAST_KERNEL, CAST_KERNEL_TO_INT64)

const dlop_elementwise_cpu_kernel elemwise_cpu_cast_kernels[DLOP_DTYPE_COUNT][DLOP_DTYPE_COUNT] = {
    CAST_ALL(CAST_ENTRY, CAST_ENTRY)};
