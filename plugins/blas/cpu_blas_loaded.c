/* cpu_blas_loaded.c — the scipy-openblas libraries this process has already loaded: NumPy >= 2
 * wheels load numpy.libs/libscipy_openblas64_-<hash>.so, SciPy's load scipy.libs'
 * libscipy_openblas-<hash>.so. Using that one instead of opening another OpenBLAS gives the
 * process one BLAS and one thread pool rather than two pools competing for the same cores, and
 * the kernels NumPy uses (a release that knows current CPUs).
 * Found by file name (libscipy_openblas...) among the loaded objects: those names are the
 * scipy-openblas builds, whose prefixed symbols cannot clash with another BLAS. */
#define _GNU_SOURCE
#include <link.h>
#include <string.h>

#include "blas_plugin.h"

#define MAX_FOUND 8

typedef struct found_list {
  char names[MAX_FOUND][1024];
  int count;
} found_list;

static int visit(struct dl_phdr_info *info, size_t size, void *data) {
  found_list *found = (found_list *)data;
  const char *name = info->dlpi_name, *base;
  (void)size;
  if (name == NULL || name[0] == '\0' || found->count == MAX_FOUND) return 0;
  base = strrchr(name, '/');
  base = base ? base + 1 : name;
  if (strncmp(base, "libscipy_openblas", 17) != 0) return 0;
  if (strlen(name) >= sizeof found->names[0]) return 0; /* a path this long cannot be reopened */
  strcpy(found->names[found->count++], name);
  return 0;
}

int blas_cpu_loaded_scipy_openblas(const char **paths, int max) {
  static found_list found; /* called once per process, under the loader's pthread_once */
  found.count = 0;
  dl_iterate_phdr(visit, &found);
  int n = found.count < max ? found.count : max;
  for (int i = 0; i < n; i++) paths[i] = found.names[i];
  return n;
}
