/* errors.c — status names and messages (from the one X-macro list in dlop/status.h) and the
 * per-thread "last error" text that every failing libdlop call leaves behind. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

static _Thread_local char last_error[1024];

const char *dlop_status_name(int status) {
  switch (status) {
#define DLOP__STATUS_NAME(name, value, message) \
  case value: return "DLOP_" #name;
    DLOP_STATUS_MAP(DLOP__STATUS_NAME)
#undef DLOP__STATUS_NAME
    default: return "DLOP_UNKNOWN_STATUS";
  }
}

const char *dlop_strerror(int status) {
  switch (status) {
#define DLOP__STATUS_MESSAGE(name, value, message) \
  case value: return message;
    DLOP_STATUS_MAP(DLOP__STATUS_MESSAGE)
#undef DLOP__STATUS_MESSAGE
    default: return "unknown status code";
  }
}

const char *dlop_last_error(void) { return last_error; }

void dlop__clear_error(void) { last_error[0] = '\0'; }

int dlop__verror(int status, const char *format, va_list args) {
  vsnprintf(last_error, sizeof last_error, format, args);
  return status;
}

int dlop__error(int status, const char *format, ...) {
  va_list args;
  va_start(args, format);
  dlop__verror(status, format, args);
  va_end(args);
  return status;
}

void dlop__format(char *buffer, size_t size, const char *format, ...) {
  if (buffer == NULL || size == 0) return;
  va_list args;
  va_start(args, format);
  vsnprintf(buffer, size, format, args);
  va_end(args);
}

const char *dlop__format_ints(const int64_t *values, int32_t count, char *buffer, size_t size) {
  size_t used = 0;
  if (buffer == NULL || size == 0) return buffer;
  dlop__format(buffer, size, "(");
  for (int32_t i = 0; i < count; i++) {
    used = strlen(buffer);
    if (used + 1 >= size) break;
    dlop__format(buffer + used, size - used, "%s%lld", i ? ", " : "", (long long)values[i]);
  }
  used = strlen(buffer);
  if (used + 1 < size) dlop__format(buffer + used, size - used, "%s)", count == 1 ? "," : "");
  return buffer;
}

void dlop__warn(const char *format, ...) {
  char message[1024];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  fprintf(stderr, "dlop: warning: %s\n", message);
}
