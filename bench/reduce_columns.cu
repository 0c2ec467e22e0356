// bench/reduce_columns.cu — the reduce plugin's columns kernel (sums over a first or middle axis)
// timed plan by plan on one GPU, against a device-to-device copy of the same bytes: the plan the
// plugin picks, then each pack of adjacent outputs per thread (1, 2, 4; 8 for float16) with up to
// 1 .. 32 thread groups a block. Each result is checked against a float64 sum on the host. The
// kernel's source is included (REDUCE_SOURCE, by default the plugin's own), so an edited copy of
// it can be timed the same way. Not built by CMake:
//     nvcc -O3 -arch=sm_90 -std=c++17 -Isdk/include -Iplugins/reduce -o /tmp/reduce_columns \
//       bench/reduce_columns.cu && /tmp/reduce_columns
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#ifndef REDUCE_SOURCE
#define REDUCE_SOURCE "../plugins/reduce/reduce_cuda.cu"
#endif
#include REDUCE_SOURCE

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

struct reduce_case {
  const char *name;
  int64_t shape[3];
  int axis; /* not the last */
};

static const reduce_case CASES[] = {
    {"first 8192 x 8192", {1, 8192, 8192}, 1},
    {"middle 512 x 512 x 256", {512, 512, 256}, 1},
    {"middle-short 16384 x 16 x 256", {16384, 16, 256}, 1},
    {"first-3d 256 x 512 x 512", {1, 256, 262144}, 1},
};

/* The plugin's layout of a contiguous tensor reduced over `axis` of a 3-d shape (outer, n,
 * inner): the kept dims outer and inner (outer dropped when it is 1), one reduced dim. */
static reduce_layout layout_of(const reduce_case &c) {
  reduce_layout l = {};
  const int64_t outer = c.shape[0], n = c.shape[1], inner = c.shape[2];
  l.outputs = outer * inner;
  l.count = n;
  l.reduced_ndim = 1;
  l.reduced_shape[0] = n;
  l.reduced_strides[0] = inner;
  if (outer == 1) {
    l.kept_ndim = 1;
    l.kept_shape[0] = inner;
    l.kept_in_strides[0] = 1;
    l.kept_out_strides[0] = 1;
  } else {
    l.kept_ndim = 2;
    l.kept_shape[0] = outer, l.kept_shape[1] = inner;
    l.kept_in_strides[0] = n * inner, l.kept_in_strides[1] = 1;
    l.kept_out_strides[0] = inner, l.kept_out_strides[1] = 1;
  }
  return l;
}

/* The kernels of each dtype (the plugin's names) and its host conversions. */
template <typename T> struct kernels_of;
template <> struct kernels_of<float> {
  static constexpr const char *name = "float32";
  static constexpr auto columns = dlop_reduce_columns_sum_float32;
  static constexpr auto finish = dlop_reduce_columns_finish_sum_float32;
  static double value(float v) { return v; }
  static float of(float v) { return v; }
};
template <> struct kernels_of<__half> {
  static constexpr const char *name = "float16";
  static constexpr auto columns = dlop_reduce_columns_sum_float16;
  static constexpr auto finish = dlop_reduce_columns_finish_sum_float16;
  static double value(__half v) { return __half2float(v); }
  static __half of(float v) { return __float2half(v); }
};

template <typename T>
static void run_plan(const reduce_cuda_plan &p, const reduce_layout &l, cudaStream_t s, const T *in,
                     T *out, void *partials) {
  kernels_of<T>::columns<<<p.blocks, REDUCE_CUDA_BLOCK, 0, s>>>(in, out, partials, l, p.parts, p.pack,
                                                                p.tile_columns, 0);
  if (p.parts > 1)
    kernels_of<T>::finish<<<p.finish_blocks, REDUCE_CUDA_BLOCK, 0, s>>>(partials, out, l, p.parts, 0);
}

/* Median microseconds per call of `reps` back-to-back calls, over `samples` samples. */
template <typename F>
static double median_us(cudaStream_t s, F call, int reps = 20, int samples = 9) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; i++) call();
  std::vector<double> t;
  for (int k = 0; k < samples; k++) {
    CK(cudaEventRecord(a, s));
    for (int i = 0; i < reps; i++) call();
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.0 / reps);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return t[t.size() / 2];
}

