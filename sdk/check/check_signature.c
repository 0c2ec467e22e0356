/* check_signature.c — the input signatures the suite tests an op with, found by asking the op:
 * candidate families (every input the same shape at ranks 0..4, broadcast-compatible pairs,
 * matmul-compatible pairs, gemm triples; then each with one input of another dtype, as a
 * where's bool condition) go to make_node, and those it accepts give the
 * concrete shapes of the run checks (each dim scaled, dims that must match kept equal). */
#include <stdio.h>
#include <string.h>

#include "check_suite.h"

/* ---- shapes of several inputs ------------------------------------------------------------ */

const int64_t *check_input_dims(const check_shape *shape, int32_t i, int32_t *ndim) {
  if (!shape->per_input) {
    *ndim = shape->ndim;
    return shape->dims;
  }
  *ndim = shape->in_ndim[i];
  return shape->in_dims[i];
}

int check_input_dtype(int dtype, const check_shape *shape, int32_t i) {
  return shape->mixed ? shape->in_dtype[i] : dtype;
}

dlop_type check_input_type(int dtype, const check_shape *shape, int32_t i, int unknown) {
  int32_t ndim;
  const int64_t *dims = check_input_dims(shape, i, &ndim);
  return check_type(check_input_dtype(dtype, shape, i), ndim, dims, unknown);
}

int64_t check_input_numel(const check_shape *shape, int32_t i) {
  int32_t ndim;
  const int64_t *dims = check_input_dims(shape, i, &ndim);
  int64_t n = 1;
  for (int32_t d = 0; d < ndim; d++) n *= dims[d];
  return n;
}

/* ---- candidates -------------------------------------------------------------------------- */

#define S(...) {__VA_ARGS__}
typedef struct pattern {
  const char *family;
  int32_t inputs; /* 0: any number (every input gets in[0]); else exactly this many */
  int32_t ndim[3];
  int8_t dims[3][4];
} pattern;

/* Same shape at rank 1 first: it is the preferred signature (run shapes like (7), (1048579)). */
static const pattern patterns[] = {
    {"same shape", 0, S(1), S(S(0))},
    {"same shape", 0, S(2), S(S(0, 1))},
    {"same shape", 0, S(3), S(S(0, 1, 2))},
    {"same shape", 0, S(4), S(S(0, 1, 2, 3))},
    {"same shape", 0, S(0), S(S(0))},
    {"broadcast", 2, S(2, 1), S(S(0, 1), S(1))},
    {"broadcast", 2, S(2, 2), S(S(0, 1), S(CHECK_DIM_ONE, 1))},
    {"broadcast", 2, S(2, 2), S(S(0, CHECK_DIM_ONE), S(CHECK_DIM_ONE, 1))},
    {"broadcast", 2, S(1, 0), S(S(0), S(0))},
    {"matmul", 2, S(2, 2), S(S(0, 1), S(1, 2))},
    {"matmul", 2, S(3, 3), S(S(0, 1, 2), S(0, 2, 3))},
    {"matmul", 2, S(1, 2), S(S(0), S(0, 1))},
    {"matmul", 2, S(3, 2), S(S(0, 1, 2), S(2, 3))},
    {"gemm", 3, S(2, 2, 2), S(S(0, 1), S(1, 2), S(0, 2))},
    {"gemm", 3, S(2, 2, 1), S(S(0, 1), S(1, 2), S(2))},
    /* transposed operands (gemm's trans_a, trans_b given with --param) */
    {"gemm", 3, S(2, 2, 2), S(S(1, 0), S(1, 2), S(0, 2))},
    {"gemm", 3, S(2, 2, 2), S(S(0, 1), S(2, 1), S(0, 2))},
    {"gemm", 3, S(2, 2, 2), S(S(1, 0), S(2, 1), S(0, 2))},
};
#define PATTERN_COUNT ((int)(sizeof patterns / sizeof patterns[0]))

static int build(const pattern *p, int32_t n, check_signature *s) {
  if (p->inputs != 0 && p->inputs != n) return 0;
  memset(s, 0, sizeof *s);
  s->family = p->family;
  s->num_inputs = n;
  for (int32_t i = 0; i < n; i++) {
    int32_t k = p->inputs ? i : 0;
    s->ndim[i] = p->ndim[k];
    for (int32_t d = 0; d < s->ndim[i]; d++) {
      s->dims[i][d] = p->dims[k][d];
      if (s->dims[i][d] + 1 > s->num_symbols) s->num_symbols = s->dims[i][d] + 1;
    }
  }
  return 1;
}

