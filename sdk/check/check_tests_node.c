/* check_tests_node.c — the type and shape rules: make_node accepts every declared dtype at
 * ranks 0..4 (known and unknown dims), rejects wrong arity, undeclared dtypes and incompatible
 * shapes with a status and a message, and is pure; infer_shape agrees with make_node's static
 * types and with itself on static and concrete shapes. */
#include <string.h>

#include "check_suite.h"

static const int64_t rank_dims[4] = {3, 1, 4, 5};

static int first_declared_dtype(const dlop_op_desc *op) {
  uint32_t mask = dlop_op_dtypes(op, DLOP_DEVICE_CPU) | dlop_op_dtypes(op, DLOP_DEVICE_CUDA);
  for (int d = 0; d < DLOP_DTYPE_COUNT; d++)
    if (mask & DLOP_DTYPE_BIT(d)) return d;
  return DLOP_FLOAT32;
}

/* make_node must refuse these inputs with a status and a message. */
static void expect_refusal(const check_case *c, const char *check, const dlop_type *inputs,
                           int32_t count, const char *what) {
  dlop_type outputs[CHECK_MAX_OPERANDS];
  char error[1024];
  int status = check_call_make_node(c->op, inputs, count, outputs, error, sizeof error);
  if (status == DLOP_OK)
    check_fail(c, check, NULL, 0, "make_node accepted %s (expected a non-OK status, such as "
               "DLOP_TYPE_ERROR, and a message)", what);
  if (error[0] == '\0')
    check_fail(c, check, NULL, 0, "make_node refused %s with %s but wrote no message into "
               "args->error (say what was wrong and what was expected)", what,
               dlop_status_name(status));
}

START_TEST(make_node_rejects_wrong_arity) {
  const check_case *c = check_case_at(_i);
  if (c->op->num_inputs == DLOP_VARIADIC) {
    check_note(c, "make_node_rejects_wrong_arity", "skipped: the op takes any number of inputs");
    return;
  }
  dlop_type inputs[CHECK_MAX_OPERANDS + 1];
  int dtype = first_declared_dtype(c->op);
  for (int i = 0; i <= CHECK_MAX_OPERANDS; i++) inputs[i] = check_type(dtype, 1, rank_dims, 0);
  int32_t declared = c->op->num_inputs;
  char what[128];
  if (declared > 0) {
    snprintf(what, sizeof what, "%d input(s) (the op declares %d)", (int)declared - 1, (int)declared);
    expect_refusal(c, "make_node_rejects_wrong_arity", inputs, declared - 1, what);
  }
  if (declared + 1 <= CHECK_MAX_OPERANDS) {
    snprintf(what, sizeof what, "%d inputs (the op declares %d)", (int)declared + 1, (int)declared);
    expect_refusal(c, "make_node_rejects_wrong_arity", inputs, declared + 1, what);
  }
}
END_TEST

START_TEST(make_node_rejects_undeclared_dtypes) {
  const check_case *c = check_case_at(_i);
  uint32_t mask = dlop_op_dtypes(c->op, DLOP_DEVICE_CPU) | dlop_op_dtypes(c->op, DLOP_DEVICE_CUDA);
  int32_t n = check_num_inputs(c->op);
  if (n > CHECK_MAX_OPERANDS) n = CHECK_MAX_OPERANDS;
  for (int dtype = 0; dtype < DLOP_DTYPE_COUNT; dtype++) {
    if (mask & DLOP_DTYPE_BIT(dtype)) continue;
    dlop_type inputs[CHECK_MAX_OPERANDS];
    for (int32_t i = 0; i < n; i++) inputs[i] = check_type(dtype, 1, rank_dims, 0);
    char what[160];
    snprintf(what, sizeof what, "inputs of dtype %s, which it declares on no device",
             dlop_dtype_name((dlop_dtype)dtype));
    expect_refusal(c, "make_node_rejects_undeclared_dtypes", inputs, n, what);
  }
}
END_TEST

START_TEST(make_node_rejects_incompatible_shapes) {
  const check_case *c = check_case_at(_i);
  int32_t n = check_num_inputs(c->op);
  if (n > CHECK_MAX_OPERANDS) n = CHECK_MAX_OPERANDS;
  static const int64_t a[2] = {3, 5}, b[2] = {4, 7};
  dlop_type inputs[CHECK_MAX_OPERANDS];
  int dtype = first_declared_dtype(c->op);
  for (int32_t i = 0; i < n; i++) inputs[i] = check_type(dtype, 2, i == 1 ? b : a, 0);
  expect_refusal(c, "make_node_rejects_incompatible_shapes", inputs, n,
                 "input 0 of shape (3, 5) with input 1 of shape (4, 7), which neither match nor "
                 "broadcast");
}
END_TEST

