/* internal.h — declarations shared by the parts of libdlop (runtime, registry, graph).
 * Nothing here is part of the public ABI; names carry the dlop__ prefix. */
#ifndef DLOP_INTERNAL_H
#define DLOP_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "dlop.h"

/* ---- errors (errors.c) ------------------------------------------------------------------ */

/* Record a formatted message as this thread's last error and return status. */
int dlop__error(int status, const char *format, ...) __attribute__((format(printf, 2, 3)));
int dlop__verror(int status, const char *format, va_list args);
void dlop__clear_error(void);
/* Bounded, always NUL-terminated formatting into a caller's buffer (for plugin-style errors). */
void dlop__format(char *buffer, size_t size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
/* Print a warning on stderr (and to the log), prefixed "dlop: warning: ". */
void dlop__warn(const char *format, ...) __attribute__((format(printf, 1, 2)));

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

#endif
