/* test_out_of_memory_cuda.c — a CUDA allocation larger than the GPU holds fails with
 * DLOP_OUT_OF_MEMORY and a message naming the size, leaves the pool's statistics true (nothing
 * counted in use, no allocation counted), and the next allocation and function run work.
 * Skips (exit 77) with the reason where no GPU is usable. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph_runner.h"
#include "test_support.h"

static const dlop_device cuda0 = {DLOP_DEVICE_CUDA, 0};

static dlop_memory_stats cuda_stats(void) {
  dlop_memory_stats stats = {.struct_size = sizeof stats};
  DLOP_CK_OK(dlop_memory_stats_get(cuda0, &stats));
  return stats;
}

START_TEST(test_huge_allocation_fails_cleanly) {
  void *small = NULL, *huge = NULL;
  DLOP_CK_OK(dlop_memory_alloc(cuda0, 1 << 20, NULL, &small)); /* the pool is up */
  DLOP_CK_OK(dlop_memory_free(cuda0, small, NULL));
  dlop_memory_stats before = cuda_stats();
  const size_t request = (size_t)1 << 50; /* 1 PiB: more than any GPU holds */
  ck_assert_int_eq(dlop_memory_alloc(cuda0, request, NULL, &huge), DLOP_OUT_OF_MEMORY);
  ck_assert_ptr_null(huge);
  ck_assert_msg(strstr(dlop_last_error(), "could not allocate 1125899906842624 bytes") != NULL,
                "the message names the request: %s", dlop_last_error());
  /* The statistics stay true: nothing more in use, no allocation counted, and the cache that
   * the pool gave back to retry is counted as freed. */
  dlop_memory_stats after = cuda_stats();
  ck_assert_uint_eq(after.bytes_in_use, before.bytes_in_use);
  ck_assert_uint_eq(after.driver_allocations, before.driver_allocations);
  ck_assert_uint_eq(after.bytes_cached, 0);
  ck_assert_uint_eq(after.driver_frees, after.driver_allocations); /* nothing in use here */
  /* The next allocation works and is counted. */
  DLOP_CK_OK(dlop_memory_alloc(cuda0, 1 << 20, NULL, &small));
  ck_assert_uint_eq(cuda_stats().bytes_in_use, after.bytes_in_use + (1 << 20));
  DLOP_CK_OK(dlop_memory_free(cuda0, small, NULL));
  ck_assert_uint_eq(cuda_stats().bytes_in_use, after.bytes_in_use);
}
END_TEST

START_TEST(test_function_run_after_out_of_memory) {
  /* An array too large for the GPU, then a normal function run on the same device. */
  dlop_array *huge = NULL;
  const int64_t huge_shape[2] = {(int64_t)1 << 25, (int64_t)1 << 24}; /* 2^49 floats: 2 PiB */
  ck_assert_int_eq(dlop_array_empty(cuda0, DLOP_FLOAT32, 2, huge_shape, &huge), DLOP_OUT_OF_MEMORY);
  ck_assert_ptr_null(huge);
  dlop_graph *graph = dlop_test_new_graph();
  dlop_var *x = NULL;
  dlop_var *y = dlop_test_double_chain(graph, 5, 1, &x);
  dlop_function *f = dlop_test_compile(graph, &x, 1, y, cuda0);
  const float values[5] = {1, 2, 3, 4, 5};
  dlop_array *input = NULL, *output = NULL;
  DLOP_CK_OK(dlop_array_from_host(cuda0, DLOP_FLOAT32, 1, (int64_t[]){5}, values, &input));
  DLOP_CK_OK(dlop_function_run(f, &input, 1, &output, 1, NULL));
  float *result = dlop_test_read_back(output);
  for (int i = 0; i < 5; i++) ck_assert_float_eq(result[i], 2 * values[i]);
  free(result);
  dlop_test_release_arrays(2, output, input);
  dlop_function_destroy(f);
  dlop_graph_destroy(graph);
}
END_TEST

int main(void) {
  dlop_test_require_cuda_or_skip();
  Suite *suite = suite_create("out_of_memory_cuda");
  TCase *tc = dlop_test_tcase(suite, "out_of_memory_cuda", 60, NULL, NULL);
  dlop_test_add_tests(tc, test_huge_allocation_fails_cleanly, test_function_run_after_out_of_memory,
                      NULL);
  return dlop_test_run_suite(suite);
}