void check_add_op_tests(TCase *tc, int index) {
  const check_case *c = check_case_at(index);
  tcase_add_loop_test(tc, make_node_rejects_wrong_arity, index, index + 1);
  tcase_add_loop_test(tc, make_node_rejects_undeclared_dtypes, index, index + 1);
  if (check_num_inputs(c->op) >= 2)
    tcase_add_loop_test(tc, make_node_rejects_incompatible_shapes, index, index + 1);
}

/* ---- per (device, dtype) ----------------------------------------------------------------- */

START_TEST(make_node_accepts_declared_dtype) {
  const check_case *c = check_case_at(_i);
  int32_t n = check_num_inputs(c->op);
  for (int unknown = 0; unknown < 2; unknown++)
    for (int32_t rank = 0; rank <= 4; rank++) {
      dlop_type inputs[CHECK_MAX_OPERANDS], outputs[CHECK_MAX_OPERANDS];
      char error[1024];
      for (int32_t i = 0; i < n && i < CHECK_MAX_OPERANDS; i++)
        inputs[i] = check_type(c->dtype, rank, rank_dims, unknown);
      int status = check_call_make_node(c->op, inputs, n, outputs, error, sizeof error);
      if (status != DLOP_OK)
        check_fail(c, "make_node_accepts_declared_dtype", inputs[0].shape, rank,
                   "make_node refused %d input(s) of a declared dtype at rank %d with %s dims: "
                   "%s: %s", (int)n, (int)rank, unknown ? "unknown" : "known",
                   dlop_status_name(status), error[0] ? error : "(no message)");
      for (int32_t o = 0; o < c->op->num_outputs; o++)
        if (outputs[o].dtype < 0 || outputs[o].dtype >= DLOP_DTYPE_COUNT ||
            outputs[o].ndim < 0 || outputs[o].ndim > DLOP_MAX_NDIM)
          check_fail(c, "make_node_accepts_declared_dtype", inputs[0].shape, rank,
                     "make_node gave output %d dtype %d and rank %d (expected a dlop dtype and a "
                     "rank 0..%d)", (int)o, (int)outputs[o].dtype, (int)outputs[o].ndim, DLOP_MAX_NDIM);
    }
}
END_TEST

