/* dlop/runtime.h — the host side of libdlop: versions, errors, devices, streams, memory and
 * arrays (reference-counted tensors that own or borrow their memory). */
#ifndef DLOP_RUNTIME_H
#define DLOP_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "export.h"
#include "status.h"
#include "tensor.h"
#include "version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- versions and errors ---------------------------------------------------------------- */

/* (major << 16) | (minor << 8) | patch of the libdlop that is running. */
DLOP_API unsigned dlop_version(void);
DLOP_API const char *dlop_version_string(void);
/* DLOP_ABI_VERSION of the libdlop that is running. */
DLOP_API unsigned dlop_abi_version(void);

/* "DLOP_TYPE_ERROR" and "type error: ..." for a status; "DLOP_UNKNOWN_STATUS" otherwise. */
DLOP_API const char *dlop_status_name(int status);
DLOP_API const char *dlop_strerror(int status);
/* The detailed message of the last failing libdlop call on this thread ("" if none). Every
 * function returning a dlop_status sets it on failure. */
DLOP_API const char *dlop_last_error(void);

/* ---- devices ---------------------------------------------------------------------------- */

/* Parse "cpu", "cuda", "cuda:N" (also "gpu"); DLOP_INVALID_ARGUMENT with a message otherwise. */
DLOP_API int dlop_device_parse(const char *text, dlop_device *device);
/* "cpu" or "cuda:N" into buffer. */
DLOP_API const char *dlop_device_format(dlop_device device, char *buffer, size_t size);
/* DLOP_OK when the device can be used now; otherwise DLOP_NO_DEVICE with a message that says
 * what is missing (no libcuda.so.1, no GPU, an ordinal out of range). Loads CUDA on first use. */
DLOP_API int dlop_device_check(dlop_device device);
/* Number of CUDA devices; 0 (and DLOP_OK) when there is no driver or no GPU. */
DLOP_API int dlop_cuda_device_count(int *count);
/* Device name ("NVIDIA H200", or the CPU model) into buffer. */
DLOP_API int dlop_device_description(dlop_device device, char *buffer, size_t size);

/* ---- streams ---------------------------------------------------------------------------- */

typedef struct dlop_stream dlop_stream;
/* A non-blocking CUDA stream on the device (for the CPU, a stream that does nothing). */
DLOP_API int dlop_stream_create(dlop_device device, dlop_stream **stream);
/* A dlop stream over a CUstream that someone else made and owns (PyTorch's current stream,
 * the stream XLA hands an FFI handler), so dlop work and that framework's work are ordered on
 * one queue. cuda_stream must belong to device's primary context (DLOP_INVALID_ARGUMENT
 * otherwise); the DLPack values 1 (CUDA's legacy default stream) and 2 (the per-thread default
 * stream) are accepted as those streams. dlop_stream_destroy never destroys the CUstream. The
 * owner keeps the CUstream alive while the dlop stream exists and while work that dlop enqueued
 * on it, or arrays that record it, are pending; dlop's memory pool keeps no reference to a
 * wrapped stream (a block freed after work on it records an event at once). Only for CUDA
 * devices (DLOP_INVALID_ARGUMENT for the CPU or a NULL handle). */
DLOP_API int dlop_stream_wrap(dlop_device device, void *cuda_stream, dlop_stream **stream);
/* 1 for a stream made by dlop_stream_wrap, 0 otherwise (and for NULL). */
DLOP_API int dlop_stream_is_wrapped(const dlop_stream *stream);
/* Drops the caller's reference. Arrays with work pending on the stream hold references of their
 * own, so the stream (and the CUstream) lives until they are released or synchronized. */
DLOP_API void dlop_stream_destroy(dlop_stream *stream);
DLOP_API int dlop_stream_synchronize(dlop_stream *stream);
/* The CUstream (NULL on the CPU). */
DLOP_API void *dlop_stream_handle(const dlop_stream *stream);
DLOP_API dlop_device dlop_stream_device(const dlop_stream *stream);

/* ---- memory ----------------------------------------------------------------------------- */

/* Allocate from the device's caching pool; stream-ordered on CUDA (stream may be NULL). */
DLOP_API int dlop_memory_alloc(dlop_device device, size_t bytes, void *stream, void **pointer);
DLOP_API int dlop_memory_free(dlop_device device, void *pointer, void *stream);

