/* nvrtc.c — CUDA C compiled at run time through NVRTC: libnvrtc loaded with dlopen at first
 * use (DLOP_NVRTC_LIBRARY, else libnvrtc.so.13, then .12, on the loader's path and then in the
 * toolkit's lib64), never linked, so libdlop runs where it is missing. Images are compiled for
 * an architecture (a cubin when NVRTC knows it, PTX for the newest one below it otherwise),
 * cached by content in memory and on disk (jit_cache.h), and kept in memory for the life of
 * the process: the host's module table (host_api.c) knows a loaded image by its address, so an
 * image must never be freed and its address reused by another. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_driver.h"
#include "internal.h"
#include "jit.h"
#include "jit_cache.h"
#include "nvrtc_recall.h"

/* The name NVRTC gives the source in its log: "dlop_jit.cu(3): error: ...". */
#define PROGRAM_NAME "dlop_jit.cu"
#define NVRTC_SUCCESS 0
#define NVRTC_ERROR_OUT_OF_MEMORY 1

typedef struct nvrtc_program_st *nvrtc_program;

static struct {
  int (*version)(int *major, int *minor);
  int (*num_supported_archs)(int *count);
  int (*supported_archs)(int *archs);
  int (*create_program)(nvrtc_program *program, const char *source, const char *name,
                        int num_headers, const char *const *headers,
                        const char *const *include_names);
  int (*destroy_program)(nvrtc_program *program);
  int (*compile_program)(nvrtc_program program, int num_options, const char *const *options);
  int (*program_log_size)(nvrtc_program program, size_t *bytes);
  int (*program_log)(nvrtc_program program, char *log);
  int (*ptx_size)(nvrtc_program program, size_t *bytes);
  int (*ptx)(nvrtc_program program, char *ptx);
  int (*cubin_size)(nvrtc_program program, size_t *bytes);
  int (*cubin)(nvrtc_program program, char *cubin);
  const char *(*error_string)(int result);
} nvrtc;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static atomic_int loaded;
static char load_message[1536];
/* The loaded library's version ("NVRTC 13.0": part of every key) and what it compiles for. */
static dlop__nvrtc_facts loaded_facts;
/* The same, as an earlier process recorded them for the library the loader would pick
 * (nvrtc_recall.h): a cache hit needs no more, so that it does not pay for loading NVRTC. */
static pthread_once_t recall_once = PTHREAD_ONCE_INIT;
static dlop__nvrtc_facts recalled_facts;
static int recalled;

/* ---- loading ------------------------------------------------------------------------------ */

static void *try_open(const char *directory, const char *name, size_t *used) {
  char path[1024];
  if (directory) snprintf(path, sizeof path, "%s/%s", directory, name);
  else snprintf(path, sizeof path, "%s", name);
  void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == NULL && *used < sizeof load_message) {
    const char *why = dlerror();
    int found = why == NULL || strstr(why, "No such file") == NULL;
    *used += (size_t)snprintf(load_message + *used, sizeof load_message - *used, " %s%s%s%s",
                              path, found ? " (" : "", found && why ? why : "", found ? ")" : "");
  }
  return library;
}

