/* dlop/kit/checked_size.h — element counts, byte sizes and the bytes a strided layout reaches,
 * computed with checked arithmetic: the one place where dlop multiplies shapes. libdlop, the
 * Python extension and the kit's helpers all count through it, so a shape cannot make any of
 * them wrap. Part of kernel_util.h; static inline, needs nothing from libdlop.
 *
 * The rule is NumPy's: a shape fits when the product of its nonzero dims, times the element
 * size, is at most 2^63-1. A zero dim makes the shape empty but does not excuse the others, so
 * every partial product of a fitting shape (a stride, a batch count, a merged dim) fits too. */
#ifndef DLOP_CHECKED_SIZE_H
#define DLOP_CHECKED_SIZE_H

#include <stddef.h>
#include <stdint.h>

#include "kernel_error.h"
#include "../dtype.h"
#include "../status.h"
#include "../tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The limit as messages write it: element counts, byte sizes and byte offsets are int64. */
#define DLOP_SIZE_LIMIT_TEXT "2^63-1"

/* 1 when a * b (a + b) leaves int64, else 0 with the result in *out. */
static inline int dlop_mul_overflow(int64_t a, int64_t b, int64_t *out) {
#if defined(__GNUC__) || defined(__clang__)
  return __builtin_mul_overflow(a, b, out);
#else
  if (a != 0 && b != 0) {
    if ((a == -1 && b == INT64_MIN) || (b == -1 && a == INT64_MIN)) return 1;
    if (a > 0 ? (b > 0 ? a > INT64_MAX / b : b < INT64_MIN / a)
              : (b > 0 ? a < INT64_MIN / b : b < INT64_MAX / a))
      return 1;
  }
  *out = a * b;
  return 0;
#endif
}

static inline int dlop_add_overflow(int64_t a, int64_t b, int64_t *out) {
#if defined(__GNUC__) || defined(__clang__)
  return __builtin_add_overflow(a, b, out);
#else
  if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) return 1;
  *out = a + b;
  return 0;
#endif
}

/* What dlop_shape_size found. */
enum {
  DLOP_SIZE_FITS = 0,
  DLOP_SIZE_TOO_MANY_ELEMENTS = 1, /* the nonzero dims multiply past 2^63-1 */
  DLOP_SIZE_TOO_MANY_BYTES = 2     /* the elements fit, times element_size they do not */
};

/* The element count and byte size of shape[0..ndim) by the rule above. Negative dims (unknown,
 * DLOP_DIM_UNKNOWN, while a graph is built) count as 1 in the check: whatever size they take
 * only makes the product larger, so a shape refused here is refused at run time too; they make
 * *numel and *bytes -1. element_size 0 checks elements only. numel and bytes may be NULL.
 * Returns DLOP_SIZE_FITS, DLOP_SIZE_TOO_MANY_ELEMENTS or DLOP_SIZE_TOO_MANY_BYTES. */
static inline int dlop_shape_size(const int64_t *shape, int32_t ndim, int64_t element_size,
                                  int64_t *numel, int64_t *bytes) {
  int64_t product = 1, total;
  int32_t d, empty = 0, unknown = 0;
  for (d = 0; d < ndim; d++) {
    if (shape[d] == 0) empty = 1;
    else if (shape[d] < 0) unknown = 1;
    else if (shape[d] != 1 && dlop_mul_overflow(product, shape[d], &product))
      return DLOP_SIZE_TOO_MANY_ELEMENTS;
  }
  if (element_size > 0 && dlop_mul_overflow(product, element_size, &total))
    return DLOP_SIZE_TOO_MANY_BYTES;
  if (empty) product = 0;
  if (numel) *numel = unknown && !empty ? -1 : product;
  if (bytes) *bytes = unknown && !empty ? -1 : product * (element_size > 0 ? element_size : 0);
  return DLOP_SIZE_FITS;
}

/* dlop_shape_size's result as a message into error: "<what>: shape (4294967296, 4294967296, 2)
 * has more than 2^63-1 elements" or "<what>: shape (2147483648, 2147483648) of float64 has
 * more than 2^63-1 bytes" (what NULL or "": no prefix). Nothing when result is DLOP_SIZE_FITS. */
static inline void dlop_set_size_error(char *error, size_t error_size, const char *what,
                                       int result, const int64_t *shape, int32_t ndim,
                                       int32_t dtype) {
  char text[DLOP_MAX_NDIM * 22 + 4];
  const char *separator = what != NULL && what[0] != '\0' ? ": " : "";
  if (result == DLOP_SIZE_FITS) return;
  dlop_format_shape(shape, ndim > DLOP_MAX_NDIM ? DLOP_MAX_NDIM : ndim, text, sizeof text);
  if (result == DLOP_SIZE_TOO_MANY_ELEMENTS)
    dlop_set_error(error, error_size, "%s%sshape %s has more than " DLOP_SIZE_LIMIT_TEXT
                   " elements", what ? what : "", separator, text);
  else
    dlop_set_error(error, error_size, "%s%sshape %s of %s has more than " DLOP_SIZE_LIMIT_TEXT
                   " bytes", what ? what : "", separator, text,
                   dlop_dtype_name((dlop_dtype)dtype));
}

