/* check_isolate.c — running the registered checks in child processes, in both isolation modes:
 * --isolation check gives every check a process of its own; --isolation op gives each op
 * (suite) one process that runs its checks one after another. On CUDA every process pays CUDA
 * initialization and the plugin's module load (seconds with several suites at once), so forking
 * per check made `dlop check --device cuda` take minutes. A child runs its tests in Check's
 * no-fork mode, writing its progress, each result and what each check is calling in the plugin
 * (check_where.c) into memory shared with the parent. A test that crashes, exits or outlives
 * its timeout is killed and reported as an error naming op, check, device, dtype, the shape
 * and the stage it was in (Check's own fork mode could only say "Received signal 11"), and the
 * suite's remaining tests go on in a new child; after any failed test the child stops too, so
 * whatever a failure left behind (a longjmp past frees, a sticky CUDA error) never reaches
 * another test. The report has Check's CK_NORMAL format.
 * Each CUDA (op, dtype) also gets a keeper: one thunk made before its first check and destroyed
 * at the child's end, which holds the op's CUDA module loaded (the host counts references per
 * module), so the checks' hundreds of fresh thunks do not each load a multi-megabyte fatbin. It
 * exists before any check takes its baseline (host blocks, device bytes) and is never run. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_suite.h"

enum { SLOT_NOT_RUN = 0, SLOT_RUNNING = 1, SLOT_DONE = 2 };

typedef struct slot_result {
  _Atomic int state;
  int type; /* CK_PASS, CK_FAILURE or CK_ERROR */
  int line;
  char file[256];
  char message[4096];
  check_where where; /* what the check was calling in the plugin, as its process recorded it */
} slot_result;

/* Shared between the parent and the child running a suite (MAP_SHARED, made before forking). */
typedef struct shared_progress {
  _Atomic int current;     /* the slot the child is in (or last finished) */
  _Atomic int clean_exit;  /* set just before the child's exit: next is valid */
  _Atomic int next;        /* the first slot the child did not run */
  _Atomic int in_keeper;   /* the child is making the keeper thunk for the current slot's case */
  slot_result results[];
} shared_progress;

static shared_progress *shared;
static int per_op; /* --isolation op: one process per suite; else one per check */

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The slot's timeout as Check computes it: the test case's, times CK_TIMEOUT_MULTIPLIER. */
static double slot_timeout(const check_slot *slot) {
  double timeout = slot->timeout;
  const char *env = getenv("CK_TIMEOUT_MULTIPLIER");
  if (env != NULL) {
    char *end = NULL;
    double multiplier = strtod(env, &end);
    if (end != env && *end == '\0' && multiplier >= 0) timeout *= multiplier;
  }
  return timeout;
}

/* One test in a Check runner of its own, in this process (CK_NOFORK): a failed ck_assert
 * longjmps back into Check, which records the message. */
static void run_one(const check_slot *slot, slot_result *result) {
  Suite *suite = suite_create(slot->suite);
  TCase *tc = tcase_create(slot->tcase);
  _tcase_add_test(tc, slot->test, 0, 0, slot->index, slot->index + 1);
  suite_add_tcase(suite, tc);
  SRunner *runner = srunner_create(suite);
  srunner_set_fork_status(runner, CK_NOFORK);
  srunner_run_all(runner, CK_SILENT);
  TestResult **results = srunner_results(runner);
  if (results != NULL && srunner_ntests_run(runner) == 1) {
    result->type = tr_rtype(results[0]);
    result->line = tr_lno(results[0]);
    snprintf(result->file, sizeof result->file, "%s", tr_lfile(results[0]) ? tr_lfile(results[0]) : "");
    snprintf(result->message, sizeof result->message, "%s", tr_msg(results[0]) ? tr_msg(results[0]) : "");
  } else {
    result->type = CK_ERROR;
    result->line = slot->test->line;
    snprintf(result->file, sizeof result->file, "%s", slot->test->file);
    snprintf(result->message, sizeof result->message, "Check ran %d tests for this one (expected "
             "1): is CK_RUN_SUITE or CK_RUN_CASE set?", srunner_ntests_run(runner));
  }
  free(results);
  srunner_free(runner);
}

/* ---- keepers ------------------------------------------------------------------------------- */

