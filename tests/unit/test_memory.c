/* test_memory.c — the host caching pool: statistics move as expected, a repeated alloc/free of
 * the same sizes makes no new system allocation in steady state, release_cached empties the
 * cache, the cap on cached bytes (default and DLOP_POOL_MAX_CACHED_BYTES), bad frees are
 * reported, several threads can allocate at once, and the per-thread cache of small host blocks
 * (cross-thread frees, exact statistics, release_cached, a thread's exit). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

static const dlop_device cpu = {DLOP_DEVICE_CPU, 0};

static dlop_memory_stats stats_now(void) {
  dlop_memory_stats stats = {.struct_size = sizeof stats};
  DLOP_CK_OK(dlop_memory_stats_get(cpu, &stats));
  ck_assert_uint_eq(stats.struct_size, sizeof stats);
  return stats;
}

START_TEST(test_stats_follow_alloc_and_free) {
  dlop_memory_stats before = stats_now();
  void *p = NULL;
  DLOP_CK_OK(dlop_memory_alloc(cpu, 1000, NULL, &p));
  ck_assert_ptr_nonnull(p);
  ck_assert_uint_eq((uintptr_t)p % 64, 0);
  memset(p, 0x5a, 1000); /* the whole request is usable */
  dlop_memory_stats during = stats_now();
  ck_assert_uint_ge(during.bytes_in_use - before.bytes_in_use, 1000);
  ck_assert_uint_ge(during.peak_bytes_in_use, during.bytes_in_use);
  ck_assert_uint_eq(during.driver_allocations, before.driver_allocations + 1);
  DLOP_CK_OK(dlop_memory_free(cpu, p, NULL));
  dlop_memory_stats after = stats_now();
  ck_assert_uint_eq(after.bytes_in_use, before.bytes_in_use);
  ck_assert_uint_eq(after.bytes_cached - before.bytes_cached, during.bytes_in_use - before.bytes_in_use);
  ck_assert_uint_eq(after.driver_frees, before.driver_frees);
}
END_TEST

START_TEST(test_steady_state_makes_no_driver_allocation) {
  const size_t sizes[] = {1, 100, 4096, 5000, 1 << 20, (3 << 20) + 17};
  const int count = (int)(sizeof sizes / sizeof sizes[0]);
  void *pointers[6];
  /* Warm up: the first round allocates. */
  for (int i = 0; i < count; i++) DLOP_CK_OK(dlop_memory_alloc(cpu, sizes[i], NULL, &pointers[i]));
  for (int i = 0; i < count; i++) DLOP_CK_OK(dlop_memory_free(cpu, pointers[i], NULL));
  dlop_memory_stats warm = stats_now();
  for (int round = 0; round < 50; round++) {
    for (int i = 0; i < count; i++) DLOP_CK_OK(dlop_memory_alloc(cpu, sizes[i], NULL, &pointers[i]));
    for (int i = 0; i < count; i++) DLOP_CK_OK(dlop_memory_free(cpu, pointers[i], NULL));
  }
  dlop_memory_stats steady = stats_now();
  ck_assert_uint_eq(steady.driver_allocations, warm.driver_allocations);
  ck_assert_uint_eq(steady.driver_frees, warm.driver_frees);
  ck_assert_uint_eq(steady.bytes_in_use, warm.bytes_in_use);
  ck_assert_uint_eq(steady.bytes_cached, warm.bytes_cached);
}
END_TEST

START_TEST(test_release_cached_returns_to_zero) {
  void *a, *b;
  DLOP_CK_OK(dlop_memory_alloc(cpu, 10000, NULL, &a));
  DLOP_CK_OK(dlop_memory_alloc(cpu, 3 << 20, NULL, &b));
  DLOP_CK_OK(dlop_memory_free(cpu, a, NULL));
  dlop_memory_stats cached = stats_now();
  ck_assert_uint_gt(cached.bytes_cached, 0);
  DLOP_CK_OK(dlop_memory_release_cached(cpu));
  dlop_memory_stats released = stats_now();
  ck_assert_uint_eq(released.bytes_cached, 0);
  ck_assert_uint_eq(released.bytes_in_use, cached.bytes_in_use); /* b is untouched */
  ck_assert_uint_gt(released.driver_frees, cached.driver_frees);
  DLOP_CK_OK(dlop_memory_free(cpu, b, NULL));
  DLOP_CK_OK(dlop_memory_release_cached(cpu));
  released = stats_now();
  ck_assert_uint_eq(released.bytes_cached, 0);
  ck_assert_uint_eq(released.bytes_in_use, 0);
  ck_assert_uint_eq(released.driver_allocations, released.driver_frees);
}
END_TEST

