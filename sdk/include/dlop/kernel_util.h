/* dlop/kernel_util.h — static-inline helpers for plugin authors (C, usable from C++): error
 * messages, float16/bfloat16 conversion, NumPy broadcasting of static types, a strided N-d loop
 * for CPU kernels, tensor checks in thunks, and the launch of elementwise CUDA kernels.
 * Nothing here needs libdlop: plugins include it and call the host only through its table. */
#ifndef DLOP_KERNEL_UTIL_H
#define DLOP_KERNEL_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dtype.h"
#include "host_api.h"
#include "op.h"
#include "status.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define DLOP_PRINTF_LIKE(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define DLOP_PRINTF_LIKE(fmt, args)
#endif

/* Put on hot contiguous CPU loops: gcc builds an AVX-512, an AVX2 and a baseline copy and
 * picks one at load time, so one plugin binary uses the widest vectors the CPU has. */
#if defined(__GNUC__) && defined(__x86_64__) && defined(__ELF__) && !defined(__CUDACC__)
#define DLOP_CPU_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DLOP_CPU_MULTIVERSION
#endif

/* ---- error messages ------------------------------------------------------------------- */

/* Format into the host's error buffer: bounded, always NUL-terminated, buffer may be NULL. */
static inline void dlop_set_error(char *buffer, size_t size, const char *fmt, ...)
    DLOP_PRINTF_LIKE(3, 4);
static inline void dlop_set_error(char *buffer, size_t size, const char *fmt, ...) {
  va_list args;
  if (buffer == NULL || size == 0) return;
  va_start(args, fmt);
  vsnprintf(buffer, size, fmt, args);
  va_end(args);
  buffer[size - 1] = '\0';
}

/* ---- float16 and bfloat16 -------------------------------------------------------------- */
/* Bit-exact, branch-light conversions (after Maratyszcza's FP16 library) so loops over them
 * stay simple: round to nearest even, NaN stays NaN, infinities and subnormals are exact. */

