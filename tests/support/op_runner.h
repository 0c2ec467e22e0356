/* op_runner.h — test helpers that drive one op through its descriptor without a graph
 * (make_node, infer_shape, make_thunk, run) and that lay out and read host tensors of any
 * strides, so that the per-plugin unit and GPU tests share one copy of this plumbing. */
#ifndef DLOP_TEST_OP_RUNNER_H
#define DLOP_TEST_OP_RUNNER_H

#include <stddef.h>
#include <stdint.h>

#include "dlop.h"

/* ---- finding ops and describing types --------------------------------------------------- */

/* The op called name from the bundled plugins (loaded first); fails the test when missing. */
const dlop_op_desc *dlop_test_find_op(const char *name);
/* A type of dtype and shape (the unused dims zero). */
dlop_type dlop_test_type(dlop_dtype dtype, int32_t ndim, const int64_t *shape);
/* The type of a tensor: its dtype, rank and shape. */
dlop_type dlop_test_type_of(const dlop_tensor *t);

/* ---- one node's stages, one output ------------------------------------------------------ */
/* params: op->num_params values, or NULL for none (num_params 0). Each returns the op's
 * status with its message in error (cleared first). */

/* make_node; *output is zeroed first. */
int dlop_test_make_node(const dlop_op_desc *op, const dlop_param_value *params,
                        const dlop_type *inputs, int32_t num_inputs, dlop_type *output,
                        char *error, size_t error_size);
/* infer_shape; *output keeps what the caller put there (make_node's answer, or poison). */
int dlop_test_infer_shape(const dlop_op_desc *op, const dlop_param_value *params,
                          const dlop_type *inputs, int32_t num_inputs, dlop_type *output,
                          char *error, size_t error_size);
/* make_thunk for device; *thunk is zeroed and its struct_size set first, as the host does. */
int dlop_test_make_thunk(const dlop_op_desc *op, const dlop_param_value *params,
                         const dlop_type *inputs, int32_t num_inputs, const dlop_type *output,
                         dlop_device device, dlop_thunk *thunk, char *error, size_t error_size);
/* dlop_test_make_thunk, failing the test (naming op, device, status, message) unless DLOP_OK
 * with a run function. */
void dlop_test_make_thunk_ok(const dlop_op_desc *op, const dlop_param_value *params,
                             const dlop_type *inputs, int32_t num_inputs, const dlop_type *output,
                             dlop_device device, dlop_thunk *thunk);
/* The thunk's run on tensors (stream: the CUDA stream, or NULL), with the workspace it asks
 * for allocated on the output's device for the run (as a host does). */
int dlop_test_run(const dlop_thunk *thunk, const dlop_tensor *inputs, int32_t num_inputs,
                  const dlop_tensor *output, void *stream, char *error, size_t error_size);
/* dlop_test_run, failing the test ("<what>: run: <status> (<message>)") unless DLOP_OK. */
void dlop_test_run_ok(const dlop_thunk *thunk, const dlop_tensor *inputs, int32_t num_inputs,
                      const dlop_tensor *output, void *stream, const char *what);
/* The thunk's destroy, when it has one. */
void dlop_test_destroy_thunk(dlop_thunk *thunk);

/* ---- host tensors of any strides -------------------------------------------------------- */

/* The product of the shape (1 for rank 0). */
int64_t dlop_test_numel(int32_t ndim, const int64_t *shape);
/* strides when one of them is non-zero, else NULL: the tests' layout tables write C-contiguous
 * as all-zero strides. */
const int64_t *dlop_test_strides_given(int32_t ndim, const int64_t *strides);
/* The layout of shape with strides (NULL: C-contiguous; negative and zero strides allowed):
 * writes the strides used into strides_out and *first, the index of element 0 inside the
 * span, and returns the span's length in elements: what the strides reach, at least 1 so that
 * an empty tensor still gets an allocation. */
int64_t dlop_test_layout_span(int32_t ndim, const int64_t *shape, const int64_t *strides,
                              int64_t *strides_out, int64_t *first);
/* Point t (cleared first) at host memory: element 0 at byte_offset from data, dtype, shape and
 * strides (in elements; the arrays are the caller's and must outlive t). */
void dlop_test_host_tensor(dlop_tensor *t, void *data, uint64_t byte_offset, dlop_dtype dtype,
                           int32_t ndim, int64_t *shape, int64_t *strides);
/* Elements from element 0 of a tensor to its element i in C order of its shape. */
int64_t dlop_test_element_offset(const dlop_tensor *t, int64_t i);
/* Element i (C order) of a host tensor as a double. */
double dlop_test_tensor_get(const dlop_tensor *t, int64_t i);
/* All elements of a host tensor as doubles in C order (malloc'd, at least one slot; free it). */
double *dlop_test_gather_doubles(const dlop_tensor *t);

/* ---- tensors over a span of their own ----------------------------------------------------- */

/* A layout of up to 4 dims; strides in elements, all zero for C-contiguous. */
typedef struct dlop_test_spec {
  int32_t ndim;
  int64_t shape[4];
  int64_t strides[4];
} dlop_test_spec;

/* A host tensor laid out per a spec over an allocation of just its span (its own shape and
 * strides arrays: copy the struct, then point t.shape and t.strides at the copy's). */
typedef struct dlop_test_span_tensor {
  dlop_tensor t;
  int64_t shape[4], strides[4];
  char *allocation;
  size_t span_elements;
} dlop_test_span_tensor;

/* x laid out per spec over a new allocation (free x->allocation) of random values in [-1, 1]
 * from seed. */
void dlop_test_span_tensor_init(dlop_test_span_tensor *x, dlop_dtype dtype,
                                const dlop_test_spec *spec, uint64_t seed);

/* ---- one input on the host and on a device --------------------------------------------- */

/* The same span of elements on the host and on a device, each viewed in one layout. */
typedef struct dlop_test_operand {
  dlop_tensor host;             /* over span, in the layout */
  int64_t shape[3], strides[3]; /* the layout (host's and device_view's) */
  void *span;                   /* the host elements (malloc'd by the caller) */
  dlop_array *device_span, *device_view;
} dlop_test_operand;

/* Once o->span holds span elements of dtype and o->shape and o->strides a layout of ndim dims:
 * points o->host at element first of the span and copies the span to device, viewed in the
 * same layout (fails the test on any error). */
void dlop_test_operand_upload(dlop_test_operand *o, dlop_dtype dtype, int32_t ndim, int64_t span,
                              int64_t first, dlop_device device);
/* Releases the device arrays and frees the host span. */
void dlop_test_operand_free(dlop_test_operand *o);

#endif