typedef struct dlop_memory_stats {
  uint32_t struct_size;
  uint32_t reserved;
  uint64_t bytes_in_use;       /* handed out and not yet freed */
  uint64_t bytes_cached;       /* freed to the pool, kept for reuse */
  uint64_t peak_bytes_in_use;
  uint64_t driver_allocations; /* calls to cuMemAlloc / the system allocator so far */
  uint64_t driver_frees;
} dlop_memory_stats;

DLOP_API int dlop_memory_stats_get(dlop_device device, dlop_memory_stats *stats);
/* Give cached blocks back to the driver / system. */
DLOP_API int dlop_memory_release_cached(dlop_device device);

/* ---- run-time compilation (docs/runtime.md, "Run-time compilation") ---------------------
 * What libdlop's run-time compilers (NVRTC for CUDA, the host's C compiler) and their cache
 * did in this process so far. */
typedef struct dlop_jit_stats {
  uint32_t struct_size; /* set by the caller to sizeof(dlop_jit_stats) */
  uint32_t reserved;
  uint64_t compiles;         /* compiler runs, NVRTC and C, the failed ones included */
  uint64_t compile_errors;   /* of which failed (the source did not compile) */
  uint64_t memory_hits;      /* requests served from this process's memory */
  uint64_t disk_hits;        /* requests served from the disk cache */
  uint64_t corrupt_entries;  /* disk entries found truncated or altered, compiled again, replaced */
  double compile_seconds;    /* wall time spent in compiler runs */
  double disk_hit_seconds;   /* wall time spent reading, verifying and loading disk hits */
} dlop_jit_stats;

/* Fill stats (the fields its struct_size covers). DLOP_INVALID_ARGUMENT for NULL or a
 * struct_size below 8. */
DLOP_API int dlop_jit_stats_get(dlop_jit_stats *stats);
/* The directory of the run-time compilation cache on disk ("<DLOP_CACHE_DIR>/jit") into buffer,
 * or "" when there is none (DLOP_CACHE_DIR empty, no home, a directory that cannot be made or
 * that others may write: those are warned about). DLOP_INVALID_ARGUMENT when it does not fit. */
DLOP_API int dlop_jit_cache_directory(char *buffer, size_t size);

/* ---- arrays ----------------------------------------------------------------------------- */

typedef struct dlop_array dlop_array;
typedef void (*dlop_array_deleter)(void *context);

/* A new C-contiguous array from the device's pool; contents undefined. */
DLOP_API int dlop_array_empty(dlop_device device, dlop_dtype dtype, int32_t ndim,
                              const int64_t *shape, dlop_array **array);
/* A new contiguous array on device holding a copy of contiguous host data. */
DLOP_API int dlop_array_from_host(dlop_device device, dlop_dtype dtype, int32_t ndim,
                                  const int64_t *shape, const void *data, dlop_array **array);
/* Borrow memory described by tensor without copying (any strides). deleter(context) runs when
 * the last reference goes; it may be NULL. Shape and strides are copied. */
DLOP_API int dlop_array_wrap(const dlop_tensor *tensor, dlop_array_deleter deleter, void *context,
                             dlop_array **array);
/* Copy into contiguous host memory of exactly bytes bytes (waits for the array's stream). */
DLOP_API int dlop_array_to_host(const dlop_array *array, void *destination, size_t bytes);
/* A new contiguous copy of array on device (any strides in, CPU or CUDA either side). */
DLOP_API int dlop_array_copy_to(const dlop_array *array, dlop_device device, dlop_array **copy);
/* A view with other shape/strides (elements) and byte offset over the same memory. */
DLOP_API int dlop_array_view(dlop_array *base, int32_t ndim, const int64_t *shape,
                             const int64_t *strides, uint64_t byte_offset, dlop_array **view);

DLOP_API void dlop_array_retain(dlop_array *array);
DLOP_API void dlop_array_release(dlop_array *array);

DLOP_API const dlop_tensor *dlop_array_tensor(const dlop_array *array);
DLOP_API dlop_dtype dlop_array_dtype(const dlop_array *array);
DLOP_API dlop_device dlop_array_device(const dlop_array *array);
DLOP_API int64_t dlop_array_numel(const dlop_array *array);
/* The stream the last write to this array was enqueued on (NULL: nothing pending). Borrowed:
 * valid while no other thread writes or synchronizes the array. */
