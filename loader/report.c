/* report.c — how the loader's errors and warnings reach its caller: written into the caller's
 * dlop__loader_report, since the loader sits beneath libdlop and cannot use libdlop's own
 * last-error and warning functions. */
#include <stdarg.h>
#include <stdio.h>

#include "loader_internal.h"

/* Length of the well-formed UTF-8 sequence at text (1..4), or 0 when it is not one. */
static size_t utf8_sequence_length(const unsigned char *text) {
  unsigned char c = text[0];
  size_t length = c < 0xc2 ? 0 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : c < 0xf5 ? 4 : 0;
  for (size_t i = 1; i < length; i++)
    if ((text[i] & 0xc0) != 0x80) return 0;
  if (length == 3 && ((c == 0xe0 && text[1] < 0xa0) || (c == 0xed && text[1] > 0x9f))) return 0;
  if (length == 4 && ((c == 0xf0 && text[1] < 0x90) || (c == 0xf4 && text[1] > 0x8f))) return 0;
  return length;
}

/* Messages quote what corrupt files hold (dlerror's symbol names, a plugin's own error text):
 * control bytes and bytes that are not UTF-8 become '?', so every message prints cleanly and
 * decodes in Python. Valid UTF-8 (a path with accents) is kept. */
static void make_printable(char *text) {
  unsigned char *p = (unsigned char *)text;
  while (*p) {
    if (*p >= 0x20 && *p < 0x7f) { p++; continue; }
    size_t length = *p >= 0x80 ? utf8_sequence_length(p) : 0;
    if (length == 0) { *p++ = '?'; continue; }
    p += length;
  }
}

int dlop__loader_error(dlop__loader_report *report, int status, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(report->error, sizeof report->error, format, args);
  va_end(args);
  make_printable(report->error);
  return status;
}

void dlop__loader_warn(dlop__loader_report *report, const char *format, ...) {
  if (report->warn == NULL) return;
  char message[1024];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  make_printable(message);
  report->warn(message);
}
