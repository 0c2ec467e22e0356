/* fusion_row_source.c — the source of a row group's kernel: per reduction a phase function (the
 * members its input needs, evaluated per element, the element loaded into the accumulator) with
 * its combine, identity and finish; an output function for the row-varying outputs and one for
 * the per-row members' outputs; and one row's run around them: the phases one after another,
 * each a fixed tree, each result (stored to its dtype, as the unfused buffer would be) then
 * readable by the later phases, and the outputs written last.
 *   C:    one row per call (fusion_row_thunk.c runs the rows in parallel): a phase computes
 *         leaves of up to 1024 values in a loop gcc vectorizes, each reduced as a pairwise tree,
 *         leaves joined by a binary cascade; the row stays in cache between phases, and a value
 *         that calls math functions and that later phases read is kept in a buffer of the row.
 *   CUDA: a block of 512 threads per row; thread t holds packs t, t + 512, ... of each
 *         row-varying input (16-byte loads where aligned) in registers, R packs of them
 *         (dlop_fused_g<N>_row<R>), or reads them again per phase when the row is longer
 *         (_row0); the values the CPU keeps it keeps in registers too where R packs of them
 *         fit (the _k_ functions; `keep` in the kernel), else computes them again per phase;
 *         warps then the block meet in shuffle trees, in the same order either way. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusion_source.h"

typedef dlop__fusion_text text;

int32_t dlop__fusion_row_kept_bytes = DLOP__FUSION_ROW_KEPT_BYTES;

static void add(text *t, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *format, ...) {
  va_list args;
  va_start(args, format);
  dlop__fusion_text_vadd(t, format, args);
  va_end(args);
}

/* What one function covers: members, inputs and reduction results it reads, values it reads
 * from the row's buffers (cached_in) or writes into them (cached_out), outputs. */
typedef struct part {
  char member[DLOP__FUSION_MAX_MEMBERS];
  char input[DLOP__FUSION_MAX_OPERANDS];
  char result[DLOP__FUSION_MAX_MEMBERS]; /* per reduction */
  char cached_in[DLOP__FUSION_ROW_MAX_VALUES], cached_out[DLOP__FUSION_ROW_MAX_VALUES];
  char output[DLOP__FUSION_MAX_OPERANDS];
} part;

/* What marking reads: the values kept in buffers (NULL: none) and those already written. */
typedef struct cache_state {
  const char *cached, *available;
} cache_state;

static int32_t reduction_of_value(const dlop__fusion_group *group, int32_t v) {
  for (int32_t r = 0; r < group->row->num_reductions; r++)
    if (group->row->reductions[r].value == v) return r;
  return -1;
}

static void mark_source(const dlop__fusion_group *group, const cache_state *c, part *p,
                        const dlop__fusion_source *s);

static void mark_value(const dlop__fusion_group *group, const cache_state *c, part *p, int32_t v) {
  int32_t m = dlop__fusion_member_of_value(group, v);
  if (m < 0) {
    int32_t r = reduction_of_value(group, v);
    if (r >= 0) p->result[r] = 1;
    return;
  }
  if (c->available != NULL && c->available[v]) {
    p->cached_in[v] = 1;
    return;
  }
  if (p->member[m]) return;
  p->member[m] = 1;
  for (int32_t j = 0; j < group->members[m].node.num_inputs; j++)
    mark_source(group, c, p, &group->members[m].sources[j]);
  for (int32_t j = 0; c->cached != NULL && j < group->members[m].node.num_outputs; j++)
    if (c->cached[group->members[m].values[j]]) p->cached_out[group->members[m].values[j]] = 1;
}

static void mark_source(const dlop__fusion_group *group, const cache_state *c, part *p,
                        const dlop__fusion_source *s) {
  if (s->kind == DLOP__FUSION_FROM_VALUE) mark_value(group, c, p, s->index);
  if (s->kind == DLOP__FUSION_FROM_INPUT) p->input[s->index] = 1;
}

/* The outputs of members of one kind (row-varying, per_row 0; per-row, 1). */
static void make_output_part(const dlop__fusion_group *group, const cache_state *c, int per_row,
                             part *p) {
  memset(p, 0, sizeof *p);
  for (int32_t o = 0; o < group->num_outputs; o++) {
    int32_t v = group->output_values[o];
    if (dlop__fusion_member_of_value(group, v) < 0 || group->row->value_per_row[v] != per_row) continue;
    p->output[o] = 1;
    mark_value(group, c, p, v);
  }
}

/* The parts of the kernel in the order it runs them: phase r (parts[r]), the row-varying
 * outputs (parts[K]), the per-row ones (parts[K + 1]). With buffers (C), a value kept is
 * written by the first part computing it and read by the later ones. */
static void make_parts(const dlop__fusion_group *group, int buffers, part *parts) {
  const dlop__fusion_row *row = group->row;
  int32_t K = row->num_reductions;
  char available[DLOP__FUSION_ROW_MAX_VALUES] = {0};
  cache_state c = {buffers ? row->cached : NULL, buffers ? available : NULL};
  for (int32_t r = 0; r <= K; r++) {
    if (r < K) {
      memset(&parts[r], 0, sizeof parts[r]);
      mark_source(group, &c, &parts[r], &row->reductions[r].input);
    } else {
      make_output_part(group, &c, 0, &parts[r]);
    }
    for (int32_t v = 0; v < group->num_values; v++) available[v] |= parts[r].cached_out[v];
  }
  make_output_part(group, &c, 1, &parts[K + 1]);
}

