/* test_registry.c — the process-wide registry: bundled plugins found next to libdlop (and the
 * DLOP_BUNDLED_PLUGINS override), lookups and counts, the op-to-plugin map, normalization of
 * op descriptors of other sizes, dtype queries, and the message for an unknown op. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_support.h"

#define FIXTURE(name) DLOP_TEST_FIXTURE_DIR "/" name ".so"
#define FIXTURE_DTYPES (DLOP_DTYPE_BIT(DLOP_FLOAT32) | DLOP_DTYPE_BIT(DLOP_FLOAT64))

static const dlop_plugin *load(const char *path) {
  const dlop_plugin *plugin = NULL;
  DLOP_CK_OK(dlop_load_plugin(path, &plugin));
  ck_assert_ptr_nonnull(plugin);
  return plugin;
}

/* ---- bundled plugins -------------------------------------------------------------------- */

START_TEST(bundled_directory_is_next_to_libdlop) {
  /* Nothing loaded: the unknown-op message says where bundled plugins are looked for, which
   * libdlop works out from its own location with dladdr. */
  unsetenv("DLOP_BUNDLED_PLUGINS");
  ck_assert_ptr_null(dlop_find_op("double"));
  ck_assert_msg(strstr(dlop_last_error(), DLOP_TEST_BUNDLED_PLUGIN_DIR) != NULL,
                "expected the bundled directory %s in: %s", DLOP_TEST_BUNDLED_PLUGIN_DIR,
                dlop_last_error());
}
END_TEST

START_TEST(bundled_plugins_are_found) {
  unsetenv("DLOP_BUNDLED_PLUGINS");
  setenv("DLOP_PLUGIN_PATH", "", 1);
  dlop_test_load_bundled_plugins();
  static const char *const seed_ops[] = {"double", "multiply_them", "exp"};
  for (int i = 0; i < 3; i++) {
    const dlop_op_desc *op = dlop_find_op(seed_ops[i]);
    ck_assert_msg(op != NULL, "bundled op %s: %s", seed_ops[i], dlop_last_error());
    const char *path = dlop_plugin_path(dlop_op_plugin(op));
    ck_assert_msg(strncmp(path, DLOP_TEST_BUNDLED_PLUGIN_DIR "/",
                          strlen(DLOP_TEST_BUNDLED_PLUGIN_DIR) + 1) == 0,
                  "%s comes from %s, expected the bundled directory %s", seed_ops[i], path,
                  DLOP_TEST_BUNDLED_PLUGIN_DIR);
  }
  /* Every *.so in the bundled directory became a plugin. */
  DIR *dir = opendir(DLOP_TEST_BUNDLED_PLUGIN_DIR);
  ck_assert_ptr_nonnull(dir);
  int files = 0;
  for (struct dirent *entry; (entry = readdir(dir)) != NULL;) {
    size_t length = strlen(entry->d_name);
    files += entry->d_name[0] != '.' && length > 3 && strcmp(entry->d_name + length - 3, ".so") == 0;
  }
  closedir(dir);
  ck_assert_int_eq(dlop_plugin_count(), files);
}
END_TEST

START_TEST(bundled_directory_override) {
  char dir[] = "/tmp/dlop_test_bundled_XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char path[128];
  /* Named so that the sort order differs from the order they were copied in. */
  snprintf(path, sizeof path, "%s/b_legacy.so", dir);
  dlop_test_copy_file(FIXTURE("older_op_struct"), path);
  snprintf(path, sizeof path, "%s/a_good.so", dir);
  dlop_test_copy_file(FIXTURE("good"), path);
  snprintf(path, sizeof path, "%s/notes.txt", dir);
  dlop_test_copy_file(FIXTURE("good"), path); /* not *.so: ignored */
  dlop_test_load_default("", dir);
  ck_assert_int_eq(dlop_load_error_count(), 0);
  ck_assert_int_eq(dlop_plugin_count(), 2);
  ck_assert_str_eq(dlop_plugin_name(dlop_plugin_at(0)), "fixture_good");
  ck_assert_str_eq(dlop_plugin_name(dlop_plugin_at(1)), "fixture_older_op_struct");
  ck_assert_str_eq(dlop_op_at(0)->name, "fixture_scale");
  ck_assert_str_eq(dlop_op_at(1)->name, "fixture_legacy_scale");
}
END_TEST