check_shape check_instantiate(const check_signature *s, const int64_t *values) {
  check_shape shape;
  memset(&shape, 0, sizeof shape);
  shape.no_unknown = s->no_unknown;
  shape.num_inputs = s->num_inputs;
  shape.mixed = s->mixed;
  memcpy(shape.in_dtype, s->in_dtype, sizeof shape.in_dtype);
  for (int32_t i = 0; i < s->num_inputs; i++) {
    shape.in_ndim[i] = s->ndim[i];
    for (int32_t d = 0; d < s->ndim[i]; d++)
      shape.in_dims[i][d] = s->dims[i][d] == CHECK_DIM_ONE ? 1 : values[s->dims[i][d]];
    if (i > 0 && (shape.in_ndim[i] != shape.in_ndim[0] ||
                  memcmp(shape.in_dims[i], shape.in_dims[0], sizeof shape.in_dims[0]) != 0))
      shape.per_input = 1;
  }
  shape.ndim = shape.in_ndim[0];
  memcpy(shape.dims, shape.in_dims[0], sizeof shape.dims);
  return shape;
}

const char *check_signature_text(const check_signature *s, char *buffer, size_t size) {
  static const char names[] = "abcd";
  size_t used = (size_t)snprintf(buffer, size, "%s ", s->family);
  for (int32_t i = 0; i < s->num_inputs && used < size; i++) {
    used += (size_t)snprintf(buffer + used, size - used, "%s(", i ? " x " : "");
    for (int32_t d = 0; d < s->ndim[i] && used < size; d++)
      used += (size_t)snprintf(buffer + used, size - used, "%s%c", d ? ", " : "",
                               s->dims[i][d] == CHECK_DIM_ONE ? '1' : names[s->dims[i][d]]);
    if (used < size) used += (size_t)snprintf(buffer + used, size - used, ")");
    if (s->mixed && used < size)
      used += (size_t)snprintf(buffer + used, size - used, " %s",
                               dlop_dtype_name((dlop_dtype)s->in_dtype[i]));
  }
  return buffer;
}

static int accepts(const dlop_op_desc *op, int dtype, const check_signature *s, int unknown,
                   char *error, size_t error_size) {
  static const int64_t values[CHECK_MAX_SYMBOLS] = {5, 3, 7, 9};
  check_shape shape = check_instantiate(s, values);
  dlop_type inputs[CHECK_MAX_OPERANDS], outputs[CHECK_MAX_OPERANDS];
  for (int32_t i = 0; i < s->num_inputs; i++) inputs[i] = check_input_type(dtype, &shape, i, unknown);
  return check_call_make_node(op, inputs, s->num_inputs, outputs, error, error_size) == DLOP_OK;
}

/* One pass over the candidate patterns; with substitute >= 0, input `input` of each candidate
 * gets that dtype and the others the case's. */
static void search(const dlop_op_desc *op, int dtype, int32_t n, int input, int substitute,
                   check_signature *accepted, int *count, int *tried, char *report,
                   size_t report_size, size_t *used) {
  for (int k = 0; k < PATTERN_COUNT && *count < CHECK_MAX_SIGNATURES; k++) {
    check_signature s;
    if (!build(&patterns[k], n, &s)) continue;
    if (substitute >= 0) {
      s.mixed = 1;
      for (int32_t i = 0; i < n; i++) s.in_dtype[i] = i == input ? substitute : dtype;
    }
    (*tried)++;
    char error[512];
    if (!accepts(op, dtype, &s, 0, error, sizeof error)) {
      if (report && *used + 1 < report_size && *tried <= 6) {
        char text[200];
        *used += (size_t)snprintf(report + *used, report_size - *used, "%s%s: %s",
                                  *used ? "; " : "", check_signature_text(&s, text, sizeof text),
                                  error[0] ? error : "(no message)");
      }
      continue;
    }
    s.no_unknown = !accepts(op, dtype, &s, 1, error, sizeof error);
    accepted[(*count)++] = s;
  }
}

int check_signatures(const dlop_op_desc *op, int dtype, check_signature *accepted,
                     int *candidates, char *report, size_t report_size) {
  int32_t n = check_num_inputs(op);
  int count = 0, tried = 0;
  size_t used = 0;
  if (report && report_size) report[0] = '\0';
  if (n < 1 || n > CHECK_MAX_OPERANDS || op->num_outputs > CHECK_MAX_OPERANDS) return 0;
  search(op, dtype, n, -1, -1, accepted, &count, &tried, report, report_size, &used);
  if (count > 0 || n < 2) {
    if (candidates) *candidates = tried;
    return count;
  }
  /* Mixed dtypes: one input of another dtype, bool first (conditions, masks), then the op's
   * declared dtypes in order; the first input and dtype make_node takes anything with win, so
   * the signatures of a case stay few. */
  uint32_t mask = dlop_op_dtypes(op, DLOP_DEVICE_CPU) | dlop_op_dtypes(op, DLOP_DEVICE_CUDA) |
                  DLOP_DTYPE_BIT(DLOP_BOOL);
  for (int32_t input = 0; input < n && count == 0; input++)
    for (int other = 0; other < DLOP_DTYPE_COUNT && count == 0; other++)
      if (other != dtype && (mask & DLOP_DTYPE_BIT(other)))
        search(op, dtype, n, input, other, accepted, &count, &tried, report, report_size, &used);
  if (candidates) *candidates = tried;
  return count;
}

