/* test_loader.c — every way loading a plugin can fail (one fixture plugin per failure) gives
 * the right status and a message naming the file and the reason; bad plugins never stop good
 * ones; DLOP_PLUGIN_PATH rules (relative and empty entries); world-writable warnings (not for
 * sticky directories like /tmp). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_support.h"

#define FIXTURE(name) DLOP_TEST_FIXTURE_DIR "/" name ".so"

/* Load a fixture expecting `expected` and a message containing the path and every needle
 * (NULL-terminated). Also checks that nothing stayed registered. */
static void expect_failure(const char *path, int expected, ...) {
  const dlop_plugin *plugin = (const dlop_plugin *)&plugin; /* must be reset to NULL */
  int status = dlop_load_plugin(path, &plugin);
  const char *message = dlop_last_error();
  ck_assert_msg(status == expected, "%s: expected %s, got %s (%s)", path,
                dlop_status_name(expected), dlop_status_name(status), message);
  ck_assert_ptr_null(plugin);
  ck_assert_msg(strncmp(message, path, strlen(path)) == 0,
                "the message must start with the file path %s: %s", path, message);
  va_list needles;
  va_start(needles, expected);
  for (const char *needle = va_arg(needles, const char *); needle != NULL;
       needle = va_arg(needles, const char *))
    ck_assert_msg(strstr(message, needle) != NULL, "message lacks \"%s\": %s", needle, message);
  va_end(needles);
  ck_assert_int_eq(dlop_plugin_count(), 0);
  ck_assert_int_eq(dlop_op_count(), 0);
}

/* A fresh directory holding a copy of good.so; path of the copy into plugin_path. */
static void temp_dir_with_good(char *dir, size_t dir_size, char *plugin_path, size_t size) {
  snprintf(dir, dir_size, "/tmp/dlop_test_loader_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(plugin_path, size, "%s/good.so", dir);
  dlop_test_copy_file(FIXTURE("good"), plugin_path);
}

/* ---- the good fixture --------------------------------------------------------------------- */

START_TEST(good_plugin_loads) {
  const dlop_plugin *plugin = NULL;
  DLOP_CK_OK(dlop_load_plugin(FIXTURE("good"), &plugin));
  ck_assert_ptr_nonnull(plugin);
  ck_assert_str_eq(dlop_plugin_name(plugin), "fixture_good");
  ck_assert_str_eq(dlop_plugin_path(plugin), FIXTURE("good"));
  ck_assert_int_eq(dlop_plugin_op_count(plugin), 1);
  const dlop_op_desc *op = dlop_find_op("fixture_scale");
  ck_assert_ptr_nonnull(op);
  ck_assert_ptr_eq(op, dlop_plugin_op(plugin, 0));
  ck_assert_int_eq(op->num_params, 2);
}
END_TEST

START_TEST(same_file_twice_is_loaded_once) {
  char dir[64], copy[128], link_path[192];
  temp_dir_with_good(dir, sizeof dir, copy, sizeof copy);
  snprintf(link_path, sizeof link_path, "%s/link_to_good.so", dir);
  ck_assert_int_eq(symlink(copy, link_path), 0);
  const dlop_plugin *first = NULL, *second = NULL, *third = NULL;
  DLOP_CK_OK(dlop_load_plugin(copy, &first));
  DLOP_CK_OK(dlop_load_plugin(copy, &second));
  DLOP_CK_OK(dlop_load_plugin(link_path, &third)); /* same realpath through a symlink */
  ck_assert_ptr_eq(first, second);
  ck_assert_ptr_eq(first, third);
  ck_assert_int_eq(dlop_plugin_count(), 1);
  ck_assert_int_eq(dlop_op_count(), 1);
}
END_TEST

START_TEST(name_without_slash_is_relative_to_cwd_never_searched) {
  ck_assert_int_eq(chdir(DLOP_TEST_FIXTURE_DIR), 0);
  const dlop_plugin *plugin = NULL;
  DLOP_CK_OK(dlop_load_plugin("good.so", &plugin));
  ck_assert_str_eq(dlop_plugin_path(plugin), FIXTURE("good"));
  /* dlopen("libc.so.6") would find the C library in the system paths; dlop must not. */
  ck_assert_int_eq(chdir("/"), 0);
  int status = dlop_load_plugin("libc.so.6", NULL);
  ck_assert_int_eq(status, DLOP_NOT_FOUND);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "/libc.so.6: cannot open plugin file"));
  ck_assert_int_eq(dlop_plugin_count(), 1);
}
END_TEST

