/* test_context_cuda.c — dlop calls leave the calling thread's current CUDA context as they found
 * it (none, another library's own context, or device 0's primary context), so PyTorch or CuPy
 * on another device keep theirs. The test drives libcuda itself (dlopen) to set up each case. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cuda_driver.h"
#include "test_support.h"

static const dlop_device cuda0 = {DLOP_DEVICE_CUDA, 0};

/* The few driver entry points the test needs, resolved from libcuda.so.1. */
static struct {
  CUresult (*cuInit)(unsigned int);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuCtxGetCurrent)(CUcontext *);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxCreate)(CUcontext *, unsigned int, CUdevice);
  CUresult (*cuCtxDestroy)(CUcontext);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuStreamCreate)(CUstream *, unsigned int);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
} cu;

static void load_cu(void) {
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(library != NULL, "dlopen libcuda.so.1: %s", dlerror());
  const struct {
    void **slot;
    const char *name;
  } symbols[] = {
      {(void **)&cu.cuInit, "cuInit"},
      {(void **)&cu.cuDeviceGet, "cuDeviceGet"},
      {(void **)&cu.cuCtxGetCurrent, "cuCtxGetCurrent"},
      {(void **)&cu.cuCtxSetCurrent, "cuCtxSetCurrent"},
      {(void **)&cu.cuCtxCreate, "cuCtxCreate_v2"},
      {(void **)&cu.cuCtxDestroy, "cuCtxDestroy_v2"},
      {(void **)&cu.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
      {(void **)&cu.cuStreamCreate, "cuStreamCreate"},
      {(void **)&cu.cuStreamDestroy, "cuStreamDestroy_v2"},
      {(void **)&cu.cuMemAlloc, "cuMemAlloc_v2"},
      {(void **)&cu.cuMemFree, "cuMemFree_v2"},
  };
  for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
    *symbols[i].slot = dlsym(library, symbols[i].name);
    ck_assert_msg(*symbols[i].slot != NULL, "libcuda.so.1 lacks %s", symbols[i].name);
  }
  ck_assert_int_eq(cu.cuInit(0), 0);
}

