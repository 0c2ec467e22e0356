/* internal.h — declarations shared by the parts of libdlop (runtime, registry, graph).
 * Nothing here is part of the public ABI; names carry the dlop__ prefix. */
#ifndef DLOP_INTERNAL_H
#define DLOP_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "dlop.h"
#include "dlop/kit/checked_size.h"

/* ---- errors (errors.c) ------------------------------------------------------------------ */

/* Record a formatted message as this thread's last error and return status. */
int dlop__error(int status, const char *format, ...) __attribute__((format(printf, 2, 3)));
int dlop__verror(int status, const char *format, va_list args);
void dlop__clear_error(void);
/* Bounded, always NUL-terminated formatting into a caller's buffer (for plugin-style errors). */
void dlop__format(char *buffer, size_t size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
/* "(2, 3)" (a 1-tuple "(5,)") for count values into buffer, always NUL-terminated, for the
 * shapes and strides that messages and listings name; returns buffer. */
const char *dlop__format_ints(const int64_t *values, int32_t count, char *buffer, size_t size);
/* Print a warning on stderr (and to the log), prefixed "dlop: warning: ". */
void dlop__warn(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* ---- sizes (checked_size.c): dlop/kit/checked_size.h with dlop's last error ------------- */

/* DLOP_SHAPE_ERROR with dlop_set_size_error's message for a result of dlop_shape_size. */
int dlop__size_error(const char *what, int result, const int64_t *shape, int32_t ndim,
                     int32_t dtype);
/* DLOP_INVALID_ARGUMENT with dlop_set_extent_error's message. */
int dlop__extent_error(const char *what, const int64_t *shape, const int64_t *strides,
                       int32_t ndim, int64_t element_size, uint64_t byte_offset,
                       int32_t failed_dim);

/* The element count (into *numel, may be NULL) of a shape of dtype when it fits NumPy's rule
 * (the nonzero dims times the element size at most 2^63-1), else DLOP_SHAPE_ERROR naming the
 * shape after what. Inline: every array made and every output type checked comes here. */
static inline int dlop__check_shape_size(const char *what, const int64_t *shape, int32_t ndim,
                                         int32_t dtype, int64_t *numel) {
  int result = dlop_shape_size(shape, ndim, (int64_t)dlop_dtype_size((dlop_dtype)dtype), numel,
                               NULL);
  return result == DLOP_SIZE_FITS ? DLOP_OK : dlop__size_error(what, result, shape, ndim, dtype);
}

/* The bytes [*low, *high) from the data pointer that a strided layout covers (the kit's
 * dlop_strided_extent), or DLOP_INVALID_ARGUMENT naming the layout after what. */
static inline int dlop__check_extent(const char *what, const int64_t *shape,
                                     const int64_t *strides, int32_t ndim, int64_t element_size,
                                     uint64_t byte_offset, int64_t *low, int64_t *high) {
  int32_t failed_dim;
  if (dlop_strided_extent(shape, strides, ndim, element_size, byte_offset, low, high,
                          &failed_dim) == 0)
    return DLOP_OK;
  return dlop__extent_error(what, shape, strides, ndim, element_size, byte_offset, failed_dim);
}

/* ---- CUDA (cuda_driver.c) --------------------------------------------------------------- */

/* Load libcuda.so.1 and initialize the driver once; DLOP_NO_DEVICE with a message otherwise. */
int dlop__cuda_ensure(void);
/* Make device_id's primary context current on this thread (retained once per device). */
int dlop__cuda_set_device(int32_t device_id);

/* ---- streams (stream.c) ---------------------------------------------------------------- */

/* Take a reference; dlop_stream_destroy drops one and destroys the stream at the last. */
void dlop__stream_retain(dlop_stream *stream);
/* A process-unique, never reused id (1, 2, ...; 0 for NULL): the pool's stream identity,
 * since a destroyed stream's CUstream value may come back for a new stream. */
uint64_t dlop__stream_id(const dlop_stream *stream);
/* The id of the live dlop stream whose CUstream is handle, or 0 (unknown). */
uint64_t dlop__stream_id_of_handle(void *handle);

/* ---- memory pool (memory_pool.c) ------------------------------------------------------- */

/* Streams whose work on a freed block the pool waits for (an event each); more are waited
 * for at the free. */
#define DLOP__MEMORY_MAX_USERS 4
/* Allocate for work on a dlop stream (NULL: the default stream): a block freed with this
 * stream as its only user is reused at once. */
int dlop__memory_alloc_on(dlop_device device, size_t bytes, dlop_stream *stream, void **pointer);
/* Free a block that work on each of users[0..count) (NULLs skipped) may still use: no other
 * stream gets it before all that work has finished. */
int dlop__memory_free_after(dlop_device device, void *pointer, dlop_stream *const *users,
                            int count);

/* ---- arrays and copies (array.c, copy.c) ------------------------------------------------ */

/* A contiguous array from the pool, allocated in order on stream (may be NULL). */
int dlop__array_empty_on_stream(dlop_device device, dlop_dtype dtype, int32_t ndim,
                                const int64_t *shape, dlop_stream *stream, dlop_array **array);
/* Record that work writing the array was enqueued on stream (NULL: nothing pending). */
void dlop__array_set_stream(dlop_array *array, dlop_stream *stream);
/* Record that work reading the array was enqueued on stream, so that its memory is not handed
 * to another stream before that work is done (cheap when stream is already recorded). */
void dlop__array_add_reader(dlop_array *array, dlop_stream *stream);
/* True when array owns its pool memory (it is not a view nor borrowed memory) and the caller
 * holds its only reference, so no view or other holder reads that memory: the test the
 * function runner makes before writing an output over an input (inplace_map). */
int dlop__array_owns_memory_alone(const dlop_array *array);
/* Copy src into dst elementwise: same dtype and shape, any strides, each on the CPU or on
 * CUDA, enqueued on stream when a GPU is involved. */
int dlop__tensor_copy(const dlop_tensor *source, const dlop_tensor *destination, void *stream);

/* ---- the host API table (host_api.c) ---------------------------------------------------- */

const dlop_host_api *dlop__host_api(void);
/* The device a module loaded through the table's cuda_module_load lives on; DLOP_INVALID_ARGUMENT
 * when module is not one. */
int dlop__cuda_module_device(void *module, int32_t *device_id);

#endif
