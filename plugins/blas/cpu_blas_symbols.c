/* cpu_blas_symbols.c — the CBLAS functions of an open library, under whichever names it
 * exports them: plain (cblas_sgemm: Debian's OpenBLAS, reference CBLAS), scipy_-prefixed
 * (scipy_cblas_sgemm: scipy-openblas32, LP64) or scipy_-prefixed and 64_-suffixed
 * (scipy_cblas_sgemm64_: scipy-openblas64 and the copy NumPy >= 2 bundles, ILP64), and the
 * 64_-suffixed form some ILP64 OpenBLAS builds use without a prefix.
 * The integer width follows the names, except for plain names: an OpenBLAS built with
 * INTERFACE64 but no suffix (Debian's libopenblas64) exports cblas_sgemm taking 64-bit ints,
 * which only its configuration string tells (USE64BITINT); calling it as LP64 would pass
 * garbage dimensions, so that string decides. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "blas_plugin.h"

typedef struct symbol_style {
  const char *prefix, *suffix;
  int ilp64; /* 1: 64-bit ints, 0: int, -1: ask openblas_get_config */
} symbol_style;

static const symbol_style styles[] = {
    {"scipy_", "64_", 1}, {"scipy_", "", 0}, {"", "64_", 1}, {"", "", -1}};

static void *lookup(void *handle, const symbol_style *style, const char *name, char *full,
                    size_t full_size) {
  snprintf(full, full_size, "%s%s%s", style->prefix, name, style->suffix);
  return dlsym(handle, full);
}

int blas_cpu_resolve(void *handle, blas_cpu_library *lib, const char **why) {
  static char sgemm_names[4][64]; /* one per style: the loader resolves once per process */
  char name[64];
  for (size_t i = 0; i < sizeof styles / sizeof styles[0]; i++) {
    const symbol_style *style = &styles[i];
    void *sgemm = lookup(handle, style, "cblas_sgemm", sgemm_names[i], sizeof sgemm_names[i]);
    void *dgemm = lookup(handle, style, "cblas_dgemm", name, sizeof name);
    if (sgemm == NULL || dgemm == NULL) continue;
    blas_cpu_library found = {0};
    found.corename = (char *(*)(void))lookup(handle, style, "openblas_get_corename", name, sizeof name);
    found.config = (char *(*)(void))lookup(handle, style, "openblas_get_config", name, sizeof name);
    found.num_threads = (int (*)(void))lookup(handle, style, "openblas_get_num_threads", name, sizeof name);
    found.ilp64 = style->ilp64;
    if (found.ilp64 < 0) {
      const char *config = found.config ? found.config() : NULL;
      found.ilp64 = config != NULL && strstr(config, "USE64BITINT") != NULL;
    }
    if (found.ilp64) {
      found.sgemm64 = (blas_cblas64_sgemm_fn)sgemm;
      found.dgemm64 = (blas_cblas64_dgemm_fn)dgemm;
      found.sdot64 = (blas_cblas64_sdot_fn)lookup(handle, style, "cblas_sdot", name, sizeof name);
      found.ddot64 = (blas_cblas64_ddot_fn)lookup(handle, style, "cblas_ddot", name, sizeof name);
      found.sgemv64 = (blas_cblas64_sgemv_fn)lookup(handle, style, "cblas_sgemv", name, sizeof name);
      found.dgemv64 = (blas_cblas64_dgemv_fn)lookup(handle, style, "cblas_dgemv", name, sizeof name);
    } else {
      found.sgemm = (blas_cblas_sgemm_fn)sgemm;
      found.dgemm = (blas_cblas_dgemm_fn)dgemm;
      found.sdot = (blas_cblas_sdot_fn)lookup(handle, style, "cblas_sdot", name, sizeof name);
      found.ddot = (blas_cblas_ddot_fn)lookup(handle, style, "cblas_ddot", name, sizeof name);
      found.sgemv = (blas_cblas_sgemv_fn)lookup(handle, style, "cblas_sgemv", name, sizeof name);
      found.dgemv = (blas_cblas_dgemv_fn)lookup(handle, style, "cblas_dgemv", name, sizeof name);
    }
    found.sgemm_symbol = sgemm_names[i];
    found.path = lib->path;
    found.source = lib->source;
    *lib = found;
    return 1;
  }
  *why = "loaded, but it has no cblas_sgemm/cblas_dgemm (nor scipy_cblas_sgemm, "
         "scipy_cblas_sgemm64_ or cblas_sgemm64_): not a CBLAS library";
  return 0;
}
