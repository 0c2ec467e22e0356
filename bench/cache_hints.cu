// bench/cache_hints.cu — the experiment behind the kernels' plain loads and stores (bench/RESULTS.md,
// "Cache hints of a memory-bound elementwise kernel"): binary add and the float64 seed chain, with
// and without evict-first hints, 1-4 vectors per thread. Not built by CMake:
//     nvcc -O3 -arch=sm_90 -std=c++17 -o /tmp/cache_hints bench/cache_hints.cu && /tmp/cache_hints
#include <cstdio>
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

enum { LD_CS = 0, LD_PLAIN = 1, LD_LDG = 2 };
enum { ST_CS = 0, ST_PLAIN = 1 };

template <int L> __device__ __forceinline__ int4 ld(const int4 *p) {
  if (L == LD_CS) return __ldcs(p);
  if (L == LD_LDG) return __ldg(p);
  return *p;
}
template <int S> __device__ __forceinline__ void st(int4 *p, int4 v) {
  if (S == ST_CS) __stcs(p, v); else *p = v;
}

template <typename T> __device__ __forceinline__ T addf(T a, T b) { return a + b; }
template <> __device__ __forceinline__ __half addf(__half a, __half b) { return __float2half_rn(__half2float(a) + __half2float(b)); }

// U vectors per thread, a grid apart
template <typename T, int L, int S, int U>
__global__ void add_kernel(const T *a, const T *b, T *z, int64_t vectors) {
  constexpr int W = 16 / sizeof(T);
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < vectors; i += U * step) {
    int4 x[U], y[U];
#pragma unroll
    for (int u = 0; u < U; u++) if (i + u * step < vectors) { x[u] = ld<L>((const int4 *)a + i + u * step); y[u] = ld<L>((const int4 *)b + i + u * step); }
#pragma unroll
    for (int u = 0; u < U; u++) {
      if (i + u * step >= vectors) break;
      T *xe = (T *)&x[u], *ye = (T *)&y[u];
      int4 r; T *re = (T *)&r;
#pragma unroll
      for (int k = 0; k < W; k++) re[k] = addf(xe[k], ye[k]);
      st<S>((int4 *)z + i + u * step, r);
    }
  }
}

// the seed chain exp(2x) * b + tanh(x) - 1 in double, U 16-byte vectors per thread
template <int L, int S, int U>
__global__ void chain_kernel(const double *a, const double *b, double *z, int64_t vectors) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < vectors; i += U * step) {
    int4 x[U], y[U];
#pragma unroll
    for (int u = 0; u < U; u++) if (i + u * step < vectors) { x[u] = ld<L>((const int4 *)a + i + u * step); y[u] = ld<L>((const int4 *)b + i + u * step); }
#pragma unroll
    for (int u = 0; u < U; u++) {
      if (i + u * step >= vectors) break;
      double *xe = (double *)&x[u], *ye = (double *)&y[u];
      int4 r; double *re = (double *)&r;
#pragma unroll
      for (int k = 0; k < 2; k++) re[k] = exp(2.0 * xe[k]) * ye[k] + tanh(xe[k]) - 1.0;
      st<S>((int4 *)z + i + u * step, r);
    }
  }
}

// contiguous U vectors per thread (adjacent: one thread reads 16*U consecutive bytes)
template <int U>
__global__ void chain_adjacent(const double *a, const double *b, double *z, int64_t vectors) {
  int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * U;
  if (i >= vectors) return;
  int4 x[U], y[U];
#pragma unroll
  for (int u = 0; u < U; u++) if (i + u < vectors) { x[u] = __ldcs((const int4 *)a + i + u); y[u] = __ldcs((const int4 *)b + i + u); }
#pragma unroll
  for (int u = 0; u < U; u++) {
    if (i + u >= vectors) break;
    double *xe = (double *)&x[u], *ye = (double *)&y[u];
    int4 r; double *re = (double *)&r;
#pragma unroll
    for (int k = 0; k < 2; k++) re[k] = exp(2.0 * xe[k]) * ye[k] + tanh(xe[k]) - 1.0;
    __stcs((int4 *)z + i + u, r);
  }
}

template <typename K>
static float time_us(K launch, int reps) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0); cudaEventCreate(&e1);
  for (int i = 0; i < 5; i++) launch();
  float best = 1e30f;
  for (int s = 0; s < 5; s++) {
    cudaEventRecord(e0);
    for (int i = 0; i < reps; i++) launch();
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1);
    if (ms * 1000 / reps < best) best = ms * 1000 / reps;
  }
  return best;
}

template <typename T, int L, int S, int U>
static void run_add(const char *name, void *a, void *b, void *z, int64_t n, int block, int reps) {
  const int64_t vectors = n * sizeof(T) / 16;
  const int64_t threads = (vectors + U - 1) / U;
  const int grid = (int)((threads + block - 1) / block);
  float us = time_us([&] { add_kernel<T, L, S, U><<<grid, block>>>((T *)a, (T *)b, (T *)z, vectors); }, reps);
  printf("add %-8s n=2^%d %-22s U=%d block=%d: %8.2f us  %7.1f GB/s\n", name, (int)__builtin_ctzll(n),
         L == LD_CS ? (S == ST_CS ? "ldcs/stcs" : "ldcs/st") : L == LD_LDG ? (S == ST_CS ? "ldg/stcs" : "ldg/st") : (S == ST_CS ? "ld/stcs" : "ld/st"),
         U, block, us, 3.0 * n * sizeof(T) / us / 1e3);
}

