/* test_jit_cuda.c — run-time compiled CUDA on a GPU: a kernel compiled by NVRTC for the device
 * (dlop__cuda_compile_module, and the host table's cuda_compile slot that plugins call from
 * make_thunk) is loaded, launched through the host table and gives the right values; asking
 * again is a memory hit that returns the same module (one reference each); a fresh process
 * loads it from the disk cache; a compile error through the slot carries NVRTC's log with the
 * source's line. Skips (exit 77) with the reason where no GPU is usable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "jit.h"
#include "jit_test_support.h"
#include "test_support.h"

static const dlop_device cuda0 = {DLOP_DEVICE_CUDA, 0};

/* y[i] = a * x[i] + b for a 64-bit n: a grid-stride loop, as the host's kernels are written. */
static const char axpb_source[] =
    "extern \"C\" __global__ void dlop_test_axpb(float *y, const float *x, float a,\n"
    "                                            unsigned long long n) {\n"
    "  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n"
    "       i < n; i += (unsigned long long)gridDim.x * blockDim.x)\n"
    "    y[i] = a * x[i] + OFFSET;\n"
    "}\n";
static const char *const axpb_options[] = {"-DOFFSET=0.5f", "--use_fast_math"};

/* Launch dlop_test_axpb of module over n elements and check y against the CPU. */
static void run_axpb(void *module, uint64_t n) {
  const dlop_host_api *host = dlop_host_api_table();
  char error[1024] = "";
  void *function = NULL;
  ck_assert_msg(host->cuda_module_function(module, "dlop_test_axpb", &function, error,
                                           sizeof error) == DLOP_OK,
                "%s", error);
  dlop_stream *stream;
  DLOP_CK_OK(dlop_stream_create(cuda0, &stream));
  void *s = dlop_stream_handle(stream);
  float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
  ck_assert(x != NULL && y != NULL);
  for (uint64_t i = 0; i < n; i++) x[i] = (float)((int64_t)(i % 1001) - 500) * 0.25f;
  void *device_x, *device_y;
  DLOP_CK_OK(host->memory_alloc(cuda0, n * sizeof *x, s, &device_x, error, sizeof error));
  DLOP_CK_OK(host->memory_alloc(cuda0, n * sizeof *y, s, &device_y, error, sizeof error));
  DLOP_CK_OK(host->cuda_memcpy_async(device_x, x, n * sizeof *x, s));
  DLOP_CK_OK(host->cuda_memset_async(device_y, 0xff, n * sizeof *y, s)); /* NaN until written */
  float a = 3.0f;
  unsigned long long count = n;
  void *arguments[4] = {&device_y, &device_x, &a, &count};
  uint32_t grid[3] = {64, 1, 1}, block[3] = {256, 1, 1};
  ck_assert_msg(host->cuda_launch(function, grid, block, 0, s, arguments, error, sizeof error) ==
                    DLOP_OK,
                "%s", error);
  DLOP_CK_OK(host->cuda_memcpy_async(y, device_y, n * sizeof *y, s));
  DLOP_CK_OK(host->cuda_stream_synchronize(s));
  for (uint64_t i = 0; i < n; i++) {
    float expected = 3.0f * x[i] + 0.5f; /* exact in float32 for these x */
    ck_assert_msg(y[i] == expected, "y[%llu] = %g, expected %g", (unsigned long long)i, y[i],
                  expected);
  }
  DLOP_CK_OK(host->memory_free(cuda0, device_x, s));
  DLOP_CK_OK(host->memory_free(cuda0, device_y, s));
  dlop_stream_destroy(stream);
  free(x);
  free(y);
}

