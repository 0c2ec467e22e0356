/* cuda_call_counter.c — a debug count of CUDA driver calls per thread, so a GPU test can
 * assert how many calls a steady-state function run makes. Off unless DLOP_COUNT_DRIVER_CALLS=1
 * is set when the driver loads: then the hot entry points in dlop__cuda are replaced by
 * wrappers that count and forward (init-time ones, module loading and error names are not). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_driver.h"

static dlop__cuda_api real;
static int counting;
static _Thread_local uint64_t calls;

#define DLOP__COUNTED(name, params, args) \
  static CUresult counted_##name params { \
    calls++;                              \
    return real.name args;                \
  }
DLOP__COUNTED(cuCtxSetCurrent, (CUcontext c), (c))
DLOP__COUNTED(cuCtxGetCurrent, (CUcontext * c), (c))
DLOP__COUNTED(cuCtxSynchronize, (void), ())
DLOP__COUNTED(cuMemAlloc, (CUdeviceptr * p, size_t b), (p, b))
DLOP__COUNTED(cuMemFree, (CUdeviceptr p), (p))
DLOP__COUNTED(cuMemcpyAsync, (CUdeviceptr d, CUdeviceptr s, size_t b, CUstream st), (d, s, b, st))
DLOP__COUNTED(cuMemcpyHtoDAsync, (CUdeviceptr d, const void *s, size_t b, CUstream st),
              (d, s, b, st))
DLOP__COUNTED(cuMemcpyDtoHAsync, (void *d, CUdeviceptr s, size_t b, CUstream st), (d, s, b, st))
DLOP__COUNTED(cuMemsetD8Async, (CUdeviceptr d, unsigned char v, size_t n, CUstream st),
              (d, v, n, st))
DLOP__COUNTED(cuStreamCreate, (CUstream * s, unsigned int f), (s, f))
DLOP__COUNTED(cuStreamDestroy, (CUstream s), (s))
DLOP__COUNTED(cuStreamSynchronize, (CUstream s), (s))
DLOP__COUNTED(cuStreamGetCtx, (CUstream s, CUcontext *c), (s, c))
DLOP__COUNTED(cuEventCreate, (CUevent * e, unsigned int f), (e, f))
DLOP__COUNTED(cuEventRecord, (CUevent e, CUstream s), (e, s))
DLOP__COUNTED(cuEventQuery, (CUevent e), (e))
DLOP__COUNTED(cuEventSynchronize, (CUevent e), (e))
DLOP__COUNTED(cuEventDestroy, (CUevent e), (e))
DLOP__COUNTED(cuLaunchKernel,
              (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
               unsigned int by, unsigned int bz, unsigned int shared, CUstream s, void **params,
               void **extra),
              (f, gx, gy, gz, bx, by, bz, shared, s, params, extra))
/* the replay path of CUDA graphs (entry points that may be absent: wrapped only when found) */
DLOP__COUNTED(cuGraphLaunch, (CUgraphExec e, CUstream s), (e, s))
DLOP__COUNTED(cuGraphExecKernelNodeSetParams,
              (CUgraphExec e, CUgraphNode n, const dlop__cuda_kernel_node_params *p), (e, n, p))
DLOP__COUNTED(cuGraphExecMemcpyNodeSetParams,
              (CUgraphExec e, CUgraphNode n, const dlop__cuda_memcpy3d *p, CUcontext c),
              (e, n, p, c))
DLOP__COUNTED(cuGraphExecMemsetNodeSetParams,
              (CUgraphExec e, CUgraphNode n, const dlop__cuda_memset_node_params *p, CUcontext c),
              (e, n, p, c))
#undef DLOP__COUNTED

void dlop__cuda_install_call_counter(dlop__cuda_api *api) {
  const char *flag = getenv("DLOP_COUNT_DRIVER_CALLS");
  if (flag == NULL || strcmp(flag, "1") != 0) return;
  real = *api;
#define DLOP__WRAP(name) api->name = counted_##name;
  DLOP__WRAP(cuCtxSetCurrent)
  DLOP__WRAP(cuCtxGetCurrent)
  DLOP__WRAP(cuCtxSynchronize)
  DLOP__WRAP(cuMemAlloc)
  DLOP__WRAP(cuMemFree)
  DLOP__WRAP(cuMemcpyAsync)
  DLOP__WRAP(cuMemcpyHtoDAsync)
  DLOP__WRAP(cuMemcpyDtoHAsync)
  DLOP__WRAP(cuMemsetD8Async)
  DLOP__WRAP(cuStreamCreate)
  DLOP__WRAP(cuStreamDestroy)
  DLOP__WRAP(cuStreamSynchronize)
  DLOP__WRAP(cuStreamGetCtx)
  DLOP__WRAP(cuEventCreate)
  DLOP__WRAP(cuEventRecord)
  DLOP__WRAP(cuEventQuery)
  DLOP__WRAP(cuEventSynchronize)
  DLOP__WRAP(cuEventDestroy)
  DLOP__WRAP(cuLaunchKernel)
  if (api->cuGraphLaunch) DLOP__WRAP(cuGraphLaunch)
  if (api->cuGraphExecKernelNodeSetParams) DLOP__WRAP(cuGraphExecKernelNodeSetParams)
  if (api->cuGraphExecMemcpyNodeSetParams) DLOP__WRAP(cuGraphExecMemcpyNodeSetParams)
  if (api->cuGraphExecMemsetNodeSetParams) DLOP__WRAP(cuGraphExecMemsetNodeSetParams)
#undef DLOP__WRAP
  counting = 1;
}

int dlop__cuda_counting_calls(void) { return counting; }

uint64_t dlop__cuda_driver_calls(void) { return calls; }
