/* jit_stats.c — the public face of run-time compilation (dlop/runtime.h): its statistics and
 * the directory of its disk cache. */
#include <stddef.h>
#include <string.h>

#include "internal.h"
#include "jit.h"
#include "jit_cache.h"

int dlop_jit_stats_get(dlop_jit_stats *stats) {
  if (stats == NULL) return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_jit_stats_get: stats is NULL");
  uint32_t wanted = stats->struct_size;
  if (wanted < offsetof(dlop_jit_stats, compiles))
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_jit_stats_get: stats->struct_size is %u: set it to "
                       "sizeof(dlop_jit_stats) (%zu)",
                       (unsigned)wanted, sizeof(dlop_jit_stats));
  dlop__jit_stats counted;
  dlop__jit_get_stats(&counted);
  dlop_jit_stats result;
  memset(&result, 0, sizeof result);
  result.compiles = (uint64_t)counted.compiles;
  result.compile_errors = (uint64_t)counted.compile_errors;
  result.memory_hits = (uint64_t)counted.memory_hits;
  result.disk_hits = (uint64_t)counted.disk_hits;
  result.corrupt_entries = (uint64_t)counted.corrupt_entries;
  result.compile_seconds = counted.compile_seconds;
  result.disk_hit_seconds = counted.disk_hit_seconds;
  /* A caller compiled against an older, shorter struct gets only the fields it knows. */
  size_t size = wanted < sizeof result ? wanted : sizeof result;
  result.struct_size = (uint32_t)size;
  memcpy(stats, &result, size);
  return DLOP_OK;
}

int dlop_jit_cache_directory(char *buffer, size_t size) {
  if (buffer == NULL || size == 0)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_jit_cache_directory: buffer is %s",
                       buffer == NULL ? "NULL" : "of size 0");
  const char *directory = dlop__jit_cache_dir();
  size_t length = strlen(directory);
  if (length >= size)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_jit_cache_directory: the directory (%zu bytes) does not fit in a "
                       "buffer of %zu bytes",
                       length + 1, size);
  memcpy(buffer, directory, length + 1);
  return DLOP_OK;
}