/* The pool reads DLOP_POOL_MAX_CACHED_BYTES once, at its first use: the cap tests need a
 * process whose pool is untouched, which Check's fork mode gives each test. */
static void set_cap_before_first_use(const char *value) {
  dlop_memory_stats first = {.struct_size = sizeof first};
  if (value) ck_assert_int_eq(setenv("DLOP_POOL_MAX_CACHED_BYTES", value, 1), 0);
  else ck_assert_int_eq(unsetenv("DLOP_POOL_MAX_CACHED_BYTES"), 0);
  DLOP_CK_OK(dlop_memory_stats_get(cpu, &first));
  ck_assert_msg(first.driver_allocations == 0,
                "this test needs a process that has not used the pool (Check's fork mode; it "
                "cannot run with CK_FORK=no)");
}

START_TEST(test_cap_from_environment) {
  const uint64_t cap = 1 << 20;
  set_cap_before_first_use("1M");
  /* 100 frees of growing sizes: the cache never holds more than the cap. */
  for (int i = 1; i <= 100; i++) {
    void *p;
    size_t bytes = (size_t)i * (64 << 10);
    DLOP_CK_OK(dlop_memory_alloc(cpu, bytes, NULL, &p));
    DLOP_CK_OK(dlop_memory_free(cpu, p, NULL));
    dlop_memory_stats now = stats_now();
    ck_assert_msg(now.bytes_cached <= cap, "after freeing %zu bytes: %llu cached, cap %llu", bytes,
                  (unsigned long long)now.bytes_cached, (unsigned long long)cap);
  }
  /* Every block above 1 MiB (i = 17..100) went back at its free, and more to make room. */
  ck_assert_uint_ge(stats_now().driver_frees, 84);
  ck_assert_uint_eq(stats_now().bytes_in_use, 0);
  /* Steady state under the cap: no driver call at all. */
  void *p, *q;
  DLOP_CK_OK(dlop_memory_alloc(cpu, 300000, NULL, &p));
  DLOP_CK_OK(dlop_memory_alloc(cpu, 200000, NULL, &q));
  DLOP_CK_OK(dlop_memory_free(cpu, p, NULL));
  DLOP_CK_OK(dlop_memory_free(cpu, q, NULL));
  dlop_memory_stats warm = stats_now();
  for (int round = 0; round < 50; round++) {
    DLOP_CK_OK(dlop_memory_alloc(cpu, 300000, NULL, &p));
    DLOP_CK_OK(dlop_memory_alloc(cpu, 200000, NULL, &q));
    DLOP_CK_OK(dlop_memory_free(cpu, q, NULL));
    DLOP_CK_OK(dlop_memory_free(cpu, p, NULL));
  }
  dlop_memory_stats steady = stats_now();
  ck_assert_uint_eq(steady.driver_allocations, warm.driver_allocations);
  ck_assert_uint_eq(steady.driver_frees, warm.driver_frees);
  ck_assert_uint_eq(steady.bytes_cached, warm.bytes_cached);
  /* A block over the cap goes straight back; what was cached and fits stays. */
  DLOP_CK_OK(dlop_memory_alloc(cpu, 3 << 20, NULL, &p));
  DLOP_CK_OK(dlop_memory_free(cpu, p, NULL));
  dlop_memory_stats after = stats_now();
  ck_assert_uint_eq(after.driver_frees, steady.driver_frees + 1);
  ck_assert_uint_eq(after.bytes_cached, steady.bytes_cached);
  /* Freeing a second block that does not fit beside the first evicts the larger one. */
  DLOP_CK_OK(dlop_memory_release_cached(cpu));
  DLOP_CK_OK(dlop_memory_alloc(cpu, 600 << 10, NULL, &p));
  DLOP_CK_OK(dlop_memory_alloc(cpu, 500 << 10, NULL, &q));
  DLOP_CK_OK(dlop_memory_free(cpu, q, NULL));
  DLOP_CK_OK(dlop_memory_free(cpu, p, NULL));
  after = stats_now();
  ck_assert_uint_eq(after.bytes_cached, 500 << 10);
}
END_TEST

