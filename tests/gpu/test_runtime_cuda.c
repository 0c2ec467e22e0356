/* test_runtime_cuda.c — the runtime on a GPU: the CUDA caching pool (steady state makes no
 * cuMemAlloc, stats return to baseline, cross-stream reuse stays correct), streams, arrays
 * host<->device for every dtype, strided and negative-stride copies on the GPU (the gather and
 * the tiled transposing kernel) checked against the CPU copy, the host API's module cache and launch (dlop_test_fill_ptx of tests/support), and
 * cuBLAS (per-thread handles). Skips (exit 77) with the reason where no GPU is usable. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "test_support.h"

static const dlop_device cpu = {DLOP_DEVICE_CPU, 0};
static const dlop_device cuda0 = {DLOP_DEVICE_CUDA, 0};

static dlop_memory_stats cuda_stats(void) {
  dlop_memory_stats stats = {.struct_size = sizeof stats};
  DLOP_CK_OK(dlop_memory_stats_get(cuda0, &stats));
  return stats;
}

START_TEST(test_pool_steady_state) {
  dlop_stream *stream;
  DLOP_CK_OK(dlop_stream_create(cuda0, &stream));
  void *handle = dlop_stream_handle(stream);
  ck_assert_ptr_nonnull(handle);
  const size_t sizes[] = {1, 4096, 1 << 20, (5 << 20) + 3};
  void *pointers[4];
  dlop_memory_stats baseline = cuda_stats();
  for (int i = 0; i < 4; i++) DLOP_CK_OK(dlop_memory_alloc(cuda0, sizes[i], handle, &pointers[i]));
  for (int i = 0; i < 4; i++) DLOP_CK_OK(dlop_memory_free(cuda0, pointers[i], handle));
  dlop_memory_stats warm = cuda_stats();
  ck_assert_uint_eq(warm.bytes_in_use, baseline.bytes_in_use);
  ck_assert_uint_gt(warm.driver_allocations, baseline.driver_allocations);
  for (int round = 0; round < 100; round++) {
    for (int i = 0; i < 4; i++) DLOP_CK_OK(dlop_memory_alloc(cuda0, sizes[i], handle, &pointers[i]));
    for (int i = 0; i < 4; i++) DLOP_CK_OK(dlop_memory_free(cuda0, pointers[i], handle));
  }
  dlop_memory_stats steady = cuda_stats();
  ck_assert_uint_eq(steady.driver_allocations, warm.driver_allocations);
  ck_assert_uint_eq(steady.bytes_in_use, baseline.bytes_in_use);
  ck_assert_uint_ge(steady.peak_bytes_in_use, (5u << 20));
  DLOP_CK_OK(dlop_stream_synchronize(stream));
  DLOP_CK_OK(dlop_memory_release_cached(cuda0));
  dlop_memory_stats released = cuda_stats();
  ck_assert_uint_eq(released.bytes_cached, 0);
  ck_assert_uint_eq(released.driver_frees, released.driver_allocations);
  dlop_stream_destroy(stream);
}
END_TEST

/* dst[i] = src[i] for i < n, after every thread has spun `cycles` clock ticks: keeps a stream
 * busy reading src long after the host enqueued it (hand-written PTX, no nvcc at run time). */
