/* elemwise_scalar.h — what every elemwise op does to one element, for each dtype: one
 * definition compiled into the CPU kernels (C) and the CUDA kernels (nvcc), so that both devices
 * compute the same thing (bit for bit wherever the math library is not involved). It is also
 * the prelude the ops' scalar bodies declare for fusion (ABI 1.2, elemwise_body.c): embedded as
 * text at build time and put in front of kernels the host generates, which the host's C
 * compiler or NVRTC compiles. So it is self-contained (no dlop header) and includes nothing
 * under NVRTC, which has no libc headers: there the host's prelude has defined the <stdint.h>
 * types and limits, and the math functions are built in. */
#ifndef DLOP_ELEMWISE_SCALAR_H
#define DLOP_ELEMWISE_SCALAR_H

#if defined(__CUDACC_RTC__)
#define EW_FN static __device__ __forceinline__
#elif defined(__CUDACC__)
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define EW_FN static __device__ __forceinline__
#else
#include <math.h>
#include <stdint.h>
#include <string.h>
#define EW_FN static inline
#endif

/* Storage: float16 and bfloat16 are held as their 16 bits (uint16_t) on both devices, bool as
 * one byte 0 or 1. X(name, storage type, wide unsigned type of the integer arithmetic). */
#define EW_INT_DTYPES(X) \
  X(int8, int8_t, uint32_t) X(int16, int16_t, uint32_t) X(int32, int32_t, uint32_t) \
  X(int64, int64_t, uint64_t) X(uint8, uint8_t, uint32_t)
/* X(name, storage type, compute type) */
#define EW_FLOAT_DTYPES(X) \
  X(float16, uint16_t, float) X(bfloat16, uint16_t, float) X(float32, float, float) \
  X(float64, double, double)

/* ---- bits and 16-bit floats ------------------------------------------------------------- */

#if defined(__CUDACC_RTC__)
/* NVRTC: the conversions cuda_fp16.h and cuda_bf16.h would give (they are the same PTX
 * instructions), written out because those headers are not there. */
