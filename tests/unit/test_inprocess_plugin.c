/* test_inprocess_plugin.c — plugins defined inside the process (dlop_register_plugin): from an
 * init function and from a descriptor, found by dlop_find_op, named "in-process: ORIGIN" where
 * a path is shown, run through a graph and a compiled function, and every bad case refused with
 * the message a file would get (sizes, ABI major, names, op declarations, taken plugin and op
 * names, a failing init) and nothing registered. Each test runs in its own process. */
#include <stdio.h>
#include <string.h>

#include "graph_runner.h"
#include "test_support.h"

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};

/* ---- a small op: y = 3 * x, float32, contiguous ---------------------------------------- */

static int triple_make_node(const dlop_node_args *args) {
  if (args->num_inputs != 1 || args->inputs[0].dtype != DLOP_FLOAT32) {
    snprintf(args->error, args->error_size, "triple: expected one float32 input");
    return DLOP_TYPE_ERROR;
  }
  args->outputs[0] = args->inputs[0];
  return DLOP_OK;
}

static int triple_infer_shape(const dlop_node_args *args) {
  args->outputs[0] = args->inputs[0];
  return DLOP_OK;
}

static int triple_run(void *state, const dlop_run_args *args) {
  (void)state;
  const dlop_tensor *x = &args->inputs[0], *y = &args->outputs[0];
  int64_t n = 1;
  for (int32_t d = 0; d < x->ndim; d++) n *= x->shape[d];
  const float *in = (const float *)((const char *)x->data + x->byte_offset);
  float *out = (float *)((char *)y->data + y->byte_offset);
  for (int64_t i = 0; i < n; i++) out[i] = 3.0f * in[i];
  return DLOP_OK;
}

static int triple_make_thunk(const dlop_thunk_args *args) {
  if (args->device.type != DLOP_DEVICE_CPU) return DLOP_UNSUPPORTED;
  args->thunk->run = triple_run;
  return DLOP_OK;
}

static dlop_op_desc triple_op = {
    .struct_size = sizeof(dlop_op_desc), .flags = DLOP_OP_NEEDS_CONTIGUOUS_INPUTS,
    .name = "inproc_triple", .doc = "3 * x", .num_inputs = 1, .num_outputs = 1,
    .cpu_dtypes = DLOP_DTYPE_BIT(DLOP_FLOAT32), .make_node = triple_make_node,
    .infer_shape = triple_infer_shape, .make_thunk = triple_make_thunk};
static const dlop_op_desc *triple_ops[] = {&triple_op};
static dlop_plugin_desc triple_plugin = {.struct_size = sizeof(dlop_plugin_desc),
                                         .abi_version = DLOP_ABI_VERSION, .name = "inproc",
                                         .version = "1.0", .doc = "test", .ops = triple_ops,
                                         .num_ops = 1};

static const dlop_host_api *seen_host;
static uint32_t seen_abi;

static int triple_init(const dlop_host_api *host, uint32_t host_abi_version,
                       const dlop_plugin_desc **plugin, char *error, size_t error_size) {
  seen_abi = host_abi_version;
  return dlop_plugin_init_standard(host, host_abi_version, plugin, error, error_size,
                                   &triple_plugin, &seen_host);
}

static int failing_init(const dlop_host_api *host, uint32_t host_abi_version,
                        const dlop_plugin_desc **plugin, char *error, size_t error_size) {
  (void)host, (void)host_abi_version, (void)plugin;
  snprintf(error, error_size, "the device list is empty");
  return DLOP_NO_DEVICE;
}

static int register_source(const char *origin, dlop_plugin_init_fn init,
                           const dlop_plugin_desc *descriptor, const dlop_plugin **plugin) {
  dlop_inprocess_plugin source = {.struct_size = sizeof source, .origin = origin, .init = init,
                                  .descriptor = descriptor};
  return dlop_register_plugin(&source, plugin);
}

/* status, the message containing each of the texts, and the registry unchanged. */
static void check_refused(int status, int expected, const char *first, const char *second) {
  ck_assert_msg(status == expected, "got %s, expected %s: %s", dlop_status_name(status),
                dlop_status_name(expected), dlop_last_error());
  ck_assert_msg(strstr(dlop_last_error(), first) != NULL, "'%s' not in: %s", first,
                dlop_last_error());
  if (second != NULL)
    ck_assert_msg(strstr(dlop_last_error(), second) != NULL, "'%s' not in: %s", second,
                  dlop_last_error());
  ck_assert_ptr_null(dlop_find_op("inproc_triple"));
}

/* ---- registered ------------------------------------------------------------------------- */

