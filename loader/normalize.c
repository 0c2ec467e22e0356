/* normalize.c — copies a plugin's descriptors into host-owned, full-size structs, zero-filled
 * beyond the size the plugin declared. The host then reads every field of an op safely whatever
 * minor the plugin was built for; struct_size is kept to show what the plugin declared. */
#include <stdlib.h>
#include <string.h>

#include "loader.h"

/* Copy min(declared, full) bytes of source into a zeroed destination of full bytes. */
static void copy_covered(void *destination, size_t full, const void *source, uint32_t declared) {
  memset(destination, 0, full);
  memcpy(destination, source, declared < full ? declared : full);
}

int dlop__normalize_plugin(const char *path, const dlop_plugin_desc *raw, dlop_plugin *plugin) {
  copy_covered(&plugin->desc, sizeof plugin->desc, raw, raw->struct_size);
  int32_t count = plugin->desc.num_ops;
  plugin->desc.ops = NULL;
  if (count == 0) return DLOP_OK;
  plugin->ops = calloc((size_t)count, sizeof *plugin->ops);
  plugin->op_pointers = calloc((size_t)count, sizeof *plugin->op_pointers);
  if (plugin->ops == NULL || plugin->op_pointers == NULL)
    return dlop__error(DLOP_OUT_OF_MEMORY, "%s: out of memory copying %d op descriptors", path,
                       (int)count);
  for (int32_t i = 0; i < count; i++) {
    const dlop_op_desc *op = raw->ops[i];
    if (op == NULL)
      return dlop__error(DLOP_INVALID_PLUGIN, "%s: op #%d is NULL in the plugin's ops array",
                         path, (int)i);
    /* The size is checked on the plugin's own struct before anything else is read from it. */
    if (op->struct_size < DLOP__OP_DESC_MIN_SIZE)
      return dlop__error(DLOP_INVALID_PLUGIN,
                         "%s: op #%d has struct_size %u, smaller than the %zu bytes a dlop ABI "
                         "1.0 op descriptor needs (fields through make_thunk): set it to "
                         "sizeof(dlop_op_desc)",
                         path, (int)i, op->struct_size, (size_t)DLOP__OP_DESC_MIN_SIZE);
    copy_covered(&plugin->ops[i], sizeof plugin->ops[i], op, op->struct_size);
    int status = dlop__validate_op(path, (int)i, &plugin->ops[i], plugin->ops);
    if (status != DLOP_OK) return status;
    plugin->op_pointers[i] = &plugin->ops[i];
  }
  plugin->desc.ops = plugin->op_pointers;
  return DLOP_OK;
}
