/* function_view.c — one output of a view node at run time (ABI 1.1 make_view): the op lays the
 * output out over its input's memory, the host checks that the layout stays inside the input's
 * elements and makes a dlop_array_view of it. Nothing is allocated and no kernel runs, except a
 * C-contiguous copy of the input when make_view asks for one (reshaping a transposed matrix). */
#include <string.h>

#include "function_internal.h"

/* Bytes [*low, *high) from the data pointer that the elements of (shape, strides) starting at
 * byte_offset cover; 0 when a product or sum leaves the int64 range (a plugin may hand back
 * any strides). Only for shapes with at least one element. */
static int byte_extent(int32_t ndim, const int64_t *shape, const int64_t *strides,
                       uint64_t byte_offset, int64_t element_size, int64_t *low, int64_t *high) {
  return dlop_strided_extent(shape, strides, ndim, element_size, byte_offset, low, high, NULL) == 0;
}

/* The layout make_view gave must address only elements of the input: every byte it reaches
 * lies within the bytes the input's elements cover, on the input's element grid (so typed
 * loads stay aligned). Anything else would read memory the input does not own. */
static int check_layout(const dlop__function_node *node, int32_t index, int32_t o,
                        const dlop_tensor *input, const dlop_type *type, const int64_t *strides,
                        uint64_t byte_offset) {
  char text[256], shape[256], bounds[256];
  int64_t size = (int64_t)dlop_dtype_size(dlop_tensor_dtype(input));
  int64_t low, high, input_low = 0, input_high = 0;
  int64_t numel;
  char what[96];
  /* the run checked the type's size already (function_run.c); this is for the count */
  if (dlop_shape_size(type->shape, type->ndim, size, &numel, NULL) != DLOP_SIZE_FITS) {
    dlop__format(what, sizeof what, "node #%d %s: output %d", (int)index, node->op->name, (int)o);
    return dlop__check_shape_size(what, type->shape, type->ndim, type->dtype, NULL);
  }
  if (numel == 0) return DLOP_OK;
  if ((int64_t)(byte_offset % (uint64_t)size) != (int64_t)(input->byte_offset % (uint64_t)size))
    return dlop__error(DLOP_PLUGIN_ERROR,
                       "node #%d %s: make_view gave output %d byte offset %llu, which is not on "
                       "the grid of the input's %lld-byte elements (input byte offset %llu)",
                       (int)index, node->op->name, (int)o, (unsigned long long)byte_offset,
                       (long long)size, (unsigned long long)input->byte_offset);
  int input_empty = dlop_tensor_numel(input) == 0;
  int fits = byte_extent(type->ndim, type->shape, strides, byte_offset, size, &low, &high);
  int input_fits = !input_empty && byte_extent(input->ndim, input->shape, input->strides,
                                                input->byte_offset, size, &input_low, &input_high);
  if (fits && input_fits && low >= input_low && high <= input_high) return DLOP_OK;
  /* the message only on failure: formatting it costs more than the rest of a view's run */
  if (fits && input_fits)
    dlop__format(bounds, sizeof bounds, "bytes [%lld, %lld) of the memory, but input %d's "
                 "elements cover only [%lld, %lld)", (long long)low, (long long)high,
                 (int)node->op->view_map[o], (long long)input_low, (long long)input_high);
  else
    dlop__format(bounds, sizeof bounds, "%s", input_empty ? "elements of an empty input"
                                                          : "beyond the int64 range of bytes");
  return dlop__error(DLOP_PLUGIN_ERROR,
                     "node #%d %s: make_view laid output %d (shape %s) out with strides %s "
                     "and byte offset %llu, which reach %s: a view must stay inside the "
                     "input's elements",
                     (int)index, node->op->name, (int)o,
                     dlop__format_ints(type->shape, type->ndim, shape, sizeof shape),
                     dlop__format_ints(strides, type->ndim, text, sizeof text),
                     (unsigned long long)byte_offset, bounds);
}