/* ---- every failure ----------------------------------------------------------------------- */

START_TEST(missing_file) {
  expect_failure(DLOP_TEST_FIXTURE_DIR "/does_not_exist.so", DLOP_NOT_FOUND, "cannot open",
                 "No such file", NULL);
}
END_TEST

START_TEST(directory_is_not_a_plugin) {
  expect_failure(DLOP_TEST_FIXTURE_DIR, DLOP_LOAD_ERROR, "not a regular file", "directory", NULL);
}
END_TEST

START_TEST(not_a_shared_object) {
  /* Refused before dlopen, from the file's first bytes. */
  expect_failure(FIXTURE("not_a_shared_object"), DLOP_LOAD_ERROR,
                 "not a valid shared object for this machine", "no \\177ELF magic", NULL);
}
END_TEST

START_TEST(no_entry_symbol) {
  expect_failure(FIXTURE("no_entry_symbol"), DLOP_LOAD_ERROR, "no entry symbol dlop_plugin_init",
                 "is this a dlop plugin?", NULL);
}
END_TEST

START_TEST(abi_major_mismatch) {
  char host[64];
  snprintf(host, sizeof host, "this host speaks %d.%d", DLOP_ABI_MAJOR, DLOP_ABI_MINOR);
  expect_failure(FIXTURE("abi_major_mismatch"), DLOP_ABI_MISMATCH, "built for dlop ABI 2.0", host,
                 NULL);
}
END_TEST

START_TEST(init_fails_with_its_own_message) {
  expect_failure(FIXTURE("init_fails"), DLOP_PLUGIN_ERROR, "dlop_plugin_init failed",
                 "DLOP_NOT_FOUND", "license file /nonexistent/fixture.lic is missing", NULL);
}
END_TEST

START_TEST(messages_stay_printable) {
  /* Control bytes and bytes that are not UTF-8 become '?'; valid UTF-8 is kept. */
  expect_failure(FIXTURE("init_fails_garbled"), DLOP_PLUGIN_ERROR,
                 "garbled ? ?? ? end, caf\xc3\xa9", NULL);
}
END_TEST

START_TEST(null_descriptor) {
  expect_failure(FIXTURE("null_descriptor"), DLOP_INVALID_PLUGIN, "dlop_plugin_init",
                 "no plugin descriptor (NULL)", NULL);
}
END_TEST

START_TEST(bad_op_name) {
  expect_failure(FIXTURE("bad_op_name"), DLOP_INVALID_PLUGIN, "'bad-name'", "not well-formed",
                 "[A-Za-z_][A-Za-z0-9_]*", NULL);
}
END_TEST

START_TEST(missing_make_thunk) {
  expect_failure(FIXTURE("missing_make_thunk"), DLOP_INVALID_PLUGIN, "op 'fixture_no_thunk'",
                 "no make_thunk function", NULL);
}
END_TEST

START_TEST(invalid_dtype_mask) {
  expect_failure(FIXTURE("invalid_dtype_mask"), DLOP_INVALID_PLUGIN, "op 'fixture_bad_mask'",
                 "cpu_dtypes 0x100300", "invalid bits 0x100000", NULL);
}
END_TEST

START_TEST(unknown_flag_of_own_minor_is_refused) {
  expect_failure(FIXTURE("unknown_flag"), DLOP_INVALID_PLUGIN, "op 'fixture_unknown_flag'",
                 "flags 0x201 has unknown bits 0x200", NULL);
}
END_TEST

static int occurrences(const char *text, const char *needle) {
  int count = 0;
  for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle)) count++;
  return count;
}

