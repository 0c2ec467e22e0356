/* test_op_call_cuda.c — dlop_op_call and dlop_stream_wrap on a GPU: an op call runs on a CUstream
 * another library made (the test makes it through libcuda itself) and writes the caller's device
 * memory; the wrapper never destroys that stream; the default streams (1, 2) are accepted; a
 * stream of another context is refused; a workspace op reuses its pool block on a wrapped stream;
 * CUDA runs need a stream and memory of the call's device. */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_driver.h"
#include "test_support.h"

static const dlop_device cuda0 = {DLOP_DEVICE_CUDA, 0};
static const dlop_device cpu = {DLOP_DEVICE_CPU, 0};

/* The few driver entry points the test needs to play "another library". */
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
  CUresult (*cuStreamSynchronize)(CUstream);
} cu;

#define CU_OK(expr)                                                                    \
  do {                                                                                 \
    CUresult cu_ok_result_ = (expr);                                                   \
    ck_assert_msg(cu_ok_result_ == 0, "%s returned %d", #expr, (int)cu_ok_result_);    \
  } while (0)

static void setup(void) {
  dlop_test_load_bundled_plugins();
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
      {(void **)&cu.cuStreamSynchronize, "cuStreamSynchronize"},
  };
  for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
    *symbols[i].slot = dlsym(library, symbols[i].name);
    ck_assert_msg(*symbols[i].slot != NULL, "libcuda.so.1 lacks %s", symbols[i].name);
  }
  CU_OK(cu.cuInit(0));
}

/* A non-blocking stream of device 0's primary context, made as another library would. */
static CUstream foreign_stream(void) {
  CUdevice device;
  CUcontext primary, before = NULL;
  CUstream stream;
  CU_OK(cu.cuDeviceGet(&device, 0));
  CU_OK(cu.cuDevicePrimaryCtxRetain(&primary, device));
  CU_OK(cu.cuCtxGetCurrent(&before));
  CU_OK(cu.cuCtxSetCurrent(primary));
  CU_OK(cu.cuStreamCreate(&stream, 1));
  CU_OK(cu.cuCtxSetCurrent(before));
  return stream;
}

/* exp of n float32 on cuda:0 through an op call on stream, checked on the host. */
static void run_exp(dlop_op_call *call, int64_t n, dlop_stream *stream) {
  float *host = malloc(sizeof(float) * (size_t)n), *back = malloc(sizeof(float) * (size_t)n);
  ck_assert_ptr_nonnull(host);
  ck_assert_ptr_nonnull(back);
  for (int64_t i = 0; i < n; i++) host[i] = (float)(i % 11) * 0.2f - 1.0f;
  dlop_array *x = NULL, *y = NULL;
  DLOP_CK_OK(dlop_array_from_host(cuda0, DLOP_FLOAT32, 1, &n, host, &x));
  DLOP_CK_OK(dlop_array_synchronize(x));
  DLOP_CK_OK(dlop_array_empty(cuda0, DLOP_FLOAT32, 1, &n, &y));
  DLOP_CK_OK(dlop_array_synchronize(y));
  const void *output_memory = dlop_array_tensor(y)->data;
  DLOP_CK_OK(dlop_op_call_run(call, dlop_array_tensor(x), 1, dlop_array_tensor(y), 1, stream));
  DLOP_CK_OK(dlop_stream_synchronize(stream));
  ck_assert_ptr_eq(dlop_array_tensor(y)->data, output_memory); /* written where it was given */
  DLOP_CK_OK(dlop_array_to_host(y, back, sizeof(float) * (size_t)n));
  for (int64_t i = 0; i < n; i++)
    ck_assert_msg(fabsf(back[i] - expf(host[i])) <= 2e-6f * expf(host[i]), "exp(%g): %g",
                  (double)host[i], (double)back[i]);
  dlop_array_release(x);
  dlop_array_release(y);
  free(host);
  free(back);
}

START_TEST(test_op_call_on_a_foreign_stream) {
  int64_t n = 100003;
  dlop_type type = {DLOP_FLOAT32, 1, {n}};
  dlop_op_call *call = NULL;
  DLOP_CK_OK(dlop_op_call_create("exp", &type, 1, NULL, 0, cuda0, &call));
  CUstream raw = foreign_stream();
  dlop_stream *stream = NULL;
  DLOP_CK_OK(dlop_stream_wrap(cuda0, raw, &stream));
  ck_assert_int_eq(dlop_stream_is_wrapped(stream), 1);
  ck_assert_ptr_eq(dlop_stream_handle(stream), raw);
  ck_assert_int_eq(dlop_stream_device(stream).type, DLOP_DEVICE_CUDA);
  run_exp(call, n, stream);
  dlop_stream_destroy(stream);
  CU_OK(cu.cuStreamSynchronize(raw)); /* still alive: the wrapper did not destroy it */
  CU_OK(cu.cuStreamDestroy(raw));

  /* CUDA's default streams as DLPack numbers them */
  for (uintptr_t which = 1; which <= 2; which++) {
    DLOP_CK_OK(dlop_stream_wrap(cuda0, (void *)which, &stream));
    run_exp(call, n, stream);
    dlop_stream_destroy(stream);
  }
  dlop_op_call_destroy(call);
}
END_TEST