void dlop__fusion_row_plan_buffers(dlop__fusion_group *group) {
  dlop__fusion_row *row = group->row;
  int32_t K = row->num_reductions, count[DLOP__FUSION_ROW_MAX_VALUES] = {0};
  part *parts = calloc((size_t)K + 2, sizeof *parts);
  row->num_cached = 0;
  row->scratch_bytes = 0;
  if (parts == NULL || group->num_values > DLOP__FUSION_ROW_MAX_VALUES) { /* no buffers */
    free(parts);
    return;
  }
  make_parts(group, 0, parts);
  for (int32_t r = 0; r <= K; r++)
    for (int32_t m = 0; m < group->num_members; m++)
      for (int32_t j = 0; parts[r].member[m] && j < group->members[m].node.num_outputs; j++)
        count[group->members[m].values[j]]++;
  for (int32_t m = 0; m < group->num_members; m++) {
    const dlop__fusion_member *member = &group->members[m];
    for (int32_t j = 0; j < member->node.num_outputs; j++) {
      int32_t v = member->values[j];
      row->cached[v] = (char)(count[v] >= 2 && !row->value_per_row[v] &&
                              !(member->body_flags & DLOP_SCALAR_BODY_EXACT));
      if (!row->cached[v]) continue;
      row->num_cached++;
      row->scratch_bytes +=
          (int64_t)dlop_dtype_size((dlop_dtype)member->node.output_types[j].dtype);
    }
  }
  free(parts);
}

/* Part i of the parts with kept values, where it reads or writes one; NULL where it does not
 * (its kept variant would be a copy of the plain one) or nothing is kept (kept NULL). */
static const part *kept_part(const dlop__fusion_group *group, const part *kept, int32_t i) {
  for (int32_t v = 0; kept != NULL && v < group->num_values; v++)
    if (kept[i].cached_in[v] || kept[i].cached_out[v]) return &kept[i];
  return NULL;
}

static int part_has_outputs(const dlop__fusion_group *group, const part *p) {
  for (int32_t o = 0; o < group->num_outputs; o++)
    if (p->output[o]) return 1;
  return 0;
}

static const char *c_type(int32_t dtype) { return dlop__fusion_c_type(dtype); }

static void add_source(text *t, const dlop__fusion_group *group, const dlop__fusion_source *s) {
  if (s->kind == DLOP__FUSION_FROM_INPUT)
    add(t, "x%d", (int)s->index);
  else if (s->kind == DLOP__FUSION_FROM_VALUE)
    add(t, "v%d", (int)s->index);
  else
    dlop__fusion_add_value(t, group->literals[s->index].dtype, group->literals[s->index].bits);
}

/* A member value's storage dtype. */
static int32_t value_dtype(const dlop__fusion_group *group, int32_t v) {
  int32_t m = dlop__fusion_member_of_value(group, v);
  for (int32_t j = 0; m >= 0 && j < group->members[m].node.num_outputs; j++)
    if (group->members[m].values[j] == v) return group->members[m].node.output_types[j].dtype;
  return DLOP_FLOAT32; /* not reached: only members' values are kept */
}

/* "(type x0, type v3, type *z4, type *y1)": the parameters of a function of part p: inputs,
 * reduction results, values read from buffers, values written into them, outputs. */
static void add_parameters(text *t, const dlop__fusion_group *group, const part *p) {
  int first = 1;
  add(t, "(");
  for (int32_t k = 0; k < group->num_inputs; k++) {
    if (!p->input[k]) continue;
    add(t, "%s%s x%d", first ? "" : ", ", c_type(group->input_types[k].dtype), (int)k);
    first = 0;
  }
  for (int32_t r = 0; r < group->row->num_reductions; r++) {
    const dlop__fusion_row_reduction *reduction = &group->row->reductions[r];
    if (!p->result[r]) continue;
    add(t, "%s%s v%d", first ? "" : ", ",
        c_type(reduction->body.node.output_types[0].dtype), (int)reduction->value);
    first = 0;
  }
  for (int32_t v = 0; v < group->num_values; v++) {
    if (!p->cached_in[v]) continue;
    add(t, "%s%s v%d", first ? "" : ", ", c_type(value_dtype(group, v)), (int)v);
    first = 0;
  }
  for (int32_t v = 0; v < group->num_values; v++) {
    if (!p->cached_out[v]) continue;
    add(t, "%s%s *z%d", first ? "" : ", ", c_type(value_dtype(group, v)), (int)v);
    first = 0;
  }
  for (int32_t o = 0; o < group->num_outputs; o++) {
    if (!p->output[o]) continue;
    add(t, "%s%s *y%d", first ? "" : ", ", c_type(group->output_types[o].dtype), (int)o);
    first = 0;
  }
  add(t, "%s)", first ? "void" : "");
}

