/* exp_cuda.cu — the CUDA kernels of exp (y = e^x), a contiguous, a rows and a strided kernel
 * per float dtype, named dlop_exp_{contiguous,rows,strided}_<dtype>. nvcc compiles this into
 * the fatbin embedded in the plugin as dlop_exp_exp_cuda_fatbin (see cmake/DlopCuda.cmake). */
#include <dlop/kit/cuda_kernel_util.cuh>

namespace {

/* 2^(j/32) for j = 0..31 as (hi, lo) pairs: hi correctly rounded, lo = 2^(j/32) - hi rounded
 * (both computed to 60 digits). */
#define EXP_CUDA_EXP2_TABLE \
  {0x1.0000000000000p+0, 0.0, 0x1.059b0d3158574p+0, 0x1.d73e2a475b465p-55, \
   0x1.0b5586cf9890fp+0, 0x1.8a62e4adc610bp-54, 0x1.11301d0125b51p+0, -0x1.6c51039449b3ap-54, \
   0x1.172b83c7d517bp+0, -0x1.19041b9d78a76p-55, 0x1.1d4873168b9aap+0, 0x1.e016e00a2643cp-54, \
   0x1.2387a6e756238p+0, 0x1.9b07eb6c70573p-54, 0x1.29e9df51fdee1p+0, 0x1.612e8afad1255p-55, \
   0x1.306fe0a31b715p+0, 0x1.6f46ad23182e4p-55, 0x1.371a7373aa9cbp+0, -0x1.63aeabf42eae2p-54, \
   0x1.3dea64c123422p+0, 0x1.ada0911f09ebcp-55, 0x1.44e086061892dp+0, 0x1.89b7a04ef80d0p-59, \
   0x1.4bfdad5362a27p+0, 0x1.d4397afec42e2p-56, 0x1.5342b569d4f82p+0, -0x1.07abe1db13cadp-55, \
   0x1.5ab07dd485429p+0, 0x1.6324c054647adp-54, 0x1.6247eb03a5585p+0, -0x1.383c17e40b497p-54, \
   0x1.6a09e667f3bcdp+0, -0x1.bdd3413b26456p-54, 0x1.71f75e8ec5f74p+0, -0x1.16e4786887a99p-55, \
   0x1.7a11473eb0187p+0, -0x1.41577ee04992fp-55, 0x1.82589994cce13p+0, -0x1.d4c1dd41532d8p-54, \
   0x1.8ace5422aa0dbp+0, 0x1.6e9f156864b27p-54, 0x1.93737b0cdc5e5p+0, -0x1.75fc781b57ebcp-57, \
   0x1.9c49182a3f090p+0, 0x1.c7c46b071f2bep-56, 0x1.a5503b23e255dp+0, -0x1.d2f6edb8d41e1p-54, \
   0x1.ae89f995ad3adp+0, 0x1.7a1cd345dcc81p-54, 0x1.b7f76f2fb5e47p+0, -0x1.5584f7e54ac3bp-56, \
   0x1.c199bdd85529cp+0, 0x1.11065895048ddp-55, 0x1.cb720dcef9069p+0, 0x1.503cbd1e949dbp-56, \
   0x1.d5818dcfba487p+0, 0x1.2ed02d75b3707p-55, 0x1.dfc97337b9b5fp+0, -0x1.1a5cd4f184b5cp-54, \
   0x1.ea4afa2a490dap+0, -0x1.e9c23179c2893p-54, 0x1.f50765b6e4540p+0, 0x1.9d3e12dd8a18bp-54}

__device__ const double exp_cuda_exp2_table[64] = EXP_CUDA_EXP2_TABLE;

/* e^x in float64 for |x| < 707, where the result is a normal number; the caller sends NaN,
 * infinities and larger |x| to CUDA's exp. CUDA's exp evaluates a degree-11 polynomial on
 * |r| <= ln2/2; here a 32-entry table of 2^(j/32) (with a low part, so the table adds no
 * rounding of its own) shrinks the reduced argument to |r| <= ln2/64, where a degree-6 Taylor
 * polynomial is exact to 4e-18 (r^7/7!): 12 double operations instead of about 17. float64
 * exp needs that to keep pace with memory on an H200: with CUDA's exp it reached 93-95% of
 * a device copy, the other kernels 97-99%. Measured on the host against long double expl
 * (5e7 random and boundary points): within 1 ulp. Written for host and device alike so that
 * it can be checked on the CPU. */
__host__ __device__ __forceinline__ double exp_cuda_reduced(double x, const double *table) {
  const double to_k = 0x1.71547652b82fep+5;               /* 32 / ln2 */
  const double ln2_32_hi = 0x1.62e42fee00000p-6;          /* ln2 / 32, 32 bits: k * hi exact */
  const double ln2_32_lo = 0x1.a39ef35793c76p-38;         /* ln2 / 32 - hi */
  const double shifter = 0x1.8p52;                        /* rounds to an integer when added */
  const double kd_shifted = fma(x, to_k, shifter);        /* k = round(x * 32 / ln2) */
  int64_t kbits;
  memcpy(&kbits, &kd_shifted, sizeof kbits);
  const int32_t k = (int32_t)(uint32_t)kbits;             /* the low word holds k */
  const double kd = kd_shifted - shifter;
  double r = fma(kd, -ln2_32_hi, x);                      /* exact */
  r = fma(kd, -ln2_32_lo, r);                             /* x - k ln2 / 32, |r| <= 0.0109 */
  /* e^r - 1 = r + r^2 (1/2 + r/6 + r^2 (1/24 + r/120 + r^2/720)) */
  const double r2 = r * r;
  const double a = fma(r, 0x1.5555555555555p-3, 0.5);
  double b = fma(r, 0x1.1111111111111p-7, 0x1.5555555555555p-5);
  b = fma(r2, 0x1.6c16c16c16c17p-10, b);
  const double p = fma(r2, fma(r2, b, a), r);
  const double t = table[2 * (k & 31)];                   /* 2^((k mod 32) / 32) = t + tl */
  const double tl = table[2 * (k & 31) + 1];
  double y = t + fma(t, p, tl);                           /* in [0.98, 2.03) */
  /* times 2^(k div 32): add to the exponent field; |x| < 707 keeps the result normal */
  int64_t ybits;
  memcpy(&ybits, &y, sizeof ybits);
  ybits += (int64_t)(k >> 5) << 52;
  memcpy(&y, &ybits, sizeof y);
  return y;
}

__device__ __forceinline__ double exp_cuda_exp(double x) {
  if (fabs(x) < 707.0) return exp_cuda_reduced(x, exp_cuda_exp2_table);
  return exp(x); /* NaN, infinities, overflow, underflow and subnormal results */
}

/* expf is CUDA's full-precision version (nvcc runs without --use_fast_math): within 2 ulp
 * and correct at 0, +-inf and NaN, unlike __expf. 16-bit floats go through float and round
 * once. float64 uses exp_cuda_exp above. */
struct exp_op {
  __device__ __forceinline__ __half operator()(__half x) const {
    return dlop_cuda_from_float<__half>(expf(dlop_cuda_to_float(x)));
  }
  __device__ __forceinline__ __nv_bfloat16 operator()(__nv_bfloat16 x) const {
    return dlop_cuda_from_float<__nv_bfloat16>(expf(dlop_cuda_to_float(x)));
  }
  __device__ __forceinline__ float operator()(float x) const { return expf(x); }
  __device__ __forceinline__ double operator()(double x) const { return exp_cuda_exp(x); }
};

}  // namespace

/* Vectors per thread and step of the contiguous kernels (the spec's cuda_contiguous_vectors in
 * plugin.c is the same number): two, so that exp's arithmetic on one overlaps the other's
 * load. Measured on an H200 at 2^28 float32: 97.6% of a copy with two, 92.6% with one. */
#define EXP_CUDA_UNROLL 2

#define EXP_CUDA_KERNELS(name, T) DLOP_CUDA_UNARY_KERNELS(dlop_exp, name, T, exp_op, EXP_CUDA_UNROLL)

DLOP_CUDA_FLOAT_TYPES(EXP_CUDA_KERNELS)
