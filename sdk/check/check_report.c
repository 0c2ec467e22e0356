/* check_report.c — the wording of dlop-check's verdicts: every failure names the op, the
 * check, the device, the dtype and the shape, so a plugin author knows where to look. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

static check_shape reported;
static int have_reported;

void check_report_shapes(const check_shape *shape) {
  have_reported = shape != NULL;
  if (shape) reported = *shape;
}

/* "(5, 3) x (3, 7)" when shape/ndim is input 0's shape of the reported per-input shapes. */
static int per_input_text(const int64_t *shape, int32_t ndim, char *buffer, size_t size) {
  if (!have_reported || !reported.per_input || ndim != reported.ndim ||
      memcmp(shape, reported.dims, sizeof(int64_t) * (size_t)ndim) != 0)
    return 0;
  size_t used = 0;
  for (int32_t i = 0; i < reported.num_inputs && i < CHECK_MAX_OPERANDS && used < size; i++) {
    char text[DLOP_MAX_NDIM * 22 + 4];
    used += (size_t)snprintf(buffer + used, size - used, "%s%s", i ? " x " : "",
                             check_shape_text(reported.in_dims[i], reported.in_ndim[i], text,
                                              sizeof text));
  }
  return 1;
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
    char text[CHECK_MAX_OPERANDS * (4 * 22 + 8)];
    if (per_input_text(shape, ndim, text, sizeof text))
      used += (size_t)snprintf(message + used, sizeof message - used, ", shapes %s", text);
    else
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
