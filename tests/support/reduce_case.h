/* reduce_case.h — one case of the reduce plugin's tests: the op, its input's dtype and layout,
 * the axes and keepdims; shared by tests/unit/test_reduce.c and tests/gpu/test_reduce_cuda.c. */
#ifndef DLOP_TEST_REDUCE_CASE_H
#define DLOP_TEST_REDUCE_CASE_H

#include <stdint.h>

#include "dlop.h"

typedef struct dlop_test_reduce_case {
  const char *op;
  dlop_dtype dtype;
  int32_t ndim;
  int64_t shape[4];
  int64_t strides[4]; /* all zero: C-contiguous */
  int32_t naxes;      /* -1 (CPU tests only): leave the axes parameter out, its default: all */
  int64_t axes[4];
  int keepdims;
} dlop_test_reduce_case;

#endif
