/* jit_cache.c — keys, entry files and statistics of run-time compilation (jit_cache.h). An
 * entry file is the payload as the compiler made it (a cubin, PTX text, a shared object that
 * dlopen loads in place: the dynamic loader ignores bytes past the segments), followed by a
 * 96-byte trailer: magic, kind, payload size, the key's digest, the payload's SHA-256, an end
 * mark. A trailer rather than a header because a shared object must start with its ELF header.
 * Files are written under a temporary name and renamed, so several processes may write the
 * same key at once: each rename installs a whole entry. The directory is used only when it is
 * ours and not writable by group or others, since what it holds is code this process runs. */
#define _GNU_SOURCE
#include "jit_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define TRAILER_BYTES 96
#define TRAILER_MAGIC "DLOPJIT1" /* the last character is the format's version */
#define TRAILER_END "DLOPEND\n"
/* No compiler output comes near this; a bigger file is not an entry of ours. */
#define ENTRY_MAX_BYTES ((size_t)1 << 30)

/* ---- errors and time ---------------------------------------------------------------------- */

int dlop__jit_fail(int status, char *error, size_t error_size, const char *format, ...) {
  va_list args;
  va_start(args, format);
  if (error != NULL && error_size > 0) {
    va_list copy;
    va_copy(copy, args);
    vsnprintf(error, error_size, format, copy);
    va_end(copy);
  }
  dlop__verror(status, format, args);
  va_end(args);
  return status;
}

