/* dlop/cuda_source.h — CUDA C from a source string at run time, for hosts: compile it with
 * libdlop's NVRTC behind its cache (docs/runtime.md, "Run-time compilation"), load it on a
 * device through the host's module table, find its kernels and launch them. Python's
 * dlop.SourceModule is made of these; plugins have the same through the host table
 * (cuda_compile, cuda_module_function, cuda_launch). Modules, functions and streams are the
 * driver's CUmodule, CUfunction and CUstream values. */
#ifndef DLOP_CUDA_SOURCE_H
#define DLOP_CUDA_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Compile source for the architecture arch (major * 10 + minor: 90 for sm_90) with NVRTC
 * options (NULL when num_options is 0; the architecture option is added here and refused in
 * options). Needs no GPU and no driver. *image is a cubin (*is_ptx = 0) or, for a GPU newer
 * than NVRTC, PTX of the newest architecture it knows (*is_ptx = 1, NUL-terminated); it is
 * owned by libdlop's cache and stays valid and unchanged for the life of the process (never
 * free it), so dlop_cuda_module_load may load it any number of times. A compile error is
 * DLOP_INVALID_ARGUMENT with NVRTC's log (the line numbers of source as given); no NVRTC is
 * DLOP_NOT_FOUND naming what was tried. */
DLOP_API int dlop_cuda_compile(int32_t arch, const char *source, const char *const *options,
                               int32_t num_options, const void **image, size_t *image_bytes,
                               int *is_ptx);

/* The compute capability of CUDA device device_id as major * 10 + minor (90 on an H200);
 * DLOP_NO_DEVICE with what is missing without a driver or that device. */
DLOP_API int dlop_cuda_device_arch(int32_t device_id, int32_t *arch);

/* Load image (a cubin, PTX or fatbin that stays valid while loaded, such as
 * dlop_cuda_compile's) on device_id, as the host table's cuda_module_load: the same image on
 * the same device is loaded once and reference counted; dlop_cuda_module_unload drops one
 * reference and unloads at the last (the module's functions must not be launched after). */
DLOP_API int dlop_cuda_module_load(int32_t device_id, const void *image, void **module);
DLOP_API int dlop_cuda_module_unload(void *module);

/* The kernel called name in module: the name as the compiler emitted it (declare kernels
 * extern "C" to keep their names; C++ names are mangled). DLOP_NOT_FOUND naming it otherwise. */
DLOP_API int dlop_cuda_module_function(void *module, const char *name, void **function);

/* The kernel's parameter count and each parameter's size in bytes (sizes may be NULL; at most
 * max_sizes are written), as the driver knows them from the compiled code. DLOP_UNSUPPORTED
 * when the driver cannot tell (cuFuncGetParamInfo came with CUDA 12.4). */
DLOP_API int dlop_cuda_function_params(void *function, int32_t *count, size_t *sizes,
                                       int32_t max_sizes);

/* Launch function (of a module loaded on device_id) on stream: a CUstream of device_id's
 * primary context, or 1 (also NULL) for CUDA's legacy default stream, 2 for the per-thread
 * default stream. args holds one pointer per kernel parameter, to its value (cuLaunchKernel's
 * kernelParams). A grid with a zero size launches nothing (DLOP_OK); a zero block size is
 * DLOP_INVALID_ARGUMENT. The launch is asynchronous: a kernel that faults on the device is
 * reported by a later call (a launch, a synchronization, a copy), as DLOP_CUDA_ERROR saying
 * that the context is unusable from then on, which it is: restart the process. The caller's
 * current context is left as it was. */
DLOP_API int dlop_cuda_launch(int32_t device_id, void *function, const uint32_t grid[3],
                              const uint32_t block[3], uint32_t shared_bytes, void *stream,
                              void **args);

#ifdef __cplusplus
}
#endif

#endif