START_TEST(bundled_directory_empty_override_skips) {
  dlop_test_load_default("", "");
  ck_assert_int_eq(dlop_plugin_count(), 0);
  ck_assert_int_eq(dlop_load_error_count(), 0);
}
END_TEST

START_TEST(bundled_directory_override_missing_is_an_error) {
  dlop_test_load_default("", "/nonexistent/bundled");
  ck_assert_int_eq(dlop_load_error_count(), 1);
  ck_assert_msg(strncmp(dlop_load_error_at(0), "/nonexistent/bundled: ", 22) == 0, "%s",
                dlop_load_error_at(0));
  ck_assert_msg(strstr(dlop_load_error_at(0), "DLOP_BUNDLED_PLUGINS") != NULL, "%s",
                dlop_load_error_at(0));
}
END_TEST

START_TEST(bundled_directory_relative_override_is_refused) {
  /* From inside the fixture directory "." (or "fixtures/..") would load good.so and others. */
  ck_assert_int_eq(chdir(DLOP_TEST_FIXTURE_DIR), 0);
  static const char *const relative[] = {".", "./", "../fixtures"};
  for (int i = 0; i < 3; i++) {
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) { /* a fresh registry each time: loading runs once per process */
      setenv("DLOP_BUNDLED_PLUGINS", relative[i], 1);
      setenv("DLOP_PLUGIN_PATH", "", 1);
      FILE *null = freopen("/dev/null", "w", stderr); /* the warning; checked through the API */
      (void)null;
      int ok = dlop_load_default_plugins() == DLOP_OK && dlop_plugin_count() == 0 &&
               dlop_load_error_count() == 1 &&
               strncmp(dlop_load_error_at(0), "DLOP_BUNDLED_PLUGINS='", 22) == 0 &&
               strstr(dlop_load_error_at(0), relative[i]) != NULL &&
               strstr(dlop_load_error_at(0), "is relative and was ignored") != NULL;
      if (!ok)
        printf("DLOP_BUNDLED_PLUGINS=%s: %d plugins, %d errors, first: %s\n", relative[i],
               dlop_plugin_count(), dlop_load_error_count(),
               dlop_load_error_count() ? dlop_load_error_at(0) : "(none)");
      fflush(stdout);
      _exit(ok ? 0 : 1);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "DLOP_BUNDLED_PLUGINS=%s was not refused as relative", relative[i]);
  }
}
END_TEST

/* ---- lookups ----------------------------------------------------------------------------- */

START_TEST(find_op_counts_and_owner) {
  const dlop_plugin *good = load(FIXTURE("good"));
  const dlop_plugin *legacy = load(FIXTURE("older_op_struct"));
  ck_assert_int_eq(dlop_plugin_count(), 2);
  ck_assert_int_eq(dlop_op_count(), 2);
  ck_assert_ptr_eq(dlop_plugin_at(0), good);
  ck_assert_ptr_eq(dlop_plugin_at(1), legacy);
  ck_assert_ptr_null(dlop_plugin_at(2));
  ck_assert_ptr_null(dlop_plugin_at(-1));
  ck_assert_ptr_null(dlop_op_at(2));

  const dlop_op_desc *scale = dlop_find_op("fixture_scale");
  ck_assert_ptr_eq(scale, dlop_op_at(0));
  ck_assert_ptr_eq(scale, dlop_plugin_op(good, 0));
  ck_assert_ptr_null(dlop_plugin_op(good, 1));
  ck_assert_ptr_eq(dlop_op_plugin(scale), good);
  ck_assert_ptr_eq(dlop_op_plugin(dlop_find_op("fixture_legacy_scale")), legacy);
  ck_assert_ptr_null(dlop_op_plugin(NULL));

  ck_assert_str_eq(dlop_plugin_name(good), "fixture_good");
  ck_assert_str_eq(dlop_plugin_version(good), "1.0.0");
  ck_assert_str_eq(dlop_plugin_doc(good), "a loader test fixture");
  ck_assert_uint_eq(dlop_plugin_abi_version(good), DLOP_ABI_VERSION);
  ck_assert_str_eq(dlop_plugin_path(good), FIXTURE("good"));
  ck_assert_int_eq(dlop_plugin_op_count(good), 1);

  ck_assert_int_eq(scale->num_inputs, 1);
  ck_assert_int_eq(scale->num_outputs, 1);
  ck_assert_int_eq(scale->num_params, 2);
  ck_assert_str_eq(scale->params[0].name, "scale");
  ck_assert_int_eq(scale->params[0].kind, DLOP_PARAM_FLOAT);
  ck_assert_double_eq(scale->params[0].default_value.u.f, 2.0);
  ck_assert_str_eq(scale->params[1].name, "negate");
  ck_assert_int_eq(scale->params[1].kind, DLOP_PARAM_BOOL);
}
END_TEST

