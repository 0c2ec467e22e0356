/* check_elementwise.c — `dlop-check --elementwise FILE`: defines an op from source (what
 * dlop.elementwise defines in a Python process) inside dlop-check itself, through the public
 * dlop_define_elementwise, so the suite certifies the in-process plugin it registers with the
 * same checks and the same process isolation as a plugin file. dlop.check(op) writes FILE.
 *
 * FILE is lines of "key value" and then the body:
 *   name softplus
 *   dtypes float16 float32          (dtype names, space-separated)
 *   inputs x                        (names, space-separated)
 *   outputs y
 *   param alpha float 1.5           (repeatable: name, float or int, default)
 *   body                            (the rest of the file, verbatim, is the body)
 * A line that is none of these is an error naming the line and what was expected. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_elementwise.h"
#include "dlop/source_ops.h"

#define MAX_NAMES 16
#define MAX_PARAMS 16

/* Everything the definition points to: dlop_define_elementwise's op must outlive the process's
 * checks, so this stays allocated until the process ends. */
typedef struct definition {
  char *text;
  const char *inputs[MAX_NAMES], *outputs[MAX_NAMES];
  dlop_param_decl params[MAX_PARAMS];
  dlop_elementwise_source source;
} definition;

static char *read_file(const char *path, char *error, size_t error_size) {
  FILE *file = fopen(path, "rb");
  if (file == NULL) {
    snprintf(error, error_size, "cannot open %s: %s", path, strerror(errno));
    return NULL;
  }
  size_t capacity = 4096, length = 0;
  char *text = malloc(capacity);
  size_t got;
  while (text != NULL && (got = fread(text + length, 1, capacity - length - 1, file)) > 0) {
    length += got;
    if (capacity - length - 1 == 0) {
      char *bigger = realloc(text, capacity * 2);
      if (bigger == NULL) free(text);
      text = bigger;
      capacity *= 2;
    }
  }
  fclose(file);
  if (text == NULL) {
    snprintf(error, error_size, "out of memory reading %s", path);
    return NULL;
  }
  text[length] = '\0';
  return text;
}

/* Split the space-separated words of line (modified in place) into names. */
static int split_words(char *line, const char **names, int max) {
  int count = 0;
  for (char *word = strtok(line, " \t"); word != NULL; word = strtok(NULL, " \t")) {
    if (count == max) return -1;
    names[count++] = word;
  }
  return count;
}

static int parse_dtypes(char *line, uint32_t *mask, char *error, size_t error_size) {
  const char *names[DLOP_DTYPE_COUNT + 1];
  int count = split_words(line, names, DLOP_DTYPE_COUNT + 1);
  if (count <= 0) {
    snprintf(error, error_size, "'dtypes' needs 1 to %d dtype names", DLOP_DTYPE_COUNT);
    return DLOP_INVALID_ARGUMENT;
  }
  *mask = 0;
  for (int k = 0; k < count; k++) {
    int found = -1;
    for (int d = 0; d < DLOP_DTYPE_COUNT; d++)
      if (strcmp(names[k], dlop_dtype_name((dlop_dtype)d)) == 0) found = d;
    if (found < 0) {
      snprintf(error, error_size, "'dtypes': unknown dtype '%s'", names[k]);
      return DLOP_INVALID_ARGUMENT;
    }
    *mask |= DLOP_DTYPE_BIT(found);
  }
  return DLOP_OK;
}

static int parse_param(char *line, dlop_param_decl *decl, char *error, size_t error_size) {
  const char *words[4];
  if (split_words(line, words, 4) != 3) {
    snprintf(error, error_size, "'param' takes NAME float|int DEFAULT");
    return DLOP_INVALID_ARGUMENT;
  }
  memset(decl, 0, sizeof *decl);
  decl->name = words[0];
  char *end = NULL;
  errno = 0;
  if (strcmp(words[1], "float") == 0) {
    decl->kind = decl->default_value.kind = DLOP_PARAM_FLOAT;
    decl->default_value.u.f = strtod(words[2], &end);
  } else if (strcmp(words[1], "int") == 0) {
    decl->kind = decl->default_value.kind = DLOP_PARAM_INT;
    decl->default_value.u.i = strtoll(words[2], &end, 10);
  } else {
    snprintf(error, error_size, "'param %s': kind '%s' is not float or int", words[0], words[1]);
    return DLOP_INVALID_ARGUMENT;
  }
  decl->default_value.count = 1;
  if (end == words[2] || *end != '\0' || errno != 0) {
    snprintf(error, error_size, "'param %s': default '%s' is not a %s", words[0], words[2],
             words[1]);
    return DLOP_INVALID_ARGUMENT;
  }
  return DLOP_OK;
}