static void *open_library(void) {
  size_t used = 0;
  const char *chosen = getenv("DLOP_NVRTC_LIBRARY");
  if (chosen != NULL && chosen[0] != '\0') {
    void *library = dlopen(chosen, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
      const char *why = dlerror();
      snprintf(load_message, sizeof load_message,
               "NVRTC (the CUDA run-time compiler) could not be loaded from DLOP_NVRTC_LIBRARY=%s "
               "(%s): point it at a libnvrtc.so, or unset it to search for libnvrtc.so.13 and "
               "libnvrtc.so.12",
               chosen, why ? why : "dlopen failed");
    }
    return library;
  }
  /* The loader's path first; then the toolkit's own folder, which is often not on it. */
  const char *directories[] = {NULL, getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
  used += (size_t)snprintf(load_message, sizeof load_message,
                           "NVRTC (the CUDA run-time compiler) not found: tried");
  void *library = NULL;
  for (size_t d = 0; d < sizeof directories / sizeof directories[0] && !library; d++) {
    char lib64[900];
    if (d > 0 && (directories[d] == NULL || directories[d][0] == '\0')) continue;
    if (d > 0) snprintf(lib64, sizeof lib64, "%s/lib64", directories[d]);
    for (size_t i = 0; i < DLOP__NVRTC_SONAMES && !library; i++)
      library = try_open(d > 0 ? lib64 : NULL, dlop__nvrtc_sonames[i], &used);
  }
  if (library == NULL && used < sizeof load_message)
    snprintf(load_message + used, sizeof load_message - used,
             "; install the CUDA toolkit's NVRTC (libnvrtc, CUDA 12 or 13) or set "
             "DLOP_NVRTC_LIBRARY to its path");
  return library;
}

/* 1 when a libnvrtc is in the process already (another library loaded it): dlopen returns that
 * copy whatever the record says, and loading it again costs nothing. */
static int preloaded;

static int loaded_already(const char *name) {
  void *library = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
  if (library != NULL) dlclose(library);
  return library != NULL;
}

/* What open_library would open is in the process already. */
static int nvrtc_in_process(void) {
  const char *chosen = getenv("DLOP_NVRTC_LIBRARY");
  if (chosen != NULL && chosen[0] != '\0') return loaded_already(chosen);
  for (size_t i = 0; i < DLOP__NVRTC_SONAMES; i++)
    if (loaded_already(dlop__nvrtc_sonames[i])) return 1;
  return 0;
}

static void recall(void) {
  preloaded = nvrtc_in_process();
  recalled = !preloaded && dlop__nvrtc_recall(&recalled_facts);
}

static int same_facts(const dlop__nvrtc_facts *a, const dlop__nvrtc_facts *b) {
  return strcmp(a->identity, b->identity) == 0 && a->num_archs == b->num_archs &&
         memcmp(a->archs, b->archs, (size_t)a->num_archs * sizeof *a->archs) == 0;
}

static void load_nvrtc(void) {
  void *library = open_library();
  if (library == NULL) return;
  struct {
    const char *name;
    void **slot;
  } symbols[] = {
      {"nvrtcVersion", (void **)&nvrtc.version},
      {"nvrtcGetNumSupportedArchs", (void **)&nvrtc.num_supported_archs},
      {"nvrtcGetSupportedArchs", (void **)&nvrtc.supported_archs},
      {"nvrtcCreateProgram", (void **)&nvrtc.create_program},
      {"nvrtcDestroyProgram", (void **)&nvrtc.destroy_program},
      {"nvrtcCompileProgram", (void **)&nvrtc.compile_program},
      {"nvrtcGetProgramLogSize", (void **)&nvrtc.program_log_size},
      {"nvrtcGetProgramLog", (void **)&nvrtc.program_log},
      {"nvrtcGetPTXSize", (void **)&nvrtc.ptx_size},
      {"nvrtcGetPTX", (void **)&nvrtc.ptx},
      {"nvrtcGetCUBINSize", (void **)&nvrtc.cubin_size},
      {"nvrtcGetCUBIN", (void **)&nvrtc.cubin},
      {"nvrtcGetErrorString", (void **)&nvrtc.error_string},
  };
  for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
    *symbols[i].slot = dlsym(library, symbols[i].name);
    if (*symbols[i].slot == NULL) {
      snprintf(load_message, sizeof load_message,
               "the NVRTC library found lacks %s: dlop needs NVRTC of CUDA 12 or newer "
               "(DLOP_NVRTC_LIBRARY names the library to use)",
               symbols[i].name);
      return;
    }
  }
  int major = 0, minor = 0, count = 0;
  int *archs = NULL;
  if (nvrtc.version(&major, &minor) != NVRTC_SUCCESS ||
      nvrtc.num_supported_archs(&count) != NVRTC_SUCCESS || count <= 0 ||
      (archs = calloc((size_t)count, sizeof *archs)) == NULL ||
      nvrtc.supported_archs(archs) != NVRTC_SUCCESS) {
    free(archs);
    snprintf(load_message, sizeof load_message,
             "NVRTC was loaded but does not say its version or architectures");
    return;
  }
  loaded_facts.archs = archs;
  loaded_facts.num_archs = count;
  snprintf(loaded_facts.identity, sizeof loaded_facts.identity, "NVRTC %d.%d", major, minor);
  atomic_store_explicit(&loaded, 1, memory_order_release);
  pthread_once(&recall_once, recall);
  if (!preloaded && (!recalled || !same_facts(&recalled_facts, &loaded_facts)))
    dlop__nvrtc_remember((const void *)nvrtc.version, &loaded_facts);
}

