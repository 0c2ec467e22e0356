/* dlop/status.h — status codes shared by hosts and plugins.
 * One X-macro list generates the enum here and the names and messages in libdlop. */
#ifndef DLOP_STATUS_H
#define DLOP_STATUS_H

/* X(NAME, value, "message"). Values are frozen: append new codes at the end. */
#define DLOP_STATUS_MAP(X)                                                         \
  X(OK, 0, "success")                                                              \
  X(INVALID_ARGUMENT, -1, "invalid argument")                                      \
  X(TYPE_ERROR, -2, "type error: an input's dtype or rank is not what the op accepts") \
  X(SHAPE_ERROR, -3, "shape error: input shapes are incompatible")               \
  X(OUT_OF_MEMORY, -4, "out of memory")                                            \
  X(NO_DEVICE, -5, "device not available")                                        \
  X(NOT_FOUND, -6, "not found")                                                    \
  X(ABI_MISMATCH, -7, "ABI version mismatch")                                      \
  X(LOAD_ERROR, -8, "plugin could not be loaded")                                  \
  X(PLUGIN_ERROR, -9, "the plugin reported an error")                             \
  X(INVALID_PLUGIN, -10, "the plugin handed back invalid metadata")                \
  X(DUPLICATE, -11, "duplicate name")                                              \
  X(CUDA_ERROR, -12, "CUDA driver error")                                          \
  X(CUBLAS_ERROR, -13, "cuBLAS error")                                             \
  X(UNSUPPORTED, -14, "not supported")                                             \
  X(DEVICE_MISMATCH, -15, "a tensor is on the wrong device")                       \
  X(INTERNAL, -16, "internal error")

typedef enum dlop_status {
#define DLOP__STATUS_ENUM(name, value, message) DLOP_##name = value,
  DLOP_STATUS_MAP(DLOP__STATUS_ENUM)
#undef DLOP__STATUS_ENUM
  DLOP_STATUS_END_ = -17
} dlop_status;

#endif
