/* dlop/plugin.h — what a plugin file exports: one entry symbol, dlop_plugin_init, that checks
 * the host's ABI version and hands back a plugin descriptor listing its ops. */
#ifndef DLOP_PLUGIN_H
#define DLOP_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dtype.h"
#include "host_api.h"
#include "op.h"
#include "status.h"
#include "tensor.h"
#include "version.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlop_plugin_desc {
  uint32_t struct_size; /* sizeof(dlop_plugin_desc) as the plugin was compiled */
  uint32_t abi_version; /* DLOP_ABI_VERSION the plugin was compiled against */
  const char *name;     /* [A-Za-z_][A-Za-z0-9_]* */
  const char *version;  /* the plugin's own version, free-form ("1.2.0") */
  const char *doc;
  const dlop_op_desc *const *ops; /* num_ops pointers; each op has its own struct_size */
  int32_t num_ops;
  int32_t reserved;
} dlop_plugin_desc;

/* The entry symbol. host stays valid until the plugin is unloaded; keep the pointer.
 * On success set *plugin to a descriptor that lives as long as the plugin is loaded and
 * return DLOP_OK; otherwise return a status and write a message into error. */
typedef int (*dlop_plugin_init_fn)(const dlop_host_api *host, uint32_t host_abi_version,
                                   const dlop_plugin_desc **plugin, char *error,
                                   size_t error_size);

#define DLOP_PLUGIN_ENTRY_SYMBOL "dlop_plugin_init"

#if defined(_WIN32)
#define DLOP_PLUGIN_EXPORT __declspec(dllexport)
#else
#define DLOP_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* Declaration every plugin implements (exactly once, in one translation unit). */
DLOP_PLUGIN_EXPORT int dlop_plugin_init(const dlop_host_api *host, uint32_t host_abi_version,
                                        const dlop_plugin_desc **plugin, char *error,
                                        size_t error_size);

/* The check every plugin's init starts with: same ABI major as the host. */
static inline int dlop_plugin_abi_compatible(uint32_t host_abi_version) {
  return DLOP_ABI_VERSION_MAJOR_OF(host_abi_version) == DLOP_ABI_MAJOR;
}

/* The usual whole body of dlop_plugin_init: checks the host's ABI major and the arguments,
 * keeps the host table in *host_slot and hands back descriptor. Plugins with more to set up
 * do these steps themselves. */
static inline int dlop_plugin_init_standard(const dlop_host_api *host, uint32_t host_abi_version,
                                            const dlop_plugin_desc **plugin, char *error,
                                            size_t error_size,
                                            const dlop_plugin_desc *descriptor,
                                            const dlop_host_api **host_slot) {
  if (!dlop_plugin_abi_compatible(host_abi_version)) {
    if (error && error_size)
      snprintf(error, error_size, "%s: built for ABI %u.%u, the host speaks ABI %u.%u (major must match)",
               descriptor->name, (unsigned)DLOP_ABI_MAJOR, (unsigned)DLOP_ABI_MINOR,
               DLOP_ABI_VERSION_MAJOR_OF(host_abi_version),
               DLOP_ABI_VERSION_MINOR_OF(host_abi_version));
    return DLOP_ABI_MISMATCH;
  }
  if (host == NULL || plugin == NULL) {
    if (error && error_size)
      snprintf(error, error_size, "%s: dlop_plugin_init needs a host table and an output",
               descriptor->name);
    return DLOP_INVALID_ARGUMENT;
  }
  *host_slot = host;
  *plugin = descriptor;
  return DLOP_OK;
}

#ifdef __cplusplus
}
#endif

#endif
