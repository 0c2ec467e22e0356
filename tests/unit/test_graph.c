/* test_graph.c — building graphs with the C API: dtypes and static shapes known right after
 * apply (unknown dims, broadcasting), and the errors apply reports (type, shape, arity,
 * unknown op, parameters) with messages that name the op. Uses the bundled plugins. */
#include <string.h>

#include "graph_runner.h"
#include "test_support.h"

static const int64_t UNKNOWN = DLOP_DIM_UNKNOWN;

/* The running test's graph: every test gets a new one (graph_setup) and leaves it to
 * graph_teardown. */
static dlop_graph *graph;
static void graph_setup(void) { graph = dlop_test_new_graph(); }
static void graph_teardown(void) { dlop_graph_destroy(graph); }

static void assert_type(const dlop_var *var, dlop_dtype dtype, int32_t ndim, const int64_t *shape) {
  const dlop_type *type = dlop_var_type(var);
  ck_assert_ptr_nonnull(type);
  ck_assert_msg(type->dtype == dtype, "%s: dtype %s, expected %s", dlop_var_name(var),
                dlop_dtype_name((dlop_dtype)type->dtype), dlop_dtype_name(dtype));
  ck_assert_int_eq(type->ndim, ndim);
  for (int32_t d = 0; d < ndim; d++)
    ck_assert_msg(type->shape[d] == shape[d], "%s: dim %d is %lld, expected %lld",
                  dlop_var_name(var), (int)d, (long long)type->shape[d], (long long)shape[d]);
}

static void assert_error_mentions(const char *a, const char *b) {
  const char *message = dlop_last_error();
  ck_assert_msg(strstr(message, a) != NULL, "message '%s' does not mention '%s'", message, a);
  if (b)
    ck_assert_msg(strstr(message, b) != NULL, "message '%s' does not mention '%s'", message, b);
}

START_TEST(test_double_type_known_after_apply) {
  dlop_var *x, *y;
  int64_t shape[1] = {5};
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, shape, &x));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &x, 1, NULL, 0, &y, 1));
  assert_type(y, DLOP_FLOAT32, 1, shape);
  ck_assert_str_eq(dlop_var_name(x), "x");
  ck_assert_str_eq(dlop_var_name(y), "double.0");
  ck_assert_ptr_nonnull(dlop_var_op(y));
  ck_assert_str_eq(dlop_var_op(y)->name, "double");
  ck_assert_ptr_null(dlop_var_op(x));
}
END_TEST

START_TEST(test_unknown_dims_propagate) {
  dlop_var *x, *y, *z;
  int64_t shape[2] = {UNKNOWN, 3};
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT64, 2, shape, &x));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &x, 1, NULL, 0, &y, 1));
  DLOP_CK_OK(dlop_graph_apply(graph, "exp", &y, 1, NULL, 0, &z, 1));
  assert_type(z, DLOP_FLOAT64, 2, shape);
  ck_assert_str_eq(dlop_var_name(z), "exp.1");
}
END_TEST

START_TEST(test_null_shape_means_all_unknown) {
  dlop_var *x, *y;
  int64_t unknown[3] = {UNKNOWN, UNKNOWN, UNKNOWN};
  DLOP_CK_OK(dlop_graph_input(graph, NULL, DLOP_INT32, 3, NULL, &x));
  ck_assert_str_eq(dlop_var_name(x), "input.0");
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &x, 1, NULL, 0, &y, 1));
  assert_type(y, DLOP_INT32, 3, unknown);
}
END_TEST

START_TEST(test_broadcasting_known_dims) {
  dlop_var *inputs[2];
  int64_t a[2] = {3, 1}, b[2] = {1, 4}, expected[2] = {3, 4};
  assert_type(dlop_test_multiply_them(graph, DLOP_FLOAT32, 2, a, 2, b, inputs), DLOP_FLOAT32, 2,
              expected);
}
END_TEST

START_TEST(test_broadcasting_unknown_dims) {
  dlop_var *inputs[2];
  int64_t a[2] = {UNKNOWN, 4}, b[1] = {4}, expected[2] = {UNKNOWN, 4};
  assert_type(dlop_test_multiply_them(graph, DLOP_FLOAT32, 2, a, 1, b, inputs), DLOP_FLOAT32, 2,
              expected);
}
END_TEST