START_TEST(test_stream_of_another_context_is_refused) {
  CUdevice device;
  CUcontext own, before = NULL;
  CUstream raw;
  CU_OK(cu.cuDeviceGet(&device, 0));
  CU_OK(cu.cuCtxGetCurrent(&before));
  CU_OK(cu.cuCtxCreate(&own, 0, device));
  CU_OK(cu.cuStreamCreate(&raw, 1));
  CU_OK(cu.cuCtxSetCurrent(before));
  dlop_stream *stream = (dlop_stream *)&stream;
  ck_assert_int_eq(dlop_stream_wrap(cuda0, raw, &stream), DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_null(stream);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "another CUDA context"));
  CU_OK(cu.cuCtxSetCurrent(own));
  CU_OK(cu.cuStreamDestroy(raw));
  CU_OK(cu.cuCtxSetCurrent(before));
  CU_OK(cu.cuCtxDestroy(own));
}
END_TEST

/* sum needs a workspace on CUDA: on one wrapped stream the pool hands the same block back, so
 * many runs cost no driver allocation after the first. */
START_TEST(test_workspace_reused_on_a_wrapped_stream) {
  int64_t shape[2] = {64, 1000};
  dlop_type type = {DLOP_FLOAT32, 2, {64, 1000}};
  int64_t axes[1] = {1};
  dlop_named_param params[1] = {{"axes", {DLOP_PARAM_INTS, 1, {.ints = axes}}}};
  dlop_op_call *call = NULL;
  DLOP_CK_OK(dlop_op_call_create("sum", &type, 1, params, 1, cuda0, &call));
  ck_assert_uint_gt(dlop_op_call_workspace_bytes(call), 0);
  float *host = malloc(sizeof(float) * 64000);
  ck_assert_ptr_nonnull(host);
  for (int i = 0; i < 64000; i++) host[i] = (float)(i % 1000);
  dlop_array *x = NULL, *y = NULL;
  DLOP_CK_OK(dlop_array_from_host(cuda0, DLOP_FLOAT32, 2, shape, host, &x));
  DLOP_CK_OK(dlop_array_synchronize(x));
  int64_t rows = 64;
  DLOP_CK_OK(dlop_array_empty(cuda0, DLOP_FLOAT32, 1, &rows, &y));
  DLOP_CK_OK(dlop_array_synchronize(y));
  CUstream raw = foreign_stream();
  dlop_stream *stream = NULL;
  DLOP_CK_OK(dlop_stream_wrap(cuda0, raw, &stream));
  DLOP_CK_OK(dlop_op_call_run(call, dlop_array_tensor(x), 1, dlop_array_tensor(y), 1, stream));
  dlop_memory_stats before = {.struct_size = sizeof before}, after = {.struct_size = sizeof after};
  DLOP_CK_OK(dlop_memory_stats_get(cuda0, &before));
  for (int i = 0; i < 100; i++)
    DLOP_CK_OK(dlop_op_call_run(call, dlop_array_tensor(x), 1, dlop_array_tensor(y), 1, stream));
  DLOP_CK_OK(dlop_memory_stats_get(cuda0, &after));
  ck_assert_uint_eq(after.driver_allocations, before.driver_allocations);
  DLOP_CK_OK(dlop_stream_synchronize(stream));
  float sums[64];
  DLOP_CK_OK(dlop_array_to_host(y, sums, sizeof sums));
  for (int r = 0; r < 64; r++) ck_assert_float_eq_tol(sums[r], 499500.0f, 1.0f);
  dlop_stream_destroy(stream);
  CU_OK(cu.cuStreamDestroy(raw));
  dlop_array_release(x);
  dlop_array_release(y);
  free(host);
  dlop_op_call_destroy(call);
}
END_TEST

START_TEST(test_cuda_run_errors) {
  int64_t n = 8;
  dlop_type type = {DLOP_FLOAT32, 1, {8}};
  dlop_op_call *call = NULL;
  DLOP_CK_OK(dlop_op_call_create("exp", &type, 1, NULL, 0, cuda0, &call));
  dlop_array *x = NULL, *y = NULL;
  DLOP_CK_OK(dlop_array_empty(cuda0, DLOP_FLOAT32, 1, &n, &x));
  DLOP_CK_OK(dlop_array_empty(cuda0, DLOP_FLOAT32, 1, &n, &y));
  DLOP_CK_OK(dlop_array_synchronize(x));
  DLOP_CK_OK(dlop_array_synchronize(y));
  ck_assert_int_eq(dlop_op_call_run(call, dlop_array_tensor(x), 1, dlop_array_tensor(y), 1, NULL),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "needs a stream"));
  dlop_stream *cpu_stream = NULL;
  DLOP_CK_OK(dlop_stream_create(cpu, &cpu_stream));
  ck_assert_int_eq(dlop_op_call_run(call, dlop_array_tensor(x), 1, dlop_array_tensor(y), 1,
                                    cpu_stream),
                   DLOP_DEVICE_MISMATCH);
  dlop_stream_destroy(cpu_stream);
  float host[8];
  dlop_tensor on_host = *dlop_array_tensor(x);
  on_host.data = host;
  on_host.device = cpu;
  dlop_stream *stream = NULL;
  DLOP_CK_OK(dlop_stream_create(cuda0, &stream));
  ck_assert_int_eq(dlop_op_call_run(call, &on_host, 1, dlop_array_tensor(y), 1, stream),
                   DLOP_DEVICE_MISMATCH);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "input 0 is on cpu"));
  dlop_stream_destroy(stream);
  dlop_array_release(x);
  dlop_array_release(y);
  dlop_op_call_destroy(call);
}
END_TEST

int main(void) {
  dlop_test_require_cuda_or_skip();
  Suite *suite = suite_create("op_call_cuda");
  TCase *tc = dlop_test_tcase(suite, "cuda", 120, setup, NULL);
  dlop_test_add_tests(tc, test_op_call_on_a_foreign_stream,
                      test_stream_of_another_context_is_refused,
                      test_workspace_reused_on_a_wrapped_stream, test_cuda_run_errors, NULL);
  return dlop_test_run_suite(suite);
}
