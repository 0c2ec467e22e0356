/* nvrtc_recall.c — the record of which NVRTC this process would load (nvrtc_recall.h).
 *
 * A record is the file <cache root>/compilers/<key>.nvrtc beside the compile cache's jit/
 * folder. Its key hashes everything that decides which file dlopen picks: DLOP_NVRTC_LIBRARY,
 * LD_LIBRARY_PATH, CUDA_HOME and CUDA_PATH, the loader's cache file (/etc/ld.so.cache: ldconfig
 * rewrites it when libraries come or go), libdlop's own file (its run path), and every file dlop
 * would try by name in those folders (a new libnvrtc dropped into one of them changes the key).
 * The record names the file the library was loaded from, with its device, inode, size and
 * modification time, and is used only while that file is unchanged. What a stale record could
 * cost is a cache entry compiled by the NVRTC it names: still that source for that target.
 * Not in the key: the executable's own run path (DT_RPATH), and a libnvrtc another library
 * loaded into the process first (PyTorch's or CuPy's wheel): nvrtc.c neither reads nor writes a
 * record in a process that has NVRTC loaded already, since dlopen then returns that copy. */
#define _GNU_SOURCE
#include "nvrtc_recall.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jit_cache.h"
#include "jit_sha256.h"

#define RECORD_MAX_BYTES 8192
const char *const dlop__nvrtc_sonames[DLOP__NVRTC_SONAMES] = {"libnvrtc.so.13", "libnvrtc.so.12"};

static void hash_text(dlop__sha256 *hash, const char *text) {
  uint64_t length = text ? (uint64_t)strlen(text) : UINT64_MAX; /* unset differs from "" */
  dlop__sha256_update(hash, &length, sizeof length);
  if (text) dlop__sha256_update(hash, text, (size_t)length);
}

/* A file's identity as text: "dev ino size mtime.ns", or "-" when there is none. */
static void file_identity(const char *path, char *text, size_t size) {
  struct stat info;
  if (path == NULL || stat(path, &info) != 0) {
    snprintf(text, size, "-");
    return;
  }
  snprintf(text, size, "%llu %llu %lld %lld.%09ld", (unsigned long long)info.st_dev,
           (unsigned long long)info.st_ino, (long long)info.st_size,
           (long long)info.st_mtim.tv_sec, (long)info.st_mtim.tv_nsec);
}

static void hash_file(dlop__sha256 *hash, const char *path) {
  char text[128];
  file_identity(path, text, sizeof text);
  hash_text(hash, path);
  hash_text(hash, text);
}

/* Each candidate name in each folder of a ':'-separated list (NULL: none). */
static void hash_folders(dlop__sha256 *hash, const char *list, const char *sub) {
  if (list == NULL) return;
  const char *start = list;
  for (;;) {
    const char *end = strchr(start, ':');
    size_t length = end ? (size_t)(end - start) : strlen(start);
    char path[PATH_MAX];
    for (size_t i = 0; i < DLOP__NVRTC_SONAMES; i++)
      if (length > 0 && snprintf(path, sizeof path, "%.*s%s/%s", (int)length, start, sub,
                                 dlop__nvrtc_sonames[i]) < (int)sizeof path)
        hash_file(hash, path);
    if (end == NULL) break;
    start = end + 1;
  }
}

static void locator_key(dlop__jit_key *key) {
  dlop__sha256 hash;
  dlop__sha256_init(&hash);
  hash_text(&hash, "dlop nvrtc locator 1");
  static const char *const variables[] = {"DLOP_NVRTC_LIBRARY", "LD_LIBRARY_PATH", "CUDA_HOME",
                                          "CUDA_PATH"};
  for (size_t i = 0; i < sizeof variables / sizeof variables[0]; i++)
    hash_text(&hash, getenv(variables[i]));
  const char *chosen = getenv("DLOP_NVRTC_LIBRARY");
  if (chosen != NULL && chosen[0] != '\0') hash_file(&hash, chosen);
  hash_file(&hash, "/etc/ld.so.cache");
  Dl_info self;
  if (dladdr((void *)locator_key, &self) != 0 && self.dli_fname != NULL) hash_file(&hash, self.dli_fname);
  hash_folders(&hash, getenv("LD_LIBRARY_PATH"), "");
  hash_folders(&hash, getenv("CUDA_HOME"), "/lib64");
  hash_folders(&hash, getenv("CUDA_PATH"), "/lib64");
  hash_folders(&hash, "/usr/local/cuda", "/lib64");
  dlop__sha256_final(&hash, key->digest);
  dlop__sha256_hex(key->digest, key->hex);
}

