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
 * device 0's current when this thread has none). For host-API calls that only get a stream. */
int dlop__cuda_set_context_of_stream(CUstream stream);
/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for result, in a static or thread-local buffer. */
const char *dlop__cuda_result_text(CUresult result);
/* Record "what failed: CUDA_ERROR_X (text)" as the last error and return DLOP_CUDA_ERROR, or
 * DLOP_OUT_OF_MEMORY for CUDA_ERROR_OUT_OF_MEMORY. */
int dlop__cuda_fail(CUresult result, const char *what);

#endif
