/* host_services.h — the CPU thread pool (parallel_for.c) and cuBLAS loading (cublas.c) behind
 * the host API table. Internal to libdlop; plugins reach them through dlop_host_api. */
#ifndef DLOP_HOST_SERVICES_H
#define DLOP_HOST_SERVICES_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* Run body over [0, count) in chunks of at least grain items on the persistent thread pool.
 * Runs inline when the range is small, the pool has one thread, or the pool is busy (another
 * caller, or a call from inside a body), so it never deadlocks. */
int dlop__parallel_for(int64_t count, int64_t grain, dlop_parallel_body body, void *context);
/* Threads parallel_for may use: DLOP_NUM_THREADS, or the number of online CPUs. */
int32_t dlop__cpu_threads(void);

/* The device's cublasHandle_t (one per device, created on its primary context) with its stream
 * set to stream. On failure a status and a message in error (e.g. cuBLAS not installed). */
int dlop__cublas_handle(int32_t device_id, void *stream, void **handle, char *error,
                        size_t error_size);
/* A cuBLAS function by name, or NULL (also when cuBLAS cannot be loaded). */
void *dlop__cublas_symbol(const char *name);

#endif
