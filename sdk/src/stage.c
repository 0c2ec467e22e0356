/* stage.c — the one place libdlop calls into a plugin: an op's stages and its thunks. Each call
 * builds the stage's argument struct with a message buffer on the stack (no allocation) and
 * turns a failure into dlop's error: the status mapped, the plugin's message prefixed with the
 * node and the op. The thunk's run is the one call kept inline in stage.h: it is on every
 * function run's path, and there it costs what calling the thunk directly did. */
#include <string.h>

#include "stage.h"

/* Status codes a plugin returned are passed on when they are dlop statuses; anything else
 * (a positive number, an unknown code) becomes DLOP_PLUGIN_ERROR. */
static int plugin_status(int status) {
  if (status < 0 && status > DLOP_STATUS_END_) return status;
  return DLOP_PLUGIN_ERROR;
}

/* A plugin's message without its own "op_name: " prefix, so that ours is not doubled. */
static const char *strip_op_prefix(const char *op_name, const char *message) {
  size_t n = strlen(op_name);
  if (strncmp(message, op_name, n) == 0 && message[n] == ':') {
    message += n + 1;
    while (*message == ' ') message++;
  }
  return message;
}

int dlop__stage_failed(int status, const dlop_op_desc *op, int32_t index, const char *stage,
                       const char *error, const char *silent) {
  const char *message = error[0] ? strip_op_prefix(op->name, error) : silent;
  if (index < 0) return dlop__error(plugin_status(status), "%s: %s%s", op->name, stage, message);
  return dlop__error(plugin_status(status), "node #%d %s: %s%s", (int)index, op->name, stage,
                     message);
}

/* make_node and infer_shape take the same arguments. */
static int call_node_stage(const dlop__stage_node *node, dlop_make_node_fn stage_function,
                           const dlop_type *inputs, dlop_type *outputs, const char *silent) {
  char error[DLOP__STAGE_ERROR_SIZE];
  dlop_node_args args = {
      .struct_size = sizeof(dlop_node_args), .op = node->op, .params = node->params,
      .num_params = node->num_params, .num_inputs = node->num_inputs, .inputs = inputs,
      .outputs = outputs, .num_outputs = node->num_outputs, .error = error,
      .error_size = sizeof error};
  error[0] = '\0';
  int status = stage_function(&args);
  if (status == DLOP_OK) return DLOP_OK;
  return dlop__stage_failed(status, node->op, node->index, "", error, silent);
}

int dlop__stage_make_node(const dlop__stage_node *node, const dlop_type *inputs,
                          dlop_type *outputs) {
  return call_node_stage(node, node->op->make_node, inputs, outputs,
                         "make_node failed without a message");
}

int dlop__stage_infer_shape(const dlop__stage_node *node, const dlop_type *inputs,
                            dlop_type *outputs) {
  return call_node_stage(node, node->op->infer_shape, inputs, outputs,
                         "infer_shape failed without a message");
}

int dlop__stage_make_thunk(const dlop__stage_node *node, const dlop_type *inputs,
                           const dlop_type *outputs, dlop_device device, dlop_thunk *thunk) {
  char error[DLOP__STAGE_ERROR_SIZE];
  memset(thunk, 0, sizeof *thunk);
  thunk->struct_size = sizeof(dlop_thunk);
  dlop_thunk_args args = {
      .struct_size = sizeof(dlop_thunk_args), .op = node->op, .params = node->params,
      .num_params = node->num_params, .num_inputs = node->num_inputs, .inputs = inputs,
      .outputs = outputs, .num_outputs = node->num_outputs, .device = device, .thunk = thunk,
      .error = error, .error_size = sizeof error};
  error[0] = '\0';
  int status = node->op->make_thunk(&args);
  if (status == DLOP_OK) return DLOP_OK;
  return dlop__stage_failed(status, node->op, node->index, "make_thunk: ", error,
                            "failed without a message");
}

