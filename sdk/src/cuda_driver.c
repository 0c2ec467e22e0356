/* cuda_driver.c — loads the CUDA driver (libcuda.so.1) once, on first use, initializes it and
 * retains each device's primary context, so dlop shares one context with PyTorch, CuPy and
 * cuBLAS. Without a driver or a GPU every CUDA request fails with a message naming what is missing. */
#include "cuda_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Enough for any single host (DGX-class machines have 8 or 16). */
#define DLOP_MAX_CUDA_DEVICES 64

dlop__cuda_api dlop__cuda;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_status = DLOP_INTERNAL;
static char load_message[768];
static int device_count;

static pthread_mutex_t context_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(CUcontext) primary_contexts[DLOP_MAX_CUDA_DEVICES];

const char *dlop__cuda_result_text(CUresult result) {
  static _Thread_local char text[256];
  const char *name = NULL, *description = NULL;
  if (dlop__cuda.cuGetErrorName) dlop__cuda.cuGetErrorName(result, &name);
  if (dlop__cuda.cuGetErrorString) dlop__cuda.cuGetErrorString(result, &description);
  snprintf(text, sizeof text, "%s (%s)", name ? name : "CUDA_ERROR_UNKNOWN_CODE",
           description ? description : "no description");
  if (!name) snprintf(text, sizeof text, "CUresult %d", (int)result);
  return text;
}

/* The errors a kernel's fault on the device leaves behind (an illegal or misaligned address,
 * an illegal instruction, a device-side assert, a launch that timed out or failed): the
 * context is lost, and every later call in it returns the same error. */
int dlop__cuda_error_is_fault(CUresult result) {
  return result == 700 || result == 702 || result == 710 || (result >= 714 && result <= 719);
}

int dlop__cuda_fail(CUresult result, const char *what) {
  int status = result == DLOP_CUDA_ERROR_OUT_OF_MEMORY ? DLOP_OUT_OF_MEMORY : DLOP_CUDA_ERROR;
  if (dlop__cuda_error_is_fault(result))
    return dlop__error(status,
                       "%s failed: %s: a kernel faulted on the device (this call, or work "
                       "enqueued before it); the CUDA context is now unusable and every later "
                       "CUDA call in this process fails: restart the process",
                       what, dlop__cuda_result_text(result));
  return dlop__error(status, "%s failed: %s", what, dlop__cuda_result_text(result));
}

/* Resolve one symbol; record which one is missing (an old driver) and return 0. */
static int resolve(void *library, const char *name, void **slot) {
  *slot = dlsym(library, name);
  if (*slot == NULL) {
    snprintf(load_message, sizeof load_message,
             "libcuda.so.1 lacks %s: the NVIDIA driver is too old for dlop (update the driver)",
             name);
    load_status = DLOP_NO_DEVICE;
    return 0;
  }
  return 1;
}

/* The CUDA-graph entry points are optional: a driver without one still runs everything node by
 * node (cuFuncGetParamInfo, the newest, came with CUDA 12.4). */
static const char *graphs_missing = "the CUDA driver was not loaded";

const char *dlop__cuda_graphs_missing(void) { return graphs_missing; }

static void resolve_graph_entry_points(void *library) {
  static const struct {
    const char *symbol;
    size_t offset;
  } entries[] = {
      {"cuStreamBeginCapture_v2", offsetof(dlop__cuda_api, cuStreamBeginCapture)},
      {"cuStreamEndCapture", offsetof(dlop__cuda_api, cuStreamEndCapture)},
      {"cuGraphInstantiateWithFlags", offsetof(dlop__cuda_api, cuGraphInstantiateWithFlags)},
      {"cuGraphLaunch", offsetof(dlop__cuda_api, cuGraphLaunch)},
      {"cuGraphExecDestroy", offsetof(dlop__cuda_api, cuGraphExecDestroy)},
      {"cuGraphDestroy", offsetof(dlop__cuda_api, cuGraphDestroy)},
      {"cuGraphGetNodes", offsetof(dlop__cuda_api, cuGraphGetNodes)},
      {"cuGraphNodeGetType", offsetof(dlop__cuda_api, cuGraphNodeGetType)},
      {"cuGraphKernelNodeGetParams_v2", offsetof(dlop__cuda_api, cuGraphKernelNodeGetParams)},
      {"cuGraphExecKernelNodeSetParams_v2",
       offsetof(dlop__cuda_api, cuGraphExecKernelNodeSetParams)},
      {"cuGraphMemcpyNodeGetParams", offsetof(dlop__cuda_api, cuGraphMemcpyNodeGetParams)},
      {"cuGraphExecMemcpyNodeSetParams", offsetof(dlop__cuda_api, cuGraphExecMemcpyNodeSetParams)},
      {"cuGraphMemsetNodeGetParams", offsetof(dlop__cuda_api, cuGraphMemsetNodeGetParams)},
      {"cuGraphExecMemsetNodeSetParams", offsetof(dlop__cuda_api, cuGraphExecMemsetNodeSetParams)},
      {"cuFuncGetParamInfo", offsetof(dlop__cuda_api, cuFuncGetParamInfo)},
  };
  graphs_missing = NULL;
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
    void *entry = dlsym(library, entries[i].symbol);
    memcpy((char *)&dlop__cuda + entries[i].offset, &entry, sizeof entry);
    if (entry == NULL && graphs_missing == NULL) graphs_missing = entries[i].symbol;
  }
}

