/* dlop/tensor.h — devices, the tensor descriptor (DLPack's DLTensor layout) and static types.
 * These layouts are frozen (tests pin them with static_assert); they carry no struct_size
 * because they travel in arrays and must stay byte-compatible with DLPack. */
#ifndef DLOP_TENSOR_H
#define DLOP_TENSOR_H

#include <stdint.h>

#include "dtype.h"

/* Device kinds use DLPack's DLDeviceType codes so descriptors convert without tables. */
typedef enum dlop_device_type {
  DLOP_DEVICE_CPU = 1,
  DLOP_DEVICE_CUDA = 2
} dlop_device_type;

/* Same layout as DLPack's DLDevice. */
typedef struct dlop_device {
  int32_t type; /* dlop_device_type */
  int32_t id;   /* CUDA ordinal; 0 for the CPU */
} dlop_device;

/* Same layout as DLPack's DLTensor. Strides are in elements, as in DLPack; NULL strides mean
 * C-contiguous. The element at index (i0, i1, ...) lives at
 * (char *)data + byte_offset + (i0*strides[0] + i1*strides[1] + ...) * element_size. */
typedef struct dlop_tensor {
  void *data;
  dlop_device device;
  int32_t ndim;
  dlop_dl_dtype dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byte_offset;
} dlop_tensor;

/* The most dimensions a dlop type or tensor may have (NumPy allows 64; 16 covers real graphs). */
#define DLOP_MAX_NDIM 16
/* A dimension not known while the graph is built. */
#define DLOP_DIM_UNKNOWN (-1)

/* A static type: what make_node and infer_shape see. shape[i] is DLOP_DIM_UNKNOWN where the
 * size is not known yet; at run time every dimension is known. */
typedef struct dlop_type {
  int32_t dtype; /* dlop_dtype */
  int32_t ndim;
  int64_t shape[DLOP_MAX_NDIM];
} dlop_type;

/* The dlop dtype of a tensor, or DLOP_DTYPE_INVALID. A switch: this runs on every call. */
static inline dlop_dtype dlop_tensor_dtype(const dlop_tensor *t) {
  if (t->dtype.lanes != 1) return DLOP_DTYPE_INVALID;
  switch (t->dtype.code) {
    case DLOP_DL_BOOL: return t->dtype.bits == 8 ? DLOP_BOOL : DLOP_DTYPE_INVALID;
    case DLOP_DL_INT:
      switch (t->dtype.bits) {
        case 8: return DLOP_INT8;
        case 16: return DLOP_INT16;
        case 32: return DLOP_INT32;
        case 64: return DLOP_INT64;
        default: return DLOP_DTYPE_INVALID;
      }
    case DLOP_DL_UINT: return t->dtype.bits == 8 ? DLOP_UINT8 : DLOP_DTYPE_INVALID;
    case DLOP_DL_FLOAT:
      switch (t->dtype.bits) {
        case 16: return DLOP_FLOAT16;
        case 32: return DLOP_FLOAT32;
        case 64: return DLOP_FLOAT64;
        default: return DLOP_DTYPE_INVALID;
      }
    case DLOP_DL_BFLOAT: return t->dtype.bits == 16 ? DLOP_BFLOAT16 : DLOP_DTYPE_INVALID;
    default: return DLOP_DTYPE_INVALID;
  }
}

/* Number of elements (1 for a 0-d tensor, 0 if any dimension is 0). */
static inline int64_t dlop_tensor_numel(const dlop_tensor *t) {
  /* Unsigned: an empty tensor's other dimensions may multiply past int64 before the zero is
   * reached, which must not be signed overflow; the product with the zero is still 0. */
  uint64_t n = 1;
  int32_t i;
  for (i = 0; i < t->ndim; i++) n *= (uint64_t)t->shape[i];
  return (int64_t)n;
}

/* True when the tensor is C-contiguous (size-1 dimensions may have any stride). */
static inline int dlop_tensor_is_contiguous(const dlop_tensor *t) {
  uint64_t expected = 1; /* unsigned for the same reason as in dlop_tensor_numel */
  int32_t i;
  if (t->strides == 0) return 1;
  for (i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] == 0) return 1;
    if (t->shape[i] != 1 && (uint64_t)t->strides[i] != expected) return 0;
    expected *= (uint64_t)t->shape[i];
  }
  return 1;
}

/* Address of the first element (data + byte_offset). */
static inline void *dlop_tensor_base(const dlop_tensor *t) {
  return (char *)t->data + t->byte_offset;
}

#endif