/* How a call reaches a row-varying input's element. */
typedef enum access_kind {
  ACCESS_UNIT,    /* C: a<k>[b + i] (unit strides) */
  ACCESS_STRIDED, /* a<k>[(b + i) * s<k>] (b + i the element in the row) */
  ACCESS_PACK     /* CUDA: x<k>[j].e[e] */
} access_kind;

/* The arguments of a call of a function of part p for element `at` of the row (C; CUDA's
 * elements are b + i), without the outputs; returns how many. */
static int add_arguments_at(text *t, const dlop__fusion_group *group, const part *p,
                            access_kind access, const char *at) {
  int first = 1;
  for (int32_t k = 0; k < group->num_inputs; k++) {
    int i = (int)k;
    if (!p->input[k]) continue;
    add(t, "%s", first ? "" : ", ");
    first = 0;
    if (group->row->input_per_row[k])
      add(t, "c%d", i);
    else if (access == ACCESS_UNIT)
      add(t, "a%d[%s]", i, at);
    else if (access == ACCESS_STRIDED)
      add(t, "a%d[(%s) * s%d]", i, at, i);
    else
      add(t, "x%d[j].e[e]", i);
  }
  for (int32_t r = 0; r < group->row->num_reductions; r++) {
    if (!p->result[r]) continue;
    add(t, "%sv%d", first ? "" : ", ", (int)group->row->reductions[r].value);
    first = 0;
  }
  /* the values kept: C's row buffers, CUDA's packs in registers (like the inputs') */
  for (int32_t v = 0; v < group->num_values; v++) {
    if (!p->cached_in[v]) continue;
    if (access == ACCESS_PACK)
      add(t, "%sk%d[j].e[e]", first ? "" : ", ", (int)v);
    else
      add(t, "%sk%d[%s]", first ? "" : ", ", (int)v, at);
    first = 0;
  }
  for (int32_t v = 0; v < group->num_values; v++) {
    if (!p->cached_out[v]) continue;
    if (access == ACCESS_PACK)
      add(t, "%s&k%d[j].e[e]", first ? "" : ", ", (int)v);
    else
      add(t, "%s&k%d[%s]", first ? "" : ", ", (int)v, at);
    first = 0;
  }
  return !first;
}

static int add_arguments(text *t, const dlop__fusion_group *group, const part *p,
                         access_kind access) {
  return add_arguments_at(t, group, p, access, "b + i");
}

/* The outputs' arguments after `before` others: y<o> as `format` writes them. */
static void add_output_arguments(text *t, const dlop__fusion_group *group, const part *p,
                                 int before, const char *format) {
  for (int32_t o = 0; o < group->num_outputs; o++) {
    if (!p->output[o]) continue;
    add(t, "%s", before ? ", " : "");
    add(t, format, (int)o, (int)o);
    before = 1;
  }
}

/* A function's writes into the row's buffers. */
static void add_cached_stores(text *t, const dlop__fusion_group *group, const part *p) {
  for (int32_t v = 0; v < group->num_values; v++)
    if (p->cached_out[v]) add(t, "  *z%d = v%d;\n", (int)v, (int)v);
}

static const char *to_accumulator(int32_t storage, int32_t accumulator) {
  if (storage == accumulator) return "";
  if (accumulator == DLOP_FLOAT32) return dlop__fusion_load_function(storage, accumulator);
  return "(int64_t)";
}

/* Phase r's function dlop_fused_g<N><kind>_phase<r>: the value reduction r takes for one
 * element, in its accumulator's type (kind "" for part p without kept values, "_k" with). */
static void add_phase_function(text *t, const dlop_function *function,
                               const dlop__fusion_group *group, const char *g, const char *kind,
                               int32_t r, const part *p) {
  const dlop__fusion_row_reduction *reduction = &group->row->reductions[r];
  int32_t input = reduction->body.node.input_types[0].dtype;
  add(t, "DLOP_SCALAR_FN %s_r%d_acc %s%s_phase%d", g, (int)r, g, kind, (int)r);
  add_parameters(t, group, p);
  add(t, " {\n");
  dlop__fusion_add_members(t, function, group, p->member);
  add_cached_stores(t, group, p);
  add(t, "  return %s(", to_accumulator(input, reduction->body.accumulator));
  add_source(t, group, &reduction->input);
  add(t, ");\n}\n");
}

/* Per reduction r: its phase function dlop_fused_g<N>_phase<r>, combine, identity, finish. */
static void add_reduction_functions(text *t, const dlop_function *function,
                                    const dlop__fusion_group *group, const char *g, int32_t r,
                                    const part *p) {
  const dlop__fusion_row_reduction *reduction = &group->row->reductions[r];
  const dlop__fusion_reduction *body = &reduction->body;
  int32_t output = body->node.output_types[0].dtype;
  add(t, "typedef %s %s_r%d_acc;\n", c_type(body->accumulator), g, (int)r);
  add_phase_function(t, function, group, g, "", r, p);
  add(t, "DLOP_SCALAR_FN %s_r%d_acc %s_r%d_combine(%s_r%d_acc in0, %s_r%d_acc in1) {\n", g,
      (int)r, g, (int)r, g, (int)r, g, (int)r);
  add(t, "  %s_r%d_acc out0;\n  { /* #%d %s: combine */\n%s\n  }\n  return out0;\n}\n", g, (int)r,
      (int)body->node.index, body->node.op->name, body->combine);
  add(t, "DLOP_SCALAR_FN %s_r%d_acc %s_r%d_identity(void) {\n  return ", g, (int)r, g, (int)r);
  dlop__fusion_add_value(t, body->accumulator, body->identity);
  add(t, ";\n}\n");
  add(t, "DLOP_SCALAR_FN %s %s_r%d_finish(%s_r%d_acc in0, int64_t count) {\n", c_type(output), g,
      (int)r, g, (int)r);
  add(t,
      "  %s out0;\n  (void)count;\n  { /* #%d %s: finalize */\n%s\n  }\n  return %s(out0);\n}\n",
      c_type(body->output_compute), (int)body->node.index, body->node.op->name, body->finalize,
      dlop__fusion_store_function(output, body->output_compute));
}

