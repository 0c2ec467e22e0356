/* host_cc.c — C compiled at run time by the host's C compiler (DLOP_CC, default cc on PATH)
 * into a shared object, loaded with dlopen: for CPU fusion and for dlop check. The compiler is
 * found and identified once (its path, the first line of `--version`, `-dumpmachine`), and
 * that identity is part of every key, so an upgraded compiler compiles again. The shared
 * object is written into the cache directory under a temporary name, sealed with its trailer
 * and renamed into place (jit_cache.h), and dlopen'ed from there; without a usable cache
 * directory it is built in a private temporary directory and removed once loaded. Loaded
 * modules are reference counted per key and unloaded with their last reference. */
#define _GNU_SOURCE /* mkdtemp */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host_cc.h"
#include "internal.h"
#include "jit.h"
#include "jit_cache.h"

/* Flags before the caller's options; -lm after the source, for <math.h> functions. */
static const char *const leading_flags[] = {"-O2", "-fPIC", "-shared"};
#define KEY_KIND "c -O2 -fPIC -shared ... -lm"
#define SOURCE_NAME "dlop_jit.c"

/* ---- the compiler ------------------------------------------------------------------------- */

static pthread_once_t compiler_once = PTHREAD_ONCE_INIT;
static int compiler_found;
static char compiler_path[PATH_MAX];
static char compiler_identity[PATH_MAX + 1024];
static char compiler_message[PATH_MAX + 1024];

/* name as execvp would find it on PATH (an empty entry is the current directory). */
static int search_path(const char *name, char *found, size_t size) {
  const char *path = getenv("PATH");
  if (path == NULL) path = "/usr/local/bin:/usr/bin:/bin";
  for (const char *start = path;; start++) {
    const char *end = strchr(start, ':');
    size_t length = end ? (size_t)(end - start) : strlen(start);
    int written = length == 0 ? snprintf(found, size, "./%s", name)
                              : snprintf(found, size, "%.*s/%s", (int)length, start, name);
    struct stat info;
    if (written > 0 && (size_t)written < size && stat(found, &info) == 0 &&
        S_ISREG(info.st_mode) && access(found, X_OK) == 0)
      return 0;
    if (end == NULL) return -1;
    start = end;
  }
}

/* The first line of what `compiler flag` prints, or "" (and 0) when it did not succeed. */
static int ask_compiler(const char *flag, char *line, size_t size, char *how, size_t how_size) {
  char *argv[] = {compiler_path, (char *)flag, NULL};
  dlop__process_result result;
  dlop__process_run(compiler_path, argv, NULL, &result);
  const char *output = result.output ? result.output : "";
  size_t length = strcspn(output, "\n");
  snprintf(line, size, "%.*s", (int)length, output);
  /* With SIGCHLD ignored the exit status is lost: an answer is then taken as success. */
  int ok = dlop__process_succeeded(&result) ||
           (result.started && !result.status_known && line[0] != '\0');
  if (!ok) {
    char described[160];
    dlop__process_describe(&result, described, sizeof described);
    snprintf(how, how_size, "%s%s%s", described, line[0] ? ": " : "", line);
  }
  dlop__process_result_free(&result);
  return ok;
}

static void find_compiler(void) {
  const char *name = getenv("DLOP_CC");
  int chosen = name != NULL && name[0] != '\0';
  if (!chosen) name = "cc";
  const char *hint = strchr(name, ' ') ? " (DLOP_CC names one program, without arguments: "
                                         "flags come as options)"
                                       : "";
  if (strchr(name, '/') != NULL) {
    struct stat info;
    const char *why = NULL;
    if (stat(name, &info) != 0) why = strerror(errno);
    else if (!S_ISREG(info.st_mode)) why = "not a regular file";
    else if (access(name, X_OK) != 0) why = strerror(errno);
    if (why != NULL) {
      snprintf(compiler_message, sizeof compiler_message,
               "the C compiler %s%s cannot be run (%s)%s: set DLOP_CC to a C compiler (gcc, "
               "clang)%s",
               chosen ? "DLOP_CC=" : "", name, why, hint, chosen ? " or unset it to use cc" : "");
      return;
    }
    snprintf(compiler_path, sizeof compiler_path, "%s", name);
  } else if (search_path(name, compiler_path, sizeof compiler_path) != 0) {
    snprintf(compiler_message, sizeof compiler_message,
             "the C compiler %s%s was not found on PATH%s: install one (gcc or clang) or set "
             "DLOP_CC to its path",
             chosen ? "DLOP_CC=" : "", name, hint);
    return;
  }
  /* The compiler runs in its work directory: a relative path must not change meaning there.
   * Absolute, but symbolic links kept: ccache and the like go by the name they are run as. */
  if (compiler_path[0] != '/') {
    char here[PATH_MAX], relative[PATH_MAX];
    memcpy(relative, compiler_path, sizeof relative);
    if (getcwd(here, sizeof here) == NULL ||
        snprintf(compiler_path, sizeof compiler_path, "%s/%s", here, relative) >=
            (int)sizeof compiler_path) {
      snprintf(compiler_message, sizeof compiler_message,
               "the C compiler %s: cannot make its path absolute (%s)", relative, strerror(errno));
      return;
    }
  }
  char version[512], machine[256], how[768];
  if (!ask_compiler("--version", version, sizeof version, how, sizeof how)) {
    snprintf(compiler_message, sizeof compiler_message,
             "the C compiler %s%s (%s) did not answer --version (%s): set DLOP_CC to a C "
             "compiler (gcc, clang)",
             chosen ? "DLOP_CC=" : "", name, compiler_path, how);
    return;
  }
  if (!ask_compiler("-dumpmachine", machine, sizeof machine, how, sizeof how))
    snprintf(machine, sizeof machine, "(no -dumpmachine)");
  snprintf(compiler_identity, sizeof compiler_identity, "%s\n%s\n%s", compiler_path, version,
           machine);
  compiler_found = 1;
}