static const char delayed_copy_ptx[] =
    ".version 7.0\n"
    ".target sm_50\n"
    ".address_size 64\n"
    ".visible .entry dlop_test_delayed_copy(.param .u64 dst, .param .u64 src, .param .u32 n, .param .u64 cycles)\n"
    "{\n"
    "  .reg .pred %p<3>;\n"
    "  .reg .b32 %r<8>;\n"
    "  .reg .b64 %rd<12>;\n"
    "  ld.param.u64 %rd1, [dst];\n"
    "  ld.param.u64 %rd2, [src];\n"
    "  ld.param.u32 %r1, [n];\n"
    "  ld.param.u64 %rd3, [cycles];\n"
    "  mov.u64 %rd4, %clock64;\n"
    "SPIN:\n"
    "  mov.u64 %rd5, %clock64;\n"
    "  sub.s64 %rd6, %rd5, %rd4;\n"
    "  setp.lt.u64 %p1, %rd6, %rd3;\n"
    "  @%p1 bra SPIN;\n"
    "  mov.u32 %r3, %ctaid.x;\n"
    "  mov.u32 %r4, %ntid.x;\n"
    "  mov.u32 %r5, %tid.x;\n"
    "  mad.lo.s32 %r6, %r3, %r4, %r5;\n"
    "  setp.ge.u32 %p2, %r6, %r1;\n"
    "  @%p2 bra DONE;\n"
    "  cvta.to.global.u64 %rd7, %rd1;\n"
    "  cvta.to.global.u64 %rd8, %rd2;\n"
    "  mul.wide.u32 %rd9, %r6, 4;\n"
    "  add.s64 %rd10, %rd8, %rd9;\n"
    "  ld.global.u32 %r7, [%rd10];\n"
    "  add.s64 %rd11, %rd7, %rd9;\n"
    "  st.global.u32 [%rd11], %r7;\n"
    "DONE:\n"
    "  ret;\n"
    "}\n";

START_TEST(test_cross_stream_reuse_is_ordered) {
  /* A block is filled on stream A, then a kernel on A that spins first copies it to `kept`; the
   * block is freed on A while that kernel still waits, and a block of the same size is taken on
   * B and overwritten. `kept` must hold A's pattern: the pool may not give A's block to B
   * before A's read is done. Even rounds use the public API (raw CUstreams, mapped back to
   * their dlop streams), odd rounds the runtime's own (dlop streams). */
  const dlop_host_api *host = dlop_host_api_table();
  char error[512] = "";
  void *module = NULL, *kernel = NULL;
  ck_assert_msg(host->cuda_module_load(0, delayed_copy_ptx, &module, error, sizeof error) == DLOP_OK,
                "%s", error);
  ck_assert_msg(host->cuda_module_function(module, "dlop_test_delayed_copy", &kernel, error,
                                           sizeof error) == DLOP_OK,
                "%s", error);
  dlop_stream *a, *b;
  DLOP_CK_OK(dlop_stream_create(cuda0, &a));
  DLOP_CK_OK(dlop_stream_create(cuda0, &b));
  void *ha = dlop_stream_handle(a), *hb = dlop_stream_handle(b);
  uint32_t n = 1u << 20;
  const size_t bytes = (size_t)n * 4;
  uint64_t cycles = 20000000; /* ~10 ms per wave of blocks */
  unsigned char *expected = malloc(bytes), *seen = malloc(bytes);
  ck_assert_ptr_nonnull(expected);
  ck_assert_ptr_nonnull(seen);
  void *kept;
  DLOP_CK_OK(dlop_memory_alloc(cuda0, bytes, ha, &kept));
  int reused_early = 0;
  for (int round = 0; round < 10; round++) {
    int own = round % 2;
    void *first, *second;
    if (own) DLOP_CK_OK(dlop__memory_alloc_on(cuda0, bytes, a, &first));
    else DLOP_CK_OK(dlop_memory_alloc(cuda0, bytes, ha, &first));
    DLOP_CK_OK(host->cuda_memset_async(first, (uint8_t)(round + 1), bytes, ha));
    void *arguments[4] = {&kept, &first, &n, &cycles};
    uint32_t grid[3] = {(n + 255) / 256, 1, 1}, block[3] = {256, 1, 1};
    ck_assert_msg(host->cuda_launch(kernel, grid, block, 0, ha, arguments, error, sizeof error) ==
                      DLOP_OK,
                  "%s", error);
    if (own) DLOP_CK_OK(dlop__memory_free_after(cuda0, first, &a, 1));
    else DLOP_CK_OK(dlop_memory_free(cuda0, first, ha));
    if (own) DLOP_CK_OK(dlop__memory_alloc_on(cuda0, bytes, b, &second));
    else DLOP_CK_OK(dlop_memory_alloc(cuda0, bytes, hb, &second));
    if (second == first) reused_early++; /* A's kernel is (almost surely) still spinning */
    DLOP_CK_OK(host->cuda_memset_async(second, 0xEE, bytes, hb));
    DLOP_CK_OK(dlop_stream_synchronize(a));
    DLOP_CK_OK(host->cuda_memcpy_async(seen, kept, bytes, ha));
    DLOP_CK_OK(dlop_stream_synchronize(a));
    memset(expected, round + 1, bytes);
    ck_assert_msg(memcmp(seen, expected, bytes) == 0,
                  "round %d (%s API): stream B reused A's block while A's kernel still read it",
                  round, own ? "internal" : "public");
    if (own) DLOP_CK_OK(dlop__memory_free_after(cuda0, second, &b, 1));
    else DLOP_CK_OK(dlop_memory_free(cuda0, second, hb));
    DLOP_CK_OK(dlop_stream_synchronize(b));
  }
  if (reused_early) printf("cross-stream reuse: %d of 10 rounds got A's block on B\n", reused_early);
  DLOP_CK_OK(dlop_memory_free(cuda0, kept, ha));
  DLOP_CK_OK(dlop_stream_synchronize(a));
  DLOP_CK_OK(host->cuda_module_unload(module));
  free(expected);
  free(seen);
  dlop_stream_destroy(a);
  dlop_stream_destroy(b);
}
END_TEST

