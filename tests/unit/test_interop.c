/* test_interop.c — the interop API (runtime.h) without a GPU: stream markers on a CPU stream are
 * complete at once, arguments are checked with messages, CPU arrays and streams need no ordering,
 * and pointer lookups fail cleanly when there is no driver. tests/gpu/test_interop_cuda.c has
 * the CUDA side. */
#include <string.h>

#include "test_support.h"

static const dlop_device cpu = {DLOP_DEVICE_CPU, 0};

START_TEST(test_cpu_marker_is_complete_at_once) {
  dlop_stream *stream = NULL;
  DLOP_CK_OK(dlop_stream_create(cpu, &stream));
  for (int round = 0; round < 3; round++) { /* markers are reused after destroy */
    dlop_stream_marker *marker = NULL;
    DLOP_CK_OK(dlop_stream_marker_record(stream, &marker));
    ck_assert_ptr_nonnull(marker);
    int done = 0;
    DLOP_CK_OK(dlop_stream_marker_query(marker, &done));
    ck_assert_int_eq(done, 1);
    DLOP_CK_OK(dlop_stream_marker_wait(marker));
    ck_assert_int_eq(dlop_stream_marker_device(marker).type, DLOP_DEVICE_CPU);
    dlop_stream_marker_destroy(marker);
  }
  dlop_stream_destroy(stream);
}
END_TEST

START_TEST(test_marker_arguments_are_checked) {
  dlop_stream_marker *marker = (dlop_stream_marker *)&marker; /* must be reset to NULL */
  ck_assert_int_eq(dlop_stream_marker_record(NULL, &marker), DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_null(marker);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "stream is NULL"));
  ck_assert_int_eq(dlop_stream_marker_record(NULL, NULL), DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "marker is NULL"));
  int done = 7;
  ck_assert_int_eq(dlop_stream_marker_query(NULL, &done), DLOP_INVALID_ARGUMENT);
  ck_assert_int_eq(done, 0);
  ck_assert_int_eq(dlop_stream_marker_wait(NULL), DLOP_INVALID_ARGUMENT);
  ck_assert_int_eq(dlop_stream_marker_device(NULL).type, DLOP_DEVICE_CPU);
  dlop_stream_marker_destroy(NULL); /* allowed */
}
END_TEST

START_TEST(test_cpu_arrays_and_streams_need_no_ordering) {
  int64_t shape[1] = {4};
  dlop_array *array = NULL;
  DLOP_CK_OK(dlop_array_empty(cpu, DLOP_FLOAT32, 1, shape, &array));
  int dummy_stream;
  DLOP_CK_OK(dlop_array_wait_on_stream(array, &dummy_stream)); /* CPU: nothing to order */
  ck_assert_int_eq(dlop_array_wait_on_stream(array, NULL), DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "consumer stream is NULL"));
  ck_assert_int_eq(dlop_array_wait_on_stream(NULL, &dummy_stream), DLOP_INVALID_ARGUMENT);

  dlop_stream *cpu_stream = NULL;
  DLOP_CK_OK(dlop_stream_create(cpu, &cpu_stream));
  DLOP_CK_OK(dlop_array_record_write(array, cpu_stream)); /* CPU: nothing recorded */
  ck_assert_ptr_null(dlop_array_stream(array));
  ck_assert_int_eq(dlop_array_record_write(array, NULL), DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "stream is NULL"));
  ck_assert_int_eq(dlop_array_record_write(NULL, cpu_stream), DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "array is NULL"));
  dlop_stream_destroy(cpu_stream);
  dlop_array_release(array);

  dlop_stream *stream = NULL;
  DLOP_CK_OK(dlop_stream_create(cpu, &stream));
  DLOP_CK_OK(dlop_stream_wait_foreign(stream, &dummy_stream)); /* CPU work is synchronous */
  ck_assert_int_eq(dlop_stream_wait_foreign(NULL, &dummy_stream), DLOP_INVALID_ARGUMENT);
  dlop_stream_destroy(stream);
}
END_TEST

START_TEST(test_pointer_device_without_a_driver) {
  /* Only where CUDA is not usable: then the lookup must fail cleanly, naming what is missing. */
  dlop_device cuda0 = {DLOP_DEVICE_CUDA, 0};
  if (dlop_device_check(cuda0) == DLOP_OK) return;
  int32_t id = 5;
  int x = 0;
  int status = dlop_cuda_pointer_device(&x, &id);
  ck_assert_int_ne(status, DLOP_OK);
  ck_assert_int_eq(id, -1);
  ck_assert_msg(strlen(dlop_last_error()) > 0, "no message for a failed pointer lookup");
  ck_assert_int_eq(dlop_cuda_pointer_device(&x, NULL), DLOP_INVALID_ARGUMENT);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("interop");
  TCase *tc = tcase_create("cpu");
  tcase_add_test(tc, test_cpu_marker_is_complete_at_once);
  tcase_add_test(tc, test_marker_arguments_are_checked);
  tcase_add_test(tc, test_cpu_arrays_and_streams_need_no_ordering);
  tcase_add_test(tc, test_pointer_device_without_a_driver);
  suite_add_tcase(suite, tc);
  return dlop_test_run_suite(suite);
}
