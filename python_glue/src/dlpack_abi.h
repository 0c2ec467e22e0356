/* dlpack_abi.h — the DLPack structs dlop exchanges with other libraries (DLPack 1.x layout,
 * versioned and legacy managed tensors); the DLTensor inside has dlop_tensor's layout. */
#ifndef DLOP_PY_DLPACK_ABI_H
#define DLOP_PY_DLPACK_ABI_H

#include <stdint.h>

#include <dlop.h>

#define DLOP_DLPACK_MAJOR 1
#define DLOP_DLPACK_MINOR 0
#define DLOP_DLPACK_FLAG_READ_ONLY 1ull
#define DLOP_DLPACK_FLAG_IS_COPIED 2ull
/* DLDeviceType codes besides CPU (1) and CUDA (2) that producers may report. */
#define DLOP_DLPACK_CUDA_HOST 3
#define DLOP_DLPACK_CUDA_MANAGED 13

typedef struct dlop_dl_managed_tensor {
  dlop_tensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct dlop_dl_managed_tensor *self);
} dlop_dl_managed_tensor;

typedef struct dlop_dl_version {
  uint32_t major;
  uint32_t minor;
} dlop_dl_version;

typedef struct dlop_dl_managed_tensor_versioned {
  dlop_dl_version version;
  void *manager_ctx;
  void (*deleter)(struct dlop_dl_managed_tensor_versioned *self);
  uint64_t flags;
  dlop_tensor dl_tensor;
} dlop_dl_managed_tensor_versioned;

#endif