START_TEST(test_device_queries) {
  int count = 0;
  DLOP_CK_OK(dlop_cuda_device_count(&count));
  ck_assert_int_ge(count, 1);
  char name[256];
  DLOP_CK_OK(dlop_device_description(cuda0, name, sizeof name));
  ck_assert(strlen(name) > 0);
  printf("GPU: %s (%d device(s))\n", name, count);
  dlop_device beyond = {DLOP_DEVICE_CUDA, count};
  ck_assert_int_eq(dlop_device_check(beyond), DLOP_NO_DEVICE);
  ck_assert_msg(strstr(dlop_last_error(), "requested but only") != NULL, "%s", dlop_last_error());
  int32_t sms = 0;
  DLOP_CK_OK(dlop_host_api_table()->cuda_device_attribute(0, 16, &sms));
  ck_assert_int_gt(sms, 0);
}
END_TEST

START_TEST(test_round_trip_every_dtype) {
  for (int dt = 0; dt < DLOP_DTYPE_COUNT; dt++) {
    dlop_dtype dtype = (dlop_dtype)dt;
    const int64_t sizes[] = {0, 1, 7, 1000, 100003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      int64_t n = sizes[s];
      size_t bytes = (size_t)n * dlop_dtype_size(dtype);
      unsigned char *in = malloc(bytes + 1), *out = malloc(bytes + 1);
      dlop_test_fill_random(in, dtype, n, 7 + (uint64_t)dt, -100, 100);
      memset(out, 0xcd, bytes + 1);
      dlop_array *device, *back;
      DLOP_CK_OK(dlop_array_from_host(cuda0, dtype, 1, &n, in, &device));
      ck_assert_int_eq(dlop_array_device(device).type, DLOP_DEVICE_CUDA);
      DLOP_CK_OK(dlop_array_to_host(device, out, bytes));
      ck_assert_msg(memcmp(in, out, bytes) == 0, "%s n=%lld", dlop_dtype_name(dtype), (long long)n);
      DLOP_CK_OK(dlop_array_copy_to(device, cpu, &back));
      ck_assert_msg(memcmp(dlop_tensor_base(dlop_array_tensor(back)), in, bytes) == 0,
                    "copy_to cpu %s n=%lld", dlop_dtype_name(dtype), (long long)n);
      dlop_array_release(device);
      dlop_array_release(back);
      free(in);
      free(out);
    }
  }
}
END_TEST

