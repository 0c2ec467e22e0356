/* reduce_layout.h — a reduction's layout after collapsing: the kept dims (one per output
 * element, with input and output strides) and the reduced dims (input strides), each list
 * merged where dims step as one run. Plain data, the same in C and CUDA (kernels take it by
 * value). */
#ifndef DLOP_REDUCE_LAYOUT_H
#define DLOP_REDUCE_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include <dlop/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Both lists have at least one dim (a size-1 dim of stride 0 when there is nothing), so
 * kernels need no special case. Strides are in elements. Output element m (C order over the
 * kept dims) is the reduction of the input elements at kept offset(m) + reduced offset(r) for
 * r in [0, count), r in C order over the reduced dims. */
typedef struct reduce_layout {
  int32_t kept_ndim, reduced_ndim;
  int64_t outputs; /* product of kept_shape */
  int64_t count;   /* product of reduced_shape: elements reduced into each output */
  int64_t kept_shape[DLOP_MAX_NDIM];
  int64_t kept_in_strides[DLOP_MAX_NDIM];
  int64_t kept_out_strides[DLOP_MAX_NDIM];
  int64_t reduced_shape[DLOP_MAX_NDIM];
  int64_t reduced_strides[DLOP_MAX_NDIM];
} reduce_layout;

/* Builds the layout of reducing input into output over the axes in mask (bit d: axis d of
 * the input). The output has the input's kept dims (and size-1 dims where keepdims kept the
 * reduced ones); its strides may be anything. Size-1 dims are dropped; reduced dims are
 * ordered by decreasing |stride| so the innermost run is the densest; adjacent dims that
 * step as one run are merged. The layout depends only on shapes and strides. DLOP_OK, or
 * DLOP_SHAPE_ERROR with a message when the input's shape has more than 2^63-1 elements (a
 * run's dlop_check_tensors refuses that first). */
int reduce_layout_init(reduce_layout *layout, const dlop_tensor *input, const dlop_tensor *output,
                       uint32_t mask, const char *op_name, char *error, size_t error_size);

#ifdef __cplusplus
}
#endif

#endif
