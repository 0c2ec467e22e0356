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

/* The first accepted signature (known dims) for the first declared dtype, at odd sizes. */
static int first_accepted_shape(const dlop_op_desc *op, check_shape *shape,
                                check_signature *signature) {
  check_signature accepted[CHECK_MAX_SIGNATURES];
  int count = check_signatures(op, first_declared_dtype(op), accepted, NULL, NULL, 0);
  if (count == 0) return 0;
  static const int64_t values[CHECK_MAX_SYMBOLS] = {5, 3, 7, 9};
  *shape = check_instantiate(&accepted[0], values);
  if (signature) *signature = accepted[0];
  return 1;
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
  /* shapes make_node accepts for a declared dtype, so only the dtype is wrong */
  check_shape shape;
  int have = first_accepted_shape(c->op, &shape, NULL), first = first_declared_dtype(c->op);
  for (int dtype = 0; dtype < DLOP_DTYPE_COUNT; dtype++) {
    if (mask & DLOP_DTYPE_BIT(dtype)) continue;
    dlop_type inputs[CHECK_MAX_OPERANDS];
    for (int32_t i = 0; i < n; i++) {
      inputs[i] = have ? check_input_type(dtype, &shape, i, 0) : check_type(dtype, 1, rank_dims, 0);
      /* a mixed signature keeps its other-dtype input (a where's bool condition) */
      if (have && (!shape.mixed || shape.in_dtype[i] == first)) inputs[i].dtype = dtype;
    }
    char what[160];
    snprintf(what, sizeof what, "inputs of dtype %s, which it declares on no device",
             dlop_dtype_name((dlop_dtype)dtype));
    expect_refusal(c, "make_node_rejects_undeclared_dtypes", inputs, n, what);
  }
}
END_TEST

/* Where make_node accepted a signature in which two inputs share a dim (same-shape inputs,
 * matmul's k), that dim made to disagree must be refused with a status and a message; when
 * several dims are shared, refusing one of the mismatches is enough (a concatenation may let
 * its axis differ). Ops with no such signature have nothing to mismatch. */
START_TEST(make_node_rejects_incompatible_shapes) {
  const check_case *c = check_case_at(_i);
  const char *check = "make_node_rejects_incompatible_shapes";
  int dtype = first_declared_dtype(c->op);
  check_signature accepted[CHECK_MAX_SIGNATURES];
  int count = check_signatures(c->op, dtype, accepted, NULL, NULL, 0);
  static const int64_t values[CHECK_MAX_SYMBOLS] = {5, 3, 7, 9};
  for (int k = 0; k < count; k++) {
    const check_signature *sig = &accepted[k];
    int tried = 0;
    char last[512] = "";
    for (int32_t symbol = 0; symbol < sig->num_symbols; symbol++) {
      /* the last input using symbol gets another size for it, if an earlier one uses it too */
      int32_t users = 0, last_user = -1;
      for (int32_t i = 0; i < sig->num_inputs; i++)
        for (int32_t d = 0; d < sig->ndim[i]; d++)
          if (sig->dims[i][d] == symbol) {
            if (last_user != i) users++;
            last_user = i;
            break;
          }
      if (users < 2) continue;
      check_shape shape = check_instantiate(sig, values);
      shape.per_input = 1;
      for (int32_t d = 0; d < sig->ndim[last_user]; d++)
        if (sig->dims[last_user][d] == symbol) shape.in_dims[last_user][d] = values[symbol] + 2;
      dlop_type inputs[CHECK_MAX_OPERANDS], outputs[CHECK_MAX_OPERANDS];
      for (int32_t i = 0; i < sig->num_inputs; i++) inputs[i] = check_input_type(dtype, &shape, i, 0);
      char error[1024], a[DLOP_MAX_NDIM * 22 + 4], b[DLOP_MAX_NDIM * 22 + 4];
      snprintf(last, sizeof last, "input 0 of shape %s with input %d of shape %s (%s), whose "
               "shared dims disagree",
               check_shape_text(shape.in_dims[0], shape.in_ndim[0], a, sizeof a), (int)last_user,
               check_shape_text(shape.in_dims[last_user], shape.in_ndim[last_user], b, sizeof b),
               sig->family);
      tried++;
      int status = check_call_make_node(c->op, inputs, sig->num_inputs, outputs, error,
                                        sizeof error);
      if (status != DLOP_OK) {
        if (error[0] == '\0')
          check_fail(c, check, NULL, 0, "make_node refused %s with %s but wrote no message into "
                     "args->error (say what was wrong and what was expected)", last,
                     dlop_status_name(status));
        return; /* refused with a message */
      }
    }
    if (tried)
      check_fail(c, check, NULL, 0, "make_node accepted every mismatch of the dims its inputs "
                 "share, last %s (expected a non-OK status, such as DLOP_SHAPE_ERROR, and a "
                 "message)", last);
  }
  check_note(c, check, "skipped: no accepted input signature has a dim shared by two inputs");
}
END_TEST