static int ensure_compiler(char *error, size_t error_size) {
  pthread_once(&compiler_once, find_compiler);
  if (!compiler_found)
    return dlop__jit_fail(DLOP_NOT_FOUND, error, error_size, "%s", compiler_message);
  return DLOP_OK;
}

int dlop__c_compiler_available(char *why, size_t why_size) {
  pthread_once(&compiler_once, find_compiler);
  if (!compiler_found) dlop__format(why, why_size, "%s", compiler_message);
  else dlop__format(why, why_size, "%s", compiler_identity);
  return compiler_found;
}

/* ---- the target: the machine, and the CPU itself when an option asks for "native" -------- */

static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
static char cpu_description[8192];

/* /proc/cpuinfo's first "model name" and "flags" lines: what -march=native compiles for. */
static void describe_cpu(void) {
  FILE *file = fopen("/proc/cpuinfo", "re");
  size_t used = 0;
  if (file != NULL) {
    char line[8192];
    int have_model = 0, have_flags = 0;
    while ((!have_model || !have_flags) && fgets(line, sizeof line, file) != NULL) {
      int model = !have_model && strncmp(line, "model name", 10) == 0;
      int flags = !have_flags && strncmp(line, "flags", 5) == 0;
      if (!model && !flags) continue;
      have_model |= model;
      have_flags |= flags;
      if (used < sizeof cpu_description)
        used += (size_t)snprintf(cpu_description + used, sizeof cpu_description - used, "%s", line);
    }
    fclose(file);
  }
  if (used == 0) snprintf(cpu_description, sizeof cpu_description, "(unknown CPU)");
}

static const char *target_of(const char *const *options, int32_t num_options) {
  for (int32_t i = 0; i < num_options; i++) {
    if (strstr(options[i], "native") != NULL) {
      pthread_once(&cpu_once, describe_cpu);
      return cpu_description;
    }
  }
  return "host";
}

/* ---- the module table --------------------------------------------------------------------- */

struct dlop__c_module {
  uint8_t digest[DLOP__SHA256_BYTES];
  int ready; /* 0 while one thread builds it (others wait) */
  int references;
  void *handle;
  struct dlop__c_module *next;
};

static pthread_mutex_t modules_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t modules_changed = PTHREAD_COND_INITIALIZER;
static dlop__c_module *modules;

static dlop__c_module *find_locked(const dlop__jit_key *key) {
  for (dlop__c_module *module = modules; module; module = module->next)
    if (memcmp(module->digest, key->digest, sizeof module->digest) == 0) return module;
  return NULL;
}

static void remove_locked(dlop__c_module *gone) {
  for (dlop__c_module **link = &modules; *link; link = &(*link)->next) {
    if (*link == gone) {
      *link = gone->next;
      break;
    }
  }
}

/* ---- building ----------------------------------------------------------------------------- */

static int write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  size_t left = strlen(text);
  while (left > 0) {
    ssize_t count = write(fd, text, left);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) {
      close(fd);
      return -1;
    }
    text += count;
    left -= (size_t)count;
  }
  return close(fd);
}

/* Whether path holds a shared object's ELF header (when the compiler's exit status was lost). */
static int looks_built(const char *path) {
  unsigned char magic[4] = {0};
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t count = read(fd, magic, sizeof magic);
  close(fd);
  return count == 4 && memcmp(magic, "\177ELF", 4) == 0;
}

