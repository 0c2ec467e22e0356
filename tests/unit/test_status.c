/* test_status.c — status codes: every code from the X-macro list has a distinct name and
 * message, names follow "DLOP_<NAME>", unknown codes are reported as such, and failing calls
 * leave a thread-local message behind. */
#include <pthread.h>
#include <string.h>

#include "test_support.h"

static const int all_statuses[] = {
#define DLOP__TEST_STATUS(name, value, message) value,
    DLOP_STATUS_MAP(DLOP__TEST_STATUS)
#undef DLOP__TEST_STATUS
};
static const int status_count = (int)(sizeof all_statuses / sizeof all_statuses[0]);

START_TEST(test_names_and_messages_are_distinct) {
  ck_assert_int_eq(status_count, 17);
  for (int i = 0; i < status_count; i++) {
    const char *name = dlop_status_name(all_statuses[i]);
    const char *message = dlop_strerror(all_statuses[i]);
    ck_assert_msg(strncmp(name, "DLOP_", 5) == 0, "name %s", name);
    ck_assert_str_ne(name, "DLOP_UNKNOWN_STATUS");
    ck_assert_str_ne(message, "unknown status code");
    ck_assert(strlen(message) > 0);
    for (int j = 0; j < i; j++) {
      ck_assert_msg(all_statuses[i] != all_statuses[j], "value %d twice", all_statuses[i]);
      ck_assert_str_ne(name, dlop_status_name(all_statuses[j]));
      ck_assert_str_ne(message, dlop_strerror(all_statuses[j]));
    }
  }
  ck_assert_str_eq(dlop_status_name(DLOP_OK), "DLOP_OK");
  ck_assert_str_eq(dlop_status_name(DLOP_TYPE_ERROR), "DLOP_TYPE_ERROR");
  ck_assert_str_eq(dlop_status_name(DLOP_NO_DEVICE), "DLOP_NO_DEVICE");
}
END_TEST

START_TEST(test_unknown_codes) {
  const int unknown[] = {1, 42, -17, -1000, 2147483647, -2147483647 - 1};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    ck_assert_str_eq(dlop_status_name(unknown[i]), "DLOP_UNKNOWN_STATUS");
    ck_assert_str_eq(dlop_strerror(unknown[i]), "unknown status code");
  }
}
END_TEST

START_TEST(test_last_error_is_set_by_failures) {
  dlop_device device;
  ck_assert_int_eq(dlop_device_parse("tpu:0", &device), DLOP_INVALID_ARGUMENT);
  ck_assert_msg(strstr(dlop_last_error(), "tpu:0") != NULL, "message: %s", dlop_last_error());
}
END_TEST

static void *fail_in_thread(void *unused) {
  (void)unused;
  dlop_device device;
  dlop_device_parse("other-thread", &device);
  return NULL;
}

START_TEST(test_last_error_is_per_thread) {
  dlop_device device;
  ck_assert_int_eq(dlop_device_parse("mine", &device), DLOP_INVALID_ARGUMENT);
  pthread_t thread;
  ck_assert_int_eq(pthread_create(&thread, NULL, fail_in_thread, NULL), 0);
  pthread_join(thread, NULL);
  ck_assert_msg(strstr(dlop_last_error(), "mine") != NULL, "message: %s", dlop_last_error());
  ck_assert(strstr(dlop_last_error(), "other-thread") == NULL);
}
END_TEST

START_TEST(test_versions) {
  ck_assert_uint_eq(dlop_version(), (DLOP_VERSION_MAJOR << 16) | (DLOP_VERSION_MINOR << 8) | DLOP_VERSION_PATCH);
  ck_assert_str_eq(dlop_version_string(), DLOP_VERSION_STRING);
  ck_assert_uint_eq(DLOP_ABI_VERSION_MAJOR_OF(dlop_abi_version()), DLOP_ABI_MAJOR);
  ck_assert_uint_eq(DLOP_ABI_VERSION_MINOR_OF(dlop_abi_version()), DLOP_ABI_MINOR);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("status");
  TCase *tc = tcase_create("status");
  tcase_add_test(tc, test_names_and_messages_are_distinct);
  tcase_add_test(tc, test_unknown_codes);
  tcase_add_test(tc, test_last_error_is_set_by_failures);
  tcase_add_test(tc, test_last_error_is_per_thread);
  tcase_add_test(tc, test_versions);
  suite_add_tcase(suite, tc);
  return dlop_test_run_suite(suite);
}
