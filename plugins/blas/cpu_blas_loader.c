/* cpu_blas_loader.c — the CPU BLAS, found and loaded once per process with dlopen:
 * DLOP_BLAS_LIBRARY when set (and then only it), else libopenblas.so.0, libopenblas.so,
 * libcblas.so.3, libblas.so.3 (Debian's alternatives point it at OpenBLAS when installed).
 * Why dlopen and not a link: the plugin must load where no BLAS is installed (a GPU machine
 * without Debian packages), where its CUDA path works; only CPU thunks need the library, and
 * they fail with a message saying what was tried and what to install.
 * Threads: OpenBLAS keeps its own thread pool (OPENBLAS_NUM_THREADS sizes it); the pthread
 * build (libopenblas0-pthread, 0.3.21 in Debian 12) serializes concurrent calls into its pool,
 * so host threads may run thunks at the same time (tests/unit/test_blas.c does). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas_plugin.h"

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static blas_cpu_library library;
static int library_loaded;
static char load_message[1536];

/* Append to load_message, bounded. */
static void note(size_t *used, const char *fmt, const char *a, const char *b) {
  if (*used >= sizeof load_message) return;
  int written = snprintf(load_message + *used, sizeof load_message - *used, fmt, a, b);
  if (written > 0) *used += (size_t)written;
}

/* OpenBLAS builds with DYNAMIC_ARCH pick their kernels from the CPU's model number; an older
 * release on a newer CPU (Debian 12's 0.3.21 on an Emerald Rapids Xeon, model 207) does not
 * know the model and falls back to its SSE3 "Prescott" kernels, 5x slower than the CPU allows
 * (measured: 230 against 1150 GFLOP/s for float32 at 4096 on 16 cores). The plugin cannot
 * switch the core after OpenBLAS has started, and setting OPENBLAS_CORETYPE itself would change
 * the environment of the whole process, so it says so once, with the value to set. */
static void warn_if_generic_core(void *handle, const char *path) {
  typedef char *(*corename_fn)(void);
  static const char *const generic[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem",
                                        "Atom", "Banias", "Northwood", "Katmai", "Coppermine"};
  corename_fn corename = (corename_fn)dlsym(handle, "openblas_get_corename");
  const char *core = corename ? corename() : NULL;
  const char *suggest = NULL;
  char message[512];
  if (core == NULL) return;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) suggest = "SkylakeX (or Cooperlake where the CPU has AVX512-BF16)";
  else if (__builtin_cpu_supports("avx2")) suggest = "Haswell";
#endif
  if (suggest == NULL) return;
  for (size_t i = 0; i < sizeof generic / sizeof generic[0]; i++) {
    if (strcmp(core, generic[i]) != 0) continue;
    snprintf(message, sizeof message,
             "%s chose its generic '%s' kernels: it does not know this CPU, which has %s; CPU "
             "GEMMs run several times slower than they could. Set OPENBLAS_CORETYPE=%s before "
             "the process starts (or use a newer OpenBLAS through DLOP_BLAS_LIBRARY)",
             path, core, strncmp(suggest, "Haswell", 7) == 0 ? "AVX2" : "AVX-512", suggest);
    if (DLOP_HOST_HAS(blas_host(), log)) blas_host()->log(DLOP_LOG_WARNING, "blas", message);
    return;
  }
}

/* Open one candidate and resolve the CBLAS GEMMs; on failure say why in load_message. */
static int try_library(const char *path, size_t *used, int first) {
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    const char *why = dlerror();
    note(used, first ? "%s (%s)" : ", %s (%s)", path, why ? why : "dlopen failed");
    return 0;
  }
  blas_cblas_sgemm_fn sgemm = (blas_cblas_sgemm_fn)dlsym(handle, "cblas_sgemm");
  blas_cblas_dgemm_fn dgemm = (blas_cblas_dgemm_fn)dlsym(handle, "cblas_dgemm");
  if (sgemm == NULL || dgemm == NULL) {
    note(used, first ? "%s (%s)" : ", %s (%s)", path,
         "loaded, but it has no cblas_sgemm/cblas_dgemm: not a CBLAS library");
    dlclose(handle);
    return 0;
  }
  library.sgemm = sgemm;
  library.dgemm = dgemm;
  library.sdot = (blas_cblas_sdot_fn)dlsym(handle, "cblas_sdot");
  library.ddot = (blas_cblas_ddot_fn)dlsym(handle, "cblas_ddot");
  library.sgemv = (blas_cblas_sgemv_fn)dlsym(handle, "cblas_sgemv");
  library.dgemv = (blas_cblas_dgemv_fn)dlsym(handle, "cblas_dgemv");
  library.path = path;
  library_loaded = 1;
  warn_if_generic_core(handle, path);
  return 1; /* kept open for the life of the process */
}

static void load_library(void) {
  static const char *const candidates[] = {"libopenblas.so.0", "libopenblas.so", "libcblas.so.3",
                                           "libblas.so.3"};
  static char chosen[1024];
  const char *requested = getenv("DLOP_BLAS_LIBRARY");
  size_t used = 0;
  note(&used, "%sno CBLAS library could be loaded: tried ", "", "");
  if (requested != NULL && requested[0] != '\0') {
    /* an explicit choice is honoured or reported, never replaced by another library */
    snprintf(chosen, sizeof chosen, "%s", requested);
    note(&used, "DLOP_BLAS_LIBRARY=%s%s", "", "");
    if (try_library(chosen, &used, 1)) return;
    note(&used, "; set DLOP_BLAS_LIBRARY to a CBLAS library (a path to libopenblas.so.0 or %s%s)",
         "libblas.so.3", "");
    note(&used, ", or unset it to use the system's (install libopenblas0: apt-get install "
                "libopenblas0-pthread)%s%s", "", "");
    return;
  }
  for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++)
    if (try_library(candidates[i], &used, i == 0)) return;
  note(&used, "; install libopenblas0 (apt-get install libopenblas0-pthread) or set "
              "DLOP_BLAS_LIBRARY to a CBLAS library's path%s%s", "", "");
}

const blas_cpu_library *blas_cpu_library_get(char *error, size_t error_size) {
  pthread_once(&load_once, load_library);
  if (library_loaded) return &library;
  dlop_set_error(error, error_size, "%s", load_message);
  return NULL;
}
