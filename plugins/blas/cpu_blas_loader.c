/* cpu_blas_loader.c — the CPU BLAS, found and loaded once per process with dlopen, first found
 * wins:
 *   1. DLOP_BLAS_LIBRARY when set, and then only it (an explicit choice is honoured or
 *      reported, never replaced by another library);
 *   2. a scipy-openblas the process has already loaded (NumPy >= 2's ILP64 copy, SciPy's):
 *      reused, so the process has one OpenBLAS and one thread pool (cpu_blas_loaded.c);
 *   3. the scipy-openblas64 / scipy-openblas32 wheel's library: the paths the build found in its
 *      Python (DLOP_BLAS_WHEEL_LIBRARIES, recorded by CMake from scipy_openblas64.get_lib_dir(),
 *      or NumPy's bundled copy where no wheel is installed), then libscipy_openblas64_.so and
 *      libscipy_openblas.so on the library search path;
 *   4. the system's: libopenblas.so.0, libopenblas.so, libcblas.so.3, libblas.so.3.
 * Why scipy-openblas before the system's: Debian 12's OpenBLAS (0.3.21) does not know current
 * CPUs, falls back to its oldest kernels and ran gemm at a fifth of NumPy's speed; the wheels
 * are the release NumPy and SciPy ship. Why nothing is set in the environment to steer it:
 * OPENBLAS_* variables belong to other libraries of the process; the order above is dlop's own.
 * Symbols and integer width are resolved by cpu_blas_symbols.c.
 * Why dlopen and not a link: the plugin must load where no BLAS is installed (a GPU machine
 * without Debian packages), where its CUDA path works; only CPU thunks need the library, and
 * they fail with a message saying what was tried and what to install.
 * Threads: OpenBLAS keeps its own thread pool (OPENBLAS_NUM_THREADS sizes it); its pthread
 * builds serialize concurrent calls into the pool, so host threads may run thunks at the same
 * time (tests/unit/test_blas.c does). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas_plugin.h"

#ifndef DLOP_BLAS_WHEEL_LIBRARIES
#define DLOP_BLAS_WHEEL_LIBRARIES "" /* colon-separated paths; the build sets it */
#endif

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static blas_cpu_library library;
static int library_loaded;
static char load_message[2048];

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
static void warn_if_generic_core(const blas_cpu_library *lib) {
  const char *path = lib->path;
  static const char *const generic[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem",
                                        "Atom", "Banias", "Northwood", "Katmai", "Coppermine"};
  const char *core = lib->corename ? lib->corename() : NULL;
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
             "the process starts, or pip install scipy-openblas64 (then rebuild dlop) or set "
             "DLOP_BLAS_LIBRARY to a newer OpenBLAS",
             path, core, strncmp(suggest, "Haswell", 7) == 0 ? "AVX2" : "AVX-512", suggest);
    if (DLOP_HOST_HAS(blas_host(), log)) blas_host()->log(DLOP_LOG_WARNING, "blas", message);
    return;
  }
}

/* Open one candidate (flags: RTLD_NOLOAD for one already loaded) and resolve its CBLAS; on
 * failure say why in load_message. */
static int try_library(const char *path, blas_cpu_source source, int flags, size_t *used) {
  static char chosen[1024];
  static int tried; /* under pthread_once: one caller */
  const char *separator = tried++ > 0 ? ", " : "";
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | flags);
  const char *why = NULL;
  if (handle == NULL) {
    why = dlerror();
    note(used, "%s%s", separator, path);
    note(used, " (%s)%s", why ? why : "dlopen failed", "");
    return 0;
  }
  blas_cpu_library found = {0};
  snprintf(chosen, sizeof chosen, "%s", path);
  found.path = chosen;
  found.source = source;
  if (!blas_cpu_resolve(handle, &found, &why)) {
    note(used, "%s%s", separator, path);
    note(used, " (%s)%s", why, "");
    dlclose(handle);
    return 0;
  }
  library = found;
  library_loaded = 1;
  warn_if_generic_core(&library);
  return 1; /* kept open for the life of the process */
}

/* The wheel's libraries the build recorded (colon-separated), then their names on the search
 * path. */
static int try_wheels(size_t *used) {
  static const char recorded[] = DLOP_BLAS_WHEEL_LIBRARIES;
  static const char *const names[] = {"libscipy_openblas64_.so", "libscipy_openblas.so"};
  char path[1024];
  for (const char *p = recorded; *p != '\0';) {
    size_t length = strcspn(p, ":");
    if (length > 0 && length < sizeof path) {
      memcpy(path, p, length);
      path[length] = '\0';
      if (try_library(path, BLAS_SOURCE_WHEEL, 0, used)) return 1;
    }
    p += length + (p[length] == ':');
  }
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (try_library(names[i], BLAS_SOURCE_WHEEL, 0, used)) return 1;
  return 0;
}

static void load_library(void) {
  static const char *const system[] = {"libopenblas.so.0", "libopenblas.so", "libcblas.so.3",
                                       "libblas.so.3"};
  const char *requested = getenv("DLOP_BLAS_LIBRARY");
  const char *loaded[8];
  size_t used = 0;
  note(&used, "%sno CBLAS library could be loaded: tried %s", "", "");
  if (requested != NULL && requested[0] != '\0') {
    note(&used, "DLOP_BLAS_LIBRARY=%s%s", "", "");
    if (try_library(requested, BLAS_SOURCE_ENVIRONMENT, 0, &used)) return;
    note(&used, "; set DLOP_BLAS_LIBRARY to a CBLAS library (a path to libopenblas.so.0, "
                "libscipy_openblas64_.so or %s%s)", "libblas.so.3", "");
    note(&used, ", or unset it to use scipy-openblas or the system's (pip install "
                "scipy-openblas64, or apt-get install libopenblas0-pthread)%s%s", "", "");
    return;
  }
  int count = blas_cpu_loaded_scipy_openblas(loaded, 8);
  for (int i = 0; i < count; i++)
    if (try_library(loaded[i], BLAS_SOURCE_PROCESS, RTLD_NOLOAD, &used)) return;
  if (try_wheels(&used)) return;
  for (size_t i = 0; i < sizeof system / sizeof system[0]; i++)
    if (try_library(system[i], BLAS_SOURCE_SYSTEM, 0, &used)) return;
  note(&used, "; install scipy-openblas64 (pip install scipy-openblas64, then rebuild dlop) or "
              "libopenblas0 (apt-get install libopenblas0-pthread), or set DLOP_BLAS_LIBRARY to "
              "a CBLAS library's path%s%s", "", "");
}

const blas_cpu_library *blas_cpu_library_get(char *error, size_t error_size) {
  pthread_once(&load_once, load_library);
  if (library_loaded) return &library;
  dlop_set_error(error, error_size, "%s", load_message);
  return NULL;
}