/* dlop_fused_g<N>_out (row-varying outputs) and _perrow (the per-row members' outputs). */
static void add_output_function(text *t, const dlop_function *function,
                                const dlop__fusion_group *group, const char *g,
                                const char *name, const part *p) {
  add(t, "DLOP_SCALAR_FN void %s_%s", g, name);
  add_parameters(t, group, p);
  add(t, " {\n");
  dlop__fusion_add_members(t, function, group, p->member);
  add_cached_stores(t, group, p);
  for (int32_t o = 0; o < group->num_outputs; o++)
    if (p->output[o]) add(t, "  *y%d = v%d;\n", (int)o, (int)group->output_values[o]);
  add(t, "}\n");
}

/* The group's output o that is value v, or -1. */
static int32_t output_of_value(const dlop__fusion_group *group, int32_t v) {
  for (int32_t o = 0; o < group->num_outputs; o++)
    if (group->output_values[o] == v) return o;
  return -1;
}

/* ---- C --------------------------------------------------------------------------------------- */

/* A leaf of up to 1024 values reduced as a pairwise tree, a level at a time: value k joins
 * value k + rest (rest = m - m / 2, the middle one of an odd count moving up alone), each level a
 * loop gcc vectorizes whatever the combine (a max's NaN test is a select). The tree depends only
 * on m. src may be the row itself (a reduction of an input as it is): w takes the levels. */
static void add_c_leaf(text *t, const char *g, int32_t r) {
  char a[64];
  snprintf(a, sizeof a, "%s_r%d", g, (int)r);
  add(t, "static %s_acc %s_leaf(const %s_acc *src, %s_acc *w, int64_t m) {\n", a, a, a, a);
  add(t, "  while (m > 1) {\n    const int64_t half = m / 2, rest = m - half;\n");
  add(t, "#pragma omp simd\n    for (int64_t k = 0; k < half; k++) w[k] = %s_combine(src[k], "
         "src[k + rest]);\n", a);
  add(t, "    if (rest > half) w[half] = src[half];\n    src = w;\n    m = rest;\n  }\n");
  add(t, "  return src[0];\n}\n");
}

static void add_c_phase(text *t, const dlop__fusion_group *group, const char *g, int32_t r,
                        const part *p) {
  const dlop__fusion_row_reduction *reduction = &group->row->reductions[r];
  int32_t output = output_of_value(group, reduction->value);
  char a[64];
  snprintf(a, sizeof a, "%s_r%d", g, (int)r);
  add(t, "  %s v%d;\n  {\n", c_type(reduction->body.node.output_types[0].dtype),
      (int)reduction->value);
  /* a reduction of an input as it is (no member, no conversion): the leaf reads the row */
  int direct = reduction->input.kind == DLOP__FUSION_FROM_INPUT &&
               !group->row->input_per_row[reduction->input.index] &&
               group->input_types[reduction->input.index].dtype == reduction->body.accumulator;
  add(t, "    %s_acc w[1024], level[64], x;\n    uint64_t occupied = 0;\n    int have = 0;\n", a);
  add(t, "    for (int64_t b = 0; b < n; b += 1024) {\n");
  add(t, "      const int64_t m = n - b < 1024 ? n - b : 1024;\n      int64_t i;\n");
  /* the tree's first level in the value loop: values k and k + rest, computed side by side,
   * go into w[k] combined (the leaf then reduces the rest of the levels) */
  if (!direct) {
    add(t, "      const int64_t half = m / 2, rest = m - half;\n");
    for (int unit = 1; unit >= 0; unit--) {
      access_kind access = unit ? ACCESS_UNIT : ACCESS_STRIDED;
      add(t, unit ? "      if (unit) {\n" : "      } else {\n");
      if (unit) add(t, "#pragma omp simd\n");
      add(t, "        for (i = 0; i < half; i++) w[i] = %s_combine(%s_phase%d(", a, g, (int)r);
      add_arguments_at(t, group, p, access, "b + i");
      add(t, "), %s_phase%d(", g, (int)r);
      add_arguments_at(t, group, p, access, "b + i + rest");
      add(t, "));\n        if (rest > half) w[half] = %s_phase%d(", g, (int)r);
      add_arguments_at(t, group, p, access, "b + half");
      add(t, ");\n");
    }
    add(t, "      }\n      x = %s_leaf(w, w, rest);\n      int l = 0;\n", a);
  } else {
    add(t, "      if (!unit)\n        for (i = 0; i < m; i++) w[i] = %s_phase%d(", g, (int)r);
    add_arguments(t, group, p, ACCESS_STRIDED);
    add(t, ");\n");
  }
  if (direct)
    add(t, "      x = %s_leaf(unit ? a%d + b : w, w, m);\n      int l = 0;\n", a,
        (int)reduction->input.index);
  add(t, "      while ((occupied >> l) & 1u) {\n        x = %s_combine(level[l], x);\n", a);
  add(t, "        occupied &= ~(1ull << l);\n        l++;\n      }\n");
  add(t, "      level[l] = x;\n      occupied |= 1ull << l;\n");
  add(t, "    }\n");
  add(t, "    for (int l = 0; l < 64; l++)\n      if ((occupied >> l) & 1u) {\n");
  add(t, "        x = have ? %s_combine(level[l], x) : level[l];\n        have = 1;\n      }\n", a);
  add(t, "    if (!have) x = %s_identity();\n    v%d = %s_finish(x, n);\n  }\n", a,
      (int)reduction->value, a);
  if (output >= 0) add(t, "  *(%s *)p[%d] = v%d;\n", c_type(group->output_types[output].dtype),
                       (int)output, (int)reduction->value);
}