static inline uint32_t dlop__float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float dlop__float_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline float dlop_half_to_float(uint16_t h) {
  const uint32_t w = (uint32_t)h << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  /* normal numbers (and inf/NaN): rebias the exponent by 2^112 with one exact multiply */
  const float normalized = dlop__float_from_bits((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  /* subnormals: place the mantissa under a 0.5 bias and subtract it exactly */
  const float denormalized = dlop__float_from_bits((two_w >> 17) | (126u << 23)) - 0.5f;
  const uint32_t magnitude = two_w < (1u << 27) ? dlop__float_bits(denormalized)
                                                : dlop__float_bits(normalized);
  return dlop__float_from_bits(sign | magnitude);
}

static inline uint16_t dlop_float_to_half(float f) {
  const uint32_t w = dlop__float_bits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  float absolute = dlop__float_from_bits(w & 0x7FFFFFFFu);
  /* scaling up then down makes values too large for half overflow to inf (both exact) */
  float base = (absolute * 0x1.0p+112f) * 0x1.0p-110f;
  uint32_t bits, nonsign;
  if (bias < 0x71000000u) bias = 0x71000000u;
  /* adding 2^(e+?) makes the FPU round the mantissa to 10 bits, ties to even */
  base = dlop__float_from_bits((bias >> 1) + 0x07800000u) + base;
  bits = dlop__float_bits(base);
  nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
  return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

static inline float dlop_bfloat16_to_float(uint16_t b) {
  return dlop__float_from_bits((uint32_t)b << 16);
}

static inline uint16_t dlop_float_to_bfloat16(float f) {
  uint32_t bits = dlop__float_bits(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((bits >> 16) | 0x0040u); /* quiet NaN */
  bits += 0x7FFFu + ((bits >> 16) & 1u); /* round to nearest even; overflow carries to inf */
  return (uint16_t)(bits >> 16);
}

/* ---- dtypes ------------------------------------------------------------------------------ */

/* "int8, float32, ..." for a DLOP_DTYPE_BIT mask ("none" when empty). Returns buffer. */
static inline const char *dlop_format_dtypes(uint32_t mask, char *buffer, size_t size) {
  size_t used = 0;
  int i;
  if (buffer == NULL || size == 0) return buffer;
  buffer[0] = '\0';
  for (i = 0; i < DLOP_DTYPE_COUNT; i++) {
    if (!(mask & DLOP_DTYPE_BIT(i)) || used >= size) continue;
    int written = snprintf(buffer + used, size - used, "%s%s", used ? ", " : "",
                           dlop_dtype_name((dlop_dtype)i));
    if (written > 0) used += (size_t)written;
  }
  if (used == 0) snprintf(buffer, size, "none");
  buffer[size - 1] = '\0';
  return buffer;
}

/* ---- shapes and broadcasting ----------------------------------------------------------- */

/* "(3, 4)", "(5,)", "()" with "?" for unknown dimensions. Returns buffer. */
static inline const char *dlop_format_shape(const int64_t *shape, int32_t ndim, char *buffer,
                                            size_t size) {
  size_t used = 0;
  int32_t i;
  if (buffer == NULL || size == 0) return buffer;
  buffer[0] = '\0';
#define DLOP__APPEND(...)                                                                  \
  do {                                                                                     \
    if (used < size) {                                                                     \
      int written_ = snprintf(buffer + used, size - used, __VA_ARGS__);                   \
      if (written_ > 0) used += (size_t)written_;                                          \
    }                                                                                      \
  } while (0)
  DLOP__APPEND("(");
  for (i = 0; i < ndim; i++) {
    if (shape[i] == DLOP_DIM_UNKNOWN) DLOP__APPEND("%s?", i ? ", " : "");
    else DLOP__APPEND("%s%lld", i ? ", " : "", (long long)shape[i]);
  }
  DLOP__APPEND(ndim == 1 ? ",)" : ")");
#undef DLOP__APPEND
  buffer[size - 1] = '\0';
  return buffer;
}

/* NumPy broadcasting of two static shapes into out (out_ndim = max of both). A dimension of 1
 * takes the other's size; an unknown one against a known n > 1 must be n (or the program fails
 * at run time), against 1 or unknown it stays unknown. A mismatch is DLOP_SHAPE_ERROR with
 * "cannot broadcast (3, 4) with (5,)". out may alias neither input. */
static inline int dlop_broadcast_shapes(const int64_t *a, int32_t a_ndim, const int64_t *b,
                                        int32_t b_ndim, int64_t *out, int32_t *out_ndim,
                                        char *error, size_t error_size) {
  int32_t ndim = a_ndim > b_ndim ? a_ndim : b_ndim, i;
  if (a_ndim < 0 || b_ndim < 0 || ndim > DLOP_MAX_NDIM) {
    dlop_set_error(error, error_size, "cannot broadcast shapes of rank %d and %d (at most %d dims)",
                   (int)a_ndim, (int)b_ndim, DLOP_MAX_NDIM);
    return DLOP_SHAPE_ERROR;
  }
  for (i = 0; i < ndim; i++) {
    int32_t ia = i - (ndim - a_ndim), ib = i - (ndim - b_ndim);
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    int64_t d;
    if (da == db) d = da;
    else if (da == 1) d = db;
    else if (db == 1) d = da;
    else if (da == DLOP_DIM_UNKNOWN) d = db;
    else if (db == DLOP_DIM_UNKNOWN) d = da;
    else {
      char sa[DLOP_MAX_NDIM * 22 + 4], sb[DLOP_MAX_NDIM * 22 + 4];
      dlop_set_error(error, error_size, "cannot broadcast %s with %s",
                     dlop_format_shape(a, a_ndim, sa, sizeof sa),
                     dlop_format_shape(b, b_ndim, sb, sizeof sb));
      return DLOP_SHAPE_ERROR;
    }
    out[i] = d;
  }
  *out_ndim = ndim;
  return DLOP_OK;
}

/* Broadcast two static types' shapes into out (dtype taken from a). */
static inline int dlop_broadcast_types(const dlop_type *a, const dlop_type *b, dlop_type *out,
                                       char *error, size_t error_size) {
  dlop_type result;
  int status;
  memset(&result, 0, sizeof result);
  result.dtype = a->dtype;
  status = dlop_broadcast_shapes(a->shape, a->ndim, b->shape, b->ndim, result.shape,
                                 &result.ndim, error, error_size);
  if (status == DLOP_OK) *out = result;
  return status;
}

/* ---- checking tensors in a thunk's run -------------------------------------------------- */

/* Check count tensors against the types the thunk was made for: device type, dtype, rank,
 * non-negative dims, every statically known dim, and data present when not empty. role is
 * "input" or "output". DLOP_TYPE_ERROR / DLOP_SHAPE_ERROR / DLOP_INVALID_ARGUMENT otherwise. */
static inline int dlop_check_tensors(const char *op_name, const char *role,
                                     const dlop_tensor *tensors, int32_t count,
                                     const dlop_type *expected, int32_t device_type,
                                     char *error, size_t error_size) {
  int32_t i, d;
  if (count > 0 && tensors == NULL) {
    dlop_set_error(error, error_size, "%s: %s tensors are NULL (expected %d)", op_name, role,
                   (int)count);
    return DLOP_INVALID_ARGUMENT;
  }
  for (i = 0; i < count; i++) {
    const dlop_tensor *t = &tensors[i];
    dlop_dtype dtype = dlop_tensor_dtype(t);
    if (t->device.type != device_type) {
      dlop_set_error(error, error_size, "%s: %s %d is on device type %d, expected %d", op_name,
                     role, (int)i, (int)t->device.type, (int)device_type);
      return DLOP_DEVICE_MISMATCH;
    }
    if ((int32_t)dtype != expected[i].dtype) {
      dlop_set_error(error, error_size, "%s: %s %d has dtype %s, expected %s", op_name, role,
                     (int)i, dlop_dtype_name(dtype), dlop_dtype_name((dlop_dtype)expected[i].dtype));
      return DLOP_TYPE_ERROR;
    }
    if (t->ndim != expected[i].ndim || t->ndim < 0 || t->ndim > DLOP_MAX_NDIM) {
      dlop_set_error(error, error_size, "%s: %s %d has %d dimensions, expected %d", op_name,
                     role, (int)i, (int)t->ndim, (int)expected[i].ndim);
      return DLOP_TYPE_ERROR;
    }
    if (t->ndim > 0 && t->shape == NULL) {
      dlop_set_error(error, error_size, "%s: %s %d has no shape array", op_name, role, (int)i);
      return DLOP_INVALID_ARGUMENT;
    }
    for (d = 0; d < t->ndim; d++) {
      int64_t want = expected[i].shape[d];
      if (t->shape[d] < 0 || (want != DLOP_DIM_UNKNOWN && t->shape[d] != want)) {
        char got_text[DLOP_MAX_NDIM * 22 + 4], want_text[DLOP_MAX_NDIM * 22 + 4];
        dlop_set_error(error, error_size, "%s: %s %d has shape %s, expected %s", op_name, role,
                       (int)i, dlop_format_shape(t->shape, t->ndim, got_text, sizeof got_text),
                       dlop_format_shape(expected[i].shape, expected[i].ndim, want_text,
                                         sizeof want_text));
        return DLOP_SHAPE_ERROR;
      }
    }
    if (t->data == NULL && dlop_tensor_numel(t) > 0) {
      dlop_set_error(error, error_size, "%s: %s %d has NULL data", op_name, role, (int)i);
      return DLOP_INVALID_ARGUMENT;
    }
  }
  return DLOP_OK;
}

/* ---- strided N-d loops ------------------------------------------------------------------ */

/* Operands of one elementwise loop: the output first, then the inputs. */
#define DLOP_KERNEL_MAX_OPERANDS 4

/* Shape and per-operand strides (in elements) after broadcasting and collapsing. Plain data,
 * the same layout in C and CUDA: elementwise CUDA kernels take it by value. */
typedef struct dlop_nd_offsets {
  int32_t ndim; /* >= 1 */
  int32_t num_operands;
  int64_t shape[DLOP_MAX_NDIM];
  int64_t strides[DLOP_KERNEL_MAX_OPERANDS][DLOP_MAX_NDIM];
} dlop_nd_offsets;

typedef struct dlop_strided_loop {
  dlop_nd_offsets layout;
  int64_t numel;
  char *base[DLOP_KERNEL_MAX_OPERANDS]; /* data + byte_offset: the element at index 0 */
  int64_t element_size[DLOP_KERNEL_MAX_OPERANDS];
} dlop_strided_loop;

/* Set up a loop writing output from inputs broadcast to its shape (NumPy rules: missing
 * leading dims and size-1 dims get stride 0). Strides may be anything, negative and zero
 * included; NULL strides mean C-contiguous. Dims of size 1 are dropped and dims that are
 * contiguous with each other in every operand are merged, so a contiguous operation becomes
 * one flat loop with unit strides. DLOP_SHAPE_ERROR when an input does not broadcast. */
static inline int dlop_strided_loop_init(dlop_strided_loop *loop, const dlop_tensor *output,
                                         const dlop_tensor *inputs, int32_t num_inputs,
                                         const char *op_name, char *error, size_t error_size) {
  dlop_nd_offsets *l = &loop->layout;
  int32_t ndim = output->ndim, operands = num_inputs + 1, k, d, kept;
  memset(loop, 0, sizeof *loop);
  if (operands > DLOP_KERNEL_MAX_OPERANDS || ndim < 0 || ndim > DLOP_MAX_NDIM) {
    dlop_set_error(error, error_size, "%s: %d operands of rank %d exceed the loop's limits (%d, %d)",
                   op_name, (int)operands, (int)ndim, DLOP_KERNEL_MAX_OPERANDS, DLOP_MAX_NDIM);
    return DLOP_INVALID_ARGUMENT;
  }
  l->num_operands = operands;
  loop->numel = 1;
  for (d = 0; d < ndim; d++) {
    l->shape[d] = output->shape[d];
    loop->numel *= output->shape[d];
  }
  for (k = 0; k < operands; k++) {
    const dlop_tensor *t = k == 0 ? output : &inputs[k - 1];
    int64_t contiguous = 1;
    if (t->ndim > ndim) {
      char st[DLOP_MAX_NDIM * 22 + 4], so[DLOP_MAX_NDIM * 22 + 4];
      dlop_set_error(error, error_size, "%s: input %d of shape %s does not broadcast to output shape %s",
                     op_name, (int)(k - 1), dlop_format_shape(t->shape, t->ndim, st, sizeof st),
                     dlop_format_shape(output->shape, ndim, so, sizeof so));
      return DLOP_SHAPE_ERROR;
    }
    loop->base[k] = (char *)t->data + t->byte_offset;
    loop->element_size[k] = (int64_t)dlop_dtype_size(dlop_tensor_dtype(t));
    for (d = ndim - 1; d >= 0; d--) {
      int32_t j = d - (ndim - t->ndim);
      int64_t stride;
      if (j < 0) {
        l->strides[k][d] = 0;
        continue;
      }
      stride = t->strides ? t->strides[j] : contiguous;
      contiguous *= t->shape[j];
      if (t->shape[j] == l->shape[d]) {
        l->strides[k][d] = l->shape[d] == 1 ? 0 : stride;
      } else if (t->shape[j] == 1 && k > 0) {
        l->strides[k][d] = 0;
      } else {
        char st[DLOP_MAX_NDIM * 22 + 4], so[DLOP_MAX_NDIM * 22 + 4];
        dlop_set_error(error, error_size, "%s: input %d of shape %s does not broadcast to output shape %s",
                       op_name, (int)(k - 1), dlop_format_shape(t->shape, t->ndim, st, sizeof st),
                       dlop_format_shape(output->shape, ndim, so, sizeof so));
        return DLOP_SHAPE_ERROR;
      }
    }
  }
  if (loop->numel == 0) {
    l->ndim = 1;
    l->shape[0] = 0;
    for (k = 0; k < operands; k++) l->strides[k][0] = 0;
    return DLOP_OK;
  }
  /* drop size-1 dims, then merge each dim into the previous kept one where every operand
   * steps through both as one run (stride[outer] == stride[inner] * shape[inner]) */
  kept = 0;
  for (d = 0; d < ndim; d++) {
    int mergeable = kept > 0;
    if (l->shape[d] == 1) continue;
    for (k = 0; k < operands && mergeable; k++)
      mergeable = l->strides[k][kept - 1] == l->strides[k][d] * l->shape[d];
    if (mergeable) {
      l->shape[kept - 1] *= l->shape[d];
      for (k = 0; k < operands; k++) l->strides[k][kept - 1] = l->strides[k][d];
    } else {
      l->shape[kept] = l->shape[d];
      for (k = 0; k < operands; k++) l->strides[k][kept] = l->strides[k][d];
      kept++;
    }
  }
  if (kept == 0) { /* a single element */
    l->shape[0] = 1;
    for (k = 0; k < operands; k++) l->strides[k][0] = 0;
    kept = 1;
  }
  l->ndim = kept;
  return DLOP_OK;
}

/* True when every operand walks the (single, collapsed) dim with unit stride. */
static inline int dlop_strided_loop_is_contiguous(const dlop_strided_loop *loop) {
  int32_t k;
  if (loop->layout.ndim != 1) return 0;
  for (k = 0; k < loop->layout.num_operands; k++)
    if (loop->layout.strides[k][0] != 1 && loop->layout.shape[0] > 1) return 0;
  return 1;
}

/* Walks the linear range [begin, end) of a loop in runs along the innermost dim. */
typedef struct dlop_strided_cursor {
  int64_t index[DLOP_MAX_NDIM];
  int64_t remaining;
  char *pointer[DLOP_KERNEL_MAX_OPERANDS];
} dlop_strided_cursor;

static inline void dlop_strided_cursor_init(dlop_strided_cursor *c, const dlop_strided_loop *loop,
                                            int64_t begin, int64_t end) {
  const dlop_nd_offsets *l = &loop->layout;
  int64_t rest = begin;
  int32_t d, k;
  memset(c, 0, sizeof *c);
  c->remaining = end > begin ? end - begin : 0;
  for (k = 0; k < l->num_operands; k++) c->pointer[k] = loop->base[k];
  for (d = l->ndim - 1; d >= 0; d--) {
    int64_t size = l->shape[d] > 0 ? l->shape[d] : 1;
    c->index[d] = rest % size;
    rest /= size;
    for (k = 0; k < l->num_operands; k++)
      c->pointer[k] += c->index[d] * l->strides[k][d] * loop->element_size[k];
  }
}

/* The next run: writes its operands' first-element pointers into pointers[] and returns its
 * length (0 when the range is done). Inner strides are loop->layout.strides[k][ndim - 1]. */
static inline int64_t dlop_strided_cursor_next(dlop_strided_cursor *c,
                                               const dlop_strided_loop *loop, char **pointers) {
  const dlop_nd_offsets *l = &loop->layout;
  int32_t last = l->ndim - 1, d, k;
  int64_t n = l->shape[last] - c->index[last];
  if (c->remaining <= 0) return 0;
  if (n > c->remaining) n = c->remaining;
  for (k = 0; k < l->num_operands; k++) {
    pointers[k] = c->pointer[k];
    c->pointer[k] += n * l->strides[k][last] * loop->element_size[k];
  }
  c->remaining -= n;
  c->index[last] += n;
  /* carry into outer dims */
  for (d = last; d > 0 && c->index[d] == l->shape[d]; d--) {
    c->index[d] = 0;
    c->index[d - 1]++;
    for (k = 0; k < l->num_operands; k++)
      c->pointer[k] += (l->strides[k][d - 1] - l->shape[d] * l->strides[k][d]) * loop->element_size[k];
  }
  return n;
}

/* Run body over [0, loop->numel) on the CPU, through the host's parallel_for in chunks of at
 * least grain elements when the loop is large enough, else inline. */
static inline int dlop_strided_loop_run(const dlop_host_api *host, const dlop_strided_loop *loop,
                                        int64_t grain, dlop_parallel_body body, void *context,
                                        const char *op_name, char *error, size_t error_size) {
  if (loop->numel <= 0) return DLOP_OK;
  if (loop->numel > grain && DLOP_HOST_HAS(host, parallel_for)) {
    int status = host->parallel_for(loop->numel, grain, body, context);
    if (status != DLOP_OK) {
      dlop_set_error(error, error_size, "%s: the host's parallel_for failed with status %d",
                     op_name, status);
      return status;
    }
    return DLOP_OK;
  }
  body(context, 0, loop->numel);
  return DLOP_OK;
}

/* ---- the rows view of a strided loop ----------------------------------------------------- */

/* A loop of at most 2 dims (after collapsing) whose inner dim is contiguous in the output and,
 * in each input, contiguous (stride 1) or constant (stride 0: a broadcast column or scalar),
 * with every contiguous operand's rows starting 16-byte aligned and rows a whole number of
 * 16-byte vectors: a matrix times a row, a column or a scalar, or a padded slice x[:, :k].
 * Rows kernels take it by value and handle one 16-byte vector of the output per thread: the
 * row of a vector is one multiply-high by a precomputed magic number, not a division per
 * element and dim as on the general strided path. */
typedef struct dlop_rows_layout {
  int64_t vectors;         /* rows * per_row */
  int64_t per_row;         /* 16-byte vectors in a row, >= 1 */
  uint32_t magic, shift;   /* q = (umulhi(v, magic) + v) >> shift is v / per_row, v < 2^32 */
  int32_t width;           /* elements in a vector */
  int32_t num_operands;
  int64_t row_stride[DLOP_KERNEL_MAX_OPERANDS]; /* elements */
  int32_t inner[DLOP_KERNEL_MAX_OPERANDS];      /* inner stride: 1 or 0 */
  int32_t reused[DLOP_KERNEL_MAX_OPERANDS];     /* row stride 0 over several rows: cache it */
} dlop_rows_layout;

/* True (1) when the loop has the rows shape above; fills r. */
static inline int dlop_rows_layout_init(dlop_rows_layout *r, const dlop_strided_loop *loop) {
  const dlop_nd_offsets *l = &loop->layout;
  int32_t inner = l->ndim - 1, k;
  int64_t size = loop->element_size[0], width, rows, cols;
  uint32_t shift = 0;
  memset(r, 0, sizeof *r);
  if (l->ndim < 1 || l->ndim > 2 || size <= 0 || size > 16 || 16 % size != 0) return 0;
  width = 16 / size;
  cols = l->shape[inner];
  rows = l->ndim == 2 ? l->shape[0] : 1;
  if (cols <= 0 || rows <= 0 || cols % width != 0) return 0;
  for (k = 0; k < l->num_operands; k++) {
    int64_t stride = l->strides[k][inner], row_stride = l->ndim == 2 ? l->strides[k][0] : 0;
    if (loop->element_size[k] != size) return 0;
    if (stride == 1) {
      if (((uintptr_t)loop->base[k] & 15u) != 0 || (row_stride * size) % 16 != 0) return 0;
    } else if (stride != 0 || k == 0) { /* the output must be written along the row */
      return 0;
    }
    r->row_stride[k] = row_stride;
    r->inner[k] = (int32_t)stride;
    r->reused[k] = row_stride == 0 && rows > 1;
  }
  r->num_operands = l->num_operands;
  r->width = (int32_t)width;
  r->per_row = cols / width;
  r->vectors = rows * r->per_row;
  /* the round-up magic number of per_row (Granlund and Montgomery): shift = ceil(log2(d)),
   * magic = 2^32 (2^shift - d) / d + 1 fits in 32 bits and (2^shift - d) < 2^31 keeps the
   * product below 2^63; only used when vectors < 2^32 (so per_row < 2^32) */
  if (r->vectors <= (int64_t)UINT32_MAX) {
    uint64_t d = (uint64_t)r->per_row;
    while (shift < 32 && ((uint64_t)1 << shift) < d) shift++;
    r->shift = shift;
    r->magic = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << shift) - d)) / d + 1);
  }
  return 1;
}

