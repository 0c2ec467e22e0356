/* check_report.c — the wording of dlop-check's verdicts: every failure names the op, the
 * check, the device, the dtype and the shape, so a plugin author knows where to look. */
#include <stdarg.h>
#include <stdio.h>

#include "check_suite.h"

const char *check_shape_text(const int64_t *shape, int32_t ndim, char *buffer, size_t size) {
  size_t used = 0;
  used += (size_t)snprintf(buffer, size, "(");
  for (int32_t d = 0; d < ndim && used < size; d++) {
    if (shape[d] == DLOP_DIM_UNKNOWN)
      used += (size_t)snprintf(buffer + used, size - used, "%s?", d ? ", " : "");
    else
      used += (size_t)snprintf(buffer + used, size - used, "%s%lld", d ? ", " : "",
                               (long long)shape[d]);
  }
  if (used < size) snprintf(buffer + used, size - used, ")");
  return buffer;
}

const char *check_device_text(dlop_device device) {
  return device.type == DLOP_DEVICE_CUDA ? "cuda:0" : "cpu";
}

void check_fail(const check_case *c, const char *check, const int64_t *shape, int32_t ndim,
                const char *format, ...) {
  char message[3072], where[256] = "";
  size_t used;
  if (c->dtype >= 0)
    snprintf(where, sizeof where, ", %s %s", check_device_text(c->device),
             dlop_dtype_name((dlop_dtype)c->dtype));
  used = (size_t)snprintf(message, sizeof message, "op %s, check %s%s", c->op->name, check, where);
  if (shape != NULL && used < sizeof message) {
    char text[DLOP_MAX_NDIM * 22 + 4];
    used += (size_t)snprintf(message + used, sizeof message - used, ", shape %s",
                             check_shape_text(shape, ndim, text, sizeof text));
  }
  if (used < sizeof message) used += (size_t)snprintf(message + used, sizeof message - used, ": ");
  if (used < sizeof message) {
    va_list args;
    va_start(args, format);
    vsnprintf(message + used, sizeof message - used, format, args);
    va_end(args);
  }
  ck_abort_msg("%s", message);
  __builtin_unreachable(); /* ck_abort_msg ends the child; this tells the compiler so */
}

void check_note(const check_case *c, const char *check, const char *format, ...) {
  char message[1024];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  if (c->dtype >= 0)
    printf("note: op %s, check %s, %s %s: %s\n", c->op->name, check, check_device_text(c->device),
           dlop_dtype_name((dlop_dtype)c->dtype), message);
  else
    printf("note: op %s, check %s: %s\n", c->op->name, check, message);
  fflush(stdout);
}
