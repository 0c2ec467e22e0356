/* test_device.c — device names (parse/format, bad strings with messages), the CPU device, and
 * what CUDA requests do on a machine without a usable GPU: a clean DLOP_NO_DEVICE that names
 * what is missing. The no-GPU tests skip themselves where a GPU is present. */
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

static const dlop_device cuda0 = {DLOP_DEVICE_CUDA, 0};

START_TEST(test_parse_and_format) {
  const struct {
    const char *text;
    int32_t type, id;
    const char *formatted;
  } good[] = {{"cpu", DLOP_DEVICE_CPU, 0, "cpu"},       {"CPU", DLOP_DEVICE_CPU, 0, "cpu"},
              {"cuda", DLOP_DEVICE_CUDA, 0, "cuda:0"},  {"cuda:0", DLOP_DEVICE_CUDA, 0, "cuda:0"},
              {"cuda:3", DLOP_DEVICE_CUDA, 3, "cuda:3"}, {"gpu", DLOP_DEVICE_CUDA, 0, "cuda:0"},
              {"gpu:12", DLOP_DEVICE_CUDA, 12, "cuda:12"}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    dlop_device device = {0, -1};
    DLOP_CK_OK(dlop_device_parse(good[i].text, &device));
    ck_assert_int_eq(device.type, good[i].type);
    ck_assert_int_eq(device.id, good[i].id);
    char buffer[32];
    ck_assert_str_eq(dlop_device_format(device, buffer, sizeof buffer), good[i].formatted);
  }
}
END_TEST

START_TEST(test_parse_rejects_bad_strings) {
  const char *bad[] = {"", "cuda:", "cuda:-1", "cuda:x", "cuda:1x", "cuda0", "cuda:99999",
                       "tpu", "cpu:0x", " cpu", "cud"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    dlop_device device;
    ck_assert_msg(dlop_device_parse(bad[i], &device) == DLOP_INVALID_ARGUMENT, "\"%s\" accepted",
                  bad[i]);
    ck_assert_msg(strstr(dlop_last_error(), bad[i]) != NULL, "message '%s' does not quote '%s'",
                  dlop_last_error(), bad[i]);
    ck_assert_msg(strstr(dlop_last_error(), "cuda:N") != NULL, "message '%s' lacks the expected forms",
                  dlop_last_error());
  }
  dlop_device device;
  ck_assert_int_eq(dlop_device_parse(NULL, &device), DLOP_INVALID_ARGUMENT);
  ck_assert_int_eq(dlop_device_parse("cpu", NULL), DLOP_INVALID_ARGUMENT);
  char small[4];
  dlop_device_format(cuda0, small, sizeof small);
  ck_assert_str_eq(small, "cud"); /* truncated, still terminated */
}
END_TEST

START_TEST(test_cpu_device) {
  dlop_device cpu = {DLOP_DEVICE_CPU, 0};
  DLOP_CK_OK(dlop_device_check(cpu));
  char description[256];
  DLOP_CK_OK(dlop_device_description(cpu, description, sizeof description));
  ck_assert(strlen(description) > 0);
  dlop_stream *stream;
  DLOP_CK_OK(dlop_stream_create(cpu, &stream));
  ck_assert_ptr_null(dlop_stream_handle(stream));
  ck_assert_int_eq(dlop_stream_device(stream).type, DLOP_DEVICE_CPU);
  DLOP_CK_OK(dlop_stream_synchronize(stream));
  dlop_stream_destroy(stream);
  ck_assert_int_eq(dlop_device_check((dlop_device){DLOP_DEVICE_CPU, 1}), DLOP_NO_DEVICE);
  ck_assert_int_eq(dlop_device_check((dlop_device){9, 0}), DLOP_NO_DEVICE);
  ck_assert_msg(strstr(dlop_last_error(), "9") != NULL, "%s", dlop_last_error());
}
END_TEST

/* The rest describe a machine without a usable GPU; where CUDA works they do not apply. */
static int cuda_usable(void) { return dlop_device_check(cuda0) == DLOP_OK; }

static void assert_names_what_is_missing(void) {
  const char *message = dlop_last_error();
  ck_assert_msg(strstr(message, "libcuda.so.1") || strstr(message, "no GPU") ||
                    strstr(message, "CUDA_ERROR") || strstr(message, "requested but only"),
                "message does not say what is missing: '%s'", message);
}