/* "Same major, any minor": a newer minor's unknown flag and dtype bits are masked, not fatal. */
START_TEST(newer_minor_unknown_bits_are_masked) {
  const dlop_plugin *plugin = NULL;
  dlop_test_capture_stderr();
  int status = dlop_load_plugin(FIXTURE("newer_minor_bits"), &plugin);
  const char *warnings = dlop_test_captured_stderr();
  ck_assert_msg(status == DLOP_OK, "%s", dlop_last_error());
  ck_assert_str_eq(dlop_plugin_name(plugin), "fixture_newer_minor_bits");
  /* The op offering only the unknown dtype is left out; the other one is offered for the
   * dtypes this host knows, with the unknown flag dropped. */
  ck_assert_int_eq(dlop_plugin_op_count(plugin), 1);
  ck_assert_ptr_null(dlop_find_op("fixture_future_only"));
  const dlop_op_desc *op = dlop_find_op("fixture_future_bits");
  ck_assert_ptr_nonnull(op);
  ck_assert_ptr_eq(op, dlop_plugin_op(plugin, 0));
  ck_assert_uint_eq(op->cpu_dtypes, DLOP_DTYPE_BIT(DLOP_FLOAT32) | DLOP_DTYPE_BIT(DLOP_FLOAT64));
  ck_assert_uint_eq(op->cuda_dtypes, 0);
  ck_assert_uint_eq(dlop_op_dtypes(op, DLOP_DEVICE_CUDA), 0);
  ck_assert_uint_eq(op->flags, DLOP_OP_DETERMINISTIC | DLOP_OP_NEEDS_CONTIGUOUS_INPUTS);
  /* One warning per op, naming the plugin, the op and the bits. */
  ck_assert_int_eq(occurrences(warnings, "dlop: warning: "), 2);
  ck_assert_int_eq(occurrences(warnings, "op 'fixture_future_bits'"), 1);
  ck_assert_msg(strstr(warnings, "plugin 'fixture_newer_minor_bits' (ABI 1.7") &&
                    strstr(warnings, "op 'fixture_future_bits': ignoring bits this host does not "
                                     "know: flags 0x200, cpu_dtypes 0x1000, cuda_dtypes 0x1000"),
                "%s", warnings);
  ck_assert_msg(strstr(warnings, "op 'fixture_future_only'") &&
                    strstr(warnings, "so the op is not registered"),
                "%s", warnings);
}
END_TEST

START_TEST(view_map_without_make_view_is_refused) {
  expect_failure(FIXTURE("view_map"), DLOP_INVALID_PLUGIN, "op 'fixture_view' declares a view_map",
                 "no make_view function (NULL)", NULL);
}
END_TEST

START_TEST(view_map_in_old_struct_is_refused) {
  char size[64];
  snprintf(size, sizeof size, "struct_size %zu, which ends before make_view",
           offsetof(dlop_op_desc, make_view));
  expect_failure(FIXTURE("view_map_old_struct"), DLOP_INVALID_PLUGIN,
                 "op 'fixture_view_old_struct' declares a view_map", size, "ABI 1.1", NULL);
}
END_TEST

START_TEST(view_map_of_variadic_op_is_refused) {
  expect_failure(FIXTURE("view_map_variadic"), DLOP_INVALID_PLUGIN,
                 "op 'fixture_view_variadic' declares a view_map but takes any number of inputs",
                 NULL);
}
END_TEST

START_TEST(view_map_with_inplace_map_is_refused) {
  expect_failure(FIXTURE("view_map_with_inplace"), DLOP_INVALID_PLUGIN,
                 "op 'fixture_view_inplace' declares both a view_map and an inplace_map", NULL);
}
END_TEST

START_TEST(view_map_entry_must_name_an_input) {
  expect_failure(FIXTURE("view_map_bad_index"), DLOP_INVALID_PLUGIN,
                 "op 'fixture_view_bad_index': view_map[0] is -1",
                 "expected an input index in [0, 1)", NULL);
}
END_TEST

START_TEST(make_view_without_view_map_is_refused) {
  expect_failure(FIXTURE("make_view_without_view_map"), DLOP_INVALID_PLUGIN,
                 "op 'fixture_stray_make_view' sets make_view but no view_map", NULL);
}
END_TEST

/* A view op may leave make_thunk NULL; the host's copy keeps view_map and make_view. */
START_TEST(view_op_is_accepted) {
  const dlop_plugin *plugin = NULL;
  int status = dlop_load_plugin(FIXTURE("view_op"), &plugin);
  ck_assert_msg(status == DLOP_OK, "%s", dlop_last_error());
  const dlop_op_desc *op = dlop_find_op("fixture_view_op");
  ck_assert_ptr_nonnull(op);
  ck_assert_ptr_nonnull(op->view_map);
  ck_assert_int_eq(op->view_map[0], 0);
  ck_assert_ptr_nonnull(op->make_view);
  ck_assert_ptr_null(op->make_thunk);
  ck_assert_ptr_null(op->inplace_map);
}
END_TEST

