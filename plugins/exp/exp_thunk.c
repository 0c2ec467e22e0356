/* exp_thunk.c — make_thunk for exp: the SDK's elementwise thunk (dlop/kit/elementwise_thunk.h) with
 * exp's dtypes, its C kernel (exp_cpu.c) and its CUDA kernels dlop_exp_*_<dtype> (exp_cuda.cu). */
#include <dlop/kit/elementwise_thunk.h>

#include "exp_plugin.h"

DLOP_FATBIN_DECLARE(dlop_exp_exp_cuda_fatbin);

static const dlop_elementwise_spec exp_spec = {
    .op_name = "exp",
    .host = exp_host,
    .num_inputs = 1,
    .broadcast = 0, /* y has x's shape */
    .cpu_dtypes = EXP_DTYPES,
    .cuda_dtypes = EXP_DTYPES,
    .cpu_run = exp_cpu_run,
    .cuda_fatbin = DLOP_FATBIN(dlop_exp_exp_cuda_fatbin),
    .cuda_kernel_prefix = "dlop_exp",
    .cuda_contiguous_vectors = 2, /* EXP_CUDA_UNROLL in exp_cuda.cu */
};

int exp_make_thunk(const dlop_thunk_args *args) {
  return dlop_elementwise_make_thunk(&exp_spec, args);
}