double dlop__jit_now(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

/* ---- keys --------------------------------------------------------------------------------- */

static void hash_part(dlop__sha256 *hash, const char *text) {
  uint64_t length = text ? (uint64_t)strlen(text) : UINT64_MAX; /* NULL differs from "" */
  uint8_t bytes[8];
  for (int i = 0; i < 8; i++) bytes[i] = (uint8_t)(length >> (8 * i));
  dlop__sha256_update(hash, bytes, sizeof bytes);
  if (text) dlop__sha256_update(hash, text, (size_t)length);
}

void dlop__jit_key_make(const char *kind, const char *compiler, const char *target,
                        const char *const *options, int32_t num_options, const char *source,
                        dlop__jit_key *key) {
  dlop__sha256 hash;
  dlop__sha256_init(&hash);
  hash_part(&hash, "dlop jit key 1");
  hash_part(&hash, kind);
  hash_part(&hash, compiler);
  hash_part(&hash, target);
  char count[24];
  snprintf(count, sizeof count, "%d", (int)num_options);
  hash_part(&hash, count);
  for (int32_t i = 0; i < num_options; i++) hash_part(&hash, options[i]);
  hash_part(&hash, source);
  dlop__sha256_final(&hash, key->digest);
  dlop__sha256_hex(key->digest, key->hex);
}

/* ---- the directory ------------------------------------------------------------------------ */

static pthread_once_t directory_once = PTHREAD_ONCE_INIT;
static char directory[PATH_MAX]; /* "" when there is no disk cache */
static atomic_int warned;

/* Warn once per process that the disk cache is not used, and why. */
static void warn_memory_only(const char *format, ...) __attribute__((format(printf, 1, 2)));
static void warn_memory_only(const char *format, ...) {
  if (atomic_exchange(&warned, 1)) return;
  char reason[PATH_MAX + 256];
  va_list args;
  va_start(args, format);
  vsnprintf(reason, sizeof reason, format, args);
  va_end(args);
  dlop__warn("run-time compilation cache: %s: compiled code is kept in this process's memory "
             "only (DLOP_CACHE_DIR names the directory; empty turns the disk cache off)",
             reason);
}

/* mkdir -p, creating what is missing as private (0700) directories. */
static int make_directories(const char *path) {
  char partial[PATH_MAX];
  size_t length = strlen(path);
  if (length >= sizeof partial) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(partial, path, length + 1);
  for (size_t i = 1; i <= length; i++) {
    if (partial[i] != '/' && partial[i] != '\0') continue;
    char kept = partial[i];
    partial[i] = '\0';
    if (mkdir(partial, 0700) != 0 && errno != EEXIST) return -1;
    partial[i] = kept;
  }
  struct stat info;
  if (stat(path, &info) != 0) return -1;
  if (!S_ISDIR(info.st_mode)) {
    errno = ENOTDIR;
    return -1;
  }
  return 0;
}

static void find_directory(void) {
  const char *root = getenv("DLOP_CACHE_DIR");
  const char *suffix = "";
  if (root != NULL) {
    if (root[0] != '\0' && root[0] != '/') {
      dlop__warn("DLOP_CACHE_DIR='%s' is relative and was ignored: use an absolute path (run-time "
                 "compilation keeps its results in memory only)",
                 root);
      return;
    }
  } else if ((root = getenv("XDG_CACHE_HOME")) != NULL && root[0] == '/') {
    suffix = "/dlop";
  } else if ((root = getenv("HOME")) != NULL && root[0] == '/') {
    suffix = "/.cache/dlop";
  } else {
    return;
  }
  if (root[0] == '\0') return;
  char wanted[PATH_MAX];
  int written = snprintf(wanted, sizeof wanted, "%s%s/jit", root, suffix);
  if (written <= 0 || (size_t)written >= sizeof wanted - 100) {
    warn_memory_only("the cache directory under '%s' has too long a path", root);
    return;
  }
  if (make_directories(wanted) != 0) {
    warn_memory_only("cannot create the directory %s (%s)", wanted, strerror(errno));
    return;
  }
  /* Entries are code this process will run: another user able to write here could plant one. */
  struct stat info;
  if (stat(wanted, &info) != 0) {
    warn_memory_only("cannot stat %s (%s)", wanted, strerror(errno));
    return;
  }
  if (info.st_uid != geteuid() || (info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    warn_memory_only("%s is %s (mode %04o, owner uid %u), so dlop does not run code from it "
                     "(chmod go-w it, or choose another DLOP_CACHE_DIR)",
                     wanted,
                     info.st_uid != geteuid() ? "owned by another user"
                                              : "writable by group or others",
                     (unsigned)(info.st_mode & 07777), (unsigned)info.st_uid);
    return;
  }
  memcpy(directory, wanted, (size_t)written + 1);
}

const char *dlop__jit_cache_dir(void) {
  pthread_once(&directory_once, find_directory);
  return directory;
}

static const char *extension(dlop__jit_kind kind) {
  switch (kind) {
    case DLOP__JIT_CUBIN: return "cubin";
    case DLOP__JIT_PTX: return "ptx";
    default: return "so";
  }
}

int dlop__jit_entry_path(const dlop__jit_key *key, dlop__jit_kind kind, char *path, size_t size) {
  const char *root = dlop__jit_cache_dir();
  if (root[0] == '\0') return -1;
  int written = snprintf(path, size, "%s/%s.%s", root, key->hex, extension(kind));
  return written > 0 && (size_t)written < size ? 0 : -1;
}

/* ---- the trailer -------------------------------------------------------------------------- */

static void put_u64(uint8_t *at, uint64_t value) {
  for (int i = 0; i < 8; i++) at[i] = (uint8_t)(value >> (8 * i));
}

static uint64_t get_u64(const uint8_t *at) {
  uint64_t value = 0;
  for (int i = 0; i < 8; i++) value |= (uint64_t)at[i] << (8 * i);
  return value;
}

static void make_trailer(const dlop__jit_key *key, dlop__jit_kind kind, uint64_t payload_bytes,
                         const uint8_t checksum[DLOP__SHA256_BYTES], uint8_t trailer[TRAILER_BYTES]) {
  memset(trailer, 0, TRAILER_BYTES);
  memcpy(trailer, TRAILER_MAGIC, 8);
  put_u64(trailer + 8, (uint64_t)kind); /* kind in the low 32 bits, 32 reserved bits */
  put_u64(trailer + 16, payload_bytes);
  memcpy(trailer + 24, key->digest, DLOP__SHA256_BYTES);
  memcpy(trailer + 56, checksum, DLOP__SHA256_BYTES);
  memcpy(trailer + 88, TRAILER_END, 8);
}

/* ---- reading ------------------------------------------------------------------------------ */

int dlop__jit_entry_read(const dlop__jit_key *key, dlop__jit_kind kind, void **payload,
                         size_t *bytes) {
  if (payload) *payload = NULL;
  *bytes = 0;
  char path[PATH_MAX];
  if (dlop__jit_entry_path(key, kind, path, sizeof path) != 0) return DLOP__JIT_ENTRY_MISSING;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return errno == ENOENT ? DLOP__JIT_ENTRY_MISSING : DLOP__JIT_ENTRY_CORRUPT;
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || info.st_size < TRAILER_BYTES ||
      (uint64_t)info.st_size > ENTRY_MAX_BYTES) {
    close(fd);
    return DLOP__JIT_ENTRY_CORRUPT;
  }
  size_t total = (size_t)info.st_size;
  uint8_t *data = malloc(total + 1);
  if (data == NULL) {
    close(fd);
    return DLOP__JIT_ENTRY_MISSING; /* out of memory: compiling will say so */
  }
  size_t done = 0;
  while (done < total) {
    ssize_t count = read(fd, data + done, total - done);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) break;
    done += (size_t)count;
  }
  close(fd);
  size_t payload_bytes = total - TRAILER_BYTES;
  const uint8_t *trailer = data + payload_bytes;
  uint8_t checksum[DLOP__SHA256_BYTES];
  int valid = done == total && memcmp(trailer, TRAILER_MAGIC, 8) == 0 &&
              memcmp(trailer + 88, TRAILER_END, 8) == 0 &&
              get_u64(trailer + 8) == (uint64_t)kind && get_u64(trailer + 16) == payload_bytes &&
              memcmp(trailer + 24, key->digest, DLOP__SHA256_BYTES) == 0;
  if (valid) {
    dlop__sha256_digest(data, payload_bytes, checksum);
    valid = memcmp(trailer + 56, checksum, DLOP__SHA256_BYTES) == 0;
  }
  if (!valid) {
    free(data);
    return DLOP__JIT_ENTRY_CORRUPT;
  }
  data[payload_bytes] = '\0';
  *bytes = payload_bytes;
  if (payload) *payload = data;
  else free(data);
  return DLOP__JIT_ENTRY_FOUND;
}