/* The facts keys are made of: the loaded library's; else the recorded ones; else (loading the
 * library) the loaded ones. NULL when NVRTC cannot be loaded (load_message says why). */
static const dlop__nvrtc_facts *known_facts(void) {
  if (atomic_load_explicit(&loaded, memory_order_acquire)) return &loaded_facts;
  pthread_once(&recall_once, recall);
  if (recalled) return &recalled_facts;
  pthread_once(&load_once, load_nvrtc);
  return atomic_load_explicit(&loaded, memory_order_acquire) ? &loaded_facts : NULL;
}

static int ensure_loaded(char *error, size_t error_size) {
  pthread_once(&load_once, load_nvrtc);
  if (!loaded) return dlop__jit_fail(DLOP_NOT_FOUND, error, error_size, "%s", load_message);
  return DLOP_OK;
}

int dlop__nvrtc_available(char *why, size_t why_size) {
  const dlop__nvrtc_facts *facts = known_facts();
  if (facts == NULL) dlop__format(why, why_size, "%s", load_message);
  else dlop__format(why, why_size, "%s", facts->identity);
  return facts != NULL;
}

/* ---- the target and the arguments --------------------------------------------------------- */

/* sm_<arch> (a cubin) when NVRTC knows arch; else compute_<newest known below arch> (PTX,
 * which the driver compiles for the GPU); an arch older than all NVRTC knows is an error. */
static int choose_target(const dlop__nvrtc_facts *facts, int32_t arch, char *target, size_t size,
                         int *is_ptx, char *error, size_t error_size) {
  const int *archs = facts->archs, num_archs = facts->num_archs;
  int below = 0;
  for (int i = 0; i < num_archs; i++) {
    if (archs[i] == arch) {
      snprintf(target, size, "sm_%d", (int)arch);
      *is_ptx = 0;
      return DLOP_OK;
    }
    if (archs[i] < arch && archs[i] > below) below = archs[i];
  }
  if (below == 0)
    return dlop__jit_fail(DLOP_UNSUPPORTED, error, error_size,
                          "%s cannot compile for sm_%d: the oldest architecture it knows is "
                          "sm_%d (its newest sm_%d)",
                          facts->identity, (int)arch, archs[0], archs[num_archs - 1]);
  snprintf(target, size, "compute_%d", below);
  *is_ptx = 1;
  return DLOP_OK;
}

static int check_arguments(const char *what, int32_t arch, const char *source,
                           const char *const *options, int32_t num_options, char *error,
                           size_t error_size) {
  if (source == NULL)
    return dlop__jit_fail(DLOP_INVALID_ARGUMENT, error, error_size, "%s: source is NULL", what);
  if (num_options < 0 || (num_options > 0 && options == NULL))
    return dlop__jit_fail(DLOP_INVALID_ARGUMENT, error, error_size,
                          "%s: %d options given but options is %s", what, (int)num_options,
                          options ? "set" : "NULL");
  if (arch < 10 || arch > 10000)
    return dlop__jit_fail(DLOP_INVALID_ARGUMENT, error, error_size,
                          "%s: architecture %d is not major * 10 + minor (90 for sm_90)", what,
                          (int)arch);
  for (int32_t i = 0; i < num_options; i++) {
    const char *option = options[i];
    if (option == NULL)
      return dlop__jit_fail(DLOP_INVALID_ARGUMENT, error, error_size, "%s: option %d is NULL",
                            what, (int)i);
    if (strncmp(option, "-arch", 5) == 0 || strncmp(option, "--gpu-architecture", 18) == 0 ||
        strncmp(option, "-gpu-architecture", 17) == 0)
      return dlop__jit_fail(DLOP_INVALID_ARGUMENT, error, error_size,
                            "%s: option %d (\"%s\") names the architecture, which the host "
                            "chooses (sm_%d here): leave it out",
                            what, (int)i, option, (int)arch);
  }
  return DLOP_OK;
}

