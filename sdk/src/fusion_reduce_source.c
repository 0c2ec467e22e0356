/* fusion_reduce_source.c — the source of a reduction group's kernels: its stage's members
 * evaluated per element of the reduction's input (dlop_fused_g<N>_value, the element loaded into
 * the accumulator as the op's own kernels load it) feeding the op's combine, identity and
 * finalize (from its reduction body), with no intermediate buffer.
 *   C:    a run of n elements reduced as a pairwise tree (leaves of 1024 values computed by a
 *         loop gcc vectorizes, reduced in blocks of 128 over 8 lanes), and combine, identity
 *         and finish entry points with which fusion_reduce_thunk.c joins runs and chunks in a
 *         fixed cascade.
 *   CUDA: a block per (output, part) or a warp per output; a row with unit or zero strides is
 *         read in 16-byte packs (group g of W elements to thread g % threads, so alignment never
 *         changes the order), others element by element; warps and blocks meet in shuffle
 *         trees; parts' partials are combined by a second kernel (finish). */
#include <stdarg.h>
#include <stdio.h>

#include "fusion_source.h"

typedef dlop__fusion_text text;

static void add(text *t, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *format, ...) {
  va_list args;
  va_start(args, format);
  dlop__fusion_text_vadd(t, format, args);
  va_end(args);
}

/* The element's conversion into the accumulator: none, a 16-bit float's load, an integer's
 * widening (fusion_reduce.c admits only these). */
static const char *to_accumulator(int32_t storage, int32_t accumulator) {
  if (storage == accumulator) return "";
  if (accumulator == DLOP_FLOAT32) return dlop__fusion_load_function(storage, accumulator);
  return "(int64_t)";
}

/* The functions both targets share: the value, combine, identity and finish. */
static void add_scalar_functions(text *t, const dlop_function *function,
                                 const dlop__fusion_group *group, const char *g) {
  const dlop__fusion_reduction *r = group->reduction;
  int32_t input = r->node.input_types[0].dtype, output = group->output_types[0].dtype;
  const char *out_type = dlop__fusion_c_type(output);
  add(t, "typedef %s %s_acc;\n", dlop__fusion_c_type(r->accumulator), g);
  add(t, "DLOP_SCALAR_FN %s_acc %s_value(", g, g);
  for (int32_t k = 0; k < group->num_inputs; k++)
    add(t, "%s%s x%d", k ? ", " : "", dlop__fusion_c_type(group->input_types[k].dtype), (int)k);
  add(t, "%s) {\n", group->num_inputs ? "" : "void");
  dlop__fusion_add_members(t, function, group, NULL);
  add(t, "  return %s(v%d);\n}\n", to_accumulator(input, r->accumulator), (int)r->value);
  add(t, "DLOP_SCALAR_FN %s_acc %s_combine_values(%s_acc in0, %s_acc in1) {\n", g, g, g, g);
  add(t, "  %s_acc out0;\n  { /* #%d %s: combine */\n%s\n  }\n  return out0;\n}\n", g,
      (int)r->node.index, r->node.op->name, r->combine);
  add(t, "DLOP_SCALAR_FN %s_acc %s_identity_value(void) {\n  return ", g, g);
  dlop__fusion_add_value(t, r->accumulator, r->identity);
  add(t, ";\n}\n");
  add(t, "DLOP_SCALAR_FN %s %s_finish_value(%s_acc in0, int64_t count) {\n", out_type, g, g);
  add(t,
      "  %s out0;\n  (void)count;\n  { /* #%d %s: finalize */\n%s\n  }\n  return %s(out0);\n}\n\n",
      dlop__fusion_c_type(r->output_compute), (int)r->node.index, r->node.op->name, r->finalize,
      dlop__fusion_store_function(output, r->output_compute));
}

/* How a kernel reaches input k's element. */
typedef enum access_kind {
  ACCESS_UNIT,    /* C: a<k>[i] */
  ACCESS_STRIDED, /* a<k>[i * s<k>] (a<k> at the first element of the run or part) */
  ACCESS_PACK,    /* CUDA: x<k>.e[e] */
  ACCESS_OFFSETS  /* CUDA: a<k>[q<k>] */
} access_kind;

