/* dlop/registry.h — the process-wide registry of loaded plugins and their ops.
 * Plugins come from DLOP_PLUGIN_PATH, the bundled plugin directory, explicit paths, or this
 * process itself (dlop_register_plugin). */
#ifndef DLOP_REGISTRY_H
#define DLOP_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "export.h"
#include "op.h"
#include "plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlop_plugin dlop_plugin; /* a loaded plugin file, or an in-process plugin */

/* Load every plugin found in DLOP_PLUGIN_PATH (colon-separated directories and files) and
 * in the bundled plugin directory (<libdir>/dlop/plugins, beside libdlop itself; the
 * environment variable DLOP_BUNDLED_PLUGINS replaces it, set empty to skip it). Runs once;
 * later calls return at once. A bad plugin does not stop the others: its error is recorded
 * (dlop_load_error_at) and printed as a warning (unless dlop_set_load_error_warnings(0)).
 * Returns DLOP_OK even when some plugins failed. */
DLOP_API int dlop_load_default_plugins(void);
/* Load one plugin file (an explicit path: never searched for in the current directory). */
DLOP_API int dlop_load_plugin(const char *path, const dlop_plugin **plugin);

/* A plugin defined inside this process, with no file (docs/runtime.md, "In-process plugins"):
 * what a file's dlop_plugin_init would hand back, from a function or as a descriptor. A
 * struct_size struct: set struct_size to sizeof(dlop_inprocess_plugin); fields are appended,
 * never moved, and the host reads only those the size covers. */
typedef struct dlop_inprocess_plugin {
  uint32_t struct_size;
  uint32_t reserved;      /* 0 */
  /* Who defines it, shown where a file's path would be: the plugin's path reads
   * "in-process: ORIGIN" (dlop_plugin_path, `dlop list`, messages). Required, one line. */
  const char *origin;
  /* Exactly one of these two. init is called once, at once, as a file's entry is (the host
   * table and DLOP_ABI_VERSION in, a descriptor out); descriptor is taken as it is. */
  dlop_plugin_init_fn init;
  const dlop_plugin_desc *descriptor;
} dlop_inprocess_plugin;

/* Register an in-process plugin: the same checks as a file's (descriptor sizes, ABI major,
 * names, every op's declarations, a plugin name or op name already taken) and, once they pass,
 * the same registry entry: dlop_find_op, graphs, compiled functions and listings see its ops
 * as any plugin's. Lifetime: like a loaded file, it stays registered for the life of the
 * process (there is no unregistering: graphs, compiled functions and fused kernels hold its op
 * descriptors without a reference count), so the descriptor and everything it points to
 * (names, docs, parameter declarations, maps, op_data) must stay valid until the process ends;
 * the registry keeps its own copies of the descriptor structs only. init and the op stages may
 * call libdlop (dlop_find_op included): the registry's lock is not held while init runs.
 * DLOP_INVALID_ARGUMENT for a bad dlop_inprocess_plugin, otherwise what loading a file with
 * the same descriptor would return, with the message starting "in-process: ORIGIN: ". */
DLOP_API int dlop_register_plugin(const dlop_inprocess_plugin *source,
                                  const dlop_plugin **plugin);

DLOP_API int dlop_plugin_count(void);
DLOP_API const dlop_plugin *dlop_plugin_at(int index);
DLOP_API const char *dlop_plugin_name(const dlop_plugin *plugin);
DLOP_API const char *dlop_plugin_version(const dlop_plugin *plugin);
DLOP_API const char *dlop_plugin_doc(const dlop_plugin *plugin);
DLOP_API const char *dlop_plugin_path(const dlop_plugin *plugin);
DLOP_API uint32_t dlop_plugin_abi_version(const dlop_plugin *plugin);
DLOP_API int dlop_plugin_op_count(const dlop_plugin *plugin);
DLOP_API const dlop_op_desc *dlop_plugin_op(const dlop_plugin *plugin, int index);