/* Compile source into a shared object and dlopen it: *handle. */
static int build(const dlop__jit_key *key, const char *source, const char *const *options,
                 int32_t num_options, void **handle, char *error, size_t error_size) {
  *handle = NULL;
  const char *temporary = getenv("TMPDIR");
  char work[PATH_MAX];
  snprintf(work, sizeof work, "%s/dlop-cc-XXXXXX",
           temporary && temporary[0] == '/' ? temporary : "/tmp");
  if (mkdtemp(work) == NULL)
    return dlop__jit_fail(DLOP_INTERNAL, error, error_size,
                          "C compilation: cannot create a temporary directory %s (%s): set TMPDIR "
                          "to a writable directory",
                          work, strerror(errno));
  char source_path[PATH_MAX + 32], output_path[PATH_MAX + 32];
  snprintf(source_path, sizeof source_path, "%s/" SOURCE_NAME, work);
  int in_cache = dlop__jit_entry_temp_file(key, DLOP__JIT_SHARED_OBJECT, output_path,
                                           sizeof output_path) == 0;
  if (!in_cache) snprintf(output_path, sizeof output_path, "%s/dlop_jit.so", work);
  int status = DLOP_OK;
  if (write_file(source_path, source) != 0) {
    status = dlop__jit_fail(DLOP_INTERNAL, error, error_size,
                            "C compilation: cannot write %s (%s)", source_path, strerror(errno));
    goto done;
  }
  /* compiler, leading flags, options, -o output, the source, -lm, NULL */
  size_t count = 1 + sizeof leading_flags / sizeof leading_flags[0] + (size_t)num_options + 5;
  char **argv = calloc(count, sizeof *argv);
  if (argv == NULL) {
    status = dlop__jit_fail(DLOP_OUT_OF_MEMORY, error, error_size, "C compilation: out of memory");
    goto done;
  }
  size_t next = 0;
  argv[next++] = compiler_path;
  for (size_t i = 0; i < sizeof leading_flags / sizeof leading_flags[0]; i++)
    argv[next++] = (char *)leading_flags[i];
  for (int32_t i = 0; i < num_options; i++) argv[next++] = (char *)options[i];
  argv[next++] = "-o";
  argv[next++] = output_path;
  /* Run in the work directory, so that diagnostics read "dlop_jit.c:3:5: error: ...". */
  argv[next++] = DLOP__PROCESS_CAN_CHDIR ? SOURCE_NAME : source_path;
  argv[next++] = "-lm";
  argv[next] = NULL;
  double started = dlop__jit_now();
  dlop__process_result result;
  dlop__process_run(compiler_path, argv, work, &result);
  free(argv);
  int built = dlop__process_succeeded(&result) ||
              (result.started && !result.status_known && looks_built(output_path));
  dlop__jit_count_compile(dlop__jit_now() - started, !built);
  if (!built) {
    char how[256];
    dlop__process_describe(&result, how, sizeof how);
    const char *output = result.output ? result.output : "";
    size_t length = strlen(output);
    while (length > 0 && (output[length - 1] == '\n' || output[length - 1] == ' ')) length--;
    /* A source the compiler rejects is the caller's error; a compiler that crashed or could
     * not start is not. */
    int code = !result.started                             ? DLOP_NOT_FOUND
               : result.exited || !result.status_known ? DLOP_INVALID_ARGUMENT
                                                       : DLOP_INTERNAL;
    status = dlop__jit_fail(code, error,
                            error_size, "the C compiler %s failed on the source (%s)%s%.*s",
                            compiler_path, how, length ? "; its output:\n" : "", (int)length,
                            output);
    dlop__process_result_free(&result);
    unlink(output_path);
    goto done;
  }
  dlop__process_result_free(&result);
  char entry_path[PATH_MAX];
  const char *load_path = output_path;
  if (in_cache && dlop__jit_entry_seal(key, DLOP__JIT_SHARED_OBJECT, output_path) == 0 &&
      dlop__jit_entry_path(key, DLOP__JIT_SHARED_OBJECT, entry_path, sizeof entry_path) == 0) {
    load_path = entry_path;
    in_cache = 2; /* installed: nothing to remove */
  }
  *handle = dlopen(load_path, RTLD_NOW | RTLD_LOCAL);
  if (*handle == NULL) {
    const char *why = dlerror();
    status = dlop__jit_fail(DLOP_LOAD_ERROR, error, error_size,
                            "the shared object the C compiler built cannot be loaded: %s (is %s "
                            "on a filesystem mounted noexec? DLOP_CACHE_DIR and TMPDIR choose "
                            "the directories)",
                            why ? why : "dlopen failed", load_path);
  }
  /* Loaded or not, a file outside the cache is not kept: its mapping lives on. */
  if (in_cache != 2) unlink(output_path);
done:
  unlink(source_path);
  rmdir(work);
  return status;
}

