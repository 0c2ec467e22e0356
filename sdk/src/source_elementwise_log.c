/* source_elementwise_log.c — the wrapped body of an op defined by dlop_define_elementwise, and
 * the compiler's log read back against the user's body. The wrapper declares the body's names
 * (inputs, outputs, parameters as the run-time values the host declares, T) and puts a #line directive before the body, so both
 * compilers name its lines "NAME (body):LINE" (the C compiler) or "NAME (body)(LINE)" (NVRTC);
 * the log is then cut to those lines, each shown with the body line it is about. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source_elementwise.h"

static const char *c_type(int32_t dtype) {
  switch (dtype) {
    case DLOP_UINT8: return "uint8_t";
    case DLOP_INT8: return "int8_t";
    case DLOP_INT16: return "int16_t";
    case DLOP_INT32: return "int32_t";
    case DLOP_INT64: return "int64_t";
    case DLOP_FLOAT64: return "double";
    default: return "float";
  }
}

typedef struct text {
  char *at;
  size_t size, used;
  int overflow;
} text;

static void add(text *t, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *format, ...) {
  va_list args;
  va_start(args, format);
  size_t room = t->used < t->size ? t->size - t->used : 0;
  int n = vsnprintf(t->at + t->used, room, format, args);
  va_end(args);
  if (n < 0 || (size_t)n >= room) {
    t->overflow = 1;
    t->used = t->size;
  } else {
    t->used += (size_t)n;
  }
}

int dlop__source_elementwise_code(const dlop__source_elementwise *source, int32_t dtype,
                                  char *code, size_t size) {
  text t = {.at = code, .size = size};
  add(&t, "typedef %s T;\n", c_type(dtype));
  for (int32_t i = 0; i < source->num_inputs; i++)
    add(&t, "const T %s = in%d;\n", source->inputs[i], (int)i);
  for (int32_t o = 0; o < source->num_outputs; o++) add(&t, "T %s;\n", source->outputs[o]);
  /* parameters are the kernel's run-time values dlop_p<k>, which the host declares
   * (DLOP__SCALAR_BODY_RUNTIME_PARAMS): new values reuse the compiled kernel */
  for (int32_t p = 0; p < source->num_params; p++)
    add(&t, "const %s %s = dlop_p%d;\n",
        source->params[p].kind == DLOP_PARAM_FLOAT ? "double" : "int64_t", source->params[p].name,
        (int)p);
  /* The body's lines are its own in the compilers' messages; a missing final ';' is fine. */
  add(&t, "#line 1 \"%s\"\n%s\n;\n#line 1 \"%s (wrapper)\"\n", source->body_file, source->body,
      source->name);
  for (int32_t o = 0; o < source->num_outputs; o++)
    add(&t, "out%d = %s;\n", (int)o, source->outputs[o]);
  return t.overflow ? DLOP_INVALID_ARGUMENT : DLOP_OK;
}

/* The number after the body's file name on a log line: "FILE:12:" or "FILE(12)", else 0. */
static long body_line_of(const char *line, size_t length, const char *file) {
  size_t file_length = strlen(file);
  if (length <= file_length + 1 || memcmp(line, file, file_length) != 0) return 0;
  const char *p = line + file_length;
  if (*p != ':' && *p != '(') return 0;
  char *end = NULL;
  long number = strtol(p + 1, &end, 10);
  return end != p + 1 && (*end == ':' || *end == ')') ? number : 0;
}

/* Line number (1-based) of the body, into shown (without its newline), or "" past its end. */
static void body_line(const char *body, long number, char *shown, size_t size) {
  const char *p = body;
  for (long n = 1; n < number && p != NULL; n++) {
    p = strchr(p, '\n');
    if (p != NULL) p++;
  }
  if (p == NULL) {
    shown[0] = '\0';
    return;
  }
  size_t length = strcspn(p, "\n");
  dlop__format(shown, size, "%.*s", (int)length, p);
}

void dlop__source_elementwise_log(const dlop__source_elementwise *source, const char *compiler,
                                  const char *log, char *out, size_t size) {
  text t = {.at = out, .size = size};
  add(&t, "%s: the body does not compile with %s:", source->name, compiler);
  size_t header = t.used;
  /* The same message comes once per dtype compiled: each distinct line is shown once. */
  const char *seen[64];
  size_t seen_length[64];
  int num_seen = 0;
  for (const char *line = log; *line != '\0';) {
    size_t length = strcspn(line, "\n");
    long number = body_line_of(line, length, source->body_file);
    int repeated = 0;
    for (int k = 0; k < num_seen && !repeated; k++)
      repeated = seen_length[k] == length && memcmp(seen[k], line, length) == 0;
    if (number > 0 && !repeated) {
      char shown[256];
      body_line(source->body, number, shown, sizeof shown);
      add(&t, "\n  %.*s\n    %ld | %s", (int)length, line, number, shown);
      if (num_seen < 64) {
        seen[num_seen] = line;
        seen_length[num_seen++] = length;
      }
    }
    line += length;
    if (*line == '\n') line++;
  }
  if (t.used == header) add(&t, "\n%s", log); /* nothing about the body's own lines */
  if (t.overflow && size > 4) memcpy(out + size - 4, "...", 4);
}
