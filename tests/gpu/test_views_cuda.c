/* test_views_cuda.c — the shape plugin's views on cuda:0: views of inputs and of intermediates
 * as function outputs (no allocation, reading them waits for the kernel that wrote the
 * memory), views feeding CUDA kernels (double, exp) with transposed, zero and odd strides, the
 * contiguous-copy path of reshape on the device, sizes 0, 1 and odd; values checked on the host
 * against C loops and against the same function on the CPU. Skips (77) without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_runner.h"
#include "test_support.h"

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};
static const dlop_device CUDA = {DLOP_DEVICE_CUDA, 0};

static double *iota(int64_t n) {
  double *data = malloc(sizeof(double) * (size_t)(n + 1));
  ck_assert_ptr_nonnull(data);
  for (int64_t i = 0; i < n; i++) data[i] = (double)(i % 101) * 0.25 - 7.0;
  return data;
}

/* Run f on a CUDA copy of host data (float64 of the given shape); the output comes back to the
 * host. *aliases tells whether the output's data pointer is the input's memory. */
static double *run_cuda(dlop_function *f, int32_t ndim, const int64_t *shape, const double *data,
                        int64_t *numel, int *aliases) {
  dlop_array *input = NULL, *output = NULL;
  DLOP_CK_OK(dlop_array_from_host(CUDA, DLOP_FLOAT64, ndim, shape, data, &input));
  DLOP_CK_OK(dlop_function_run(f, &input, 1, &output, 1, NULL));
  ck_assert_int_eq(dlop_array_device(output).type, DLOP_DEVICE_CUDA);
  if (aliases) *aliases = dlop_array_tensor(output)->data == dlop_array_tensor(input)->data;
  /* the caller's input goes first: the view keeps the memory alive */
  dlop_array_release(input);
  *numel = dlop_array_numel(output);
  double *got = dlop_test_read_back(output);
  dlop_array_release(output);
  return got;
}

static void expect_equal(const double *expected, const double *got, int64_t n, double rtol,
                         const char *what) {
  for (int64_t i = 0; i < n; i++)
    ck_assert_msg(fabs(got[i] - expected[i]) <= rtol * (1.0 + fabs(expected[i])),
                  "%s: element %lld: expected %.17g, got %.17g", what, (long long)i, expected[i],
                  got[i]);
}

/* transpose of a function input as the function's output: a view, no device allocation. */
START_TEST(transpose_of_input_is_a_view) {
  dlop_graph *graph = dlop_test_new_graph();
  int64_t shape[2] = {33, 65};
  dlop_var *x, *t;
  dlop_function *f = NULL;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT64, 2, NULL, &x));
  DLOP_CK_OK(dlop_test_apply_ints(graph, "transpose", x, NULL, NULL, 0, &t));
  DLOP_CK_OK(dlop_function_compile(graph, &x, 1, &t, 1, CUDA, &f));
  double *data = iota(33 * 65), *expected = malloc(sizeof(double) * 33 * 65);
  ck_assert_ptr_nonnull(expected);
  for (int i = 0; i < 65; i++)
    for (int j = 0; j < 33; j++) expected[i * 33 + j] = data[j * 65 + i];
  dlop_array *input = NULL, *output = NULL;
  DLOP_CK_OK(dlop_array_from_host(CUDA, DLOP_FLOAT64, 2, shape, data, &input));
  DLOP_CK_OK(dlop_function_run(f, &input, 1, &output, 1, NULL)); /* warm-up */
  dlop_array_release(output);
  dlop_memory_stats before = dlop_test_memory_stats(CUDA);
  DLOP_CK_OK(dlop_function_run(f, &input, 1, &output, 1, NULL));
  dlop_memory_stats after = dlop_test_memory_stats(CUDA);
  ck_assert_msg(after.bytes_in_use == before.bytes_in_use,
                "a view allocated on the device: %llu bytes in use before, %llu after",
                (unsigned long long)before.bytes_in_use, (unsigned long long)after.bytes_in_use);
  ck_assert_ptr_eq(dlop_array_tensor(output)->data, dlop_array_tensor(input)->data);
  ck_assert(dlop_array_tensor(output)->strides[0] == 1 &&
            dlop_array_tensor(output)->strides[1] == 65);
  double *got = dlop_test_read_back(output);
  expect_equal(expected, got, 33 * 65, 0.0, "transpose");
  free(got);
  dlop_array_release(output);
  dlop_array_release(input);
  free(data);
  free(expected);
  dlop_function_destroy(f);
  dlop_graph_destroy(graph);
}
END_TEST