/* ---- one NVRTC run ------------------------------------------------------------------------ */

static const char *result_text(int result) {
  const char *text = nvrtc.error_string ? nvrtc.error_string(result) : NULL;
  return text ? text : "unknown NVRTC result";
}

/* The program's log without trailing blank space, malloc'ed ("" when there is none). */
static char *program_log(nvrtc_program program) {
  size_t bytes = 0;
  char *log = NULL;
  if (nvrtc.program_log_size(program, &bytes) == NVRTC_SUCCESS && bytes > 0 &&
      (log = malloc(bytes + 1)) != NULL && nvrtc.program_log(program, log) == NVRTC_SUCCESS) {
    log[bytes] = '\0';
    size_t length = strlen(log);
    while (length > 0 && (log[length - 1] == '\n' || log[length - 1] == ' ')) log[--length] = '\0';
    return log;
  }
  free(log);
  return calloc(1, 1);
}

static int run_nvrtc(const char *target, int want_ptx, const char *source,
                     const char *const *options, int32_t num_options, void **image,
                     size_t *image_bytes, char *error, size_t error_size) {
  *image = NULL;
  char arch_option[64];
  snprintf(arch_option, sizeof arch_option, "--gpu-architecture=%s", target);
  const char **all = malloc(((size_t)num_options + 1) * sizeof *all);
  if (all == NULL)
    return dlop__jit_fail(DLOP_OUT_OF_MEMORY, error, error_size, "NVRTC: out of host memory");
  for (int32_t i = 0; i < num_options; i++) all[i] = options[i];
  all[num_options] = arch_option;
  nvrtc_program program = NULL;
  int result = nvrtc.create_program(&program, source, PROGRAM_NAME, 0, NULL, NULL);
  if (result != NVRTC_SUCCESS) {
    free(all);
    return dlop__jit_fail(result == NVRTC_ERROR_OUT_OF_MEMORY ? DLOP_OUT_OF_MEMORY : DLOP_INTERNAL,
                          error, error_size, "nvrtcCreateProgram failed: %s", result_text(result));
  }
  result = nvrtc.compile_program(program, num_options + 1, all);
  free(all);
  int status = DLOP_OK;
  if (result != NVRTC_SUCCESS) {
    char *log = program_log(program);
    status = dlop__jit_fail(result == NVRTC_ERROR_OUT_OF_MEMORY ? DLOP_OUT_OF_MEMORY
                                                                : DLOP_INVALID_ARGUMENT,
                            error, error_size,
                            "%s could not compile the CUDA source for %s (%s); its log:\n%s",
                            loaded_facts.identity, target, result_text(result),
                            log && log[0] ? log : "(empty)");
    free(log);
  } else {
    size_t bytes = 0;
    result = want_ptx ? nvrtc.ptx_size(program, &bytes) : nvrtc.cubin_size(program, &bytes);
    char *output = result == NVRTC_SUCCESS && bytes > 0 ? malloc(bytes + 1) : NULL;
    if (output != NULL)
      result = want_ptx ? nvrtc.ptx(program, output) : nvrtc.cubin(program, output);
    if (output == NULL || result != NVRTC_SUCCESS) {
      free(output);
      status = dlop__jit_fail(output == NULL && result == NVRTC_SUCCESS ? DLOP_OUT_OF_MEMORY
                                                                         : DLOP_INTERNAL,
                              error, error_size, "%s compiled the source for %s but gave no %s (%s)",
                              loaded_facts.identity, target, want_ptx ? "PTX" : "cubin",
                              result_text(result));
    } else {
      output[bytes] = '\0';
      *image = output;
      *image_bytes = bytes;
    }
  }
  nvrtc.destroy_program(&program);
  return status;
}