START_TEST(test_cap_zero_caches_nothing) {
  set_cap_before_first_use("0");
  void *p;
  for (int i = 0; i < 3; i++) {
    DLOP_CK_OK(dlop_memory_alloc(cpu, 1000, NULL, &p));
    DLOP_CK_OK(dlop_memory_free(cpu, p, NULL));
  }
  dlop_memory_stats now = stats_now();
  ck_assert_uint_eq(now.bytes_cached, 0);
  ck_assert_uint_eq(now.driver_allocations, 3);
  ck_assert_uint_eq(now.driver_frees, 3);
}
END_TEST

/* Unset, the host pool keeps at most 1 GiB (less on small machines); a bad value is warned
 * about and the default applies. The 256 MiB blocks are never touched, so never resident. */
static void check_default_cap(const char *value) {
  set_cap_before_first_use(value);
  void *blocks[5];
  for (int i = 0; i < 5; i++) DLOP_CK_OK(dlop_memory_alloc(cpu, 256 << 20, NULL, &blocks[i]));
  for (int i = 0; i < 5; i++) DLOP_CK_OK(dlop_memory_free(cpu, blocks[i], NULL));
  dlop_memory_stats now = stats_now();
  ck_assert_uint_le(now.bytes_cached, (uint64_t)1 << 30);
  ck_assert_uint_ge(now.driver_frees, 1);
  ck_assert_uint_eq(now.bytes_cached + (now.driver_frees * (256 << 20)), (uint64_t)5 * (256 << 20));
}

START_TEST(test_default_cap) { check_default_cap(NULL); }
END_TEST

START_TEST(test_invalid_cap_uses_default) { check_default_cap("12 apples"); }
END_TEST

START_TEST(test_zero_bytes_and_distinct_pointers) {
  void *a, *b;
  DLOP_CK_OK(dlop_memory_alloc(cpu, 0, NULL, &a));
  DLOP_CK_OK(dlop_memory_alloc(cpu, 0, NULL, &b));
  ck_assert_ptr_nonnull(a);
  ck_assert_ptr_ne(a, b);
  DLOP_CK_OK(dlop_memory_free(cpu, a, NULL));
  DLOP_CK_OK(dlop_memory_free(cpu, b, NULL));
  DLOP_CK_OK(dlop_memory_free(cpu, NULL, NULL)); /* like free(NULL) */
}
END_TEST