/* ---- writing ------------------------------------------------------------------------------ */

static atomic_uint temp_counter;

static int temp_path(const dlop__jit_key *key, dlop__jit_kind kind, char *path, size_t size) {
  const char *root = dlop__jit_cache_dir();
  if (root[0] == '\0') return -1;
  unsigned serial = atomic_fetch_add(&temp_counter, 1);
  /* pid and a per-process serial: unique among the processes sharing the directory. */
  int written = snprintf(path, size, "%s/.%s.%s.%ld.%u.tmp", root, key->hex, extension(kind),
                         (long)getpid(), serial);
  return written > 0 && (size_t)written < size ? 0 : -1;
}

int dlop__jit_entry_temp_file(const dlop__jit_key *key, dlop__jit_kind kind, char *path,
                              size_t size) {
  if (temp_path(key, kind, path, size) != 0) return -1;
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    warn_memory_only("cannot create %s (%s)", path, strerror(errno));
    return -1;
  }
  close(fd);
  return 0;
}

static int write_all(int fd, const void *data, size_t bytes) {
  const uint8_t *next = data;
  while (bytes > 0) {
    ssize_t count = write(fd, next, bytes);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) return -1;
    next += count;
    bytes -= (size_t)count;
  }
  return 0;
}

/* Rename temp_path over key's entry; on failure warn (the caller removes temp_path). */
static int install(const dlop__jit_key *key, dlop__jit_kind kind, const char *temp_path) {
  char path[PATH_MAX];
  if (dlop__jit_entry_path(key, kind, path, sizeof path) != 0 || rename(temp_path, path) != 0) {
    warn_memory_only("cannot rename %s into place (%s)", temp_path, strerror(errno));
    return -1;
  }
  return 0;
}

