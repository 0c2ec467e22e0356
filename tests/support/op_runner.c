/* op_runner.c — calling an op's stages through its descriptor, and reading host tensors of any
 * strides, for the tests (see op_runner.h). Failures go through Check's ck_assert. */
#include "op_runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

const dlop_op_desc *dlop_test_find_op(const char *name) {
  dlop_test_load_bundled_plugins();
  const dlop_op_desc *op = dlop_find_op(name);
  ck_assert_msg(op != NULL, "op %s not found: %s", name, dlop_last_error());
  return op;
}

dlop_type dlop_test_type(dlop_dtype dtype, int32_t ndim, const int64_t *shape) {
  dlop_type t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.ndim = ndim;
  for (int32_t d = 0; d < ndim; d++) t.shape[d] = shape[d];
  return t;
}

dlop_type dlop_test_type_of(const dlop_tensor *t) {
  return dlop_test_type(dlop_tensor_dtype(t), t->ndim, t->shape);
}

/* The node arguments make_node and infer_shape share. */
static dlop_node_args node_args(const dlop_op_desc *op, const dlop_param_value *params,
                                const dlop_type *inputs, int32_t num_inputs, dlop_type *output,
                                char *error, size_t error_size) {
  dlop_node_args args = {.struct_size = sizeof args, .op = op, .params = params,
                         .num_params = params ? op->num_params : 0,
                         .inputs = inputs, .num_inputs = num_inputs,
                         .outputs = output, .num_outputs = 1,
                         .error = error, .error_size = error_size};
  error[0] = '\0';
  return args;
}

int dlop_test_make_node(const dlop_op_desc *op, const dlop_param_value *params,
                        const dlop_type *inputs, int32_t num_inputs, dlop_type *output,
                        char *error, size_t error_size) {
  memset(output, 0, sizeof *output);
  dlop_node_args args = node_args(op, params, inputs, num_inputs, output, error, error_size);
  return op->make_node(&args);
}

int dlop_test_infer_shape(const dlop_op_desc *op, const dlop_param_value *params,
                          const dlop_type *inputs, int32_t num_inputs, dlop_type *output,
                          char *error, size_t error_size) {
  dlop_node_args args = node_args(op, params, inputs, num_inputs, output, error, error_size);
  return op->infer_shape(&args);
}

int dlop_test_make_thunk(const dlop_op_desc *op, const dlop_param_value *params,
                         const dlop_type *inputs, int32_t num_inputs, const dlop_type *output,
                         dlop_device device, dlop_thunk *thunk, char *error, size_t error_size) {
  dlop_thunk_args args = {.struct_size = sizeof args, .op = op, .params = params,
                          .num_params = params ? op->num_params : 0,
                          .inputs = inputs, .num_inputs = num_inputs,
                          .outputs = output, .num_outputs = 1,
                          .device = device, .thunk = thunk,
                          .error = error, .error_size = error_size};
  memset(thunk, 0, sizeof *thunk);
  error[0] = '\0';
  thunk->struct_size = sizeof *thunk;
  return op->make_thunk(&args);
}

void dlop_test_make_thunk_ok(const dlop_op_desc *op, const dlop_param_value *params,
                             const dlop_type *inputs, int32_t num_inputs, const dlop_type *output,
                             dlop_device device, dlop_thunk *thunk) {
  char error[512];
  int status = dlop_test_make_thunk(op, params, inputs, num_inputs, output, device, thunk, error,
                                    sizeof error);
  ck_assert_msg(status == DLOP_OK, "%s make_thunk on %s: %s (%s)", op->name,
                device.type == DLOP_DEVICE_CUDA ? "cuda" : "cpu", dlop_status_name(status), error);
  ck_assert_msg(thunk->run != NULL, "%s make_thunk returned DLOP_OK without a run function",
                op->name);
}

int dlop_test_run(const dlop_thunk *thunk, const dlop_tensor *inputs, int32_t num_inputs,
                  const dlop_tensor *output, void *stream, char *error, size_t error_size) {
  dlop_run_args args = {.struct_size = sizeof args, .inputs = inputs, .num_inputs = num_inputs,
                        .outputs = output, .num_outputs = 1, .stream = stream,
                        .error = error, .error_size = error_size};
  void *workspace = NULL;
  error[0] = '\0';
  /* the workspace the thunk asked for, on the output's device and the run's stream, as a
   * host gives it */
  if (thunk->workspace_bytes > 0) {
    int status = dlop_memory_alloc(output->device, thunk->workspace_bytes, stream, &workspace);
    if (status != DLOP_OK) {
      snprintf(error, error_size, "allocating the thunk's %zu-byte workspace failed: %s",
               thunk->workspace_bytes, dlop_last_error());
      return status;
    }
    args.workspace = workspace;
    args.workspace_bytes = thunk->workspace_bytes;
  }
  int status = thunk->run(thunk->state, &args);
  if (workspace != NULL) dlop_memory_free(output->device, workspace, stream);
  return status;
}

