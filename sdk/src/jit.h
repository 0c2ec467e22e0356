/* jit.h — run-time compilation inside libdlop: CUDA C through NVRTC (loaded with dlopen at first
 * use, never linked) and C through the host's C compiler, both behind one content-addressed
 * cache (memory and disk). Fusion compiles its generated kernels here, dlop check compiles the
 * scalar bodies it verifies here, and the host API's cuda_compile slot (ABI 1.2) is a thin
 * wrapper over dlop__cuda_compile_module. Every function is thread-safe and writes a message
 * naming what is missing or wrong on failure. */
#ifndef DLOP_JIT_H
#define DLOP_JIT_H

#include <stddef.h>
#include <stdint.h>

/* ---- CUDA C through NVRTC ---------------------------------------------------------------
 * Compile for the architecture arch (major * 10 + minor, e.g. 90): a cubin when the compiler
 * knows arch, else PTX for the newest architecture it knows (the driver JITs it). Needs no GPU
 * and no driver, so CI compiles here. The image is cached under a key of source, options,
 * architecture and compiler version; *image is malloc'ed (free it), *image_bytes its size, and
 * *is_ptx tells which it is. A compile error returns DLOP_INVALID_ARGUMENT with the compiler's
 * log (line numbers of source as given); a missing libnvrtc returns DLOP_NOT_FOUND naming the
 * sonames tried and DLOP_NVRTC_LIBRARY. An architecture older than every one NVRTC knows is
 * DLOP_UNSUPPORTED; an option naming the architecture (-arch, --gpu-architecture) is refused
 * with DLOP_INVALID_ARGUMENT, since the host chooses it. */
int dlop__nvrtc_compile(int32_t arch, const char *source, const char *const *options,
                        int32_t num_options, void **image, size_t *image_bytes, int *is_ptx,
                        char *error, size_t error_size);

/* dlop__nvrtc_compile without the copy: *image is the cache's own, valid (and unchanged) for
 * the life of the process, so it may be loaded by address (dlop_cuda_compile, cuda_source.c). */
int dlop__nvrtc_image(int32_t arch, const char *source, const char *const *options,
                      int32_t num_options, const void **image, size_t *image_bytes, int *is_ptx,
                      char *error, size_t error_size);

/* Compile for device device_id's architecture and load the image as the host API's
 * cuda_module_load does (release it with that table's cuda_module_unload). The same request
 * again gives the same module with one more reference. Needs the device (DLOP_NO_DEVICE
 * without it). Kernels are found by name: declare them extern "C". */
int dlop__cuda_compile_module(int32_t device_id, const char *source, const char *const *options,
                              int32_t num_options, void **module, char *error, size_t error_size);

/* Whether NVRTC can be loaded (1) or not (0, with the reason in why). */
int dlop__nvrtc_available(char *why, size_t why_size);

/* ---- C through the host's C compiler -----------------------------------------------------
 * DLOP_CC names the compiler (default "cc"); the source is compiled to a shared object
 * (`-O2 -fPIC -shared OPTIONS... -lm`: the baseline ISA of the host's ABI, as the plugins'
 * kernels are built, unless options add -march=..., -fno-math-errno and the like) in the cache
 * and loaded with dlopen. A source the compiler rejects returns DLOP_INVALID_ARGUMENT with what
 * it printed (its line numbers are those of source, named dlop_jit.c); a missing compiler
 * DLOP_NOT_FOUND naming DLOP_CC. Modules are reference counted per cache key: each successful
 * dlop__c_compile takes one reference, dlop__c_module_release drops it, and the last one
 * unloads the module (its functions must not be called after that). */
typedef struct dlop__c_module dlop__c_module;
int dlop__c_compile(const char *source, const char *const *options, int32_t num_options,
                    dlop__c_module **module, char *error, size_t error_size);
void *dlop__c_module_symbol(dlop__c_module *module, const char *name);
void dlop__c_module_release(dlop__c_module *module);

/* Whether a C compiler can be run (1) or not (0, with the reason in why). */
int dlop__c_compiler_available(char *why, size_t why_size);

/* ---- the cache ---------------------------------------------------------------------------
 * On disk under DLOP_CACHE_DIR, else $XDG_CACHE_HOME/dlop, else ~/.cache/dlop (DLOP_CACHE_DIR=""
 * keeps it in memory only). Entries are written to a temporary file and renamed, carry their
 * key and a checksum, and a corrupt or truncated entry is recompiled and replaced. */
typedef struct dlop__jit_stats {
  int64_t compiles;        /* compiler runs (NVRTC and C), failed ones included */
  int64_t memory_hits;     /* requests served from memory */
  int64_t disk_hits;       /* requests served from disk */
  int64_t corrupt_entries; /* disk entries found corrupt and replaced */
  double compile_seconds;  /* wall time spent compiling */
  /* added with the implementation: */
  int64_t compile_errors;  /* compiler runs that failed (the source did not compile) */
  double disk_hit_seconds; /* wall time spent reading, verifying and loading disk hits */
} dlop__jit_stats;
void dlop__jit_get_stats(dlop__jit_stats *stats);

#endif