#define MAX_KEEPERS 64
static check_prepared keepers[MAX_KEEPERS];
static int keeper_count;
static const check_case *tried[MAX_KEEPERS];
static int tried_count;

/* Hidden Check tests (run like the others, results ignored): a failure to make a keeper is
 * not reported here; the checks that follow make the same kind of thunk and report it. */
static void make_keeper(int index) {
  const check_case *c = check_case_at(index);
  const check_shape shape = check_sized_shape(c, "module keeper", 7);
  check_prepared p;
  check_prepare(c, "module keeper", &shape, 0, &p);
  if (keeper_count < MAX_KEEPERS) keepers[keeper_count++] = p;
  else check_release(&p);
}
static const TTest make_keeper_test = {"module_keeper", make_keeper, __FILE__, __LINE__};

static void release_keepers(int unused) {
  (void)unused;
  while (keeper_count > 0) check_release(&keepers[--keeper_count]);
}
static const TTest release_keepers_test = {"release_keepers", release_keepers, __FILE__, __LINE__};

static void run_hidden(const TTest *test, int index) {
  check_slot slot = {"keeper", "keeper", 0, test, index};
  slot_result ignored;
  run_one(&slot, &ignored);
}

/* Before slot's first check of a case that makes thunks on CUDA (or on any device with
 * DLOP_CHECK_KEEP_THUNKS=1, which exercises this path where there is no GPU). */
static void keep_module_for(const check_slot *slot) {
  if (!per_op) return; /* a process per check: a keeper would only add a module load to each */
  if (strcmp(slot->suite, "plugin") == 0 || strcmp(slot->tcase, "op") == 0) return;
  const check_case *c = check_case_at(slot->index);
  const char *everywhere = getenv("DLOP_CHECK_KEEP_THUNKS");
  if (c == NULL || c->dtype < 0 || c->op->make_thunk == NULL || check_is_view_op(c->op) ||
      (c->device.type != DLOP_DEVICE_CUDA && !(everywhere && strcmp(everywhere, "1") == 0)))
    return;
  for (int t = 0; t < tried_count; t++)
    if (tried[t] == c) return;
  if (tried_count == MAX_KEEPERS) return;
  tried[tried_count++] = c;
  atomic_store(&shared->in_keeper, 1);
  run_hidden(&make_keeper_test, slot->index);
  fflush(stdout);
  atomic_store(&shared->in_keeper, 0);
}

/* The child: slots from..to-1 of one suite, stopping after the first that does not pass. */
static void run_child(const check_slot *slots, int from, int to) {
  int k = from;
  for (; k < to; k++) {
    slot_result *result = &shared->results[k];
    atomic_store(&shared->current, k);
    atomic_store(&result->state, SLOT_RUNNING);
    check_where_attach(&result->where);
    keep_module_for(&slots[k]);
    run_one(&slots[k], result);
    fflush(stdout);
    fflush(stderr);
    atomic_store(&result->state, SLOT_DONE);
    if (result->type != CK_PASS) {
      k++;
      break; /* the rest runs in a fresh process: nothing this failure left behind leaks into it */
    }
  }
  run_hidden(&release_keepers_test, 0);
  fflush(stdout);
  atomic_store(&shared->next, k);
  atomic_store(&shared->clean_exit, 1);
  check_process_exit(0); /* exit(0), as Check's forked children end (malloc_counter.c) */
}

/* "op exp, check strided_inputs, cpu float32, shape (7)" ("plugin, check X" for the loading
 * checks), as check_fail starts its lines: from the slot, and the shapes from what the check's
 * process recorded before it died. */
static void describe_slot(const check_slot *slot, const check_where *where, char *buffer,
                          size_t size) {
  const check_case *c = strcmp(slot->suite, "plugin") == 0 ? NULL : check_case_at(slot->index);
  if (c == NULL) {
    snprintf(buffer, size, "plugin, check %s", slot->test->name);
    return;
  }
  size_t used = (size_t)snprintf(buffer, size, "op %s, check %s", c->op->name, slot->test->name);
  if (c->dtype >= 0 && used < size)
    used += (size_t)snprintf(buffer + used, size - used, ", %s %s", check_device_text(c->device),
                             dlop_dtype_name((dlop_dtype)c->dtype));
  char shape[CHECK_MAX_OPERANDS * (DLOP_MAX_NDIM * 22 + 8)];
  check_where_shape_text(where, shape, sizeof shape);
  if (shape[0] && used < size) snprintf(buffer + used, size - used, ", %s", shape);
}

