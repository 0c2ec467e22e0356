/* exp_cpu.c — the CPU kernel of exp (y = e^x) for float16, bfloat16, float32 and float64: a
 * contiguous loop over exp_math.h's polynomial that gcc vectorizes (built for AVX-512, AVX2 and
 * baseline), a strided loop for any other layout, and the host's parallel_for over chunks. */
#include "exp_math.h"
#include "exp_plugin.h"

/* Elements per parallel chunk: large enough to amortize scheduling, small enough to balance. */
#define EXP_GRAIN 32768

typedef void (*exp_inner_fn)(char *y, int64_t y_stride, const char *x, int64_t x_stride,
                             int64_t n);

/* The output may be the input itself (the op declares inplace_map), so it is not restrict;
 * ivdep tells gcc the loop carries no dependence, which holds for same-index aliasing too. */
#define EXP_KERNELS(name, T, VALUE)                                                         \
  DLOP_CPU_MULTIVERSION static void exp_contiguous_##name(T *y, const T *x, \
                                                          int64_t n) {                      \
    _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) y[i] = VALUE(x[i]);                                     \
  }                                                                                         \
  static void exp_inner_##name(char *y, int64_t ys, const char *x, int64_t xs, int64_t n) { \
    T *yt = (T *)y;                                                                         \
    const T *xt = (const T *)x;                                                             \
    if (ys == 1 && xs == 1) {                                                               \
      exp_contiguous_##name(yt, xt, n);                                                     \
      return;                                                                               \
    }                                                                                       \
    for (int64_t i = 0; i < n; i++) yt[i * ys] = VALUE(xt[i * xs]);                         \
  }

/* float16 and bfloat16 compute in float32 and round once */
#define EXP_FLOAT16(v) dlop_float_to_half(exp_poly_f32(dlop_half_to_float(v)))
#define EXP_BFLOAT16(v) dlop_float_to_bfloat16(exp_poly_f32(dlop_bfloat16_to_float(v)))

EXP_KERNELS(float16, uint16_t, EXP_FLOAT16)
EXP_KERNELS(bfloat16, uint16_t, EXP_BFLOAT16)
EXP_KERNELS(float32, float, exp_poly_f32)
EXP_KERNELS(float64, double, exp_poly_f64)

static exp_inner_fn exp_inner_for(dlop_dtype dtype) {
  switch (dtype) {
    case DLOP_FLOAT16: return exp_inner_float16;
    case DLOP_BFLOAT16: return exp_inner_bfloat16;
    case DLOP_FLOAT32: return exp_inner_float32;
    case DLOP_FLOAT64: return exp_inner_float64;
    default: return NULL;
  }
}

typedef struct exp_cpu_context {
  const dlop_strided_loop *loop;
  exp_inner_fn inner;
} exp_cpu_context;

static void exp_cpu_chunk(void *context, int64_t begin, int64_t end) {
  const exp_cpu_context *ctx = (const exp_cpu_context *)context;
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

int exp_cpu_run(const dlop_strided_loop *loop, dlop_dtype dtype, char *error, size_t error_size) {
  exp_cpu_context ctx;
  ctx.loop = loop;
  ctx.inner = exp_inner_for(dtype);
  if (ctx.inner == NULL) {
    dlop_set_error(error, error_size, "exp: no CPU kernel for dtype %s", dlop_dtype_name(dtype));
    return DLOP_UNSUPPORTED;
  }
  return dlop_strided_loop_run(exp_host(), loop, EXP_GRAIN, exp_cpu_chunk, &ctx, "exp", error,
                               error_size);
}