/* An ABI 1.0 plugin (op descriptor ending at op_data) loads under this host; what lies past its
 * struct_size (poisoned) reads as NULL: no make_view, no scalar_body. */
START_TEST(abi_1_0_op_struct_loads) {
  const dlop_plugin *plugin = NULL;
  int status = dlop_load_plugin(FIXTURE("abi_1_0_op"), &plugin);
  ck_assert_msg(status == DLOP_OK, "%s", dlop_last_error());
  ck_assert_uint_eq(dlop_plugin_abi_version(plugin), DLOP_MAKE_ABI_VERSION(1, 0));
  const dlop_op_desc *op = dlop_find_op("fixture_abi_1_0_scale");
  ck_assert_ptr_nonnull(op);
  ck_assert_uint_eq(op->struct_size, offsetof(dlop_op_desc, make_view));
  ck_assert_ptr_null(op->make_view);
  ck_assert_ptr_null(op->scalar_body);
  ck_assert_ptr_nonnull(op->make_thunk);
  ck_assert_ptr_null(op->view_map);
}
END_TEST

/* An ABI 1.1 plugin (op descriptor ending at make_view) loads under this 1.2 host; the poison
 * past its struct_size reads as NULL: no scalar_body, so fusion never calls into it. */
START_TEST(abi_1_1_op_struct_loads) {
  const dlop_plugin *plugin = NULL;
  int status = dlop_load_plugin(FIXTURE("abi_1_1_op"), &plugin);
  ck_assert_msg(status == DLOP_OK, "%s", dlop_last_error());
  ck_assert_uint_eq(dlop_plugin_abi_version(plugin), DLOP_MAKE_ABI_VERSION(1, 1));
  const dlop_op_desc *op = dlop_find_op("fixture_abi_1_1_scale");
  ck_assert_ptr_nonnull(op);
  ck_assert_uint_eq(op->struct_size, offsetof(dlop_op_desc, scalar_body));
  ck_assert_ptr_null(op->scalar_body);
  ck_assert_ptr_null(op->reduce_body);
  ck_assert_ptr_null(op->make_view);
  ck_assert_ptr_nonnull(op->make_thunk);
}
END_TEST

START_TEST(scalar_body_on_a_view_is_refused) {
  expect_failure(FIXTURE("scalar_body_on_view"), DLOP_INVALID_PLUGIN,
                 "op 'fixture_view_with_body' declares both a view_map and a scalar_body",
                 "nothing to fuse", NULL);
}
END_TEST

START_TEST(reduce_body_on_a_view_is_refused) {
  expect_failure(FIXTURE("reduce_body_on_view"), DLOP_INVALID_PLUGIN,
                 "op 'fixture_view_with_reduce_body' declares both a view_map and a reduce_body",
                 "nothing to fuse", NULL);
}
END_TEST

START_TEST(reduce_body_with_scalar_body_is_refused) {
  expect_failure(FIXTURE("reduce_body_with_scalar_body"), DLOP_INVALID_PLUGIN,
                 "op 'fixture_both_bodies' declares both a scalar_body and a reduce_body",
                 "elementwise or a reduction", NULL);
}
END_TEST

START_TEST(reduce_body_of_two_inputs_is_refused) {
  expect_failure(FIXTURE("reduce_body_two_inputs"), DLOP_INVALID_PLUGIN,
                 "op 'fixture_reduce_of_two' declares a reduce_body with 2 inputs and 1 outputs",
                 "num_inputs 1, num_outputs 1", NULL);
}
END_TEST

START_TEST(inplace_map_is_accepted) {
  const dlop_plugin *plugin = NULL;
  int status = dlop_load_plugin(FIXTURE("inplace_map"), &plugin);
  ck_assert_msg(status == DLOP_OK, "%s", dlop_last_error());
  const dlop_op_desc *op = dlop_find_op("fixture_inplace");
  ck_assert_ptr_nonnull(op);
  ck_assert_ptr_nonnull(op->inplace_map);
  ck_assert_int_eq(op->inplace_map[0], 0);
  ck_assert_ptr_null(op->view_map);
}
END_TEST

