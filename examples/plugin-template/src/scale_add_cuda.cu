/* scale_add_cuda.cu — the CUDA kernels of scale_add (z = alpha * x + y): a contiguous, a rows and
 * a strided kernel per dtype, scale_add_{contiguous,rows,strided}_<dtype>, the names the spec in
 * scale_add.c gives. dlop_add_plugin compiles this file with nvcc into a fatbin in the plugin. */
#include <dlop/kit/cuda_kernel_util.cuh>

/* Each element function is also the kernels' parameter block (their last argument), laid out as
 * scale_add_params writes it. __fmul_rn and __fadd_rn keep nvcc from fusing the multiply and
 * add into an FMA, so the result has the CPU's bits. */
struct scale_add_f32 {
  float alpha;
  __device__ float operator()(float x, float y) const { return __fadd_rn(__fmul_rn(alpha, x), y); }
};
struct scale_add_f64 {
  double alpha;
  __device__ double operator()(double x, double y) const { return __dadd_rn(__dmul_rn(alpha, x), y); }
};

/* prefix, dtype name, CUDA type, element function, 16-byte vectors per thread (the spec's 1) */
DLOP_CUDA_BINARY_KERNELS(scale_add, float32, float, scale_add_f32, 1)
DLOP_CUDA_BINARY_KERNELS(scale_add, float64, double, scale_add_f64, 1)