/* reshape(double(x)) and transpose(double(x)): the output views an intermediate that a kernel
 * writes on the function's stream; reading it must wait for that kernel. Large enough that
 * the kernel is still running when the run returns. */
START_TEST(view_of_an_intermediate_waits_for_its_writer) {
  dlop_graph *graph = dlop_test_new_graph();
  const int64_t rows = 1024, cols = 4099, n = rows * cols;
  int64_t shape[2] = {rows, cols};
  const int64_t flat[1] = {n};
  dlop_var *x, *d, *t, *r;
  dlop_function *f_t = NULL, *f_r = NULL;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT64, 2, shape, &x));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &x, 1, NULL, 0, &d, 1));
  DLOP_CK_OK(dlop_test_apply_ints(graph, "transpose", d, NULL, NULL, 0, &t));
  DLOP_CK_OK(dlop_test_apply_ints(graph, "reshape", d, "shape", flat, 1, &r));
  DLOP_CK_OK(dlop_function_compile(graph, &x, 1, &t, 1, CUDA, &f_t));
  DLOP_CK_OK(dlop_function_compile(graph, &x, 1, &r, 1, CUDA, &f_r));
  double *data = iota(n), *expected = malloc(sizeof(double) * (size_t)n);
  ck_assert_ptr_nonnull(expected);
  int64_t numel;
  for (int64_t i = 0; i < n; i++) expected[i] = 2.0 * data[i];
  double *got = run_cuda(f_r, 2, shape, data, &numel, NULL);
  ck_assert_int_eq(numel, n);
  expect_equal(expected, got, n, 0.0, "reshape(double(x))");
  free(got);
  for (int64_t i = 0; i < cols; i++)
    for (int64_t j = 0; j < rows; j++) expected[i * rows + j] = 2.0 * data[j * cols + i];
  got = run_cuda(f_t, 2, shape, data, &numel, NULL);
  expect_equal(expected, got, n, 0.0, "transpose(double(x))");
  free(got);
  free(data);
  free(expected);
  dlop_function_destroy(f_t);
  dlop_function_destroy(f_r);
  dlop_graph_destroy(graph);
}
END_TEST

/* Views feeding CUDA kernels, against the same functions on the CPU: exp(transpose(x)),
 * double(broadcast_to(x)) (zero strides), double(reshape(transpose(x))) (the device copy
 * path), double(dimshuffle(x)); sizes 0, 1 and odd. */