START_TEST(test_type_error_mixed_dtypes) {
  dlop_var *inputs[2], *z = (dlop_var *)&z;
  int64_t shape[1] = {4};
  DLOP_CK_OK(dlop_graph_input(graph, "a", DLOP_FLOAT32, 1, shape, &inputs[0]));
  DLOP_CK_OK(dlop_graph_input(graph, "b", DLOP_FLOAT64, 1, shape, &inputs[1]));
  ck_assert_int_eq(dlop_graph_apply(graph, "multiply_them", inputs, 2, NULL, 0, &z, 1),
                   DLOP_TYPE_ERROR);
  ck_assert_ptr_null(z);
  assert_error_mentions("multiply_them", "float64");
}
END_TEST

START_TEST(test_type_error_exp_of_integers) {
  int64_t four = 4;
  dlop_var *x, *y;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_INT32, 1, &four, &x));
  ck_assert_int_eq(dlop_graph_apply(graph, "exp", &x, 1, NULL, 0, &y, 1), DLOP_TYPE_ERROR);
  assert_error_mentions("exp", "int32");
}
END_TEST

/* v = op(v) is supported; when it fails, the caller's v must survive (it was set to NULL). */
START_TEST(test_failed_apply_keeps_aliased_outputs) {
  dlop_var *v, *original;
  int64_t shape[1] = {4};
  DLOP_CK_OK(dlop_graph_input(graph, "v", DLOP_INT32, 1, shape, &v));
  original = v;
  ck_assert_int_eq(dlop_graph_apply(graph, "exp", &v, 1, NULL, 0, &v, 1), DLOP_TYPE_ERROR);
  ck_assert_ptr_eq(v, original);
  ck_assert_str_eq(dlop_var_name(v), "v");
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &v, 1, NULL, 0, &v, 1)); /* v is still usable */
  ck_assert_ptr_ne(v, original);
  ck_assert_ptr_eq(dlop_var_op(v), dlop_find_op("double"));

  /* Two inputs, the output slot is the second one: kept; a separate output slot: cleared. */
  dlop_var *inputs[2], *z = (dlop_var *)&z;
  DLOP_CK_OK(dlop_graph_input(graph, "a", DLOP_FLOAT32, 1, shape, &inputs[0]));
  DLOP_CK_OK(dlop_graph_input(graph, "b", DLOP_FLOAT64, 1, shape, &inputs[1]));
  dlop_var *b = inputs[1];
  ck_assert_int_eq(dlop_graph_apply(graph, "multiply_them", inputs, 2, NULL, 0, &inputs[1], 1),
                   DLOP_TYPE_ERROR);
  ck_assert_ptr_eq(inputs[1], b);
  ck_assert_int_eq(dlop_graph_apply(graph, "multiply_them", inputs, 2, NULL, 0, &z, 1),
                   DLOP_TYPE_ERROR);
  ck_assert_ptr_null(z);
}
END_TEST

START_TEST(test_shape_error_not_broadcastable) {
  dlop_var *inputs[2], *z;
  int64_t a[2] = {3, 4}, b[2] = {5, 4};
  DLOP_CK_OK(dlop_graph_input(graph, "a", DLOP_FLOAT32, 2, a, &inputs[0]));
  DLOP_CK_OK(dlop_graph_input(graph, "b", DLOP_FLOAT32, 2, b, &inputs[1]));
  ck_assert_int_eq(dlop_graph_apply(graph, "multiply_them", inputs, 2, NULL, 0, &z, 1),
                   DLOP_SHAPE_ERROR);
  assert_error_mentions("multiply_them", NULL);
  /* the failed apply left nothing behind: a good apply still works */
  b[0] = 1;
  DLOP_CK_OK(dlop_graph_input(graph, "c", DLOP_FLOAT32, 2, b, &inputs[1]));
  DLOP_CK_OK(dlop_graph_apply(graph, "multiply_them", inputs, 2, NULL, 0, &z, 1));
  assert_type(z, DLOP_FLOAT32, 2, a);
}
END_TEST

