/* elemwise_cuda_cast.cu — the CUDA kernels of cast, a strided and a contiguous kernel per
 * (from, to) pair, dlop_elemwise_cast_{strided,contiguous}_<from>_<to>, computing what
 * elemwise_scalar.h's ew_cast_<from>_<to> computes, so both devices agree bit for bit. The
 * contiguous kernel's step is one 16-byte vector of the output and the matching elements of
 * the input (elemwise_cuda.cuh). Embedded as dlop_elemwise_elemwise_cuda_cast_fatbin.
 *
 * Sources float16, bfloat16 and float32 take a CUDA-only path in float: the shared one widens
 * every float source to double first (one function for all sources), which costs the GPU two
 * or three conversions through its slower double units per element. It gives the same bits:
 * such a value is exactly a float and exactly a double, so the shared path's round-to-odd float
 * of it is the value itself, and rounding it to float16/bfloat16, widening it, or its NaN's
 * sign are the same taken from the float; integer and bool targets take the shared functions
 * of the (exact) double. float64 sources to float16 and bfloat16 round once in hardware (below);
 * float64 to other dtypes and integer sources take the shared path. */
#include "elemwise_cuda.cuh"


/* ---- the CUDA-only path of float16, bfloat16 and float32 sources ------------------------ */

EW_FN float ewc_float_of_float16(uint16_t x) { return ew_load_float16(x); }
EW_FN float ewc_float_of_bfloat16(uint16_t x) { return ew_load_bfloat16(x); }
EW_FN float ewc_float_of_float32(float x) { return x; }

/* NaN: the destination's canonical quiet NaN with the source's sign, as ew_<to>_of_double */
EW_FN uint16_t ewc_float16_of_float(float f) {
  if (f != f) return (uint16_t)(0x7E00u | ((ew_f32_bits(f) >> 16) & 0x8000u));
  return ew_rne_float16(f);
}
EW_FN uint16_t ewc_bfloat16_of_float(float f) {
  if (f != f) return (uint16_t)(0x7FC0u | ((ew_f32_bits(f) >> 16) & 0x8000u));
  return ew_rne_bfloat16(f);
}
EW_FN float ewc_float32_of_float(float f) {
  if (f != f) return ew_f32_from_bits(0x7FC00000u | (ew_f32_bits(f) & 0x80000000u));
  return f;
}
EW_FN double ewc_float64_of_float(float f) { return ew_float64_of_double((double)f); }
EW_FN uint8_t ewc_bool_of_float(float f) { return ew_bool_of_double((double)f); }
EW_FN int8_t ewc_int8_of_float(float f) { return ew_int8_of_double((double)f); }
EW_FN int16_t ewc_int16_of_float(float f) { return ew_int16_of_double((double)f); }
EW_FN int32_t ewc_int32_of_float(float f) { return ew_int32_of_double((double)f); }
EW_FN int64_t ewc_int64_of_float(float f) { return ew_int64_of_double((double)f); }
EW_FN uint8_t ewc_uint8_of_float(float f) { return ew_uint8_of_double((double)f); }

/* ---- float64 to float16 and bfloat16 in one hardware rounding ---------------------------- */
/* The shared path rounds to odd into float, then to nearest even (ew_float16_of_double): two
 * conversions through the double units, compares and bit fixes per element. The GPU's direct
 * conversion (cvt.rn.f16.f64 everywhere, cvt.rn.bf16.f64 from sm_90) rounds the double once to
 * nearest even, which is the value the shared path computes (that is why it rounds to odd
 * first), and NaN takes the shared path's canonical NaN with its sign. */
EW_FN uint16_t ewc_float16_of_double(double d) {
  if (d != d) return ew_float16_of_double(d);
  return __half_as_ushort(__double2half(d));
}
EW_FN uint16_t ewc_bfloat16_of_double(double d) {
#if __CUDA_ARCH__ >= 900
  if (d != d) return ew_bfloat16_of_double(d);
  return __bfloat16_as_ushort(__double2bfloat16(d));
#else
  return ew_bfloat16_of_double(d);
#endif
}