template <typename T>
static void run_case(const reduce_case &c, cudaStream_t s, uint32_t sm_count) {
  const reduce_layout l = layout_of(c);
  const int64_t elements = l.outputs * l.count;
  const uint32_t max_blocks = sm_count * 128;
  const int32_t size = (int32_t)sizeof(T), pack_limit = 16 / size;
  std::vector<T> host(elements);
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int64_t i = 0; i < elements; i++) { /* uniform in [-1, 1) */
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    host[i] = kernels_of<T>::of((float)((double)(state >> 11) / 4503599627370496.0 - 1.0));
  }
  std::vector<double> want(l.outputs, 0.0), magnitude(l.outputs, 0.0);
  const int64_t outer = c.shape[0], n = c.shape[1], inner = c.shape[2];
  for (int64_t o = 0; o < outer; o++)
    for (int64_t r = 0; r < n; r++)
      for (int64_t i = 0; i < inner; i++) {
        const double v = kernels_of<T>::value(host[(o * n + r) * inner + i]);
        want[o * inner + i] += v;
        magnitude[o * inner + i] += fabs(v);
      }
  T *in, *out, *copy;
  void *partials;
  CK(cudaMalloc(&in, elements * sizeof(T)));
  CK(cudaMalloc(&copy, elements * sizeof(T)));
  CK(cudaMalloc(&out, l.outputs * sizeof(T)));
  CK(cudaMalloc(&partials, REDUCE_CUDA_WORKSPACE_BYTES));
  CK(cudaMemcpy(in, host.data(), elements * sizeof(T), cudaMemcpyHostToDevice));
  const double bytes = (double)elements * sizeof(T);
  const double copy_us = median_us(s, [&] { cudaMemcpyAsync(copy, in, elements * sizeof(T), cudaMemcpyDeviceToDevice, s); });
  const double copy_gbs = 2 * bytes / copy_us * 1e-3; /* read and written */
  printf("%s %s: copy %.1f us (%.0f GB/s read and written)\n", c.name, kernels_of<T>::name, copy_us, copy_gbs);

  std::vector<reduce_cuda_plan> plans(1);
  reduce_cuda_plan_make(&plans[0], &l, max_blocks, sm_count, size, pack_limit);
  for (int32_t pack = 1; pack <= pack_limit; pack *= 2) {
    if (!reduce_cuda_columns_packs(&l, pack)) continue;
    for (int64_t groups = 1; groups <= 32; groups *= 2) {
      reduce_cuda_plan p;
      reduce_cuda_plan_columns_as(&p, &l, max_blocks, sm_count, pack, groups);
      bool seen = false;
      for (const reduce_cuda_plan &q : plans)
        seen |= q.pack == p.pack && q.tile_columns == p.tile_columns && q.parts == p.parts;
      if (!seen) plans.push_back(p);
    }
  }
  std::vector<T> got(l.outputs);
  for (size_t k = 0; k < plans.size(); k++) {
    const reduce_cuda_plan &p = plans[k];
    CK(cudaMemset(out, 0, l.outputs * sizeof(T)));
    run_plan<T>(p, l, s, in, out, partials);
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(got.data(), out, l.outputs * sizeof(T), cudaMemcpyDeviceToHost));
    double worst = 0; /* error over the sum of magnitudes */
    for (int64_t m = 0; m < l.outputs; m++)
      worst = std::max(worst, fabs(kernels_of<T>::value(got[m]) - want[m]) / (magnitude[m] + 1e-30));
    const double us = median_us(s, [&] { run_plan<T>(p, l, s, in, out, partials); });
    printf("  %-7s pack %d, %3d groups, %d parts, %6u blocks: %7.1f us, %5.0f GB/s, %.3f of the copy's, error %.1e\n",
           k == 0 ? "plugin" : "", p.pack, REDUCE_CUDA_BLOCK / p.tile_columns, (int)p.parts, p.blocks, us,
           bytes / us * 1e-3, bytes / us * 1e-3 / copy_gbs, worst);
  }
  cudaFree(in);
  cudaFree(copy);
  cudaFree(out);
  cudaFree(partials);
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  for (const reduce_case &c : CASES) run_case<float>(c, s, (uint32_t)prop.multiProcessorCount);
  for (const reduce_case &c : CASES) run_case<__half>(c, s, (uint32_t)prop.multiProcessorCount);
  return 0;
}