START_TEST(test_wrong_arity) {
  dlop_var *inputs[2], *y;
  DLOP_CK_OK(dlop_graph_input(graph, "a", DLOP_FLOAT32, 1, NULL, &inputs[0]));
  DLOP_CK_OK(dlop_graph_input(graph, "b", DLOP_FLOAT32, 1, NULL, &inputs[1]));
  ck_assert_int_eq(dlop_graph_apply(graph, "double", inputs, 2, NULL, 0, &y, 1),
                   DLOP_INVALID_ARGUMENT);
  assert_error_mentions("double", "takes 1 input, got 2");
  ck_assert_int_eq(dlop_graph_apply(graph, "multiply_them", inputs, 1, NULL, 0, &y, 1),
                   DLOP_INVALID_ARGUMENT);
  assert_error_mentions("multiply_them", "takes 2 inputs, got 1");
  dlop_var *two[2];
  ck_assert_int_eq(dlop_graph_apply(graph, "double", inputs, 1, NULL, 0, two, 2),
                   DLOP_INVALID_ARGUMENT);
  assert_error_mentions("double", "1 output");
}
END_TEST

START_TEST(test_unknown_op) {
  dlop_var *x, *y;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, NULL, &x));
  ck_assert_int_eq(dlop_graph_apply(graph, "tripple", &x, 1, NULL, 0, &y, 1), DLOP_NOT_FOUND);
  assert_error_mentions("unknown op 'tripple'", NULL);
}
END_TEST

START_TEST(test_unknown_parameter) {
  dlop_var *x, *y;
  dlop_named_param param = {"scale", {DLOP_PARAM_FLOAT, 1, {.f = 3.0}}};
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, NULL, &x));
  ck_assert_int_eq(dlop_graph_apply(graph, "double", &x, 1, &param, 1, &y, 1),
                   DLOP_INVALID_ARGUMENT);
  assert_error_mentions("double", "'scale'");
  assert_error_mentions("declared parameters", NULL);
}
END_TEST

START_TEST(test_bad_inputs_rejected) {
  dlop_graph *other = NULL;
  dlop_var *x, *foreign, *y;
  int64_t bad[1] = {-7};
  ck_assert_int_eq(dlop_graph_input(graph, "x", DLOP_FLOAT32, DLOP_MAX_NDIM + 1, NULL, &x),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_int_eq(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, bad, &x), DLOP_INVALID_ARGUMENT);
  assert_error_mentions("-7", NULL);
  ck_assert_int_eq(dlop_graph_input(graph, "x", (dlop_dtype)42, 1, NULL, &x),
                   DLOP_INVALID_ARGUMENT);
  DLOP_CK_OK(dlop_graph_create(&other));
  DLOP_CK_OK(dlop_graph_input(other, "f", DLOP_FLOAT32, 1, NULL, &foreign));
  ck_assert_int_eq(dlop_graph_apply(graph, "double", &foreign, 1, NULL, 0, &y, 1),
                   DLOP_INVALID_ARGUMENT);
  assert_error_mentions("another graph", NULL);
  dlop_graph_destroy(other);
}
END_TEST

START_TEST(test_constant_type) {
  dlop_device cpu = {DLOP_DEVICE_CPU, 0};
  dlop_array *value = NULL;
  dlop_var *c, *y;
  int64_t shape[2] = {2, 3};
  double data[6] = {1, 2, 3, 4, 5, 6};
  DLOP_CK_OK(dlop_array_from_host(cpu, DLOP_FLOAT64, 2, shape, data, &value));
  DLOP_CK_OK(dlop_graph_constant(graph, NULL, value, &c));
  dlop_array_release(value); /* the graph keeps its own reference */
  assert_type(c, DLOP_FLOAT64, 2, shape);
  ck_assert_str_eq(dlop_var_name(c), "constant.0");
  ck_assert_ptr_null(dlop_var_op(c));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &c, 1, NULL, 0, &y, 1));
  assert_type(y, DLOP_FLOAT64, 2, shape);
}
END_TEST

START_TEST(test_zero_dimensional_and_empty) {
  dlop_var *s, *e, *ys, *ye;
  int64_t empty[2] = {0, 3};
  DLOP_CK_OK(dlop_graph_input(graph, "s", DLOP_FLOAT32, 0, NULL, &s));
  DLOP_CK_OK(dlop_graph_input(graph, "e", DLOP_FLOAT32, 2, empty, &e));
  DLOP_CK_OK(dlop_graph_apply(graph, "exp", &s, 1, NULL, 0, &ys, 1));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &e, 1, NULL, 0, &ye, 1));
  assert_type(ys, DLOP_FLOAT32, 0, NULL);
  assert_type(ye, DLOP_FLOAT32, 2, empty);
}
END_TEST


