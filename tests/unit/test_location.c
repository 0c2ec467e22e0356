/* test_location.c — dlop_location_path: the libdlop file this process loaded, the bundled
 * plugin directory in effect (beside it, or DLOP_BUNDLED_PLUGINS, or none) and the dlop-probe
 * program beside it, which `dlop info` and dlop.info() report; and its errors for bad
 * arguments. Each test runs in its own process (fork mode), so environment changes stay there. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

/* The real path of the bundled plugin directory of this build (the test links libdlop). */
static void build_lib_dir(char *buffer, size_t size) {
  char real[PATH_MAX];
  ck_assert_ptr_nonnull(realpath(DLOP_TEST_BUNDLED_PLUGIN_DIR, real));
  /* <build>/lib/dlop/plugins -> <build>/lib */
  for (int i = 0; i < 2; i++) *strrchr(real, '/') = '\0';
  snprintf(buffer, size, "%s", real);
}

START_TEST(library_is_this_builds_libdlop) {
  char lib[PATH_MAX], path[PATH_MAX];
  build_lib_dir(lib, sizeof lib);
  DLOP_CK_OK(dlop_location_path(DLOP_LOCATION_LIBRARY, path, sizeof path));
  const char *slash = strrchr(path, '/');
  ck_assert_ptr_nonnull(slash);
  ck_assert_msg(strncmp(path, lib, strlen(lib)) == 0 && slash == path + strlen(lib),
                "libdlop is %s, expected a file in %s", path, lib);
  ck_assert_msg(strncmp(slash + 1, "libdlop.so", 10) == 0, "libdlop is %s", path);
}
END_TEST

START_TEST(bundled_plugins_lie_beside_libdlop) {
  unsetenv("DLOP_BUNDLED_PLUGINS");
  char lib[PATH_MAX], expected[PATH_MAX + 16], path[PATH_MAX];
  build_lib_dir(lib, sizeof lib);
  snprintf(expected, sizeof expected, "%s/dlop/plugins", lib);
  DLOP_CK_OK(dlop_location_path(DLOP_LOCATION_BUNDLED_PLUGINS, path, sizeof path));
  ck_assert_str_eq(path, expected);
}
END_TEST

START_TEST(bundled_plugins_follow_the_environment) {
  char path[PATH_MAX];
  setenv("DLOP_BUNDLED_PLUGINS", "/nowhere/plugins", 1);
  DLOP_CK_OK(dlop_location_path(DLOP_LOCATION_BUNDLED_PLUGINS, path, sizeof path));
  ck_assert_str_eq(path, "/nowhere/plugins"); /* where they are looked for, there or not */
  setenv("DLOP_BUNDLED_PLUGINS", "", 1);
  ck_assert_int_eq(dlop_location_path(DLOP_LOCATION_BUNDLED_PLUGINS, path, sizeof path),
                   DLOP_NOT_FOUND);
  ck_assert_str_eq(path, "");
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "DLOP_BUNDLED_PLUGINS is set empty"));
  setenv("DLOP_BUNDLED_PLUGINS", "relative/plugins", 1);
  ck_assert_int_eq(dlop_location_path(DLOP_LOCATION_BUNDLED_PLUGINS, path, sizeof path),
                   DLOP_NOT_FOUND);
  ck_assert_ptr_nonnull(
      strstr(dlop_last_error(), "DLOP_BUNDLED_PLUGINS='relative/plugins' is relative and is ignored"));
}
END_TEST

START_TEST(probe_program_lies_beside_libdlop) {
  char lib[PATH_MAX], expected[PATH_MAX + 16], path[PATH_MAX];
  build_lib_dir(lib, sizeof lib);
  snprintf(expected, sizeof expected, "%s/dlop/dlop-probe", lib);
  DLOP_CK_OK(dlop_location_path(DLOP_LOCATION_PROBE_PROGRAM, path, sizeof path));
  ck_assert_str_eq(path, expected);
}
END_TEST

START_TEST(bad_arguments_are_refused_by_name) {
  char path[PATH_MAX];
  ck_assert_int_eq(dlop_location_path(3, path, sizeof path), DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "location 3 is not one of DLOP_LOCATION_LIBRARY (0)"));
  ck_assert_int_eq(dlop_location_path(-1, path, sizeof path), DLOP_INVALID_ARGUMENT);
  ck_assert_int_eq(dlop_location_path(DLOP_LOCATION_LIBRARY, NULL, 64), DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "dlop_location_path(DLOP_LOCATION_LIBRARY): the buffer is NULL"));
  ck_assert_int_eq(dlop_location_path(DLOP_LOCATION_LIBRARY, path, 0), DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "the buffer is of size 0"));
  /* Too small: an error saying how much is needed, and an empty string, never a cut path. */
  char small[8];
  ck_assert_int_eq(dlop_location_path(DLOP_LOCATION_PROBE_PROGRAM, small, sizeof small),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_str_eq(small, "");
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "the buffer holds 8 bytes, the path needs "));
}
END_TEST

int main(void) {
  Suite *suite = suite_create("location");
  TCase *paths = dlop_test_tcase(suite, "paths", 0, NULL, NULL);
  dlop_test_add_tests(paths, library_is_this_builds_libdlop, bundled_plugins_lie_beside_libdlop,
                      bundled_plugins_follow_the_environment, probe_program_lies_beside_libdlop,
                      bad_arguments_are_refused_by_name, NULL);
  return dlop_test_run_suite(suite);
}