/* The check with its message: DLOP_OK with *numel (may be NULL), or DLOP_SHAPE_ERROR and the
 * message of dlop_set_size_error. dtype outside the dlop dtypes checks elements only. */
static inline int dlop_check_shape_size(const char *what, const int64_t *shape, int32_t ndim,
                                        int32_t dtype, int64_t *numel, char *error,
                                        size_t error_size) {
  int result = dlop_shape_size(shape, ndim, (int64_t)dlop_dtype_size((dlop_dtype)dtype), numel,
                               NULL);
  if (result == DLOP_SIZE_FITS) return DLOP_OK;
  dlop_set_size_error(error, error_size, what, result, shape, ndim, dtype);
  return DLOP_SHAPE_ERROR;
}

/* C-contiguous strides (in elements) of shape into strides[0..ndim): 0 when every product
 * fits, 1 when one leaves int64 (only a shape that breaks the rule above can). */
static inline int dlop_contiguous_strides(const int64_t *shape, int32_t ndim, int64_t *strides) {
  int64_t stride = 1;
  int32_t d;
  for (d = ndim - 1; d >= 0; d--) {
    strides[d] = stride;
    if (d > 0 && dlop_mul_overflow(stride, shape[d], &stride)) return 1;
  }
  return 0;
}

/* The reach of a strided layout: the sum, over its dims of size > 1, of |shape * stride| (in
 * elements: one step past the last element along each dim, so a loop that moves a pointer to
 * the end of a run stays in range; size-1 dims, whose strides frameworks set freely, are never
 * stepped along and count nothing). A layout of that reach fits when
 *   byte_offset + max(reach, 1) * element_size <= 2^63-1,
 * which bounds every byte offset a kernel computes, and [low, high) below with it; real memory
 * is far below that. This is the one step of a dim: *reach += |n * stride|; 1 when it leaves
 * int64. */
static inline int dlop_reach_add(int64_t *reach, int64_t n, int64_t stride) {
  int64_t span;
  if (dlop_mul_overflow(stride, n, &span) || span == INT64_MIN) return 1;
  return dlop_add_overflow(*reach, span < 0 ? -span : span, reach);
}

/* The dim blamed when only a layout's bytes leave int64: the one of the largest term (-1 when
 * every term is 0). Only on the failure path. */
static inline int32_t dlop_reach_largest_dim(const int64_t *shape, const int64_t *strides,
                                             int32_t ndim) {
  int64_t largest = 0, term;
  int32_t d, dim = -1;
  for (d = 0; d < ndim; d++) {
    if (shape[d] <= 1) continue;
    term = 0;
    if (dlop_reach_add(&term, shape[d], strides[d]) || term > largest) {
      largest = term;
      dim = d;
    }
  }
  return dim;
}

/* The last step of the rule above: 0 when byte_offset + max(reach, 1) * element_size fits,
 * else 1 (with *strides_at_fault 1 when reach * element_size alone leaves int64, 0 when it
 * is the offset's doing). */
static inline int dlop_reach_bytes_overflow(int64_t reach, int64_t element_size,
                                            uint64_t byte_offset, int *strides_at_fault) {
  int64_t bytes, end;
  *strides_at_fault = 0;
  if (dlop_mul_overflow(reach > 0 ? reach : 1, element_size, &bytes)) {
    *strides_at_fault = 1;
    return 1;
  }
  return byte_offset > (uint64_t)INT64_MAX || dlop_add_overflow((int64_t)byte_offset, bytes, &end);
}

/* The bytes [*low, *high), counted from the data pointer, that the elements of a strided
 * layout starting at byte_offset cover (strides in elements, any sign; *low == *high ==
 * byte_offset when a dim is 0). Returns 0 when the layout fits the rule of dlop_reach_add,
 * else 1 with *failed_dim (may be NULL) the dim whose term left int64 (or the largest term,
 * when only the bytes did), or -1 when the offset is at fault. One pass over the dims. */