static void add_value_call(text *t, const dlop__fusion_group *group, const char *g,
                           access_kind access) {
  add(t, "%s_value(", g);
  for (int32_t k = 0; k < group->num_inputs; k++) {
    int i = (int)k;
    add(t, "%s", k ? ", " : "");
    if (group->input_scalar[k])
      add(t, "c%d", i);
    else if (access == ACCESS_UNIT)
      add(t, "a%d[i]", i);
    else if (access == ACCESS_STRIDED)
      add(t, "a%d[i * s%d]", i, i);
    else if (access == ACCESS_PACK)
      add(t, "x%d.e[e]", i);
    else
      add(t, "a%d[q%d]", i, i);
  }
  add(t, ")");
}

/* The typed inputs: a<k> arrays (at the run's first element), c<k> scalars (read once). */
static void add_inputs(text *t, const dlop__fusion_group *group, const char *pointer,
                       const char *indent) {
  char where[48];
  for (int32_t k = 0; k < group->num_inputs; k++) {
    const char *type = dlop__fusion_c_type(group->input_types[k].dtype);
    snprintf(where, sizeof where, pointer, (int)k);
    if (group->input_scalar[k])
      add(t, "%sconst %s c%d = *(const %s *)%s;\n", indent, type, (int)k, type, where);
    else
      add(t, "%sconst %s *a%d = (const %s *)%s;\n", indent, type, (int)k, type, where);
  }
}

/* ---- C --------------------------------------------------------------------------------------- */

/* The C run: values of up to 1024 elements at a time in a loop gcc vectorizes (a shorter loop
 * costs more than it computes: its vector setup is paid per call), reduced in blocks of 128 over
 * 8 lanes, blocks and halves joined pairwise: the error of NumPy's pairwise sum. */