/* The same strided view on the CPU and on the GPU, copied, must give identical bytes. */
static void check_strided(dlop_dtype dtype, int32_t ndim, const int64_t *base_shape,
                          const int64_t *shape, const int64_t *strides, uint64_t offset_elements) {
  size_t esize = dlop_dtype_size(dtype);
  int64_t base_n = 1, n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  base_n = base_shape[0];
  unsigned char *data = malloc((size_t)base_n * esize);
  dlop_test_fill_random(data, dtype, base_n, 42 + (uint64_t)dtype, -1000, 1000);
  dlop_array *cpu_base, *gpu_base, *cpu_view, *gpu_view, *cpu_copy, *gpu_copy, *gpu_from_cpu_view;
  DLOP_CK_OK(dlop_array_from_host(cpu, dtype, 1, base_shape, data, &cpu_base));
  DLOP_CK_OK(dlop_array_from_host(cuda0, dtype, 1, base_shape, data, &gpu_base));
  DLOP_CK_OK(dlop_array_view(cpu_base, ndim, shape, strides, offset_elements * esize, &cpu_view));
  DLOP_CK_OK(dlop_array_view(gpu_base, ndim, shape, strides, offset_elements * esize, &gpu_view));
  DLOP_CK_OK(dlop_array_copy_to(cpu_view, cpu, &cpu_copy));            /* reference */
  DLOP_CK_OK(dlop_array_copy_to(gpu_view, cuda0, &gpu_copy));          /* gather kernel */
  DLOP_CK_OK(dlop_array_copy_to(cpu_view, cuda0, &gpu_from_cpu_view)); /* staged H->D */
  size_t bytes = (size_t)n * esize;
  unsigned char *a = malloc(bytes + 1), *b = malloc(bytes + 1), *c = malloc(bytes + 1);
  DLOP_CK_OK(dlop_array_to_host(gpu_copy, a, bytes));
  DLOP_CK_OK(dlop_array_to_host(gpu_view, b, bytes)); /* staged D->H of a strided view */
  DLOP_CK_OK(dlop_array_to_host(gpu_from_cpu_view, c, bytes));
  const void *reference = dlop_tensor_base(dlop_array_tensor(cpu_copy));
  ck_assert_msg(memcmp(reference, a, bytes) == 0, "%s: GPU gather differs from the CPU copy",
                dlop_dtype_name(dtype));
  ck_assert_msg(memcmp(reference, b, bytes) == 0, "%s: to_host of a strided GPU view differs",
                dlop_dtype_name(dtype));
  ck_assert_msg(memcmp(reference, c, bytes) == 0, "%s: strided CPU -> GPU copy differs",
                dlop_dtype_name(dtype));

  /* Scatter: a contiguous GPU source into a strided GPU destination, and a CPU source into a
   * strided GPU destination (the dlop__tensor_copy paths copy_to does not take). */
  dlop_array *zeros;
  unsigned char *zero_data = calloc((size_t)base_n, esize);
  DLOP_CK_OK(dlop_array_from_host(cuda0, dtype, 1, base_shape, zero_data, &zeros));
  dlop_tensor destination = *dlop_array_tensor(gpu_view);
  destination.data = dlop_array_tensor(zeros)->data;
  int has_zero_stride = 0;
  for (int d = 0; d < ndim; d++) has_zero_stride |= strides[d] == 0 && shape[d] > 1;
  if (!has_zero_stride) { /* writing through a zero stride is a race by definition */
    DLOP_CK_OK(dlop__tensor_copy(dlop_array_tensor(gpu_copy), &destination, NULL));
    dlop_array *scattered_view;
    DLOP_CK_OK(dlop_array_view(zeros, ndim, shape, strides, offset_elements * esize, &scattered_view));
    DLOP_CK_OK(dlop_array_to_host(scattered_view, c, bytes));
    ck_assert_msg(memcmp(reference, c, bytes) == 0, "%s: GPU scatter differs", dlop_dtype_name(dtype));
    dlop_tensor zero_host = *dlop_array_tensor(zeros);
    zero_host.data = zero_data;
    zero_host.device = cpu;
    DLOP_CK_OK(dlop__tensor_copy(&zero_host, dlop_array_tensor(zeros), NULL)); /* clear again */
    DLOP_CK_OK(dlop__tensor_copy(dlop_array_tensor(cpu_copy), dlop_array_tensor(scattered_view), NULL));
    DLOP_CK_OK(dlop_array_to_host(scattered_view, c, bytes));
    ck_assert_msg(memcmp(reference, c, bytes) == 0, "%s: CPU -> strided GPU differs", dlop_dtype_name(dtype));
    dlop_array_release(scattered_view);
  }
  dlop_array *list[] = {cpu_base, gpu_base, cpu_view, gpu_view, cpu_copy, gpu_copy, gpu_from_cpu_view, zeros};
  for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) dlop_array_release(list[i]);
  free(data);
  free(zero_data);
  free(a);
  free(b);
  free(c);
}

