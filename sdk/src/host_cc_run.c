/* host_cc_run.c — runs the host's C compiler as a fresh program (posix_spawn: no shell, so no
 * path or option is ever interpreted; no fork of a host that may hold threads, CUDA or locks),
 * collecting what it prints on stdout and stderr through one pipe. */
#define _GNU_SOURCE /* pipe2, sigdescr_np, posix_spawn_file_actions_addchdir_np */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host_cc.h"

extern char **environ;

/* A compiler's diagnostics of a bad source come first; the rest is kept out of messages. */
#define OUTPUT_KEPT 65536

/* A pipe whose ends lie above descriptors 0-2, so that the dup2s onto the child's stdout and
 * stderr never meet an end already there (a host that closed its stdout). */
static int pipe_above_stdio(int ends[2]) {
  int raw[2];
  if (pipe2(raw, O_CLOEXEC) != 0) return -1;
  ends[0] = fcntl(raw[0], F_DUPFD_CLOEXEC, 3);
  ends[1] = fcntl(raw[1], F_DUPFD_CLOEXEC, 3);
  int code = errno;
  close(raw[0]);
  close(raw[1]);
  if (ends[0] >= 0 && ends[1] >= 0) return 0;
  if (ends[0] >= 0) close(ends[0]);
  if (ends[1] >= 0) close(ends[1]);
  errno = code;
  return -1;
}

void dlop__process_run(const char *program, char *const argv[], const char *directory,
                       dlop__process_result *result) {
  memset(result, 0, sizeof *result);
  int ends[2];
  if (pipe_above_stdio(ends) != 0) {
    result->start_error = errno;
    return;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, ends[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, ends[1], STDERR_FILENO);
#if DLOP__PROCESS_CAN_CHDIR
  if (directory != NULL) posix_spawn_file_actions_addchdir_np(&actions, directory);
#else
  (void)directory;
#endif
#if defined(__GLIBC_PREREQ)
#if __GLIBC_PREREQ(2, 34)
  /* The host's descriptors without close-on-exec stay out of the compiler as well. */
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
#endif
#endif
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &all);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid;
  int code = posix_spawn(&pid, program, &actions, &attributes, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(ends[1]);
  if (code != 0) {
    close(ends[0]);
    result->start_error = code;
    return;
  }
  result->started = 1;
  char *output = malloc(OUTPUT_KEPT + 1);
  size_t kept = 0;
  char chunk[4096];
  for (;;) {
    ssize_t count = read(ends[0], chunk, sizeof chunk);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) break;
    size_t room = OUTPUT_KEPT - kept;
    size_t taken = (size_t)count < room ? (size_t)count : room;
    if (output != NULL) memcpy(output + kept, chunk, taken);
    kept += taken;
  }
  close(ends[0]);
  if (output != NULL) output[kept] = '\0';
  result->output = output;
  int status = 0;
  pid_t done;
  while ((done = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  if (done != pid) return; /* ECHILD: SIGCHLD ignored, or another thread's waitpid(-1) */
  result->status_known = 1;
  if (WIFEXITED(status)) {
    result->exited = 1;
    result->exit_status = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result->signal_number = WTERMSIG(status);
  }
}

static const char *signal_text(int signal_number) {
#if defined(__GLIBC_PREREQ)
#if __GLIBC_PREREQ(2, 32)
  /* Untranslated and thread-safe, unlike strsignal. */
  const char *text = sigdescr_np(signal_number);
  if (text != NULL) return text;
#endif
#endif
  return strsignal(signal_number);
}

void dlop__process_result_free(dlop__process_result *result) {
  free(result->output);
  result->output = NULL;
}

int dlop__process_succeeded(const dlop__process_result *result) {
  return result->started && result->status_known && result->exited && result->exit_status == 0;
}

void dlop__process_describe(const dlop__process_result *result, char *text, size_t size) {
  if (!result->started)
    snprintf(text, size, "it could not be started: %s", strerror(result->start_error));
  else if (!result->status_known)
    snprintf(text, size, "an unknown exit status (the process was reaped elsewhere: is SIGCHLD "
                         "ignored in this process?)");
  else if (result->exited)
    snprintf(text, size, "exit status %d", result->exit_status);
  else
    snprintf(text, size, "signal %d (%s)", result->signal_number,
             signal_text(result->signal_number));
}
