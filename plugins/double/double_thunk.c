/* double_thunk.c — make_thunk for double: the SDK's elementwise thunk (dlop/kit/elementwise_thunk.h)
 * with double's dtypes, its C kernel and its CUDA kernels dlop_double_*_<dtype>. */
#include <dlop/kit/elementwise_thunk.h>

#include "double_plugin.h"

DLOP_FATBIN_DECLARE(dlop_double_double_cuda_fatbin);

static const dlop_elementwise_spec double_spec = {
    .op_name = "double",
    .host = double_host,
    .num_inputs = 1,
    .broadcast = 0, /* y has x's shape */
    .cpu_dtypes = DOUBLE_DTYPES,
    .cuda_dtypes = DOUBLE_DTYPES,
    .cpu_run = double_cpu_run,
    .cuda_fatbin = DLOP_FATBIN(dlop_double_double_cuda_fatbin),
    .cuda_kernel_prefix = "dlop_double",
    .cuda_contiguous_vectors = 1, /* one 16-byte vector per thread (double_cuda.cu) */
};

int double_make_thunk(const dlop_thunk_args *args) {
  return dlop_elementwise_make_thunk(&double_spec, args);
}