/* ---- the memory table --------------------------------------------------------------------- */

typedef struct image_entry {
  uint8_t digest[DLOP__SHA256_BYTES];
  int ready; /* 0 while one thread compiles it (others wait) */
  void *image;
  size_t bytes;
  int is_ptx;
  struct image_entry *next;
} image_entry;

static pthread_mutex_t images_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t images_changed = PTHREAD_COND_INITIALIZER;
static image_entry *images;

static image_entry *find_locked(const dlop__jit_key *key) {
  for (image_entry *entry = images; entry; entry = entry->next)
    if (memcmp(entry->digest, key->digest, sizeof entry->digest) == 0) return entry;
  return NULL;
}

static void remove_locked(image_entry *gone) {
  for (image_entry **link = &images; *link; link = &(*link)->next) {
    if (*link == gone) {
      *link = gone->next;
      break;
    }
  }
}

/* The image of (arch, source, options): from memory, else disk, else NVRTC. The entry stays
 * valid (and unchanged) for the life of the process. */
static int cached_image(const char *what, int32_t arch, const char *source,
                        const char *const *options, int32_t num_options,
                        const image_entry **result, char *error, size_t error_size) {
  const dlop__nvrtc_facts *facts = known_facts();
  if (facts == NULL) return ensure_loaded(error, error_size);
  int status = check_arguments(what, arch, source, options, num_options, error, error_size);
  if (status != DLOP_OK) return status;
  char target[32];
  int is_ptx = 0;
  dlop__jit_key key;
retry:
  status = choose_target(facts, arch, target, sizeof target, &is_ptx, error, error_size);
  if (status != DLOP_OK) return status;
  dlop__jit_key_make("nvrtc", facts->identity, target, options, num_options, source, &key);

  pthread_mutex_lock(&images_lock);
  image_entry *entry;
  for (;;) {
    entry = find_locked(&key);
    if (entry == NULL) break;
    if (entry->ready) {
      pthread_mutex_unlock(&images_lock);
      dlop__jit_count_memory_hit();
      *result = entry;
      return DLOP_OK;
    }
    pthread_cond_wait(&images_changed, &images_lock);
  }
  entry = calloc(1, sizeof *entry);
  if (entry == NULL) {
    pthread_mutex_unlock(&images_lock);
    return dlop__jit_fail(DLOP_OUT_OF_MEMORY, error, error_size, "%s: out of host memory", what);
  }
  memcpy(entry->digest, key.digest, sizeof entry->digest);
  entry->is_ptx = is_ptx;
  entry->next = images;
  images = entry;
  pthread_mutex_unlock(&images_lock);

  /* This thread builds the entry; others asking for the key wait on images_changed. */
  dlop__jit_kind kind = is_ptx ? DLOP__JIT_PTX : DLOP__JIT_CUBIN;
  double started = dlop__jit_now();
  int found = dlop__jit_entry_read(&key, kind, &entry->image, &entry->bytes);
  if (found == DLOP__JIT_ENTRY_FOUND) {
    dlop__jit_count_disk_hit(dlop__jit_now() - started);
  } else {
    if (found == DLOP__JIT_ENTRY_CORRUPT) dlop__jit_count_corrupt();
    status = ensure_loaded(error, error_size);
    if (status == DLOP_OK && facts != &loaded_facts && !same_facts(facts, &loaded_facts)) {
      /* The record named another NVRTC than the one loaded: key with the loaded one's facts. */
      pthread_mutex_lock(&images_lock);
      remove_locked(entry);
      free(entry);
      pthread_cond_broadcast(&images_changed);
      pthread_mutex_unlock(&images_lock);
      facts = &loaded_facts;
      goto retry;
    }
    if (status == DLOP_OK) {
      started = dlop__jit_now();
      status = run_nvrtc(target, is_ptx, source, options, num_options, &entry->image,
                         &entry->bytes, error, error_size);
      dlop__jit_count_compile(dlop__jit_now() - started, status != DLOP_OK);
    }
    if (status == DLOP_OK) dlop__jit_entry_write(&key, kind, entry->image, entry->bytes);
  }
  pthread_mutex_lock(&images_lock);
  if (status == DLOP_OK) {
    entry->ready = 1;
  } else {
    remove_locked(entry);
    free(entry);
    entry = NULL;
  }
  pthread_cond_broadcast(&images_changed);
  pthread_mutex_unlock(&images_lock);
  *result = entry;
  return status;
}