/* ---- launching elementwise CUDA kernels -------------------------------------------------- */

/* Threads per block of the elementwise kernels, and the cap on blocks per SM of the general
 * strided kernels (grid-stride loops do the rest). Measured on an H200 at 2^28 elements, the
 * contiguous and rows kernels reach 99-100% of a device copy with one step per thread and a
 * grid that covers the whole tensor (blocks start in order, so the blocks resident at any
 * time touch one compact window of memory); capped at 128 blocks per SM, their grid-stride
 * loops spread every wave over the whole tensor and stayed at 93-96%. DLOP_CUDA_MAX_GRID only
 * bounds those grids (2^30 blocks of 256 threads: far beyond any tensor one GPU holds). */
#define DLOP_CUDA_ELEMENTWISE_BLOCK 256
#define DLOP_CUDA_BLOCKS_PER_SM 128
#define DLOP_CUDA_MAX_GRID (1u << 30)

/* Blocks for work_items threads' worth of work, at most max_blocks (grid-stride loops do the
 * rest), at least 1. */
static inline uint32_t dlop_cuda_grid_size(int64_t work_items, uint32_t block, uint32_t max_blocks) {
  int64_t blocks = (work_items + block - 1) / block;
  if (blocks > (int64_t)max_blocks) blocks = max_blocks;
  if (blocks < 1) blocks = 1;
  return (uint32_t)blocks;
}

