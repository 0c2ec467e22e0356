/* multiply_them_thunk.c — make_thunk for multiply_them: the SDK's elementwise thunk
 * (dlop/kit/elementwise_thunk.h) with two inputs broadcast to z's shape, the C kernel and the CUDA
 * kernels dlop_multiply_them_*_<dtype>. */
#include <dlop/kit/elementwise_thunk.h>

#include "multiply_them_plugin.h"

DLOP_FATBIN_DECLARE(dlop_multiply_them_multiply_them_cuda_fatbin);

static const dlop_elementwise_spec multiply_them_spec = {
    .op_name = "multiply_them",
    .host = multiply_them_host,
    .num_inputs = 2,
    .broadcast = 1, /* z has the broadcast shape of a and b */
    .cpu_dtypes = MULTIPLY_THEM_DTYPES,
    .cuda_dtypes = MULTIPLY_THEM_DTYPES,
    .cpu_run = multiply_them_cpu_run,
    .cuda_fatbin = DLOP_FATBIN(dlop_multiply_them_multiply_them_cuda_fatbin),
    .cuda_kernel_prefix = "dlop_multiply_them",
    .cuda_contiguous_vectors = 1, /* one 16-byte vector per thread (multiply_them_cuda.cu) */
};

int multiply_them_make_thunk(const dlop_thunk_args *args) {
  return dlop_elementwise_make_thunk(&multiply_them_spec, args);
}
