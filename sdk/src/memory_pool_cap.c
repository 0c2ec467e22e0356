/* memory_pool_cap.c — the cap on a pool's cached bytes: the environment's
 * DLOP_POOL_MAX_CACHED_BYTES (read once, "512M" or "2G" accepted) for every pool, else 1 GiB
 * (or 1/8 of physical memory) for the host and none for GPUs. */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "memory_pool.h"

/* Without a cap, freed blocks of ever-new sizes pile up: the cache was only released when an
 * allocation failed, which on the host practically never happens (100 growing allocations left
 * 20 GB cached). The host pool keeps at most 1 GiB, or 1/8 of physical memory if smaller. */
#define DLOP_POOL_CPU_DEFAULT_MAX_CACHED ((uint64_t)1 << 30)

static pthread_once_t environment_once = PTHREAD_ONCE_INIT;
static int environment_cap_set;     /* DLOP_POOL_MAX_CACHED_BYTES was given and valid */
static uint64_t environment_cap;

/* "1048576", "512K", "512M", "2G", "1T" (binary units; an optional trailing B or iB). */
static int parse_byte_count(const char *text, uint64_t *value) {
  const char *p = text;
  while (isspace((unsigned char)*p)) p++;
  if (!isdigit((unsigned char)*p)) return 0;
  errno = 0;
  char *end;
  unsigned long long number = strtoull(p, &end, 10);
  if (errno == ERANGE) return 0;
  unsigned shift = 0;
  switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    default: break;
  }
  if (shift && *end == 'i') end++;
  if (toupper((unsigned char)*end) == 'B') end++;
  while (isspace((unsigned char)*end)) end++;
  if (*end != '\0') return 0;
  if (shift && number > (UINT64_MAX >> shift)) return 0;
  *value = (uint64_t)number << shift;
  return 1;
}

static void read_environment(void) {
  const char *text = getenv("DLOP_POOL_MAX_CACHED_BYTES");
  if (text == NULL || *text == '\0') return;
  if (parse_byte_count(text, &environment_cap)) {
    environment_cap_set = 1;
  } else {
    dlop__warn("DLOP_POOL_MAX_CACHED_BYTES='%s' is not a byte count (expected e.g. 1073741824, "
               "512M or 2G); using the default caps",
               text);
  }
}

/* GPUs have no cap by default: their cache is released when cuMemAlloc fails. */
uint64_t dlop__pool_cap_for(dlop_device device) {
  pthread_once(&environment_once, read_environment);
  if (environment_cap_set) return environment_cap;
  if (device.type != DLOP_DEVICE_CPU) return UINT64_MAX;
  uint64_t cap = DLOP_POOL_CPU_DEFAULT_MAX_CACHED;
  long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0 && (uint64_t)pages / 8 * (uint64_t)page_size < cap)
    cap = (uint64_t)pages / 8 * (uint64_t)page_size;
  return cap;
}