START_TEST(test_strided_copies_match_cpu) {
  for (int dt = 0; dt < DLOP_DTYPE_COUNT; dt++) {
    dlop_dtype dtype = (dlop_dtype)dt;
    int64_t base[1] = {4000};
    /* 2-d transpose of a 40 x 100 block */
    int64_t s1[2] = {100, 40}, t1[2] = {1, 100};
    check_strided(dtype, 2, base, s1, t1, 0);
    /* reversed rows and every other column reversed: negative strides */
    int64_t s2[2] = {40, 50}, t2[2] = {-100, -2};
    check_strided(dtype, 2, base, s2, t2, 39 * 100 + 99);
    /* broadcast (zero stride) over an odd-sized 3-d slice */
    int64_t s3[3] = {7, 5, 33}, t3[3] = {0, 200, 3};
    check_strided(dtype, 3, base, s3, t3, 1);
    /* zero-size and single-element views */
    int64_t s4[2] = {0, 9}, t4[2] = {9, 1};
    check_strided(dtype, 2, base, s4, t4, 0);
    int64_t s5[3] = {1, 1, 1}, t5[3] = {5, -3, 7};
    check_strided(dtype, 3, base, s5, t5, 3999);
  }
}
END_TEST

/* The tiled copy (copy_kernels.cu: source contiguous along one dim, destination along another,
 * both at least 16 long), partial tiles, a batch dim with a negative stride, a dim too short
 * for tiles (the gather), and grids past 65535 tiles along x and batches along z (uint8 only,
 * to keep them small). */
START_TEST(test_tiled_copies_match_cpu) {
  for (int dt = 0; dt < DLOP_DTYPE_COUNT; dt++) {
    dlop_dtype dtype = (dlop_dtype)dt;
    int64_t base[1] = {24 * 7 * 40};
    /* a C-contiguous (24, 7, 40) array reversed: (40, 7, 24), tiles of 40 x 24 over 7 batches */
    int64_t s1[3] = {40, 7, 24}, t1[3] = {1, 40, 280};
    check_strided(dtype, 3, base, s1, t1, 0);
    /* the batch dim walked backwards */
    int64_t t2[3] = {1, -40, 280};
    check_strided(dtype, 3, base, s1, t2, 6 * 40);
    /* (24, 7, 40) permuted to (40, 24, 7): the destination's contiguous dim has 7: a gather */
    int64_t s3[3] = {40, 24, 7}, t3[3] = {1, 280, 40};
    check_strided(dtype, 3, base, s3, t3, 0);
  }
  int64_t wide[1] = {((int64_t)65535 * 32 + 33) * 16};
  int64_t s4[2] = {(int64_t)65535 * 32 + 33, 16}, t4[2] = {1, (int64_t)65535 * 32 + 33};
  check_strided(DLOP_UINT8, 2, wide, s4, t4, 0);
  int64_t deep[1] = {(int64_t)16 * 16 * 65537};
  int64_t s5[3] = {65537, 16, 16}, t5[3] = {256, 1, 16};
  check_strided(DLOP_UINT8, 3, deep, s5, t5, 0);
}
END_TEST

