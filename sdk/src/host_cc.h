/* host_cc.h — running the host's C compiler (host_cc_run.c), for host_cc.c. Internal. */
#ifndef DLOP_HOST_CC_H
#define DLOP_HOST_CC_H

#include <stddef.h>
#include <stdio.h> /* glibc's feature macros */

/* Whether dlop__process_run can start the program in another directory (glibc 2.29). */
#if defined(__GLIBC_PREREQ)
#if __GLIBC_PREREQ(2, 29)
#define DLOP__PROCESS_CAN_CHDIR 1
#endif
#endif
#ifndef DLOP__PROCESS_CAN_CHDIR
#define DLOP__PROCESS_CAN_CHDIR 0
#endif

/* What a run of a program gave. */
typedef struct dlop__process_result {
  int started;      /* 0: posix_spawn failed (start_error says why) */
  int start_error;  /* an errno value */
  int status_known; /* 0 when someone else reaped the child (SIGCHLD ignored) */
  int exited;       /* exited normally, with exit_status */
  int exit_status;
  int signal_number; /* when killed by a signal */
  char *output;      /* stdout and stderr as they came (the first bytes, up to a limit), malloc'ed */
} dlop__process_result;

/* Run program with argv (argv[0] is shown in ps; the program itself is the path program) in
 * directory (NULL, or DLOP__PROCESS_CAN_CHDIR 0: the current one): a fresh process through posix_spawn, never a shell, with
 * this process's environment, /dev/null as input and default signal handling. */
void dlop__process_run(const char *program, char *const argv[], const char *directory,
                       dlop__process_result *result);
void dlop__process_result_free(dlop__process_result *result);
/* "exit status 1", "signal 9 (Killed)" or "an unknown exit status (...)" into text. */
void dlop__process_describe(const dlop__process_result *result, char *text, size_t size);
/* 1 when the program exited with status 0. */
int dlop__process_succeeded(const dlop__process_result *result);

#endif