static void add_c(text *t, const dlop__fusion_group *group, const char *g, const part *parts) {
  const dlop__fusion_row *row = group->row;
  int32_t O = group->num_outputs, K = row->num_reductions, k, o, r;
  const part *rows = &parts[K], *per_row = &parts[K + 1];
  for (r = 0; r < K; r++) add_c_leaf(t, g, r);
  add(t, "DLOP_FUSED_EXPORT void %s_row(char *const *p, const int64_t *s, int64_t n, "
         "char *scratch) {\n", g);
  add(t, "  int unit = 1;\n  (void)scratch;\n");
  for (o = 0; o < O; o++) {
    add(t, "  %s *o%d = (%s *)p[%d];\n  const int64_t so%d = s[%d];\n",
        c_type(group->output_types[o].dtype), (int)o, c_type(group->output_types[o].dtype),
        (int)o, (int)o, (int)o);
    if (rows->output[o]) add(t, "  unit = unit && so%d == 1;\n", (int)o);
    add(t, "  (void)o%d;\n  (void)so%d;\n", (int)o, (int)o);
  }
  for (k = 0; k < group->num_inputs; k++) {
    const char *type = c_type(group->input_types[k].dtype);
    if (row->input_per_row[k]) {
      add(t, "  const %s c%d = *(const %s *)p[%d];\n", type, (int)k, type, (int)(O + k));
    } else {
      add(t, "  const %s *a%d = (const %s *)p[%d];\n  const int64_t s%d = s[%d];\n", type, (int)k,
          type, (int)(O + k), (int)k, (int)(O + k));
      add(t, "  unit = unit && s%d == 1;\n", (int)k);
    }
  }
  /* the values kept for later phases: a buffer of n each, 64-byte aligned apart */
  for (int32_t v = 0; v < group->num_values; v++) {
    const char *type = c_type(value_dtype(group, v));
    if (!row->cached[v]) continue;
    add(t, "  %s *k%d = (%s *)scratch;\n", type, (int)v, type);
    add(t, "  scratch += (n * (int64_t)sizeof(%s) + 63) / 64 * 64;\n", type);
  }
  for (r = 0; r < K; r++) add_c_phase(t, group, g, r, &parts[r]);
  if (part_has_outputs(group, rows)) {
    add(t, "  if (unit) {\n    const int64_t b = 0;\n#pragma omp simd\n");
    add(t, "    for (int64_t i = 0; i < n; i++) %s_out(", g);
    add_output_arguments(t, group, rows, add_arguments(t, group, rows, ACCESS_UNIT), "&o%d[i]");
    add(t, ");\n  } else {\n    const int64_t b = 0;\n");
    add(t, "    for (int64_t i = 0; i < n; i++) %s_out(", g);
    add_output_arguments(t, group, rows, add_arguments(t, group, rows, ACCESS_STRIDED),
                         "&o%d[i * so%d]");
    add(t, ");\n  }\n");
  }
  if (part_has_outputs(group, per_row)) {
    add(t, "  {\n    const int64_t b = 0, i = 0;\n    (void)b;\n    (void)i;\n    %s_perrow(", g);
    add_output_arguments(t, group, per_row, add_arguments(t, group, per_row, ACCESS_UNIT), "o%d");
    add(t, ");\n  }\n");
  }
  add(t, "}\n\n");
}

/* ---- CUDA ------------------------------------------------------------------------------------ */

int32_t dlop__fusion_row_max_packs(const dlop__fusion_group *group) {
  int32_t per_pass = DLOP__FUSION_ROW_THREADS * group->vector_width, packs = 1;
  while ((int64_t)packs * per_pass < DLOP__FUSION_ROW_LIMIT) packs *= 2;
  return packs;
}

/* Reduction r's phase in the kernel; kp: the phase's part with kept values (NULL: none kept),
 * called where the template's `keep` holds. */
