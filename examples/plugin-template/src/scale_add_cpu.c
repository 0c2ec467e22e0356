/* scale_add_cpu.c — the CPU kernel of scale_add (z = alpha * x + y): the host's parallel_for
 * splits the elements into chunks, a cursor walks each chunk in runs along the innermost dim,
 * and each run is a plain loop (contiguous runs are the ones gcc vectorizes). */
#include "scale_add.h"

/* Elements per parallel chunk: enough work to pay for scheduling a chunk on another thread. */
#define SCALE_ADD_GRAIN 32768

typedef struct scale_add_cpu_context {
  const dlop_strided_loop *loop;
  dlop_dtype dtype;
  double alpha;
} scale_add_cpu_context;

/* One run of n elements with inner strides (in elements) zs, xs, ys; a stride of 0 is a
 * broadcast operand. Built with -ffp-contract=off (CMakeLists.txt): alpha * x is rounded before
 * the addition, as in the CUDA kernel, so both devices give the same bits. z may not alias x or
 * y here (the op declares no inplace_map), hence restrict. */
#define SCALE_ADD_RUN(T)                                                                    \
  static void scale_add_run_##T(T *restrict z, int64_t zs, const T *restrict x, int64_t xs,   \
                                const T *restrict y, int64_t ys, int64_t n, T alpha) {      \
    if (zs == 1 && xs == 1 && ys == 1) {                                                    \
      for (int64_t i = 0; i < n; i++) z[i] = alpha * x[i] + y[i];                          \
    } else {                                                                                \
      for (int64_t i = 0; i < n; i++) z[i * zs] = alpha * x[i * xs] + y[i * ys];           \
    }                                                                                       \
  }
SCALE_ADD_RUN(float)
SCALE_ADD_RUN(double)

/* The parallel_for body: elements [begin, end) of the loop, in linear (row-major) order. */
static void scale_add_cpu_chunk(void *context, int64_t begin, int64_t end) {
  const scale_add_cpu_context *ctx = (const scale_add_cpu_context *)context;
  const dlop_nd_offsets *layout = &ctx->loop->layout;
  int32_t last = layout->ndim - 1;
  int64_t zs = layout->strides[0][last], xs = layout->strides[1][last];
  int64_t ys = layout->strides[2][last];
  char *pointers[DLOP_KERNEL_MAX_OPERANDS];
  dlop_strided_cursor cursor;
  int64_t n;
  dlop_strided_cursor_init(&cursor, ctx->loop, begin, end);
  while ((n = dlop_strided_cursor_next(&cursor, ctx->loop, pointers)) > 0) {
    if (ctx->dtype == DLOP_FLOAT32)
      scale_add_run_float((float *)pointers[0], zs, (const float *)pointers[1], xs,
                          (const float *)pointers[2], ys, n, (float)ctx->alpha);
    else
      scale_add_run_double((double *)pointers[0], zs, (const double *)pointers[1], xs,
                           (const double *)pointers[2], ys, n, ctx->alpha);
  }
}

int scale_add_cpu_run(const dlop_strided_loop *loop, dlop_dtype dtype, double alpha, char *error,
                      size_t error_size) {
  scale_add_cpu_context ctx;
  if (dtype != DLOP_FLOAT32 && dtype != DLOP_FLOAT64) {
    dlop_set_error(error, error_size, "scale_add: no CPU kernel for dtype %s (float32, float64)",
                   dlop_dtype_name(dtype));
    return DLOP_UNSUPPORTED;
  }
  ctx.loop = loop;
  ctx.dtype = dtype;
  ctx.alpha = alpha;
  return dlop_strided_loop_run(scale_add_host(), loop, SCALE_ADD_GRAIN, scale_add_cpu_chunk, &ctx,
                               "scale_add", error, error_size);
}