static int parse(definition *d, const char *path, char *error, size_t error_size) {
  dlop_elementwise_source *s = &d->source;
  char *cursor = d->text;
  for (int line_number = 1; *cursor != '\0'; line_number++) {
    char *line = cursor;
    char *newline = strchr(cursor, '\n');
    cursor = newline ? newline + 1 : cursor + strlen(cursor);
    if (newline) *newline = '\0';
    char *value = strchr(line, ' ');
    if (value) *value++ = '\0';
    int status = DLOP_OK;
    char message[512] = "";
    if (strcmp(line, "body") == 0 && value == NULL) {
      s->body = cursor;
      break;
    } else if (value == NULL) {
      snprintf(message, sizeof message, "'%s' without a value", line);
      status = DLOP_INVALID_ARGUMENT;
    } else if (strcmp(line, "name") == 0) {
      s->name = value;
    } else if (strcmp(line, "dtypes") == 0) {
      status = parse_dtypes(value, &s->dtypes, message, sizeof message);
    } else if (strcmp(line, "inputs") == 0 || strcmp(line, "outputs") == 0) {
      int inputs = line[0] == 'i';
      int count = split_words(value, inputs ? d->inputs : d->outputs, MAX_NAMES);
      if (count <= 0) {
        snprintf(message, sizeof message, "'%s' takes 1 to %d names", line, MAX_NAMES);
        status = DLOP_INVALID_ARGUMENT;
      }
      *(inputs ? &s->num_inputs : &s->num_outputs) = count;
    } else if (strcmp(line, "param") == 0) {
      if (s->num_params == MAX_PARAMS) {
        snprintf(message, sizeof message, "more than %d parameters", MAX_PARAMS);
        status = DLOP_INVALID_ARGUMENT;
      } else {
        status = parse_param(value, &d->params[s->num_params++], message, sizeof message);
      }
    } else {
      snprintf(message, sizeof message, "unknown key '%s' (expected name, dtypes, inputs, "
               "outputs, param or body)", line);
      status = DLOP_INVALID_ARGUMENT;
    }
    if (status != DLOP_OK) {
      snprintf(error, error_size, "%s:%d: %s", path, line_number, message);
      return status;
    }
  }
  const char *missing = s->name == NULL ? "name" : s->num_inputs == 0 ? "inputs"
                      : s->num_outputs == 0 ? "outputs" : s->body == NULL ? "body" : NULL;
  if (missing != NULL) {
    snprintf(error, error_size, "%s: no '%s' line (expected name, dtypes, inputs, outputs, "
             "param lines and last body)", path, missing);
    return DLOP_INVALID_ARGUMENT;
  }
  return DLOP_OK;
}

int check_define_elementwise(const char *path, const dlop_plugin **plugin, char *error,
                             size_t error_size) {
  definition *d = calloc(1, sizeof *d);
  if (d == NULL) {
    snprintf(error, error_size, "out of memory");
    return DLOP_OUT_OF_MEMORY;
  }
  d->text = read_file(path, error, error_size);
  if (d->text == NULL) {
    free(d);
    return DLOP_INVALID_ARGUMENT;
  }
  d->source.struct_size = sizeof d->source;
  d->source.inputs = d->inputs;
  d->source.outputs = d->outputs;
  d->source.params = d->params;
  int status = parse(d, path, error, error_size);
  const dlop_op_desc *op = NULL;
  if (status == DLOP_OK && (status = dlop_define_elementwise(&d->source, &op)) != DLOP_OK)
    snprintf(error, error_size, "%s", dlop_last_error());
  if (status != DLOP_OK) {
    free(d->text);
    free(d);
    return status;
  }
  *plugin = dlop_op_plugin(op); /* d stays: the registered op points into it */
  return DLOP_OK;
}
