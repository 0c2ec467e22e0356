/* cublas.c — cuBLAS for plugins, loaded with dlopen at first use (libcublas.so.13, then .12,
 * then libcublas.so) so libdlop neither links nor requires it. One handle per (thread, device),
 * created on the device's primary context at the thread's first request and destroyed when the
 * thread exits; its stream is set on each request. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_driver.h"
#include "host_services.h"

#define DLOP_CUBLAS_MAX_DEVICES 64

typedef int (*cublas_create_fn)(void **handle);
typedef int (*cublas_destroy_fn)(void *handle);
typedef int (*cublas_set_stream_fn)(void *handle, void *stream);
typedef const char *(*cublas_status_string_fn)(int status);

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static void *library;
static char load_message[1024];
static cublas_create_fn create_handle;
static cublas_destroy_fn destroy_handle;
static cublas_set_stream_fn set_stream;
static cublas_status_string_fn status_string;

/* Why per thread: a handle's stream is state. With one handle per device, thread A could set
 * its stream, thread B set another, and A's GEMM would then run on B's stream (unordered with
 * A's work). A handle that only its own thread uses can have its stream set safely. */
typedef struct thread_handles {
  void *handles[DLOP_CUBLAS_MAX_DEVICES];
} thread_handles;

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t handles_key;
static int key_created;

/* At thread exit: destroy the thread's handles, each under its device's context (the primary
 * contexts stay retained by dlop, so they are still alive). */
static void destroy_thread_handles(void *value) {
  thread_handles *mine = value;
  for (int32_t device_id = 0; device_id < DLOP_CUBLAS_MAX_DEVICES; device_id++) {
    if (mine->handles[device_id] == NULL || destroy_handle == NULL) continue;
    dlop__cuda_scope scope;
    if (dlop__cuda_use_device(device_id, &scope) != DLOP_OK) continue; /* leaked rather than misused */
    int result = destroy_handle(mine->handles[device_id]);
    dlop__cuda_restore_context(&scope);
    if (result != 0)
      dlop__warn("cublasDestroy_v2 on cuda:%d at thread exit failed: status %d", (int)device_id,
                 result);
  }
  free(mine);
}

static void create_key(void) {
  key_created = pthread_key_create(&handles_key, destroy_thread_handles) == 0;
}

/* If libdlop is unloaded while threads still hold handles, their exit must not call into the
 * unmapped destructor: delete the key (the handles are then left to the driver). */
__attribute__((destructor)) static void delete_key(void) {
  if (key_created) pthread_key_delete(handles_key);
  key_created = 0;
}

/* dlopen name, or dir/name; appends the failure to load_message. */
static void *try_open(const char *directory, const char *name, size_t *used) {
  char path[1024];
  if (directory) snprintf(path, sizeof path, "%s/%s", directory, name);
  else snprintf(path, sizeof path, "%s", name);
  void *opened = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (opened == NULL && *used < sizeof load_message) {
    const char *why = dlerror();
    *used += (size_t)snprintf(load_message + *used, sizeof load_message - *used, " %s%s",
                              path, why && strstr(why, "No such file") ? "" : " (failed)");
  }
  return opened;
}

static void load_cublas(void) {
  static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
  /* The loader's path first; then the toolkit's own folder, which is often not on it. */
  const char *directories[] = {NULL, getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
  size_t used = 0;
  used += (size_t)snprintf(load_message, sizeof load_message, "cuBLAS not found: tried");
  for (size_t d = 0; d < sizeof directories / sizeof directories[0] && !library; d++) {
    char lib64[900];
    if (d > 0 && (directories[d] == NULL || directories[d][0] == '\0')) continue;
    if (d > 0) snprintf(lib64, sizeof lib64, "%s/lib64", directories[d]);
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !library; i++)
      library = try_open(d > 0 ? lib64 : NULL, names[i], &used);
  }
  if (library == NULL) {
    if (used < sizeof load_message)
      snprintf(load_message + used, sizeof load_message - used,
               "; install cuBLAS (the CUDA toolkit's libcublas) or add it to LD_LIBRARY_PATH");
    return;
  }
  create_handle = (cublas_create_fn)dlsym(library, "cublasCreate_v2");
  destroy_handle = (cublas_destroy_fn)dlsym(library, "cublasDestroy_v2");
  set_stream = (cublas_set_stream_fn)dlsym(library, "cublasSetStream_v2");
  status_string = (cublas_status_string_fn)dlsym(library, "cublasGetStatusString");
  if (create_handle == NULL || set_stream == NULL) {
    snprintf(load_message, sizeof load_message,
             "the cuBLAS library found lacks cublasCreate_v2 or cublasSetStream_v2");
    library = NULL;
  }
}

