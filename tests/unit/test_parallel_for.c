/* test_parallel_for.c — the host's CPU parallel-for: every index covered exactly once for many
 * counts and grains (0 and 1 included), chunks respect the grain, nested calls and concurrent
 * callers finish without deadlock. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

typedef struct coverage {
  atomic_int *hits;
  int64_t count;
  int64_t grain;
  atomic_int bad_chunks;
} coverage;

static void mark(void *context, int64_t begin, int64_t end) {
  coverage *c = context;
  /* Every chunk but the last holds at least grain items (inline runs are one chunk). */
  if (begin < 0 || end > c->count || begin >= end || (end != c->count && end - begin < c->grain))
    atomic_fetch_add(&c->bad_chunks, 1);
  for (int64_t i = begin; i < end && i < c->count && i >= 0; i++) atomic_fetch_add(&c->hits[i], 1);
}

static void check_coverage(int64_t count, int64_t grain) {
  const dlop_host_api *host = dlop_host_api_table();
  coverage c = {calloc((size_t)count + 1, sizeof(atomic_int)), count, grain < 1 ? 1 : grain, 0};
  ck_assert_ptr_nonnull(c.hits);
  DLOP_CK_OK(host->parallel_for(count, grain, mark, &c));
  ck_assert_int_eq(atomic_load(&c.bad_chunks), 0);
  for (int64_t i = 0; i < count; i++)
    ck_assert_msg(atomic_load(&c.hits[i]) == 1, "count %lld grain %lld: index %lld hit %d times",
                  (long long)count, (long long)grain, (long long)i, atomic_load(&c.hits[i]));
  free(c.hits);
}

START_TEST(test_every_index_once) {
  const int64_t counts[] = {0, 1, 2, 3, 7, 63, 64, 65, 1000, 4097, 100003};
  const int64_t grains[] = {0, 1, 2, 16, 1000, 1 << 20};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
    for (size_t j = 0; j < sizeof grains / sizeof grains[0]; j++) check_coverage(counts[i], grains[j]);
}
END_TEST

START_TEST(test_threads_and_errors) {
  const dlop_host_api *host = dlop_host_api_table();
  ck_assert_int_ge(host->cpu_threads(), 1);
  ck_assert_int_eq(host->parallel_for(10, 1, NULL, NULL), DLOP_INVALID_ARGUMENT);
  ck_assert_int_eq(host->parallel_for(-1, 1, mark, NULL), DLOP_INVALID_ARGUMENT);
}
END_TEST

typedef struct nested {
  atomic_long total;
} nested;

static void inner_body(void *context, int64_t begin, int64_t end) {
  nested *n = context;
  atomic_fetch_add(&n->total, end - begin);
}

static void outer_body(void *context, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; i++)
    dlop_host_api_table()->parallel_for(100, 4, inner_body, context);
}

START_TEST(test_nested_calls) {
  nested n = {0};
  DLOP_CK_OK(dlop_host_api_table()->parallel_for(64, 1, outer_body, &n));
  ck_assert_int_eq(atomic_load(&n.total), 64 * 100);
}
END_TEST

static void *caller(void *argument) {
  for (int round = 0; round < 200; round++) {
    coverage c = {calloc(5000, sizeof(atomic_int)), 5000, 10, 0};
    if (dlop_host_api_table()->parallel_for(5000, 10, mark, &c) != DLOP_OK) return (void *)1;
    for (int i = 0; i < 5000; i++)
      if (atomic_load(&c.hits[i]) != 1) return (void *)1;
    free(c.hits);
  }
  (void)argument;
  return NULL;
}

START_TEST(test_concurrent_callers) {
  pthread_t threads[4];
  for (int i = 0; i < 4; i++) ck_assert_int_eq(pthread_create(&threads[i], NULL, caller, NULL), 0);
  for (int i = 0; i < 4; i++) {
    void *result;
    pthread_join(threads[i], &result);
    ck_assert_msg(result == NULL, "caller %d saw an index covered other than once", i);
  }
}
END_TEST

START_TEST(test_many_threads_from_environment) {
  /* More threads than cores must still cover everything (exercises real chunk splitting on
   * machines with 2 cores). Runs in its own process, before the pool starts. */
  setenv("DLOP_NUM_THREADS", "8", 1);
  ck_assert_int_eq(dlop_host_api_table()->cpu_threads(), 8);
  check_coverage(100003, 1);
  check_coverage(17, 1);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("parallel_for");
  TCase *tc = tcase_create("parallel_for");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_every_index_once);
  tcase_add_test(tc, test_threads_and_errors);
  tcase_add_test(tc, test_nested_calls);
  tcase_add_test(tc, test_concurrent_callers);
  tcase_add_test(tc, test_many_threads_from_environment);
  suite_add_tcase(suite, tc);
  return dlop_test_run_suite(suite);
}
