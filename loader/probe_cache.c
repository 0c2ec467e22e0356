/* probe_cache.c — probes a plugin file once per file identity: the real path, device, inode,
 * size, modification and change times (nanoseconds) of the file, and the identity of the
 * dlop-probe program (a rebuilt dlop probes again). This process remembers every outcome the
 * file caused (loaded, refused with a load error, a crash, an exit); files that loaded fine are
 * also remembered on disk, one small file per identity in the cache directory, written whole
 * and renamed into place, and read back only when it holds exactly the expected text (anything
 * else is ignored and replaced). A crash is never remembered on disk: it may have been the
 * machine's doing. Entries of files that changed or went away are removed once the directory
 * holds more than a few dozen, so temporary plugin files do not pile up there. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "loader_internal.h"

#define CACHE_HEADER "dlop plugin probe 1\n"
#define KEY_MAX 6000 /* two paths and two identities */
#define PRUNE_ABOVE 64 /* entries in the directory before stale ones are looked for */

typedef struct remembered {
  char *key;
  int fine;
  char *reason; /* for a file refused: why (without the "PATH: plugin probe: " prefix) */
} remembered;

static pthread_mutex_t remembered_lock = PTHREAD_MUTEX_INITIALIZER;
static remembered *entries;
static int entry_count, entry_capacity;

static int identity(const char *path, char *buffer, size_t size) {
  struct stat info;
  if (stat(path, &info) != 0) return -1;
  snprintf(buffer, size, "%llu:%llu size %lld mtime %lld.%09ld ctime %lld.%09ld",
           (unsigned long long)info.st_dev, (unsigned long long)info.st_ino,
           (long long)info.st_size, (long long)info.st_mtim.tv_sec, info.st_mtim.tv_nsec,
           (long long)info.st_ctim.tv_sec, info.st_ctim.tv_nsec);
  return 0;
}

/* The text naming this probe: the file and the probe program. -1 when either cannot be stat'ed
 * (then nothing is remembered and the probe runs, to say what is wrong). */
static int make_key(const dlop__probe_settings *settings, const char *real_path, char *key,
                    size_t size) {
  char file[160], program[160];
  if (identity(real_path, file, sizeof file) != 0) return -1;
  if (settings->program == NULL || identity(settings->program, program, sizeof program) != 0)
    return -1;
  int written = snprintf(key, size, "plugin %s\nplugin-file %s\nprobe %s\nprobe-file %s\n", real_path,
                         file, settings->program, program);
  return written > 0 && (size_t)written < size ? 0 : -1;
}

/* ---- in this process ---------------------------------------------------------------------- */

static int recall(const char *key, char *reason, size_t size) {
  int found = -1;
  pthread_mutex_lock(&remembered_lock);
  for (int i = 0; i < entry_count && found < 0; i++) {
    if (strcmp(entries[i].key, key) != 0) continue;
    found = entries[i].fine;
    if (!found) snprintf(reason, size, "%s", entries[i].reason);
  }
  pthread_mutex_unlock(&remembered_lock);
  return found; /* 1 fine, 0 refused, -1 unknown */
}

static void remember(const char *key, int fine, const char *reason) {
  pthread_mutex_lock(&remembered_lock);
  if (entry_count == entry_capacity) {
    int capacity = entry_capacity ? 2 * entry_capacity : 16;
    remembered *grown = realloc(entries, (size_t)capacity * sizeof *grown);
    if (grown == NULL) goto done; /* only a cache */
    entries = grown;
    entry_capacity = capacity;
  }
  remembered entry = {strdup(key), fine, strdup(fine ? "" : reason)};
  if (entry.key == NULL || entry.reason == NULL) {
    free(entry.key);
    free(entry.reason);
    goto done;
  }
  entries[entry_count++] = entry;
done:
  pthread_mutex_unlock(&remembered_lock);
}

/* ---- on disk ------------------------------------------------------------------------------ */

/* FNV-1a, 64 bits: a file name for the key (the file holds the key itself, compared whole). */
static uint64_t hash_of(const char *text) {
  uint64_t hash = 14695981039346656037ull;
  for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
    hash ^= *p;
    hash *= 1099511628211ull;
  }
  return hash;
}

static int entry_path(const dlop__probe_settings *settings, const char *key, char *path,
                      size_t size) {
  int written = snprintf(path, size, "%s/%016llx", settings->cache_dir,
                         (unsigned long long)hash_of(key));
  return written > 0 && (size_t)written < size ? 0 : -1;
}

static int disk_says_fine(const dlop__probe_settings *settings, const char *key) {
  char path[4096];
  if (entry_path(settings, key, path, sizeof path) != 0) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return 0;
  char expected[KEY_MAX + 64], found[KEY_MAX + 64];
  int length = snprintf(expected, sizeof expected, "%s%sresult ok\n", CACHE_HEADER, key);
  size_t got = 0;
  while (got < sizeof found) {
    ssize_t count = read(fd, found + got, sizeof found - got);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) break;
    got += (size_t)count;
  }
  close(fd);
  return length > 0 && got == (size_t)length && memcmp(found, expected, got) == 0;
}

/* mkdir -p, private to the user (a cache of theirs). */
static int make_directories(const char *directory) {
  char path[4096];
  int written = snprintf(path, sizeof path, "%s", directory);
  if (written <= 0 || (size_t)written >= sizeof path) return -1;
  for (char *slash = strchr(path + 1, '/');; slash = strchr(slash + 1, '/')) {
    if (slash != NULL) *slash = '\0';
    if (mkdir(path, 0700) != 0 && errno != EEXIST) return -1;
    if (slash == NULL) return 0;
    *slash = '/';
  }
}

