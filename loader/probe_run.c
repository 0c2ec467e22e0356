/* probe_run.c — runs the dlop-probe program on one plugin file in a fresh process and says how
 * that ended. A fresh program (posix_spawn), not a fork: the host may have many threads, CUDA
 * initialized or locks held, none of which a forked child could use safely. The child gets the
 * host's environment, default signal handling, /dev/null for input, descriptor 3 for its
 * result line and one pipe for its stdout and stderr, whose last line is quoted when the load
 * failed (the dynamic loader's "Inconsistency detected ..." and the like). */
#define _GNU_SOURCE /* pipe2, sigdescr_np, posix_spawn_file_actions_addclosefrom_np */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loader_internal.h"

extern char **environ;

#define RESULT_FD 3         /* the child's descriptor for its result line (probe_main.c) */
#define RESULT_MAX 2048     /* "ok\n", or "refused\n" and a load error */
#define OUTPUT_TAIL 2048    /* the last bytes of the child's stdout and stderr that are kept */
#define POLL_SLICE_MS 200   /* how often to look whether the child exited with its pipes held */

typedef struct probe_child {
  pid_t pid;
  int result_fd, output_fd; /* read ends; -1 once at end of file */
  char result[RESULT_MAX];
  size_t result_length;
  char output[OUTPUT_TAIL];
  size_t output_length;
} probe_child;

