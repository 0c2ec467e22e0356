/* dlop/plugin.h — what a plugin file exports: one entry symbol, dlop_plugin_init, that checks
 * the host's ABI version and hands back a plugin descriptor listing its ops. */
#ifndef DLOP_PLUGIN_H
#define DLOP_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

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

#ifdef __cplusplus
}
#endif

#endif
