/* reshape.c — reshape(x; shape), NumPy's: one entry of shape may be -1 (inferred from the
 * element count); the default [-1] flattens. The output is a view whenever the input's strides
 * allow it (NumPy's attempt_nocopy_reshape: runs of input axes that are contiguous among
 * themselves merge or split); otherwise make_view asks the host for a C-contiguous copy. */
#include "shape_plugin.h"

/* Output shape from the shape parameter and x's shape (unknown dims pass: the inferred -1 and
 * nothing checked). */
static int reshape_rule(const dlop_param_value *target, const dlop_type *x, int64_t *out,
                        char *error, size_t error_size) {
  char text[256], shape[256];
  int32_t inferred = -1;
  int64_t product = 1, numel = 1;
  int known = 1;
  if (target->count > DLOP_MAX_NDIM) {
    dlop_set_error(error, error_size, "reshape: shape %s has %d entries, at most %d allowed",
                   dlop_format_ints(target->u.ints, target->count, text, sizeof text),
                   (int)target->count, DLOP_MAX_NDIM);
    return DLOP_TYPE_ERROR;
  }
  for (int32_t i = 0; i < target->count; i++) {
    int64_t dim = target->u.ints[i];
    if (dim == -1 && inferred < 0) {
      inferred = i;
      continue;
    }
    if (dim < 0) {
      dlop_set_error(error, error_size,
                     "reshape: shape %s: %s (expected sizes >= 0 and at most one -1)",
                     dlop_format_ints(target->u.ints, target->count, text, sizeof text),
                     dim == -1 ? "more than one -1" : "a negative size");
      return DLOP_TYPE_ERROR;
    }
  }
  {
    /* the target's sizes (the -1 counts as 1: whatever it becomes cannot make it fit), then
     * their product, which therefore fits (a zero among them makes it 0) */
    int size = dlop_shape_size(target->u.ints, target->count,
                               (int64_t)dlop_dtype_size((dlop_dtype)x->dtype), NULL, NULL);
    if (size != DLOP_SIZE_FITS) {
      dlop_set_size_error(error, error_size, "reshape", size, target->u.ints, target->count,
                          x->dtype);
      return DLOP_SHAPE_ERROR;
    }
    for (int32_t i = 0; i < target->count; i++)
      if (i != inferred) product *= target->u.ints[i];
  }
  for (int32_t d = 0; d < x->ndim; d++)
    if (x->shape[d] == DLOP_DIM_UNKNOWN) known = 0;
  if (known && dlop_shape_size(x->shape, x->ndim, 0, &numel, NULL) != DLOP_SIZE_FITS) {
    dlop_set_error(error, error_size, "reshape: input shape %s has more than "
                   DLOP_SIZE_LIMIT_TEXT " elements",
                   dlop_format_shape(x->shape, x->ndim, shape, sizeof shape));
    return DLOP_SHAPE_ERROR;
  }
  for (int32_t i = 0; i < target->count; i++) out[i] = target->u.ints[i];
  if (!known) {
    if (inferred >= 0) out[inferred] = DLOP_DIM_UNKNOWN;
    return DLOP_OK;
  }
  dlop_format_shape(x->shape, x->ndim, shape, sizeof shape);
  dlop_format_ints(target->u.ints, target->count, text, sizeof text);
  if (inferred < 0 && product != numel) {
    dlop_set_error(error, error_size,
                   "reshape: cannot reshape %s (%lld elements) to %s (%lld elements)", shape,
                   (long long)numel, text, (long long)product);
    return DLOP_SHAPE_ERROR;
  }
  if (inferred >= 0 && (product == 0 || numel % product != 0)) {
    if (product == 0)
      dlop_set_error(error, error_size,
                     "reshape: cannot reshape %s (%lld elements) to %s: the -1 is ambiguous "
                     "next to a size 0",
                     shape, (long long)numel, text);
    else
      dlop_set_error(error, error_size,
                     "reshape: cannot reshape %s (%lld elements) to %s: %lld is not a multiple "
                     "of %lld",
                     shape, (long long)numel, text, (long long)numel, (long long)product);
    return DLOP_SHAPE_ERROR;
  }
  if (inferred >= 0) out[inferred] = numel / product;
  return DLOP_OK;
}