/* The block cap of the general strided kernels on a device: SM count (attribute 16) times
 * DLOP_CUDA_BLOCKS_PER_SM. */
static inline int dlop_cuda_max_blocks(const dlop_host_api *host, int32_t device_id,
                                       uint32_t *max_blocks, const char *op_name, char *error,
                                       size_t error_size) {
  int32_t sm_count = 0;
  int status;
  if (!DLOP_HOST_HAS(host, cuda_device_attribute)) {
    dlop_set_error(error, error_size, "%s: the host offers no cuda_device_attribute", op_name);
    return DLOP_UNSUPPORTED;
  }
  status = host->cuda_device_attribute(device_id, 16 /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */,
                                       &sm_count);
  if (status != DLOP_OK || sm_count <= 0) {
    dlop_set_error(error, error_size,
                   "%s: could not read the multiprocessor count of CUDA device %d (status %d)",
                   op_name, (int)device_id, status);
    return status != DLOP_OK ? status : DLOP_CUDA_ERROR;
  }
  *max_blocks = (uint32_t)sm_count * DLOP_CUDA_BLOCKS_PER_SM;
  return DLOP_OK;
}

/* An elementwise op's kernels for one dtype (CUfunctions). Kernels take the inputs first, then
 * the output (operand 0 of the loop):
 *   contiguous(const T *in0, ..., T *out, int64_t n)                      every stride is 1
 *   rows(const T *in0, ..., T *out, dlop_rows_layout rows)                 dlop_rows_layout_init
 *   strided(const T *in0, ..., T *out, int64_t n, dlop_nd_offsets offsets) anything else
 * rows may be NULL (such loops then go to strided). contiguous_elements is the elements one
 * thread of the contiguous kernel handles (its 16-byte vectors times how many it loads at
 * once); max_blocks caps the strided kernel's grid (dlop_cuda_max_blocks). */
