/* cuda_driver.h — the CUDA driver API as libdlop uses it: loaded with dlopen("libcuda.so.1") at
 * first use, with the few types and constants declared here so libdlop builds without cuda.h.
 * Every entry point is a pointer in dlop__cuda (valid once dlop__cuda_ensure() returned OK). */
#ifndef DLOP_CUDA_DRIVER_H
#define DLOP_CUDA_DRIVER_H

#include <stddef.h>
#include <stdint.h>

/* Types with the same size and meaning as in cuda.h. */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;

#define DLOP_CUDA_SUCCESS 0
#define DLOP_CUDA_ERROR_OUT_OF_MEMORY 2
#define DLOP_CUDA_ERROR_NO_DEVICE 100
#define DLOP_CUDA_ERROR_NOT_READY 600
#define DLOP_CU_STREAM_NON_BLOCKING 1u
#define DLOP_CU_EVENT_DISABLE_TIMING 2u
#define DLOP_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define DLOP_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define DLOP_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76

/* The entry points, resolved by dlsym under their versioned (_v2) names where those exist. */
typedef struct dlop__cuda_api {
  CUresult (*cuInit)(unsigned int flags);
  CUresult (*cuDriverGetVersion)(int *version);
  CUresult (*cuGetErrorName)(CUresult error, const char **name);
  CUresult (*cuGetErrorString)(CUresult error, const char **text);
  CUresult (*cuDeviceGetCount)(int *count);
  CUresult (*cuDeviceGet)(CUdevice *device, int ordinal);
  CUresult (*cuDeviceGetName)(char *name, int length, CUdevice device);
  CUresult (*cuDeviceGetAttribute)(int *value, int attribute, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *context, CUdevice device);
  CUresult (*cuCtxSetCurrent)(CUcontext context);
  CUresult (*cuCtxGetCurrent)(CUcontext *context);
  CUresult (*cuCtxSynchronize)(void);
  CUresult (*cuMemAlloc)(CUdeviceptr *pointer, size_t bytes);
  CUresult (*cuMemFree)(CUdeviceptr pointer);
  CUresult (*cuMemGetInfo)(size_t *free_bytes, size_t *total_bytes);
  CUresult (*cuMemcpyAsync)(CUdeviceptr destination, CUdeviceptr source, size_t bytes,
                            CUstream stream);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr destination, const void *source, size_t bytes,
                                CUstream stream);
  CUresult (*cuMemcpyDtoHAsync)(void *destination, CUdeviceptr source, size_t bytes,
                                CUstream stream);
  CUresult (*cuMemsetD8Async)(CUdeviceptr destination, unsigned char value, size_t count,
                              CUstream stream);
  CUresult (*cuStreamCreate)(CUstream *stream, unsigned int flags);
  CUresult (*cuStreamDestroy)(CUstream stream);
  CUresult (*cuStreamSynchronize)(CUstream stream);
  CUresult (*cuStreamGetCtx)(CUstream stream, CUcontext *context);
  CUresult (*cuEventCreate)(CUevent *event, unsigned int flags);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventQuery)(CUevent event);
  CUresult (*cuEventSynchronize)(CUevent event);
  CUresult (*cuEventDestroy)(CUevent event);
  CUresult (*cuModuleLoadData)(CUmodule *module, const void *image);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction *function, CUmodule module, const char *name);
  CUresult (*cuLaunchKernel)(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                             unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                             unsigned int block_z, unsigned int shared_bytes, CUstream stream,
                             void **kernel_params, void **extra);
} dlop__cuda_api;

extern dlop__cuda_api dlop__cuda;

/* Number of CUDA devices once dlop__cuda_ensure() succeeded (0 before). */
int dlop__cuda_device_count(void);
/* DLOP_OK when device_id names a present GPU, else DLOP_NO_DEVICE with a message. Loads CUDA. */
int dlop__cuda_check_device(int32_t device_id);
/* The retained primary context of a device (after dlop__cuda_set_device succeeded once). */
int dlop__cuda_primary_context(int32_t device_id, CUcontext *context);
/* Make the context that owns stream current (stream NULL: keep the current context, or make
 * device 0's current when this thread has none). Leaves the context changed: prefer dlop__cuda_use_stream + dlop__cuda_restore_context. */