START_TEST(init_function_registers_like_a_file) {
  int plugins = dlop_plugin_count(), ops = dlop_op_count();
  const dlop_plugin *plugin = NULL;
  DLOP_CK_OK(register_source("test suite", triple_init, NULL, &plugin));
  ck_assert_ptr_nonnull(plugin);
  ck_assert_ptr_eq(seen_host, dlop_host_api_table());
  ck_assert_uint_eq(seen_abi, DLOP_ABI_VERSION);
  ck_assert_str_eq(dlop_plugin_path(plugin), "in-process: test suite");
  ck_assert_str_eq(dlop_plugin_name(plugin), "inproc");
  ck_assert_uint_eq(dlop_plugin_abi_version(plugin), DLOP_ABI_VERSION);
  ck_assert_int_eq(dlop_plugin_count(), plugins + 1);
  ck_assert_int_eq(dlop_op_count(), ops + 1);
  const dlop_op_desc *op = dlop_find_op("inproc_triple");
  ck_assert_ptr_nonnull(op);
  ck_assert_ptr_ne(op, &triple_op); /* the registry's own copy, as for a file */
  ck_assert_ptr_eq(dlop_op_plugin(op), plugin);
  ck_assert_uint_eq(dlop_op_dtypes(op, DLOP_DEVICE_CPU), DLOP_DTYPE_BIT(DLOP_FLOAT32));
}
END_TEST

START_TEST(descriptor_registers_and_runs_in_a_function) {
  dlop_test_load_bundled_plugins();
  const dlop_plugin *plugin = NULL;
  DLOP_CK_OK(register_source("descriptor test", NULL, &triple_plugin, &plugin));
  ck_assert_str_eq(dlop_plugin_path(plugin), "in-process: descriptor test");
  /* double(triple(x)): an in-process op and a bundled one in one compiled function */
  dlop_graph *graph = dlop_test_new_graph();
  dlop_var *x, *t, *y;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, NULL, &x));
  DLOP_CK_OK(dlop_graph_apply(graph, "inproc_triple", &x, 1, NULL, 0, &t, 1));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &t, 1, NULL, 0, &y, 1));
  ck_assert_ptr_eq(dlop_var_op(t), dlop_find_op("inproc_triple"));
  dlop_function *function = NULL;
  DLOP_CK_OK(dlop_function_compile(graph, &x, 1, &y, 1, CPU, &function));
  float data[5] = {1, -2, 0.5f, 4, 1e10f};
  int64_t n = 5;
  dlop_array *input = NULL, *output = NULL;
  DLOP_CK_OK(dlop_array_from_host(CPU, DLOP_FLOAT32, 1, &n, data, &input));
  DLOP_CK_OK(dlop_function_run(function, &input, 1, &output, 1, NULL));
  float result[5];
  DLOP_CK_OK(dlop_array_to_host(output, result, sizeof result));
  for (int i = 0; i < 5; i++) ck_assert_float_eq(result[i], 6.0f * data[i]);
  char text[4096];
  DLOP_CK_OK(dlop_function_explain(function, text, sizeof text));
  ck_assert_msg(strstr(text, "inproc_triple") != NULL, "%s", text);
  dlop_array_release(input);
  dlop_array_release(output);
  dlop_function_destroy(function);
  dlop_graph_destroy(graph);
}
END_TEST

/* ---- refused ---------------------------------------------------------------------------- */

START_TEST(bad_sources_are_refused) {
  check_refused(dlop_register_plugin(NULL, NULL), DLOP_INVALID_ARGUMENT, "source is NULL", NULL);
  dlop_inprocess_plugin small = {.struct_size = 8, .origin = "x", .init = triple_init};
  check_refused(dlop_register_plugin(&small, NULL), DLOP_INVALID_ARGUMENT, "struct_size is 8",
                "sizeof(dlop_inprocess_plugin)");
  dlop_inprocess_plugin reserved = {.struct_size = sizeof reserved, .reserved = 1, .origin = "x",
                                    .init = triple_init};
  check_refused(dlop_register_plugin(&reserved, NULL), DLOP_INVALID_ARGUMENT, "reserved is 1",
                NULL);
  check_refused(register_source(NULL, triple_init, NULL, NULL), DLOP_INVALID_ARGUMENT,
                "origin is NULL", NULL);
  check_refused(register_source("", triple_init, NULL, NULL), DLOP_INVALID_ARGUMENT,
                "origin is empty", NULL);
  check_refused(register_source("two\nlines", triple_init, NULL, NULL), DLOP_INVALID_ARGUMENT,
                "control character 0x0a", NULL);
  check_refused(register_source("o", NULL, NULL, NULL), DLOP_INVALID_ARGUMENT,
                "in-process: o: ", "neither init nor a descriptor");
  check_refused(register_source("o", triple_init, &triple_plugin, NULL), DLOP_INVALID_ARGUMENT,
                "both init and a descriptor", NULL);
  check_refused(register_source("o", failing_init, NULL, NULL), DLOP_PLUGIN_ERROR,
                "in-process: o: init failed with DLOP_NO_DEVICE", "the device list is empty");
}
END_TEST

