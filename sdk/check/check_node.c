/* check_node.c — calling an op's make_node and infer_shape the way a host does (struct_size
 * set, the declared parameter defaults or --param values, an error buffer). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"

int32_t check_num_inputs(const dlop_op_desc *op) {
  return op->num_inputs == DLOP_VARIADIC ? 2 : op->num_inputs;
}

int check_parse_param(const dlop_param_decl *decl, const char *text, dlop_param_value *value,
                      int64_t *ints, int max_ints, char *error, size_t error_size) {
  char *end = NULL;
  memset(value, 0, sizeof *value);
  value->kind = decl->kind;
  value->count = 1;
  switch (decl->kind) {
  case DLOP_PARAM_BOOL:
    if (strcmp(text, "true") == 0 || strcmp(text, "1") == 0) value->u.i = 1;
    else if (strcmp(text, "false") == 0 || strcmp(text, "0") == 0) value->u.i = 0;
    else break;
    return DLOP_OK;
  case DLOP_PARAM_INT:
    errno = 0;
    value->u.i = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno) break;
    return DLOP_OK;
  case DLOP_PARAM_FLOAT:
    value->u.f = strtod(text, &end);
    if (end == text || *end != '\0') break;
    return DLOP_OK;
  case DLOP_PARAM_STRING:
    value->u.s = text;
    return DLOP_OK;
  case DLOP_PARAM_INTS: {
    int count = 0;
    const char *at = text;
    while (*at != '\0') { /* "" is the empty list */
      if (count == max_ints) {
        snprintf(error, error_size, "parameter %s takes at most %d integers here (got '%s')",
                 decl->name, max_ints, text);
        return DLOP_INVALID_ARGUMENT;
      }
      errno = 0;
      ints[count] = strtoll(at, &end, 10);
      if (end == at || errno || (*end != ',' && *end != '\0')) {
        snprintf(error, error_size, "parameter %s takes comma-separated integers such as 0,2 "
                 "(got '%s')", decl->name, text);
        return DLOP_INVALID_ARGUMENT;
      }
      count++;
      at = *end == ',' ? end + 1 : end;
    }
    value->count = count;
    value->u.ints = ints;
    return DLOP_OK;
  }
  default:
    snprintf(error, error_size, "parameter %s has kind %d, which this suite cannot parse",
             decl->name, (int)decl->kind);
    return DLOP_INVALID_ARGUMENT;
  }
  static const char *expected[] = {"", "true, false, 1 or 0", "an integer", "a number"};
  snprintf(error, error_size, "parameter %s takes %s (got '%s')", decl->name,
           expected[decl->kind], text);
  return DLOP_INVALID_ARGUMENT;
}

const dlop_param_value *check_default_params(const dlop_op_desc *op) {
  static dlop_param_value values[CHECK_MAX_PARAMS];
  static int64_t ints[CHECK_MAX_PARAMS][16];
  /* main() gives ops of more parameters only the limits test, which never calls a stage */
  for (int32_t i = 0; i < op->num_params && i < CHECK_MAX_PARAMS; i++) {
    values[i] = op->params[i].default_value;
    /* the last --param of this name wins; main() has parsed every one already */
    for (int k = 0; k < check_opts.num_params; k++) {
      char error[256];
      dlop_param_value given;
      if (strcmp(check_opts.param_names[k], op->params[i].name) == 0 &&
          check_parse_param(&op->params[i], check_opts.param_values[k], &given, ints[i], 16,
                            error, sizeof error) == DLOP_OK)
        values[i] = given;
    }
  }
  return op->num_params > 0 ? values : NULL;
}

static dlop_node_args node_args(const dlop_op_desc *op, const dlop_type *inputs,
                                int32_t num_inputs, dlop_type *outputs, char *error,
                                size_t error_size) {
  dlop_node_args args = {
      .struct_size = sizeof(dlop_node_args), .op = op, .params = check_default_params(op),
      .num_params = op->num_params, .num_inputs = num_inputs, .inputs = inputs,
      .outputs = outputs, .num_outputs = op->num_outputs, .error = error, .error_size = error_size};
  error[0] = '\0';
  return args;
}

int check_call_make_node(const dlop_op_desc *op, const dlop_type *inputs, int32_t num_inputs,
                         dlop_type *outputs, char *error, size_t error_size) {
  /* The host zeroes the outputs before make_node. */
  memset(outputs, 0, sizeof(dlop_type) * (size_t)op->num_outputs);
  dlop_node_args args = node_args(op, inputs, num_inputs, outputs, error, error_size);
  check_where_types("make_node", inputs, num_inputs);
  int status = op->make_node(&args);
  check_where_returned();
  return status;
}

int check_call_infer_shape(const dlop_op_desc *op, const dlop_type *inputs, int32_t num_inputs,
                           dlop_type *outputs, char *error, size_t error_size) {
  dlop_node_args args = node_args(op, inputs, num_inputs, outputs, error, error_size);
  check_where_types("infer_shape", inputs, num_inputs);
  int status = op->infer_shape(&args);
  check_where_returned();
  return status;
}

dlop_type check_type(int dtype, int32_t ndim, const int64_t *dims, int unknown) {
  dlop_type t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.ndim = ndim;
  for (int32_t d = 0; d < ndim; d++) t.shape[d] = unknown ? DLOP_DIM_UNKNOWN : dims[d];
  return t;
}