START_TEST(views_feed_cuda_kernels) {
  static const int64_t sizes[][2] = {{0, 3}, {1, 1}, {7, 13}, {129, 257}};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    dlop_graph *graph = dlop_test_new_graph();
    int64_t shape[2] = {sizes[s][0], sizes[s][1]};
    const int64_t target[3] = {3, sizes[s][0], sizes[s][1]}, pattern[3] = {1, -1, 0};
    dlop_var *x, *t, *e, *b, *db, *flat, *dflat, *ds, *dds;
    DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT64, 2, NULL, &x));
    DLOP_CK_OK(dlop_test_apply_ints(graph, "transpose", x, NULL, NULL, 0, &t));
    DLOP_CK_OK(dlop_graph_apply(graph, "exp", &t, 1, NULL, 0, &e, 1));
    DLOP_CK_OK(dlop_test_apply_ints(graph, "broadcast_to", x, "shape", target, 3, &b));
    DLOP_CK_OK(dlop_graph_apply(graph, "double", &b, 1, NULL, 0, &db, 1));
    DLOP_CK_OK(dlop_test_apply_ints(graph, "reshape", t, NULL, NULL, 0, &flat));
    DLOP_CK_OK(dlop_graph_apply(graph, "double", &flat, 1, NULL, 0, &dflat, 1));
    DLOP_CK_OK(dlop_test_apply_ints(graph, "dimshuffle", x, "pattern", pattern, 3, &ds));
    DLOP_CK_OK(dlop_graph_apply(graph, "double", &ds, 1, NULL, 0, &dds, 1));
    dlop_var *outputs[4] = {e, db, dflat, dds};
    const char *names[4] = {"exp(transpose(x))", "double(broadcast_to(x))",
                            "double(reshape(transpose(x)))", "double(dimshuffle(x))"};
    int64_t n = shape[0] * shape[1];
    double *data = iota(n);
    for (int o = 0; o < 4; o++) {
      dlop_function *cpu = NULL, *cuda = NULL;
      DLOP_CK_OK(dlop_function_compile(graph, &x, 1, &outputs[o], 1, CPU, &cpu));
      DLOP_CK_OK(dlop_function_compile(graph, &x, 1, &outputs[o], 1, CUDA, &cuda));
      dlop_array *input = NULL, *cpu_out = NULL;
      DLOP_CK_OK(dlop_array_from_host(CPU, DLOP_FLOAT64, 2, shape, data, &input));
      DLOP_CK_OK(dlop_function_run(cpu, &input, 1, &cpu_out, 1, NULL));
      int64_t numel;
      double *expected = dlop_test_read_back(cpu_out), *got = run_cuda(cuda, 2, shape, data, &numel, NULL);
      ck_assert_int_eq(numel, dlop_array_numel(cpu_out));
      char what[128];
      snprintf(what, sizeof what, "%s of (%lld, %lld)", names[o], (long long)shape[0],
               (long long)shape[1]);
      expect_equal(expected, got, numel, o == 0 ? dlop_test_tolerance(DLOP_FLOAT64) : 0.0, what);
      free(expected);
      free(got);
      dlop_array_release(cpu_out);
      dlop_array_release(input);
      dlop_function_destroy(cpu);
      dlop_function_destroy(cuda);
    }
    free(data);
    dlop_graph_destroy(graph);
  }
}
END_TEST

/* Every dtype through transpose on the device, byte for byte against a host loop. */
START_TEST(transpose_every_dtype_on_cuda) {
  for (int dtype = 0; dtype < DLOP_DTYPE_COUNT; dtype++) {
    dlop_graph *graph = dlop_test_new_graph();
    int64_t shape[2] = {5, 7};
    dlop_var *x, *y;
    dlop_function *f = NULL;
    DLOP_CK_OK(dlop_graph_input(graph, "x", (dlop_dtype)dtype, 2, NULL, &x));
    DLOP_CK_OK(dlop_test_apply_ints(graph, "transpose", x, NULL, NULL, 0, &y));
    DLOP_CK_OK(dlop_function_compile(graph, &x, 1, &y, 1, CUDA, &f));
    size_t size = dlop_dtype_size((dlop_dtype)dtype);
    unsigned char data[35 * 8], expected[35 * 8];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i * 29 + 3);
    if (dtype == DLOP_BOOL)
      for (size_t i = 0; i < sizeof data; i++) data[i] &= 1;
    for (int i = 0; i < 7; i++)
      for (int j = 0; j < 5; j++)
        memcpy(expected + (size_t)(i * 5 + j) * size, data + (size_t)(j * 7 + i) * size, size);
    dlop_array *input = NULL, *output = NULL;
    DLOP_CK_OK(dlop_array_from_host(CUDA, (dlop_dtype)dtype, 2, shape, data, &input));
    DLOP_CK_OK(dlop_function_run(f, &input, 1, &output, 1, NULL));
    unsigned char *got = dlop_test_read_back(output);
    ck_assert_msg(memcmp(got, expected, 35 * size) == 0, "transpose of %s on cuda:0 differs",
                  dlop_dtype_name((dlop_dtype)dtype));
    free(got);
    dlop_array_release(output);
    dlop_array_release(input);
    dlop_function_destroy(f);
    dlop_graph_destroy(graph);
  }
}
END_TEST

int main(void) {
  /* probes in a child: this process never touches CUDA */
  dlop_test_require_cuda_or_skip();
  Suite *suite = suite_create("views_cuda");
  TCase *views = dlop_test_tcase(suite, "views_cuda", 60, NULL, NULL);
  dlop_test_add_tests(views,
                      transpose_of_input_is_a_view,
                      view_of_an_intermediate_waits_for_its_writer,
                      views_feed_cuda_kernels,
                      transpose_every_dtype_on_cuda,
                      NULL);
  return dlop_test_run_suite(suite);
}
