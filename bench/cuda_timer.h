/* cuda_timer.h — the few CUDA driver calls the GPU bench makes itself (events, a
 * device-to-device copy, a memset to poison outputs), loaded with dlopen("libcuda.so.1") so the
 * bench, like libdlop, builds and starts on machines with no driver. */
#ifndef DLOP_BENCH_CUDA_TIMER_H
#define DLOP_BENCH_CUDA_TIMER_H

#include <stddef.h>
#include <stdint.h>

/* Load the driver and make device_id's primary context (the one libdlop uses) current on this
 * thread. 0 on success; otherwise -1 with a message in error. */
int cuda_timer_init(int device_id, char *error, size_t error_size);
void cuda_timer_shutdown(void);

/* Each returns 0 on success, or -1 with "what: CUDA_ERROR_NAME (code)" in error. */
int cuda_event_pair_create(void *events[2], char *error, size_t error_size);
void cuda_event_pair_destroy(void *events[2]);
int cuda_event_record(void *event, void *stream, char *error, size_t error_size);
/* Waits for end, then milliseconds between start and end. */
int cuda_event_elapsed_ms(void *start, void *end, float *ms, char *error, size_t error_size);
int cuda_copy_device_to_device(void *destination, const void *source, size_t bytes, void *stream,
                               char *error, size_t error_size);
int cuda_memset_bytes(void *destination, uint8_t value, size_t bytes, void *stream, char *error,
                      size_t error_size);
int cuda_stream_wait(void *stream, char *error, size_t error_size);
/* Free and total device memory in bytes. */
int cuda_memory_info(size_t *free_bytes, size_t *total_bytes, char *error, size_t error_size);

#endif
