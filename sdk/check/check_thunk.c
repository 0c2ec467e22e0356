/* check_thunk.c — preparing a node and its thunk the way a host does before a run: make_node on
 * static types, infer_shape on the concrete shapes, make_thunk for the case's device, and the
 * workspace the thunk asked for. Each failure fails the test and names the stage. */
#include <string.h>

#include <dlop/kit/checked_size.h>

#include "check_suite.h"

static void with_context(const check_case *c, int push) {
  if (c->device.type != DLOP_DEVICE_CUDA) return;
  if (!push) {
    check_cuda_pop();
    return;
  }
  char error[512];
  if (check_cuda_push(c->device.id, error, sizeof error) != DLOP_OK)
    check_fail(c, "suite setup", NULL, 0, "%s", error);
}

void check_prepare_node(const check_case *c, const char *check, const check_shape *shape,
                        int static_unknown, check_prepared *p) {
  const dlop_op_desc *op = c->op;
  char error[1024];
  memset(p, 0, sizeof *p);
  p->c = c;
  p->shape = *shape;
  p->num_inputs = check_num_inputs(op);
  p->num_outputs = op->num_outputs;
  if (p->num_inputs > CHECK_MAX_OPERANDS || p->num_outputs > CHECK_MAX_OPERANDS ||
      p->num_outputs < 1)
    check_fail(c, check, NULL, 0, "this suite drives ops of up to %d inputs and 1 to %d outputs "
               "(the op has %d and %d)", CHECK_MAX_OPERANDS, CHECK_MAX_OPERANDS,
               (int)p->num_inputs, (int)p->num_outputs);
  if (shape->no_unknown) static_unknown = 0; /* make_node takes these ranks with known dims only */
  check_report_shapes(shape);
  for (int32_t i = 0; i < p->num_inputs; i++)
    p->inputs[i] = check_input_type(c->dtype, shape, i, static_unknown);
  int status = check_call_make_node(op, p->inputs, p->num_inputs, p->outputs, error, sizeof error);
  if (status != DLOP_OK)
    check_fail(c, check, shape->dims, shape->ndim,
               "make_node refused %d input(s) of the declared dtype with %s dims: %s: %s",
               (int)p->num_inputs, static_unknown ? "unknown" : "known", dlop_status_name(status),
               error[0] ? error : "(no message)");
  dlop_type concrete[CHECK_MAX_OPERANDS];
  for (int32_t i = 0; i < p->num_inputs; i++)
    concrete[i] = check_input_type(c->dtype, shape, i, 0);
  for (int32_t o = 0; o < p->num_outputs; o++) {
    if (p->outputs[o].dtype < 0 || p->outputs[o].dtype >= DLOP_DTYPE_COUNT ||
        p->outputs[o].ndim < 0 || p->outputs[o].ndim > DLOP_MAX_NDIM)
      check_fail(c, check, shape->dims, shape->ndim,
                 "make_node gave output %d dtype %d and rank %d (expected a dlop dtype and a rank "
                 "0..%d)", (int)o, (int)p->outputs[o].dtype, (int)p->outputs[o].ndim, DLOP_MAX_NDIM);
    p->concrete_outputs[o] = p->outputs[o];
  }
  status = check_call_infer_shape(op, concrete, p->num_inputs, p->concrete_outputs, error,
                                  sizeof error);
  if (status != DLOP_OK)
    check_fail(c, check, shape->dims, shape->ndim, "infer_shape on concrete shapes failed: %s: %s",
               dlop_status_name(status), error[0] ? error : "(no message)");
  for (int32_t o = 0; o < p->num_outputs; o++)
    for (int32_t d = 0; d < p->concrete_outputs[o].ndim; d++)
      if (p->concrete_outputs[o].shape[d] < 0) {
        char text[DLOP_MAX_NDIM * 22 + 4];
        check_fail(c, check, shape->dims, shape->ndim,
                   "infer_shape on concrete input shapes left output %d's shape %s with an "
                   "unknown or negative dim %d (every dim must be known at run time)", (int)o,
                   check_shape_text(p->concrete_outputs[o].shape, p->concrete_outputs[o].ndim,
                                    text, sizeof text), (int)d);
      }
  /* a shape no array can have (more than 2^63-1 elements or bytes) would wrap the suite's
   * buffer sizes: a failure of the op's shape rule, said as such */
  for (int32_t o = 0; o < p->num_outputs; o++) {
    const dlop_type *t = &p->concrete_outputs[o];
    char message[1024];
    if (dlop_check_shape_size(NULL, t->shape, t->ndim, t->dtype, NULL, message, sizeof message) !=
        DLOP_OK)
      check_fail(c, check, shape->dims, shape->ndim,
                 "infer_shape on concrete input shapes gave output %d: %s", (int)o, message);
  }
}

void check_prepare(const check_case *c, const char *check, const check_shape *shape,
                   int static_unknown, check_prepared *p) {
  const dlop_op_desc *op = c->op;
  char error[1024];
  int status;
  check_prepare_node(c, check, shape, static_unknown, p);
  if (op->make_thunk == NULL)
    check_fail(c, check, shape->dims, shape->ndim, "the op has no make_thunk (only view ops, "
               "with a view_map, may leave it NULL)");
  p->thunk.struct_size = sizeof p->thunk;
  dlop_thunk_args args = {
      .struct_size = sizeof(dlop_thunk_args), .op = op, .params = check_default_params(op),
      .num_params = op->num_params, .num_inputs = p->num_inputs, .inputs = p->inputs,
      .outputs = p->outputs, .num_outputs = p->num_outputs, .device = c->device,
      .thunk = &p->thunk, .error = error, .error_size = sizeof error};
  error[0] = '\0';
  with_context(c, 1);
  check_where_types("make_thunk", p->inputs, p->num_inputs);
  status = op->make_thunk(&args);
  check_where_returned();
  with_context(c, 0);
  if (status != DLOP_OK)
    check_fail(c, check, shape->dims, shape->ndim, "make_thunk on %s failed: %s: %s",
               check_device_text(c->device), dlop_status_name(status),
               error[0] ? error : "(no message)");
  if (p->thunk.run == NULL)
    check_fail(c, check, shape->dims, shape->ndim, "make_thunk returned DLOP_OK without a run function");
  p->have_thunk = 1;
  if (p->thunk.workspace_bytes > 0) {
    status = dlop_memory_alloc(c->device, p->thunk.workspace_bytes, check_stream(c), &p->workspace);
    if (status != DLOP_OK)
      check_fail(c, check, shape->dims, shape->ndim, "allocating the %zu-byte workspace the thunk "
                 "asked for failed: %s", p->thunk.workspace_bytes, dlop_last_error());
  }
}

void check_release(check_prepared *p) {
  if (p->workspace) dlop_memory_free(p->c->device, p->workspace, NULL);
  p->workspace = NULL;
  if (p->have_thunk && p->thunk.destroy) {
    with_context(p->c, 1);
    check_where_run("the thunk's destroy", p);
    p->thunk.destroy(p->thunk.state);
    check_where_returned();
    with_context(p->c, 0);
  }
  p->have_thunk = 0;
}
