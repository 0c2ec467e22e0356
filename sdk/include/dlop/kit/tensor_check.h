/* dlop/kit/tensor_check.h — a thunk's run checks the tensors it is given against the types it was
 * made for, with messages naming the op, the operand and the values. Part of kernel_util.h. */
#ifndef DLOP_TENSOR_CHECK_H
#define DLOP_TENSOR_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../dtype.h"
#include "checked_size.h"
#include "kernel_error.h"
#include "../op.h"
#include "../status.h"
#include "../tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "cpu", "cuda:1" or "device type 7:0" into a 32-byte buffer, for messages. */
static inline const char *dlop_tensor_check_device_text(dlop_device device, char buffer[32]) {
  if (device.type == DLOP_DEVICE_CPU)
    snprintf(buffer, 32, "cpu:%d", (int)device.id);
  else if (device.type == DLOP_DEVICE_CUDA)
    snprintf(buffer, 32, "cuda:%d", (int)device.id);
  else
    snprintf(buffer, 32, "device type %d:%d", (int)device.type, (int)device.id);
  return buffer;
}

/* Check count tensors against the types the thunk was made for: the device (type and id: a
 * thunk made for cuda:0 must not launch on cuda:1's pointers), dtype, rank, non-negative dims,
 * every statically known dim, the shape's size (checked_size.h: the nonzero dims times the
 * element size at most 2^63-1, DLOP_SHAPE_ERROR), the bytes the strides reach (within int64,
 * DLOP_INVALID_ARGUMENT), data present when not empty, and data + byte_offset aligned to the
 * element size (kernels load whole elements; a misaligned one would fault). After it, no
 * product of a tensor's dims, nor of a dim and its stride in bytes, can wrap in the thunk,
 * whoever the host is. role is "input" or "output". DLOP_DEVICE_MISMATCH / DLOP_TYPE_ERROR /
 * DLOP_SHAPE_ERROR / DLOP_INVALID_ARGUMENT otherwise. */
static inline int dlop_check_tensors(const char *op_name, const char *role,
                                     const dlop_tensor *tensors, int32_t count,
                                     const dlop_type *expected, dlop_device device,
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
    if (t->device.type != device.type || t->device.id != device.id) {
      char got_text[32], want_text[32];
      dlop_set_error(error, error_size,
                     "%s: %s %d is on %s, but the thunk was made for %s (make a thunk per device)",
                     op_name, role, (int)i, dlop_tensor_check_device_text(t->device, got_text),
                     dlop_tensor_check_device_text(device, want_text));
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
    {
      int64_t numel = 0;
      int32_t failed_dim;
      char what[96];
      size_t element = dlop_dtype_size(dtype);
      int size = dlop_tensor_size(t, (int64_t)element, &numel, &failed_dim);
      if (size != DLOP_SIZE_FITS) {
        snprintf(what, sizeof what, "%s: %s %d", op_name, role, (int)i);
        if (size != DLOP_SIZE_STRIDES_TOO_FAR) {
          dlop_set_size_error(error, error_size, what, size, t->shape, t->ndim, (int32_t)dtype);
          return DLOP_SHAPE_ERROR;
        }
        dlop_set_extent_error(error, error_size, what, t->shape, t->strides, t->ndim,
                              (int64_t)element, t->byte_offset, failed_dim);
        return DLOP_INVALID_ARGUMENT;
      }
      if (t->data == NULL && numel > 0) {
        dlop_set_error(error, error_size, "%s: %s %d has NULL data", op_name, role, (int)i);
        return DLOP_INVALID_ARGUMENT;
      }
      /* Empty tensors are never dereferenced (frameworks give them arbitrary pointers). */
      if (numel == 0) continue;
      uintptr_t address = (uintptr_t)t->data + (uintptr_t)t->byte_offset;
      if (element > 1 && address % element != 0) {
        dlop_set_error(error, error_size,
                       "%s: %s %d is misaligned: data %p + byte_offset %llu is %llu bytes past a "
                       "multiple of its %s element size %zu",
                       op_name, role, (int)i, t->data, (unsigned long long)t->byte_offset,
                       (unsigned long long)(address % element), dlop_dtype_name(dtype), element);
        return DLOP_INVALID_ARGUMENT;
      }
    }
  }
  return DLOP_OK;
}

#ifdef __cplusplus
}
#endif

#endif