DLOP_API dlop_stream *dlop_array_stream(const dlop_array *array);
/* Wait until every pending write to the array has finished. Reads enqueued on other streams
 * stay recorded: releasing the array never lets another stream reuse its memory before they
 * are done. */
DLOP_API int dlop_array_synchronize(const dlop_array *array);

/* ---- interop: ordering work with other CUDA libraries (interop.c) ------------------------ */
/* For DLPack's stream argument and __cuda_array_interface__'s "stream": raw CUstream handles
 * from PyTorch, CuPy, JAX or Numba. 1 is CUDA's legacy default stream and 2 the per-thread
 * default stream, as in DLPack. Nothing here blocks the host but dlop_stream_marker_wait. */

/* Make the foreign CUstream consumer_stream wait, on the GPU, for every pending write to array
 * (an event recorded on the array's stream). DLOP_OK and nothing done when no write is pending
 * or the array lives on the CPU; DLOP_INVALID_ARGUMENT for a NULL consumer stream. */
DLOP_API int dlop_array_wait_on_stream(const dlop_array *array, void *consumer_stream);
/* Record that work writing array was enqueued on stream outside dlop (typically a caller's
 * CUstream wrapped by dlop_stream_wrap, filling borrowed memory): every later reader waits for
 * it as for dlop's own writes (dlop_array_to_host, DLPack and __cuda_array_interface__ exports,
 * dlop work taking the array). stream must be on the array's device (DLOP_INVALID_ARGUMENT
 * otherwise); the array keeps a reference to it. Nothing is recorded for a CPU array. */
DLOP_API int dlop_array_record_write(dlop_array *array, dlop_stream *stream);
/* Make stream (a dlop stream) wait, on the GPU, for the work enqueued so far on the foreign
 * CUstream producer_stream. DLOP_OK and nothing done for a CPU stream. */
DLOP_API int dlop_stream_wait_foreign(dlop_stream *stream, void *producer_stream);
/* Make consumer_stream wait, on the GPU, for the work enqueued so far on producer_stream, both
 * raw CUstreams of device_id's primary context (or 1 / 2, the default streams). DLOP_OK and
 * nothing done when they are the same stream. */
DLOP_API int dlop_cuda_stream_wait_stream(int32_t device_id, void *consumer_stream,
                                          void *producer_stream);
/* The CUDA ordinal of the device that owns the device (or managed) memory at pointer;
 * DLOP_INVALID_ARGUMENT naming the pointer when the driver does not know it. */
DLOP_API int dlop_cuda_pointer_device(const void *pointer, int32_t *device_id);

/* A stream marker: a point in a dlop stream's work (on CUDA an event recorded after everything
 * enqueued so far). It lets a caller that lent memory to dlop (a DLPack or
 * __cuda_array_interface__ wrap) give it back to its producer once the work that read it has
 * finished, polling instead of blocking the host. On a CPU stream (work is synchronous) a
 * marker is complete at once. Markers may be used from any thread, one thread at a time each. */
typedef struct dlop_stream_marker dlop_stream_marker;
/* Record a new marker after the work enqueued so far on stream (one event record; events are
 * reused from destroyed markers of the same device). */
DLOP_API int dlop_stream_marker_record(dlop_stream *stream, dlop_stream_marker **marker);
/* *done = 1 when all work before the marker has finished, 0 while some is pending; never
 * blocks. A failure (a CUDA error from earlier work, say) sets *done = 0. */
DLOP_API int dlop_stream_marker_query(const dlop_stream_marker *marker, int *done);
/* Block the calling thread until the work before the marker has finished. */
DLOP_API int dlop_stream_marker_wait(const dlop_stream_marker *marker);
/* The device of the stream the marker was recorded on (CPU for NULL). */
DLOP_API dlop_device dlop_stream_marker_device(const dlop_stream_marker *marker);
/* Free a marker (NULL is fine). Pending work is neither waited for nor cancelled. */
DLOP_API void dlop_stream_marker_destroy(dlop_stream_marker *marker);

#ifdef __cplusplus
}
#endif

#endif