/* ---- the shapes of a case ---------------------------------------------------------------- */

/* make_node, then infer_shape, on shape's inputs with known dims (as a run sees them): the
 * first non-OK status with its message in error, or DLOP_OK with the outputs' shapes. */
static int concrete_node(const check_case *c, const check_shape *shape, dlop_type *outputs,
                         char *error, size_t error_size) {
  int32_t n = check_num_inputs(c->op);
  dlop_type inputs[CHECK_MAX_OPERANDS];
  for (int32_t i = 0; i < n; i++) inputs[i] = check_input_type(c->dtype, shape, i, 0);
  int status = check_call_make_node(c->op, inputs, n, outputs, error, error_size);
  if (status == DLOP_OK)
    status = check_call_infer_shape(c->op, inputs, n, outputs, error, error_size);
  return status;
}

/* The measure the scaling targets: the most elements of any input or output (outputs from
 * make_node and infer_shape; only the inputs when those fail). */
static int64_t largest_operand(const check_case *c, const check_shape *shape) {
  int32_t n = check_num_inputs(c->op);
  dlop_type outputs[CHECK_MAX_OPERANDS];
  int64_t most = 0;
  for (int32_t i = 0; i < n; i++) {
    int64_t e = check_input_numel(shape, i);
    if (e > most) most = e;
  }
  char error[256];
  if (concrete_node(c, shape, outputs, error, sizeof error) != DLOP_OK) return most;
  for (int32_t o = 0; o < c->op->num_outputs; o++) {
    int64_t e = 1;
    for (int32_t d = 0; d < outputs[o].ndim && d < DLOP_MAX_NDIM; d++)
      e *= outputs[o].shape[d] > 0 ? outputs[o].shape[d] : 0;
    if (e > most) most = e;
  }
  return most;
}

static check_shape scaled(const check_case *c, const check_signature *s, int64_t target) {
  int64_t values[CHECK_MAX_SYMBOLS] = {1, 3, 5, 7};
  if (target <= 1) /* 0: every dim 0 (empty); 1: every dim 1 (one element) */
    for (int k = 0; k < CHECK_MAX_SYMBOLS; k++) values[k] = target < 0 ? 0 : target;
  if (s->num_symbols == 0 || target <= 1) return check_instantiate(s, values);
  int64_t low = 1, high = 1;
  /* the smallest first symbol whose largest operand reaches target (monotonic in it) */
  for (;;) {
    values[0] = high;
    check_shape shape = check_instantiate(s, values);
    if (largest_operand(c, &shape) >= target || high >= ((int64_t)1 << 26)) break;
    low = high + 1;
    high *= 2;
  }
  while (low < high) {
    int64_t mid = low + (high - low) / 2;
    values[0] = mid;
    check_shape shape = check_instantiate(s, values);
    if (largest_operand(c, &shape) >= target) high = mid;
    else low = mid + 1;
  }
  values[0] = high;
  return check_instantiate(s, values);
}

typedef struct case_shapes {
  const check_case *c;
  int preferred; /* index into accepted: same shape at rank >= 1, else matmul, else the first */
  check_signature accepted[CHECK_MAX_SIGNATURES];
  int accepted_count;
  check_shape shapes[96];
  int count;
} case_shapes;

/* Per process (each Check test runs in its own), for the one case it checks. */
static case_shapes cache;

/* A view op's parameters (broadcast_to's shape, reshape's) fix which input shapes it takes:
 * of the sizes derived from an accepted signature, it gets those make_node and infer_shape
 * accept (known dims); any other op gets every one (a refusal fails its checks). */
static int view_op_takes(const check_case *c, const check_shape *shape) {
  if (!check_is_view_op(c->op)) return 1;
  dlop_type outputs[CHECK_MAX_OPERANDS];
  char error[256];
  return concrete_node(c, shape, outputs, error, sizeof error) == DLOP_OK;
}

int check_refuses_empty(const check_case *c, const check_shape *shape) {
  int32_t n = check_num_inputs(c->op);
  int empty = 0;
  for (int32_t i = 0; i < n; i++) empty |= check_input_numel(shape, i) == 0;
  if (!empty) return 0;
  dlop_type outputs[CHECK_MAX_OPERANDS];
  char error[256];
  return concrete_node(c, shape, outputs, error, sizeof error) != DLOP_OK && error[0] != '\0';
}