START_TEST(bad_struct_size) {
  expect_failure(FIXTURE("bad_struct_size"), DLOP_INVALID_PLUGIN, "op #0 has struct_size 16",
                 "through make_thunk", NULL);
}
END_TEST

START_TEST(duplicate_op_within_plugin) {
  expect_failure(FIXTURE("duplicate_op_within_plugin"), DLOP_DUPLICATE, "op 'fixture_twice'",
                 "declared twice", NULL);
}
END_TEST

START_TEST(bad_param_default_kind) {
  expect_failure(FIXTURE("bad_param"), DLOP_INVALID_PLUGIN, "parameter 'scale'",
                 "default value has kind int", "declared float", NULL);
}
END_TEST

START_TEST(duplicate_op_across_plugins_names_both_files) {
  const dlop_plugin *good = NULL, *duplicate = (const dlop_plugin *)&good;
  DLOP_CK_OK(dlop_load_plugin(FIXTURE("good"), &good));
  int status = dlop_load_plugin(FIXTURE("duplicate_op"), &duplicate);
  const char *message = dlop_last_error();
  ck_assert_int_eq(status, DLOP_DUPLICATE);
  ck_assert_ptr_null(duplicate);
  ck_assert_msg(strncmp(message, FIXTURE("duplicate_op"), strlen(FIXTURE("duplicate_op"))) == 0,
                "starts with the second file: %s", message);
  ck_assert_msg(strstr(message, "'fixture_scale'") != NULL, "names the op: %s", message);
  ck_assert_msg(strstr(message, FIXTURE("good")) != NULL, "names the first file: %s", message);
  /* The second plugin is not registered; the first one still serves the op. */
  ck_assert_int_eq(dlop_plugin_count(), 1);
  ck_assert_ptr_eq(dlop_op_plugin(dlop_find_op("fixture_scale")), good);
}
END_TEST

START_TEST(duplicate_plugin_name_names_both_files) {
  const dlop_plugin *good = NULL, *duplicate = (const dlop_plugin *)&good;
  DLOP_CK_OK(dlop_load_plugin(FIXTURE("good"), &good));
  int status = dlop_load_plugin(FIXTURE("duplicate_plugin_name"), &duplicate);
  const char *message = dlop_last_error();
  ck_assert_int_eq(status, DLOP_DUPLICATE);
  ck_assert_ptr_null(duplicate);
  ck_assert_msg(strncmp(message, FIXTURE("duplicate_plugin_name"),
                        strlen(FIXTURE("duplicate_plugin_name"))) == 0,
                "starts with the second file: %s", message);
  ck_assert_msg(strstr(message, "plugin name 'fixture_good' is already taken by " FIXTURE("good")),
                "names the plugin and the first file: %s", message);
  /* Nothing of the second file is registered, not even its own op. */
  ck_assert_int_eq(dlop_plugin_count(), 1);
  ck_assert_int_eq(dlop_op_count(), 1);
  ck_assert_ptr_null(dlop_find_op("fixture_other_scale"));
}
END_TEST

/* ---- DLOP_PLUGIN_PATH --------------------------------------------------------------------- */