START_TEST(test_cuda_without_gpu) {
  if (cuda_usable()) return;
  ck_assert_int_eq(dlop_device_check(cuda0), DLOP_NO_DEVICE);
  assert_names_what_is_missing();
  int count = -1;
  DLOP_CK_OK(dlop_cuda_device_count(&count));
  ck_assert_int_eq(count, 0);
  void *pointer = (void *)0x1;
  ck_assert_int_eq(dlop_memory_alloc(cuda0, 1024, NULL, &pointer), DLOP_NO_DEVICE);
  ck_assert_ptr_null(pointer);
  assert_names_what_is_missing();
  dlop_array *array = NULL;
  int64_t shape[1] = {4};
  ck_assert_int_eq(dlop_array_empty(cuda0, DLOP_FLOAT32, 1, shape, &array), DLOP_NO_DEVICE);
  ck_assert_ptr_null(array);
  dlop_stream *stream = NULL;
  ck_assert_int_eq(dlop_stream_create(cuda0, &stream), DLOP_NO_DEVICE);
  ck_assert_ptr_null(stream);
  char description[64];
  ck_assert_int_eq(dlop_device_description(cuda0, description, sizeof description), DLOP_NO_DEVICE);
  dlop_memory_stats stats = {.struct_size = sizeof stats};
  ck_assert_int_eq(dlop_memory_stats_get(cuda0, &stats), DLOP_NO_DEVICE);
  /* A CPU array cannot be copied to a GPU that is not there, and the CPU still works after. */
  dlop_array *cpu_array;
  float data[4] = {1, 2, 3, 4};
  DLOP_CK_OK(dlop_array_from_host((dlop_device){DLOP_DEVICE_CPU, 0}, DLOP_FLOAT32, 1, shape, data,
                                  &cpu_array));
  ck_assert_int_eq(dlop_array_copy_to(cpu_array, cuda0, &array), DLOP_NO_DEVICE);
  dlop_array_release(cpu_array);
}
END_TEST

START_TEST(test_host_table_cuda_without_gpu) {
  if (cuda_usable()) return;
  const dlop_host_api *host = dlop_host_api_table();
  char error[512] = "";
  void *module = (void *)0x1, *handle = (void *)0x1;
  static const unsigned char image[16] = {0};
  ck_assert_int_eq(host->cuda_module_load(0, image, &module, error, sizeof error), DLOP_NO_DEVICE);
  ck_assert_ptr_null(module);
  ck_assert_msg(strlen(error) > 0, "no message in the error buffer");
  error[0] = '\0';
  ck_assert_int_eq(host->cublas_handle(0, NULL, &handle, error, sizeof error), DLOP_NO_DEVICE);
  ck_assert_ptr_null(handle);
  ck_assert_msg(strstr(error, "cuBLAS") != NULL, "error buffer: %s", error);
  int32_t value = -1;
  ck_assert_int_eq(host->cuda_device_attribute(0, 16, &value), DLOP_NO_DEVICE);
  ck_assert_int_eq(host->cuda_stream_synchronize(NULL), DLOP_NO_DEVICE);
  uint32_t grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
  ck_assert_int_eq(host->cuda_launch((void *)0x1, grid, block, 0, NULL, NULL, error, sizeof error),
                   DLOP_NO_DEVICE);
}
END_TEST

START_TEST(test_missing_driver_message) {
  /* Whichever piece is missing here (the driver library, or a GPU behind it), the message
   * says so in words a user can act on. */
  if (cuda_usable()) return;
  dlop_device_check(cuda0);
  const char *message = dlop_last_error();
  if (strstr(message, "libcuda.so.1")) {
    ck_assert_msg(strstr(message, "no NVIDIA driver") != NULL, "%s", message);
  } else {
    ck_assert_msg(strstr(message, "cuInit") || strstr(message, "no GPU") || strstr(message, "CUDA device"),
                  "%s", message);
  }
}
END_TEST

int main(void) {
  Suite *suite = suite_create("device");
  TCase *tc = tcase_create("device");
  tcase_add_test(tc, test_parse_and_format);
  tcase_add_test(tc, test_parse_rejects_bad_strings);
  tcase_add_test(tc, test_cpu_device);
  tcase_add_test(tc, test_cuda_without_gpu);
  tcase_add_test(tc, test_host_table_cuda_without_gpu);
  tcase_add_test(tc, test_missing_driver_message);
  suite_add_tcase(suite, tc);
  return dlop_test_run_suite(suite);
}
