/* cpu_blas_info.c — what the blas ops tell `dlop info` and dlop.info() about their CPU path
 * (runtime_info, ABI 1.2): which CBLAS library the process uses, from where and why it was
 * chosen, its integer width, and for OpenBLAS its version, the kernel set it picked for this
 * CPU and its thread count; or, where none loads, the loader's message. Asking loads the
 * library, as the first CPU thunk would. */
#include <stdio.h>
#include <string.h>

#include "blas_plugin.h"

static const char *source_name(blas_cpu_source source) {
  switch (source) {
    case BLAS_SOURCE_ENVIRONMENT: return "DLOP_BLAS_LIBRARY";
    case BLAS_SOURCE_PROCESS: return "scipy-openblas already loaded in this process (NumPy's or SciPy's)";
    case BLAS_SOURCE_WHEEL: return "scipy-openblas wheel";
    case BLAS_SOURCE_SYSTEM: return "system library";
  }
  return "unknown";
}

/* Append one "key: value" line, bounded. */
static void line(char *text, size_t text_size, size_t *used, const char *key, const char *value) {
  if (*used >= text_size) return;
  int written = snprintf(text + *used, text_size - *used, "%s: %s\n", key, value);
  if (written > 0) *used += (size_t)written;
}

void blas_cpu_library_describe(const blas_cpu_library *lib, char *text, size_t text_size) {
  size_t used = 0;
  char value[64];
  text[0] = '\0';
  line(text, text_size, &used, "blas library", lib->path);
  line(text, text_size, &used, "blas found as", source_name(lib->source));
  line(text, text_size, &used, "blas symbols", lib->sgemm_symbol);
  line(text, text_size, &used, "blas integers",
       lib->ilp64 ? "64-bit (ILP64)" : "32-bit (LP64: dimensions up to 2^31-1)");
  if (lib->config) line(text, text_size, &used, "blas config", lib->config());
  if (lib->corename) line(text, text_size, &used, "blas kernels", lib->corename());
  if (lib->num_threads) {
    snprintf(value, sizeof value, "%d", lib->num_threads());
    line(text, text_size, &used, "blas threads", value);
  }
}

int blas_runtime_info(const dlop_runtime_info_args *args) {
  char why[2048];
  if (args->device_type != DLOP_DEVICE_CPU) {
    dlop_set_error(args->error, args->error_size,
                   "the CUDA path calls the host's cuBLAS (cublas_symbol): nothing of its own to "
                   "report");
    return DLOP_UNSUPPORTED;
  }
  const blas_cpu_library *lib = blas_cpu_library_get(why, sizeof why);
  if (lib == NULL) {
    snprintf(args->text, args->text_size, "blas library: none: %s\n", why);
    return DLOP_OK;
  }
  blas_cpu_library_describe(lib, args->text, args->text_size);
  return DLOP_OK;
}