/* The fixture directory holds every broken fixture; good.so first so it owns fixture_scale. */
START_TEST(bad_plugins_never_stop_good_ones) {
  dlop_test_capture_stderr();
  dlop_test_load_default(FIXTURE("good") ":" DLOP_TEST_FIXTURE_DIR, "");
  const char *warnings = dlop_test_captured_stderr();
  /* good, newer_minor, newer_minor_bits, older_op_struct, inplace_map, view_op, abi_1_0_op,
   * abi_1_1_op */
  ck_assert_int_eq(dlop_plugin_count(), 8);
  ck_assert_ptr_nonnull(dlop_find_op("fixture_scale"));
  ck_assert_ptr_nonnull(dlop_find_op("fixture_legacy_scale"));
  ck_assert_ptr_nonnull(dlop_find_op("fixture_future_scale"));
  ck_assert_ptr_nonnull(dlop_find_op("fixture_future_bits"));
  ck_assert_str_eq(dlop_plugin_name(dlop_op_plugin(dlop_find_op("fixture_scale"))), "fixture_good");

  static const char *const bad[] = {
      "not_a_shared_object", "no_entry_symbol", "abi_major_mismatch", "init_fails", "init_fails_garbled",
      "null_descriptor", "bad_op_name", "missing_make_thunk", "invalid_dtype_mask",
      "bad_struct_size", "duplicate_op_within_plugin", "bad_param", "duplicate_op",
      "unknown_flag", "duplicate_plugin_name", "view_map", "view_map_old_struct",
      "view_map_variadic", "view_map_with_inplace", "view_map_bad_index",
      "make_view_without_view_map", "scalar_body_on_view", "reduce_body_on_view",
      "reduce_body_with_scalar_body", "reduce_body_two_inputs"};
  int count = (int)(sizeof bad / sizeof bad[0]);
  ck_assert_int_eq(dlop_load_error_count(), count);
  for (int i = 0; i < count; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.so:", DLOP_TEST_FIXTURE_DIR, bad[i]);
    int found = 0;
    for (int e = 0; e < dlop_load_error_count(); e++)
      found += strncmp(dlop_load_error_at(e), path, strlen(path)) == 0;
    ck_assert_msg(found == 1, "expected one load error starting with %s", path);
    ck_assert_msg(strstr(warnings, path) != NULL, "the error for %s is also printed", path);
  }
  ck_assert_ptr_null(dlop_load_error_at(count));
}
END_TEST

START_TEST(load_default_runs_once) {
  dlop_test_load_default(FIXTURE("good"), "");
  ck_assert_int_eq(dlop_plugin_count(), 1);
  dlop_test_load_default(FIXTURE("older_op_struct"), "");
  ck_assert_int_eq(dlop_plugin_count(), 1);
}
END_TEST

START_TEST(relative_and_empty_entries_are_ignored) {
  /* From inside the fixture directory, "", ".", "good.so" and "./good.so" would all reach
   * plugins if they were honoured; only the absolute entry may load anything. */
  ck_assert_int_eq(chdir(DLOP_TEST_FIXTURE_DIR), 0);
  dlop_test_capture_stderr();
  dlop_test_load_default("::.:good.so::./older_op_struct.so:" FIXTURE("newer_minor") ":", "");
  const char *warnings = dlop_test_captured_stderr();
  ck_assert_int_eq(dlop_plugin_count(), 1);
  ck_assert_str_eq(dlop_plugin_name(dlop_plugin_at(0)), "fixture_newer_minor");
  ck_assert_int_eq(dlop_load_error_count(), 0);
  ck_assert_msg(strstr(warnings, "entry 'good.so' is relative") != NULL, "%s", warnings);
  ck_assert_msg(strstr(warnings, "entry '.' is relative") != NULL, "%s", warnings);
  ck_assert_msg(strstr(warnings, "use an absolute path") != NULL, "%s", warnings);
}
END_TEST

START_TEST(empty_plugin_path_never_means_cwd) {
  ck_assert_int_eq(chdir(DLOP_TEST_FIXTURE_DIR), 0);
  dlop_test_load_default("", "");
  ck_assert_int_eq(dlop_plugin_count(), 0);
  ck_assert_int_eq(dlop_load_error_count(), 0);
}
END_TEST

START_TEST(missing_path_entry_is_a_load_error) {
  dlop_test_capture_stderr();
  dlop_test_load_default("/nonexistent/dlop_plugins:" FIXTURE("good"), "");
  dlop_test_captured_stderr();
  ck_assert_int_eq(dlop_plugin_count(), 1);
  ck_assert_int_eq(dlop_load_error_count(), 1);
  const char *line = dlop_load_error_at(0);
  ck_assert_msg(strncmp(line, "/nonexistent/dlop_plugins: listed in DLOP_PLUGIN_PATH", 52) == 0,
                "%s", line);
}
END_TEST

/* ---- permissions ------------------------------------------------------------------------- */

/* Loading a copy of good.so whose file and directory have the given modes warns about the
 * part named in `warned` ("plugin file" or "plugin directory", with its mode) and only that
 * one, or not at all (NULL): a warning, never a refusal. */