START_TEST(test_bad_free_and_arguments) {
  int local;
  ck_assert_int_eq(dlop_memory_free(cpu, &local, NULL), DLOP_INVALID_ARGUMENT);
  ck_assert_msg(strstr(dlop_last_error(), "not allocated by the dlop pool") != NULL, "%s",
                dlop_last_error());
  void *p;
  DLOP_CK_OK(dlop_memory_alloc(cpu, 64, NULL, &p));
  DLOP_CK_OK(dlop_memory_free(cpu, p, NULL));
  ck_assert_int_eq(dlop_memory_free(cpu, p, NULL), DLOP_INVALID_ARGUMENT); /* double free */
  ck_assert_int_eq(dlop_memory_alloc(cpu, 64, NULL, NULL), DLOP_INVALID_ARGUMENT);
  ck_assert_int_eq(dlop_memory_alloc(cpu, SIZE_MAX, NULL, &p), DLOP_OUT_OF_MEMORY);
  ck_assert_ptr_null(p);
  ck_assert_msg(strstr(dlop_last_error(), "bytes") != NULL, "%s", dlop_last_error());
  dlop_device bogus = {7, 0};
  ck_assert_int_eq(dlop_memory_alloc(bogus, 64, NULL, &p), DLOP_INVALID_ARGUMENT);
  ck_assert_int_eq(dlop_memory_stats_get(cpu, NULL), DLOP_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_host_table_memory) {
  const dlop_host_api *host = dlop_host_api_table();
  char error[256] = "";
  void *p = NULL;
  ck_assert_int_eq(host->memory_alloc(cpu, 256, NULL, &p, error, sizeof error), DLOP_OK);
  ck_assert_ptr_nonnull(p);
  ck_assert_int_eq(host->memory_free(cpu, p, NULL), DLOP_OK);
  ck_assert_int_eq(host->memory_alloc(cpu, SIZE_MAX, NULL, &p, error, sizeof error),
                   DLOP_OUT_OF_MEMORY);
  ck_assert_msg(strstr(error, "out of memory") != NULL, "error buffer: %s", error);
}
END_TEST

static void *hammer(void *argument) {
  uintptr_t seed = (uintptr_t)argument;
  void *held[8] = {0};
  for (int i = 0; i < 2000; i++) {
    int slot = (int)((seed + (uintptr_t)i * 7) % 8);
    if (held[slot]) {
      if (((unsigned char *)held[slot])[0] != (unsigned char)slot) return (void *)1;
      if (dlop_memory_free(cpu, held[slot], NULL) != DLOP_OK) return (void *)1;
      held[slot] = NULL;
    } else {
      size_t size = 64 + ((seed * 31 + (uintptr_t)i) % 5) * 700;
      if (dlop_memory_alloc(cpu, size, NULL, &held[slot]) != DLOP_OK) return (void *)1;
      memset(held[slot], slot, size); /* two threads sharing a block would corrupt this */
    }
  }
  for (int slot = 0; slot < 8; slot++)
    if (held[slot] && dlop_memory_free(cpu, held[slot], NULL) != DLOP_OK) return (void *)1;
  return NULL;
}

START_TEST(test_threads) {
  dlop_memory_stats before = stats_now();
  pthread_t threads[4];
  for (uintptr_t i = 0; i < 4; i++) ck_assert_int_eq(pthread_create(&threads[i], NULL, hammer, (void *)(i + 1)), 0);
  for (int i = 0; i < 4; i++) {
    void *result;
    pthread_join(threads[i], &result);
    ck_assert_msg(result == NULL, "thread %d: %s", i, result ? (const char *)result : "");
  }
  dlop_memory_stats after = stats_now();
  ck_assert_uint_eq(after.bytes_in_use, before.bytes_in_use);
  /* At most 32 blocks are live at once, in 5 size classes: without the cache the ~8000 allocations
   * would all reach the system allocator; with it at most 32 per class can. */
  ck_assert_uint_le(after.driver_allocations - before.driver_allocations, 5 * 32);
}
END_TEST

/* ---- the per-thread cache of small host blocks ---------------------------------------------- */

/* Blocks handed between threads: a producer allocates, the main thread frees half of them while
 * the producer is alive (claimed from its cache's slots) and half after it exited (moved to the
 * shared table then). Every free succeeds once, a second free of each is refused, and the
 * statistics come back exactly. */
typedef struct handoff {
  void *blocks[24];
  pthread_mutex_t lock;
  pthread_cond_t changed;
  int produced, may_exit;
} handoff;

static void *producer(void *argument) {
  handoff *h = argument;
  for (int i = 0; i < 24; i++) {
    if (dlop_memory_alloc(cpu, 1000 + (size_t)(i % 3) * 4096, NULL, &h->blocks[i]) != DLOP_OK)
      return (void *)1;
    memset(h->blocks[i], i, 1000);
  }
  /* Keep one freed block parked here: it must reach the shared cache at this thread's exit. */
  void *parked;
  if (dlop_memory_alloc(cpu, 3000, NULL, &parked) != DLOP_OK) return (void *)1;
  if (dlop_memory_free(cpu, parked, NULL) != DLOP_OK) return (void *)1;
  pthread_mutex_lock(&h->lock);
  h->produced = 1;
  pthread_cond_broadcast(&h->changed);
  while (!h->may_exit) pthread_cond_wait(&h->changed, &h->lock);
  pthread_mutex_unlock(&h->lock);
  return NULL;
}

START_TEST(test_thread_cache_cross_thread_free) {
  dlop_memory_stats before = stats_now();
  handoff h = {.lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};
  pthread_t thread;
  ck_assert_int_eq(pthread_create(&thread, NULL, producer, &h), 0);
  pthread_mutex_lock(&h.lock);
  while (!h.produced) pthread_cond_wait(&h.changed, &h.lock);
  pthread_mutex_unlock(&h.lock);
  uint64_t held = 0;
  for (int i = 0; i < 24; i++) held += (1000 + (uint64_t)(i % 3) * 4096 + 511) / 512 * 512;
  ck_assert_uint_eq(stats_now().bytes_in_use, before.bytes_in_use + held);
  for (int i = 0; i < 12; i++) { /* the producer is alive: its slots hold these */
    ck_assert_int_eq(((unsigned char *)h.blocks[i])[999], (unsigned char)i);
    DLOP_CK_OK(dlop_memory_free(cpu, h.blocks[i], NULL));
    ck_assert_int_eq(dlop_memory_free(cpu, h.blocks[i], NULL), DLOP_INVALID_ARGUMENT);
  }
  pthread_mutex_lock(&h.lock);
  h.may_exit = 1;
  pthread_cond_broadcast(&h.changed);
  pthread_mutex_unlock(&h.lock);
  void *result;
  pthread_join(thread, &result);
  ck_assert_msg(result == NULL, "the producer failed: %s", dlop_last_error());
  for (int i = 12; i < 24; i++) { /* the producer has exited: its blocks went to the table */
    ck_assert_int_eq(((unsigned char *)h.blocks[i])[0], (unsigned char)i);
    DLOP_CK_OK(dlop_memory_free(cpu, h.blocks[i], NULL));
    ck_assert_int_eq(dlop_memory_free(cpu, h.blocks[i], NULL), DLOP_INVALID_ARGUMENT);
  }
  dlop_memory_stats after = stats_now();
  ck_assert_uint_eq(after.bytes_in_use, before.bytes_in_use);
  DLOP_CK_OK(dlop_memory_release_cached(cpu));
  after = stats_now();
  ck_assert_uint_eq(after.bytes_cached, 0); /* the exited thread's parked block included */
  ck_assert_uint_eq(after.bytes_in_use, 0);
  ck_assert_uint_eq(after.driver_frees, after.driver_allocations);
}
END_TEST

/* On one thread: the statistics count parked blocks as cached and handed-out ones as in use,
 * byte for byte; steady state makes no system call; release_cached empties this thread's
 * parked blocks too. */
START_TEST(test_thread_cache_stats_exact) {
  DLOP_CK_OK(dlop_memory_release_cached(cpu));
  dlop_memory_stats start = stats_now();
  void *p[5];
  for (int i = 0; i < 5; i++) DLOP_CK_OK(dlop_memory_alloc(cpu, 100 + (size_t)i * 1000, NULL, &p[i]));
  uint64_t sizes = 512 + 1536 + 2560 + 3584 + 4608; /* each rounded up to 512 bytes */
  dlop_memory_stats busy = stats_now();
  ck_assert_uint_eq(busy.bytes_in_use, start.bytes_in_use + sizes);
  ck_assert_uint_ge(busy.peak_bytes_in_use, busy.bytes_in_use);
  for (int i = 0; i < 5; i++) DLOP_CK_OK(dlop_memory_free(cpu, p[i], NULL));
  dlop_memory_stats idle = stats_now();
  ck_assert_uint_eq(idle.bytes_in_use, start.bytes_in_use);
  ck_assert_uint_eq(idle.bytes_cached, start.bytes_cached + sizes);
  for (int round = 0; round < 100; round++) {
    for (int i = 0; i < 5; i++)
      DLOP_CK_OK(dlop_memory_alloc(cpu, 100 + (size_t)i * 1000, NULL, &p[i]));
    for (int i = 4; i >= 0; i--) DLOP_CK_OK(dlop_memory_free(cpu, p[i], NULL));
  }
  dlop_memory_stats steady = stats_now();
  ck_assert_uint_eq(steady.driver_allocations, idle.driver_allocations);
  ck_assert_uint_eq(steady.bytes_cached, idle.bytes_cached);
  ck_assert_uint_eq(steady.peak_bytes_in_use, busy.peak_bytes_in_use);
  DLOP_CK_OK(dlop_memory_release_cached(cpu));
  dlop_memory_stats empty = stats_now();
  ck_assert_uint_eq(empty.bytes_cached, 0);
  ck_assert_uint_eq(empty.driver_frees, empty.driver_allocations);
}
END_TEST

/* Many threads allocating and freeing small blocks of others: a block is never handed to two
 * holders at once (each holder's pattern survives), and in-use bytes come back to zero. */
typedef struct exchange {
  _Atomic(void *) mailbox[16];
  int failed;
} exchange;

static void *swapper(void *argument) {
  exchange *x = argument;
  for (int i = 0; i < 20000; i++) {
    void *mine;
    if (dlop_memory_alloc(cpu, 64 + (size_t)(i % 4) * 600, NULL, &mine) != DLOP_OK)
      return (void *)"dlop_memory_alloc failed";
    memset(mine, 0x5A, 64);
    void *theirs = atomic_exchange(&x->mailbox[i % 16], mine);
    if (theirs == NULL) continue;
    for (int b = 0; b < 64; b++)
      if (((unsigned char *)theirs)[b] != 0x5A)
        return (void *)"a block held by this thread was handed to another holder";
    memset(theirs, 0, 64); /* a second holder of this block would now see its pattern broken */
    if (dlop_memory_free(cpu, theirs, NULL) != DLOP_OK) return (void *)"dlop_memory_free failed";
  }
  return NULL;
}

START_TEST(test_thread_cache_many_threads_free_each_others_blocks) {
  dlop_memory_stats before = stats_now();
  exchange x;
  memset(&x, 0, sizeof x);
  pthread_t threads[8];
  for (int i = 0; i < 8; i++) ck_assert_int_eq(pthread_create(&threads[i], NULL, swapper, &x), 0);
  for (int i = 0; i < 8; i++) {
    void *result;
    pthread_join(threads[i], &result);
    ck_assert_msg(result == NULL, "thread %d failed: %s", i, dlop_last_error());
  }
  for (int i = 0; i < 16; i++) {
    void *left = atomic_load(&x.mailbox[i]);
    if (left) DLOP_CK_OK(dlop_memory_free(cpu, left, NULL));
  }
  ck_assert_uint_eq(stats_now().bytes_in_use, before.bytes_in_use);
  DLOP_CK_OK(dlop_memory_release_cached(cpu));
  dlop_memory_stats after = stats_now();
  ck_assert_uint_eq(after.bytes_cached, 0);
  ck_assert_uint_eq(after.driver_frees, after.driver_allocations);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("memory");
  TCase *tc = tcase_create("memory");
  tcase_add_test(tc, test_stats_follow_alloc_and_free);
  tcase_add_test(tc, test_steady_state_makes_no_driver_allocation);
  tcase_add_test(tc, test_release_cached_returns_to_zero);
  tcase_add_test(tc, test_cap_from_environment);
  tcase_add_test(tc, test_cap_zero_caches_nothing);
  tcase_add_test(tc, test_default_cap);
  tcase_add_test(tc, test_invalid_cap_uses_default);
  tcase_add_test(tc, test_zero_bytes_and_distinct_pointers);
  tcase_add_test(tc, test_bad_free_and_arguments);
  tcase_add_test(tc, test_host_table_memory);
  tcase_add_test(tc, test_threads);
  tcase_add_test(tc, test_thread_cache_cross_thread_free);
  tcase_add_test(tc, test_thread_cache_stats_exact);
  tcase_add_test(tc, test_thread_cache_many_threads_free_each_others_blocks);
  suite_add_tcase(suite, tc);
  return dlop_test_run_suite(suite);
}
