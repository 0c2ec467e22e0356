/* double_cpu.c — the CPU kernel of double (y = 2x) for every dtype: a contiguous loop gcc
 * vectorizes (built for AVX-512, AVX2 and baseline), a strided loop for any other layout, and
 * the host's parallel_for over chunks of the flattened index range. */
#include "double_plugin.h"

/* Elements per parallel chunk: large enough to amortize scheduling, small enough to balance. */
#define DOUBLE_GRAIN 32768

typedef void (*double_inner_fn)(char *y, int64_t y_stride, const char *x, int64_t x_stride,
                                int64_t n);

/* Integers double in the unsigned type of their width (U) so overflow wraps like NumPy
 * instead of being undefined; floats double exactly; 16-bit floats go through float. */
/* The output may be the input itself (the op declares inplace_map), so it is not restrict;
 * ivdep tells gcc the loop carries no dependence, which holds for same-index aliasing too. */
#define DOUBLE_KERNELS(name, T, VALUE)                                                      \
  DLOP_CPU_MULTIVERSION static void double_contiguous_##name(T *y,                 \
                                                             const T *x, int64_t n) { \
    _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) y[i] = VALUE(x[i]);                                     \
  }                                                                                         \
  static void double_inner_##name(char *y, int64_t ys, const char *x, int64_t xs, int64_t n) { \
    T *yt = (T *)y;                                                                         \
    const T *xt = (const T *)x;                                                             \
    if (ys == 1 && xs == 1) {                                                               \
      double_contiguous_##name(yt, xt, n);                                                  \
      return;                                                                               \
    }                                                                                       \
    for (int64_t i = 0; i < n; i++) yt[i * ys] = VALUE(xt[i * xs]);                         \
  }

#define DOUBLE_INT8(v) ((int8_t)(uint32_t)((uint32_t)(v) * 2u))
#define DOUBLE_INT16(v) ((int16_t)(uint32_t)((uint32_t)(v) * 2u))
#define DOUBLE_INT32(v) ((int32_t)((uint32_t)(v) * 2u))
#define DOUBLE_INT64(v) ((int64_t)((uint64_t)(v) * 2u))
#define DOUBLE_UINT8(v) ((uint8_t)((uint32_t)(v) * 2u))
#define DOUBLE_FLOAT16(v) dlop_float_to_half(dlop_half_to_float(v) * 2.0f)
#define DOUBLE_BFLOAT16(v) dlop_float_to_bfloat16(dlop_bfloat16_to_float(v) * 2.0f)
#define DOUBLE_FLOAT32(v) ((v) * 2.0f)
#define DOUBLE_FLOAT64(v) ((v) * 2.0)

DOUBLE_KERNELS(int8, int8_t, DOUBLE_INT8)
DOUBLE_KERNELS(int16, int16_t, DOUBLE_INT16)
DOUBLE_KERNELS(int32, int32_t, DOUBLE_INT32)
DOUBLE_KERNELS(int64, int64_t, DOUBLE_INT64)
DOUBLE_KERNELS(uint8, uint8_t, DOUBLE_UINT8)
DOUBLE_KERNELS(float16, uint16_t, DOUBLE_FLOAT16)
DOUBLE_KERNELS(bfloat16, uint16_t, DOUBLE_BFLOAT16)
DOUBLE_KERNELS(float32, float, DOUBLE_FLOAT32)
DOUBLE_KERNELS(float64, double, DOUBLE_FLOAT64)

static double_inner_fn double_inner_for(dlop_dtype dtype) {
  switch (dtype) {
    case DLOP_INT8: return double_inner_int8;
    case DLOP_INT16: return double_inner_int16;
    case DLOP_INT32: return double_inner_int32;
    case DLOP_INT64: return double_inner_int64;
    case DLOP_UINT8: return double_inner_uint8;
    case DLOP_FLOAT16: return double_inner_float16;
    case DLOP_BFLOAT16: return double_inner_bfloat16;
    case DLOP_FLOAT32: return double_inner_float32;
    case DLOP_FLOAT64: return double_inner_float64;
    default: return NULL;
  }
}

typedef struct double_cpu_context {
  const dlop_strided_loop *loop;
  double_inner_fn inner;
} double_cpu_context;

static void double_cpu_chunk(void *context, int64_t begin, int64_t end) {
  const double_cpu_context *ctx = (const double_cpu_context *)context;
  const dlop_nd_offsets *layout = &ctx->loop->layout;
  int64_t y_stride = layout->strides[0][layout->ndim - 1];
  int64_t x_stride = layout->strides[1][layout->ndim - 1];
  char *pointers[DLOP_KERNEL_MAX_OPERANDS];
  dlop_strided_cursor cursor;
  int64_t n;
  dlop_strided_cursor_init(&cursor, ctx->loop, begin, end);
  while ((n = dlop_strided_cursor_next(&cursor, ctx->loop, pointers)) > 0)
    ctx->inner(pointers[0], y_stride, pointers[1], x_stride, n);
}

int double_cpu_run(const dlop_strided_loop *loop, dlop_dtype dtype, char *error,
                   size_t error_size) {
  double_cpu_context ctx;
  ctx.loop = loop;
  ctx.inner = double_inner_for(dtype);
  if (ctx.inner == NULL) {
    dlop_set_error(error, error_size, "double: no CPU kernel for dtype %s", dlop_dtype_name(dtype));
    return DLOP_UNSUPPORTED;
  }
  return dlop_strided_loop_run(double_host(), loop, DOUBLE_GRAIN, double_cpu_chunk, &ctx,
                               "double", error, error_size);
}