DLOP_API int dlop_op_count(void);
DLOP_API const dlop_op_desc *dlop_op_at(int index);
/* NULL (and dlop_last_error set) when no loaded op has that name. */
DLOP_API const dlop_op_desc *dlop_find_op(const char *name);
DLOP_API const dlop_plugin *dlop_op_plugin(const dlop_op_desc *op);
/* Devices and dtypes of an op, read through its struct_size (0 where the plugin is too old). */
DLOP_API uint32_t dlop_op_dtypes(const dlop_op_desc *op, dlop_device_type device);

/* What the op reports about how it runs on device in this process (its runtime_info, ABI 1.2):
 * lines of "key: value" into text. DLOP_UNSUPPORTED (dlop_last_error says why) when the op
 * has no runtime_info or nothing to say for that device. */
DLOP_API int dlop_op_runtime_info(const dlop_op_desc *op, dlop_device_type device, char *text,
                                  size_t text_size);

/* Errors from loading (one line each: "FILE: reason"), kept for `dlop list` and Python. */
DLOP_API int dlop_load_error_count(void);
DLOP_API const char *dlop_load_error_at(int index);
/* Whether a load error is also printed as a warning when it is recorded: 1 (the default) or
 * 0, for hosts that print the recorded errors themselves, as the dlop command does in its
 * summary, so that each is shown once. Set it before loading. */
DLOP_API void dlop_set_load_error_warnings(int enabled);

/* Probing plugin files before loading them (docs/runtime.md, "Plugin probe"): the program
 * dlop-probe, installed beside libdlop, loads the file in a fresh child process first, and a
 * file whose loading crashed or ended that process (a signal, an exit, a hang) is refused with
 * a load error ("PATH: plugin probe: ...") instead of taking this process down; the other
 * plugins load. Outcomes are remembered per file identity (in this process, and on disk for
 * files that probed fine). The environment variable DLOP_PLUGIN_PROBE sets the mode
 * (off, all, external); a missing dlop-probe makes each probed file a load error. */
typedef enum dlop_plugin_probe_mode {
  DLOP_PLUGIN_PROBE_OFF = 0,      /* every file is loaded into this process unprobed */
  DLOP_PLUGIN_PROBE_ALL = 1,      /* every file is probed, the bundled plugins included */
  DLOP_PLUGIN_PROBE_EXTERNAL = 2, /* every file but the bundled plugins (the default) */
} dlop_plugin_probe_mode;
/* Set the mode for the loads that follow, over DLOP_PLUGIN_PROBE; set it before
 * dlop_load_default_plugins for that to follow it too. DLOP_INVALID_ARGUMENT for a value that
 * is not a dlop_plugin_probe_mode (the mode is then unchanged). */
DLOP_API int dlop_set_plugin_probe(int mode);
/* The mode in effect: the last one set, else DLOP_PLUGIN_PROBE's, else the default. */
DLOP_API int dlop_plugin_probe(void);

/* Where this process's dlop lives, so that a host can say which installation it runs (`dlop
 * info` and dlop.info() print these; docs/runtime.md, "One installation, one set of plugins"). */
typedef enum dlop_location {
  DLOP_LOCATION_LIBRARY = 0,         /* the libdlop file this process loaded (its real path) */
  DLOP_LOCATION_BUNDLED_PLUGINS = 1, /* the bundled plugin directory in effect:
                                        DLOP_BUNDLED_PLUGINS, else <libdlop's dir>/dlop/plugins */
  DLOP_LOCATION_PROBE_PROGRAM = 2,   /* the dlop-probe program the plugin probe runs */
} dlop_location;
/* The path of location into buffer. It need not exist (a missing bundled directory is where
 * it is looked for). DLOP_NOT_FOUND when there is none: DLOP_BUNDLED_PLUGINS set empty or
 * relative (no bundled plugins are loaded), or libdlop's own file cannot be determined;
 * DLOP_INVALID_ARGUMENT for an unknown location, a NULL or too small buffer. dlop_last_error
 * says which. */
DLOP_API int dlop_location_path(int location, char *buffer, size_t size);

/* The host API table libdlop hands to plugins (for hosts embedding plugins themselves). */
DLOP_API const dlop_host_api *dlop_host_api_table(void);

#ifdef __cplusplus
}
#endif

#endif
