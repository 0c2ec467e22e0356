/* jit_cache.h — the content-addressed store behind run-time compilation (jit.h): keys (a
 * SHA-256 of everything the compiler's output depends on), entry files on disk (payload, then
 * a trailer with the key and the payload's checksum, written to a temporary file and renamed
 * into place), and the statistics. The in-memory tables live with their compilers (nvrtc.c,
 * host_cc.c), because what they hold differs: images there, loaded shared objects here. */
#ifndef DLOP_JIT_CACHE_H
#define DLOP_JIT_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "jit.h"
#include "jit_sha256.h"

typedef struct dlop__jit_key {
  uint8_t digest[DLOP__SHA256_BYTES];
  char hex[2 * DLOP__SHA256_BYTES + 1];
} dlop__jit_key;

/* The key of one compilation: which compiler (kind, e.g. "nvrtc" or "c"), its identity (its
 * version, path), the target it compiles for ("sm_90", "compute_120", the host's CPU), the
 * options in order, and the source. Each part is hashed with its length, so that no two
 * different lists of parts give the same bytes ({"-DA", "B"} and {"-DAB"} differ). */
void dlop__jit_key_make(const char *kind, const char *compiler, const char *target,
                        const char *const *options, int32_t num_options, const char *source,
                        dlop__jit_key *key);

/* What an entry holds; also its file name's extension. */
typedef enum dlop__jit_kind {
  DLOP__JIT_CUBIN = 1,
  DLOP__JIT_PTX = 2,
  DLOP__JIT_SHARED_OBJECT = 3
} dlop__jit_kind;

/* <root>/jit, root from DLOP_CACHE_DIR, else $XDG_CACHE_HOME/dlop, else $HOME/.cache/dlop; ""
 * when there is no disk cache (DLOP_CACHE_DIR="", no home). Read once, at the first use. */
const char *dlop__jit_cache_dir(void);

/* The entry file of key: <dir>/<64 hex digits>.cubin|.ptx|.so. 0, or -1 without a disk cache. */
int dlop__jit_entry_path(const dlop__jit_key *key, dlop__jit_kind kind, char *path, size_t size);

enum {
  DLOP__JIT_ENTRY_MISSING = 0, /* no file: compile */
  DLOP__JIT_ENTRY_FOUND = 1,   /* verified */
  DLOP__JIT_ENTRY_CORRUPT = 2  /* truncated, altered or of another key: counted; compile and replace */
};
/* Read and verify key's entry. FOUND: *payload (malloc'ed, with a NUL byte after the *bytes
 * bytes, so PTX is a C string; payload may be NULL to verify only) and *bytes. */
int dlop__jit_entry_read(const dlop__jit_key *key, dlop__jit_kind kind, void **payload,
                         size_t *bytes);

/* Store payload as key's entry: a temporary file in the cache directory, renamed over the
 * entry, so that readers see the old entry or the new one, never a part. 0 when stored; -1
 * when it could not be (no disk cache, or the directory is not writable: warned about once
 * per process, then memory only), which is never an error of the compilation. */
int dlop__jit_entry_write(const dlop__jit_key *key, dlop__jit_kind kind, const void *payload,
                          size_t bytes);

/* For a compiler that writes its output file itself (the C compiler): a fresh, empty
 * temporary file in the cache directory, created here so that the directory is known to be
 * writable (0), or -1 when there is no writable one (warned about once). */
int dlop__jit_entry_temp_file(const dlop__jit_key *key, dlop__jit_kind kind, char *path,
                              size_t size);
/* Append the trailer to the file at temp_path (a temporary path from above) and rename it over
 * key's entry. 0, or -1 (warned about once): temp_path is then left for the caller, who may
 * still load it, and must remove it. */
int dlop__jit_entry_seal(const dlop__jit_key *key, dlop__jit_kind kind, const char *temp_path);

/* ---- statistics ------------------------------------------------------------------------ */
void dlop__jit_count_compile(double seconds, int failed);
void dlop__jit_count_memory_hit(void);
void dlop__jit_count_disk_hit(double seconds);
void dlop__jit_count_corrupt(void);

/* Monotonic seconds, for the times above. */
double dlop__jit_now(void);

/* Write the message into error (when not NULL) and as libdlop's last error; return status. */
int dlop__jit_fail(int status, char *error, size_t error_size, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

#endif
