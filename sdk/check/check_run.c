/* check_run.c — running a prepared thunk as the host does (tensors, a non-default stream, the
 * workspace, an error buffer; on CUDA with the primary context current) and collecting what a
 * run left in its input and output allocations. */
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"

void *check_stream(const check_case *c) {
  static dlop_stream *stream; /* one per (forked) test process */
  if (c->device.type != DLOP_DEVICE_CUDA) return NULL;
  if (stream == NULL && dlop_stream_create(c->device, &stream) != DLOP_OK)
    check_fail(c, "suite setup", NULL, 0, "creating a CUDA stream failed: %s", dlop_last_error());
  return dlop_stream_handle(stream);
}

void check_run_args_fill(const check_prepared *p, const check_buffer *inputs,
                         const check_buffer *outputs, void *stream, check_run_tensors *tensors,
                         char *error, size_t error_size, dlop_run_args *args) {
  for (int32_t i = 0; i < p->num_inputs; i++) tensors->in[i] = inputs[i].tensor;
  for (int32_t o = 0; o < p->num_outputs; o++) tensors->out[o] = outputs[o].tensor;
  memset(args, 0, sizeof *args);
  args->struct_size = sizeof *args;
  args->inputs = tensors->in;
  args->num_inputs = p->num_inputs;
  args->outputs = tensors->out;
  args->num_outputs = p->num_outputs;
  args->stream = stream;
  args->workspace = p->workspace;
  args->workspace_bytes = p->workspace ? p->thunk.workspace_bytes : 0;
  args->error = error;
  args->error_size = error_size;
  error[0] = '\0';
}

int check_run(check_prepared *p, check_buffer *inputs, check_buffer *outputs, void *stream,
              char *error, size_t error_size) {
  return check_run_thunk(p, &p->thunk, "the thunk's run",
                         "waiting for the stream after the thunk's run (its kernels)", inputs,
                         outputs, stream, error, error_size);
}

int check_run_thunk(check_prepared *p, const dlop_thunk *thunk, const char *stage,
                    const char *wait_stage, check_buffer *inputs, check_buffer *outputs,
                    void *stream, char *error, size_t error_size) {
  check_run_tensors tensors;
  dlop_run_args args;
  check_run_args_fill(p, inputs, outputs, stream, &tensors, error, error_size, &args);
  if (thunk != &p->thunk) {
    args.workspace = NULL;
    args.workspace_bytes = 0;
  }
  check_where_run(stage, p);
  if (p->c->device.type != DLOP_DEVICE_CUDA) {
    int status = thunk->run(thunk->state, &args);
    check_where_returned();
    return status;
  }
  if (check_cuda_push(p->c->device.id, error, error_size) != DLOP_OK) return DLOP_NO_DEVICE;
  int status = thunk->run(thunk->state, &args);
  check_cuda_pop();
  /* The results are only ready once the given stream has finished: wait for it, not for the
   * whole device, so work left on another stream shows up as wrong results. */
  check_where_stage(wait_stage);
  int sync = dlop_host_api_table()->cuda_stream_synchronize(stream);
  check_where_returned();
  if (status == DLOP_OK && sync != DLOP_OK) {
    snprintf(error, error_size, "synchronizing the stream after the run failed: %s (%s)",
             dlop_status_name(sync), dlop_last_error());
    status = sync;
  }
  return status;
}

void check_input_buffer_init(check_buffer *b, const check_prepared *p, int32_t i,
                             check_layout layout, uint64_t salt, void *stream) {
  const check_case *c = p->c;
  int dtype = check_input_dtype(c->dtype, &p->shape, i);
  size_t size = dlop_dtype_size((dlop_dtype)dtype);
  int32_t ndim;
  const int64_t *dims = check_input_dims(&p->shape, i, &ndim);
  int64_t n = check_input_numel(&p->shape, i);
  void *values = malloc((size_t)n * size + 1);
  ck_assert_msg(values != NULL, "out of host memory");
  check_random_fill(values, dtype, n, check_opts.seed * 1000003u + salt * 131u + (uint64_t)i);
  check_buffer_init(b, c, c->device, dtype, ndim, dims, layout, values, NULL, stream);
  free(values);
}

