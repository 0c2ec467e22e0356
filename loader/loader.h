/* loader.h — the plugin loader, a static library beneath libdlop: finding plugin files
 * (DLOP_PLUGIN_PATH and the bundled directory), opening one (dlopen, entry symbol, ABI
 * negotiation) and validating and normalizing what its dlop_plugin_init hands back. It sees
 * only the public headers and says what went wrong through a dlop__loader_report its caller
 * owns. The registry (sdk/src/registry.c), which keeps the list of loaded plugins, calls it. */
#ifndef DLOP_LOADER_H
#define DLOP_LOADER_H

#include <stddef.h>

#include "dlop/host_api.h"
#include "dlop/plugin.h"
#include "dlop/registry.h" /* the opaque dlop_plugin defined below */

/* What a loader call needs from its caller and has to say to it: libdlop names statuses with
 * dlop_status_name, prints warnings its own way and records the error as the thread's last. */
typedef struct dlop__loader_report {
  const char *(*status_name)(int status); /* "DLOP_TYPE_ERROR" for messages; required */
  void (*warn)(const char *message); /* each warning, one line without prefix; NULL drops it */
  char error[1024];                  /* after a failing call: "PATH: reason" */
} dlop__loader_report;

/* A loaded, validated plugin file or in-process plugin (the public opaque dlop_plugin). Every
 * descriptor the host hands out is a host-owned full-size copy, zero-filled beyond the plugin's
 * struct_size. */
struct dlop_plugin {
  char *path;      /* absolute path as given (symlinks kept), or "in-process: ORIGIN": shown in
                      messages and listings */
  char *real_path; /* realpath(): the identity used to load a file once; NULL in-process */
  void *handle;    /* from dlopen; NULL in-process */
  dlop_plugin_desc desc; /* normalized copy; desc.ops points at op_pointers */
  dlop_op_desc *ops;     /* normalized copies, desc.num_ops of them */
  const dlop_op_desc **op_pointers;
};

/* How a plugin file is probed before this process dlopens it (probe_run.c, probe_cache.c):
 * the dlop-probe program loads it in a fresh process first, so that a file whose loading
 * crashes (a corrupt relocation, an ifunc resolver, a constructor, an entry that aborts) is
 * refused instead of taking the host down. */
typedef struct dlop__probe_settings {
  const char *program;    /* the dlop-probe executable; missing: each probed file is refused */
  double timeout_seconds; /* a probe still running after this long is killed, the file refused */
  const char *cache_dir;  /* where files that probed fine are remembered; NULL or "": nowhere */
} dlop__probe_settings;

/* ---- open_plugin.c ---------------------------------------------------------------------- */

/* Check the file, probe it in a child process when probe is not NULL, dlopen it, call its
 * entry symbol with host, validate and normalize the descriptors. On failure nothing stays
 * loaded and the status comes with report->error reading "PATH: reason". Warns (does not
 * fail) when the file or its directory is world-writable. A path without '/' is taken
 * relative to the current directory, never searched for in the system library paths. */
int dlop__plugin_open(const char *path, const dlop_host_api *host,
                      const dlop__probe_settings *probe, dlop__loader_report *report,
                      dlop_plugin **plugin);
/* dlclose the file and free the host's copies. Only for plugins whose ops nobody holds. */
void dlop__plugin_close(dlop_plugin *plugin);

/* ---- inprocess.c ------------------------------------------------------------------------ */

/* A plugin with no file: init called with host (as a file's entry symbol is), or descriptor
 * taken as it is (exactly one of the two), then validated and normalized as a file's. Its path
 * is "in-process: ORIGIN" (origin: one line, required), its real_path and handle NULL. On
 * failure nothing is kept and report->error reads "in-process: ORIGIN: reason". */
int dlop__plugin_from_process(const char *origin, dlop_plugin_init_fn init,
                              const dlop_plugin_desc *descriptor, const dlop_host_api *host,
                              dlop__loader_report *report, dlop_plugin **plugin);

/* malloc'ed realpath(path), or NULL (errno set) when it does not resolve. */
char *dlop__real_path(const char *path);

/* ---- search_path.c ---------------------------------------------------------------------- */

/* A growable list of malloc'ed strings (file paths, or error lines). */
typedef struct dlop__string_list {
  char **items;
  int count;
  int capacity;
} dlop__string_list;

int dlop__string_list_push(dlop__string_list *list, const char *text);
int dlop__string_list_pushf(dlop__string_list *list, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
void dlop__string_list_free(dlop__string_list *list);

/* Plugin files named by a DLOP_PLUGIN_PATH value, in order: each directory's *.so sorted by
 * name, files as they are. Empty entries are skipped; relative ones are skipped with a
 * warning. Entries that cannot be read go to errors as "ENTRY: reason". */
void dlop__collect_plugin_path(const char *value, dlop__loader_report *report,
                               dlop__string_list *files, dlop__string_list *errors);
/* Every *.so in directory (not starting with '.'), sorted by name, appended to files.
 * Returns 0, or -1 with "DIR: reason" appended to errors. */
int dlop__collect_directory(const char *directory, const char *origin, dlop__string_list *files,
                            dlop__string_list *errors);
/* The real path of the shared object (or program) that holds address, found with dladdr, into
 * buffer: libdlop passes an address of its own to name the file it was loaded from. Returns 1,
 * or 0 when it cannot be determined (or does not fit). */
int dlop__library_path(const void *address, char *buffer, size_t size);
/* The bundled plugin directory into buffer: DLOP_BUNDLED_PLUGINS when set, else
 * DLOP_PLUGIN_SUBDIR ("dlop/plugins", from the build) in the directory of the shared object
 * (or program) that holds library_address, found with dladdr: libdlop passes an address of its
 * own, so that is <libdir>/dlop/plugins. Returns 1 when there is a directory to search, 0 when
 * skipped (DLOP_BUNDLED_PLUGINS set empty) or not determinable. *from_environment tells
 * whether the value came from DLOP_BUNDLED_PLUGINS. */
int dlop__bundled_plugin_dir(const void *library_address, char *buffer, size_t size,
                             int *from_environment);
/* The dlop-probe program into buffer: DLOP_PROBE_PROGRAM_SUBPATH ("dlop/dlop-probe", from the
 * build) in the directory of the shared object (or program) that holds library_address, as
 * for the bundled plugins: the same place beside libdlop in the build tree, an installed
 * prefix and the Python package. Returns 1, or 0 when that directory cannot be determined. */
int dlop__probe_program_path(const void *library_address, char *buffer, size_t size);

#endif