static void add_c(text *t, const dlop__fusion_group *group, const char *g) {
  int32_t k, first = 1;
  add(t, "static %s_acc %s_block(const %s_acc *w, int64_t m) {\n", g, g, g);
  add(t, "  %s_acc lane[8], r;\n  int64_t i;\n  if (m < 8) {\n    r = %s_identity_value();\n", g,
      g);
  add(t, "    for (i = 0; i < m; i++) r = %s_combine_values(r, w[i]);\n    return r;\n  }\n", g);
  add(t, "  for (int k = 0; k < 8; k++) lane[k] = w[k];\n");
  add(t, "  for (i = 8; i + 8 <= m; i += 8)\n");
  add(t, "    for (int k = 0; k < 8; k++) lane[k] = %s_combine_values(lane[k], w[i + k]);\n", g);
  add(t,
      "  r = %s_combine_values(%s_combine_values(%s_combine_values(lane[0], lane[1]), "
      "%s_combine_values(lane[2], lane[3])),\n",
      g, g, g, g);
  add(t,
      "      %s_combine_values(%s_combine_values(lane[4], lane[5]), "
      "%s_combine_values(lane[6], lane[7])));\n",
      g, g, g);
  add(t, "  for (; i < m; i++) r = %s_combine_values(r, w[i]);\n  return r;\n}\n", g);
  add(t, "static %s_acc %s_leaf(char *const *p, const int64_t *s, int64_t begin, int64_t n) {\n", g,
      g);
  add_inputs(t, group, "p[%d]", "  ");
  add(t, "  %s_acc v[1024], part[8];\n  int64_t i, blocks = 0;\n  (void)s;\n  if (", g);
  for (k = 0; k < group->num_inputs; k++) {
    if (group->input_scalar[k]) continue;
    add(t, "%s(s[%d] == 0 || s[%d] == 1)", first ? "" : " && ", (int)k, (int)k);
    first = 0;
  }
  add(t, "%s) {\n", first ? "1" : "");
  /* an input constant along the run (a row's max in a softmax) is copied n times, so that the
   * loop reads every input with unit stride and vectorizes */
  for (k = 0; k < group->num_inputs; k++) {
    if (group->input_scalar[k]) continue;
    add(t, "    %s splat%d[1024];\n", dlop__fusion_c_type(group->input_types[k].dtype), (int)k);
    add(t, "    if (s[%d] == 0) {\n      for (i = 0; i < n; i++) splat%d[i] = a%d[0];\n", (int)k,
        (int)k, (int)k);
    add(t, "      a%d = splat%d;\n    } else {\n      a%d += begin;\n    }\n", (int)k, (int)k,
        (int)k);
  }
  add(t, "#pragma omp simd\n    for (i = 0; i < n; i++) v[i] = ");
  add_value_call(t, group, g, ACCESS_UNIT);
  add(t, ";\n  } else {\n");
  for (k = 0; k < group->num_inputs; k++)
    if (!group->input_scalar[k])
      add(t, "    const int64_t s%d = s[%d];\n    a%d += begin * s%d;\n", (int)k, (int)k, (int)k,
          (int)k);
  add(t, "    for (i = 0; i < n; i++) v[i] = ");
  add_value_call(t, group, g, ACCESS_STRIDED);
  add(t, ";\n  }\n");
  add(t,
      "  for (i = 0; i < n; i += 128) part[blocks++] = %s_block(v + i, n - i < 128 ? n - i : "
      "128);\n",
      g);
  add(t, "  for (int64_t width = 1; width < blocks; width *= 2)\n");
  add(t, "    for (int64_t k = 0; k + width < blocks; k += 2 * width)\n");
  add(t, "      part[k] = %s_combine_values(part[k], part[k + width]);\n", g);
  add(t, "  return part[0];\n}\n");
  add(t, "static %s_acc %s_tree(char *const *p, const int64_t *s, int64_t begin, int64_t n) {\n", g,
      g);
  add(t, "  if (n <= 1024) return %s_leaf(p, s, begin, n);\n", g);
  add(t, "  int64_t half = n / 2;\n  half -= half %% 128;\n");
  add(t,
      "  return %s_combine_values(%s_tree(p, s, begin, half), %s_tree(p, s, begin + half, n - "
      "half));\n}\n",
      g, g, g);
  add(t,
      "DLOP_FUSED_EXPORT void %s_run(char *const *p, const int64_t *s, int64_t n, void *result) "
      "{\n",
      g);
  add(t, "  %s_acc r = n > 0 ? %s_tree(p, s, 0, n) : %s_identity_value();\n", g, g, g);
  add(t, "  memcpy(result, &r, sizeof r);\n}\n");
  add(t, "DLOP_FUSED_EXPORT void %s_combine(void *a, const void *b) {\n  %s_acc x, y;\n", g, g);
  add(t, "  memcpy(&x, a, sizeof x);\n  memcpy(&y, b, sizeof y);\n");
  add(t, "  x = %s_combine_values(x, y);\n  memcpy(a, &x, sizeof x);\n}\n", g);
  add(t, "DLOP_FUSED_EXPORT void %s_identity(void *a) {\n  %s_acc x = %s_identity_value();\n", g, g,
      g);
  add(t, "  memcpy(a, &x, sizeof x);\n}\n");
  add(t, "DLOP_FUSED_EXPORT void %s_finish(const void *a, int64_t count, void *out) {\n", g);
  add(t, "  %s_acc x;\n  memcpy(&x, a, sizeof x);\n", g);
  add(t, "  %s y = %s_finish_value(x, count);\n  memcpy(out, &y, sizeof y);\n}\n\n",
      dlop__fusion_c_type(group->output_types[0].dtype), g);
}

/* ---- CUDA ------------------------------------------------------------------------------------ */

