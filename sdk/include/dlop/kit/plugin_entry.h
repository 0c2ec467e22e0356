/* dlop/kit/plugin_entry.h — the plugin descriptor, the entry point and the kept host table of a
 * plugin whose dlop_plugin_init does only the usual (dlop_plugin_init_standard): one macro after
 * the op descriptors instead of the same twenty lines in every plugin. */
#ifndef DLOP_PLUGIN_ENTRY_H
#define DLOP_PLUGIN_ENTRY_H

#include "../plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The host table dlop_plugin_init was given (NULL before it ran): the plugin's only way to the
 * host, for every file of the plugin. DLOP_PLUGIN_ENTRY defines it, hidden like everything but
 * the entry point; a plugin with a dlop_plugin_init of its own keeps the table itself. */
extern const dlop_host_api *dlop_plugin_host_table __attribute__((visibility("hidden")));

static inline const dlop_host_api *dlop_plugin_host(void) { return dlop_plugin_host_table; }

/* Defines the plugin descriptor (NAME, VERSION and DOC strings, then the addresses of its op
 * descriptors), dlop_plugin_host_table, and the exported dlop_plugin_init, which refuses a host
 * of another ABI major and keeps the host's table. */
#define DLOP_PLUGIN_ENTRY(NAME, VERSION, DOC, ...)                                          \
  const dlop_host_api *dlop_plugin_host_table;                                             \
  static const dlop_op_desc *const dlop_plugin_entry_ops[] = {__VA_ARGS__};                \
  static const dlop_plugin_desc dlop_plugin_entry_descriptor = {                           \
      .struct_size = sizeof(dlop_plugin_desc), .abi_version = DLOP_ABI_VERSION, .name = NAME, \
      .version = VERSION, .doc = DOC, .ops = dlop_plugin_entry_ops,                        \
      .num_ops = (int32_t)(sizeof(dlop_plugin_entry_ops) / sizeof(dlop_plugin_entry_ops[0]))}; \
  DLOP_PLUGIN_EXPORT int dlop_plugin_init(const dlop_host_api *host, uint32_t host_abi_version, \
                                          const dlop_plugin_desc **plugin, char *error,    \
                                          size_t error_size) {                             \
    return dlop_plugin_init_standard(host, host_abi_version, plugin, error, error_size,    \
                                     &dlop_plugin_entry_descriptor, &dlop_plugin_host_table); \
  }

#ifdef __cplusplus
}
#endif

#endif
