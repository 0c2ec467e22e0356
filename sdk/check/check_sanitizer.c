/* check_sanitizer.c — dlop-check built with a sanitizer (the ASan+UBSan CI build) gives the
 * verdicts of any other build: a segfault stays a signal (ASan would turn it into its report and
 * exit 1, so a crash would read as an early exit), the exit-time leak report of LeakSanitizer is
 * left out of the check processes (the suite's own leak check gives that verdict), and an error
 * a sanitizer ends a process for is said to be one in the check's failure line. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check_suite.h"

#ifdef DLOP_CHECK_SANITIZER_ALLOCATOR

/* Defaults only: ASAN_OPTIONS still overrides them (handle_segv=1 for ASan's own SEGV report). */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
  return "handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0";
}

void __sanitizer_set_death_callback(void (*callback)(void));

__attribute__((constructor)) static void install_death_callback(void) {
  __sanitizer_set_death_callback(check_where_sanitizer_died);
}

void check_process_exit(int status) {
  /* Not exit(): LeakSanitizer's exit-time report would make every check of a leaking plugin an
   * error (and count the suite's own memory a failed assertion's longjmp skipped freeing). */
  fflush(stdout);
  fflush(stderr);
  _exit(status);
}

#else

void check_process_exit(int status) { exit(status); }

#endif