static double seconds_now(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

/* A pipe whose two ends lie above the child's descriptors 0-3, so that the spawn's dup2s never
 * meet an end already in place (close-on-exec: no other process started meanwhile inherits it). */
static int pipe_above_stdio(int ends[2]) {
  int raw[2];
  if (pipe2(raw, O_CLOEXEC) != 0) return -1;
  ends[0] = fcntl(raw[0], F_DUPFD_CLOEXEC, RESULT_FD + 1);
  ends[1] = fcntl(raw[1], F_DUPFD_CLOEXEC, RESULT_FD + 1);
  close(raw[0]);
  close(raw[1]);
  if (ends[0] >= 0 && ends[1] >= 0) return 0;
  if (ends[0] >= 0) close(ends[0]);
  if (ends[1] >= 0) close(ends[1]);
  return -1;
}

static int start_child(const char *program, const char *path, probe_child *child) {
  int result[2], output[2];
  if (pipe_above_stdio(result) != 0) return errno;
  if (pipe_above_stdio(output) != 0) {
    int code = errno;
    close(result[0]);
    close(result[1]);
    return code;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, output[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, output[1], STDERR_FILENO);
  posix_spawn_file_actions_adddup2(&actions, result[1], RESULT_FD);
#if defined(__GLIBC_PREREQ)
#if __GLIBC_PREREQ(2, 34)
  /* The host's own descriptors without close-on-exec stay out of the child as well. */
  posix_spawn_file_actions_addclosefrom_np(&actions, RESULT_FD + 1);
#endif
#endif
  /* Signals as a fresh program has them: a host that blocks or ignores some (SIGPIPE, SIGCHLD)
   * must not change how the child's load ends. */
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &all);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  char fd_text[8];
  snprintf(fd_text, sizeof fd_text, "%d", RESULT_FD);
  char *argv[] = {(char *)program, "--result-fd", fd_text, (char *)path, NULL};
  int code = posix_spawn(&child->pid, program, &actions, &attributes, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(result[1]);
  close(output[1]);
  if (code != 0) {
    close(result[0]);
    close(output[0]);
    return code;
  }
  child->result_fd = result[0];
  child->output_fd = output[0];
  return 0;
}

static void keep_tail(probe_child *child, const char *bytes, size_t count) {
  if (count >= OUTPUT_TAIL) {
    memcpy(child->output, bytes + count - OUTPUT_TAIL, OUTPUT_TAIL);
    child->output_length = OUTPUT_TAIL;
    return;
  }
  if (child->output_length + count > OUTPUT_TAIL) {
    size_t drop = child->output_length + count - OUTPUT_TAIL;
    memmove(child->output, child->output + drop, child->output_length - drop);
    child->output_length -= drop;
  }
  memcpy(child->output + child->output_length, bytes, count);
  child->output_length += count;
}

/* Read what is there on *fd; close it at end of file (or on an error). */
static void drain(probe_child *child, int *fd, int is_result) {
  char chunk[4096];
  ssize_t count = read(*fd, chunk, sizeof chunk);
  if (count < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (count <= 0) {
    close(*fd);
    *fd = -1;
    return;
  }
  if (!is_result) {
    keep_tail(child, chunk, (size_t)count);
    return;
  }
  size_t room = RESULT_MAX - 1 - child->result_length;
  size_t taken = (size_t)count < room ? (size_t)count : room;
  memcpy(child->result + child->result_length, chunk, taken);
  child->result_length += taken;
  child->result[child->result_length] = '\0';
}

/* Read whatever is already in the pipes without waiting (after the child was reaped while a
 * process it started still holds them: its last words may be there unread). */
static void drain_what_is_there(probe_child *child) {
  int *fds[2] = {&child->result_fd, &child->output_fd};
  for (int i = 0; i < 2; i++) {
    for (int rounds = 0; *fds[i] >= 0 && rounds < 64; rounds++) {
      struct pollfd one = {.fd = *fds[i], .events = POLLIN};
      if (poll(&one, 1, 0) <= 0) break;
      drain(child, fds[i], i == 0);
    }
  }
}

/* Collect the child's output until both pipes end (it exited), it exits while a process it
 * started still holds them, or the deadline passes. Returns 1 when the child was reaped here
 * (*status set), 0 when it is still to be waited for, -1 on the deadline. */
static int collect(probe_child *child, double deadline, int *status) {
  while (child->result_fd >= 0 || child->output_fd >= 0) {
    double left = deadline - seconds_now();
    if (left <= 0) return -1;
    struct pollfd fds[2];
    int *owners[2];
    int count = 0;
    if (child->result_fd >= 0) {
      fds[count] = (struct pollfd){.fd = child->result_fd, .events = POLLIN};
      owners[count++] = &child->result_fd;
    }
    if (child->output_fd >= 0) {
      fds[count] = (struct pollfd){.fd = child->output_fd, .events = POLLIN};
      owners[count++] = &child->output_fd;
    }
    int slice = left * 1000.0 < POLL_SLICE_MS ? (int)(left * 1000.0) + 1 : POLL_SLICE_MS;
    int ready = poll(fds, (nfds_t)count, slice);
    if (ready < 0 && errno != EINTR) return -1;
    if (ready == 0 && waitpid(child->pid, status, WNOHANG) == child->pid) {
      drain_what_is_there(child);
      return 1;
    }
    for (int i = 0; i < count && ready > 0; i++)
      if (fds[i].revents != 0) drain(child, owners[i], owners[i] == &child->result_fd);
  }
  return 0;
}

/* Wait for the child until the deadline. 1: *status set; 0: ECHILD (someone else reaped it:
 * SIGCHLD ignored, or another thread's waitpid(-1)); -1: the deadline passed. */
static int wait_until(pid_t pid, double deadline, int *status) {
  for (;;) {
    pid_t done = waitpid(pid, status, WNOHANG);
    if (done == pid) return 1;
    if (done < 0 && errno == ECHILD) return 0;
    if (done < 0 && errno != EINTR) return 0;
    if (seconds_now() >= deadline) return -1;
    /* Its pipes are closed, so it is exiting: this is a matter of microseconds. */
    struct timespec pause = {0, 200000};
    nanosleep(&pause, NULL);
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

/* The last non-empty line the child printed, made printable, or "" when it printed nothing. */
static void last_output_line(const probe_child *child, char *line, size_t size) {
  size_t end = child->output_length;
  while (end > 0 && (child->output[end - 1] == '\n' || child->output[end - 1] == '\r' ||
                     child->output[end - 1] == ' '))
    end--;
  size_t start = end;
  while (start > 0 && child->output[start - 1] != '\n') start--;
  size_t length = end - start;
  const size_t shown = 200;
  int cut = length > shown;
  if (cut) start = end - shown;
  size_t used = 0;
  if (cut && size > 4) used = (size_t)snprintf(line, size, "...");
  for (size_t i = start; i < end && used + 1 < size; i++) {
    unsigned char c = (unsigned char)child->output[i];
    line[used++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
  }
  line[used] = '\0';
}

/* Ends of a load the file's own code caused, which a second probe would only repeat: these
 * outcomes may be remembered. Timeouts, kills and interrupts may be the machine's doing. */
static int file_caused(int signal_number) {
  switch (signal_number) {
    case SIGSEGV: case SIGBUS: case SIGILL: case SIGFPE: case SIGABRT: case SIGTRAP: case SIGSYS:
      return 1;
    default: return 0;
  }
}

int dlop__probe_run(const dlop__probe_settings *settings, const char *path, char *reason,
                    size_t size, int *repeatable) {
  *repeatable = 0;
  const char *program = settings->program;
  if (program == NULL || program[0] == '\0') {
    snprintf(reason, size,
             "cannot tell where the dlop-probe program is (the directory of libdlop itself is "
             "unknown): set DLOP_PLUGIN_PROBE=off to load plugin files without probing them");
    return DLOP__PROBE_FAILED;
  }
  if (access(program, X_OK) != 0) {
    snprintf(reason, size,
             "the probe program %s is missing (%s): reinstall dlop, or set "
             "DLOP_PLUGIN_PROBE=off to load plugin files without probing them first",
             program, strerror(errno));
    return DLOP__PROBE_FAILED;
  }
  probe_child child;
  memset(&child, 0, sizeof child);
  child.result_fd = child.output_fd = -1;
  int code = start_child(program, path, &child);
  if (code != 0) {
    snprintf(reason, size, "cannot start the probe program %s: %s", program, strerror(code));
    return DLOP__PROBE_FAILED;
  }
  double timeout = settings->timeout_seconds > 0 ? settings->timeout_seconds : 30.0;
  double deadline = seconds_now() + timeout;
  int status = 0;
  int waited = collect(&child, deadline, &status);
  if (waited == 0) waited = wait_until(child.pid, deadline, &status);
  if (child.result_fd >= 0) close(child.result_fd);
  if (child.output_fd >= 0) close(child.output_fd);
  if (waited < 0) {
    kill(child.pid, SIGKILL);
    while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
    }
    snprintf(reason, size,
             "loading it in a child process did not finish within %g s (the probe was "
             "killed; DLOP_PLUGIN_PROBE_TIMEOUT sets the limit)",
             timeout);
    return DLOP__PROBE_FAILED;
  }
  int loaded = strncmp(child.result, "ok\n", 3) == 0;
  int refused = strncmp(child.result, "refused\n", 8) == 0;
  /* A refusal is a load error of the file, which the load in this process reports itself. */
  if (waited == 0) {
    if (loaded || refused) return loaded ? DLOP__PROBE_LOADED : DLOP__PROBE_REFUSED;
    snprintf(reason, size,
             "the probe of this file reported nothing and its exit status was lost (is SIGCHLD "
             "ignored in this process?)");
    return DLOP__PROBE_FAILED;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && loaded) return DLOP__PROBE_LOADED;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 1 && refused) return DLOP__PROBE_REFUSED;
  char how[160];
  if (WIFSIGNALED(status)) {
    snprintf(how, sizeof how, "signal %d (%s)", WTERMSIG(status), signal_text(WTERMSIG(status)));
    *repeatable = file_caused(WTERMSIG(status));
  } else {
    /* exit() or _exit() in the file's code (a constructor, the entry), or the dynamic loader
     * giving up (status 127 after "Inconsistency detected by ld.so"). */
    snprintf(how, sizeof how, "exit status %d%s", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
             loaded || refused ? "" : " before the load returned");
    *repeatable = 1;
  }
  char line[256];
  last_output_line(&child, line, sizeof line);
  if (loaded || refused)
    snprintf(reason, size,
             "loading it in a child process returned, but that process then ended with %s "
             "while exiting (in the plugin's destructors?)%s%s%s",
             how, line[0] ? "; its last output: \"" : "", line, line[0] ? "\"" : "");
  else
    snprintf(reason, size, "loading it in a child process ended with %s%s%s%s", how,
             line[0] ? "; its last output: \"" : "", line, line[0] ? "\"" : "");
  return DLOP__PROBE_FAILED;
}