START_TEST(op_dtypes_per_device) {
  load(FIXTURE("good"));
  const dlop_op_desc *op = dlop_find_op("fixture_scale");
  ck_assert_uint_eq(dlop_op_dtypes(op, DLOP_DEVICE_CPU), FIXTURE_DTYPES);
  ck_assert_uint_eq(dlop_op_dtypes(op, DLOP_DEVICE_CUDA), 0);
  ck_assert_uint_eq(dlop_op_dtypes(op, (dlop_device_type)7), 0);
  ck_assert_uint_eq(dlop_op_dtypes(NULL, DLOP_DEVICE_CPU), 0);
  /* A descriptor too short to hold the masks reads as "no dtypes", not as garbage. */
  dlop_op_desc tiny;
  memset(&tiny, 0xff, sizeof tiny);
  tiny.struct_size = (uint32_t)offsetof(dlop_op_desc, cpu_dtypes);
  ck_assert_uint_eq(dlop_op_dtypes(&tiny, DLOP_DEVICE_CPU), 0);
  ck_assert_uint_eq(dlop_op_dtypes(&tiny, DLOP_DEVICE_CUDA), 0);
}
END_TEST

/* ---- normalization ----------------------------------------------------------------------- */

START_TEST(older_op_struct_is_normalized) {
  load(FIXTURE("older_op_struct"));
  const dlop_op_desc *op = dlop_find_op("fixture_legacy_scale");
  ck_assert_ptr_nonnull(op);
  /* The plugin's struct ends before op_data and 0xdeadbeef follows it in the plugin's memory;
   * the host's copy is full size with the uncovered field zeroed. */
  ck_assert_uint_eq(op->struct_size, offsetof(dlop_op_desc, op_data));
  ck_assert_ptr_null(op->op_data);
  ck_assert_ptr_nonnull(op->make_node);
  ck_assert_ptr_nonnull(op->infer_shape);
  ck_assert_ptr_nonnull(op->make_thunk);
  ck_assert_uint_eq(dlop_op_dtypes(op, DLOP_DEVICE_CPU), FIXTURE_DTYPES);
  ck_assert_uint_eq(op->flags, DLOP_OP_DETERMINISTIC | DLOP_OP_NEEDS_CONTIGUOUS_INPUTS);
}
END_TEST

START_TEST(newer_minor_is_accepted) {
  const dlop_plugin *plugin = load(FIXTURE("newer_minor"));
  ck_assert_uint_eq(dlop_plugin_abi_version(plugin), DLOP_MAKE_ABI_VERSION(1, 7));
  const dlop_op_desc *op = dlop_find_op("fixture_future_scale");
  ck_assert_ptr_nonnull(op);
  ck_assert_uint_eq(op->struct_size, sizeof(dlop_op_desc) + 2 * sizeof(uint64_t));
  ck_assert_str_eq(op->name, "fixture_future_scale");
  ck_assert_ptr_null(op->op_data);
}
END_TEST

