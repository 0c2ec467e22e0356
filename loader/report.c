/* report.c — how the loader's errors and warnings reach its caller: written into the caller's
 * dlop__loader_report, since the loader sits beneath libdlop and cannot use libdlop's own
 * last-error and warning functions. */
#include <stdarg.h>
#include <stdio.h>

#include "loader_internal.h"

int dlop__loader_error(dlop__loader_report *report, int status, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(report->error, sizeof report->error, format, args);
  va_end(args);
  return status;
}

void dlop__loader_warn(dlop__loader_report *report, const char *format, ...) {
  if (report->warn == NULL) return;
  char message[1024];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  report->warn(message);
}
