/* cuda_source.c — dlop/cuda_source.h: CUDA C from a source string for hosts (Python's
 * dlop.SourceModule). Compiling is NVRTC behind the cache (nvrtc.c), loading is the host
 * table's module table (host_api.c), and a launch is one cuLaunchKernel in the device's primary
 * context, leaving the caller's context as it was. */
#include <stdint.h>
#include <stdio.h>

#include "cuda_driver.h"
#include "internal.h"
#include "jit.h"

#define CUDA_ERROR_NOT_FOUND 500

int dlop_cuda_compile(int32_t arch, const char *source, const char *const *options,
                      int32_t num_options, const void **image, size_t *image_bytes, int *is_ptx) {
  return dlop__nvrtc_image(arch, source, options, num_options, image, image_bytes, is_ptx, NULL,
                           0);
}

int dlop_cuda_device_arch(int32_t device_id, int32_t *arch) {
  if (arch == NULL) return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_cuda_device_arch: arch is NULL");
  *arch = 0;
  int status = dlop__cuda_check_device(device_id);
  if (status != DLOP_OK) return status;
  CUdevice device;
  int major = 0, minor = 0;
  CUresult result = dlop__cuda.cuDeviceGet(&device, device_id);
  if (result == DLOP_CUDA_SUCCESS)
    result = dlop__cuda.cuDeviceGetAttribute(
        &major, DLOP_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  if (result == DLOP_CUDA_SUCCESS)
    result = dlop__cuda.cuDeviceGetAttribute(
        &minor, DLOP_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  if (result != DLOP_CUDA_SUCCESS)
    return dlop__cuda_fail(result, "reading the compute capability (cuDeviceGetAttribute)");
  *arch = major * 10 + minor;
  return DLOP_OK;
}

int dlop_cuda_module_load(int32_t device_id, const void *image, void **module) {
  return dlop__host_api()->cuda_module_load(device_id, image, module, NULL, 0);
}

int dlop_cuda_module_unload(void *module) { return dlop__host_api()->cuda_module_unload(module); }

int dlop_cuda_module_function(void *module, const char *name, void **function) {
  if (module == NULL || name == NULL || function == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_cuda_module_function: module, name or function is NULL");
  *function = NULL;
  int32_t device_id;
  int status = dlop__cuda_module_device(module, &device_id);
  if (status != DLOP_OK) return status;
  dlop__cuda_scope scope;
  status = dlop__cuda_use_device(device_id, &scope);
  if (status != DLOP_OK) return status;
  CUfunction found = NULL;
  CUresult result = dlop__cuda.cuModuleGetFunction(&found, (CUmodule)module, name);
  if (result == CUDA_ERROR_NOT_FOUND)
    status = dlop__error(DLOP_NOT_FOUND,
                         "the CUDA module has no kernel named '%s' (a __global__ function not "
                         "declared extern \"C\" has a mangled C++ name)",
                         name);
  else if (result != DLOP_CUDA_SUCCESS)
    status = dlop__cuda_fail(result, "cuModuleGetFunction");
  else
    *function = found;
  return dlop__cuda_restore_after(&scope, status);
}

int dlop_cuda_function_params(void *function, int32_t *count, size_t *sizes, int32_t max_sizes) {
  if (function == NULL || count == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_cuda_function_params: function or count is NULL");
  *count = 0;
  int status = dlop__cuda_ensure();
  if (status != DLOP_OK) return status;
  if (dlop__cuda.cuFuncGetParamInfo == NULL)
    return dlop__error(DLOP_UNSUPPORTED, "the CUDA driver cannot tell a kernel's parameters "
                                         "(cuFuncGetParamInfo came with CUDA 12.4)");
  /* The driver answers CUDA_ERROR_INVALID_VALUE past the last parameter. A kernel has at most
   * 32764 bytes of parameters, so at most that many. */
  for (int32_t n = 0; n < 32764; n++) {
    size_t offset = 0, size = 0;
    CUresult result = dlop__cuda.cuFuncGetParamInfo((CUfunction)function, (size_t)n, &offset, &size);
    if (result == DLOP_CUDA_ERROR_INVALID_VALUE) {
      *count = n;
      return DLOP_OK;
    }
    if (result != DLOP_CUDA_SUCCESS) return dlop__cuda_fail(result, "cuFuncGetParamInfo");
    if (sizes != NULL && n < max_sizes) sizes[n] = size;
  }
  return dlop__error(DLOP_INTERNAL, "cuFuncGetParamInfo never reported the last parameter");
}

int dlop_cuda_launch(int32_t device_id, void *function, const uint32_t grid[3],
                     const uint32_t block[3], uint32_t shared_bytes, void *stream, void **args) {
  if (function == NULL || grid == NULL || block == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_cuda_launch: function, grid or block is NULL");
  if (block[0] == 0 || block[1] == 0 || block[2] == 0)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_cuda_launch: block (%u, %u, %u) has a zero size (expected at least "
                       "1 thread along each axis)",
                       block[0], block[1], block[2]);
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return DLOP_OK; /* nothing to do */
  if (stream == NULL) stream = (void *)(uintptr_t)1;                  /* CU_STREAM_LEGACY */
  dlop__cuda_scope scope;
  int status = dlop__cuda_use_device(device_id, &scope);
  if (status != DLOP_OK) return status;
  CUresult result = dlop__cuda.cuLaunchKernel((CUfunction)function, grid[0], grid[1], grid[2],
                                              block[0], block[1], block[2], shared_bytes,
                                              (CUstream)stream, args, NULL);
  if (result != DLOP_CUDA_SUCCESS) {
    char what[200];
    snprintf(what, sizeof what,
             "cuLaunchKernel on cuda:%d (grid %u x %u x %u, block %u x %u x %u, %u bytes of "
             "dynamic shared memory)",
             (int)device_id, grid[0], grid[1], grid[2], block[0], block[1], block[2],
             shared_bytes);
    status = dlop__cuda_fail(result, what);
  }
  return dlop__cuda_restore_after(&scope, status);
}
