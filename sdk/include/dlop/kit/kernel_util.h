/* dlop/kit/kernel_util.h — the umbrella over the static-inline helpers for plugin authors (C,
 * usable from C++). Each job has its own header; include this one for all of them.
 * Nothing here needs libdlop: plugins include it and call the host only through its table. */
#ifndef DLOP_KERNEL_UTIL_H
#define DLOP_KERNEL_UTIL_H

#include "kernel_error.h"  /* dlop_set_error, dlop_format_dtypes, _shape, _ints */
#include "checked_size.h"  /* element counts, byte sizes and strided extents, overflow-checked */
#include "half_float.h"    /* float16 and bfloat16 to and from float */
#include "broadcast.h"     /* NumPy broadcasting of static shapes and types */
#include "tensor_check.h"  /* dlop_check_tensors: a thunk's run checks its tensors */
#include "strided_loop.h"  /* the N-d elementwise loop of CPU kernels */
#include "rows_layout.h"   /* the rows view of a loop, for CUDA rows kernels */
#include "cuda_launch.h"   /* launching elementwise CUDA kernels through the host */

#endif
