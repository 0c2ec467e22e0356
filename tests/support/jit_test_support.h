/* jit_test_support.h — helpers of the run-time compilation tests (tests/unit/test_jit_*.c,
 * tests/gpu/test_jit_cuda.c): a fresh cache directory, the entry files in it, work in a second
 * process (a fresh view of the disk cache), and the counters' changes. */
#ifndef DLOP_JIT_TEST_SUPPORT_H
#define DLOP_JIT_TEST_SUPPORT_H

#include <stddef.h>

#include "dlop.h"

/* A new empty directory under /tmp made DLOP_CACHE_DIR for this test's process (call before
 * the first compilation); returns it. Entries then lie in "<it>/jit". It is removed when the
 * test's process exits, or when this is called again. */
const char *dlop_test_fresh_cache(void);
/* The files in the cache's jit directory whose names end with suffix ("" for all), hidden
 * (temporary) ones counted only when with_hidden; the last one's path into path (may be NULL). */
int dlop_test_cache_files(const char *suffix, int with_hidden, char *path, size_t size);

/* Run body(argument) in a forked child, which exits with body's return value; returns that
 * value, or 128 + the signal that ended the child. In a child, report with fprintf(stderr)
 * and a nonzero return: Check's assertions belong to the test's own process. */
int dlop_test_in_child(int (*body)(void *argument), void *argument);

/* dlop_jit_stats_get, failing the test on an error. */
dlop_jit_stats dlop_test_jit_stats(void);

#endif
