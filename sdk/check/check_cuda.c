/* check_cuda.c — the few CUDA driver calls dlop-check makes itself: probing for a GPU in a
 * forked child (the parent must never initialize CUDA, or its Check children could not use it),
 * making the primary context current around thunk calls, and capturing a run into a CUDA graph.
 * libcuda.so.1 is dlopen'ed here, as libdlop does, so dlop-check runs where there is no driver. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_suite.h"

typedef int cu_result;
typedef int cu_device;
typedef void *cu_handle;

static struct {
  int loaded;
  cu_result (*init)(unsigned);
  cu_result (*device_get)(cu_device *, int);
  cu_result (*primary_retain)(cu_handle *, cu_device);
  cu_result (*ctx_push)(cu_handle);
  cu_result (*ctx_pop)(cu_handle *);
  cu_result (*begin_capture)(cu_handle, int);
  cu_result (*end_capture)(cu_handle, cu_handle *);
  cu_result (*graph_instantiate)(cu_handle *, cu_handle, unsigned long long);
  cu_result (*graph_launch)(cu_handle, cu_handle);
  cu_result (*graph_exec_destroy)(cu_handle);
  cu_result (*graph_destroy)(cu_handle);
  cu_result (*stream_synchronize)(cu_handle);
  cu_result (*graph_get_nodes)(cu_handle, cu_handle *, size_t *);
  cu_result (*ctx_synchronize)(void);
  cu_result (*error_name)(cu_result, const char **);
  cu_handle contexts[64];
} cu;

#define CU_STREAM_CAPTURE_MODE_GLOBAL 0

static const char *cu_error(cu_result result) {
  const char *name = NULL;
  if (cu.error_name == NULL || cu.error_name(result, &name) != 0 || name == NULL) return "?";
  return name;
}

static int cu_load(char *error, size_t size) {
  if (cu.loaded) return DLOP_OK;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    snprintf(error, size, "cannot load libcuda.so.1: %s", dlerror());
    return DLOP_NO_DEVICE;
  }
  struct {
    const char *name;
    void **slot;
  } symbols[] = {
      {"cuInit", (void **)&cu.init},
      {"cuDeviceGet", (void **)&cu.device_get},
      {"cuDevicePrimaryCtxRetain", (void **)&cu.primary_retain},
      {"cuCtxPushCurrent_v2", (void **)&cu.ctx_push},
      {"cuCtxPopCurrent_v2", (void **)&cu.ctx_pop},
      {"cuStreamBeginCapture_v2", (void **)&cu.begin_capture},
      {"cuStreamEndCapture", (void **)&cu.end_capture},
      {"cuGraphInstantiateWithFlags", (void **)&cu.graph_instantiate},
      {"cuGraphLaunch", (void **)&cu.graph_launch},
      {"cuGraphExecDestroy", (void **)&cu.graph_exec_destroy},
      {"cuGraphDestroy", (void **)&cu.graph_destroy},
      {"cuStreamSynchronize", (void **)&cu.stream_synchronize},
      {"cuGraphGetNodes", (void **)&cu.graph_get_nodes},
      {"cuCtxSynchronize", (void **)&cu.ctx_synchronize},
      {"cuGetErrorName", (void **)&cu.error_name},
  };
  for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
    *symbols[i].slot = dlsym(lib, symbols[i].name);
    if (*symbols[i].slot == NULL) {
      snprintf(error, size, "libcuda.so.1 has no %s (driver too old?)", symbols[i].name);
      return DLOP_NO_DEVICE;
    }
  }
  cu_result result = cu.init(0);
  if (result != 0) {
    snprintf(error, size, "cuInit failed: %s", cu_error(result));
    return DLOP_NO_DEVICE;
  }
  cu.loaded = 1;
  return DLOP_OK;
}

int check_cuda_probe(char *reason, size_t size) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) {
    snprintf(reason, size, "cannot create a pipe to probe CUDA");
    return 0;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t child = fork();
  if (child == 0) {
    close(pipe_fds[0]);
    dlop_device cuda = {DLOP_DEVICE_CUDA, 0};
    int ok = dlop_device_check(cuda) == DLOP_OK;
    const char *why = ok ? "" : dlop_last_error();
    if (write(pipe_fds[1], why, strlen(why)) < 0) ok = 0;
    _exit(ok ? 0 : 1);
  }
  close(pipe_fds[1]);
  if (child < 0) {
    close(pipe_fds[0]);
    snprintf(reason, size, "cannot fork to probe CUDA");
    return 0;
  }
  ssize_t got = read(pipe_fds[0], reason, size - 1);
  reason[got > 0 ? got : 0] = '\0';
  close(pipe_fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 1;
  if (reason[0] == '\0') snprintf(reason, size, "the CUDA probe process crashed");
  return 0;
}

int check_cuda_push(int32_t device_id, char *error, size_t size) {
  if (cu_load(error, size) != DLOP_OK) return DLOP_NO_DEVICE;
  if (device_id < 0 || device_id >= 64) {
    snprintf(error, size, "CUDA device %d is out of range", (int)device_id);
    return DLOP_NO_DEVICE;
  }
  if (cu.contexts[device_id] == NULL) {
    cu_device device;
    cu_result result = cu.device_get(&device, device_id);
    if (result == 0) result = cu.primary_retain(&cu.contexts[device_id], device);
    if (result != 0) {
      snprintf(error, size, "retaining the primary context of CUDA device %d failed: %s",
               (int)device_id, cu_error(result));
      return DLOP_CUDA_ERROR;
    }
  }
  cu_result result = cu.ctx_push(cu.contexts[device_id]);
  if (result != 0) {
    snprintf(error, size, "cuCtxPushCurrent failed: %s", cu_error(result));
    return DLOP_CUDA_ERROR;
  }
  return DLOP_OK;
}

void check_cuda_pop(void) {
  cu_handle old;
  if (cu.loaded) cu.ctx_pop(&old);
}

/* After a capture: the graph must hold the run's work, and only the graph's replay may write
 * the outputs. Work the thunk launched on another stream (the legacy default stream 0, its own
 * stream) ran at once instead of being captured: the graph is then empty, or the outputs,
 * poisoned again here after the whole device is idle, stay poisoned after the replay. */
