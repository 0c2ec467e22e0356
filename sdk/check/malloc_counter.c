/* malloc_counter.c — counts the host blocks and bytes allocated and not yet freed, so the leak
 * check can measure make_thunk ... destroy. Two ways, one count:
 * - normally dlop-check defines malloc and friends (exported: ENABLE_EXPORTS), so calls from the
 *   plugin and libdlop resolve here; each forwards to glibc's own allocator (__libc_*), which
 *   glibc documents as the way to replace malloc;
 * - built with a sanitizer that brings its own allocator (AddressSanitizer, ThreadSanitizer,
 *   MemorySanitizer), a second malloc would take the allocations away from it (its checks then
 *   stop on memory it never allocated), so the count comes from the sanitizer's allocation hooks
 *   instead (__sanitizer_install_malloc_and_free_hooks): the same blocks, the same verdicts. */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>

#include "check_suite.h"

static _Atomic int64_t live_blocks, live_bytes;

void check_malloc_counts(int64_t *blocks, int64_t *bytes) {
  *blocks = live_blocks;
  *bytes = live_bytes;
}

#ifdef DLOP_CHECK_SANITIZER_ALLOCATOR

/* <sanitizer/allocator_interface.h> declares these (clang ships it; GCC 12 does not): the
 * sanitizer runtime exports them with C linkage. */
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                              void (*free_hook)(const volatile void *));
size_t __sanitizer_get_allocated_size(const volatile void *pointer);
int __sanitizer_get_ownership(const volatile void *pointer);

/* Called by the sanitizer's allocator on every allocation and free, from any thread (realloc
 * is an allocation and a free). The free hook runs before the block is released, so its size
 * can still be asked for. */
static void allocated(const volatile void *pointer, size_t size) {
  if (pointer == NULL) return;
  live_blocks++;
  live_bytes += (int64_t)size;
}

static void freed(const volatile void *pointer) {
  if (pointer == NULL || !__sanitizer_get_ownership(pointer)) return;
  live_blocks--;
  live_bytes -= (int64_t)__sanitizer_get_allocated_size(pointer);
}

__attribute__((constructor)) static void install_counting_hooks(void) {
  __sanitizer_install_malloc_and_free_hooks(allocated, freed);
}

#else

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void __libc_free(void *pointer);
extern void *__libc_memalign(size_t alignment, size_t size);

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

#endif