typedef struct dlop_cuda_elementwise {
  void *contiguous, *rows, *strided;
  int32_t contiguous_elements;
  uint32_t max_blocks;
} dlop_cuda_elementwise;

/* Launch the kernel that fits a loop set up by dlop_strided_loop_init on stream. Nothing is
 * launched when the loop is empty. */
static inline int dlop_cuda_launch_elementwise(const dlop_host_api *host,
                                               const dlop_strided_loop *loop,
                                               const dlop_cuda_elementwise *kernels,
                                               void *stream, const char *op_name, char *error,
                                               size_t error_size) {
  void *args[DLOP_KERNEL_MAX_OPERANDS + 2];
  void *pointers[DLOP_KERNEL_MAX_OPERANDS];
  dlop_nd_offsets offsets = loop->layout;
  dlop_rows_layout rows;
  int64_t n = loop->numel, work;
  int32_t k, operands = loop->layout.num_operands, count = 0;
  uint32_t grid[3] = {1, 1, 1}, block[3] = {DLOP_CUDA_ELEMENTWISE_BLOCK, 1, 1};
  void *function;
  int status;
  if (n <= 0) return DLOP_OK;
  if (!DLOP_HOST_HAS(host, cuda_launch)) {
    dlop_set_error(error, error_size, "%s: the host offers no cuda_launch", op_name);
    return DLOP_UNSUPPORTED;
  }
  if (stream == NULL) {
    dlop_set_error(error, error_size, "%s: no CUDA stream given (thunks never use the default stream)",
                   op_name);
    return DLOP_INVALID_ARGUMENT;
  }
  for (k = 1; k < operands; k++) pointers[k - 1] = loop->base[k];
  pointers[operands - 1] = loop->base[0];
  for (k = 0; k < operands; k++) args[count++] = &pointers[k];
  if (dlop_strided_loop_is_contiguous(loop)) {
    int32_t per_thread = kernels->contiguous_elements > 1 ? kernels->contiguous_elements : 1;
    function = kernels->contiguous;
    args[count++] = &n;
    work = (n + per_thread - 1) / per_thread;
    grid[0] = dlop_cuda_grid_size(work, block[0], DLOP_CUDA_MAX_GRID);
  } else if (kernels->rows != NULL && dlop_rows_layout_init(&rows, loop)) {
    function = kernels->rows;
    args[count++] = &rows;
    grid[0] = dlop_cuda_grid_size(rows.vectors, block[0], DLOP_CUDA_MAX_GRID);
  } else {
    function = kernels->strided;
    args[count++] = &n;
    args[count++] = &offsets;
    grid[0] = dlop_cuda_grid_size(n, block[0], kernels->max_blocks);
  }
  status = host->cuda_launch(function, grid, block, 0, stream, args, error, error_size);
  if (status != DLOP_OK && error != NULL && error_size > 0 && error[0] == '\0')
    dlop_set_error(error, error_size, "%s: kernel launch failed with status %d", op_name, status);
  return status;
}

#ifdef __cplusplus
}
#endif

#endif
