/* dlop/kit/plugin_entry.h — the plugin descriptor and entry point of a plugin whose
 * dlop_plugin_init does only the usual (dlop_plugin_init_standard): one macro after the op
 * descriptors instead of the same twenty lines in every plugin. */
#ifndef DLOP_PLUGIN_ENTRY_H
#define DLOP_PLUGIN_ENTRY_H

#include "../plugin.h"

/* Defines the plugin descriptor (NAME, VERSION and DOC strings; OPS a static array of
 * pointers to the op descriptors) and the exported dlop_plugin_init, which refuses a host of
 * another ABI major and keeps the host table in HOST_TABLE, the plugin's
 * `static const dlop_host_api *` that its code reads the host through. */
#define DLOP_PLUGIN_ENTRY(NAME, VERSION, DOC, OPS, HOST_TABLE)                              \
  static const dlop_plugin_desc dlop_plugin_entry_descriptor = {                           \
      .struct_size = sizeof(dlop_plugin_desc),                                             \
      .abi_version = DLOP_ABI_VERSION,                                                     \
      .name = NAME,                                                                        \
      .version = VERSION,                                                                  \
      .doc = DOC,                                                                          \
      .ops = OPS,                                                                          \
      .num_ops = (int32_t)(sizeof(OPS) / sizeof((OPS)[0])),                                \
  };                                                                                       \
  DLOP_PLUGIN_EXPORT int dlop_plugin_init(const dlop_host_api *host, uint32_t host_abi_version, \
                                          const dlop_plugin_desc **plugin, char *error,    \
                                          size_t error_size) {                             \
    return dlop_plugin_init_standard(host, host_abi_version, plugin, error, error_size,    \
                                     &dlop_plugin_entry_descriptor, &(HOST_TABLE));        \
  }

#endif