/* Load key's entry from the disk cache: 1 loaded, 0 not there (or corrupt: counted). */
static int load_cached(const dlop__jit_key *key, void **handle) {
  *handle = NULL;
  double started = dlop__jit_now();
  size_t bytes = 0;
  int found = dlop__jit_entry_read(key, DLOP__JIT_SHARED_OBJECT, NULL, &bytes);
  if (found == DLOP__JIT_ENTRY_MISSING) return 0;
  char path[PATH_MAX];
  if (found == DLOP__JIT_ENTRY_FOUND &&
      dlop__jit_entry_path(key, DLOP__JIT_SHARED_OBJECT, path, sizeof path) == 0) {
    *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (*handle != NULL) {
      dlop__jit_count_disk_hit(dlop__jit_now() - started);
      return 1;
    }
    /* Intact but unloadable (built against another C library, say): build it again. */
    const char *why = dlerror();
    dlop__warn("run-time compilation cache: %s cannot be loaded (%s): compiling it again", path,
               why ? why : "dlopen failed");
  }
  dlop__jit_count_corrupt();
  return 0;
}

/* ---- the interface (jit.h) ---------------------------------------------------------------- */

int dlop__c_compile(const char *source, const char *const *options, int32_t num_options,
                    dlop__c_module **result, char *error, size_t error_size) {
  if (result == NULL)
    return dlop__jit_fail(DLOP_INVALID_ARGUMENT, error, error_size,
                          "dlop__c_compile: module is NULL");
  *result = NULL;
  if (source == NULL)
    return dlop__jit_fail(DLOP_INVALID_ARGUMENT, error, error_size,
                          "dlop__c_compile: source is NULL");
  if (num_options < 0 || (num_options > 0 && options == NULL))
    return dlop__jit_fail(DLOP_INVALID_ARGUMENT, error, error_size,
                          "dlop__c_compile: %d options given but options is %s", (int)num_options,
                          options ? "set" : "NULL");
  for (int32_t i = 0; i < num_options; i++)
    if (options[i] == NULL)
      return dlop__jit_fail(DLOP_INVALID_ARGUMENT, error, error_size,
                            "dlop__c_compile: option %d is NULL", (int)i);
  int status = ensure_compiler(error, error_size);
  if (status != DLOP_OK) return status;
  dlop__jit_key key;
  dlop__jit_key_make(KEY_KIND, compiler_identity, target_of(options, num_options), options,
                     num_options, source, &key);

  pthread_mutex_lock(&modules_lock);
  dlop__c_module *module;
  for (;;) {
    module = find_locked(&key);
    if (module == NULL) break;
    if (module->ready) {
      module->references++;
      pthread_mutex_unlock(&modules_lock);
      dlop__jit_count_memory_hit();
      *result = module;
      return DLOP_OK;
    }
    pthread_cond_wait(&modules_changed, &modules_lock);
  }
  module = calloc(1, sizeof *module);
  if (module == NULL) {
    pthread_mutex_unlock(&modules_lock);
    return dlop__jit_fail(DLOP_OUT_OF_MEMORY, error, error_size,
                          "dlop__c_compile: out of host memory");
  }
  memcpy(module->digest, key.digest, sizeof module->digest);
  module->next = modules;
  modules = module;
  pthread_mutex_unlock(&modules_lock);

  /* This thread builds the module; others asking for the key wait on modules_changed. */
  void *handle = NULL;
  if (!load_cached(&key, &handle))
    status = build(&key, source, options, num_options, &handle, error, error_size);
  pthread_mutex_lock(&modules_lock);
  if (status == DLOP_OK) {
    module->handle = handle;
    module->references = 1;
    module->ready = 1;
  } else {
    remove_locked(module);
    free(module);
    module = NULL;
  }
  pthread_cond_broadcast(&modules_changed);
  pthread_mutex_unlock(&modules_lock);
  *result = module;
  return status;
}

void *dlop__c_module_symbol(dlop__c_module *module, const char *name) {
  if (module == NULL || name == NULL) return NULL;
  return dlsym(module->handle, name);
}

void dlop__c_module_release(dlop__c_module *module) {
  if (module == NULL) return;
  pthread_mutex_lock(&modules_lock);
  int last = --module->references == 0;
  if (last) remove_locked(module);
  pthread_mutex_unlock(&modules_lock);
  if (!last) return;
  dlclose(module->handle);
  free(module);
}
