/* op_runtime_info.c — dlop_op_runtime_info: asks an op what only run time knows about how it
 * runs on a device (its runtime_info stage, ABI 1.2, read through struct_size so that ops of
 * older plugins simply have none), and checks what it hands back before a host prints it. */
#include <stddef.h>
#include <string.h>

#include "internal.h"
#include "stage.h"

int dlop_op_runtime_info(const dlop_op_desc *op, dlop_device_type device, char *text,
                         size_t text_size) {
  if (op == NULL || text == NULL || text_size == 0)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_op_runtime_info: needs an op and a text buffer of at least one byte "
                       "(got op %p, text %p, text_size %zu)",
                       (const void *)op, (void *)text, text_size);
  if (device != DLOP_DEVICE_CPU && device != DLOP_DEVICE_CUDA)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_op_runtime_info: device type %d is neither DLOP_DEVICE_CPU (1) nor "
                       "DLOP_DEVICE_CUDA (2)", (int)device);
  text[0] = '\0';
  if (op->struct_size < offsetof(dlop_op_desc, runtime_info) + sizeof op->runtime_info ||
      op->runtime_info == NULL)
    return dlop__error(DLOP_UNSUPPORTED, "op %s reports no run-time facts (no runtime_info)",
                       op->name);
  return dlop__stage_runtime_info(op, (int32_t)device, text, text_size);
}
