/* check_tests_values.c — values_match_reference: a dtype path that computes something else
 * fails even where no other device or dtype of the same op could tell (an int32 kernel that
 * returns garbage passes every other check). Each (device, dtype) runs the op on inputs that
 * every compared dtype holds exactly (small integers), and its results, converted to its dtype,
 * must match a reference: the plugin's reference function when its check info gives one
 * (dlop/check_info.h), else the same op on the same device in the reference dtype (float64 where
 * declared). The check info may also exclude dtypes that mean something else by design. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <dlop/kit/kernel_error.h>

#include "check_suite.h"

static const char *const check = "values_match_reference";

/* The run shapes of the values check: the case's shapes but the large one (small integers
 * summed a million times would leave every dtype's exact range). */
#define VALUES_MAX_ELEMENTS 4096

/* Which declared dtype stands for the others: the one that holds the most exactly. */
static const int reference_order[] = {DLOP_FLOAT64, DLOP_FLOAT32, DLOP_INT64, DLOP_INT32,
                                      DLOP_INT16, DLOP_FLOAT16, DLOP_INT8, DLOP_UINT8,
                                      DLOP_BFLOAT16, DLOP_BOOL};

static int reference_dtype(uint32_t declared) {
  for (size_t k = 0; k < sizeof reference_order / sizeof reference_order[0]; k++)
    if (declared & DLOP_DTYPE_BIT(reference_order[k])) return reference_order[k];
  return -1;
}

/* The integers a dtype holds exactly, and whose products and short sums it still holds: bool
 * 0..1, uint8 0..8, bfloat16 (8 significant bits: integers to 256) -4..4, the others -8..8. */
static void exact_range(int dtype, int *low, int *high) {
  *low = -8;
  *high = 8;
  if (dtype == DLOP_BOOL) *low = 0, *high = 1;
  else if (dtype == DLOP_UINT8) *low = 0;
  else if (dtype == DLOP_BFLOAT16) *low = -4, *high = 4;
}

/* The narrower float dtype of a and b (or whichever is a float; -1 for two non-floats). */
static int narrower_float(int a, int b) {
  int fa = a >= 0 && dlop_dtype_is_float((dlop_dtype)a), fb = b >= 0 && dlop_dtype_is_float((dlop_dtype)b);
  if (!fa) return fb ? b : -1;
  if (!fb) return a;
  /* fewer significant bits: bfloat16 8, float16 11, float32 24, float64 53 */
  static const int bits[DLOP_DTYPE_COUNT] = {[DLOP_BFLOAT16] = 8, [DLOP_FLOAT16] = 11,
                                             [DLOP_FLOAT32] = 24, [DLOP_FLOAT64] = 53};
  return bits[a] <= bits[b] ? a : b;
}