/* " in the thunk's run" (with the inputs' dtypes where the case does not say them), or where
 * the check was after the plugin's call returned; "" when it had called nothing yet. */
static void describe_stage(const check_slot *slot, const check_where *where, char *buffer,
                           size_t size) {
  buffer[0] = '\0';
  if (where->stage == NULL) return;
  const check_case *c = strcmp(slot->suite, "plugin") == 0 ? NULL : check_case_at(slot->index);
  int name_dtypes = c == NULL || c->dtype < 0;
  for (int32_t i = 0; i < where->num_inputs && !name_dtypes; i++)
    name_dtypes = where->inputs[i].dtype != c->dtype;
  char inputs[CHECK_MAX_OPERANDS * (DLOP_MAX_NDIM * 22 + 24)] = "";
  if (name_dtypes && where->num_inputs > 0) check_where_inputs_text(where, inputs, sizeof inputs);
  snprintf(buffer, size, " %s %s%s%s%s", where->returned ? "after" : "in", where->stage,
           inputs[0] ? " (inputs " : where->num_inputs == 0 ? " (no inputs" : "", inputs,
           inputs[0] || where->num_inputs == 0 ? ")" : "");
  if (where->returned)
    snprintf(buffer + strlen(buffer), size - strlen(buffer), " returned, in dlop-check's own code");
}

static void record_error(const check_slot *slot, slot_result *result, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static void record_error(const check_slot *slot, slot_result *result, const char *format, ...) {
  char previous[sizeof result->message] = "";
  if (atomic_load(&result->state) == SLOT_DONE && result->type != CK_PASS)
    snprintf(previous, sizeof previous, "%s", result->message);
  result->type = CK_ERROR;
  result->line = slot->test->line;
  snprintf(result->file, sizeof result->file, "%s", slot->test->file);
  check_where where = result->where; /* the child is gone: nothing writes it any more */
  char prefix[4096];
  describe_slot(slot, &where, prefix, sizeof prefix);
  int used = snprintf(result->message, sizeof result->message, "%s: ", prefix);
  va_list args;
  va_start(args, format);
  if (used >= 0 && (size_t)used < sizeof result->message)
    used += vsnprintf(result->message + used, sizeof result->message - (size_t)used, format, args);
  va_end(args);
  if (previous[0] && used >= 0 && (size_t)used < sizeof result->message)
    snprintf(result->message + used, sizeof result->message - (size_t)used,
             " (it had failed before that: %s)", previous);
  atomic_store(&result->state, SLOT_DONE);
}

/* Runs slots from..to-1 (one suite) in as many children as crashes, timeouts and failures need. */
static void run_suite(const check_slot *slots, int from, int to) {
  while (from < to) {
    atomic_store(&shared->current, from);
    atomic_store(&shared->clean_exit, 0);
    atomic_store(&shared->next, from);
    atomic_store(&shared->in_keeper, 0);
    fflush(stdout);
    fflush(stderr);
    pid_t child = fork();
    if (child == 0) run_child(slots, from, per_op ? to : from + 1);
    if (child < 0) {
      for (int k = from; k < to; k++)
        record_error(&slots[k], &shared->results[k], "cannot fork a process for %s's checks: %s",
                     slots[k].suite, strerror(errno));
      return;
    }
    int seen = -1, status = 0, timed_out = 0;
    double started = now_seconds();
    for (;;) {
      pid_t done = waitpid(child, &status, WNOHANG);
      if (done == child) break;
      if (done < 0 && errno != EINTR) {
        status = 0;
        break;
      }
      int current = atomic_load(&shared->current);
      if (current != seen) {
        seen = current;
        started = now_seconds();
      }
      if (now_seconds() - started > slot_timeout(&slots[current])) {
        kill(child, SIGKILL);
        while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
        }
        timed_out = 1;
        break;
      }
      struct timespec pause = {0, 2000000}; /* 2 ms: the child's exit is noticed at once */
      nanosleep(&pause, NULL);
    }
    int clean = atomic_load(&shared->clean_exit);
    int normal = !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (clean && normal) {
      from = atomic_load(&shared->next);
      continue;
    }
    int k = atomic_load(&shared->current);
    if (k < from || k >= to) k = from;
    const check_slot *slot = &slots[k];
    char stage[1536];
    describe_stage(slot, &shared->results[k].where, stage, sizeof stage);
    const char *after = clean ? " while the process exited after its last check"
                        : atomic_load(&shared->in_keeper)
                            ? " while making, before this check, the thunk dlop-check keeps for "
                              "this (op, device, dtype) to hold its CUDA module loaded"
                            : "";
    /* What became of the process, and of the checks after this one. */
    char process[512];
    if (per_op)
      snprintf(process, sizeof process, "the process running %s's checks (--isolation op)",
               slot->suite);
    else
      snprintf(process, sizeof process, "this check's own process (--isolation check)");
    const char *here = per_op ? " in this check" : "";
    const char *rest = per_op ? "; the checks after it ran in a new process" : "";
    if (timed_out)
      record_error(slot, &shared->results[k], "Test timeout expired (%.0f s)%s%s: %s was killed%s",
                   slot_timeout(slot), stage, after, process, rest);
    else if (WIFSIGNALED(status))
      record_error(slot, &shared->results[k], "Received signal %d (%s)%s%s: %s died%s%s",
                   WTERMSIG(status), strsignal(WTERMSIG(status)), stage, after, process, here,
                   rest);
    else if (WIFEXITED(status))
      record_error(slot, &shared->results[k], "Early exit with return value %d%s%s%s: %s ended%s%s",
                   WEXITSTATUS(status), stage, after,
                   shared->results[k].where.sanitizer_died
                       ? " (a sanitizer ended the process after its error report, printed above)"
                       : "", process, here, rest);
    else
      record_error(slot, &shared->results[k], "%s was lost (wait status 0x%x)%s", process,
                   (unsigned)status, stage);
    from = k + 1;
  }
}

