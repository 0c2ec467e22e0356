/* elemwise_cpu_vector_math.h — the math functions the CPU kernels call, declared as SIMD
 * functions so that gcc's vectorizer calls glibc's vector math library (libmvec: _ZGVdN8v_tanhf
 * and the like, picked per target_clones copy: SSE, AVX2 or AVX-512) instead of libm once per
 * element. glibc declares these itself only under -ffast-math, which would also drop NaN, inf and
 * signed-zero semantics; declaring the functions alone keeps IEEE semantics everywhere else.
 * libmvec handles NaN, infinities, zeros and subnormals as libm does, within 4 ulp (docs/ops.md
 * gives the bounds measured by tests/python/test_elemwise_accuracy.py). Needs -fno-math-errno
 * (libmvec sets no errno) and glibc 2.35 or newer on x86-64 (tanh came in 2.35); elsewhere the
 * loops call libm. Include after <math.h>. */
#ifndef DLOP_ELEMWISE_CPU_VECTOR_MATH_H
#define DLOP_ELEMWISE_CPU_VECTOR_MATH_H

#include <math.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && \
    defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#define EW_CPU_HAVE_LIBMVEC 1
#define EW_CPU_VECTOR_FN __attribute__((simd("notinbranch")))
EW_CPU_VECTOR_FN float expf(float);
EW_CPU_VECTOR_FN double exp(double);
EW_CPU_VECTOR_FN float logf(float);
EW_CPU_VECTOR_FN double log(double);
EW_CPU_VECTOR_FN float tanhf(float);
EW_CPU_VECTOR_FN double tanh(double);
EW_CPU_VECTOR_FN float powf(float, float);
EW_CPU_VECTOR_FN double pow(double, double);
#else
#define EW_CPU_HAVE_LIBMVEC 0
#endif

#endif
