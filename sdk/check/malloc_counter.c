/* malloc_counter.c — counts the host blocks and bytes allocated and not yet freed, so the leak
 * check can measure make_thunk ... destroy. dlop-check defines malloc and friends (exported:
 * ENABLE_EXPORTS), so calls from the plugin and libdlop resolve here; each forwards to glibc's
 * own allocator (__libc_*), which glibc documents as the way to replace malloc. */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>

#include "check_suite.h"

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void __libc_free(void *pointer);
extern void *__libc_memalign(size_t alignment, size_t size);

static _Atomic int64_t live_blocks, live_bytes;

static void counted(void *pointer) {
  if (pointer == NULL) return;
  live_blocks++;
  live_bytes += (int64_t)malloc_usable_size(pointer);
}

static void uncounted(void *pointer) {
  if (pointer == NULL) return;
  live_blocks--;
  live_bytes -= (int64_t)malloc_usable_size(pointer);
}

void check_malloc_counts(int64_t *blocks, int64_t *bytes) {
  *blocks = live_blocks;
  *bytes = live_bytes;
}

void *malloc(size_t size) {
  void *p = __libc_malloc(size);
  counted(p);
  return p;
}

void *calloc(size_t count, size_t size) {
  void *p = __libc_calloc(count, size);
  counted(p);
  return p;
}

void *realloc(void *pointer, size_t size) {
  size_t old = pointer ? malloc_usable_size(pointer) : 0;
  void *p = __libc_realloc(pointer, size);
  if (pointer == NULL) {
    counted(p);
  } else if (size == 0 && p == NULL) { /* glibc frees the block */
    live_blocks--;
    live_bytes -= (int64_t)old;
  } else if (p != NULL) {
    live_bytes += (int64_t)malloc_usable_size(p) - (int64_t)old;
  }
  return p;
}

void free(void *pointer) {
  uncounted(pointer);
  __libc_free(pointer);
}

void *memalign(size_t alignment, size_t size) {
  void *p = __libc_memalign(alignment, size);
  counted(p);
  return p;
}

void *aligned_alloc(size_t alignment, size_t size) { return memalign(alignment, size); }

int posix_memalign(void **pointer, size_t alignment, size_t size) {
  if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) return EINVAL;
  void *p = memalign(alignment, size);
  if (p == NULL) return ENOMEM;
  *pointer = p;
  return 0;
}

void *valloc(size_t size) { return memalign(4096, size); }
