/* dlop/kit/broadcast.h — NumPy broadcasting of static shapes and types, for make_node and
 * infer_shape rules, and the run's check of an output's broadcast shape. Part of
 * kernel_util.h; static inline. */
#ifndef DLOP_BROADCAST_H
#define DLOP_BROADCAST_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "checked_size.h"
#include "kernel_error.h"
#include "../op.h"
#include "../status.h"
#include "../tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "broadcasting (4294967296, 1) with (1, 4294967296) gives shape (4294967296, 4294967296),
 * which has more than 2^63-1 elements" (or "... of float64, which has more than 2^63-1
 * bytes"): the message of a broadcast whose result breaks checked_size.h's rule. */
static inline int dlop_broadcast_size_error(const int64_t *a, int32_t a_ndim, const int64_t *b,
                                            int32_t b_ndim, const int64_t *out, int32_t ndim,
                                            int result, int32_t dtype, char *error,
                                            size_t error_size) {
  char sa[DLOP_MAX_NDIM * 22 + 4], sb[DLOP_MAX_NDIM * 22 + 4], so[DLOP_MAX_NDIM * 22 + 4];
  dlop_format_shape(a, a_ndim, sa, sizeof sa);
  dlop_format_shape(b, b_ndim, sb, sizeof sb);
  dlop_format_shape(out, ndim, so, sizeof so);
  if (result == DLOP_SIZE_TOO_MANY_ELEMENTS)
    dlop_set_error(error, error_size, "broadcasting %s with %s gives shape %s, which has more "
                   "than " DLOP_SIZE_LIMIT_TEXT " elements", sa, sb, so);
  else
    dlop_set_error(error, error_size, "broadcasting %s with %s gives shape %s of %s, which has "
                   "more than " DLOP_SIZE_LIMIT_TEXT " bytes", sa, sb, so,
                   dlop_dtype_name((dlop_dtype)dtype));
  return DLOP_SHAPE_ERROR;
}

/* NumPy broadcasting of two static shapes into out (out_ndim = max of both). A dimension of 1
 * takes the other's size; an unknown one against a known n > 1 must be n (or the program fails
 * at run time), against 1 or unknown it stays unknown. A mismatch is DLOP_SHAPE_ERROR with
 * "cannot broadcast (3, 4) with (5,)"; so is a result with more than 2^63-1 elements
 * (checked_size.h; unknown dims count as 1), "broadcasting (4294967296, 1) with
 * (1, 4294967296) gives shape (4294967296, 4294967296), which has more than 2^63-1 elements".
 * out may alias neither input. */
static inline int dlop_broadcast_dims(const int64_t *a, int32_t a_ndim, const int64_t *b,
                                      int32_t b_ndim, int64_t *out, int32_t *out_ndim,
                                      char *error, size_t error_size);

static inline int dlop_broadcast_shapes(const int64_t *a, int32_t a_ndim, const int64_t *b,
                                        int32_t b_ndim, int64_t *out, int32_t *out_ndim,
                                        char *error, size_t error_size) {
  int32_t ndim = 0;
  int result, status = dlop_broadcast_dims(a, a_ndim, b, b_ndim, out, &ndim, error, error_size);
  if (status != DLOP_OK) return status;
  result = dlop_shape_size(out, ndim, 0, NULL, NULL);
  if (result != DLOP_SIZE_FITS)
    return dlop_broadcast_size_error(a, a_ndim, b, b_ndim, out, ndim, result, -1, error,
                                     error_size);
  *out_ndim = ndim;
  return DLOP_OK;
}

/* dlop_broadcast_shapes without the size check: for comparing with a shape that is checked
 * anyway (a run's output, which dlop_check_tensors checks), where the broadcast itself is
 * never multiplied out. */
static inline int dlop_broadcast_dims(const int64_t *a, int32_t a_ndim, const int64_t *b,
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

/* Broadcast two static types' shapes into out (dtype taken from a); a result whose bytes
 * leave int64 is DLOP_SHAPE_ERROR too. */
static inline int dlop_broadcast_types(const dlop_type *a, const dlop_type *b, dlop_type *out,
                                       char *error, size_t error_size) {
  dlop_type result;
  int status, size;
  memset(&result, 0, sizeof result);
  result.dtype = a->dtype;
  status = dlop_broadcast_shapes(a->shape, a->ndim, b->shape, b->ndim, result.shape,
                                 &result.ndim, error, error_size);
  if (status != DLOP_OK) return status;
  size = dlop_shape_size(result.shape, result.ndim,
                         (int64_t)dlop_dtype_size((dlop_dtype)result.dtype), NULL, NULL);
  if (size != DLOP_SIZE_FITS)
    return dlop_broadcast_size_error(a->shape, a->ndim, b->shape, b->ndim, result.shape,
                                     result.ndim, size, result.dtype, error, error_size);
  *out = result;
  return DLOP_OK;
}

/* A run's check that output has exactly the NumPy broadcast shape of the inputs' shapes (one
 * input: its shape). DLOP_SHAPE_ERROR with "add: output shape (4,) differs from the inputs'
 * broadcast shape (3,)", or dlop_broadcast_dims' error when the inputs do not broadcast. The
 * output's size is not checked here: dlop_check_tensors checks it (and every input's). */
static inline int dlop_check_broadcast_output(const char *op_name, const dlop_tensor *inputs,
                                              int32_t num_inputs, const dlop_tensor *output,
                                              char *error, size_t error_size) {
  /* the broadcast so far, alternating: dlop_broadcast_shapes' out may alias neither input */
  int64_t folded[2][DLOP_MAX_NDIM];
  const int64_t *shape = inputs[0].shape;
  int32_t ndim = inputs[0].ndim, i;
  for (i = 1; i < num_inputs; i++) {
    /* only compared with the output below: its size is dlop_check_tensors' to check */
    int status = dlop_broadcast_dims(shape, ndim, inputs[i].shape, inputs[i].ndim, folded[i & 1],
                                     &ndim, error, error_size);
    if (status != DLOP_OK) return status;
    shape = folded[i & 1];
  }
  if (ndim != output->ndim ||
      (ndim > 0 && memcmp(shape, output->shape, sizeof(int64_t) * (size_t)ndim) != 0)) {
    char got[DLOP_MAX_NDIM * 22 + 4], want[DLOP_MAX_NDIM * 22 + 4];
    dlop_set_error(error, error_size,
                   "%s: output shape %s differs from the inputs' broadcast shape %s", op_name,
                   dlop_format_shape(output->shape, output->ndim, got, sizeof got),
                   dlop_format_shape(shape, ndim, want, sizeof want));
    return DLOP_SHAPE_ERROR;
  }
  return DLOP_OK;
}

#ifdef __cplusplus
}
#endif

#endif
