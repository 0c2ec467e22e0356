/* dlop/tensor_check.h — a thunk's run checks the tensors it is given against the types it was
 * made for, with messages naming the op, the operand and the values. Part of kernel_util.h. */
#ifndef DLOP_TENSOR_CHECK_H
#define DLOP_TENSOR_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "kernel_error.h"
#include "op.h"
#include "status.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif

#endif