/* ---- the interface (jit.h) ---------------------------------------------------------------- */

int dlop__nvrtc_compile(int32_t arch, const char *source, const char *const *options,
                        int32_t num_options, void **image, size_t *image_bytes, int *is_ptx,
                        char *error, size_t error_size) {
  if (image == NULL || image_bytes == NULL || is_ptx == NULL)
    return dlop__jit_fail(DLOP_INVALID_ARGUMENT, error, error_size,
                          "dlop__nvrtc_compile: image, image_bytes or is_ptx is NULL");
  *image = NULL;
  *image_bytes = 0;
  *is_ptx = 0;
  const image_entry *entry;
  int status = cached_image("dlop__nvrtc_compile", arch, source, options, num_options, &entry,
                            error, error_size);
  if (status != DLOP_OK) return status;
  char *copy = malloc(entry->bytes + 1);
  if (copy == NULL)
    return dlop__jit_fail(DLOP_OUT_OF_MEMORY, error, error_size,
                          "dlop__nvrtc_compile: out of host memory for a %zu-byte image",
                          entry->bytes);
  memcpy(copy, entry->image, entry->bytes);
  copy[entry->bytes] = '\0';
  *image = copy;
  *image_bytes = entry->bytes;
  *is_ptx = entry->is_ptx;
  return DLOP_OK;
}

int dlop__nvrtc_image(int32_t arch, const char *source, const char *const *options,
                      int32_t num_options, const void **image, size_t *image_bytes, int *is_ptx,
                      char *error, size_t error_size) {
  if (image == NULL || image_bytes == NULL || is_ptx == NULL)
    return dlop__jit_fail(DLOP_INVALID_ARGUMENT, error, error_size,
                          "dlop_cuda_compile: image, image_bytes or is_ptx is NULL");
  *image = NULL;
  *image_bytes = 0;
  *is_ptx = 0;
  const image_entry *entry;
  int status = cached_image("dlop_cuda_compile", arch, source, options, num_options, &entry,
                            error, error_size);
  if (status != DLOP_OK) return status;
  *image = entry->image;
  *image_bytes = entry->bytes;
  *is_ptx = entry->is_ptx;
  return DLOP_OK;
}

int dlop__cuda_compile_module(int32_t device_id, const char *source, const char *const *options,
                              int32_t num_options, void **module, char *error, size_t error_size) {
  if (module == NULL)
    return dlop__jit_fail(DLOP_INVALID_ARGUMENT, error, error_size, "cuda_compile: module is NULL");
  *module = NULL;
  int32_t arch = 0;
  int status = dlop_cuda_device_arch(device_id, &arch);
  if (status != DLOP_OK)
    return dlop__jit_fail(status, error, error_size, "cuda_compile on cuda:%d: %s",
                          (int)device_id, dlop_last_error());
  const image_entry *entry;
  status = cached_image("cuda_compile", arch, source, options, num_options, &entry,
                        error, error_size);
  if (status != DLOP_OK) return status;
  /* The image lives as long as the process, so the module table may key it by address. */
  return dlop__host_api()->cuda_module_load(device_id, entry->image, module, error, error_size);
}