START_TEST(test_misaligned_strided_copy) {
  /* A float64 view starting 4 bytes into the allocation: the kernel cannot load 8-byte words
   * there and must fall back to bytes. Compared with the same view on the CPU. */
  int64_t n = 1001;
  double *data = malloc((size_t)n * 8);
  for (int64_t i = 0; i < n; i++) data[i] = (double)i * 1.5;
  dlop_array *cpu_bytes, *gpu_bytes;
  int64_t byte_shape[1] = {n * 8};
  DLOP_CK_OK(dlop_array_from_host(cpu, DLOP_UINT8, 1, byte_shape, data, &cpu_bytes));
  DLOP_CK_OK(dlop_array_from_host(cuda0, DLOP_UINT8, 1, byte_shape, data, &gpu_bytes));
  dlop_tensor cpu_view = *dlop_array_tensor(cpu_bytes), gpu_view = *dlop_array_tensor(gpu_bytes);
  int64_t shape[1] = {300}, strides[1] = {-3};
  for (int side = 0; side < 2; side++) {
    dlop_tensor *t = side ? &gpu_view : &cpu_view;
    t->dtype = dlop_dtype_to_dl(DLOP_FLOAT64);
    t->shape = shape;
    t->strides = strides;
    t->byte_offset = 4 + 8 * 999;
  }
  double expected[300], actual[300];
  dlop_tensor host_expected = {expected, cpu, 1, dlop_dtype_to_dl(DLOP_FLOAT64), shape, NULL, 0};
  DLOP_CK_OK(dlop__tensor_copy(&cpu_view, &host_expected, NULL));
  dlop_array *gpu_out;
  DLOP_CK_OK(dlop_array_empty(cuda0, DLOP_FLOAT64, 1, shape, &gpu_out));
  DLOP_CK_OK(dlop__tensor_copy(&gpu_view, dlop_array_tensor(gpu_out), NULL));
  DLOP_CK_OK(dlop_array_to_host(gpu_out, actual, sizeof actual));
  ck_assert(memcmp(expected, actual, sizeof actual) == 0);
  dlop_array_release(cpu_bytes);
  dlop_array_release(gpu_bytes);
  dlop_array_release(gpu_out);
  free(data);
}
END_TEST

START_TEST(test_host_api_modules_and_launch) {
  const dlop_host_api *host = dlop_host_api_table();
  char error[512] = "";
  void *module = NULL, *again = NULL, *function = NULL;
  ck_assert_msg(
      host->cuda_module_load(0, dlop_test_fill_ptx, &module, error, sizeof error) == DLOP_OK, "%s",
      error);
  ck_assert_msg(
      host->cuda_module_load(0, dlop_test_fill_ptx, &again, error, sizeof error) == DLOP_OK, "%s",
      error);
  ck_assert_ptr_eq(module, again); /* cached per (device, image) */
  ck_assert_int_ne(host->cuda_module_function(module, "no_such_kernel", &function, error, sizeof error), DLOP_OK);
  ck_assert_msg(strstr(error, "no_such_kernel") != NULL, "%s", error);
  ck_assert_msg(host->cuda_module_function(module, "dlop_test_fill", &function, error, sizeof error) == DLOP_OK,
                "%s", error);
  dlop_stream *stream;
  DLOP_CK_OK(dlop_stream_create(cuda0, &stream));
  void *s = dlop_stream_handle(stream);
  uint32_t n = 1000, value = 0x12345678;
  void *buffer;
  DLOP_CK_OK(host->memory_alloc(cuda0, 1024 * 4, s, &buffer, error, sizeof error));
  DLOP_CK_OK(host->cuda_memset_async(buffer, 0, 1024 * 4, s));
  void *arguments[3] = {&buffer, &n, &value};
  uint32_t grid[3] = {(n + 127) / 128, 1, 1}, block[3] = {128, 1, 1};
  ck_assert_msg(host->cuda_launch(function, grid, block, 0, s, arguments, error, sizeof error) == DLOP_OK,
                "%s", error);
  uint32_t out[1024];
  DLOP_CK_OK(host->cuda_memcpy_async(out, buffer, sizeof out, s));
  DLOP_CK_OK(host->cuda_stream_synchronize(s));
  for (uint32_t i = 0; i < 1024; i++)
    ck_assert_msg(out[i] == (i < n ? value : 0u), "out[%u] = %#x", i, out[i]);
  DLOP_CK_OK(host->memory_free(cuda0, buffer, s));
  DLOP_CK_OK(host->cuda_module_unload(module));
  DLOP_CK_OK(host->cuda_module_unload(again));
  ck_assert_int_eq(host->cuda_module_unload(module), DLOP_INVALID_ARGUMENT); /* count reached 0 */
  dlop_stream_destroy(stream);
}
END_TEST