static int graph_holds_the_work(check_prepared *p, check_buffer *outputs, cu_handle graph,
                                void *stream, char *error, size_t size) {
  int64_t elements = 0;
  for (int32_t o = 0; o < p->num_outputs; o++) elements += outputs[o].numel;
  size_t nodes = 0;
  cu_result result = cu.graph_get_nodes(graph, NULL, &nodes);
  if (result != 0) {
    snprintf(error, size, "cuGraphGetNodes failed: %s", cu_error(result));
    return DLOP_CUDA_ERROR;
  }
  if (nodes == 0 && elements > 0) {
    snprintf(error, size, "the capture recorded no work on the given stream (args->stream) for "
             "%lld output elements: the run launched its kernels elsewhere, such as the legacy "
             "default stream 0; launch only on args->stream", (long long)elements);
    return DLOP_CUDA_ERROR;
  }
  if ((result = cu.ctx_synchronize()) != 0) {
    snprintf(error, size, "cuCtxSynchronize after the capture failed: %s", cu_error(result));
    return DLOP_CUDA_ERROR;
  }
  for (int32_t o = 0; o < p->num_outputs; o++) {
    int status = check_copy_bytes(outputs[o].device, outputs[o].memory, outputs[o].image,
                                  outputs[o].bytes, stream);
    if (status != DLOP_OK) {
      snprintf(error, size, "poisoning output %d again after the capture failed: %s", (int)o,
               dlop_last_error());
      return status;
    }
  }
  return DLOP_OK;
}

int check_cuda_graph_run(check_prepared *p, check_buffer *inputs, check_buffer *outputs,
                         void *stream, char *error, size_t size) {
  char run_error[1024];
  check_run_tensors tensors;
  dlop_run_args args;
  check_run_args_fill(p, inputs, outputs, stream, &tensors, run_error, sizeof run_error, &args);
  if (check_cuda_push(p->c->device.id, error, size) != DLOP_OK) return DLOP_NO_DEVICE;
  cu_handle graph = NULL, exec = NULL;
  int status = DLOP_OK;
  /* Global mode: an allocation or a synchronization in the thunk ends the capture with an
   * error, which is what "safe to capture" promises not to do. */
  cu_result result = cu.begin_capture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
  if (result != 0) {
    snprintf(error, size, "cuStreamBeginCapture failed: %s", cu_error(result));
    status = DLOP_CUDA_ERROR;
  } else {
    check_where_run("the thunk's run under CUDA graph capture", p);
    int run_status = p->thunk.run(p->thunk.state, &args);
    check_where_returned();
    result = cu.end_capture(stream, &graph);
    if (run_status != DLOP_OK) {
      snprintf(error, size, "the run under capture failed: %s: %s", dlop_status_name(run_status),
               run_error[0] ? run_error : "(no message)");
      status = run_status;
    } else if (result != 0) {
      snprintf(error, size, "cuStreamEndCapture failed: %s (the thunk did something a CUDA "
               "graph cannot hold: an allocation, a synchronization, or work on another stream)",
               cu_error(result));
      status = DLOP_CUDA_ERROR;
    } else if ((status = graph_holds_the_work(p, outputs, graph, stream, error, size)) != DLOP_OK) {
      /* reported by graph_holds_the_work */
    } else if ((result = cu.graph_instantiate(&exec, graph, 0)) != 0) {
      snprintf(error, size, "cuGraphInstantiate failed: %s", cu_error(result));
      status = DLOP_CUDA_ERROR;
    } else {
      check_where_stage("the replay of the thunk's captured CUDA graph");
      if ((result = cu.graph_launch(exec, stream)) != 0 ||
          (result = cu.stream_synchronize(stream)) != 0) {
        snprintf(error, size, "launching the captured graph failed: %s", cu_error(result));
        status = DLOP_CUDA_ERROR;
      }
      check_where_returned();
    }
  }
  if (exec) cu.graph_exec_destroy(exec);
  if (graph) cu.graph_destroy(graph);
  check_cuda_pop();
  return status;
}
