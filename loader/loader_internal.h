/* loader_internal.h — what the loader's own files share: the smallest descriptors and the bits
 * this host knows, the checks (validate.c), the copies (normalize.c) and how a message gets
 * into the caller's report (report.c). Nothing outside loader/ includes it. */
#ifndef DLOP_LOADER_INTERNAL_H
#define DLOP_LOADER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "loader.h"

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

/* ---- report.c --------------------------------------------------------------------------- */

/* Write the formatted message into report->error and return status. */
int dlop__loader_error(dlop__loader_report *report, int status, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
/* Hand the formatted warning to report->warn (if any). */
void dlop__loader_warn(dlop__loader_report *report, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- open_plugin.c ---------------------------------------------------------------------- */

/* malloc'ed absolute form of path (cwd prefixed when relative; symlinks kept), or NULL. */
char *dlop__absolute_path(const char *path);
/* Call a plugin's init (a file's entry symbol, or an in-process plugin's function; init_name
 * names it in messages) with host and this host's ABI version; a failure becomes
 * DLOP_PLUGIN_ERROR with "PATH: INIT_NAME failed with STATUS (n): the plugin's message". */
int dlop__call_plugin_init(dlop__loader_report *report, const char *path, const char *init_name,
                           dlop_plugin_init_fn init, const dlop_host_api *host,
                           const dlop_plugin_desc **desc);

/* ---- probe_cache.c, probe_run.c ------------------------------------------------------------ */

/* Probe the file (path as shown and handed to the child, real_path its resolved name) unless
 * its outcome for this very file is known (probe_cache.c). DLOP_OK when loading it in this
 * process is safe; DLOP_LOAD_ERROR with "PATH: plugin probe: what happened" otherwise. */
int dlop__probe_plugin(const dlop__probe_settings *settings, const char *path,
                       const char *real_path, dlop__loader_report *report);
/* How a probe ended: the child loaded the file; it refused the file with a load error of its
 * own (safe: the load in this process then reports that error itself); or the child crashed,
 * exited, hung or could not run (reason says which). */
enum { DLOP__PROBE_LOADED = 1, DLOP__PROBE_REFUSED = 0, DLOP__PROBE_FAILED = -1 };
/* Run the probe program on path in a fresh process; for DLOP__PROBE_FAILED, reason says what
 * happened and *repeatable whether the file caused it (a crash signal or an exit status), so
 * that it is worth remembering. */
int dlop__probe_run(const dlop__probe_settings *settings, const char *path, char *reason,
                    size_t size, int *repeatable);

/* ---- validate.c ------------------------------------------------------------------------- */

/* True for [A-Za-z_][A-Za-z0-9_]* (ASCII, whatever the locale). */
int dlop__is_identifier(const char *name);
/* Check the plugin descriptor as returned by dlop_plugin_init: size, ABI major (host_abi is
 * the host's DLOP_ABI_VERSION), name, op array. path prefixes every message. */
int dlop__validate_plugin_desc(dlop__loader_report *report, const char *path,
                               const dlop_plugin_desc *desc, uint32_t host_abi);
/* Check one normalized op (index in the plugin's array) against the ones before it. */
int dlop__validate_op(dlop__loader_report *report, const char *path, int index,
                      const dlop_op_desc *op, const dlop_op_desc *earlier_ops);

/* ---- normalize.c ------------------------------------------------------------------------ */

/* Copy what the plugin handed back into host-owned full-size structs, zero beyond each
 * struct_size (struct_size itself is kept, so readers still know what the plugin declared).
 * For a plugin of a newer minor, flag and dtype bits this host does not know are masked out
 * of the copy with a warning (an op left with no known dtype is not registered, so
 * desc.num_ops may shrink). Validates each op as it is copied; path prefixes every message. */
int dlop__normalize_plugin(dlop__loader_report *report, const char *path,
                           const dlop_plugin_desc *raw, dlop_plugin *plugin);

/* The last steps of every load, a file's or an in-process plugin's: validate the descriptor
 * init handed back (when status is still DLOP_OK), normalize it into plugin, and hand plugin
 * to *out; on any failure close plugin and return the status. */
int dlop__finish_plugin(dlop__loader_report *report, int status, const dlop_plugin_desc *desc,
                        dlop_plugin *plugin, dlop_plugin **out);

#endif
