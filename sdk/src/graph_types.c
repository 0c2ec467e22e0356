/* graph_types.c — small helpers on static types shared by graph building, compiling, running
 * and explain(): formatting "float32[3,?]" and well-formedness checks. */
#include <stdio.h>
#include <string.h>

#include "graph_internal.h"

const char *dlop__type_format(const dlop_type *type, char *buffer, size_t size) {
  size_t used;
  int32_t i;
  if (buffer == NULL || size == 0) return buffer;
  used = (size_t)snprintf(buffer, size, "%s[", dlop_dtype_name((dlop_dtype)type->dtype));
  for (i = 0; i < type->ndim && i < DLOP_MAX_NDIM && used < size; i++) {
    const char *comma = i > 0 ? "," : "";
    if (type->shape[i] == DLOP_DIM_UNKNOWN)
      used += (size_t)snprintf(buffer + used, size - used, "%s?", comma);
    else
      used +=
          (size_t)snprintf(buffer + used, size - used, "%s%lld", comma, (long long)type->shape[i]);
  }
  if (used < size) snprintf(buffer + used, size - used, "]");
  return buffer;
}

int dlop__type_valid(const dlop_type *type, int concrete) {
  int32_t i;
  if (type->dtype < 0 || type->dtype >= DLOP_DTYPE_COUNT) return DLOP_TYPE_ERROR;
  if (type->ndim < 0 || type->ndim > DLOP_MAX_NDIM) return DLOP_TYPE_ERROR;
  for (i = 0; i < type->ndim; i++) {
    if (type->shape[i] >= 0) continue;
    if (!concrete && type->shape[i] == DLOP_DIM_UNKNOWN) continue;
    return DLOP_SHAPE_ERROR;
  }
  return DLOP_OK;
}

/* "float16, float32" for a dtype mask. */
void dlop__dtype_list(uint32_t mask, char *buffer, size_t size) {
  size_t used = 0;
  int d;
  buffer[0] = '\0';
  for (d = 0; d < DLOP_DTYPE_COUNT && used + 1 < size; d++) {
    if (!(mask & DLOP_DTYPE_BIT(d))) continue;
    dlop__format(buffer + used, size - used, "%s%s", used ? ", " : "", dlop_dtype_name(d));
    used += strlen(buffer + used);
  }
  if (used == 0) dlop__format(buffer, size, "none");
}