static void add_cuda_structs(text *t, const dlop__fusion_group *group, const char *g) {
  int32_t count = group->num_inputs > 0 ? group->num_inputs : 1;
  add(t, "struct %s_pointers { const void *p[%d]; };\n", g, (int)count);
  add(t,
      "struct %s_layout { int64_t kept_ndim, reduced_ndim, outputs, count, parts, slice; "
      "int64_t shape[%d]; int64_t strides[%d][%d]; int64_t out_strides[%d]; };\n",
      g, DLOP__FUSION_REDUCE_DIMS, (int)count, DLOP__FUSION_REDUCE_DIMS, DLOP__FUSION_REDUCE_DIMS);
}

/* The row of output m: each array input's offset from the kept dims' index. */
static void add_cuda_row(text *t, const dlop__fusion_group *group) {
  int32_t k;
  for (k = 0; k < group->num_inputs; k++)
    if (!group->input_scalar[k]) add(t, "  int64_t o%d = 0;\n", (int)k);
  add(t, "  {\n    int64_t rest = m;\n    for (int d = (int)l.kept_ndim - 1; d >= 0; d--) {\n");
  add(t, "      const int64_t size = l.shape[d], q = rest / size, at = rest - q * size;\n");
  add(t, "      rest = q;\n");
  for (k = 0; k < group->num_inputs; k++)
    if (!group->input_scalar[k]) add(t, "      o%d += at * l.strides[%d][d];\n", (int)k, (int)k);
  add(t, "    }\n  }\n");
  add_inputs(t, group, "p.p[%d]", "  ");
  for (k = 0; k < group->num_inputs; k++)
    if (!group->input_scalar[k]) add(t, "  a%d += o%d;\n", (int)k, (int)k);
}

/* The rows of one reduced dim whose array inputs all step by 1 or 0 along it: packs of W. */
static void add_cuda_packed(text *t, const dlop__fusion_group *group, const char *g) {
  int32_t k, w = group->vector_width;
  add(t, "      const int64_t n = end - begin, groups = n / %d;\n", (int)w);
  add(t, "      bool aligned = true;\n");
  for (k = 0; k < group->num_inputs; k++) {
    if (group->input_scalar[k]) continue;
    add(t, "      a%d += begin * s%d;\n", (int)k, (int)k);
    add(t,
        "      aligned = aligned && (s%d == 0 || reinterpret_cast<unsigned long long>(a%d) %% "
        "(%d * sizeof(*a%d)) == 0);\n",
        (int)k, (int)k, (int)w, (int)k);
  }
  add(t, "      if (aligned) {\n        for (int64_t g = t; g < groups; g += T) {\n");
  for (k = 0; k < group->num_inputs; k++) {
    const char *type = dlop__fusion_c_type(group->input_types[k].dtype);
    if (group->input_scalar[k]) continue;
    add(t, "          dlop_fused_pack<%s, %d> x%d;\n", type, (int)w, (int)k);
    add(t,
        "          if (s%d) x%d = dlop_fused_load(reinterpret_cast<const dlop_fused_pack<%s, %d> "
        "*>(a%d + g * %d));\n",
        (int)k, (int)k, type, (int)w, (int)k, (int)w);
    add(t, "          else for (int e = 0; e < %d; e++) x%d.e[e] = a%d[0];\n", (int)w, (int)k,
        (int)k);
  }
  add(t, "#pragma unroll\n          for (int e = 0; e < %d; e++) acc = %s_combine_values(acc, ",
      (int)w, g);
  add_value_call(t, group, g, ACCESS_PACK);
  add(t, ");\n        }\n      } else {\n        for (int64_t g = t; g < groups; g += T)\n");
  add(t, "#pragma unroll\n          for (int e = 0; e < %d; e++) {\n", (int)w);
  add(t, "            const int64_t i = g * %d + e;\n            acc = %s_combine_values(acc, ",
      (int)w, g);
  add_value_call(t, group, g, ACCESS_STRIDED);
  add(t, ");\n          }\n      }\n");
  add(t, "      if (t == (int)(groups %% T))\n        for (int64_t i = groups * %d; i < n; i++)\n",
      (int)w);
  add(t, "          acc = %s_combine_values(acc, ", g);
  add_value_call(t, group, g, ACCESS_STRIDED);
  add(t, ");\n");
}