/* The loader's good fixture: fixture_scale(x; scale: float = 2.0, negate: bool = false). */
START_TEST(test_parameter_kind_and_names_checked) {
  const dlop_plugin *plugin = NULL;
  DLOP_CK_OK(dlop_load_plugin(DLOP_TEST_FIXTURE_DIR "/good.so", &plugin));
  dlop_var *x, *y;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, NULL, &x));
  dlop_named_param wrong_kind = {"scale", {DLOP_PARAM_INT, 1, {.i = 3}}};
  ck_assert_int_eq(dlop_graph_apply(graph, "fixture_scale", &x, 1, &wrong_kind, 1, &y, 1),
                   DLOP_INVALID_ARGUMENT);
  assert_error_mentions("fixture_scale", "'scale' is declared as float but the value given is int");
  dlop_named_param unknown = {"factor", {DLOP_PARAM_FLOAT, 1, {.f = 3}}};
  ck_assert_int_eq(dlop_graph_apply(graph, "fixture_scale", &x, 1, &unknown, 1, &y, 1),
                   DLOP_INVALID_ARGUMENT);
  assert_error_mentions("'factor'", "scale (float), negate (bool)");
  dlop_named_param twice[2] = {{"scale", {DLOP_PARAM_FLOAT, 1, {.f = 3}}},
                               {"scale", {DLOP_PARAM_FLOAT, 1, {.f = 4}}}};
  ck_assert_int_eq(dlop_graph_apply(graph, "fixture_scale", &x, 1, twice, 2, &y, 1),
                   DLOP_INVALID_ARGUMENT);
  assert_error_mentions("given twice", NULL);
  dlop_named_param not_bool = {"negate", {DLOP_PARAM_BOOL, 1, {.i = 5}}};
  ck_assert_int_eq(dlop_graph_apply(graph, "fixture_scale", &x, 1, &not_bool, 1, &y, 1),
                   DLOP_INVALID_ARGUMENT);
  dlop_named_param good[2] = {{"negate", {DLOP_PARAM_BOOL, 1, {.i = 1}}},
                              {"scale", {DLOP_PARAM_FLOAT, 1, {.f = 0.5}}}};
  DLOP_CK_OK(dlop_graph_apply(graph, "fixture_scale", &x, 1, good, 2, &y, 1));
  ck_assert_str_eq(dlop_var_op(y)->name, "fixture_scale");
  /* the op's own type error comes back with its message */
  dlop_var *i;
  DLOP_CK_OK(dlop_graph_input(graph, "i", DLOP_INT32, 1, NULL, &i));
  ck_assert_int_eq(dlop_graph_apply(graph, "fixture_scale", &i, 1, NULL, 0, &y, 1),
                   DLOP_TYPE_ERROR);
  assert_error_mentions("fixture_scale", "float32 or float64, got int32");
}
END_TEST

int main(void) {
  Suite *suite = suite_create("graph");
  TCase *types = dlop_test_tcase(suite, "types", 0, graph_setup, graph_teardown);
  dlop_test_add_tests(types,
                      test_double_type_known_after_apply,
                      test_unknown_dims_propagate,
                      test_null_shape_means_all_unknown,
                      test_broadcasting_known_dims,
                      test_broadcasting_unknown_dims,
                      test_constant_type,
                      test_zero_dimensional_and_empty,
                      NULL);
  TCase *errors = dlop_test_tcase(suite, "errors", 0, graph_setup, graph_teardown);
  dlop_test_add_tests(errors,
                      test_type_error_mixed_dtypes,
                      test_type_error_exp_of_integers,
                      test_failed_apply_keeps_aliased_outputs,
                      test_shape_error_not_broadcastable,
                      test_wrong_arity,
                      test_unknown_op,
                      test_unknown_parameter,
                      test_bad_inputs_rejected,
                      test_parameter_kind_and_names_checked,
                      NULL);
  return dlop_test_run_suite(suite);
}
