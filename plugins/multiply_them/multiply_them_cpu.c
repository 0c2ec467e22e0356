/* multiply_them_cpu.c — the CPU kernel of multiply_them (z = a * b) for every dtype: contiguous
 * loops gcc vectorizes (built for AVX-512, AVX2 and baseline), including the broadcast case of
 * one operand held fixed (stride 0), a strided loop for anything else, and parallel chunks. */
#include "multiply_them_plugin.h"

/* Elements per parallel chunk: large enough to amortize scheduling, small enough to balance. */
#define MULTIPLY_THEM_GRAIN 32768

typedef void (*multiply_them_inner_fn)(char *z, int64_t zs, const char *a, int64_t as,
                                       const char *b, int64_t bs, int64_t n);

/* Integers multiply in the unsigned type of at least their width (so uint16 does not promote
 * to a signed int that overflows) and wrap like NumPy; 16-bit floats multiply exactly in float
 * and round once. */
/* The output may be the input itself (the op declares inplace_map), so it is not restrict;
 * ivdep tells gcc the loop carries no dependence, which holds for same-index aliasing too. */
#define MULTIPLY_THEM_KERNELS(name, T, MUL)                                                  \
  DLOP_CPU_MULTIVERSION static void multiply_them_contiguous_##name(                        \
      T *z, const T *a, const T *b, int64_t n) {                 \
    _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) z[i] = MUL(a[i], b[i]);                                 \
  }                                                                                         \
  DLOP_CPU_MULTIVERSION static void multiply_them_scalar_b_##name(                          \
      T *z, const T *a, const T b, int64_t n) {                           \
    _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) z[i] = MUL(a[i], b);                                    \
  }                                                                                         \
  static void multiply_them_inner_##name(char *z, int64_t zs, const char *a, int64_t as,    \
                                         const char *b, int64_t bs, int64_t n) {            \
    T *zt = (T *)z;                                                                         \
    const T *at = (const T *)a, *bt = (const T *)b;                                         \
    if (zs == 1 && as == 1 && bs == 1) {                                                    \
      multiply_them_contiguous_##name(zt, at, bt, n);                                       \
    } else if (zs == 1 && as == 1 && bs == 0) {                                             \
      multiply_them_scalar_b_##name(zt, at, bt[0], n);                                      \
    } else if (zs == 1 && as == 0 && bs == 1) { /* multiplication commutes bit-exactly */  \
      multiply_them_scalar_b_##name(zt, bt, at[0], n);                                      \
    } else {                                                                                \
      for (int64_t i = 0; i < n; i++) zt[i * zs] = MUL(at[i * as], bt[i * bs]);             \
    }                                                                                       \
  }

#define MUL_INT8(x, y) ((int8_t)(uint8_t)((uint32_t)(x) * (uint32_t)(y)))
#define MUL_INT16(x, y) ((int16_t)(uint16_t)((uint32_t)(x) * (uint32_t)(y)))
#define MUL_INT32(x, y) ((int32_t)((uint32_t)(x) * (uint32_t)(y)))
#define MUL_INT64(x, y) ((int64_t)((uint64_t)(x) * (uint64_t)(y)))
#define MUL_UINT8(x, y) ((uint8_t)((uint32_t)(x) * (uint32_t)(y)))
#define MUL_FLOAT16(x, y) dlop_float_to_half(dlop_half_to_float(x) * dlop_half_to_float(y))
#define MUL_BFLOAT16(x, y) \
  dlop_float_to_bfloat16(dlop_bfloat16_to_float(x) * dlop_bfloat16_to_float(y))
#define MUL_FLOAT(x, y) ((x) * (y))

MULTIPLY_THEM_KERNELS(int8, int8_t, MUL_INT8)
MULTIPLY_THEM_KERNELS(int16, int16_t, MUL_INT16)
MULTIPLY_THEM_KERNELS(int32, int32_t, MUL_INT32)
MULTIPLY_THEM_KERNELS(int64, int64_t, MUL_INT64)
MULTIPLY_THEM_KERNELS(uint8, uint8_t, MUL_UINT8)
MULTIPLY_THEM_KERNELS(float16, uint16_t, MUL_FLOAT16)
MULTIPLY_THEM_KERNELS(bfloat16, uint16_t, MUL_BFLOAT16)
MULTIPLY_THEM_KERNELS(float32, float, MUL_FLOAT)
MULTIPLY_THEM_KERNELS(float64, double, MUL_FLOAT)

static multiply_them_inner_fn multiply_them_inner_for(dlop_dtype dtype) {
  switch (dtype) {
    case DLOP_INT8: return multiply_them_inner_int8;
    case DLOP_INT16: return multiply_them_inner_int16;
    case DLOP_INT32: return multiply_them_inner_int32;
    case DLOP_INT64: return multiply_them_inner_int64;
    case DLOP_UINT8: return multiply_them_inner_uint8;
    case DLOP_FLOAT16: return multiply_them_inner_float16;
    case DLOP_BFLOAT16: return multiply_them_inner_bfloat16;
    case DLOP_FLOAT32: return multiply_them_inner_float32;
    case DLOP_FLOAT64: return multiply_them_inner_float64;
    default: return NULL;
  }
}

typedef struct multiply_them_cpu_context {
  const dlop_strided_loop *loop;
  multiply_them_inner_fn inner;
} multiply_them_cpu_context;

static void multiply_them_cpu_chunk(void *context, int64_t begin, int64_t end) {
  const multiply_them_cpu_context *ctx = (const multiply_them_cpu_context *)context;
  const dlop_nd_offsets *layout = &ctx->loop->layout;
  int32_t last = layout->ndim - 1;
  int64_t zs = layout->strides[0][last], as = layout->strides[1][last], bs = layout->strides[2][last];
  char *pointers[DLOP_KERNEL_MAX_OPERANDS];
  dlop_strided_cursor cursor;
  int64_t n;
  dlop_strided_cursor_init(&cursor, ctx->loop, begin, end);
  while ((n = dlop_strided_cursor_next(&cursor, ctx->loop, pointers)) > 0)
    ctx->inner(pointers[0], zs, pointers[1], as, pointers[2], bs, n);
}

int multiply_them_cpu_run(const dlop_strided_loop *loop, dlop_dtype dtype, char *error,
                          size_t error_size) {
  multiply_them_cpu_context ctx;
  ctx.loop = loop;
  ctx.inner = multiply_them_inner_for(dtype);
  if (ctx.inner == NULL) {
    dlop_set_error(error, error_size, "multiply_them: no CPU kernel for dtype %s",
                   dlop_dtype_name(dtype));
    return DLOP_UNSUPPORTED;
  }
  return dlop_strided_loop_run(multiply_them_host(), loop, MULTIPLY_THEM_GRAIN,
                               multiply_them_cpu_chunk, &ctx, "multiply_them", error, error_size);
}