static void add_cuda_reduction(text *t, const dlop__fusion_group *group, const char *g,
                               int32_t r, const part *p, const part *kp) {
  char a[64];
  const dlop__fusion_row_reduction *reduction = &group->row->reductions[r];
  int32_t output = output_of_value(group, reduction->value), w = group->vector_width;
  snprintf(a, sizeof a, "%s_r%d", g, (int)r);
  add(t, "  %s v%d;\n  {\n    %s_acc acc = %s_identity();\n",
      c_type(reduction->body.node.output_types[0].dtype), (int)reduction->value, a, a);
  add(t, "    if (R > 0) {\n#pragma unroll\n      for (int j = 0; j < (R > 0 ? R : 1); j++)\n");
  add(t, "#pragma unroll\n        for (int e = 0; e < %d; e++) {\n", (int)w);
  add(t, "          const int64_t i = ((int64_t)j * %d + t) * %d + e;\n",
      DLOP__FUSION_ROW_THREADS, (int)w);
  if (kp != NULL) {
    add(t, "          if (i < n && keep) acc = %s_combine(acc, %s_k_phase%d(", a, g, (int)r);
    add_arguments(t, group, kp, ACCESS_PACK);
    add(t, "));\n          else\n");
  }
  add(t, "          if (i < n) acc = %s_combine(acc, %s_phase%d(", a, g, (int)r);
  add_arguments(t, group, p, ACCESS_PACK);
  add(t, "));\n        }\n    } else {\n");
  add(t, "      for (int64_t q = t; q * %d < n; q += %d)\n", (int)w, DLOP__FUSION_ROW_THREADS);
  add(t, "        for (int e = 0; e < %d; e++) {\n          const int64_t i = q * %d + e;\n",
      (int)w, (int)w);
  add(t, "          if (i < n) acc = %s_combine(acc, %s_phase%d(", a, g, (int)r);
  add_arguments(t, group, p, ACCESS_STRIDED);
  add(t, "));\n        }\n    }\n");
  add(t, "    v%d = %s_finish(%s_block(acc), n);\n  }\n", (int)reduction->value, a, a);
  if (output >= 0) add(t, "  if (t == 0) y%d[0] = v%d;\n", (int)output, (int)reduction->value);
}

static void add_cuda_block_combine(text *t, const char *g, int32_t r) {
  char a[64];
  int warps = DLOP__FUSION_ROW_THREADS / 32;
  snprintf(a, sizeof a, "%s_r%d", g, (int)r);
  add(t, "__device__ __forceinline__ %s_acc %s_warp(%s_acc v) {\n", a, a, a);
  add(t, "#pragma unroll\n  for (int offset = 16; offset > 0; offset >>= 1)\n");
  add(t, "    v = %s_combine(v, __shfl_down_sync(0xffffffffu, v, offset));\n  return v;\n}\n", a);
  add(t, "/* every thread gets the row's result */\n");
  add(t, "__device__ __forceinline__ %s_acc %s_block(%s_acc v) {\n", a, a, a);
  add(t, "  __shared__ %s_acc slots[%d];\n", a, warps);
  add(t, "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n");
  add(t, "  v = %s_warp(v);\n  if (lane == 0) slots[warp] = v;\n  __syncthreads();\n", a);
  add(t, "  if (warp == 0) {\n    v = %s_warp(lane < %d ? slots[lane] : %s_identity());\n", a,
      warps, a);
  add(t, "    if (lane == 0) slots[0] = v;\n  }\n  __syncthreads();\n  v = slots[0];\n");
  add(t, "  __syncthreads(); /* the slots are free for the next phase */\n  return v;\n}\n");
}

/* kept: the parts with the values kept in registers (NULL: none kept), used by the kernels whose
 * R packs of them fit dlop__fusion_row_kept_bytes per thread (`keep`). */
