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
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphExec_st *CUgraphExec;

/* The parameters of the graph nodes a captured run holds (cuda.h's CUDA_KERNEL_NODE_PARAMS_v2,
 * CUDA_MEMCPY3D_v2 and CUDA_MEMSET_NODE_PARAMS_v1; test_cuda_graph_layout.c pins the layouts
 * against the toolkit's cuda.h). */
typedef struct dlop__cuda_kernel_node_params {
  CUfunction func;
  unsigned int grid_x, grid_y, grid_z;
  unsigned int block_x, block_y, block_z;
  unsigned int shared_bytes;
  void **kernel_params;
  void **extra;
  void *kernel; /* CUkernel, used only when func is NULL */
  CUcontext context;
} dlop__cuda_kernel_node_params;

typedef struct dlop__cuda_memcpy3d {
  size_t src_x_bytes, src_y, src_z, src_lod;
  int src_memory_type; /* CUmemorytype */
  const void *src_host;
  CUdeviceptr src_device;
  void *src_array;
  void *reserved0;
  size_t src_pitch, src_height;
  size_t dst_x_bytes, dst_y, dst_z, dst_lod;
  int dst_memory_type;
  void *dst_host;
  CUdeviceptr dst_device;
  void *dst_array;
  void *reserved1;
  size_t dst_pitch, dst_height;
  size_t width_bytes, height, depth;
} dlop__cuda_memcpy3d;

typedef struct dlop__cuda_memset_node_params {
  CUdeviceptr dst;
  size_t pitch;
  unsigned int value;
  unsigned int element_size;
  size_t width;
  size_t height;
} dlop__cuda_memset_node_params;

#define DLOP_CUDA_SUCCESS 0
#define DLOP_CUDA_ERROR_OUT_OF_MEMORY 2
#define DLOP_CUDA_ERROR_NO_DEVICE 100
#define DLOP_CUDA_ERROR_NOT_READY 600
#define DLOP_CU_STREAM_NON_BLOCKING 1u
#define DLOP_CU_EVENT_DISABLE_TIMING 2u
#define DLOP_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define DLOP_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define DLOP_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define DLOP_CUDA_ERROR_INVALID_VALUE 1
#define DLOP_CU_STREAM_CAPTURE_MODE_RELAXED 2
#define DLOP_CU_GRAPH_NODE_TYPE_KERNEL 0
#define DLOP_CU_GRAPH_NODE_TYPE_MEMCPY 1
#define DLOP_CU_GRAPH_NODE_TYPE_MEMSET 2
#define DLOP_CU_GRAPH_NODE_TYPE_EMPTY 5
#define DLOP_CU_MEMORYTYPE_HOST 1
#define DLOP_CU_MEMORYTYPE_DEVICE 2
#define DLOP_CU_MEMORYTYPE_ARRAY 3
#define DLOP_CU_MEMORYTYPE_UNIFIED 4

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
  /* CUDA graphs (cuda_graph.c): optional, NULL when the driver lacks them (then functions run
   * node by node and explain() says why); dlop__cuda_graphs_missing names the first absent. */
  CUresult (*cuStreamBeginCapture)(CUstream stream, int mode);
  CUresult (*cuStreamEndCapture)(CUstream stream, CUgraph *graph);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *exec, CUgraph graph,
                                          unsigned long long flags);
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream stream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec exec);
  CUresult (*cuGraphDestroy)(CUgraph graph);
  CUresult (*cuGraphGetNodes)(CUgraph graph, CUgraphNode *nodes, size_t *count);
  CUresult (*cuGraphNodeGetType)(CUgraphNode node, int *type);
  CUresult (*cuGraphKernelNodeGetParams)(CUgraphNode node, dlop__cuda_kernel_node_params *params);
  CUresult (*cuGraphExecKernelNodeSetParams)(CUgraphExec exec, CUgraphNode node,
                                             const dlop__cuda_kernel_node_params *params);
  CUresult (*cuGraphMemcpyNodeGetParams)(CUgraphNode node, dlop__cuda_memcpy3d *params);
  CUresult (*cuGraphExecMemcpyNodeSetParams)(CUgraphExec exec, CUgraphNode node,
                                             const dlop__cuda_memcpy3d *params, CUcontext context);
  CUresult (*cuGraphMemsetNodeGetParams)(CUgraphNode node, dlop__cuda_memset_node_params *params);
  CUresult (*cuGraphExecMemsetNodeSetParams)(CUgraphExec exec, CUgraphNode node,
                                             const dlop__cuda_memset_node_params *params,
                                             CUcontext context);
  CUresult (*cuFuncGetParamInfo)(CUfunction function, size_t index, size_t *offset, size_t *size);
} dlop__cuda_api;

/* NULL when every CUDA-graph entry point above was found, else the name of the first missing
 * one (an old driver: graphs are then off, nothing else changes). Valid after dlop__cuda_ensure. */
const char *dlop__cuda_graphs_missing(void);

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
/* 1 for the errors a kernel's fault on the device leaves (the context is lost: dlop__cuda_fail
 * says so), 0 for others. */
int dlop__cuda_error_is_fault(CUresult result);

#endif