static int same_type(const dlop_type *a, const dlop_type *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return 0;
  for (int32_t d = 0; d < a->ndim && d < DLOP_MAX_NDIM; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

START_TEST(make_node_is_pure) {
  const check_case *c = check_case_at(_i);
  int32_t n = check_num_inputs(c->op);
  for (int unknown = 0; unknown < 2; unknown++) {
    dlop_type inputs[CHECK_MAX_OPERANDS], copy[CHECK_MAX_OPERANDS];
    dlop_type first[CHECK_MAX_OPERANDS], second[CHECK_MAX_OPERANDS];
    char error[1024];
    for (int32_t i = 0; i < n && i < CHECK_MAX_OPERANDS; i++)
      inputs[i] = check_type(c->dtype, 3, rank_dims, unknown);
    memcpy(copy, inputs, sizeof inputs);
    int s1 = check_call_make_node(c->op, inputs, n, first, error, sizeof error);
    int s2 = check_call_make_node(c->op, inputs, n, second, error, sizeof error);
    if (memcmp(copy, inputs, sizeof(dlop_type) * (size_t)n) != 0)
      check_fail(c, "make_node_is_pure", inputs[0].shape, 3, "make_node changed its input types "
                 "(they are the host's: read them, never write them)");
    if (s1 != s2)
      check_fail(c, "make_node_is_pure", inputs[0].shape, 3, "make_node returned %s, then %s for "
                 "the same inputs", dlop_status_name(s1), dlop_status_name(s2));
    for (int32_t o = 0; o < c->op->num_outputs && s1 == DLOP_OK; o++)
      if (!same_type(&first[o], &second[o])) {
        char t1[DLOP_MAX_NDIM * 22 + 4], t2[DLOP_MAX_NDIM * 22 + 4];
        check_fail(c, "make_node_is_pure", inputs[0].shape, 3,
                   "make_node gave output %d %s %s, then %s %s for the same inputs (no state may "
                   "carry over between calls)", (int)o,
                   dlop_dtype_name((dlop_dtype)first[o].dtype),
                   check_shape_text(first[o].shape, first[o].ndim, t1, sizeof t1),
                   dlop_dtype_name((dlop_dtype)second[o].dtype),
                   check_shape_text(second[o].shape, second[o].ndim, t2, sizeof t2));
      }
  }
}
END_TEST

/* For every test shape: infer_shape on concrete shapes gives known dims that match every dim
 * make_node (and infer_shape on the static shapes) already knew, with known or unknown inputs. */
START_TEST(infer_shape_agrees) {
  const check_case *c = check_case_at(_i);
  const char *check = "infer_shape_agrees";
  int32_t n = check_num_inputs(c->op);
  if (n > CHECK_MAX_OPERANDS) check_fail(c, check, NULL, 0, "too many inputs for this suite");
  for (int s = 0; s < check_shape_count; s++) {
    const check_shape *shape = &check_shapes[s];
    for (int unknown = 0; unknown < 2; unknown++) {
      dlop_type statics[CHECK_MAX_OPERANDS], concrete[CHECK_MAX_OPERANDS];
      dlop_type node[CHECK_MAX_OPERANDS], inferred_static[CHECK_MAX_OPERANDS],
          inferred[CHECK_MAX_OPERANDS], again[CHECK_MAX_OPERANDS];
      char error[1024];
      for (int32_t i = 0; i < n; i++) {
        statics[i] = check_type(c->dtype, shape->ndim, shape->dims, unknown);
        concrete[i] = check_type(c->dtype, shape->ndim, shape->dims, 0);
      }
      int status = check_call_make_node(c->op, statics, n, node, error, sizeof error);
      if (status != DLOP_OK)
        check_fail(c, check, shape->dims, shape->ndim, "make_node refused %s dims: %s: %s",
                   unknown ? "unknown" : "known", dlop_status_name(status),
                   error[0] ? error : "(no message)");
      memcpy(inferred_static, node, sizeof node);
      status = check_call_infer_shape(c->op, statics, n, inferred_static, error, sizeof error);
      if (status != DLOP_OK)
        check_fail(c, check, shape->dims, shape->ndim, "infer_shape on the static shapes (%s "
                   "dims, as while a graph is built) failed: %s: %s", unknown ? "unknown" : "known",
                   dlop_status_name(status), error[0] ? error : "(no message)");
      memcpy(inferred, node, sizeof node);
      status = check_call_infer_shape(c->op, concrete, n, inferred, error, sizeof error);
      if (status != DLOP_OK)
        check_fail(c, check, shape->dims, shape->ndim, "infer_shape on concrete shapes failed: "
                   "%s: %s", dlop_status_name(status), error[0] ? error : "(no message)");
      memcpy(again, node, sizeof node);
      check_call_infer_shape(c->op, concrete, n, again, error, sizeof error);
      for (int32_t o = 0; o < c->op->num_outputs; o++) {
        char a[DLOP_MAX_NDIM * 22 + 4], b[DLOP_MAX_NDIM * 22 + 4];
        if (inferred[o].dtype != node[o].dtype || inferred[o].ndim != node[o].ndim)
          check_fail(c, check, shape->dims, shape->ndim, "infer_shape changed output %d from "
                     "make_node's %s rank %d to %s rank %d (it fills shapes only)", (int)o,
                     dlop_dtype_name((dlop_dtype)node[o].dtype), (int)node[o].ndim,
                     dlop_dtype_name((dlop_dtype)inferred[o].dtype), (int)inferred[o].ndim);
        if (!same_type(&inferred[o], &again[o]))
          check_fail(c, check, shape->dims, shape->ndim, "infer_shape gave output %d shape %s, "
                     "then %s for the same inputs", (int)o,
                     check_shape_text(inferred[o].shape, inferred[o].ndim, a, sizeof a),
                     check_shape_text(again[o].shape, again[o].ndim, b, sizeof b));
        for (int32_t d = 0; d < inferred[o].ndim; d++) {
          int64_t got = inferred[o].shape[d];
          if (got < 0)
            check_fail(c, check, shape->dims, shape->ndim, "infer_shape on concrete shapes left "
                       "output %d's dim %d unknown: %s", (int)o, (int)d,
                       check_shape_text(inferred[o].shape, inferred[o].ndim, a, sizeof a));
          const dlop_type *claims[2] = {&node[o], &inferred_static[o]};
          static const char *who[2] = {"make_node", "infer_shape on the static shapes"};
          for (int k = 0; k < 2; k++)
            if (claims[k]->shape[d] != DLOP_DIM_UNKNOWN && claims[k]->shape[d] != got)
              check_fail(c, check, shape->dims, shape->ndim,
                         "infer_shape gives output %d shape %s for these inputs, but %s said %s "
                         "(%s dims): dim %d is %lld, not %lld", (int)o,
                         check_shape_text(inferred[o].shape, inferred[o].ndim, a, sizeof a),
                         who[k], check_shape_text(claims[k]->shape, claims[k]->ndim, b, sizeof b),
                         unknown ? "unknown" : "known", (int)d, (long long)got,
                         (long long)claims[k]->shape[d]);
        }
      }
    }
  }
}
END_TEST

void check_add_node_tests(TCase *tc, int index) {
  tcase_add_loop_test(tc, make_node_accepts_declared_dtype, index, index + 1);
  tcase_add_loop_test(tc, make_node_is_pure, index, index + 1);
  tcase_add_loop_test(tc, infer_shape_agrees, index, index + 1);
}