static void add_cuda(text *t, const dlop__fusion_group *group, const char *g, const part *parts,
                     const part *kept) {
  int32_t O = group->num_outputs, k, o, r, w = group->vector_width, K = group->row->num_reductions;
  int32_t operands = O + group->num_inputs, T = DLOP__FUSION_ROW_THREADS, kept_bytes = 0;
  const part *rows = &parts[K], *per_row = &parts[K + 1];
  for (r = 0; r < group->row->num_reductions; r++) add_cuda_block_combine(t, g, r);
  /* the thunk's int64 array: pointers, rows, n, ndim, shape[16], strides[operands][16],
   * last[operands] (the strides along the row) */
  add(t, "struct %s_rowargs { void *p[%d]; int64_t rows, n, ndim; int64_t shape[%d]; ", g,
      (int)operands, DLOP_MAX_NDIM);
  add(t, "int64_t strides[%d][%d]; int64_t last[%d]; };\n", (int)operands, DLOP_MAX_NDIM,
      (int)operands);
  add(t, "template <int R>\n__device__ __forceinline__ void %s_one_row(const %s_rowargs &a, "
         "int64_t m) {\n", g, g);
  add(t, "  const int t = threadIdx.x;\n  const int64_t n = a.n, b = 0;\n  (void)b;\n");
  /* the kept values: a pack per pack of input, each element in a register of its own */
  for (int32_t v = 0; kept != NULL && v < group->num_values; v++) {
    int32_t bytes = (int32_t)dlop_dtype_size((dlop_dtype)value_dtype(group, v));
    if (!group->row->cached[v]) continue;
    kept_bytes += bytes < 4 ? 4 : bytes;
    add(t, "  dlop_fused_pack<%s, %d> k%d[R > 0 ? R : 1];\n", c_type(value_dtype(group, v)),
        (int)w, (int)v);
  }
  if (kept != NULL)
    add(t, "  constexpr bool keep = R > 0 && R * %d * %d <= %d;\n", (int)w, (int)kept_bytes,
        (int)dlop__fusion_row_kept_bytes);
  add(t, "  int64_t off[%d] = {0};\n  {\n    int64_t rest = m;\n", (int)operands);
  add(t, "    for (int d = (int)a.ndim - 2; d >= 0; d--) {\n");
  add(t, "      const int64_t size = a.shape[d], q = rest / size, at = rest - q * size;\n");
  add(t, "      rest = q;\n      for (int k = 0; k < %d; k++) off[k] += at * a.strides[k][d];\n",
      (int)operands);
  add(t, "    }\n  }\n  bool aligned = true;\n");
  for (o = 0; o < O; o++) {
    const char *type = c_type(group->output_types[o].dtype);
    add(t, "  %s *y%d = (%s *)a.p[%d] + off[%d];\n  const int64_t ys%d = a.last[%d];\n", type,
        (int)o, type, (int)o, (int)o, (int)o, (int)o);
    if (rows->output[o])
      add(t, "  aligned = aligned && ys%d == 1 && reinterpret_cast<unsigned long long>(y%d) %% "
             "(%d * sizeof(%s)) == 0;\n", (int)o, (int)o, (int)w, type);
    add(t, "  (void)ys%d;\n", (int)o);
  }
  for (k = 0; k < group->num_inputs; k++) {
    const char *type = c_type(group->input_types[k].dtype);
    int at = (int)(O + k);
    if (group->row->input_per_row[k]) {
      add(t, "  const %s c%d = *((const %s *)a.p[%d] + off[%d]);\n", type, (int)k, type, at, at);
      continue;
    }
    add(t, "  const %s *a%d = (const %s *)a.p[%d] + off[%d];\n  const int64_t s%d = a.last[%d];\n",
        type, (int)k, type, at, at, (int)k, at);
    add(t, "  aligned = aligned && (s%d == 0 || (s%d == 1 && reinterpret_cast<unsigned long long>"
           "(a%d) %% (%d * sizeof(%s)) == 0));\n", (int)k, (int)k, (int)k, (int)w, type);
    add(t, "  dlop_fused_pack<%s, %d> x%d[R > 0 ? R : 1];\n", type, (int)w, (int)k);
  }
  /* the row's inputs into registers: pack j of thread t is pack j * T + t of the row */
  add(t, "  if (R > 0) {\n#pragma unroll\n    for (int j = 0; j < (R > 0 ? R : 1); j++) {\n");
  add(t, "      const int64_t q = (int64_t)j * %d + t;\n", (int)T);
  add(t, "      const bool whole = aligned && (q + 1) * %d <= n;\n", (int)w);
  for (k = 0; k < group->num_inputs; k++) {
    const char *type = c_type(group->input_types[k].dtype);
    if (group->row->input_per_row[k]) continue;
    add(t, "      if (whole && s%d == 1) x%d[j] = dlop_fused_load(reinterpret_cast<const "
           "dlop_fused_pack<%s, %d> *>(a%d + q * %d));\n", (int)k, (int)k, type, (int)w, (int)k,
        (int)w);
    add(t, "      else\n#pragma unroll\n        for (int e = 0; e < %d; e++) x%d[j].e[e] = q * %d "
           "+ e < n ? a%d[(q * %d + e) * s%d] : (%s)0;\n", (int)w, (int)k, (int)w, (int)k,
        (int)w, (int)k, type);
  }
  add(t, "    }\n  }\n");
  for (r = 0; r < group->row->num_reductions; r++)
    add_cuda_reduction(t, group, g, r, &parts[r], kept_part(group, kept, r));
  if (part_has_outputs(group, rows)) {
    add(t, "  if (R > 0) {\n#pragma unroll\n    for (int j = 0; j < (R > 0 ? R : 1); j++) {\n");
    add(t, "      const int64_t q = (int64_t)j * %d + t;\n", (int)T);
    add(t, "      if (q * %d >= n) continue;\n", (int)w);
    for (o = 0; o < O; o++)
      if (rows->output[o])
        add(t, "      dlop_fused_pack<%s, %d> r%d;\n", c_type(group->output_types[o].dtype),
            (int)w, (int)o);
    add(t, "#pragma unroll\n      for (int e = 0; e < %d; e++) {\n", (int)w);
    add(t, "        const int64_t i = q * %d + e;\n", (int)w);
    const part *kept_rows = kept_part(group, kept, K);
    if (kept_rows != NULL) {
      add(t, "        if (i < n && keep) %s_k_out(", g);
      add_output_arguments(t, group, kept_rows, add_arguments(t, group, kept_rows, ACCESS_PACK),
                           "&r%d.e[e]");
      add(t, ");\n        else\n");
    }
    add(t, "        if (i < n) %s_out(", g);
    add_output_arguments(t, group, rows, add_arguments(t, group, rows, ACCESS_PACK), "&r%d.e[e]");
    add(t, ");\n      }\n      if (aligned && (q + 1) * %d <= n) {\n", (int)w);
    for (o = 0; o < O; o++)
      if (rows->output[o])
        add(t, "        dlop_fused_store(reinterpret_cast<dlop_fused_pack<%s, %d> *>(y%d + q * "
               "%d), r%d);\n", c_type(group->output_types[o].dtype), (int)w, (int)o, (int)w,
            (int)o);
    add(t, "      } else {\n        for (int e = 0; e < %d && q * %d + e < n; e++) {\n", (int)w,
        (int)w);
    for (o = 0; o < O; o++)
      if (rows->output[o]) add(t, "          y%d[(q * %d + e) * ys%d] = r%d.e[e];\n", (int)o,
                              (int)w, (int)o, (int)o);
    add(t, "        }\n      }\n    }\n  } else {\n");
    add(t, "    for (int64_t i = t; i < n; i += %d) %s_out(", (int)T, g);
    add_output_arguments(t, group, rows, add_arguments(t, group, rows, ACCESS_STRIDED),
                         "&y%d[i * ys%d]");
    add(t, ");\n  }\n");
  }
  if (part_has_outputs(group, per_row)) {
    add(t, "  if (t == 0) {\n    const int64_t i = 0;\n    (void)i;\n    %s_perrow(", g);
    add_output_arguments(t, group, per_row, add_arguments(t, group, per_row, ACCESS_STRIDED),
                         "y%d");
    add(t, ");\n  }\n");
  }
  add(t, "}\n");
  /* the kernels that keep values are built for two blocks per SM (64 registers a thread), which
   * ptxas meets without spilling where they fit (fusion.h); the others as many as they need */
  const int32_t max_packs = dlop__fusion_row_max_packs(group);
  for (int32_t packs = 0; packs <= max_packs; packs = packs ? packs * 2 : 1) {
    int keeps = kept != NULL && packs > 0 && packs * w * kept_bytes <= dlop__fusion_row_kept_bytes;
    add(t, "extern \"C\" __global__ void __launch_bounds__(%d%s) %s_row%d(%s_rowargs a) {\n"
           "  for (int64_t m = blockIdx.x; m < a.rows; m += gridDim.x) %s_one_row<%d>(a, m);\n"
           "}\n", (int)T, keeps ? ", 2" : "", g, (int)packs, g, g, (int)packs);
  }
  add(t, "\n");
}