static int read_small_file(const char *path, char *text, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -1;
  size_t got = 0;
  while (got + 1 < size) {
    ssize_t count = read(fd, text + got, size - 1 - got);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) break;
    got += (size_t)count;
  }
  close(fd);
  text[got] = '\0';
  return (int)got;
}

/* The value of the line "<label> <value>" of text into value; -1 when there is none. */
static int line_value(const char *text, const char *label, char *value, size_t size) {
  size_t length = strlen(label);
  for (const char *line = text; line != NULL && *line; line = strchr(line, '\n')) {
    if (*line == '\n') line++;
    if (strncmp(line, label, length) != 0 || line[length] != ' ') continue;
    const char *start = line + length + 1, *end = strchr(start, '\n');
    if (end == NULL || (size_t)(end - start) >= size) return -1;
    memcpy(value, start, (size_t)(end - start));
    value[end - start] = '\0';
    return 0;
  }
  return -1;
}

static int entry_is_current(const char *text) {
  char plugin[4096], recorded[160], program[4096], recorded_program[160], now[160];
  if (line_value(text, "plugin", plugin, sizeof plugin) != 0 ||
      line_value(text, "plugin-file", recorded, sizeof recorded) != 0 ||
      line_value(text, "probe", program, sizeof program) != 0 ||
      line_value(text, "probe-file", recorded_program, sizeof recorded_program) != 0)
    return 0;
  if (identity(plugin, now, sizeof now) != 0 || strcmp(now, recorded) != 0) return 0;
  return identity(program, now, sizeof now) == 0 && strcmp(now, recorded_program) == 0;
}

/* Remove the entries of files that changed or are gone (or of a dlop-probe that was replaced),
 * and temporary files a writer left behind an hour ago or more. */
static void prune_stale_entries(const char *directory) {
  DIR *dir = opendir(directory);
  if (dir == NULL) return;
  int count = 0;
  for (struct dirent *entry; (entry = readdir(dir)) != NULL;) count += entry->d_name[0] != '.';
  if (count <= PRUNE_ABOVE) {
    closedir(dir);
    return;
  }
  rewinddir(dir);
  time_t now = time(NULL);
  for (struct dirent *entry; (entry = readdir(dir)) != NULL;) {
    if (entry->d_name[0] == '.') continue;
    char path[4400], text[KEY_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", directory, entry->d_name);
    struct stat info;
    if (lstat(path, &info) != 0 || !S_ISREG(info.st_mode)) continue;
    if (strstr(entry->d_name, ".tmp-") != NULL) {
      if (now - info.st_mtime > 3600) unlink(path);
      continue;
    }
    if (read_small_file(path, text, sizeof text) < 0 || !entry_is_current(text)) unlink(path);
  }
  closedir(dir);
}

/* Written whole to a temporary name, then renamed: a reader sees the old entry, the new one or
 * none, never half of one. Failures are ignored: the next process probes again. */
static void write_fine_to_disk(const dlop__probe_settings *settings, const char *key) {
  static unsigned counter; /* several threads may write: the name also carries a counter */
  char path[4096], temporary[4200], text[KEY_MAX + 64];
  if (entry_path(settings, key, path, sizeof path) != 0) return;
  if (make_directories(settings->cache_dir) != 0) return;
  unsigned serial = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
  snprintf(temporary, sizeof temporary, "%s.tmp-%ld-%u", path, (long)getpid(), serial);
  int length = snprintf(text, sizeof text, "%s%sresult ok\n", CACHE_HEADER, key);
  if (length <= 0 || (size_t)length >= sizeof text) return;
  int fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  size_t done = 0;
  while (done < (size_t)length) {
    ssize_t count = write(fd, text + done, (size_t)length - done);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) break;
    done += (size_t)count;
  }
  int ok = close(fd) == 0 && done == (size_t)length;
  if (!ok || rename(temporary, path) != 0) unlink(temporary);
  prune_stale_entries(settings->cache_dir);
}

/* ---- the probe ---------------------------------------------------------------------------- */

int dlop__probe_plugin(const dlop__probe_settings *settings, const char *path,
                       const char *real_path, dlop__loader_report *report) {
  char key[KEY_MAX], reason[900];
  int keyed = make_key(settings, real_path, key, sizeof key) == 0;
  int use_disk = keyed && settings->cache_dir != NULL && settings->cache_dir[0] == '/';
  int known = keyed ? recall(key, reason, sizeof reason) : -1;
  if (known < 0 && use_disk && disk_says_fine(settings, key)) {
    known = 1;
    remember(key, 1, NULL);
  }
  if (known < 0) {
    int repeatable = 0;
    int outcome = dlop__probe_run(settings, path, reason, sizeof reason, &repeatable);
    known = outcome != DLOP__PROBE_FAILED;
    if (keyed && (known || repeatable)) remember(key, known, reason);
    /* A file refused with a load error is probed again next time (it costs little): only
     * plugins that load are worth a file on disk. */
    if (outcome == DLOP__PROBE_LOADED && use_disk) write_fine_to_disk(settings, key);
  }
  if (known) return DLOP_OK;
  return dlop__loader_error(report, DLOP_LOAD_ERROR, "%s: plugin probe: %s", path, reason);
}