typedef int (*sscal_fn)(void *handle, int n, const float *alpha, float *x, int incx);

START_TEST(test_cublas_handle) {
  const dlop_host_api *host = dlop_host_api_table();
  char error[1024] = "";
  dlop_stream *stream;
  DLOP_CK_OK(dlop_stream_create(cuda0, &stream));
  void *handle = NULL, *same = NULL;
  ck_assert_msg(host->cublas_handle(0, dlop_stream_handle(stream), &handle, error, sizeof error) == DLOP_OK,
                "%s", error);
  ck_assert_ptr_nonnull(handle);
  ck_assert_int_eq(host->cublas_handle(0, dlop_stream_handle(stream), &same, error, sizeof error), DLOP_OK);
  ck_assert_ptr_eq(handle, same);
  ck_assert_ptr_null(host->cublas_symbol("cublasNoSuchFunction"));
  sscal_fn sscal = (sscal_fn)host->cublas_symbol("cublasSscal_v2");
  ck_assert_ptr_nonnull(sscal);
  float x[5] = {1, 2, 3, 4, 5}, y[5];
  int64_t n = 5;
  dlop_array *array;
  DLOP_CK_OK(dlop_array_from_host(cuda0, DLOP_FLOAT32, 1, &n, x, &array));
  float alpha = 3;
  ck_assert_int_eq(sscal(handle, 5, &alpha, dlop_tensor_base(dlop_array_tensor(array)), 1), 0);
  dlop__array_set_stream(array, stream);
  DLOP_CK_OK(dlop_array_to_host(array, y, sizeof y));
  for (int i = 0; i < 5; i++) ck_assert(y[i] == 3 * x[i]);
  dlop_array_release(array);
  dlop_stream_destroy(stream);
}
END_TEST

/* Each thread scales its own array on its own stream, many times, with the handle it got. */
typedef struct cublas_worker {
  void *handle, *second_request;
  float factor;
  float result[1000];
  int status;
  char error[1024];
} cublas_worker;