void dlop__fusion_add_row_group(text *t, const dlop_function *function,
                                const dlop__fusion_group *group, dlop__fusion_target target) {
  char g[32];
  int32_t K = group->row->num_reductions;
  part *parts = calloc((size_t)K + 2, sizeof *parts);
  if (parts == NULL) {
    t->failed = 1; /* reported as out of memory */
    return;
  }
  /* CUDA: the parts without kept values (rows read again per phase), and with (R packs in
   * registers, where they fit) */
  part *kept = NULL;
  if (target == DLOP__FUSION_TARGET_CUDA && group->row->num_cached > 0) {
    kept = calloc((size_t)K + 2, sizeof *kept);
    if (kept == NULL) {
      free(parts);
      t->failed = 1;
      return;
    }
    make_parts(group, 1, kept);
  }
  make_parts(group, target == DLOP__FUSION_TARGET_C, parts);
  snprintf(g, sizeof g, "dlop_fused_g%d", (int)group->number);
  add(t, "/* ---- fused row group %d: %d nodes:", (int)group->number,
      (int)(group->num_members + group->row->num_reductions));
  for (int32_t i = 0; i < group->row->num_steps; i++) {
    int32_t step = group->row->steps[i];
    const dlop__function_node *node = step >= 0 ? &group->members[step].node
                                                : &group->row->reductions[-1 - step].body.node;
    add(t, " #%d %s", (int)node->index, node->op->name);
  }
  add(t, " ---- */\n");
  for (int32_t r = 0; r < K; r++) add_reduction_functions(t, function, group, g, r, &parts[r]);
  if (part_has_outputs(group, &parts[K]))
    add_output_function(t, function, group, g, "out", &parts[K]);
  for (int32_t r = 0; r < K; r++) {
    const part *kept_phase = kept_part(group, kept, r);
    if (kept_phase != NULL) add_phase_function(t, function, group, g, "_k", r, kept_phase);
  }
  const part *kept_rows = kept_part(group, kept, K);
  if (kept_rows != NULL && part_has_outputs(group, kept_rows))
    add_output_function(t, function, group, g, "k_out", kept_rows);
  if (part_has_outputs(group, &parts[K + 1]))
    add_output_function(t, function, group, g, "perrow", &parts[K + 1]);
  if (target == DLOP__FUSION_TARGET_C)
    add_c(t, group, g, parts);
  else
    add_cuda(t, group, g, parts, kept);
  free(kept);
  free(parts);
}