/* The host's copy is what graphs use: its stages must work through it. */
START_TEST(normalized_op_runs) {
  load(FIXTURE("older_op_struct"));
  const dlop_op_desc *op = dlop_find_op("fixture_legacy_scale");
  dlop_param_value params[2] = {op->params[0].default_value, op->params[1].default_value};
  params[0].u.f = 3.0;
  dlop_type input = {DLOP_FLOAT32, 1, {5}}, output;
  memset(&output, 0, sizeof output);
  char error[256] = "";
  dlop_node_args node = {sizeof node, 0, op, params, 2, 1, &input, &output, 1, 0, error,
                         sizeof error};
  ck_assert_int_eq(op->make_node(&node), DLOP_OK);
  ck_assert_int_eq(op->infer_shape(&node), DLOP_OK);
  ck_assert_int_eq(output.dtype, DLOP_FLOAT32);
  ck_assert_int_eq(output.shape[0], 5);

  dlop_thunk thunk = {sizeof thunk, 0, NULL, NULL, NULL, 0};
  dlop_thunk_args thunk_args = {sizeof thunk_args, 0, op, params, 2, 1, &input, &output, 1,
                                {DLOP_DEVICE_CPU, 0}, &thunk, error, sizeof error};
  ck_assert_msg(op->make_thunk(&thunk_args) == DLOP_OK, "%s", error);
  float x[5] = {1, -2, 0.5f, 4, 0}, y[5] = {0};
  int64_t shape[1] = {5};
  dlop_tensor tx = {x, {DLOP_DEVICE_CPU, 0}, 1, dlop_dtype_to_dl(DLOP_FLOAT32), shape, NULL, 0};
  dlop_tensor ty = {y, {DLOP_DEVICE_CPU, 0}, 1, dlop_dtype_to_dl(DLOP_FLOAT32), shape, NULL, 0};
  dlop_run_args run = {sizeof run, 0, &tx, 1, 1, &ty, NULL, NULL, 0, error, sizeof error};
  ck_assert_int_eq(thunk.run(thunk.state, &run), DLOP_OK);
  for (int i = 0; i < 5; i++) ck_assert_float_eq(y[i], 3.0f * x[i]);
  if (thunk.destroy) thunk.destroy(thunk.state);
}
END_TEST

/* ---- unknown ops ------------------------------------------------------------------------- */

START_TEST(find_op_error_lists_loaded_ops) {
  load(FIXTURE("good"));
  load(FIXTURE("older_op_struct"));
  ck_assert_ptr_null(dlop_find_op("nosuchop"));
  ck_assert_str_eq(dlop_last_error(),
                   "no op named 'nosuchop' is loaded; loaded ops: fixture_scale, fixture_legacy_scale");
  ck_assert_ptr_null(dlop_find_op(NULL));
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "NULL"));
}
END_TEST

START_TEST(find_op_error_with_nothing_loaded_hints_at_plugin_path) {
  setenv("DLOP_BUNDLED_PLUGINS", "/opt/example/plugins", 1);
  ck_assert_ptr_null(dlop_find_op("double"));
  const char *message = dlop_last_error();
  ck_assert_msg(strstr(message, "no op named 'double' is loaded") != NULL, "%s", message);
  ck_assert_msg(strstr(message, "DLOP_PLUGIN_PATH") != NULL, "%s", message);
  ck_assert_msg(strstr(message, "/opt/example/plugins") != NULL, "%s", message);
}
END_TEST

START_TEST(find_op_error_mentions_load_errors) {
  dlop_test_load_default(FIXTURE("good") ":" FIXTURE("init_fails"), "");
  ck_assert_ptr_null(dlop_find_op("nosuchop"));
  ck_assert_msg(strstr(dlop_last_error(), "loaded ops: fixture_scale; 1 plugin file(s) failed") !=
                    NULL,
                "%s", dlop_last_error());
}
END_TEST

int main(void) {
  Suite *suite = suite_create("registry");
  TCase *bundled = dlop_test_tcase(suite, "bundled", 0, NULL, NULL);
  dlop_test_add_tests(bundled,
                      bundled_directory_is_next_to_libdlop,
                      bundled_plugins_are_found,
                      bundled_directory_override,
                      bundled_directory_empty_override_skips,
                      bundled_directory_override_missing_is_an_error,
                      bundled_directory_relative_override_is_refused,
                      NULL);

  TCase *lookups = dlop_test_tcase(suite, "lookups", 0, NULL, NULL);
  dlop_test_add_tests(lookups,
                      find_op_counts_and_owner,
                      op_dtypes_per_device,
                      find_op_error_lists_loaded_ops,
                      find_op_error_with_nothing_loaded_hints_at_plugin_path,
                      find_op_error_mentions_load_errors,
                      NULL);

  TCase *normalization = dlop_test_tcase(suite, "normalization", 0, NULL, NULL);
  dlop_test_add_tests(normalization,
                      older_op_struct_is_normalized,
                      newer_minor_is_accepted,
                      normalized_op_runs,
                      NULL);
  return dlop_test_run_suite(suite);
}