/* Thread t of T's share of output m's elements [begin, end). */
static void add_cuda_part(text *t, const dlop__fusion_group *group, const char *g) {
  int32_t k, first = 1;
  add(t,
      "template <int T>\n__device__ __forceinline__ %s_acc %s_part(const %s_pointers &p, "
      "const %s_layout &l, int64_t m, int64_t begin, int64_t end, int t) {\n",
      g, g, g, g);
  add_cuda_row(t, group);
  add(t, "  %s_acc acc = %s_identity_value();\n", g, g);
  add(t, "  const int r0 = (int)l.kept_ndim;\n  (void)r0;\n");
  add(t, "  if (l.reduced_ndim == 1) {\n");
  for (k = 0; k < group->num_inputs; k++)
    if (!group->input_scalar[k])
      add(t, "    const int64_t s%d = l.strides[%d][r0];\n", (int)k, (int)k);
  add(t, "    if (");
  for (k = 0; k < group->num_inputs; k++) {
    if (group->input_scalar[k]) continue;
    add(t, "%s(s%d == 0 || s%d == 1)", first ? "" : " && ", (int)k, (int)k);
    first = 0;
  }
  add(t, "%s) {\n", first ? "true" : "");
  add_cuda_packed(t, group, g);
  add(t, "    } else {\n");
  for (k = 0; k < group->num_inputs; k++)
    if (!group->input_scalar[k]) add(t, "      a%d += begin * s%d;\n", (int)k, (int)k);
  add(t, "      for (int64_t i = t; i < end - begin; i += T) acc = %s_combine_values(acc, ", g);
  add_value_call(t, group, g, ACCESS_STRIDED);
  add(t, ");\n    }\n  } else {\n");
  add(t, "    for (int64_t r = begin + t; r < end; r += T) {\n      int64_t rest = r;\n");
  for (k = 0; k < group->num_inputs; k++)
    if (!group->input_scalar[k]) add(t, "      int64_t q%d = 0;\n", (int)k);
  add(t, "      for (int d = r0 + (int)l.reduced_ndim - 1; d >= r0; d--) {\n");
  add(t, "        const int64_t size = l.shape[d], q = rest / size, at = rest - q * size;\n");
  add(t, "        rest = q;\n");
  for (k = 0; k < group->num_inputs; k++)
    if (!group->input_scalar[k]) add(t, "        q%d += at * l.strides[%d][d];\n", (int)k, (int)k);
  add(t, "      }\n      acc = %s_combine_values(acc, ", g);
  add_value_call(t, group, g, ACCESS_OFFSETS);
  add(t, ");\n    }\n  }\n  return acc;\n}\n");
}