EW_FN uint32_t ew_f32_bits(float f) { return __float_as_uint(f); }
EW_FN float ew_f32_from_bits(uint32_t u) { return __uint_as_float(u); }
EW_FN uint64_t ew_f64_bits(double d) { return (uint64_t)__double_as_longlong(d); }
EW_FN double ew_f64_from_bits(uint64_t u) { return __longlong_as_double((long long)u); }
EW_FN float ew_load_float16(uint16_t h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
EW_FN float ew_load_bfloat16(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }
EW_FN uint16_t ew_rne_float16(float f) {
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
EW_FN uint16_t ew_rne_bfloat16(float f) {
#if __CUDA_ARCH__ >= 800
  uint16_t b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
  return b;
#else
  uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((bits >> 16) | 0x0040u);
  return (uint16_t)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
#endif
}
#elif defined(__CUDACC__)
EW_FN uint32_t ew_f32_bits(float f) { return __float_as_uint(f); }
EW_FN float ew_f32_from_bits(uint32_t u) { return __uint_as_float(u); }
EW_FN uint64_t ew_f64_bits(double d) { return (uint64_t)__double_as_longlong(d); }
EW_FN double ew_f64_from_bits(uint64_t u) { return __longlong_as_double((long long)u); }
EW_FN float ew_load_float16(uint16_t h) { return __half2float(__ushort_as_half(h)); }
EW_FN float ew_load_bfloat16(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }
/* Round to nearest even; NaN goes to the canonical quiet NaN with its sign (below). */
EW_FN uint16_t ew_rne_float16(float f) { return __half_as_ushort(__float2half_rn(f)); }
EW_FN uint16_t ew_rne_bfloat16(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
#else
EW_FN uint32_t ew_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
EW_FN float ew_f32_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
EW_FN uint64_t ew_f64_bits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
EW_FN double ew_f64_from_bits(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }
/* Bit-exact, branch-light (after Maratyszcza's FP16 library, as dlop/kit/half_float.h, which a
 * prelude cannot include): normal numbers rebias the exponent with one exact multiply,
 * subnormals subtract a bias exactly; to half, scaling up then down overflows what is too
 * large, and adding 2^(e+?) makes the FPU round the mantissa to 10 bits, ties to even. */
EW_FN float ew_load_float16(uint16_t h) {
  const uint32_t w = (uint32_t)h << 16, sign = w & 0x80000000u, two_w = w + w;
  const float normalized = ew_f32_from_bits((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  const float denormalized = ew_f32_from_bits((two_w >> 17) | (126u << 23)) - 0.5f;
  const uint32_t magnitude = two_w < (1u << 27) ? ew_f32_bits(denormalized) : ew_f32_bits(normalized);
  return ew_f32_from_bits(sign | magnitude);
}
EW_FN float ew_load_bfloat16(uint16_t b) { return ew_f32_from_bits((uint32_t)b << 16); }
EW_FN uint16_t ew_rne_float16(float f) {
  const uint32_t w = ew_f32_bits(f), shl1_w = w + w, sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u, bits, nonsign;
  float base = (ew_f32_from_bits(w & 0x7FFFFFFFu) * 0x1.0p+112f) * 0x1.0p-110f;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = ew_f32_from_bits((bias >> 1) + 0x07800000u) + base;
  bits = ew_f32_bits(base);
  nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
  return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}
EW_FN uint16_t ew_rne_bfloat16(float f) {
  uint32_t bits = ew_f32_bits(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((bits >> 16) | 0x0040u);
  bits += 0x7FFFu + ((bits >> 16) & 1u); /* round to nearest even; overflow carries to inf */
  return (uint16_t)(bits >> 16);
}
#endif

/* NaN results of 16-bit floats are the canonical quiet NaN with the sign of the NaN they came
 * from on both devices (CUDA's conversions and ours differ in the payload otherwise). */
EW_FN uint16_t ew_store_float16(float f) {
  if (f != f) return (uint16_t)(0x7E00u | ((ew_f32_bits(f) >> 16) & 0x8000u));
  return ew_rne_float16(f);
}
EW_FN uint16_t ew_store_bfloat16(float f) {
  if (f != f) return (uint16_t)(0x7FC0u | ((ew_f32_bits(f) >> 16) & 0x8000u));
  return ew_rne_bfloat16(f);
}
EW_FN float ew_load_float32(float x) { return x; }
EW_FN float ew_store_float32(float x) { return x; }
EW_FN double ew_load_float64(double x) { return x; }
EW_FN double ew_store_float64(double x) { return x; }

/* ---- arithmetic ------------------------------------------------------------------------- */

/* Integers wrap (two's complement, as NumPy): computed in the wide unsigned type, so no signed
 * overflow (undefined in C) ever happens; the conversion back keeps the low bits. */
#define EW_INT_ARITH(name, T, U)                                                             \
  EW_FN T ew_add_##name(T a, T b) { return (T)((U)a + (U)b); }                               \
  EW_FN T ew_sub_##name(T a, T b) { return (T)((U)a - (U)b); }                               \
  EW_FN T ew_mul_##name(T a, T b) { return (T)((U)a * (U)b); }                               \
  EW_FN T ew_maximum_##name(T a, T b) { return a >= b ? a : b; }                             \
  EW_FN T ew_minimum_##name(T a, T b) { return a <= b ? a : b; }                             \
  EW_FN T ew_neg_##name(T a) { return (T)((U)0 - (U)a); }
EW_INT_DTYPES(EW_INT_ARITH)
/* abs of the most negative value wraps to itself (NumPy: abs(int8(-128)) is -128) */
#define EW_SIGNED_ABS(name, T, U) EW_FN T ew_abs_##name(T a) { return a < 0 ? ew_neg_##name(a) : a; }
EW_SIGNED_ABS(int8, int8_t, uint32_t)
EW_SIGNED_ABS(int16, int16_t, uint32_t)
EW_SIGNED_ABS(int32, int32_t, uint32_t)
EW_SIGNED_ABS(int64, int64_t, uint64_t)
EW_FN uint8_t ew_abs_uint8(uint8_t a) { return a; }

/* Floats compute in float (float16, bfloat16, float32) or double and round once. maximum and
 * minimum return one of their inputs unchanged, NaN first; between equal values (-0.0 and 0.0)
 * they return b, as NumPy 2's float32 and float64 loops do (a > b || isnan(a) ? a : b). neg and
 * abs flip or clear the sign bit (exact, NaN included). */
#define EW_FLOAT_ARITH(name, T, C)                                                           \
  EW_FN T ew_add_##name(T a, T b) { return ew_store_##name(ew_load_##name(a) + ew_load_##name(b)); } \
  EW_FN T ew_sub_##name(T a, T b) { return ew_store_##name(ew_load_##name(a) - ew_load_##name(b)); } \
  EW_FN T ew_mul_##name(T a, T b) { return ew_store_##name(ew_load_##name(a) * ew_load_##name(b)); } \
  EW_FN T ew_div_##name(T a, T b) { return ew_store_##name(ew_load_##name(a) / ew_load_##name(b)); } \
  EW_FN T ew_maximum_##name(T a, T b) {                                                      \
    C x = ew_load_##name(a), y = ew_load_##name(b);                                          \
    return (x > y || x != x) ? a : b;                                                        \
  }                                                                                          \
  EW_FN T ew_minimum_##name(T a, T b) {                                                      \
    C x = ew_load_##name(a), y = ew_load_##name(b);                                          \
    return (x < y || x != x) ? a : b;                                                        \
  }
EW_FLOAT_DTYPES(EW_FLOAT_ARITH)

EW_FN uint16_t ew_neg_float16(uint16_t a) { return (uint16_t)(a ^ 0x8000u); }
EW_FN uint16_t ew_abs_float16(uint16_t a) { return (uint16_t)(a & 0x7FFFu); }
EW_FN uint16_t ew_neg_bfloat16(uint16_t a) { return (uint16_t)(a ^ 0x8000u); }
EW_FN uint16_t ew_abs_bfloat16(uint16_t a) { return (uint16_t)(a & 0x7FFFu); }
EW_FN float ew_neg_float32(float a) { return ew_f32_from_bits(ew_f32_bits(a) ^ 0x80000000u); }
EW_FN float ew_abs_float32(float a) { return ew_f32_from_bits(ew_f32_bits(a) & 0x7FFFFFFFu); }
EW_FN double ew_neg_float64(double a) { return ew_f64_from_bits(ew_f64_bits(a) ^ (1ull << 63)); }
EW_FN double ew_abs_float64(double a) { return ew_f64_from_bits(ew_f64_bits(a) & ~(1ull << 63)); }

/* The math library's functions (on the CPU glibc's vector math library, libmvec, through the
 * vectorized loops of elemwise_cpu.h; CUDA's on the GPU: each within a few ulp, not
 * bit-identical; docs/ops.md gives the bounds). sigmoid(x) is 1 / (1 + e^-x), which overflows
 * e^-x to inf below -88 (float) or -709 (double) and would return 0 where the result is a
 * subnormal (sigmoid(-90) = 8.2e-40): there it is e^x, equal to it within rounding. One exp of
 * a selected argument, then a select: a vectorized loop computes both sides of a branch, and
 * this way one of them is an exp. NaN takes the e^x side and stays NaN. */
EW_FN float ew_powf(float a, float b) { return powf(a, b); }
EW_FN double ew_powd(double a, double b) { return pow(a, b); }
EW_FN float ew_logf(float x) { return logf(x); }
EW_FN double ew_logd(double x) { return log(x); }
EW_FN float ew_sqrtf(float x) { return sqrtf(x); }
EW_FN double ew_sqrtd(double x) { return sqrt(x); }
EW_FN float ew_tanhf(float x) { return tanhf(x); }
EW_FN double ew_tanhd(double x) { return tanh(x); }
EW_FN float ew_sigmoidf(float x) {
  /* -x as a sign flip chosen by an integer select: from a float select gcc makes two exps,
   * one of each side (the vectorized loop then costs twice as much) */
  uint32_t flip = x >= -87.0f ? 0x80000000u : 0u;
  float e = expf(ew_f32_from_bits(ew_f32_bits(x) ^ flip));
  return x >= -87.0f ? 1.0f / (1.0f + e) : e;
}
EW_FN double ew_sigmoidd(double x) {
  uint64_t flip = x >= -708.0 ? 1ull << 63 : 0u;
  double e = exp(ew_f64_from_bits(ew_f64_bits(x) ^ flip));
  return x >= -708.0 ? 1.0 / (1.0 + e) : e;
}

/* float16 (16f) and bfloat16 (b16f) sqrt and sigmoid in float on CUDA, branch-free (sqrtf's
 * and a float division's slow paths are a branch per element, which held the 16-bit ops at
 * 0.78-0.92x of PyTorch's time on an H200); on the CPU the functions above.
 * ew_sqrt16f, ew_sqrtb16f: sqrtf's own fast path (a reciprocal square root refined by two fused
 * multiply-adds: correctly rounded for x in [2^-101, FLT_MAX]) for every 16-bit value: zeros
 * and +inf are their own roots, negatives (-inf too) and NaN give NaN (the reciprocal square
 * root's), and bfloat16's values below 2^-100 are scaled by 2^64 first and their roots by
 * 2^-32, both exact (float16 has none: its least is 2^-24). Correctly rounded, as sqrtf: the
 * same values.
 * ew_sigmoid16f, ew_sigmoidb16f: ew_sigmoidf with an approximate reciprocal (the one __fdividef multiplies by,
 * 2 ulp for divisors in [1, 2^126); 1 + e^87 is below 2^126): the float within 5 ulp, rounded
 * once to the 16-bit type.
 * Both use the hardware's approximate reciprocal and reciprocal square root directly (the .ftz
 * forms: their operands here are never subnormal, where they would differ from rsqrtf's and
 * __fdividef's, which scale such operands first). */
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
EW_FN float ew_rcp_approx(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
EW_FN float ew_rsqrt_approx(float x) {
  float r;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
EW_FN float ew_sqrt_fast_path(float x, int scale_tiny) {
  const int tiny = scale_tiny && x < ew_f32_from_bits(0x0D800000u);   /* 2^-100 */
  const float xs = tiny ? x * ew_f32_from_bits(0x5F800000u) : x;      /* 2^64 */
  const float r = ew_rsqrt_approx(xs);
  float root = xs * r;
  root = fmaf(fmaf(-root, root, xs), 0.5f * r, root);
  root = tiny ? root * ew_f32_from_bits(0x2F800000u) : root;          /* 2^-32 */
  /* 0, -0 and +inf are their own roots (where the reciprocal root's product gives NaN) */
  return x == 0.0f || x == ew_f32_from_bits(0x7F800000u) ? x : root;
}
EW_FN float ew_sqrt16f(float x) { return ew_sqrt_fast_path(x, 0); }
EW_FN float ew_sqrtb16f(float x) { return ew_sqrt_fast_path(x, 1); }
EW_FN float ew_sigmoid16f(float x) {
  const int formula = x >= -87.0f;
  const float e = expf(formula ? -x : x);
  const float r = ew_rcp_approx(1.0f + e);
  return formula ? r : e;
}
#else
EW_FN float ew_sqrt16f(float x) { return ew_sqrtf(x); }
EW_FN float ew_sqrtb16f(float x) { return ew_sqrtf(x); }
EW_FN float ew_sigmoid16f(float x) { return ew_sigmoidf(x); }
#endif
EW_FN float ew_sigmoidb16f(float x) { return ew_sigmoid16f(x); }

/* F: the math functions' suffix (f, d); S: sqrt's and sigmoid's (16f and b16f for the 16-bit
 * floats) */
#define EW_FLOAT_MATH(name, T, C, F, S)                                                      \
  EW_FN T ew_pow_##name(T a, T b) { return ew_store_##name(ew_pow##F(ew_load_##name(a), ew_load_##name(b))); } \
  EW_FN T ew_log_##name(T x) { return ew_store_##name(ew_log##F(ew_load_##name(x))); }       \
  EW_FN T ew_sqrt_##name(T x) { return ew_store_##name(ew_sqrt##S(ew_load_##name(x))); }     \
  EW_FN T ew_tanh_##name(T x) { return ew_store_##name(ew_tanh##F(ew_load_##name(x))); }     \
  EW_FN T ew_sigmoid_##name(T x) { return ew_store_##name(ew_sigmoid##S(ew_load_##name(x))); }
EW_FLOAT_MATH(float16, uint16_t, float, f, 16f)
EW_FLOAT_MATH(bfloat16, uint16_t, float, f, b16f)
EW_FLOAT_MATH(float32, float, float, f, f)
EW_FLOAT_MATH(float64, double, double, d, d)

/* ---- comparisons (bool results, 0 or 1) -------------------------------------------------- */

/* The value compared: the number itself for integers and floats (16-bit ones widened), 0 or 1
 * for bool (any nonzero byte is true). NaN compares unequal to everything. */
EW_FN int ew_key_bool(uint8_t x) { return x != 0; }
#define EW_INT_KEY(name, T, U) EW_FN T ew_key_##name(T x) { return x; }
EW_INT_DTYPES(EW_INT_KEY)
#define EW_FLOAT_KEY(name, T, C) EW_FN C ew_key_##name(T x) { return ew_load_##name(x); }
EW_FLOAT_DTYPES(EW_FLOAT_KEY)

/* X(name, storage type) over every dtype */
#define EW_ALL_DTYPES(X) \
  X(bool, uint8_t) X(int8, int8_t) X(int16, int16_t) X(int32, int32_t) X(int64, int64_t) \
  X(uint8, uint8_t) X(float16, uint16_t) X(bfloat16, uint16_t) X(float32, float) X(float64, double)

#define EW_COMPARE(name, T)                                                                  \
  EW_FN uint8_t ew_equal_##name(T a, T b) { return ew_key_##name(a) == ew_key_##name(b); }   \
  EW_FN uint8_t ew_not_equal_##name(T a, T b) { return ew_key_##name(a) != ew_key_##name(b); } \
  EW_FN uint8_t ew_less_##name(T a, T b) { return ew_key_##name(a) < ew_key_##name(b); }     \
  EW_FN uint8_t ew_less_equal_##name(T a, T b) { return ew_key_##name(a) <= ew_key_##name(b); } \
  EW_FN uint8_t ew_greater_##name(T a, T b) { return ew_key_##name(a) > ew_key_##name(b); }  \
  EW_FN uint8_t ew_greater_equal_##name(T a, T b) { return ew_key_##name(a) >= ew_key_##name(b); }
EW_ALL_DTYPES(EW_COMPARE)

/* ---- cast ------------------------------------------------------------------------------- */

/* A source element as the cast sees it: integers and bool exactly as int64, floats exactly as
 * double (every float16, bfloat16 and float32 value is a double). */
EW_FN int64_t ew_int_of_bool(uint8_t x) { return x != 0; }
#define EW_INT_OF(name, T, U) EW_FN int64_t ew_int_of_##name(T x) { return (int64_t)x; }
EW_INT_DTYPES(EW_INT_OF)
#define EW_DOUBLE_OF(name, T, C) EW_FN double ew_double_of_##name(T x) { return (double)ew_load_##name(x); }
EW_FLOAT_DTYPES(EW_DOUBLE_OF)

/* Float to integer: toward zero; NaN gives 0; beyond the range, the nearest end. below and
 * above are the first values outside the range (exact doubles: -129 and 128 for int8; for
 * int64 -2^63 itself counts as below, harmless since it converts to INT64_MIN anyway). Only
 * int64 takes this path (no x86 vector converts to int64 without AVX-512DQ, so it is scalar
 * code: well-predicted branches beat selects here; the CPU kernels check a block at a time
 * instead, elemwise_cpu_cast.c). */
EW_FN int64_t ew_saturate(double d, double below, double above, int64_t min, int64_t max) {
  if (d != d) return 0;
  if (d >= above) return max;
  if (d <= below) return min;
  return (int64_t)d;
}
/* a ? b : c on the bits of doubles (floats): the same value as the select, but gcc keeps it a
 * blend in the float domain. Written as ?: it moves a select of a constant past the conversion
 * that follows ((int)(c ? k : d) as c ? (int)k : (int)d), which costs vector code a repacking
 * of every 64-bit mask into 32-bit lanes: about 45 AVX2 instructions per 8 doubles instead of
 * 17. */
EW_FN double ew_select_f64(int a, double b, double c) {
  const uint64_t mask = (uint64_t)0 - (uint64_t)(a != 0);
  return ew_f64_from_bits((ew_f64_bits(b) & mask) | (ew_f64_bits(c) & ~mask));
}
EW_FN float ew_select_f32(int a, float b, float c) {
  const uint32_t mask = (uint32_t)0 - (uint32_t)(a != 0);
  return ew_f32_from_bits((ew_f32_bits(b) & mask) | (ew_f32_bits(c) & ~mask));
}
/* The same for targets of at most 32 bits, clamped to [min, max] in double and converted to
 * int32: the values between below and min (above and max) truncate to min (max) anyway, so
 * this is ew_saturate's result: a compare and a mask for NaN, two compares and blends for the
 * clamp, then one cvttpd2dq (gcc vectorizes a conversion to int32, not one to int64). */
EW_FN int32_t ew_clamp_to_int32(double d, double min, double max) {
  d = ew_select_f64(d == d, d, 0.0);
  d = ew_select_f64(d > min, d, min);
  d = ew_select_f64(d < max, d, max);
  return (int32_t)d;
}
EW_FN int8_t ew_int8_of_double(double d) { return (int8_t)ew_clamp_to_int32(d, -128.0, 127.0); }
EW_FN int16_t ew_int16_of_double(double d) { return (int16_t)ew_clamp_to_int32(d, -32768.0, 32767.0); }
EW_FN int32_t ew_int32_of_double(double d) { return ew_clamp_to_int32(d, -2147483648.0, 2147483647.0); }
EW_FN int64_t ew_int64_of_double(double d) { return ew_saturate(d, -0x1p63, 0x1p63, INT64_MIN, INT64_MAX); }
EW_FN uint8_t ew_uint8_of_double(double d) { return (uint8_t)ew_clamp_to_int32(d, 0.0, 255.0); }

/* Integer to integer keeps the low bits (NumPy's wrapping casts): through the unsigned type. */
EW_FN int8_t ew_int8_of_int(int64_t v) { return (int8_t)(uint8_t)(uint64_t)v; }
EW_FN int16_t ew_int16_of_int(int64_t v) { return (int16_t)(uint16_t)(uint64_t)v; }
EW_FN int32_t ew_int32_of_int(int64_t v) { return (int32_t)(uint32_t)(uint64_t)v; }
EW_FN int64_t ew_int64_of_int(int64_t v) { return v; }
EW_FN uint8_t ew_uint8_of_int(int64_t v) { return (uint8_t)(uint64_t)v; }

/* Round to odd into float: the float with the truncated value whose last bit is set when bits
 * were lost. Rounding that once more to float16 or bfloat16 (nearest even) gives the correctly
 * rounded result, because float keeps more than 2 extra bits (rounding twice to nearest would
 * not: 2^24 + 1 + tiny halfway cases). */
EW_FN float ew_odd_float_from_double(double d) {
  float f = (float)d;
  if (f == f && (double)f != d) {
    uint32_t bits = ew_f32_bits(f);
    if (fabs((double)f) > fabs(d)) bits -= 1; /* one step toward zero: the truncation */
    f = ew_f32_from_bits(bits | 1u);
  }
  return f;
}
EW_FN float ew_odd_float_from_int(int64_t v) {
  uint64_t m = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v; /* <= 2^63 */
  float f = (float)m;                                            /* to nearest, <= 2^63 */
  uint64_t back = (uint64_t)f;
  if (back != m) {
    uint32_t bits = ew_f32_bits(f);
    if (back > m) bits -= 1;
    f = ew_f32_from_bits(bits | 1u);
  }
  return v < 0 ? -f : f;
}

/* To float destinations: NaN becomes the destination's canonical quiet NaN with the source's
 * sign (payloads are not kept: the devices' conversions disagree about them). */
EW_FN float ew_float32_of_double(double d) {
  if (d != d) return ew_f32_from_bits(0x7FC00000u | (uint32_t)((ew_f64_bits(d) >> 32) & 0x80000000u));
  return (float)d;
}
EW_FN double ew_float64_of_double(double d) {
  if (d != d) return ew_f64_from_bits(0x7FF8000000000000ull | (ew_f64_bits(d) & (1ull << 63)));
  return d;
}
EW_FN uint16_t ew_float16_of_double(double d) {
  if (d != d) return (uint16_t)(0x7E00u | (uint16_t)((ew_f64_bits(d) >> 48) & 0x8000u));
  return ew_rne_float16(ew_odd_float_from_double(d));
}
EW_FN uint16_t ew_bfloat16_of_double(double d) {
  if (d != d) return (uint16_t)(0x7FC0u | (uint16_t)((ew_f64_bits(d) >> 48) & 0x8000u));
  return ew_rne_bfloat16(ew_odd_float_from_double(d));
}
EW_FN float ew_float32_of_int(int64_t v) { return (float)v; }
EW_FN double ew_float64_of_int(int64_t v) { return (double)v; }
EW_FN uint16_t ew_float16_of_int(int64_t v) { return ew_rne_float16(ew_odd_float_from_int(v)); }
EW_FN uint16_t ew_bfloat16_of_int(int64_t v) { return ew_rne_bfloat16(ew_odd_float_from_int(v)); }
EW_FN uint8_t ew_bool_of_int(int64_t v) { return v != 0; }
EW_FN uint8_t ew_bool_of_double(double d) { return d != 0.0; } /* NaN is true, as in NumPy */

/* Sources of at most float's precision (float16, bfloat16, float32) take the same paths from
 * a float, which is exact (a float widens to double exactly), so vector code keeps float lanes:
 * the integer targets of at most 32 bits clamp in float (every bound below is a float: for
 * int32, -2147483904 is the float next below -2^31, and f <= it is f < -2^31), the others
 * widen to double and take the double path, so every result is the double path's. */
EW_FN float ew_float_of_float16(uint16_t x) { return ew_load_float16(x); }
EW_FN float ew_float_of_bfloat16(uint16_t x) { return ew_load_bfloat16(x); }
EW_FN float ew_float_of_float32(float x) { return x; }
EW_FN int32_t ew_clamp_float_to_int32(float f, float below, float above, int32_t min, int32_t max) {
  int32_t i = (int32_t)((f != f || f >= above || f <= below) ? 0.0f : f);
  i = f >= above ? max : i;
  return f <= below ? min : i;
}
/* Targets of at most 16 bits, whose ends are floats: clamped in float as the double path
 * (ew_clamp_to_int32), then one cvttps2dq. */
EW_FN float ew_clamp_float(float f, float min, float max) {
  f = ew_select_f32(f == f, f, 0.0f);
  f = ew_select_f32(f > min, f, min);
  return ew_select_f32(f < max, f, max);
}
EW_FN int8_t ew_int8_of_float(float f) { return (int8_t)(int32_t)ew_clamp_float(f, -128.0f, 127.0f); }
EW_FN int16_t ew_int16_of_float(float f) { return (int16_t)(int32_t)ew_clamp_float(f, -32768.0f, 32767.0f); }
EW_FN int32_t ew_int32_of_float(float f) {
  return ew_clamp_float_to_int32(f, -2147483904.0f, 2147483648.0f, INT32_MIN, INT32_MAX);
}
EW_FN uint8_t ew_uint8_of_float(float f) { return (uint8_t)(int32_t)ew_clamp_float(f, 0.0f, 255.0f); }
EW_FN int64_t ew_int64_of_float(float f) { return ew_int64_of_double((double)f); }
EW_FN uint8_t ew_bool_of_float(float f) { return f != 0.0f; } /* NaN is true, as in NumPy */
EW_FN float ew_float32_of_float(float f) { return ew_float32_of_double((double)f); }
EW_FN double ew_float64_of_float(float f) { return ew_float64_of_double((double)f); }
EW_FN uint16_t ew_float16_of_float(float f) { return ew_float16_of_double((double)f); }
EW_FN uint16_t ew_bfloat16_of_float(float f) { return ew_bfloat16_of_double((double)f); }

/* The source's class picks the path: int for bool and integers, float for the floats a float
 * holds, double for float64. */
#define EW_SOURCE_CLASS_bool int
#define EW_SOURCE_CLASS_int8 int
#define EW_SOURCE_CLASS_int16 int
#define EW_SOURCE_CLASS_int32 int
#define EW_SOURCE_CLASS_int64 int
#define EW_SOURCE_CLASS_uint8 int
#define EW_SOURCE_CLASS_float16 float
#define EW_SOURCE_CLASS_float32 float
#define EW_SOURCE_CLASS_bfloat16 float
#define EW_SOURCE_CLASS_float64 double
#define EW_CAT3_(a, b, c) a##b##c
#define EW_CAT3(a, b, c) EW_CAT3_(a, b, c)
#define EW_CAT4_(a, b, c, d) a##b##c##d
#define EW_CAT4(a, b, c, d) EW_CAT4_(a, b, c, d)

/* ew_cast_<from>_<to>(x): the cast of one element. A cast to the same dtype copies bits. */
#define EW_CAST_ONE(from, TF, to, TT)                                                        \
  EW_FN TT ew_cast_##from##_##to(TF x) {                                                    \
    return EW_CAT4(ew_, to, _of_, EW_SOURCE_CLASS_##from)(                                   \
        EW_CAT3(ew_, EW_SOURCE_CLASS_##from, _of_##from)(x));                                \
  }

#endif