int reshape_make_node(const dlop_node_args *args) {
  int status = shape_check_input(args);
  if (status != DLOP_OK) return status;
  const dlop_param_value *target = &args->params[0];
  args->outputs[0].dtype = args->inputs[0].dtype;
  args->outputs[0].ndim = target->count <= DLOP_MAX_NDIM ? target->count : 0;
  return reshape_rule(target, &args->inputs[0], args->outputs[0].shape, args->error,
                      args->error_size);
}

int reshape_infer_shape(const dlop_node_args *args) {
  int status = shape_check_input(args);
  if (status != DLOP_OK) return status;
  return reshape_rule(&args->params[0], &args->inputs[0], args->outputs[0].shape, args->error,
                      args->error_size);
}

/* NumPy's _attempt_nocopy_reshape (C order), strides in elements: returns 1 and fills
 * new_strides when the new shape can address the old elements with strides alone. Both shapes
 * have the same, non-zero element count. Axes of size 1 are skipped in the old shape; each run
 * of old axes whose product equals a run of new axes must be contiguous among itself. */
static int nocopy_strides(int32_t old_ndim, const int64_t *old_shape, const int64_t *old_strides,
                          int32_t new_ndim, const int64_t *new_shape, int64_t *new_strides) {
  int64_t dims[DLOP_MAX_NDIM], strides[DLOP_MAX_NDIM];
  int32_t ndim = 0;
  for (int32_t d = 0; d < old_ndim; d++)
    if (old_shape[d] != 1) {
      dims[ndim] = old_shape[d];
      strides[ndim++] = old_strides[d];
    }
  int32_t oi = 0, oj = 1, ni = 0, nj = 1;
  while (ni < new_ndim && oi < ndim) {
    int64_t np = new_shape[ni], op = dims[oi];
    while (np != op) {
      /* equal element counts make the runs meet; the bounds guard a broken caller */
      if (np < op) {
        if (nj >= new_ndim) return 0;
        np *= new_shape[nj++];
      } else {
        if (oj >= ndim) return 0;
        op *= dims[oj++];
      }
    }
    for (int32_t ok = oi; ok < oj - 1; ok++)
      if (strides[ok] != dims[ok + 1] * strides[ok + 1]) return 0;
    new_strides[nj - 1] = strides[oj - 1];
    for (int32_t nk = nj - 1; nk > ni; nk--) new_strides[nk - 1] = new_strides[nk] * new_shape[nk];
    ni = nj++;
    oi = oj++;
  }
  /* trailing axes of size 1 (or every axis, when all old ones had size 1) */
  int64_t last = ni > 0 ? new_strides[ni - 1] : 1;
  for (int32_t nk = ni; nk < new_ndim; nk++) new_strides[nk] = last;
  return 1;
}

int reshape_make_view(const dlop_view_args *args) {
  const dlop_tensor *x = args->input;
  const dlop_type *y = args->output;
  shape_view_same_start(args);
  if (dlop_tensor_numel(x) == 0) {
    /* nothing is addressed: C-contiguous strides serve */
    int64_t stride = 1;
    for (int32_t d = y->ndim - 1; d >= 0; d--) {
      args->output_strides[d] = stride;
      stride *= y->shape[d] > 0 ? y->shape[d] : 1;
    }
    return DLOP_OK;
  }
  if (!nocopy_strides(x->ndim, x->shape, x->strides, y->ndim, y->shape, args->output_strides))
    *args->needs_contiguous = 1;
  return DLOP_OK;
}