#define CU_OK(expr)                                                    \
  do {                                                                 \
    CUresult cu_ok_result_ = (expr);                                   \
    ck_assert_msg(cu_ok_result_ == 0, "%s returned %d", #expr, (int)cu_ok_result_); \
  } while (0)

static CUcontext current_context(void) {
  CUcontext context = NULL;
  CU_OK(cu.cuCtxGetCurrent(&context));
  return context;
}

static CUcontext primary_context(void) {
  CUdevice device;
  CUcontext context = NULL;
  CU_OK(cu.cuDeviceGet(&device, 0));
  CU_OK(cu.cuDevicePrimaryCtxRetain(&context, device));
  return context;
}

#define CK_CONTEXT_IS(expected, after)                                                     \
  ck_assert_msg(current_context() == (expected), "after %s the current context is %p, was %p", \
                after, (void *)current_context(), (void *)(expected))

/* With `before` current: dlop_device_check, then the host table's module load, function
 * lookup, launch, memset, copy back, synchronize and unload on a stream and buffer of device
 * 0's primary context (made by the test itself); after each call `before` is current again. */
static void run_host_calls_keeping(CUcontext before) {
  const dlop_host_api *host = dlop_host_api_table();
  char error[512] = "";
  CUcontext primary = primary_context();
  CU_OK(cu.cuCtxSetCurrent(primary));
  CUstream stream;
  CUdeviceptr buffer;
  enum { count = 1000 };
  CU_OK(cu.cuStreamCreate(&stream, 1u));
  CU_OK(cu.cuMemAlloc(&buffer, count * 4));
  CU_OK(cu.cuCtxSetCurrent(before));
  CK_CONTEXT_IS(before, "the test's setup");

  DLOP_CK_OK(dlop_device_check(cuda0));
  CK_CONTEXT_IS(before, "dlop_device_check");
  void *module = NULL, *function = NULL;
  ck_assert_msg(
      host->cuda_module_load(0, dlop_test_fill_ptx, &module, error, sizeof error) == DLOP_OK, "%s",
      error);
  CK_CONTEXT_IS(before, "cuda_module_load");
  ck_assert_msg(host->cuda_module_function(module, "dlop_test_fill", &function, error,
                                           sizeof error) == DLOP_OK,
                "%s", error);
  CK_CONTEXT_IS(before, "cuda_module_function");
  void *pointer = (void *)(uintptr_t)buffer;
  DLOP_CK_OK(host->cuda_memset_async(pointer, 0, count * 4, stream));
  CK_CONTEXT_IS(before, "cuda_memset_async");
  uint32_t n = count - 3, value = 0x2468ace1u; /* odd: the last elements stay 0 */
  void *arguments[3] = {&pointer, &n, &value};
  uint32_t grid[3] = {(n + 127) / 128, 1, 1}, block[3] = {128, 1, 1};
  ck_assert_msg(host->cuda_launch(function, grid, block, 0, stream, arguments, error,
                                  sizeof error) == DLOP_OK,
                "%s", error);
  CK_CONTEXT_IS(before, "cuda_launch");
  uint32_t out[count];
  DLOP_CK_OK(host->cuda_memcpy_async(out, pointer, sizeof out, stream));
  CK_CONTEXT_IS(before, "cuda_memcpy_async");
  DLOP_CK_OK(host->cuda_stream_synchronize(stream));
  CK_CONTEXT_IS(before, "cuda_stream_synchronize");
  for (uint32_t i = 0; i < count; i++)
    ck_assert_msg(out[i] == (i < n ? value : 0u), "out[%u] = %#x", i, out[i]);
  DLOP_CK_OK(host->cuda_module_unload(module));
  CK_CONTEXT_IS(before, "cuda_module_unload");

  CU_OK(cu.cuCtxSetCurrent(primary));
  CU_OK(cu.cuMemFree(buffer));
  CU_OK(cu.cuStreamDestroy(stream));
  CU_OK(cu.cuCtxSetCurrent(before));
}

START_TEST(test_no_context_stays_none) {
  load_cu();
  CU_OK(cu.cuCtxSetCurrent(NULL));
  run_host_calls_keeping(NULL);
}
END_TEST

START_TEST(test_other_context_stays_current) {
  load_cu();
  CUdevice device;
  CUcontext mine = NULL;
  CU_OK(cu.cuDeviceGet(&device, 0));
  CU_OK(cu.cuCtxCreate(&mine, 0, device)); /* a context of the caller's own, not the primary */
  ck_assert_ptr_ne(mine, primary_context());
  run_host_calls_keeping(mine);
  CU_OK(cu.cuCtxDestroy(mine));
}
END_TEST

START_TEST(test_primary_context_stays_current) {
  load_cu();
  CUcontext primary = primary_context();
  CU_OK(cu.cuCtxSetCurrent(primary));
  run_host_calls_keeping(primary);
}
END_TEST

/* The legacy default stream (NULL) with no context current runs in device 0's primary context,
 * and the thread has no context afterwards either. */
START_TEST(test_null_stream_without_context) {
  load_cu();
  CU_OK(cu.cuCtxSetCurrent(NULL));
  const dlop_host_api *host = dlop_host_api_table();
  DLOP_CK_OK(host->cuda_stream_synchronize(NULL));
  CK_CONTEXT_IS(NULL, "cuda_stream_synchronize(NULL)");
  CUdeviceptr buffer;
  CU_OK(cu.cuCtxSetCurrent(primary_context()));
  CU_OK(cu.cuMemAlloc(&buffer, 5 * 4));
  CU_OK(cu.cuCtxSetCurrent(NULL));
  void *pointer = (void *)(uintptr_t)buffer;
  uint32_t source[5] = {1, 2, 3, 4, 5}, destination[5] = {0};
  DLOP_CK_OK(host->cuda_memcpy_async(pointer, source, sizeof source, NULL));
  CK_CONTEXT_IS(NULL, "cuda_memcpy_async to the device on the NULL stream");
  DLOP_CK_OK(host->cuda_memcpy_async(destination, pointer, sizeof destination, NULL));
  CK_CONTEXT_IS(NULL, "cuda_memcpy_async from the device on the NULL stream");
  DLOP_CK_OK(host->cuda_stream_synchronize(NULL));
  CK_CONTEXT_IS(NULL, "cuda_stream_synchronize(NULL)");
  ck_assert_int_eq(memcmp(source, destination, sizeof source), 0);
  CU_OK(cu.cuCtxSetCurrent(primary_context()));
  CU_OK(cu.cuMemFree(buffer));
}
END_TEST

/* The whole C API on cuda:0 (arrays, a compiled function, its run, copies back, releases)
 * with the caller's own context current: PyTorch or CuPy working in another context keep it. */
START_TEST(test_function_run_keeps_callers_context) {
  load_cu();
  dlop_test_load_bundled_plugins();
  CUdevice device;
  CUcontext mine = NULL;
  CU_OK(cu.cuDeviceGet(&device, 0));
  CU_OK(cu.cuCtxCreate(&mine, 0, device));
  dlop_device cuda = {DLOP_DEVICE_CUDA, 0};
  enum { n = 100003 };
  int64_t shape[1] = {n};
  static float host_in[n], host_out[n];
  for (int i = 0; i < n; i++) host_in[i] = (float)(i % 17) - 8.0f;
  dlop_graph *graph;
  dlop_var *x, *y, *z;
  DLOP_CK_OK(dlop_graph_create(&graph));
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, shape, &x));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &x, 1, NULL, 0, &y, 1));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &y, 1, NULL, 0, &z, 1));
  dlop_function *function;
  DLOP_CK_OK(dlop_function_compile(graph, &x, 1, &z, 1, cuda, &function));
  CK_CONTEXT_IS(mine, "dlop_function_compile");
  dlop_array *input, *output;
  DLOP_CK_OK(dlop_array_from_host(cuda, DLOP_FLOAT32, 1, shape, host_in, &input));
  CK_CONTEXT_IS(mine, "dlop_array_from_host");
  DLOP_CK_OK(dlop_function_run(function, &input, 1, &output, 1, NULL));
  CK_CONTEXT_IS(mine, "dlop_function_run");
  DLOP_CK_OK(dlop_array_to_host(output, host_out, sizeof host_out));
  CK_CONTEXT_IS(mine, "dlop_array_to_host");
  for (int i = 0; i < n; i++) ck_assert_float_eq(host_out[i], 4.0f * host_in[i]);
  dlop_array_release(output);
  dlop_array_release(input);
  dlop_function_destroy(function);
  dlop_graph_destroy(graph);
  CK_CONTEXT_IS(mine, "releasing the arrays and destroying the function");
  CU_OK(cu.cuCtxDestroy(mine));
}
END_TEST

int main(void) {
  dlop_test_require_cuda_or_skip();
  Suite *suite = suite_create("context_cuda");
  TCase *tcase = dlop_test_tcase(suite, "context", 0, NULL, NULL);
  dlop_test_add_tests(tcase,
                      test_no_context_stays_none,
                      test_other_context_stays_current,
                      test_primary_context_stays_current,
                      test_null_stream_without_context,
                      test_function_run_keeps_callers_context,
                      NULL);
  return dlop_test_run_suite(suite);
}
