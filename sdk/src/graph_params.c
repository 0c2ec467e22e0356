/* graph_params.c — op parameters when an op is applied: named values checked against the op's
 * declarations, the rest filled from declared defaults, and deep copies packed into one block
 * so nodes and compiled functions own their parameters independently of the caller. */
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"

/* "axis (int), keepdims (bool)" or "none" — for messages about unknown parameters. */
static void declared_list(const dlop_op_desc *op, char *buffer, size_t size) {
  size_t used = 0;
  int32_t i;
  buffer[0] = '\0';
  if (op->num_params <= 0) {
    dlop__format(buffer, size, "none");
    return;
  }
  for (i = 0; i < op->num_params && used + 1 < size; i++) {
    dlop__format(buffer + used, size - used, "%s%s (%s)", i > 0 ? ", " : "", op->params[i].name,
                 dlop_param_kind_name(op->params[i].kind));
    used += strlen(buffer + used);
  }
}

int dlop__params_pack(const dlop_param_value *source, int32_t count, dlop_param_value **copy) {
  size_t bytes = sizeof(dlop_param_value) * (size_t)count;
  dlop_param_value *values;
  char *cursor;
  int32_t i;
  *copy = NULL;
  if (count <= 0) return DLOP_OK;
  /* int lists first (8-byte aligned right after the values), then the strings */
  for (i = 0; i < count; i++)
    if (source[i].kind == DLOP_PARAM_INTS && source[i].count > 0)
      bytes += sizeof(int64_t) * (size_t)source[i].count;
  for (i = 0; i < count; i++)
    if (source[i].kind == DLOP_PARAM_STRING && source[i].u.s != NULL)
      bytes += strlen(source[i].u.s) + 1;
  values = malloc(bytes);
  if (values == NULL)
    return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory copying %d op parameters (%zu bytes)",
                       (int)count, bytes);
  memcpy(values, source, sizeof(dlop_param_value) * (size_t)count);
  cursor = (char *)(values + count);
  for (i = 0; i < count; i++) {
    if (source[i].kind == DLOP_PARAM_INTS) {
      if (source[i].count > 0) {
        size_t n = sizeof(int64_t) * (size_t)source[i].count;
        memcpy(cursor, source[i].u.ints, n);
        values[i].u.ints = (const int64_t *)cursor;
        cursor += n;
      } else {
        values[i].u.ints = NULL;
      }
    }
  }
  for (i = 0; i < count; i++) {
    if (source[i].kind == DLOP_PARAM_STRING && source[i].u.s != NULL) {
      size_t n = strlen(source[i].u.s) + 1;
      memcpy(cursor, source[i].u.s, n);
      values[i].u.s = cursor;
      cursor += n;
    }
  }
  *copy = values;
  return DLOP_OK;
}

static int check_value(const dlop_op_desc *op, const dlop_param_decl *decl,
                       const dlop_param_value *value) {
  if (value->kind != decl->kind)
    return dlop__error(
        DLOP_INVALID_ARGUMENT, "op '%s': parameter '%s' is declared as %s but the value given is %s",
        op->name, decl->name, dlop_param_kind_name(decl->kind), dlop_param_kind_name(value->kind));
  switch (value->kind) {
    case DLOP_PARAM_BOOL:
      if (value->u.i != 0 && value->u.i != 1)
        return dlop__error(DLOP_INVALID_ARGUMENT,
                           "op '%s': bool parameter '%s' must be 0 or 1, got %lld", op->name,
                           decl->name, (long long)value->u.i);
      break;
    case DLOP_PARAM_STRING:
      if (value->u.s == NULL)
        return dlop__error(DLOP_INVALID_ARGUMENT, "op '%s': string parameter '%s' is NULL",
                           op->name, decl->name);
      break;
    case DLOP_PARAM_INTS:
      if (value->count < 0 || (value->count > 0 && value->u.ints == NULL))
        return dlop__error(DLOP_INVALID_ARGUMENT,
                           "op '%s': ints parameter '%s' has count %d and %s values", op->name,
                           decl->name, (int)value->count, value->u.ints ? "non-NULL" : "NULL");
      break;
    default: break;
  }
  return DLOP_OK;
}

int dlop__params_resolve(const dlop_op_desc *op, const dlop_named_param *named, int32_t num_named,
                         dlop_param_value **values) {
  dlop_param_value *resolved = NULL;
  char declared[512];
  int32_t i, j;
  int status;
  *values = NULL;
  if (num_named < 0 || (num_named > 0 && named == NULL))
    return dlop__error(DLOP_INVALID_ARGUMENT, "op '%s': %d named parameters but params is %s",
                       op->name, (int)num_named, named ? "set" : "NULL");
  if (op->num_params > 0) {
    resolved = malloc(sizeof(dlop_param_value) * (size_t)op->num_params);
    if (resolved == NULL)
      return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory resolving parameters of op '%s'",
                         op->name);
    for (j = 0; j < op->num_params; j++) resolved[j] = op->params[j].default_value;
  }
  for (i = 0; i < num_named; i++) {
    const char *name = named[i].name;
    for (j = 0; j < op->num_params; j++)
      if (name != NULL && strcmp(op->params[j].name, name) == 0) break;
    if (j == op->num_params) {
      declared_list(op, declared, sizeof declared);
      free(resolved);
      return dlop__error(DLOP_INVALID_ARGUMENT,
                         "op '%s' has no parameter '%s' (declared parameters: %s)", op->name,
                         name ? name : "(NULL)", declared);
    }
    for (int32_t k = 0; k < i; k++) {
      if (named[k].name != NULL && strcmp(named[k].name, name) == 0) {
        free(resolved);
        return dlop__error(DLOP_INVALID_ARGUMENT, "op '%s': parameter '%s' is given twice",
                           op->name, name);
      }
    }
    status = check_value(op, &op->params[j], &named[i].value);
    if (status != DLOP_OK) {
      free(resolved);
      return status;
    }
    resolved[j] = named[i].value;
  }
  status = dlop__params_pack(resolved, op->num_params, values);
  free(resolved);
  return status;
}
