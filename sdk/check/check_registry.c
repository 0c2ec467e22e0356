/* check_registry.c — every Check test dlop-check registers, in Check's run order, with its suite,
 * test case and timeout: what --isolation op needs to run the same tests itself, one process per
 * op (check_isolate.c), while --isolation check hands the same suites to Check's fork mode. */
#include <stdio.h>
#include <stdlib.h>

#include "check_suite.h"

typedef struct known_tcase {
  TCase *tc;
  const char *suite, *name;
  int timeout;
} known_tcase;

static known_tcase *tcases;
static int tcase_count, tcase_capacity;
static check_slot *slots;
static int slot_count, slot_capacity;

/* Grow a registry array (the suite cannot go on without it: exit 2 like a usage problem). */
static void *grow(void *array, int *capacity, size_t element) {
  int wanted = *capacity ? *capacity * 2 : 64;
  void *bigger = realloc(array, (size_t)wanted * element);
  if (bigger == NULL) {
    fprintf(stderr, "dlop check: error: out of host memory registering %d tests\n", wanted);
    exit(2);
  }
  *capacity = wanted;
  return bigger;
}

TCase *check_tcase(Suite *suite, const char *suite_name, const char *name, int timeout) {
  TCase *tc = tcase_create(name);
  tcase_set_timeout(tc, timeout);
  suite_add_tcase(suite, tc);
  if (tcase_count == tcase_capacity) tcases = grow(tcases, &tcase_capacity, sizeof *tcases);
  tcases[tcase_count++] = (known_tcase){tc, suite_name, name, timeout};
  return tc;
}

void check_add_test(TCase *tc, const TTest *test, int index) {
  _tcase_add_test(tc, test, 0, 0, index, index + 1);
  const known_tcase *known = NULL;
  for (int k = tcase_count - 1; k >= 0 && known == NULL; k--)
    if (tcases[k].tc == tc) known = &tcases[k];
  if (known == NULL) {
    fprintf(stderr, "dlop check: internal error: test %s added to a test case not made by "
            "check_tcase\n", test->name);
    exit(2);
  }
  if (slot_count == slot_capacity) slots = grow(slots, &slot_capacity, sizeof *slots);
  slots[slot_count++] = (check_slot){known->suite, known->name, known->timeout, test, index};
}

const check_slot *check_slots(int *count) {
  *count = slot_count;
  return slots;
}

void check_registry_free(void) {
  free(tcases);
  free(slots);
  tcases = NULL;
  slots = NULL;
  tcase_count = tcase_capacity = slot_count = slot_capacity = 0;
}
