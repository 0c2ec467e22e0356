/* jit_test_support.c — see jit_test_support.h. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jit_test_support.h"
#include "test_support.h"

static char cache_root[64];
static pid_t cache_owner;

static int remove_one(const char *path, const struct stat *info, int flag, struct FTW *walk) {
  (void)info;
  (void)walk;
  if (flag == FTW_DP) rmdir(path);
  else unlink(path);
  return 0;
}

/* At the test process's exit (Check ends each test with exit): the directory goes, whether the
 * test passed or failed. Children forked by the tests leave with _exit and keep it. */
static void remove_cache(void) {
  if (getpid() == cache_owner && cache_root[0] != '\0')
    nftw(cache_root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *dlop_test_fresh_cache(void) {
  if (cache_root[0] != '\0') remove_cache();
  snprintf(cache_root, sizeof cache_root, "/tmp/dlop_test_jit_cache_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(cache_root));
  setenv("DLOP_CACHE_DIR", cache_root, 1);
  if (cache_owner == 0) atexit(remove_cache);
  cache_owner = getpid();
  return cache_root;
}

int dlop_test_cache_files(const char *suffix, int with_hidden, char *path, size_t size) {
  char directory[128];
  snprintf(directory, sizeof directory, "%s/jit", cache_root);
  DIR *dir = opendir(directory);
  if (dir == NULL) return 0;
  int count = 0;
  size_t suffix_length = strlen(suffix);
  for (struct dirent *entry; (entry = readdir(dir)) != NULL;) {
    const char *name = entry->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
    if (name[0] == '.' && !with_hidden) continue;
    size_t length = strlen(name);
    if (length < suffix_length || strcmp(name + length - suffix_length, suffix) != 0) continue;
    if (path != NULL) snprintf(path, size, "%s/%s", directory, name);
    count++;
  }
  closedir(dir);
  return count;
}

int dlop_test_in_child(int (*body)(void *argument), void *argument) {
  fflush(stdout);
  fflush(stderr);
  pid_t child = fork();
  ck_assert_int_ge(child, 0);
  if (child == 0) _exit(body(argument));
  int status = 0;
  ck_assert_int_eq(waitpid(child, &status, 0), child);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

dlop_jit_stats dlop_test_jit_stats(void) {
  dlop_jit_stats stats;
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  DLOP_CK_OK(dlop_jit_stats_get(&stats));
  return stats;
}