/* The shared path's pieces under the names the CUDA-only table below picks. */
#define EWC_SHARED_OF_INT(name, T) EW_FN T ewc_##name##_of_int(int64_t v) { return ew_##name##_of_int(v); }
#define EWC_SHARED_OF(name, T) EW_FN T ewc_##name##_of_double(double d) { return ew_##name##_of_double(d); } \
  EWC_SHARED_OF_INT(name, T)
EWC_SHARED_OF(bool, uint8_t)
EWC_SHARED_OF(int8, int8_t)
EWC_SHARED_OF(int16, int16_t)
EWC_SHARED_OF(int32, int32_t)
EWC_SHARED_OF(int64, int64_t)
EWC_SHARED_OF(uint8, uint8_t)
EWC_SHARED_OF_INT(float16, uint16_t)
EWC_SHARED_OF_INT(bfloat16, uint16_t)
EWC_SHARED_OF(float32, float)
EWC_SHARED_OF(float64, double)
EW_FN double ewc_double_of_float64(double x) { return ew_double_of_float64(x); }
#define EWC_INT_SOURCE(name, T) EW_FN int64_t ewc_int_of_##name(T x) { return ew_int_of_##name(x); }
EWC_INT_SOURCE(bool, uint8_t)
EWC_INT_SOURCE(int8, int8_t)
EWC_INT_SOURCE(int16, int16_t)
EWC_INT_SOURCE(int32, int32_t)
EWC_INT_SOURCE(int64, int64_t)
EWC_INT_SOURCE(uint8, uint8_t)

/* The source's class on CUDA: int for bool and integers, float for the floats a float holds,
 * double for float64. */
#define EWC_SOURCE_CLASS_bool int
#define EWC_SOURCE_CLASS_int8 int
#define EWC_SOURCE_CLASS_int16 int
#define EWC_SOURCE_CLASS_int32 int
#define EWC_SOURCE_CLASS_int64 int
#define EWC_SOURCE_CLASS_uint8 int
#define EWC_SOURCE_CLASS_float16 float
#define EWC_SOURCE_CLASS_bfloat16 float
#define EWC_SOURCE_CLASS_float32 float
#define EWC_SOURCE_CLASS_float64 double

/* ---- kernels ------------------------------------------------------------------------------ */

#define CAST_KERNEL(from, TF, to, TT)                                                        \
  struct cast_##from##_##to##_f {                                                            \
    __device__ __forceinline__ TT operator()(TF x) const {                                   \
      return EW_CAT4(ewc_, to, _of_, EWC_SOURCE_CLASS_##from)(                               \
          EW_CAT3(ewc_, EWC_SOURCE_CLASS_##from, _of_##from)(x));                            \
    }                                                                                        \
  };                                                                                         \
  DLOP_CUDA_UNARY_STRIDED(dlop_elemwise_cast, from##_##to, TT, TF, cast_##from##_##to##_f)   \
  extern "C" __global__ void dlop_elemwise_cast_contiguous_##from##_##to(                    \
      const TF *x, TT *y, int64_t n, cast_##from##_##to##_f f) {                             \
    ew_cuda_mixed_unary_contiguous<TT, TF>(x, y, n, f);                                      \
  }

#define CAST_ROW(X, from, TF)                                                                \
  X(from, TF, bool, uint8_t) X(from, TF, int8, int8_t) X(from, TF, int16, int16_t)           \
  X(from, TF, int32, int32_t) X(from, TF, int64, int64_t) X(from, TF, uint8, uint8_t)        \
  X(from, TF, float16, uint16_t) X(from, TF, bfloat16, uint16_t) X(from, TF, float32, float) \
  X(from, TF, float64, double)
#define CAST_ALL(X)                                                                          \
  CAST_ROW(X, bool, uint8_t) CAST_ROW(X, int8, int8_t) CAST_ROW(X, int16, int16_t)           \
  CAST_ROW(X, int32, int32_t) CAST_ROW(X, int64, int64_t) CAST_ROW(X, uint8, uint8_t)        \
  CAST_ROW(X, float16, uint16_t) CAST_ROW(X, bfloat16, uint16_t) CAST_ROW(X, float32, float) \
  CAST_ROW(X, float64, double)

CAST_ALL(CAST_KERNEL)