START_TEST(bad_descriptors_get_a_files_checks) {
  dlop_plugin_desc plugin = triple_plugin;
  plugin.abi_version = DLOP_MAKE_ABI_VERSION(DLOP_ABI_MAJOR + 1, 0);
  check_refused(register_source("o", NULL, &plugin, NULL), DLOP_ABI_MISMATCH,
                "in-process: o: built for dlop ABI 2.0", NULL);
  plugin = triple_plugin;
  plugin.struct_size = 12;
  check_refused(register_source("o", NULL, &plugin, NULL), DLOP_INVALID_PLUGIN,
                "struct_size 12", NULL);
  plugin = triple_plugin;
  plugin.name = "no spaces";
  check_refused(register_source("o", NULL, &plugin, NULL), DLOP_INVALID_PLUGIN,
                "plugin name 'no spaces' is not well-formed", NULL);

  dlop_op_desc op = triple_op;
  const dlop_op_desc *list[2] = {&op, &op};
  plugin = triple_plugin;
  plugin.ops = list;
  op.struct_size = 16;
  check_refused(register_source("o", NULL, &plugin, NULL), DLOP_INVALID_PLUGIN,
                "op #0 has struct_size 16", NULL);
  op = triple_op;
  op.name = "1st";
  check_refused(register_source("o", NULL, &plugin, NULL), DLOP_INVALID_PLUGIN,
                "op #0 name '1st' is not well-formed", NULL);
  op = triple_op;
  op.infer_shape = NULL;
  check_refused(register_source("o", NULL, &plugin, NULL), DLOP_INVALID_PLUGIN,
                "has no infer_shape function", NULL);
  op = triple_op;
  plugin.num_ops = 2;
  check_refused(register_source("o", NULL, &plugin, NULL), DLOP_DUPLICATE,
                "op 'inproc_triple' is declared twice in this plugin", NULL);
}
END_TEST

START_TEST(taken_names_are_refused) {
  DLOP_CK_OK(register_source("first", triple_init, NULL, NULL));
  const dlop_op_desc *first = dlop_find_op("inproc_triple");
  int count = dlop_plugin_count();
  /* the same plugin name again */
  int status = register_source("second", NULL, &triple_plugin, NULL);
  ck_assert_int_eq(status, DLOP_DUPLICATE);
  ck_assert_msg(strstr(dlop_last_error(), "in-process: second: plugin name 'inproc' is already "
                                          "taken by in-process: first") != NULL,
                "%s", dlop_last_error());
  /* another plugin name, the same op name */
  dlop_plugin_desc renamed = triple_plugin;
  renamed.name = "inproc_again";
  status = register_source("third", NULL, &renamed, NULL);
  ck_assert_int_eq(status, DLOP_DUPLICATE);
  ck_assert_msg(strstr(dlop_last_error(), "in-process: third: op 'inproc_triple' is already "
                                          "provided by in-process: first") != NULL,
                "%s", dlop_last_error());
  ck_assert_int_eq(dlop_plugin_count(), count);
  ck_assert_ptr_eq(dlop_find_op("inproc_triple"), first);
}
END_TEST

START_TEST(op_names_of_files_are_taken_too) {
  dlop_test_load_bundled_plugins();
  dlop_op_desc op = triple_op;
  op.name = "double"; /* the bundled plugin's */
  const dlop_op_desc *list[1] = {&op};
  dlop_plugin_desc plugin = triple_plugin;
  plugin.ops = list;
  int status = register_source("o", NULL, &plugin, NULL);
  ck_assert_int_eq(status, DLOP_DUPLICATE);
  ck_assert_msg(strstr(dlop_last_error(), "op 'double' is already provided by /") != NULL, "%s",
                dlop_last_error());
}
END_TEST

int main(void) {
  Suite *suite = suite_create("inprocess_plugin");
  TCase *registered = dlop_test_tcase(suite, "registered", 0, NULL, NULL);
  dlop_test_add_tests(registered, init_function_registers_like_a_file,
                      descriptor_registers_and_runs_in_a_function, NULL);
  TCase *refused = dlop_test_tcase(suite, "refused", 0, NULL, NULL);
  dlop_test_add_tests(refused, bad_sources_are_refused, bad_descriptors_get_a_files_checks,
                      taken_names_are_refused, op_names_of_files_are_taken_too, NULL);
  return dlop_test_run_suite(suite);
}