static void add_cuda_kernels(text *t, const dlop__fusion_group *group, const char *g) {
  const char *out_type = dlop__fusion_c_type(group->output_types[0].dtype);
  add(t, "__device__ __forceinline__ %s_acc %s_warp_combine(%s_acc v) {\n", g, g, g);
  add(t, "#pragma unroll\n  for (int offset = 16; offset > 0; offset >>= 1)\n");
  add(t,
      "    v = %s_combine_values(v, __shfl_down_sync(0xffffffffu, v, offset));\n  return v;\n}\n",
      g);
  add(t, "__device__ __forceinline__ %s_acc %s_block_combine(%s_acc v) {\n", g, g, g);
  add(t, "  __shared__ %s_acc slots[8];\n", g);
  add(t, "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n");
  add(t, "  v = %s_warp_combine(v);\n  if (lane == 0) slots[warp] = v;\n  __syncthreads();\n", g);
  add(t, "  if (warp == 0) v = %s_warp_combine(lane < 8 ? slots[lane] : %s_identity_value());\n", g,
      g);
  add(t, "  __syncthreads(); /* the slots are free for the next item */\n  return v;\n}\n");
  add(t,
      "__device__ __forceinline__ void %s_store(void *out, const %s_layout &l, int64_t m, "
      "%s_acc acc) {\n",
      g, g, g);
  add(t, "  int64_t offset = 0, rest = m;\n  for (int d = (int)l.kept_ndim - 1; d >= 0; d--) {\n");
  add(t, "    const int64_t size = l.shape[d], q = rest / size;\n");
  add(t, "    offset += (rest - q * size) * l.out_strides[d];\n    rest = q;\n  }\n");
  add(t, "  ((%s *)out)[offset] = %s_finish_value(acc, l.count);\n}\n", out_type, g);
  add(t,
      "extern \"C\" __global__ void __launch_bounds__(256) %s_reduce_block(%s_pointers p, "
      "void *out, void *partials, %s_layout l) {\n",
      g, g, g);
  add(t, "  const int64_t items = l.outputs * l.parts;\n");
  add(t, "  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {\n");
  add(t, "    const int64_t m = item / l.parts, j = item - m * l.parts;\n");
  add(t, "    const int64_t begin = j * l.slice < l.count ? j * l.slice : l.count;\n");
  add(t, "    const int64_t end = l.slice < l.count - begin ? begin + l.slice : l.count;\n");
  add(t, "    %s_acc acc = %s_block_combine(%s_part<256>(p, l, m, begin, end, threadIdx.x));\n", g,
      g, g);
  add(t, "    if (threadIdx.x == 0) {\n      if (l.parts == 1) %s_store(out, l, m, acc);\n", g);
  add(t, "      else ((%s_acc *)partials)[item] = acc;\n    }\n  }\n}\n", g);
  add(t,
      "extern \"C\" __global__ void __launch_bounds__(256) %s_reduce_warp(%s_pointers p, "
      "void *out, %s_layout l) {\n",
      g, g, g);
  add(t, "  const int lane = threadIdx.x & 31;\n  const int64_t warps = (int64_t)gridDim.x * 8;\n");
  add(t,
      "  for (int64_t m = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5); m < l.outputs; "
      "m += warps) {\n");
  add(t, "    %s_acc acc = %s_warp_combine(%s_part<32>(p, l, m, 0, l.count, lane));\n", g, g, g);
  add(t, "    if (lane == 0) %s_store(out, l, m, acc);\n  }\n}\n", g);
  add(t,
      "extern \"C\" __global__ void __launch_bounds__(256) %s_reduce_finish(void *out, "
      "const void *partials, %s_layout l) {\n",
      g, g);
  add(t, "  const %s_acc *q = (const %s_acc *)partials;\n", g, g);
  add(t, "  for (int64_t m = blockIdx.x; m < l.outputs; m += gridDim.x) {\n");
  add(t, "    %s_acc acc = %s_identity_value();\n", g, g);
  add(t,
      "    for (int64_t j = threadIdx.x; j < l.parts; j += 256) "
      "acc = %s_combine_values(acc, q[m * l.parts + j]);\n",
      g);
  add(t,
      "    acc = %s_block_combine(acc);\n    if (threadIdx.x == 0) %s_store(out, l, m, acc);\n  "
      "}\n}\n\n",
      g, g);
}

void dlop__fusion_add_reduction_group(text *t, const dlop_function *function,
                                      const dlop__fusion_group *group, dlop__fusion_target target) {
  const dlop__fusion_reduction *r = group->reduction;
  char g[32];
  snprintf(g, sizeof g, "dlop_fused_g%d", (int)group->number);
  add(t, "/* ---- fused group %d: #%d %s reducing %d nodes:", (int)group->number,
      (int)r->node.index, r->node.op->name, (int)group->num_members);
  for (int32_t m = 0; m < group->num_members; m++)
    add(t, " #%d %s", (int)group->members[m].node.index, group->members[m].node.op->name);
  add(t, " ---- */\n");
  if (target == DLOP__FUSION_TARGET_CUDA) add_cuda_structs(t, group, g);
  add_scalar_functions(t, function, group, g);
  if (target == DLOP__FUSION_TARGET_C) {
    add_c(t, group, g);
  } else {
    add_cuda_part(t, group, g);
    add_cuda_kernels(t, group, g);
  }
}
