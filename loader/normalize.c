/* normalize.c — copies a plugin's descriptors into host-owned, full-size structs, zero-filled
 * beyond the size the plugin declared. The host then reads every field of an op safely whatever
 * minor the plugin was built for; struct_size is kept to show what the plugin declared. Flag and
 * dtype bits of a newer minor that this host does not know are masked out of the copy.
 * dlop__finish_plugin ends every load with the validation and this copy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader_internal.h"

/* Copy min(declared, full) bytes of source into a zeroed destination of full bytes. */
static void copy_covered(void *destination, size_t full, const void *source, uint32_t declared) {
  memset(destination, 0, full);
  memcpy(destination, source, declared < full ? declared : full);
}

/* A plugin built for a newer minor of the same major may use flag or dtype bits added after
 * this host was built: "same major, any minor" means it still loads. The host's copy drops those
 * bits (the op is simply not offered for dtypes the host cannot name) and one warning per op
 * names the plugin, the op and the bits. For a plugin of this host's minor or older, unknown
 * bits stay a plugin bug: dlop__validate_op rejects them. Returns 1 when the op is left with no
 * dtype on any device (only unknown ones), so it cannot be offered at all. */
static int mask_newer_minor_bits(dlop__loader_report *report, const char *path,
                                 const dlop_plugin_desc *desc, dlop_op_desc *op) {
  unsigned minor = DLOP_ABI_VERSION_MINOR_OF(desc->abi_version);
  if (minor <= DLOP_ABI_MINOR || !dlop__is_identifier(op->name)) return 0;
  uint32_t flags = op->flags & ~DLOP__KNOWN_OP_FLAGS;
  uint32_t cpu = op->cpu_dtypes & ~DLOP__VALID_DTYPE_MASK;
  uint32_t cuda = op->cuda_dtypes & ~DLOP__VALID_DTYPE_MASK;
  if ((flags | cpu | cuda) == 0) return 0;
  int had_dtypes = op->cpu_dtypes != 0 || op->cuda_dtypes != 0;
  op->flags &= DLOP__KNOWN_OP_FLAGS;
  op->cpu_dtypes &= DLOP__VALID_DTYPE_MASK;
  op->cuda_dtypes &= DLOP__VALID_DTYPE_MASK;
  int nothing_left = had_dtypes && op->cpu_dtypes == 0 && op->cuda_dtypes == 0;
  dlop__loader_warn(
      report,
      "%s: plugin '%s' (ABI %u.%u, newer than this host's %u.%u), op '%.100s': ignoring "
      "bits this host does not know: flags 0x%x, cpu_dtypes 0x%x, cuda_dtypes 0x%x%s",
      path, desc->name, DLOP_ABI_VERSION_MAJOR_OF(desc->abi_version), minor, DLOP_ABI_MAJOR,
      DLOP_ABI_MINOR, op->name, flags, cpu, cuda,
      nothing_left ? "; it offers no dtype this host knows, so the op is not registered"
                   : " (the op is offered for the dtypes this host knows)");
  return nothing_left;
}

int dlop__normalize_plugin(dlop__loader_report *report, const char *path,
                           const dlop_plugin_desc *raw, dlop_plugin *plugin) {
  copy_covered(&plugin->desc, sizeof plugin->desc, raw, raw->struct_size);
  int32_t count = plugin->desc.num_ops;
  plugin->desc.ops = NULL;
  if (count == 0) return DLOP_OK;
  plugin->ops = calloc((size_t)count, sizeof *plugin->ops);
  plugin->op_pointers = calloc((size_t)count, sizeof *plugin->op_pointers);
  if (plugin->ops == NULL || plugin->op_pointers == NULL)
    return dlop__loader_error(report, DLOP_OUT_OF_MEMORY,
                              "%s: out of memory copying %d op descriptors", path, (int)count);
  int32_t kept = 0; /* ops with no dtype this host knows (newer minor) are left out */
  for (int32_t i = 0; i < count; i++) {
    const dlop_op_desc *op = raw->ops[i];
    if (op == NULL)
      return dlop__loader_error(report, DLOP_INVALID_PLUGIN,
                                "%s: op #%d is NULL in the plugin's ops array", path, (int)i);
    /* The size is checked on the plugin's own struct before anything else is read from it. */
    if (op->struct_size < DLOP__OP_DESC_MIN_SIZE)
      return dlop__loader_error(
          report, DLOP_INVALID_PLUGIN,
          "%s: op #%d has struct_size %u, smaller than the %zu bytes a dlop ABI "
          "1.0 op descriptor needs (fields through make_thunk): set it to "
          "sizeof(dlop_op_desc)",
          path, (int)i, op->struct_size, (size_t)DLOP__OP_DESC_MIN_SIZE);
    dlop_op_desc *copy = &plugin->ops[kept];
    copy_covered(copy, sizeof *copy, op, op->struct_size);
    if (mask_newer_minor_bits(report, path, &plugin->desc, copy)) continue;
    int status = dlop__validate_op(report, path, (int)kept, copy, plugin->ops);
    if (status != DLOP_OK) return status;
    plugin->op_pointers[kept] = copy;
    kept++;
  }
  plugin->desc.num_ops = kept;
  plugin->desc.ops = plugin->op_pointers;
  return DLOP_OK;
}

int dlop__finish_plugin(dlop__loader_report *report, int status, const dlop_plugin_desc *desc,
                        dlop_plugin *plugin, dlop_plugin **out) {
  if (status == DLOP_OK)
    status = dlop__validate_plugin_desc(report, plugin->path, desc, DLOP_ABI_VERSION);
  if (status == DLOP_OK) status = dlop__normalize_plugin(report, plugin->path, desc, plugin);
  if (status != DLOP_OK) {
    dlop__plugin_close(plugin);
    return status;
  }
  *out = plugin;
  return DLOP_OK;
}