void check_add_op_tests(TCase *tc, int index) {
  const check_case *c = check_case_at(index);
  check_add_test(tc, make_node_rejects_wrong_arity, index);
  check_add_test(tc, make_node_rejects_undeclared_dtypes, index);
  if (check_num_inputs(c->op) >= 2)
    check_add_test(tc, make_node_rejects_incompatible_shapes, index);
}

/* ---- per (device, dtype) ----------------------------------------------------------------- */

/* The signature search itself: make_node must accept at least one candidate for a declared
 * dtype; candidates it refuses are not applicable to this op (a note lists what it took). */
START_TEST(make_node_accepts_declared_dtype) {
  const check_case *c = check_case_at(_i);
  const char *check = "make_node_accepts_declared_dtype";
  int count;
  check_case_shapes(c, check, &count); /* fails the test when none is accepted */
  check_signature accepted[CHECK_MAX_SIGNATURES];
  int candidates = 0;
  int n = check_signatures(c->op, c->dtype, accepted, &candidates, NULL, 0);
  char list[2048];
  size_t used = 0;
  list[0] = '\0';
  static const int64_t values[CHECK_MAX_SYMBOLS] = {5, 3, 7, 9};
  for (int k = 0; k < n; k++) {
    char text[160];
    if (used < sizeof list)
      used += (size_t)snprintf(list + used, sizeof list - used, "%s%s%s", k ? "; " : "",
                               check_signature_text(&accepted[k], text, sizeof text),
                               accepted[k].no_unknown ? " (known dims only)" : "");
    check_shape shape = check_instantiate(&accepted[k], values);
    for (int unknown = 0; unknown < 2 - accepted[k].no_unknown; unknown++) {
      dlop_type inputs[CHECK_MAX_OPERANDS], outputs[CHECK_MAX_OPERANDS];
      char error[1024];
      for (int32_t i = 0; i < accepted[k].num_inputs; i++)
        inputs[i] = check_input_type(c->dtype, &shape, i, unknown);
      check_report_shapes(&shape);
      check_call_make_node(c->op, inputs, accepted[k].num_inputs, outputs, error, sizeof error);
      for (int32_t o = 0; o < c->op->num_outputs; o++)
        if (outputs[o].dtype < 0 || outputs[o].dtype >= DLOP_DTYPE_COUNT ||
            outputs[o].ndim < 0 || outputs[o].ndim > DLOP_MAX_NDIM)
          check_fail(c, check, shape.dims, shape.ndim,
                     "make_node gave output %d dtype %d and rank %d (expected a dlop dtype and a "
                     "rank 0..%d)", (int)o, (int)outputs[o].dtype, (int)outputs[o].ndim, DLOP_MAX_NDIM);
    }
  }
  /* Said once per (op, device) unless a dtype accepts other signatures than the first. */
  int first = -1;
  uint32_t mask = dlop_op_dtypes(c->op, (dlop_device_type)c->device.type);
  for (int d = DLOP_DTYPE_COUNT - 1; d >= 0; d--)
    if (mask & DLOP_DTYPE_BIT(d)) first = d;
  int differs = c->dtype != first;
  if (differs) {
    check_signature theirs[CHECK_MAX_SIGNATURES];
    int m = check_signatures(c->op, first, theirs, NULL, NULL, 0);
    differs = m != n;
    for (int k = 0; k < n && !differs; k++)
      differs = memcmp(theirs[k].ndim, accepted[k].ndim, sizeof theirs[k].ndim) != 0 ||
                memcmp(theirs[k].dims, accepted[k].dims, sizeof theirs[k].dims) != 0 ||
                theirs[k].mixed != accepted[k].mixed;
  }
  if (n < candidates && (c->dtype == first || differs))
    check_note(c, check, "make_node accepted %d of %d candidate input signatures (the others do "
               "not apply to this op): %s", n, candidates, list);
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
  int count;
  check_case_shapes(c, "make_node_is_pure", &count); /* fails when no signature is accepted */
  check_signature accepted[CHECK_MAX_SIGNATURES];
  int signatures = check_signatures(c->op, c->dtype, accepted, NULL, NULL, 0);
  for (int step = 0; step < 2 * signatures; step++) {
    int unknown = step % 2;
    const check_signature *sig = &accepted[step / 2];
    if (unknown && sig->no_unknown) continue;
    check_shape shape = check_instantiate(sig, rank_dims);
    check_report_shapes(&shape);
    dlop_type inputs[CHECK_MAX_OPERANDS], copy[CHECK_MAX_OPERANDS];
    dlop_type first[CHECK_MAX_OPERANDS], second[CHECK_MAX_OPERANDS];
    char error[1024];
    memset(inputs, 0, sizeof inputs);
    for (int32_t i = 0; i < n && i < CHECK_MAX_OPERANDS; i++)
      inputs[i] = check_input_type(c->dtype, &shape, i, unknown);
    memcpy(copy, inputs, sizeof inputs);
    int s1 = check_call_make_node(c->op, inputs, n, first, error, sizeof error);
    int s2 = check_call_make_node(c->op, inputs, n, second, error, sizeof error);
    if (memcmp(copy, inputs, sizeof(dlop_type) * (size_t)n) != 0)
      check_fail(c, "make_node_is_pure", shape.dims, shape.ndim, "make_node changed its input types "
                 "(they are the host's: read them, never write them)");
    if (s1 != s2)
      check_fail(c, "make_node_is_pure", shape.dims, shape.ndim, "make_node returned %s, then %s for "
                 "the same inputs", dlop_status_name(s1), dlop_status_name(s2));
    for (int32_t o = 0; o < c->op->num_outputs && s1 == DLOP_OK; o++)
      if (!same_type(&first[o], &second[o])) {
        char t1[DLOP_MAX_NDIM * 22 + 4], t2[DLOP_MAX_NDIM * 22 + 4];
        check_fail(c, "make_node_is_pure", shape.dims, shape.ndim,
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
  int count;
  const check_shape *shapes = check_case_shapes(c, check, &count);
  for (int s = 0; s < count; s++) {
    const check_shape *shape = &shapes[s];
    check_report_shapes(shape);
    for (int unknown = 0; unknown < 2 - shape->no_unknown; unknown++) {
      dlop_type statics[CHECK_MAX_OPERANDS], concrete[CHECK_MAX_OPERANDS];
      dlop_type node[CHECK_MAX_OPERANDS], inferred_static[CHECK_MAX_OPERANDS],
          inferred[CHECK_MAX_OPERANDS], again[CHECK_MAX_OPERANDS];
      char error[1024];
      for (int32_t i = 0; i < n; i++) {
        statics[i] = check_input_type(c->dtype, shape, i, unknown);
        concrete[i] = check_input_type(c->dtype, shape, i, 0);
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
  check_add_test(tc, make_node_accepts_declared_dtype, index);
  check_add_test(tc, make_node_is_pure, index);
  check_add_test(tc, infer_shape_agrees, index);
}
