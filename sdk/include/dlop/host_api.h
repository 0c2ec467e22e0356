/* dlop/host_api.h — the table of services a host hands each plugin at init.
 * Plugins call the host only through it, so they never link libdlop, libcuda or libcublas. */
#ifndef DLOP_HOST_API_H
#define DLOP_HOST_API_H

#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dlop_log_level {
  DLOP_LOG_DEBUG = 0,
  DLOP_LOG_INFO = 1,
  DLOP_LOG_WARNING = 2,
  DLOP_LOG_ERROR = 3
} dlop_log_level;

/* The body of a parallel loop: handles [begin, end). */
typedef void (*dlop_parallel_body)(void *context, int64_t begin, int64_t end);

/* Append-only. A plugin compiled against a newer minor checks that a slot it wants is
 * covered by struct_size (DLOP_HOST_HAS) and not NULL before calling it. Every function
 * returns a dlop_status and, where it takes error/error_size, writes a message on failure. */
typedef struct dlop_host_api {
  uint32_t struct_size;
  uint32_t abi_version; /* DLOP_ABI_VERSION of the host */

  /* ---- since ABI 1.0: logging ---- */
  void (*log)(int32_t level, const char *source, const char *message);

  /* ---- since ABI 1.0: memory on any device (host pool on the CPU, caching pool on CUDA) ----
   * Memory is stream-ordered on CUDA: free on the stream that last used it. */
  int (*memory_alloc)(dlop_device device, size_t bytes, void *stream, void **pointer,
                      char *error, size_t error_size);
  int (*memory_free)(dlop_device device, void *pointer, void *stream);

  /* ---- since ABI 1.0: CPU parallel-for over [0, count) in chunks of at least grain ---- */
  int (*parallel_for)(int64_t count, int64_t grain, dlop_parallel_body body, void *context);
  int32_t (*cpu_threads)(void);

  /* ---- since ABI 1.0: CUDA (driver API, primary context of the device) ----
   * A module is loaded once per (device, image) and reference counted. image is a fatbin,
   * cubin or PTX in memory. Functions and streams are CUfunction and CUstream values. */
  int (*cuda_module_load)(int32_t device_id, const void *image, void **module, char *error,
                          size_t error_size);
  int (*cuda_module_unload)(void *module);
  int (*cuda_module_function)(void *module, const char *name, void **function, char *error,
                              size_t error_size);
  int (*cuda_launch)(void *function, const uint32_t grid[3], const uint32_t block[3],
                     uint32_t shared_bytes, void *stream, void **kernel_args, char *error,
                     size_t error_size);
  /* attribute is a CUdevice_attribute value (for example 16: multiprocessor count). */
  int (*cuda_device_attribute)(int32_t device_id, int32_t attribute, int32_t *value);
  int (*cuda_memcpy_async)(void *destination, const void *source, size_t bytes, void *stream);
  int (*cuda_memset_async)(void *destination, uint8_t value, size_t bytes, void *stream);
  int (*cuda_stream_synchronize)(void *stream);

  /* ---- since ABI 1.0: cuBLAS, loaded by the host at first use ----
   * cublas_handle returns a cublasHandle_t for the device owned by the calling thread (made at
   * the thread's first request, destroyed when the thread exits), with its stream set to
   * stream. Use it only on the calling thread; other threads get their own handles, so the
   * stream set here is not changed under you by another thread's request. It leaves the
   * device's primary context current, as cuBLAS calls on the handle require (thunks run by
   * the host already have it current).
   * cublas_symbol returns a cuBLAS function by name (e.g. "cublasSgemm_v2"), or NULL. */
  int (*cublas_handle)(int32_t device_id, void *stream, void **handle, char *error,
                       size_t error_size);
  void *(*cublas_symbol)(const char *name);
  /* ---- since ABI 1.2: run-time compilation (NVRTC, loaded by the host at first use) ----
   * Compiles CUDA C source for the device's architecture (a cubin; PTX where the GPU is newer
   * than the compiler) and loads it as cuda_module_load does: release it with
   * cuda_module_unload. Results are cached by content (source, options, architecture,
   * compiler version) in memory and on disk, so a plugin may call it from make_thunk on every
   * thunk. options are NVRTC options ("-DN=4"); the host adds the architecture. A compile
   * error writes the compiler's log, with the source's own line numbers, into error. */
  int (*cuda_compile)(int32_t device_id, const char *source, const char *const *options,
                      int32_t num_options, void **module, char *error, size_t error_size);
} dlop_host_api;

/* True when the host's table is long enough to hold `field` and the slot is filled. */
#define DLOP_HOST_HAS(host, field)                                                        \
  ((host) != NULL &&                                                                      \
   (host)->struct_size >= offsetof(dlop_host_api, field) + sizeof((host)->field) &&       \
   (host)->field != NULL)

#ifdef __cplusplus
}
#endif

#endif