/* A C-contiguous copy of input on the run's stream, recorded as written there so that readers
 * of the view (which shares the copy's memory and stream record) wait for it. */
static int contiguous_copy(const dlop_function *function, const dlop__function_node *node,
                           int32_t index, dlop_array *input, dlop_stream *stream, void *handle,
                           dlop_array **copy) {
  const dlop_tensor *tensor = dlop_array_tensor(input);
  int status = dlop__array_empty_on_stream(function->device, dlop_tensor_dtype(tensor),
                                           tensor->ndim, tensor->shape, stream, copy);
  if (status == DLOP_OK) status = dlop__tensor_copy(tensor, dlop_array_tensor(*copy), handle);
  if (*copy != NULL && stream != NULL) dlop__array_set_stream(*copy, stream);
  if (status != DLOP_OK) {
    char reason[1024];
    dlop__format(reason, sizeof reason, "%s", dlop_last_error());
    dlop_array_release(*copy);
    *copy = NULL;
    return dlop__error(status, "node #%d %s: copying the input contiguous for make_view failed: %s",
                       (int)index, node->op->name, reason);
  }
  return DLOP_OK;
}

int dlop__function_make_view(const dlop_function *function, const dlop__function_node *node,
                             int32_t index, int32_t o, dlop_array *input, const dlop_type *type,
                             dlop_stream *stream, void *handle, dlop_array **view) {
  int64_t strides[DLOP_MAX_NDIM];
  uint64_t byte_offset;
  int32_t needs_contiguous;
  dlop_array *copy = NULL, *base = input;
  const dlop__stage_node stage = dlop__function_stage_node(node, index);
  *view = NULL;
  if ((int32_t)dlop_array_dtype(input) != type->dtype)
    return dlop__error(DLOP_PLUGIN_ERROR,
                       "node #%d %s: output %d is %s but the input it views is %s: a view has "
                       "its input's dtype",
                       (int)index, node->op->name, (int)o,
                       dlop_dtype_name((dlop_dtype)type->dtype),
                       dlop_dtype_name(dlop_array_dtype(input)));
  int status = dlop__stage_make_view(&stage, o, dlop_array_tensor(input), type, strides,
                                     &byte_offset, &needs_contiguous);
  if (status == DLOP_OK && needs_contiguous) {
    if (dlop_tensor_is_contiguous(dlop_array_tensor(input)))
      return dlop__error(DLOP_PLUGIN_ERROR,
                         "node #%d %s: make_view of output %d asked for a C-contiguous input, "
                         "but the input already is one (on a C-contiguous input make_view must "
                         "succeed)",
                         (int)index, node->op->name, (int)o);
    status = contiguous_copy(function, node, index, input, stream, handle, &copy);
    base = copy;
    if (status == DLOP_OK)
      status = dlop__stage_make_view(&stage, o, dlop_array_tensor(copy), type, strides,
                                     &byte_offset, &needs_contiguous);
    if (status == DLOP_OK && needs_contiguous)
      status = dlop__error(DLOP_PLUGIN_ERROR,
                           "node #%d %s: make_view of output %d asked for a C-contiguous input "
                           "again after the host passed one (on a C-contiguous input make_view "
                           "must succeed)",
                           (int)index, node->op->name, (int)o);
  }
  if (status == DLOP_OK)
    status = check_layout(node, index, o, dlop_array_tensor(base), type, strides, byte_offset);
  if (status == DLOP_OK) {
    status = dlop_array_view(base, type->ndim, type->shape, strides, byte_offset, view);
    if (status != DLOP_OK) {
      char reason[1024];
      dlop__format(reason, sizeof reason, "%s", dlop_last_error());
      status = dlop__error(DLOP_PLUGIN_ERROR, "node #%d %s: the view of output %d: %s",
                           (int)index, node->op->name, (int)o, reason);
    }
  }
  dlop_array_release(copy); /* the view holds the copy's memory when it was made */
  return status;
}