int dlop__jit_entry_write(const dlop__jit_key *key, dlop__jit_kind kind, const void *payload,
                          size_t bytes) {
  char temporary[PATH_MAX];
  if (temp_path(key, kind, temporary, sizeof temporary) != 0) return -1;
  int fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    warn_memory_only("cannot create %s (%s)", temporary, strerror(errno));
    return -1;
  }
  uint8_t checksum[DLOP__SHA256_BYTES], trailer[TRAILER_BYTES];
  dlop__sha256_digest(payload, bytes, checksum);
  make_trailer(key, kind, bytes, checksum, trailer);
  int failed = write_all(fd, payload, bytes) != 0 || write_all(fd, trailer, sizeof trailer) != 0;
  int code = errno;
  if (close(fd) != 0 && !failed) {
    failed = 1;
    code = errno;
  }
  if (failed) {
    unlink(temporary);
    warn_memory_only("cannot write %s (%s)", temporary, strerror(code));
    return -1;
  }
  if (install(key, kind, temporary) != 0) {
    unlink(temporary);
    return -1;
  }
  return 0;
}

int dlop__jit_entry_seal(const dlop__jit_key *key, dlop__jit_kind kind, const char *temp_path) {
  int fd = open(temp_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    warn_memory_only("cannot open %s (%s)", temp_path, strerror(errno));
    return -1;
  }
  dlop__sha256 hash;
  dlop__sha256_init(&hash);
  uint64_t payload_bytes = 0;
  uint8_t chunk[65536];
  int failed = 0;
  for (;;) {
    ssize_t count = read(fd, chunk, sizeof chunk);
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) failed = 1;
    if (count <= 0) break;
    dlop__sha256_update(&hash, chunk, (size_t)count);
    payload_bytes += (uint64_t)count;
  }
  uint8_t checksum[DLOP__SHA256_BYTES], trailer[TRAILER_BYTES];
  dlop__sha256_final(&hash, checksum);
  make_trailer(key, kind, payload_bytes, checksum, trailer);
  /* The read left the offset at the end of the file. */
  if (!failed) failed = write_all(fd, trailer, sizeof trailer) != 0;
  int code = errno;
  if (close(fd) != 0 && !failed) {
    failed = 1;
    code = errno;
  }
  if (failed) {
    /* A trailer may be half written: the file stays loadable, and it never becomes an entry. */
    warn_memory_only("cannot write %s (%s)", temp_path, strerror(code));
    return -1;
  }
  return install(key, kind, temp_path);
}

/* ---- statistics --------------------------------------------------------------------------- */

static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static dlop__jit_stats stats;

void dlop__jit_count_compile(double seconds, int failed) {
  pthread_mutex_lock(&stats_lock);
  stats.compiles++;
  if (failed) stats.compile_errors++;
  stats.compile_seconds += seconds;
  pthread_mutex_unlock(&stats_lock);
}

void dlop__jit_count_memory_hit(void) {
  pthread_mutex_lock(&stats_lock);
  stats.memory_hits++;
  pthread_mutex_unlock(&stats_lock);
}

void dlop__jit_count_disk_hit(double seconds) {
  pthread_mutex_lock(&stats_lock);
  stats.disk_hits++;
  stats.disk_hit_seconds += seconds;
  pthread_mutex_unlock(&stats_lock);
}

void dlop__jit_count_corrupt(void) {
  pthread_mutex_lock(&stats_lock);
  stats.corrupt_entries++;
  pthread_mutex_unlock(&stats_lock);
}

void dlop__jit_get_stats(dlop__jit_stats *result) {
  pthread_mutex_lock(&stats_lock);
  *result = stats;
  pthread_mutex_unlock(&stats_lock);
}