static uint64_t next_random(uint64_t *state) { /* splitmix64, as check_values.c */
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* 1 when make_node and infer_shape take shape's dims with these input dtypes. */
static int node_takes(const check_case *c, const check_shape *shape, const int32_t *dtypes) {
  check_shape typed = *shape;
  typed.mixed = 1;
  memcpy(typed.in_dtype, dtypes, sizeof typed.in_dtype);
  dlop_type inputs[CHECK_MAX_OPERANDS], outputs[CHECK_MAX_OPERANDS];
  int32_t n = check_num_inputs(c->op);
  for (int32_t i = 0; i < n; i++) inputs[i] = check_input_type(c->dtype, &typed, i, 0);
  char error[256];
  return check_call_make_node(c->op, inputs, n, outputs, error, sizeof error) == DLOP_OK &&
         check_call_infer_shape(c->op, inputs, n, outputs, error, sizeof error) == DLOP_OK;
}

/* The input dtypes of the reference dtype's node for one of the case's shapes: each input of the
 * case's dtype gets the reference dtype and the others keep theirs (a where's bool condition);
 * where make_node refuses that, the dtypes of the reference dtype's own accepted signatures.
 * 1 with the dtypes in out, 0 when the reference dtype takes none of them for these dims. */
static int reference_inputs(const check_case *reference, const check_shape *shape, int dtype,
                            const check_signature *accepted, int accepted_count, int32_t *out) {
  int32_t n = check_num_inputs(reference->op);
  int32_t candidate[CHECK_MAX_OPERANDS];
  memset(candidate, 0, sizeof candidate);
  for (int32_t i = 0; i < n; i++) {
    int own = check_input_dtype(dtype, shape, i);
    candidate[i] = own == dtype ? reference->dtype : own;
  }
  if (node_takes(reference, shape, candidate)) {
    memcpy(out, candidate, sizeof candidate);
    return 1;
  }
  for (int k = 0; k < accepted_count; k++) {
    for (int32_t i = 0; i < n; i++)
      candidate[i] = accepted[k].mixed ? accepted[k].in_dtype[i] : reference->dtype;
    if (node_takes(reference, shape, candidate)) {
      memcpy(out, candidate, sizeof candidate);
      return 1;
    }
  }
  return 0;
}

/* Float64 host tensors over values, for a reference function. */
static dlop_tensor host_tensor(double *data, int32_t ndim, const int64_t *shape) {
  dlop_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.type = DLOP_DEVICE_CPU;
  t.ndim = ndim;
  t.dtype = dlop_dtype_to_dl(DLOP_FLOAT64);
  t.shape = (int64_t *)shape;
  t.strides = NULL; /* C-contiguous */
  return t;
}

static int64_t numel_of(int32_t ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int32_t d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

/* The reference function's outputs for these inputs (malloc'ed arrays in expected). */
static void call_reference(const check_case *c, const dlop_check_op_info *entry,
                           const check_prepared *p, double *const *values, double **expected) {
  dlop_tensor inputs[CHECK_MAX_OPERANDS], outputs[CHECK_MAX_OPERANDS];
  int32_t input_dtypes[CHECK_MAX_OPERANDS], output_dtypes[CHECK_MAX_OPERANDS];
  for (int32_t i = 0; i < p->num_inputs; i++) {
    int32_t ndim;
    const int64_t *dims = check_input_dims(&p->shape, i, &ndim);
    inputs[i] = host_tensor(values[i], ndim, dims);
    input_dtypes[i] = check_input_dtype(c->dtype, &p->shape, i);
  }
  for (int32_t o = 0; o < p->num_outputs; o++) {
    const dlop_type *t = &p->concrete_outputs[o];
    int64_t n = numel_of(t->ndim, t->shape);
    expected[o] = malloc((size_t)n * sizeof(double) + 1);
    ck_assert_msg(expected[o] != NULL, "out of host memory");
    for (int64_t k = 0; k < n; k++) expected[o][k] = NAN; /* unwritten shows as a mismatch */
    outputs[o] = host_tensor(expected[o], t->ndim, t->shape);
    output_dtypes[o] = t->dtype;
  }
  char error[1024] = "";
  dlop_check_reference_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.op = c->op;
  args.params = check_default_params(c->op);
  args.num_params = c->op->num_params;
  args.num_inputs = p->num_inputs;
  args.inputs = inputs;
  args.input_dtypes = input_dtypes;
  args.num_outputs = p->num_outputs;
  args.outputs = outputs;
  args.output_dtypes = output_dtypes;
  args.error = error;
  args.error_size = sizeof error;
  check_where_run("the plugin's reference function (dlop_plugin_check_info)", p);
  int status = entry->reference(&args);
  check_where_returned();
  if (status != DLOP_OK)
    check_fail(c, check, p->shape.dims, p->shape.ndim, "the plugin's reference function for op "
               "%s (its check info) failed: %s: %s", c->op->name, dlop_status_name(status),
               error[0] ? error : "(no message)");
}

/* " (inputs at element 5: 3, -2)" when every input has the output's elements (an elementwise
 * op without broadcasting), so the element's inputs are known; "" otherwise. */
static void inputs_at(const check_prepared *p, int32_t o, int64_t element, double *const *values,
                      char *text, size_t size) {
  text[0] = '\0';
  int64_t n = numel_of(p->concrete_outputs[o].ndim, p->concrete_outputs[o].shape);
  for (int32_t i = 0; i < p->num_inputs; i++)
    if (check_input_numel(&p->shape, i) != n) return;
  size_t used = (size_t)snprintf(text, size, " (inputs at element %lld: ", (long long)element);
  for (int32_t i = 0; i < p->num_inputs && used < size; i++)
    used += (size_t)snprintf(text + used, size - used, "%s%g", i ? ", " : "", values[i][element]);
  if (used < size) snprintf(text + used, size - used, ")");
}

START_TEST(values_match_reference) {
  const check_case *c = check_case_at(_i);
  const dlop_op_desc *op = c->op;
  if (check_is_view_op(op)) {
    check_note(c, check, "skipped: a view op (view_map set) computes no values; its elements are "
               "its input's (view_same_elements_any_layout)");
    return;
  }
  if (check_info_get() == NULL && check_info_problem()[0] != '\0')
    check_fail(c, check, NULL, 0, "the plugin's check info cannot be used, so the values check "
               "cannot tell which dtypes to compare or how: %s (check_info_valid reports it)",
               check_info_problem());
  dlop_check_op_info entry;
  check_info_for_op(op, &entry);
  if (entry.values_excluded & DLOP_DTYPE_BIT(c->dtype)) {
    check_note(c, check, "skipped: the plugin's check info leaves %s out of the values check: %s",
               dlop_dtype_name((dlop_dtype)c->dtype), entry.values_excluded_why);
    return;
  }
  uint32_t compared = dlop_op_dtypes(op, c->device.type) & ~entry.values_excluded;
  check_case reference = *c;
  reference.dtype = reference_dtype(compared);
  const char *device = check_device_text(c->device);
  char against[256];
  if (entry.reference != NULL) {
    snprintf(against, sizeof against, "the plugin's reference function for op %s (its check "
             "info)", op->name);
  } else if (reference.dtype == c->dtype) {
    char others[256];
    dlop_format_dtypes(compared & ~DLOP_DTYPE_BIT(c->dtype), others, sizeof others);
    if (compared & ~DLOP_DTYPE_BIT(c->dtype))
      check_note(c, check, "%s is the reference: the other dtypes on %s (%s) are compared with it",
                 dlop_dtype_name((dlop_dtype)c->dtype), device, others);
    else
      check_note(c, check, "skipped: the only dtype of the op on %s that the values check "
                 "compares, and the plugin gives no reference function (dlop_plugin_check_info) "
                 "to compare it with", device);
    return;
  } else {
    snprintf(against, sizeof against, "the reference dtype %s (the same op on %s, on the same "
             "values)", dlop_dtype_name((dlop_dtype)reference.dtype), device);
  }

  int count;
  const check_shape *case_shapes = check_case_shapes(c, check, &count);
  check_shape *shapes = malloc(sizeof *shapes * (size_t)(count > 0 ? count : 1));
  ck_assert_msg(shapes != NULL, "out of host memory");
  memcpy(shapes, case_shapes, sizeof *shapes * (size_t)count); /* the cache is one case's */
  check_signature accepted[CHECK_MAX_SIGNATURES];
  int accepted_count = entry.reference ? 0 : check_signatures(op, reference.dtype, accepted,
                                                              NULL, NULL, 0);
  int compared_shapes = 0;
  for (int s = 0; s < count; s++) {
    const check_shape *shape = &shapes[s];
    int32_t n = check_num_inputs(op), ref_dtypes[CHECK_MAX_OPERANDS];
    int64_t largest = 0;
    for (int32_t i = 0; i < n; i++)
      if (check_input_numel(shape, i) > largest) largest = check_input_numel(shape, i);
    if (largest > VALUES_MAX_ELEMENTS) continue;
    if (!entry.reference &&
        !reference_inputs(&reference, shape, c->dtype, accepted, accepted_count, ref_dtypes))
      continue; /* the reference dtype takes no such inputs: nothing to compare with */
    /* Values every dtype of both sides holds: input i's range is that of its two dtypes. */
    double *values[CHECK_MAX_OPERANDS] = {NULL};
    uint64_t state = check_opts.seed * 0x9E3779B97F4A7C15ull + 0xD1B54A32D192ED03ull * (uint64_t)(s + 1);
    for (int32_t i = 0; i < n; i++) {
      int low, high, low2, high2;
      exact_range(check_input_dtype(c->dtype, shape, i), &low, &high);
      exact_range(entry.reference ? DLOP_FLOAT64 : ref_dtypes[i], &low2, &high2);
      if (low2 > low) low = low2;
      if (high2 < high) high = high2;
      int64_t elements = check_input_numel(shape, i);
      values[i] = malloc((size_t)elements * sizeof(double) + 1);
      ck_assert_msg(values[i] != NULL, "out of host memory");
      for (int64_t k = 0; k < elements; k++)
        values[i][k] = (double)(low + (int64_t)(next_random(&state) % (uint64_t)(high - low + 1)));
    }
    check_prepared p, pr;
    check_run_result r, rr;
    check_prepare(c, check, shape, 0, &p);
    check_run_values(&p, values, 0, &r);
    check_release(&p);
    check_require_ok(&p, check, &r);
    double *expected[CHECK_MAX_OPERANDS] = {NULL};
    int tolerance_dtype = -1; /* the narrowest float dtype involved */
    for (int32_t i = 0; i < n; i++)
      tolerance_dtype = narrower_float(tolerance_dtype, check_input_dtype(c->dtype, shape, i));
    if (entry.reference) {
      call_reference(c, &entry, &p, values, expected);
    } else {
      check_shape typed = *shape;
      typed.mixed = 1;
      memcpy(typed.in_dtype, ref_dtypes, sizeof typed.in_dtype);
      check_prepare(&reference, check, &typed, 0, &pr);
      check_run_values(&pr, values, 0, &rr);
      check_release(&pr);
      if (rr.status != DLOP_OK)
        check_fail(c, check, shape->dims, shape->ndim, "the run of the reference dtype %s failed "
                   "(so %s could not be compared): %s: %s", dlop_dtype_name((dlop_dtype)reference.dtype),
                   dlop_dtype_name((dlop_dtype)c->dtype), dlop_status_name(rr.status),
                   rr.error[0] ? rr.error : "(no message)");
      for (int32_t o = 0; o < pr.num_outputs; o++) {
        int64_t elements = rr.out[o].numel;
        expected[o] = malloc((size_t)elements * sizeof(double) + 1);
        ck_assert_msg(expected[o] != NULL, "out of host memory");
        for (int64_t k = 0; k < elements; k++)
          expected[o][k] = check_value(rr.values[o], pr.outputs[o].dtype, k);
        tolerance_dtype = narrower_float(tolerance_dtype, pr.outputs[o].dtype);
      }
    }
    for (int32_t o = 0; o < p.num_outputs; o++) {
      int dtype = p.outputs[o].dtype;
      int tol = narrower_float(tolerance_dtype, dtype);
      int64_t elements = r.out[o].numel, first;
      if (!entry.reference && rr.out[o].numel != elements)
        check_fail(c, check, shape->dims, shape->ndim, "output %d has %lld elements, but %lld "
                   "with the reference dtype %s on the same input shapes (infer_shape)", (int)o,
                   (long long)elements, (long long)rr.out[o].numel,
                   dlop_dtype_name((dlop_dtype)reference.dtype));
      char report[1024], rule[256], where[256];
      int64_t bad = check_compare_reference(expected[o], r.values[o], dtype, tol < 0 ? dtype : tol,
                                            elements, report, sizeof report, &first);
      if (bad == 0) continue;
      int low, high;
      exact_range(c->dtype, &low, &high);
      inputs_at(&p, o, first, values, where, sizeof where);
      const char *name = dlop_dtype_name((dlop_dtype)c->dtype);
      char hint[512];
      if (entry.reference)
        snprintf(hint, sizeof hint, "the %s kernel (or the reference function) computes "
                 "something else", name);
      else
        snprintf(hint, sizeof hint, "if %s computes something else by design (integer "
                 "division, bitwise ops, saturation), the plugin's check info excludes it "
                 "(dlop_plugin_check_info, docs/compliance.md)", name);
      check_fail(c, check, p.shape.dims, p.shape.ndim,
                 "%s results disagree with %s on inputs every compared dtype holds exactly "
                 "(small integers, in [%d, %d] for %s): %lld of %lld elements of output %d "
                 "differ (compared %s): %s%s; %s", name, against, low, high, name,
                 (long long)bad, (long long)elements, (int)o,
                 check_reference_rule(dtype, tol < 0 ? dtype : tol, rule, sizeof rule), report,
                 where, hint);
    }
    compared_shapes++;
    for (int32_t o = 0; o < p.num_outputs; o++) free(expected[o]);
    for (int32_t i = 0; i < n; i++) free(values[i]);
    check_run_result_free(&p, &r);
    if (!entry.reference) check_run_result_free(&pr, &rr);
  }
  free(shapes);
  if (compared_shapes == 0)
    check_note(c, check, "skipped: %s takes none of this case's input shapes of at most %d "
               "elements, so there was nothing to compare with", against, VALUES_MAX_ELEMENTS);
}
END_TEST

void check_add_values_tests(TCase *tc, int index) {
  check_add_test(tc, values_match_reference, index);
}