static void add(case_shapes *cs, const check_case *c, check_shape shape) {
  if (!view_op_takes(c, &shape) || check_refuses_empty(c, &shape)) return;
  if (cs->count < (int)(sizeof cs->shapes / sizeof cs->shapes[0]) - 1) cs->shapes[cs->count++] = shape;
}

static case_shapes *shapes_of(const check_case *c, const char *check) {
  if (cache.c == c) return &cache;
  memset(&cache, 0, sizeof cache);
  char report[2048];
  int candidates = 0;
  cache.accepted_count = check_signatures(c->op, c->dtype, cache.accepted, &candidates, report,
                                          sizeof report);
  if (cache.accepted_count == 0)
    check_fail(c, check, NULL, 0, "make_node accepted none of the %d candidate input signatures "
               "for the declared dtype %s (every input the same shape at ranks 0..4, broadcast "
               "and matmul pairs, gemm triples, then each with one input of another dtype; see "
               "docs/compliance.md): %s", candidates,
               dlop_dtype_name((dlop_dtype)c->dtype), report);
  /* Same shape: the classic list (0-d, empty, one element, odd sizes of ranks 1..4). */
  static const int64_t same[][5] = {{0}, {1, 0}, {1, 1}, {1, 7}, {3, 3, 0, 5},
                                    {2, 5, 3}, {3, 2, 3, 5}, {4, 2, 1, 3, 4}};
  for (size_t j = 0; j < sizeof same / sizeof same[0]; j++) /* in the table's order */
    for (int k = 0; k < cache.accepted_count; k++)
      if (strcmp(cache.accepted[k].family, "same shape") == 0 && cache.accepted[k].ndim[0] == same[j][0])
        add(&cache, c, check_instantiate(&cache.accepted[k], &same[j][1]));
  for (int k = 0; k < cache.accepted_count; k++) {
    const check_signature *s = &cache.accepted[k];
    if (strcmp(s->family, "same shape") == 0) continue;
    /* Others: odd sizes, all ones, then each symbol 0 in turn. */
    int64_t values[CHECK_MAX_SYMBOLS] = {5, 3, 7, 9};
    add(&cache, c, check_instantiate(s, values));
    int64_t ones[CHECK_MAX_SYMBOLS] = {1, 1, 1, 1};
    add(&cache, c, check_instantiate(s, ones));
    for (int32_t z = 0; z < s->num_symbols; z++) {
      int64_t zero[CHECK_MAX_SYMBOLS] = {5, 3, 7, 9};
      zero[z] = 0;
      add(&cache, c, check_instantiate(s, zero));
    }
  }
  cache.preferred = -1;
  for (int k = 0; k < cache.accepted_count && cache.preferred < 0; k++)
    if (strcmp(cache.accepted[k].family, "same shape") == 0 && cache.accepted[k].ndim[0] >= 1)
      cache.preferred = k;
  for (int k = 0; k < cache.accepted_count && cache.preferred < 0; k++)
    if (strcmp(cache.accepted[k].family, "matmul") == 0) cache.preferred = k;
  if (cache.preferred < 0) cache.preferred = 0;
  add(&cache, c, scaled(c, &cache.accepted[cache.preferred], check_opts.large_elements)); /* the large one, last */
  cache.c = c;
  return &cache;
}

const check_shape *check_case_shapes(const check_case *c, const char *check, int *count) {
  case_shapes *cs = shapes_of(c, check);
  *count = cs->count;
  return cs->shapes;
}

check_shape check_sized_shape(const check_case *c, const char *check, int64_t target) {
  case_shapes *cs = shapes_of(c, check);
  return scaled(c, &cs->accepted[cs->preferred], target);
}

int check_nontrivial_shapes(const check_shape *shapes, int count, int *indices, int max) {
  int found = 0;
  for (int s = 0; s < count && found < max; s++) {
    /* input 0 has 2+ elements and no input is empty (unused per-input slots count 1) */
    int ok = check_input_numel(&shapes[s], 0) > 1;
    for (int32_t i = 1; i < CHECK_MAX_OPERANDS && ok && shapes[s].per_input; i++)
      ok = check_input_numel(&shapes[s], i) > 0;
    if (ok) indices[found++] = s;
  }
  return found;
}

int check_pick_three(const check_shape *shapes, int count, int *indices) {
  int all[96];
  int found = check_nontrivial_shapes(shapes, count, all, 96);
  if (found <= 3) {
    for (int k = 0; k < found; k++) indices[k] = all[k];
    return found;
  }
  indices[0] = all[0];
  indices[1] = all[found / 2];
  indices[2] = all[found - 1];
  return 3;
}