int dlop__stage_make_view(const dlop__stage_node *node, int32_t output, const dlop_tensor *input,
                          const dlop_type *type, int64_t *strides, uint64_t *byte_offset,
                          int32_t *needs_contiguous) {
  char error[DLOP__STAGE_ERROR_SIZE];
  memset(strides, 0, sizeof(int64_t) * DLOP_MAX_NDIM);
  *byte_offset = 0;
  *needs_contiguous = 0;
  dlop_view_args args = {
      .struct_size = sizeof(dlop_view_args), .op = node->op, .params = node->params,
      .num_params = node->num_params, .output_index = output,
      .input_index = node->op->view_map[output], .input = input, .output = type,
      .output_strides = strides, .output_byte_offset = byte_offset,
      .needs_contiguous = needs_contiguous, .error = error, .error_size = sizeof error};
  error[0] = '\0';
  int status = node->op->make_view(&args);
  if (status == DLOP_OK) return DLOP_OK;
  char stage[48];
  dlop__format(stage, sizeof stage, "make_view of output %d: ", (int)output);
  return dlop__stage_failed(status, node->op, node->index, stage, error,
                            "failed without a message");
}

int dlop__stage_scalar_body(const dlop__stage_node *node, const dlop_type *inputs,
                            const dlop_type *outputs, char *code_buffer, size_t code_buffer_size,
                            int32_t *input_compute, int32_t *output_compute,
                            dlop_scalar_body_args *result) {
  char error[DLOP__STAGE_ERROR_SIZE];
  for (int32_t i = 0; i < node->num_inputs; i++) input_compute[i] = inputs[i].dtype;
  for (int32_t o = 0; o < node->num_outputs; o++) output_compute[o] = outputs[o].dtype;
  code_buffer[0] = '\0';
  dlop_scalar_body_args args = {
      .struct_size = sizeof(dlop_scalar_body_args), .op = node->op, .params = node->params,
      .num_params = node->num_params, .num_inputs = node->num_inputs, .inputs = inputs,
      .outputs = outputs, .num_outputs = node->num_outputs, .code_buffer = code_buffer,
      .code_buffer_size = code_buffer_size, .input_compute_dtypes = input_compute,
      .output_compute_dtypes = output_compute, .error = error, .error_size = sizeof error};
  error[0] = '\0';
  int status = node->op->scalar_body(&args);
  *result = args;
  result->error = NULL; /* the message buffer is this call's */
  result->error_size = 0;
  if (status == DLOP_OK) return DLOP_OK;
  return dlop__stage_failed(status, node->op, node->index, "scalar_body: ", error,
                            "failed without a message");
}

int dlop__stage_reduce_body(const dlop__stage_node *node, const dlop_type *input,
                            const dlop_type *output, char *code_buffer, size_t code_buffer_size,
                            dlop_reduce_body_args *result) {
  char error[DLOP__STAGE_ERROR_SIZE];
  code_buffer[0] = '\0';
  dlop_reduce_body_args args = {.struct_size = sizeof(dlop_reduce_body_args),
                                .op = node->op,
                                .params = node->params,
                                .num_params = node->num_params,
                                .input = input,
                                .output = output,
                                .accumulator_dtype = input->dtype,
                                .output_compute_dtype = output->dtype,
                                .code_buffer = code_buffer,
                                .code_buffer_size = code_buffer_size,
                                .error = error,
                                .error_size = sizeof error};
  error[0] = '\0';
  int status = node->op->reduce_body(&args);
  *result = args;
  result->error = NULL; /* the message buffer is this call's */
  result->error_size = 0;
  if (status == DLOP_OK) return DLOP_OK;
  return dlop__stage_failed(status, node->op, node->index, "reduce_body: ", error,
                            "failed without a message");
}

int dlop__stage_runtime_info(const dlop_op_desc *op, int32_t device_type, char *text,
                             size_t text_size) {
  char error[DLOP__STAGE_ERROR_SIZE];
  dlop_runtime_info_args args = {.struct_size = sizeof args, .device_type = device_type,
                                 .op = op, .text = text, .text_size = text_size,
                                 .error = error, .error_size = sizeof error};
  error[0] = '\0';
  text[0] = '\0';
  int status = op->runtime_info(&args);
  text[text_size - 1] = '\0'; /* whatever the op wrote, the host reads a string */
  if (status == DLOP_OK) return DLOP_OK;
  text[0] = '\0';
  return dlop__stage_failed(status, op, -1,
                            device_type == DLOP_DEVICE_CPU ? "runtime_info for cpu: "
                                                           : "runtime_info for cuda: ",
                            error, "failed without a message");
}

void dlop__stage_destroy(const dlop_thunk *thunk) {
  if (thunk->destroy != NULL) thunk->destroy(thunk->state);
}