/* <root>/compilers (created 0700), when the compile cache has a directory on disk and this one
 * is this user's alone (as jit/ must be). 0, or -1. */
static int records_folder(char *folder, size_t size) {
  const char *jit = dlop__jit_cache_dir();
  size_t length = strlen(jit);
  if (length < 4 || strcmp(jit + length - 4, "/jit") != 0) return -1;
  if (snprintf(folder, size, "%.*s/compilers", (int)(length - 4), jit) >= (int)size) return -1;
  if (mkdir(folder, 0700) != 0 && errno != EEXIST) return -1;
  struct stat info;
  if (stat(folder, &info) != 0 || !S_ISDIR(info.st_mode) || info.st_uid != geteuid() ||
      (info.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return -1;
  return 0;
}

static int record_path(const dlop__jit_key *key, char *path, size_t size) {
  char folder[PATH_MAX];
  if (records_folder(folder, sizeof folder) != 0) return -1;
  return snprintf(path, size, "%s/%s.nvrtc", folder, key->hex) < (int)size ? 0 : -1;
}

/* The record's text:
 *   dlop nvrtc record 1\n<library path>\n<its file identity>\n<identity>\n<count> <arch>...\nend\n */
int dlop__nvrtc_recall(dlop__nvrtc_facts *facts) {
  dlop__jit_key key;
  char path[PATH_MAX], text[RECORD_MAX_BYTES + 1];
  locator_key(&key);
  if (record_path(&key, path, sizeof path) != 0) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return 0;
  ssize_t got = read(fd, text, RECORD_MAX_BYTES);
  close(fd);
  if (got <= 0 || got >= RECORD_MAX_BYTES) return 0;
  text[got] = '\0';
  char *lines[6], *cursor = text;
  for (int i = 0; i < 6; i++) {
    char *end = strchr(cursor, '\n');
    if (end == NULL) return 0;
    *end = '\0';
    lines[i] = cursor;
    cursor = end + 1;
  }
  if (strcmp(lines[0], "dlop nvrtc record 1") != 0 || strcmp(lines[5], "end") != 0 ||
      *cursor != '\0' || strlen(lines[3]) >= sizeof facts->identity)
    return 0;
  char now[128];
  file_identity(lines[1], now, sizeof now);
  if (strcmp(now, lines[2]) != 0) return 0; /* the library file changed: load it */
  char *at = lines[4], *end;
  long count = strtol(at, &end, 10);
  if (end == at || count <= 0 || count > 256) return 0;
  int *archs = malloc((size_t)count * sizeof *archs);
  if (archs == NULL) return 0;
  for (long i = 0; i < count; i++) {
    at = end;
    long arch = strtol(at, &end, 10);
    if (end == at || arch < 10 || arch > 10000 || (i > 0 && arch <= archs[i - 1])) {
      free(archs);
      return 0;
    }
    archs[i] = (int)arch;
  }
  if (*end != '\0') {
    free(archs);
    return 0;
  }
  snprintf(facts->identity, sizeof facts->identity, "%s", lines[3]);
  facts->archs = archs;
  facts->num_archs = (int)count;
  return 1;
}

void dlop__nvrtc_remember(const void *symbol, const dlop__nvrtc_facts *facts) {
  Dl_info where;
  if (dladdr(symbol, &where) == 0 || where.dli_fname == NULL || where.dli_fname[0] != '/') return;
  char library[PATH_MAX], identity[128], path[PATH_MAX], temp[PATH_MAX + 64];
  if (realpath(where.dli_fname, library) == NULL) return;
  file_identity(library, identity, sizeof identity);
  if (strcmp(identity, "-") == 0) return;
  dlop__jit_key key;
  locator_key(&key);
  if (record_path(&key, path, sizeof path) != 0) return;
  char text[RECORD_MAX_BYTES];
  int used = snprintf(text, sizeof text, "dlop nvrtc record 1\n%s\n%s\n%s\n%d", library,
                      identity, facts->identity, facts->num_archs);
  for (int i = 0; i < facts->num_archs && used > 0 && used < (int)sizeof text; i++)
    used += snprintf(text + used, sizeof text - (size_t)used, " %d", facts->archs[i]);
  if (used <= 0 || used >= (int)sizeof text - 8) return;
  used += snprintf(text + used, sizeof text - (size_t)used, "\nend\n");
  snprintf(temp, sizeof temp, "%s.%ld.tmp", path, (long)getpid());
  unlink(temp); /* one a crashed process of the same pid left: the folder is this user's alone */
  int fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return;
  int ok = write(fd, text, (size_t)used) == used;
  ok = close(fd) == 0 && ok;
  if (!ok || rename(temp, path) != 0) unlink(temp);
}