void dlop_test_run_ok(const dlop_thunk *thunk, const dlop_tensor *inputs, int32_t num_inputs,
                      const dlop_tensor *output, void *stream, const char *what) {
  char error[512];
  int status = dlop_test_run(thunk, inputs, num_inputs, output, stream, error, sizeof error);
  ck_assert_msg(status == DLOP_OK, "%s: run: %s (%s)", what, dlop_status_name(status), error);
}

void dlop_test_destroy_thunk(dlop_thunk *thunk) {
  if (thunk->destroy) thunk->destroy(thunk->state);
}

int64_t dlop_test_numel(int32_t ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int32_t d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

const int64_t *dlop_test_strides_given(int32_t ndim, const int64_t *strides) {
  for (int32_t d = 0; d < ndim; d++)
    if (strides[d] != 0) return strides;
  return NULL;
}

int64_t dlop_test_layout_span(int32_t ndim, const int64_t *shape, const int64_t *strides,
                              int64_t *strides_out, int64_t *first) {
  int64_t contiguous = 1, lo = 0, hi = 0;
  for (int32_t d = ndim - 1; d >= 0; d--) {
    strides_out[d] = strides ? strides[d] : contiguous;
    contiguous *= shape[d];
  }
  if (dlop_test_numel(ndim, shape) > 0)
    for (int32_t d = 0; d < ndim; d++) {
      int64_t reach = (shape[d] - 1) * strides_out[d];
      if (reach < 0) lo += reach; /* negative strides: element 0 sits past the span's start */
      else hi += reach;
    }
  *first = -lo;
  return hi - lo + 1;
}

void dlop_test_host_tensor(dlop_tensor *t, void *data, uint64_t byte_offset, dlop_dtype dtype,
                           int32_t ndim, int64_t *shape, int64_t *strides) {
  memset(t, 0, sizeof *t);
  t->data = data;
  t->byte_offset = byte_offset;
  t->device = (dlop_device){DLOP_DEVICE_CPU, 0};
  t->ndim = ndim;
  t->dtype = dlop_dtype_to_dl(dtype);
  t->shape = shape;
  t->strides = strides;
}

int64_t dlop_test_element_offset(const dlop_tensor *t, int64_t i) {
  int64_t offset = 0;
  for (int32_t d = t->ndim - 1; d >= 0; d--) {
    offset += (i % t->shape[d]) * t->strides[d];
    i /= t->shape[d];
  }
  return offset;
}

double dlop_test_tensor_get(const dlop_tensor *t, int64_t i) {
  return dlop_test_get((const char *)t->data + t->byte_offset, dlop_tensor_dtype(t),
                       dlop_test_element_offset(t, i));
}

double *dlop_test_gather_doubles(const dlop_tensor *t) {
  int64_t n = dlop_test_numel(t->ndim, t->shape);
  double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  ck_assert_ptr_nonnull(v);
  for (int64_t i = 0; i < n; i++) v[i] = dlop_test_tensor_get(t, i);
  return v;
}

void dlop_test_span_tensor_init(dlop_test_span_tensor *x, dlop_dtype dtype,
                                const dlop_test_spec *spec, uint64_t seed) {
  int64_t first;
  size_t element = dlop_dtype_size(dtype);
  memset(x, 0, sizeof *x);
  memcpy(x->shape, spec->shape, sizeof x->shape);
  x->span_elements = (size_t)dlop_test_layout_span(
      spec->ndim, spec->shape, dlop_test_strides_given(spec->ndim, spec->strides), x->strides,
      &first);
  x->allocation = malloc(x->span_elements * element);
  ck_assert_ptr_nonnull(x->allocation);
  dlop_test_fill_random(x->allocation, dtype, (int64_t)x->span_elements, seed, -1.0, 1.0);
  dlop_test_host_tensor(&x->t, x->allocation, (uint64_t)(first * (int64_t)element), dtype,
                        spec->ndim, x->shape, x->strides);
}

void dlop_test_operand_upload(dlop_test_operand *o, dlop_dtype dtype, int32_t ndim, int64_t span,
                              int64_t first, dlop_device device) {
  uint64_t byte_offset = (uint64_t)first * dlop_dtype_size(dtype);
  dlop_test_host_tensor(&o->host, o->span, byte_offset, dtype, ndim, o->shape, o->strides);
  DLOP_CK_OK(dlop_array_from_host(device, dtype, 1, &span, o->span, &o->device_span));
  DLOP_CK_OK(dlop_array_view(o->device_span, ndim, o->shape, o->strides, byte_offset,
                             &o->device_view));
}

void dlop_test_operand_free(dlop_test_operand *o) {
  dlop_array_release(o->device_view);
  dlop_array_release(o->device_span);
  free(o->span);
}