static void *cublas_worker_main(void *argument) {
  cublas_worker *worker = argument;
  const dlop_host_api *host = dlop_host_api_table();
  sscal_fn sscal = (sscal_fn)host->cublas_symbol("cublasSscal_v2");
  dlop_stream *stream = NULL;
  dlop_array *array = NULL;
  float ones[1000];
  for (int i = 0; i < 1000; i++) ones[i] = 1;
  int64_t n = 1000;
  worker->status = dlop_stream_create(cuda0, &stream);
  if (worker->status == DLOP_OK)
    worker->status = dlop_array_from_host(cuda0, DLOP_FLOAT32, 1, &n, ones, &array);
  for (int round = 0; round < 20 && worker->status == DLOP_OK; round++) {
    void *handle = NULL;
    worker->status = host->cublas_handle(0, dlop_stream_handle(stream), &handle, worker->error,
                                         sizeof worker->error);
    if (worker->status != DLOP_OK) break;
    if (round == 0) worker->handle = handle;
    else worker->second_request = handle;
    /* alternate factor and its inverse: after 20 rounds the values are exactly back to 1 only
     * if every call ran, in order, on this thread's stream. */
    float alpha = round % 2 ? 1 / worker->factor : worker->factor;
    int result = sscal(handle, 1000, &alpha, dlop_tensor_base(dlop_array_tensor(array)), 1);
    if (result != 0) {
      snprintf(worker->error, sizeof worker->error, "cublasSscal_v2: status %d", result);
      worker->status = DLOP_CUBLAS_ERROR;
    }
  }
  if (worker->status == DLOP_OK) {
    float alpha = worker->factor;
    void *handle = NULL;
    worker->status = host->cublas_handle(0, dlop_stream_handle(stream), &handle, worker->error,
                                         sizeof worker->error);
    if (worker->status == DLOP_OK)
      sscal(handle, 1000, &alpha, dlop_tensor_base(dlop_array_tensor(array)), 1);
  }
  if (array) dlop__array_set_stream(array, stream);
  if (worker->status == DLOP_OK)
    worker->status = dlop_array_to_host(array, worker->result, sizeof worker->result);
  if (worker->status != DLOP_OK && worker->error[0] == '\0')
    snprintf(worker->error, sizeof worker->error, "%s", dlop_last_error());
  dlop_array_release(array);
  dlop_stream_destroy(stream);
  return NULL; /* the thread's handle is destroyed at its exit */
}

START_TEST(test_cublas_handles_are_per_thread) {
  for (int generation = 0; generation < 2; generation++) { /* again after the first exited */
    cublas_worker workers[2] = {{.factor = 2}, {.factor = 4}};
    pthread_t threads[2];
    for (int i = 0; i < 2; i++)
      ck_assert_int_eq(pthread_create(&threads[i], NULL, cublas_worker_main, &workers[i]), 0);
    for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_join(threads[i], NULL), 0);
    for (int i = 0; i < 2; i++) {
      ck_assert_msg(workers[i].status == DLOP_OK, "thread %d: %s", i, workers[i].error);
      ck_assert_ptr_nonnull(workers[i].handle);
      ck_assert_ptr_eq(workers[i].second_request, workers[i].handle); /* kept for the thread */
      for (int k = 0; k < 1000; k++)
        ck_assert_msg(workers[i].result[k] == workers[i].factor, "thread %d [%d] = %g", i, k,
                      (double)workers[i].result[k]);
    }
    ck_assert_ptr_ne(workers[0].handle, workers[1].handle);
  }
  /* The calling thread has its own handle too, not one of the workers'. */
  const dlop_host_api *host = dlop_host_api_table();
  char error[1024] = "";
  void *mine = NULL;
  ck_assert_msg(host->cublas_handle(0, NULL, &mine, error, sizeof error) == DLOP_OK, "%s", error);
  ck_assert_ptr_nonnull(mine);
  ck_assert_int_ne(host->cublas_handle(-1, NULL, &mine, error, sizeof error), DLOP_OK);
}
END_TEST

int main(void) {
  dlop_test_require_cuda_or_skip();
  Suite *suite = suite_create("runtime_cuda");
  TCase *tc = dlop_test_tcase(suite, "runtime_cuda", 120, NULL, NULL);
  dlop_test_add_tests(tc,
                      test_pool_steady_state,
                      test_cross_stream_reuse_is_ordered,
                      test_device_queries,
                      test_round_trip_every_dtype,
                      test_strided_copies_match_cpu,
                      test_tiled_copies_match_cpu,
                      test_misaligned_strided_copy,
                      test_host_api_modules_and_launch,
                      test_cublas_handle,
                      test_cublas_handles_are_per_thread,
                      NULL);
  return dlop_test_run_suite(suite);
}