int check_run_isolated(int one_process_per_op) {
  per_op = one_process_per_op;
  int count;
  const check_slot *slots = check_slots(&count);
  size_t bytes = sizeof(shared_progress) + (size_t)(count > 0 ? count : 1) * sizeof(slot_result);
  void *memory = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    fprintf(stderr, "dlop check: error: cannot map %zu bytes shared with the test processes: "
            "%s\n", bytes, strerror(errno));
    return count > 0 ? count : 1;
  }
  shared = memory;
  printf("Running suite(s):");
  for (int begin = 0; begin < count;) {
    int end = begin + 1;
    while (end < count && strcmp(slots[end].suite, slots[begin].suite) == 0) end++;
    printf(" %s\n", slots[begin].suite);
    double started = now_seconds();
    run_suite(slots, begin, end);
    if (getenv("DLOP_CHECK_TIMES") != NULL)
      printf("note: %s: %d checks in %.2f s (--isolation %s)\n", slots[begin].suite,
             end - begin, now_seconds() - started, per_op ? "op" : "check");
    begin = end;
  }
  if (count == 0) printf("\n");
  int failures = 0, errors = 0;
  for (int k = 0; k < count; k++) {
    const slot_result *r = &shared->results[k];
    failures += r->type == CK_FAILURE;
    errors += r->type == CK_ERROR || atomic_load(&r->state) != SLOT_DONE;
  }
  int percent = failures + errors == 0 ? 100
                : count == 0 ? 0 : (int)((float)(count - failures - errors) / (float)count * 100);
  printf("%d%%: Checks: %d, Failures: %d, Errors: %d\n", percent, count, failures, errors);
  for (int k = 0; k < count; k++) {
    const slot_result *r = &shared->results[k];
    if (atomic_load(&r->state) != SLOT_DONE)
      printf("%s:%d:E:%s:%s:%d: (after this point) never ran (internal error of dlop-check)\n",
             slots[k].test->file, slots[k].test->line, slots[k].tcase, slots[k].test->name,
             slots[k].index);
    else if (r->type != CK_PASS)
      printf("%s:%d:%s:%s:%s:%d: %s%s\n", r->file, r->line, r->type == CK_FAILURE ? "F" : "E",
             slots[k].tcase, slots[k].test->name, slots[k].index,
             r->type == CK_ERROR ? "(after this point) " : "", r->message);
  }
  fflush(stdout);
  munmap(memory, bytes);
  shared = NULL;
  return failures + errors;
}