/* Input i holding values (numel doubles, C order), converted to its dtype. */
static void input_buffer_from_values(check_buffer *b, const check_prepared *p, int32_t i,
                                     check_layout layout, const double *values, void *stream) {
  const check_case *c = p->c;
  int dtype = check_input_dtype(c->dtype, &p->shape, i);
  int32_t ndim;
  const int64_t *dims = check_input_dims(&p->shape, i, &ndim);
  int64_t n = check_input_numel(&p->shape, i);
  void *data = malloc((size_t)n * dlop_dtype_size((dlop_dtype)dtype) + 1);
  ck_assert_msg(data != NULL, "out of host memory");
  for (int64_t k = 0; k < n; k++) check_store_value(data, dtype, k, values[k]);
  check_buffer_init(b, c, c->device, dtype, ndim, dims, layout, data, NULL, stream);
  free(data);
}

/* check_run_once, with the inputs holding values[i] when values is not NULL. */
static void run_once(check_prepared *p, check_layout layout, uint64_t salt,
                     double *const *values, int poison_run, check_run_result *r) {
  const check_case *c = p->c;
  void *stream = check_stream(c);
  memset(r, 0, sizeof *r);
  for (int32_t i = 0; i < p->num_inputs; i++) {
    if (values) input_buffer_from_values(&r->in[i], p, i, layout, values[i], stream);
    else check_input_buffer_init(&r->in[i], p, i, layout, salt, stream);
    r->inputs_before[i] = malloc(r->in[i].bytes);
    memcpy(r->inputs_before[i], r->in[i].image, r->in[i].bytes);
  }
  for (int32_t o = 0; o < p->num_outputs; o++) {
    unsigned char poison[8];
    check_poison_pattern(p->outputs[o].dtype, poison_run, poison);
    check_buffer_init(&r->out[o], c, c->device, p->outputs[o].dtype, p->concrete_outputs[o].ndim,
                      p->concrete_outputs[o].shape, CHECK_CONTIGUOUS, NULL, poison, stream);
  }
  r->status = check_run(p, r->in, r->out, stream, r->error, sizeof r->error);
  for (int32_t i = 0; i < p->num_inputs; i++) r->inputs_after[i] = check_buffer_download(&r->in[i], stream);
  for (int32_t o = 0; o < p->num_outputs; o++) {
    r->outputs_after[o] = check_buffer_download(&r->out[o], stream);
    r->values[o] = malloc((size_t)r->out[o].numel * r->out[o].element_size + 1);
    check_buffer_extract(&r->out[o], r->outputs_after[o], r->values[o]);
  }
}

void check_run_once(check_prepared *p, check_layout layout, uint64_t salt, int poison_run,
                    check_run_result *r) {
  run_once(p, layout, salt, NULL, poison_run, r);
}

void check_run_values(check_prepared *p, double *const *values, int poison_run,
                      check_run_result *r) {
  run_once(p, CHECK_CONTIGUOUS, 0, values, poison_run, r);
}

void check_run_fresh(const check_case *c, const char *check, const check_shape *shape,
                     int static_unknown, check_layout layout, uint64_t salt, int poison_run,
                     check_prepared *p, check_run_result *r) {
  check_prepare(c, check, shape, static_unknown, p);
  check_run_once(p, layout, salt, poison_run, r);
  check_release(p);
  check_require_ok(p, check, r);
}

void check_require_ok(check_prepared *p, const char *check, const check_run_result *r) {
  if (r->status != DLOP_OK)
    check_fail(p->c, check, p->shape.dims, p->shape.ndim, "the thunk's run failed: %s: %s",
               dlop_status_name(r->status), r->error[0] ? r->error : "(no message)");
}

void check_compare_outputs(const check_case *c, const char *check, const check_prepared *p,
                           const check_run_result *expected, const check_run_result *actual,
                           int exact, const char *how, const char *what) {
  for (int32_t o = 0; o < p->num_outputs; o++) {
    char report[1024];
    int64_t bad = check_compare(expected->values[o], actual->values[o], p->outputs[o].dtype,
                                expected->out[o].numel, exact, report, sizeof report);
    if (bad)
      check_fail(c, check, p->shape.dims, p->shape.ndim,
                 "%s: %lld of %lld elements of output %d differ%s: %s", what, (long long)bad,
                 (long long)expected->out[o].numel, (int)o, how, report);
  }
}

void check_run_result_free(check_prepared *p, check_run_result *r) {
  for (int32_t i = 0; i < p->num_inputs; i++) {
    check_buffer_free(&r->in[i]);
    free(r->inputs_before[i]);
    free(r->inputs_after[i]);
  }
  for (int32_t o = 0; o < p->num_outputs; o++) {
    check_buffer_free(&r->out[o]);
    free(r->outputs_after[o]);
    free(r->values[o]);
  }
}