START_TEST(compiled_kernel_gives_the_right_values) {
  dlop_test_fresh_cache();
  char error[8192] = "";
  void *module = NULL;
  ck_assert_msg(dlop__cuda_compile_module(0, axpb_source, axpb_options, 2, &module, error,
                                          sizeof error) == DLOP_OK,
                "%s", error);
  run_axpb(module, 1000003); /* more elements than the grid has threads */
  run_axpb(module, 1);
  /* The same request through the host table: a memory hit, the same module, one more reference. */
  const dlop_host_api *host = dlop_host_api_table();
  void *again = NULL;
  dlop_jit_stats before = dlop_test_jit_stats();
  ck_assert_msg(host->cuda_compile(0, axpb_source, axpb_options, 2, &again, error, sizeof error) ==
                    DLOP_OK,
                "%s", error);
  dlop_jit_stats after = dlop_test_jit_stats();
  ck_assert_ptr_eq(again, module);
  ck_assert_uint_eq(after.compiles, before.compiles);
  ck_assert_uint_eq(after.memory_hits, before.memory_hits + 1);
  DLOP_CK_OK(host->cuda_module_unload(again));
  DLOP_CK_OK(host->cuda_module_unload(module));
  ck_assert_int_eq(host->cuda_module_unload(module), DLOP_INVALID_ARGUMENT);
  ck_assert_int_eq(dlop_test_cache_files(".cubin", 0, NULL, 0) +
                       dlop_test_cache_files(".ptx", 0, NULL, 0),
                   1);
}
END_TEST

/* In a fresh process: compile through the slot; 0 when that was a compiler run. */
static int compile_in_child(void *argument) {
  const dlop_host_api *host = dlop_host_api_table();
  char error[8192] = "";
  void *module = NULL;
  if (host->cuda_compile(0, axpb_source, axpb_options, 2, &module, error, sizeof error) != DLOP_OK) {
    fprintf(stderr, "child: %s\n", error);
    return 1;
  }
  dlop_jit_stats stats = {.struct_size = sizeof stats};
  dlop_jit_stats_get(&stats);
  host->cuda_module_unload(module);
  return stats.compiles == 1 && stats.disk_hits == 0 ? 0 : 2;
}

START_TEST(a_fresh_process_loads_the_kernel_from_disk) {
  dlop_test_fresh_cache();
  /* Compiled in a child (this process has not touched CUDA yet, so both may use it)... */
  ck_assert_int_eq(dlop_test_in_child(compile_in_child, NULL), 0);
  /* ...and here loaded from the entry alone, and run. */
  const dlop_host_api *host = dlop_host_api_table();
  char error[8192] = "";
  void *module = NULL;
  ck_assert_msg(host->cuda_compile(0, axpb_source, axpb_options, 2, &module, error, sizeof error) ==
                    DLOP_OK,
                "%s", error);
  dlop_jit_stats stats = dlop_test_jit_stats();
  ck_assert_uint_eq(stats.compiles, 0);
  ck_assert_uint_eq(stats.disk_hits, 1);
  run_axpb(module, 4099);
  DLOP_CK_OK(host->cuda_module_unload(module));
}
END_TEST

START_TEST(compile_error_through_the_slot_carries_the_log) {
  dlop_test_fresh_cache();
  const dlop_host_api *host = dlop_host_api_table();
  static const char broken[] = "extern \"C\" __global__ void k(float *y) {\n"
                               "  y[0] = undefined_name;\n"
                               "}\n";
  char error[8192] = "";
  void *module = (void *)1;
  ck_assert_int_eq(host->cuda_compile(0, broken, NULL, 0, &module, error, sizeof error),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_null(module);
  ck_assert_msg(strstr(error, "dlop_jit.cu(2): error: identifier \"undefined_name\" is undefined") !=
                    NULL,
                "%s", error);
  ck_assert_int_eq(host->cuda_compile(999, axpb_source, NULL, 0, &module, error, sizeof error),
                   DLOP_NO_DEVICE);
  ck_assert_msg(strstr(error, "cuda_compile on cuda:999: CUDA device 999 requested but only") !=
                    NULL,
                "%s", error);
}
END_TEST

int main(void) {
  dlop_test_require_cuda_or_skip();
  Suite *suite = suite_create("jit_cuda");
  TCase *tc = dlop_test_tcase(suite, "jit_cuda", 120, NULL, NULL);
  dlop_test_add_tests(tc, compiled_kernel_gives_the_right_values,
                      a_fresh_process_loads_the_kernel_from_disk,
                      compile_error_through_the_slot_carries_the_log, NULL);
  return dlop_test_run_suite(suite);
}
