/* scale_add_cuda.cu — the CUDA kernels of scale_add (z = alpha * x + y), one per dtype, named
 * scale_add_float32 and scale_add_float64 (extern "C": scale_add_thunk.c finds them by name).
 * dlop_add_plugin compiles this file with nvcc into a fatbin embedded in the plugin. */
#include <dlop/kit/cuda_kernel_util.cuh>

namespace {

/* Explicitly rounded multiply and add: nvcc would otherwise fuse them into one FMA, and the
 * result would differ in the last bit from the CPU's. */
__device__ __forceinline__ float scale_add_one(float alpha, float x, float y) {
  return __fadd_rn(__fmul_rn(alpha, x), y);
}
__device__ __forceinline__ double scale_add_one(double alpha, double x, double y) {
  return __dadd_rn(__dmul_rn(alpha, x), y);
}

/* One element per loop step, over a grid-stride loop; offsets holds the broadcast and collapsed
 * strides (operand 0 = z, 1 = x, 2 = y), so one kernel handles every layout. A tensor of fewer
 * than 2^32 elements takes the 32-bit index path (cheaper division in dlop_cuda_offsets_at). */
template <typename T>
__device__ __forceinline__ void scale_add_body(const T *x, const T *y, T *z, T alpha, int64_t n,
                                               const dlop_nd_offsets &offsets) {
  if (n <= (int64_t)UINT32_MAX) {
    DLOP_CUDA_GRID_STRIDE_LOOP(i, n) {
      int64_t off[DLOP_KERNEL_MAX_OPERANDS];
      dlop_cuda_offsets_at(offsets, (uint32_t)i, off);
      z[off[0]] = scale_add_one(alpha, x[off[1]], y[off[2]]);
    }
    return;
  }
  DLOP_CUDA_GRID_STRIDE_LOOP(i, n) {
    int64_t off[DLOP_KERNEL_MAX_OPERANDS];
    dlop_cuda_offsets_at(offsets, (uint64_t)i, off);
    z[off[0]] = scale_add_one(alpha, x[off[1]], y[off[2]]);
  }
}

}  // namespace

/* Parameter order is the order of kernel_args in scale_add_run_cuda. */
extern "C" __global__ void scale_add_float32(const float *x, const float *y, float *z,
                                             float alpha, int64_t n, dlop_nd_offsets offsets) {
  scale_add_body(x, y, z, alpha, n, offsets);
}

extern "C" __global__ void scale_add_float64(const double *x, const double *y, double *z,
                                             double alpha, int64_t n, dlop_nd_offsets offsets) {
  scale_add_body(x, y, z, alpha, n, offsets);
}