void *dlop__cublas_symbol(const char *name) {
  if (name == NULL) return NULL;
  pthread_once(&load_once, load_cublas);
  return library ? dlsym(library, name) : NULL;
}

/* Report a failure both ways: into the caller's buffer and as libdlop's last error. */
static int fail(int status, char *error, size_t error_size, const char *message) {
  dlop__format(error, error_size, "%s", message);
  return dlop__error(status, "%s", message);
}

static const char *cublas_status_text(int status) {
  const char *text = status_string ? status_string(status) : NULL;
  return text ? text : "unknown cuBLAS status";
}

int dlop__cublas_handle(int32_t device_id, void *stream, void **handle, char *error,
                        size_t error_size) {
  char message[1200];
  if (handle == NULL) return fail(DLOP_INVALID_ARGUMENT, error, error_size, "cublas_handle: handle is NULL");
  *handle = NULL;
  int status = dlop__cuda_set_device(device_id);
  if (status != DLOP_OK) {
    snprintf(message, sizeof message, "cuBLAS on cuda:%d: %s", (int)device_id, dlop_last_error());
    return fail(status, error, error_size, message);
  }
  pthread_once(&load_once, load_cublas);
  if (library == NULL) return fail(DLOP_CUBLAS_ERROR, error, error_size, load_message);
  if (device_id < 0 || device_id >= DLOP_CUBLAS_MAX_DEVICES) {
    snprintf(message, sizeof message, "cuBLAS on cuda:%d: dlop supports devices 0..%d",
             (int)device_id, DLOP_CUBLAS_MAX_DEVICES - 1);
    return fail(DLOP_INVALID_ARGUMENT, error, error_size, message);
  }
  pthread_once(&key_once, create_key);
  if (!key_created)
    return fail(DLOP_OUT_OF_MEMORY, error, error_size,
                "cuBLAS: could not create the thread-local key for per-thread handles");
  thread_handles *mine = pthread_getspecific(handles_key);
  if (mine == NULL) {
    mine = calloc(1, sizeof *mine);
    if (mine == NULL || pthread_setspecific(handles_key, mine) != 0) {
      free(mine);
      return fail(DLOP_OUT_OF_MEMORY, error, error_size,
                  "cuBLAS: out of host memory for this thread's handle table");
    }
  }
  void *device_handle = mine->handles[device_id];
  if (device_handle == NULL) {
    /* The device's primary context is current, so cuBLAS binds the handle to it. */
    int result = create_handle(&device_handle);
    if (result != 0) {
      snprintf(message, sizeof message, "cublasCreate_v2 on cuda:%d failed: status %d (%s)",
               (int)device_id, result, cublas_status_text(result));
      return fail(DLOP_CUBLAS_ERROR, error, error_size, message);
    }
    mine->handles[device_id] = device_handle;
  }
  int result = set_stream(device_handle, stream);
  if (result != 0) {
    snprintf(message, sizeof message, "cublasSetStream_v2 on cuda:%d failed: status %d (%s)",
             (int)device_id, result, cublas_status_text(result));
    return fail(DLOP_CUBLAS_ERROR, error, error_size, message);
  }
  *handle = device_handle;
  return DLOP_OK;
}
