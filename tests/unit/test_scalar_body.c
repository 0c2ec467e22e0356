/* test_scalar_body.c — the scalar bodies (ABI 1.2) the bundled elementwise ops declare: every
 * op of the elemwise plugin, double, multiply_them and exp has one for each dtype it accepts,
 * with code, compute dtypes the host can convert (float32 for float16 and bfloat16 in
 * arithmetic and math, the storage bits for the ops that return an input's bits), the exact
 * flag where no math library is involved, and a named prelude where the code calls one; the
 * ops that are not elementwise (reductions, BLAS, views) have none. Whether the bodies compute
 * what the kernels do is test_fusion_parity's (and dlop check's) question. */
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"
#include "stage.h"
#include "test_support.h"

/* op, inputs, the dtypes it accepts, its body computes 16-bit floats in float32, exact */
typedef struct body_case {
  const char *op;
  int32_t inputs;
  uint32_t dtypes;
  int in_float32;
  int exact;
} body_case;

#define FLOATS DLOP_DTYPES_FLOAT
#define NUMERIC (DLOP_DTYPES_FLOAT | DLOP_DTYPES_INT)
#define ALL DLOP_DTYPES_ALL

static const body_case cases[] = {
    {"add", 2, NUMERIC, 1, 1},        {"sub", 2, NUMERIC, 1, 1},
    {"mul", 2, NUMERIC, 1, 1},        {"div", 2, FLOATS, 1, 1},
    {"pow", 2, FLOATS, 1, 0},         {"maximum", 2, NUMERIC, 0, 1},
    {"minimum", 2, NUMERIC, 0, 1},    {"neg", 1, NUMERIC, 0, 1},
    {"abs", 1, NUMERIC, 0, 1},        {"log", 1, FLOATS, 1, 0},
    {"sqrt", 1, FLOATS, 1, 1},        {"tanh", 1, FLOATS, 1, 0},
    {"sigmoid", 1, FLOATS, 1, 0},     {"equal", 2, ALL, 0, 1},
    {"not_equal", 2, ALL, 0, 1},      {"less", 2, ALL, 0, 1},
    {"less_equal", 2, ALL, 0, 1},     {"greater", 2, ALL, 0, 1},
    {"greater_equal", 2, ALL, 0, 1},  {"where", 3, ALL, 0, 1},
    {"cast", 1, ALL, 0, 1},           {"double", 1, NUMERIC, 1, 1},
    {"multiply_them", 2, NUMERIC, 1, 1}, {"exp", 1, FLOATS, 1, 0},
};

static int is_16_bit_float(int32_t dtype) { return dtype == DLOP_FLOAT16 || dtype == DLOP_BFLOAT16; }

/* make_node on inputs of dtype (where's condition bool), then scalar_body; checks the body. */
static void check_body(const body_case *c, const dlop_op_desc *op, int32_t dtype, int32_t to) {
  dlop_type inputs[3], outputs[1];
  int32_t input_compute[3], output_compute[1];
  char code[4096];
  dlop_scalar_body_args body;
  dlop_param_value *params = NULL;
  dlop_named_param cast = {"dtype", {.kind = DLOP_PARAM_STRING, .count = 1,
                                      .u.s = dlop_dtype_name((dlop_dtype)to)}};
  DLOP_CK_OK(dlop__params_resolve(op, &cast, op->num_params, &params));
  memset(inputs, 0, sizeof inputs);
  memset(outputs, 0, sizeof outputs);
  for (int32_t i = 0; i < c->inputs; i++) {
    inputs[i].dtype = strcmp(c->op, "where") == 0 && i == 0 ? DLOP_BOOL : dtype;
    inputs[i].ndim = 1;
    inputs[i].shape[0] = DLOP_DIM_UNKNOWN;
  }
  dlop__stage_node node = {op, params, op->num_params, -1, c->inputs, 1};
  DLOP_CK_OK(dlop__stage_make_node(&node, inputs, outputs));
  DLOP_CK_OK(dlop__stage_scalar_body(&node, inputs, outputs, code, sizeof code, input_compute,
                                     output_compute, &body));
  const char *name = dlop_dtype_name((dlop_dtype)dtype);
  ck_assert_msg(body.code != NULL && strstr(body.code, "out0") != NULL,
                "%s %s: the code assigns out0: %s", c->op, name, body.code ? body.code : "(null)");
  ck_assert_msg((body.prelude == NULL) == (body.prelude_name == NULL),
                "%s %s: a prelude comes with its name", c->op, name);
  int float32 = c->in_float32 && is_16_bit_float(dtype);
  for (int32_t i = 0; i < c->inputs; i++)
    ck_assert_msg(input_compute[i] == (float32 ? DLOP_FLOAT32 : inputs[i].dtype),
                  "%s %s: input %d computes as %s", c->op, name, (int)i,
                  dlop_dtype_name((dlop_dtype)input_compute[i]));
  ck_assert_msg(output_compute[0] == (float32 ? DLOP_FLOAT32 : outputs[0].dtype),
                "%s %s: output computes as %s", c->op, name,
                dlop_dtype_name((dlop_dtype)output_compute[0]));
  ck_assert_msg(((body.flags & DLOP_SCALAR_BODY_EXACT) != 0) == c->exact,
                "%s %s: exact flag %u", c->op, name, body.flags);
  free(params);
}