static inline int dlop_strided_extent(const int64_t *shape, const int64_t *strides, int32_t ndim,
                                      int64_t element_size, uint64_t byte_offset, int64_t *low,
                                      int64_t *high, int32_t *failed_dim) {
  int64_t below = 0, above = 0, reach = 0;
  int32_t d, bad = -2; /* -2: no dim failed */
  int strides_at_fault;
  if (failed_dim) *failed_dim = -1;
  *low = *high = 0;
  for (d = 0; d < ndim; d++) {
    int64_t n = shape[d];
    if (n <= 1) {
      if (n == 0) break; /* empty: nothing is reached, whatever came before */
      continue;
    }
    if (bad != -2) continue; /* keep looking for a zero dim only */
    if (dlop_reach_add(&reach, n, strides[d])) {
      bad = d;
      continue;
    }
    /* |stride * (n - 1)| < |stride * n| <= reach: these fit */
    if (strides[d] < 0) below += strides[d] * (n - 1);
    else above += strides[d] * (n - 1);
  }
  if (byte_offset > (uint64_t)INT64_MAX) return 1;
  if (d < ndim) { /* stopped at a zero dim */
    *low = *high = (int64_t)byte_offset;
    return 0;
  }
  if (bad == -2 && dlop_reach_bytes_overflow(reach, element_size, byte_offset, &strides_at_fault))
    bad = strides_at_fault ? dlop_reach_largest_dim(shape, strides, ndim) : -1;
  if (bad != -2) {
    if (failed_dim) *failed_dim = bad;
    return 1;
  }
  /* below * size >= -reach * size and (above + 1) * size <= max(reach, 1) * size: they fit */
  *low = (int64_t)byte_offset + below * element_size;
  *high = (int64_t)byte_offset + (above + 1) * element_size;
  return 0;
}

/* What dlop_tensor_size finds besides dlop_shape_size's results. */
enum { DLOP_SIZE_STRIDES_TOO_FAR = 3 }; /* the strides reach past int64 (dlop_strided_extent) */

/* dlop_shape_size and dlop_strided_extent's check of a tensor in one pass over its dims, for
 * checks made on every run (dlop_check_tensors): DLOP_SIZE_FITS with *numel (-1 when a dim is
 * negative), DLOP_SIZE_TOO_MANY_ELEMENTS or _BYTES, or DLOP_SIZE_STRIDES_TOO_FAR with
 * *failed_dim as dlop_strided_extent gives it (only for a non-empty tensor with strides; NULL
 * strides are C-contiguous, whose reach is its bytes). failed_dim may be NULL. */
static inline int dlop_tensor_size(const dlop_tensor *t, int64_t element_size, int64_t *numel,
                                   int32_t *failed_dim) {
  const int64_t *shape = t->shape, *strides = t->strides;
  int64_t product = 1, reach = 0, total;
  int32_t d, empty = 0, unknown = 0, bad = -2; /* bad -2: none */
  int strides_at_fault;
  if (failed_dim) *failed_dim = -1;
  for (d = 0; d < t->ndim; d++) {
    int64_t n = shape[d];
    if (n <= 1) {
      if (n == 0) empty = 1;
      else if (n < 0) unknown = 1;
      continue;
    }
    if (dlop_mul_overflow(product, n, &product)) return DLOP_SIZE_TOO_MANY_ELEMENTS;
    if (strides != NULL && bad == -2 && dlop_reach_add(&reach, n, strides[d])) bad = d;
  }
  if (element_size > 0 && dlop_mul_overflow(product, element_size, &total))
    return DLOP_SIZE_TOO_MANY_BYTES;
  if (numel) *numel = empty ? 0 : unknown ? -1 : product;
  if (empty || strides == NULL) return DLOP_SIZE_FITS;
  if (bad == -2 && dlop_reach_bytes_overflow(reach, element_size, t->byte_offset, &strides_at_fault))
    bad = strides_at_fault ? dlop_reach_largest_dim(shape, strides, t->ndim) : -1;
  if (bad == -2) return DLOP_SIZE_FITS;
  if (failed_dim) *failed_dim = bad;
  return DLOP_SIZE_STRIDES_TOO_FAR;
}

/* dlop_strided_extent's failure as a message: "<what>: shape (3, 2) with strides
 * (4611686018427387903, 1) of 4-byte elements at byte offset 0 reaches beyond the 2^63-1 bytes
 * of int64 (dimension 0)". */
static inline void dlop_set_extent_error(char *error, size_t error_size, const char *what,
                                         const int64_t *shape, const int64_t *strides,
                                         int32_t ndim, int64_t element_size,
                                         uint64_t byte_offset, int32_t failed_dim) {
  char shape_text[DLOP_MAX_NDIM * 22 + 4], strides_text[DLOP_MAX_NDIM * 22 + 4], where[48];
  const char *separator = what != NULL && what[0] != '\0' ? ": " : "";
  int32_t n = ndim > DLOP_MAX_NDIM ? DLOP_MAX_NDIM : ndim;
  where[0] = '\0';
  if (failed_dim >= 0) snprintf(where, sizeof where, " (dimension %d)", (int)failed_dim);
  dlop_set_error(error, error_size,
                 "%s%sshape %s with strides %s of %lld-byte elements at byte offset %llu "
                 "reaches beyond the " DLOP_SIZE_LIMIT_TEXT " bytes of int64%s",
                 what ? what : "", separator, dlop_format_ints(shape, n, shape_text, sizeof shape_text),
                 dlop_format_ints(strides, n, strides_text, sizeof strides_text),
                 (long long)element_size, (unsigned long long)byte_offset, where);
}

#ifdef __cplusplus
}
#endif

#endif