static const struct mode_case {
  mode_t file_mode, dir_mode;
  const char *warned;
} mode_cases[] = {
    {0666, 0755, "plugin file"},
    {0644, 0777, "plugin directory"},
    /* /tmp-like (1777): others may create files there but not replace the owner's plugin */
    {0644, 01777, NULL},
    {0666, 01777, "plugin file"},
    {0664, 0775, NULL}, /* group-writable is fine */
};

START_TEST(world_writable_warnings) {
  const struct mode_case *c = &mode_cases[_i];
  char dir[64], copy[128], mode[8];
  temp_dir_with_good(dir, sizeof dir, copy, sizeof copy);
  ck_assert_int_eq(chmod(copy, c->file_mode), 0);
  ck_assert_int_eq(chmod(dir, c->dir_mode), 0);
  dlop_test_capture_stderr();
  int status = dlop_load_plugin(copy, NULL);
  const char *warnings = dlop_test_captured_stderr();
  DLOP_CK_OK(status);
  int file = c->warned && strcmp(c->warned, "plugin file") == 0;
  snprintf(mode, sizeof mode, "%04o", (unsigned)(file ? c->file_mode : c->dir_mode));
  if (c->warned == NULL)
    ck_assert_msg(strstr(warnings, "world-writable") == NULL,
                  "file %04o in a directory %04o: unexpected warning: %s", (unsigned)c->file_mode,
                  (unsigned)c->dir_mode, warnings);
  else
    ck_assert_msg(strstr(warnings, "world-writable") && strstr(warnings, c->warned) &&
                      (!file || strstr(warnings, copy)) && strstr(warnings, mode) &&
                      strstr(warnings, file ? "plugin directory" : "plugin file") == NULL,
                  "file %04o in a directory %04o: expected one warning about the %s (%s): %s",
                  (unsigned)c->file_mode, (unsigned)c->dir_mode, c->warned, mode, warnings);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("loader");
  TCase *good = dlop_test_tcase(suite, "good", 0, NULL, NULL);
  dlop_test_add_tests(good,
                      good_plugin_loads,
                      same_file_twice_is_loaded_once,
                      name_without_slash_is_relative_to_cwd_never_searched,
                      NULL);

  TCase *errors = dlop_test_tcase(suite, "errors", 0, NULL, NULL);
  dlop_test_add_tests(errors,
                      missing_file,
                      directory_is_not_a_plugin,
                      not_a_shared_object,
                      no_entry_symbol,
                      abi_major_mismatch,
                      init_fails_with_its_own_message, messages_stay_printable,
                      null_descriptor,
                      bad_op_name,
                      missing_make_thunk,
                      invalid_dtype_mask,
                      unknown_flag_of_own_minor_is_refused,
                      newer_minor_unknown_bits_are_masked,
                      view_map_without_make_view_is_refused,
                      view_map_in_old_struct_is_refused,
                      view_map_of_variadic_op_is_refused,
                      view_map_with_inplace_map_is_refused,
                      view_map_entry_must_name_an_input,
                      make_view_without_view_map_is_refused,
                      view_op_is_accepted,
                      abi_1_0_op_struct_loads,
                      abi_1_1_op_struct_loads,
                      scalar_body_on_a_view_is_refused,
                      reduce_body_on_a_view_is_refused,
                      reduce_body_with_scalar_body_is_refused,
                      reduce_body_of_two_inputs_is_refused,
                      inplace_map_is_accepted,
                      bad_struct_size,
                      duplicate_op_within_plugin,
                      bad_param_default_kind,
                      duplicate_op_across_plugins_names_both_files,
                      duplicate_plugin_name_names_both_files,
                      NULL);

  TCase *path = dlop_test_tcase(suite, "plugin_path", 0, NULL, NULL);
  dlop_test_add_tests(path,
                      bad_plugins_never_stop_good_ones,
                      load_default_runs_once,
                      relative_and_empty_entries_are_ignored,
                      empty_plugin_path_never_means_cwd,
                      missing_path_entry_is_a_load_error,
                      NULL);

  TCase *permissions = dlop_test_tcase(suite, "permissions", 0, NULL, NULL);
  tcase_add_loop_test(permissions, world_writable_warnings, 0,
                      (int)(sizeof mode_cases / sizeof mode_cases[0]));
  return dlop_test_run_suite(suite);
}