START_TEST(bundled_elementwise_ops_declare_bodies) {
  dlop_test_load_bundled_plugins();
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const body_case *c = &cases[k];
    const dlop_op_desc *op = dlop_find_op(c->op);
    ck_assert_msg(op != NULL, "op %s is loaded", c->op);
    ck_assert_msg(op->scalar_body != NULL, "%s declares a scalar body", c->op);
    ck_assert_uint_eq(op->struct_size, sizeof(dlop_op_desc));
    for (int32_t dtype = 0; dtype < DLOP_DTYPE_COUNT; dtype++) {
      if (!(c->dtypes & DLOP_DTYPE_BIT(dtype))) continue;
      if (strcmp(c->op, "cast") != 0) {
        check_body(c, op, dtype, DLOP_FLOAT32);
        continue;
      }
      for (int32_t to = 0; to < DLOP_DTYPE_COUNT; to++) check_body(c, op, dtype, to);
    }
  }
}
END_TEST

/* elemwise's and exp's bodies call their preludes; a cast names the conversion pair. */
START_TEST(bodies_name_their_preludes) {
  static const body_case add = {"add", 2, NUMERIC, 1, 1}, exp_case = {"exp", 1, FLOATS, 1, 0};
  dlop_type inputs[2], outputs[1];
  int32_t input_compute[2], output_compute[1];
  char code[4096];
  dlop_scalar_body_args body;
  dlop_test_load_bundled_plugins();
  const body_case *both[] = {&add, &exp_case};
  const char *names[] = {"elemwise.scalar.1", "exp.math.1"};
  for (int k = 0; k < 2; k++) {
    const dlop_op_desc *op = dlop_find_op(both[k]->op);
    memset(inputs, 0, sizeof inputs);
    memset(outputs, 0, sizeof outputs);
    for (int32_t i = 0; i < both[k]->inputs; i++) inputs[i].dtype = k == 0 ? DLOP_INT32 : DLOP_FLOAT64;
    dlop__stage_node node = {op, NULL, 0, -1, both[k]->inputs, 1};
    DLOP_CK_OK(dlop__stage_make_node(&node, inputs, outputs));
    DLOP_CK_OK(dlop__stage_scalar_body(&node, inputs, outputs, code, sizeof code, input_compute,
                                       output_compute, &body));
    ck_assert_ptr_nonnull(body.prelude);
    ck_assert_str_eq(body.prelude_name, names[k]);
    ck_assert_msg(strstr(body.code, k == 0 ? "ew_add_int32(in0, in1)" : "exp_of_double(in0)"),
                  "%s", body.code);
  }
  /* the embedded prelude is the header the kernels include, whole */
  const dlop_op_desc *op = dlop_find_op("add");
  inputs[0].dtype = inputs[1].dtype = DLOP_FLOAT32;
  dlop__stage_node node = {op, NULL, 0, -1, 2, 1};
  DLOP_CK_OK(dlop__stage_make_node(&node, inputs, outputs));
  DLOP_CK_OK(dlop__stage_scalar_body(&node, inputs, outputs, code, sizeof code, input_compute,
                                     output_compute, &body));
  ck_assert_msg(strstr(body.prelude, "#ifndef DLOP_ELEMWISE_SCALAR_H") != NULL &&
                    strstr(body.prelude, "EW_CAST_ONE") != NULL,
                "the prelude is elemwise_scalar.h");
  ck_assert_str_eq(body.code, "out0 = in0 + in1;");
}
END_TEST

START_TEST(other_ops_have_no_body) {
  static const char *const names[] = {"sum", "max", "dot", "matmul", "transpose", "reshape",
                                      "broadcast_to"};
  dlop_test_load_bundled_plugins();
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    const dlop_op_desc *op = dlop_find_op(names[k]);
    ck_assert_msg(op != NULL, "op %s is loaded", names[k]);
    ck_assert_msg(op->scalar_body == NULL, "%s is not elementwise: no scalar body", names[k]);
  }
}
END_TEST

/* A plugin's failure comes back through the gateway with the node and op named. */
START_TEST(unsupported_types_are_refused_with_a_message) {
  dlop_type inputs[1], outputs[1];
  int32_t input_compute[1], output_compute[1];
  char code[4096];
  dlop_scalar_body_args body;
  dlop_test_load_bundled_plugins();
  const dlop_op_desc *op = dlop_find_op("exp");
  memset(inputs, 0, sizeof inputs);
  memset(outputs, 0, sizeof outputs);
  inputs[0].dtype = outputs[0].dtype = DLOP_INT32; /* no exp of integers */
  dlop__stage_node node = {op, NULL, 0, 3, 1, 1};
  int status = dlop__stage_scalar_body(&node, inputs, outputs, code, sizeof code, input_compute,
                                       output_compute, &body);
  ck_assert_int_eq(status, DLOP_UNSUPPORTED);
  ck_assert_msg(strstr(dlop_last_error(), "node #3 exp: scalar_body: no scalar body for dtype int32"),
                "%s", dlop_last_error());
}
END_TEST

int main(void) {
  Suite *suite = suite_create("scalar_body");
  TCase *tcase = dlop_test_tcase(suite, "bundled", 0, NULL, NULL);
  dlop_test_add_tests(tcase, bundled_elementwise_ops_declare_bodies, bodies_name_their_preludes,
                      other_ops_have_no_body, unsupported_types_are_refused_with_a_message, NULL);
  return dlop_test_run_suite(suite);
}
