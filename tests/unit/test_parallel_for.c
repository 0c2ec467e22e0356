/* test_parallel_for.c — the host's CPU parallel-for: every index covered exactly once for many
 * counts and grains (0 and 1 included), chunks respect the grain, nested calls and concurrent
 * callers finish without deadlock, and a child forked mid-job can still use the pool. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
    DLOP_CK_EACH(atomic_load(&c.hits[i]) == 1, "count %lld grain %lld: index %lld hit %d times",
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
   * machines with 2 cores). The host reads DLOP_NUM_THREADS once per process, so this needs
   * its own process, before anything asks for the thread count: Check's fork mode. */
  setenv("DLOP_NUM_THREADS", "8", 1);
  int32_t threads = dlop_host_api_table()->cpu_threads();
  const char *fork_mode = getenv("CK_FORK");
  ck_assert_msg(threads == 8,
                "cpu_threads() is %d after setting DLOP_NUM_THREADS=8 (expected 8): the count is "
                "read once per process, so this test needs Check's fork mode (CK_FORK is \"%s\"; "
                "unset it or set it to yes)",
                (int)threads, fork_mode ? fork_mode : "(unset)");
  check_coverage(100003, 1);
  check_coverage(17, 1);
}
END_TEST

/* fork() from one thread while another keeps the pool busy: the child has only the forking
 * thread, and must still be able to run a parallel_for (a job caught mid-publication used to
 * leave the child's generation odd, so its workers and caller waited for each other forever). */
typedef struct hammer {
  atomic_int stop;
  atomic_int failures;
  atomic_long rounds;
} hammer;

static void *hammer_main(void *argument) {
  hammer *h = argument;
  enum { COUNT = 4096 };
  coverage c = {calloc(COUNT, sizeof(atomic_int)), COUNT, 1, 0};
  if (c.hits == NULL) {
    atomic_fetch_add(&h->failures, 1);
    return NULL;
  }
  while (!atomic_load(&h->stop)) {
    memset(c.hits, 0, COUNT * sizeof(atomic_int));
    if (dlop_host_api_table()->parallel_for(COUNT, 1, mark, &c) != DLOP_OK)
      atomic_fetch_add(&h->failures, 1);
    for (int i = 0; i < COUNT; i++)
      if (atomic_load(&c.hits[i]) != 1) atomic_fetch_add(&h->failures, 1);
    atomic_fetch_add(&h->rounds, 1);
  }
  free(c.hits);
  return NULL;
}

/* In the child: one parallel_for over enough items to use every thread; exit 0 if covered. */
static void child_runs_parallel_for(void) {
  enum { COUNT = 10007 };
  coverage c = {calloc(COUNT, sizeof(atomic_int)), COUNT, 1, 0};
  if (c.hits == NULL) _exit(2);
  if (dlop_host_api_table()->parallel_for(COUNT, 1, mark, &c) != DLOP_OK) _exit(3);
  for (int i = 0; i < COUNT; i++)
    if (atomic_load(&c.hits[i]) != 1) _exit(4);
  _exit(atomic_load(&c.bad_chunks) == 0 ? 0 : 5);
}

/* Wait up to timeout_s for the child; kill it (this test's own child) if it hangs.
 * Returns its wait status, or -1 if it had to be killed. */
static int wait_with_timeout(pid_t child, double timeout_s) {
  struct timespec start, now, nap = {0, 1000000};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    int status;
    pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) return status;
    if (done < 0) return -2;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((double)(now.tv_sec - start.tv_sec) + 1e-9 * (double)(now.tv_nsec - start.tv_nsec) >
        timeout_s) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      return -1;
    }
    nanosleep(&nap, NULL);
  }
}

START_TEST(test_fork_while_another_thread_runs_jobs) {
  setenv("DLOP_NUM_THREADS", "4", 1); /* several workers even on small machines (fork mode) */
  hammer h = {0};
  pthread_t thread;
  ck_assert_int_eq(pthread_create(&thread, NULL, hammer_main, &h), 0);
  while (atomic_load(&h.rounds) < 10) sched_yield(); /* the pool is started and busy */
  enum { FORKS = 100 };
  char problem[256] = "";
  for (int i = 0; i < FORKS && problem[0] == '\0'; i++) {
    pid_t child = fork();
    if (child == 0) child_runs_parallel_for();
    if (child < 0) {
      snprintf(problem, sizeof problem, "fork %d failed", i);
      break;
    }
    int status = wait_with_timeout(child, 20.0);
    if (status == -1)
      snprintf(problem, sizeof problem, "child %d (forked mid-job) hung in parallel_for for 20 s", i);
    else if (status == -2)
      snprintf(problem, sizeof problem, "waitpid on child %d failed", i);
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      snprintf(problem, sizeof problem, "child %d: %s %d (expected exit 0)", i,
               WIFEXITED(status) ? "exit status" : "killed by signal",
               WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  }
  atomic_store(&h.stop, 1);
  pthread_join(thread, NULL);
  ck_assert_msg(problem[0] == '\0', "%s", problem);
  ck_assert_int_eq(atomic_load(&h.failures), 0);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("parallel_for");
  TCase *tc = dlop_test_tcase(suite, "parallel_for", 60, NULL, NULL);
  dlop_test_add_tests(tc,
                      test_every_index_once,
                      test_threads_and_errors,
                      test_nested_calls,
                      test_concurrent_callers,
                      test_many_threads_from_environment,
                      test_fork_while_another_thread_runs_jobs,
                      NULL);
  return dlop_test_run_suite(suite);
}