template <int L, int S, int U>
static void run_chain(void *a, void *b, void *z, int64_t n, int block, int reps, double copy_gbs) {
  const int64_t vectors = n / 2;
  const int64_t threads = (vectors + U - 1) / U;
  const int grid = (int)((threads + block - 1) / block);
  float us = time_us([&] { chain_kernel<L, S, U><<<grid, block>>>((double *)a, (double *)b, (double *)z, vectors); }, reps);
  double limit = 3.0 * n * 8 / (copy_gbs * 1e3);
  printf("chain64 n=2^%d %s U=%d block=%d: %8.2f us, %.3f of the limit (%.1f us)\n", (int)__builtin_ctzll(n),
         L == LD_CS ? "ldcs/stcs" : "ld/st", U, block, us, limit / us, limit);
}

template <int U>
static void run_adjacent(void *a, void *b, void *z, int64_t n, int block, int reps, double copy_gbs) {
  const int64_t vectors = n / 2;
  const int64_t threads = (vectors + U - 1) / U;
  const int grid = (int)((threads + block - 1) / block);
  float us = time_us([&] { chain_adjacent<U><<<grid, block>>>((double *)a, (double *)b, (double *)z, vectors); }, reps);
  double limit = 3.0 * n * 8 / (copy_gbs * 1e3);
  printf("chain64 n=2^%d adjacent U=%d block=%d: %8.2f us, %.3f of the limit\n", (int)__builtin_ctzll(n), U, block, us, limit / us);
}

int main() {
  const int64_t big = 1ll << 26;
  void *a, *b, *z;
  CK(cudaMalloc(&a, big * 8)); CK(cudaMalloc(&b, big * 8)); CK(cudaMalloc(&z, big * 8));
  cudaMemset(a, 0, big * 8); cudaMemset(b, 0, big * 8);
  // copy bandwidth (read + write) of 2^26 doubles
  float copy_us = time_us([&] { cudaMemcpyAsync(z, a, big * 8, cudaMemcpyDeviceToDevice); }, 20);
  double copy_gbs = 2.0 * big * 8 / copy_us / 1e3;
  printf("copy 2^26 doubles: %.2f us, %.1f GB/s\n", copy_us, copy_gbs);
  for (int64_t n : {1ll << 20, 1ll << 26}) {
    int reps = n < (1 << 22) ? 2000 : 50;
    run_add<double, LD_CS, ST_CS, 1>("float64", a, b, z, n, 256, reps);
    run_add<double, LD_PLAIN, ST_PLAIN, 1>("float64", a, b, z, n, 256, reps);
    run_add<double, LD_LDG, ST_PLAIN, 1>("float64", a, b, z, n, 256, reps);
    run_add<double, LD_CS, ST_PLAIN, 1>("float64", a, b, z, n, 256, reps);
    run_add<double, LD_PLAIN, ST_CS, 1>("float64", a, b, z, n, 256, reps);
    run_add<double, LD_CS, ST_CS, 2>("float64", a, b, z, n, 256, reps);
    run_add<double, LD_PLAIN, ST_PLAIN, 2>("float64", a, b, z, n, 256, reps);
    run_add<float, LD_CS, ST_CS, 1>("float32", a, b, z, n, 256, reps);
    run_add<float, LD_PLAIN, ST_PLAIN, 1>("float32", a, b, z, n, 256, reps);
    run_add<float, LD_CS, ST_CS, 2>("float32", a, b, z, n, 256, reps);
    run_add<float, LD_PLAIN, ST_PLAIN, 2>("float32", a, b, z, n, 256, reps);
    run_add<float, LD_PLAIN, ST_PLAIN, 4>("float32", a, b, z, n, 256, reps);
    run_add<float, LD_CS, ST_CS, 1>("float32", a, b, z, n, 128, reps);
    run_add<float, LD_PLAIN, ST_PLAIN, 1>("float32", a, b, z, n, 128, reps);
    run_add<__half, LD_CS, ST_CS, 1>("float16", a, b, z, n, 256, reps);
    run_add<__half, LD_PLAIN, ST_PLAIN, 1>("float16", a, b, z, n, 256, reps);
    run_add<__half, LD_PLAIN, ST_PLAIN, 2>("float16", a, b, z, n, 256, reps);
  }
  run_chain<LD_CS, ST_CS, 1>(a, b, z, big, 256, 30, copy_gbs);
  run_chain<LD_CS, ST_CS, 2>(a, b, z, big, 256, 30, copy_gbs);
  run_chain<LD_CS, ST_CS, 4>(a, b, z, big, 256, 30, copy_gbs);
  run_chain<LD_PLAIN, ST_PLAIN, 1>(a, b, z, big, 256, 30, copy_gbs);
  run_chain<LD_PLAIN, ST_PLAIN, 2>(a, b, z, big, 256, 30, copy_gbs);
  run_chain<LD_CS, ST_CS, 1>(a, b, z, big, 128, 30, copy_gbs);
  run_chain<LD_CS, ST_CS, 2>(a, b, z, big, 128, 30, copy_gbs);
  run_chain<LD_CS, ST_CS, 1>(a, b, z, big, 512, 30, copy_gbs);
  run_adjacent<2>(a, b, z, big, 128, 30, copy_gbs);
  run_adjacent<2>(a, b, z, big, 256, 30, copy_gbs);
  run_adjacent<4>(a, b, z, big, 128, 30, copy_gbs);
  return 0;
}