int dlop__cuda_set_context_of_stream(CUstream stream);

/* A scoped context switch, so a dlop call never changes the caller's current context (PyTorch
 * or CuPy on another device keep theirs). use_* costs one cuCtxGetCurrent when the wanted
 * context is already current and changes nothing then; otherwise it sets the wanted context
 * and dlop__cuda_restore_context puts the previous one (possibly none) back. Always pair them:
 *   dlop__cuda_scope scope;
 *   int status = dlop__cuda_use_device(id, &scope);
 *   if (status != DLOP_OK) return status;
 *   status = ... driver calls ...;
 *   return dlop__cuda_restore_after(&scope, status);
 * On failure use_* leaves nothing to restore (restore is then a harmless no-op). */
typedef struct dlop__cuda_scope {
  CUcontext previous; /* the context current before use_* (NULL: none) */
  int changed;        /* 1 when use_* switched and restore must switch back */
} dlop__cuda_scope;
/* Make device_id's primary context current for the scope. */
int dlop__cuda_use_device(int32_t device_id, dlop__cuda_scope *scope);
/* Make the context owning stream current for the scope (NULL stream: the current context, or
 * device 0's primary context when the thread has none). */
int dlop__cuda_use_stream(CUstream stream, dlop__cuda_scope *scope);
/* Remember the caller's current context so that a public entry point doing device work can put
 * it back with dlop__cuda_restore_after, whatever its inner calls made current. */
int dlop__cuda_save_context(dlop__cuda_scope *scope);
/* Undo dlop__cuda_use_device / dlop__cuda_use_stream / dlop__cuda_save_context: DLOP_OK, or DLOP_CUDA_ERROR with a
 * message when the driver refused to switch back. */
int dlop__cuda_restore_context(dlop__cuda_scope *scope);
/* Restore and return status, or the restore's error when status was DLOP_OK (a failed call
 * keeps its own message). For `return dlop__cuda_restore_after(&scope, status);`. */
int dlop__cuda_restore_after(dlop__cuda_scope *scope, int status);

/* A function run's promise to the calls it makes on this thread (memory pool, host-table
 * launches): device_id's primary context is current and stays so until the run ends, and
 * stream belongs to it. dlop__cuda_use_device(device_id) and dlop__cuda_use_stream(stream)
 * then switch nothing and make no driver call. Begin after dlop__cuda_use_device succeeded;
 * end with the saved value before restoring the caller's context (runs may nest). */
typedef struct dlop__cuda_run_scope {
  int active;
  int32_t device_id;
  CUstream stream;
} dlop__cuda_run_scope;
void dlop__cuda_run_begin(int32_t device_id, CUstream stream, dlop__cuda_run_scope *saved);
void dlop__cuda_run_end(const dlop__cuda_run_scope *saved);

/* Debug count of driver calls (cuda_call_counter.c): with DLOP_COUNT_DRIVER_CALLS=1 in the
 * environment when CUDA loads, every context, stream, event, memory and launch call is
 * counted per thread. dlop__cuda_driver_calls is this thread's total so far. */
void dlop__cuda_install_call_counter(dlop__cuda_api *api);
int dlop__cuda_counting_calls(void);
uint64_t dlop__cuda_driver_calls(void);

/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for result, in a static or thread-local buffer. */
const char *dlop__cuda_result_text(CUresult result);
/* Record "what failed: CUDA_ERROR_X (text)" as the last error and return DLOP_CUDA_ERROR, or
 * DLOP_OUT_OF_MEMORY for CUDA_ERROR_OUT_OF_MEMORY. */
int dlop__cuda_fail(CUresult result, const char *what);

#endif
