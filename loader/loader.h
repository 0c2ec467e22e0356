/* loader.h — the plugin loader inside libdlop: finding plugin files (DLOP_PLUGIN_PATH and the
 * bundled directory), opening one file (dlopen, entry symbol, ABI negotiation) and validating
 * and normalizing what its dlop_plugin_init hands back. The registry (sdk/src/registry.c) is
 * the only caller; it owns the process-wide list of loaded plugins. */
#ifndef DLOP_LOADER_H
#define DLOP_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* Smallest descriptors an ABI 1.0 plugin may hand back: the plugin descriptor through num_ops,
 * the op descriptor through make_thunk (op_data is optional). A plugin built against a later
 * minor passes a larger struct_size; the host reads only the fields it knows. Fields past a
 * plugin's struct_size read as zero in the host's copy: an ABI 1.0 op has make_view NULL (and a
 * view op must cover make_view, ABI 1.1, see validate.c). */
#define DLOP__PLUGIN_DESC_MIN_SIZE (offsetof(dlop_plugin_desc, num_ops) + sizeof(int32_t))
#define DLOP__OP_DESC_MIN_SIZE (offsetof(dlop_op_desc, make_thunk) + sizeof(dlop_make_thunk_fn))

/* Flag bits and dtype bits this host knows. Anything else is an error from a plugin of this
 * host's minor or older, and masked out (with a warning) from a plugin of a newer minor. */
#define DLOP__KNOWN_OP_FLAGS \
  ((uint32_t)(DLOP_OP_DETERMINISTIC | DLOP_OP_CUDA_GRAPH_SAFE | DLOP_OP_NEEDS_CONTIGUOUS_INPUTS))
#define DLOP__VALID_DTYPE_MASK ((uint32_t)((1u << DLOP_DTYPE_COUNT) - 1u))

/* Size of the error buffer handed to dlop_plugin_init. */
#define DLOP__PLUGIN_ERROR_SIZE 1024

/* A loaded, validated plugin file (the public opaque dlop_plugin). Every descriptor the host
 * hands out is a host-owned full-size copy, zero-filled beyond the plugin's struct_size. */
struct dlop_plugin {
  char *path;      /* absolute path as given (symlinks kept): shown in messages and listings */
  char *real_path; /* realpath(): the identity used to load a file once */
  void *handle;    /* from dlopen */
  dlop_plugin_desc desc; /* normalized copy; desc.ops points at op_pointers */
  dlop_op_desc *ops;     /* normalized copies, desc.num_ops of them */
  const dlop_op_desc **op_pointers;
};

/* ---- open_plugin.c ---------------------------------------------------------------------- */

/* Check the file, dlopen it, call its entry symbol with host, validate and normalize the
 * descriptors. On failure nothing stays loaded and the status comes with dlop_last_error()
 * reading "PATH: reason". Warns (does not fail) when the file or its directory is
 * world-writable. A path without '/' is taken relative to the current directory, never
 * searched for in the system library paths. */
int dlop__plugin_open(const char *path, const dlop_host_api *host, dlop_plugin **plugin);
/* dlclose the file and free the host's copies. Only for plugins whose ops nobody holds. */
void dlop__plugin_close(dlop_plugin *plugin);

/* malloc'ed absolute form of path (cwd prefixed when relative; symlinks kept), or NULL. */
char *dlop__absolute_path(const char *path);
/* malloc'ed realpath(path), or NULL (errno set) when it does not resolve. */
char *dlop__real_path(const char *path);

/* ---- validate.c ------------------------------------------------------------------------- */

/* True for [A-Za-z_][A-Za-z0-9_]* (ASCII, whatever the locale). */
int dlop__is_identifier(const char *name);
/* Check the plugin descriptor as returned by dlop_plugin_init: size, ABI major (host_abi is
 * the host's DLOP_ABI_VERSION), name, op array. path prefixes every message. */
int dlop__validate_plugin_desc(const char *path, const dlop_plugin_desc *desc, uint32_t host_abi);
/* Check one normalized op (index in the plugin's array) against the ones before it. */
int dlop__validate_op(const char *path, int index, const dlop_op_desc *op,
                      const dlop_op_desc *earlier_ops);

/* ---- normalize.c ------------------------------------------------------------------------ */

/* Copy what the plugin handed back into host-owned full-size structs, zero beyond each
 * struct_size (struct_size itself is kept, so readers still know what the plugin declared).
 * For a plugin of a newer minor, flag and dtype bits this host does not know are masked out
 * of the copy with a warning (an op left with no known dtype is not registered, so
 * desc.num_ops may shrink). Validates each op as it is copied; path prefixes every message. */
int dlop__normalize_plugin(const char *path, const dlop_plugin_desc *raw, dlop_plugin *plugin);

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
void dlop__collect_plugin_path(const char *value, dlop__string_list *files,
                               dlop__string_list *errors);
/* Every *.so in directory (not starting with '.'), sorted by name, appended to files.
 * Returns 0, or -1 with "DIR: reason" appended to errors. */
int dlop__collect_directory(const char *directory, const char *origin, dlop__string_list *files,
                            dlop__string_list *errors);
/* The bundled plugin directory into buffer: DLOP_BUNDLED_PLUGINS when set, else
 * dirname(libdlop.so)/DLOP_PLUGIN_SUBDIR found with dladdr. Returns 1 when there is a
 * directory to search, 0 when skipped (DLOP_BUNDLED_PLUGINS set empty) or not determinable.
 * *from_environment tells whether the value came from DLOP_BUNDLED_PLUGINS. */
int dlop__bundled_plugin_dir(char *buffer, size_t size, int *from_environment);

#endif