static void load_driver(void) {
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) {
    const char *why = dlerror();
    snprintf(load_message, sizeof load_message,
             "libcuda.so.1 not found (%s): no NVIDIA driver on this machine",
             why ? why : "dlopen failed");
    load_status = DLOP_NO_DEVICE;
    return;
  }
#define DLOP__RESOLVE(field, symbol) \
  if (!resolve(library, symbol, (void **)&dlop__cuda.field)) return;
  DLOP__RESOLVE(cuInit, "cuInit")
  DLOP__RESOLVE(cuDriverGetVersion, "cuDriverGetVersion")
  DLOP__RESOLVE(cuGetErrorName, "cuGetErrorName")
  DLOP__RESOLVE(cuGetErrorString, "cuGetErrorString")
  DLOP__RESOLVE(cuDeviceGetCount, "cuDeviceGetCount")
  DLOP__RESOLVE(cuDeviceGet, "cuDeviceGet")
  DLOP__RESOLVE(cuDeviceGetName, "cuDeviceGetName")
  DLOP__RESOLVE(cuDeviceGetAttribute, "cuDeviceGetAttribute")
  DLOP__RESOLVE(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
  DLOP__RESOLVE(cuCtxSetCurrent, "cuCtxSetCurrent")
  DLOP__RESOLVE(cuCtxGetCurrent, "cuCtxGetCurrent")
  DLOP__RESOLVE(cuCtxSynchronize, "cuCtxSynchronize")
  DLOP__RESOLVE(cuMemAlloc, "cuMemAlloc_v2")
  DLOP__RESOLVE(cuMemFree, "cuMemFree_v2")
  DLOP__RESOLVE(cuMemGetInfo, "cuMemGetInfo_v2")
  DLOP__RESOLVE(cuMemcpyAsync, "cuMemcpyAsync")
  DLOP__RESOLVE(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")
  DLOP__RESOLVE(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")
  DLOP__RESOLVE(cuMemsetD8Async, "cuMemsetD8Async")
  DLOP__RESOLVE(cuStreamCreate, "cuStreamCreate")
  DLOP__RESOLVE(cuStreamDestroy, "cuStreamDestroy_v2")
  DLOP__RESOLVE(cuStreamSynchronize, "cuStreamSynchronize")
  DLOP__RESOLVE(cuStreamGetCtx, "cuStreamGetCtx")
  DLOP__RESOLVE(cuEventCreate, "cuEventCreate")
  DLOP__RESOLVE(cuEventRecord, "cuEventRecord")
  DLOP__RESOLVE(cuEventQuery, "cuEventQuery")
  DLOP__RESOLVE(cuEventSynchronize, "cuEventSynchronize")
  DLOP__RESOLVE(cuEventDestroy, "cuEventDestroy_v2")
  DLOP__RESOLVE(cuModuleLoadData, "cuModuleLoadData")
  DLOP__RESOLVE(cuModuleUnload, "cuModuleUnload")
  DLOP__RESOLVE(cuModuleGetFunction, "cuModuleGetFunction")
  DLOP__RESOLVE(cuLaunchKernel, "cuLaunchKernel")
#undef DLOP__RESOLVE
  resolve_graph_entry_points(library);

  CUresult result = dlop__cuda.cuInit(0);
  if (result != DLOP_CUDA_SUCCESS) {
    snprintf(load_message, sizeof load_message, "cuInit failed: %s%s",
             dlop__cuda_result_text(result),
             result == DLOP_CUDA_ERROR_NO_DEVICE ? " (no GPU)" : "");
    load_status = DLOP_NO_DEVICE;
    return;
  }
  int count = 0;
  result = dlop__cuda.cuDeviceGetCount(&count);
  if (result != DLOP_CUDA_SUCCESS) {
    snprintf(load_message, sizeof load_message, "cuDeviceGetCount failed: %s",
             dlop__cuda_result_text(result));
    load_status = DLOP_NO_DEVICE;
    return;
  }
  if (count <= 0) {
    snprintf(load_message, sizeof load_message,
             "the NVIDIA driver is loaded but reports no CUDA device (no GPU)");
    load_status = DLOP_NO_DEVICE;
    return;
  }
  device_count = count > DLOP_MAX_CUDA_DEVICES ? DLOP_MAX_CUDA_DEVICES : count;
  dlop__cuda_install_call_counter(&dlop__cuda);
  load_status = DLOP_OK;
}

int dlop__cuda_ensure(void) {
  pthread_once(&load_once, load_driver);
  if (load_status != DLOP_OK) return dlop__error(load_status, "%s", load_message);
  return DLOP_OK;
}

int dlop__cuda_device_count(void) {
  pthread_once(&load_once, load_driver);
  return load_status == DLOP_OK ? device_count : 0;
}

int dlop__cuda_check_device(int32_t device_id) {
  int status = dlop__cuda_ensure();
  if (status != DLOP_OK) return status;
  if (device_id < 0 || device_id >= device_count)
    return dlop__error(DLOP_NO_DEVICE, "CUDA device %d requested but only %d present",
                       (int)device_id, device_count);
  return DLOP_OK;
}

int dlop__cuda_primary_context(int32_t device_id, CUcontext *context) {
  int status = dlop__cuda_check_device(device_id);
  if (status != DLOP_OK) return status;
  CUcontext existing = atomic_load(&primary_contexts[device_id]);
  if (existing == NULL) {
    /* Retained once per device and never released: the context lives as long as the process,
     * like the runtime API's; other libraries retaining it share the same one. */
    pthread_mutex_lock(&context_lock);
    existing = atomic_load(&primary_contexts[device_id]);
    if (existing == NULL) {
      CUdevice device;
      CUresult result = dlop__cuda.cuDeviceGet(&device, device_id);
      if (result == DLOP_CUDA_SUCCESS)
        result = dlop__cuda.cuDevicePrimaryCtxRetain(&existing, device);
      if (result != DLOP_CUDA_SUCCESS) {
        pthread_mutex_unlock(&context_lock);
        char what[96];
        snprintf(what, sizeof what, "retaining the primary context of CUDA device %d",
                 (int)device_id);
        return dlop__cuda_fail(result, what);
      }
      atomic_store(&primary_contexts[device_id], existing);
    }
    pthread_mutex_unlock(&context_lock);
  }
  *context = existing;
  return DLOP_OK;
}

/* Switch this thread to context unless it is current already; record what to restore. */
static int use_context(CUcontext context, dlop__cuda_scope *scope) {
  CUcontext current = NULL;
  CUresult result = dlop__cuda.cuCtxGetCurrent(&current);
  if (result != DLOP_CUDA_SUCCESS) return dlop__cuda_fail(result, "cuCtxGetCurrent");
  if (current == context) return DLOP_OK;
  result = dlop__cuda.cuCtxSetCurrent(context);
  if (result != DLOP_CUDA_SUCCESS) return dlop__cuda_fail(result, "cuCtxSetCurrent");
  scope->previous = current;
  scope->changed = 1;
  return DLOP_OK;
}

/* Inside a function run on this thread (see dlop__cuda_run_begin). */
static _Thread_local dlop__cuda_run_scope current_run;

void dlop__cuda_run_begin(int32_t device_id, CUstream stream, dlop__cuda_run_scope *saved) {
  *saved = current_run;
  current_run.active = 1;
  current_run.device_id = device_id;
  current_run.stream = stream;
}

void dlop__cuda_run_end(const dlop__cuda_run_scope *saved) { current_run = *saved; }

int dlop__cuda_use_device(int32_t device_id, dlop__cuda_scope *scope) {
  scope->previous = NULL;
  scope->changed = 0;
  /* The run made this device's context current and keeps it: no driver call needed. */
  if (current_run.active && current_run.device_id == device_id) return DLOP_OK;
  CUcontext context;
  int status = dlop__cuda_primary_context(device_id, &context);
  if (status != DLOP_OK) return status;
  return use_context(context, scope);
}

int dlop__cuda_use_stream(CUstream stream, dlop__cuda_scope *scope) {
  scope->previous = NULL;
  scope->changed = 0;
  /* A thunk launching on its run's stream: the run's context owns it and is current. */
  if (stream != NULL && current_run.active && stream == current_run.stream) return DLOP_OK;
  int status = dlop__cuda_ensure();
  if (status != DLOP_OK) return status;
  if (stream == NULL) {
    /* The legacy default stream belongs to whatever context is current: keep it if any. */
    CUcontext current = NULL;
    CUresult result = dlop__cuda.cuCtxGetCurrent(&current);
    if (result != DLOP_CUDA_SUCCESS) return dlop__cuda_fail(result, "cuCtxGetCurrent");
    if (current != NULL) return DLOP_OK;
    return dlop__cuda_use_device(0, scope);
  }
  CUcontext context = NULL;
  CUresult result = dlop__cuda.cuStreamGetCtx(stream, &context);
  if (result != DLOP_CUDA_SUCCESS) return dlop__cuda_fail(result, "cuStreamGetCtx");
  return use_context(context, scope);
}

int dlop__cuda_save_context(dlop__cuda_scope *scope) {
  scope->previous = NULL;
  scope->changed = 0;
  int status = dlop__cuda_ensure();
  if (status != DLOP_OK) return status;
  CUresult result = dlop__cuda.cuCtxGetCurrent(&scope->previous);
  if (result != DLOP_CUDA_SUCCESS) return dlop__cuda_fail(result, "cuCtxGetCurrent");
  scope->changed = 1; /* restore compares and switches back only if something changed it */
  return DLOP_OK;
}

int dlop__cuda_restore_context(dlop__cuda_scope *scope) {
  if (scope == NULL || !scope->changed) return DLOP_OK;
  scope->changed = 0;
  CUcontext current = NULL;
  if (dlop__cuda.cuCtxGetCurrent(&current) == DLOP_CUDA_SUCCESS && current == scope->previous)
    return DLOP_OK;
  CUresult result = dlop__cuda.cuCtxSetCurrent(scope->previous);
  if (result != DLOP_CUDA_SUCCESS)
    return dlop__cuda_fail(result, "cuCtxSetCurrent (restoring the caller's context)");
  return DLOP_OK;
}

/* Restore, keeping status when the work already failed (its message matters more). */
int dlop__cuda_restore_after(dlop__cuda_scope *scope, int status) {
  int restored = dlop__cuda_restore_context(scope);
  return status != DLOP_OK ? status : restored;
}

/* Kept for callers not yet using a scope: a no-op (one cuCtxGetCurrent) when device_id's
 * primary context is already current; otherwise it switches and does not switch back. */
int dlop__cuda_set_device(int32_t device_id) {
  CUcontext context;
  int status = dlop__cuda_primary_context(device_id, &context);
  if (status != DLOP_OK) return status;
  CUcontext current = NULL;
  if (dlop__cuda.cuCtxGetCurrent(&current) == DLOP_CUDA_SUCCESS && current == context)
    return DLOP_OK;
  CUresult result = dlop__cuda.cuCtxSetCurrent(context);
  if (result != DLOP_CUDA_SUCCESS) return dlop__cuda_fail(result, "cuCtxSetCurrent");
  return DLOP_OK;
}

int dlop__cuda_set_context_of_stream(CUstream stream) {
  int status = dlop__cuda_ensure();
  if (status != DLOP_OK) return status;
  if (stream == NULL) {
    CUcontext current = NULL;
    if (dlop__cuda.cuCtxGetCurrent(&current) == DLOP_CUDA_SUCCESS && current != NULL)
      return DLOP_OK;
    return dlop__cuda_set_device(0);
  }
  CUcontext context = NULL;
  CUresult result = dlop__cuda.cuStreamGetCtx(stream, &context);
  if (result != DLOP_CUDA_SUCCESS) return dlop__cuda_fail(result, "cuStreamGetCtx");
  CUcontext current = NULL;
  if (dlop__cuda.cuCtxGetCurrent(&current) == DLOP_CUDA_SUCCESS && current == context)
    return DLOP_OK;
  result = dlop__cuda.cuCtxSetCurrent(context);
  if (result != DLOP_CUDA_SUCCESS) return dlop__cuda_fail(result, "cuCtxSetCurrent");
  return DLOP_OK;
}
