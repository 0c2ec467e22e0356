/* fusion_source.c — the source of the kernels of fused groups, for the host's C compiler or for
 * NVRTC. One module holds every group of a function: the host's prelude (fusion_prelude.h),
 * each op prelude once per name, then per group an element function — every member's scalar
 * body in its own block, reading its inputs converted to its compute dtypes and storing each
 * output to its dtype, so intermediates round as their unfused buffers would — and the entry
 * points around it. C: a run of n elements over the operands' pointers and strides (unit
 * strides, and inputs constant along the run, take loops gcc vectorizes). CUDA: grid-stride
 * kernels, contiguous (element and aligned-vector forms) and strided (offsets from the linear
 * index, by 32-bit division where the size fits, none for the outermost dim). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusion_source.h"

/* fusion_prelude.h's text (sdk/CMakeLists.txt embeds it) */
extern const char dlop__fusion_host_prelude[] __attribute__((visibility("hidden")));

typedef dlop__fusion_text text;

void dlop__fusion_text_vadd(text *t, const char *format, va_list args) {
  if (t->failed) return;
  for (;;) {
    size_t room = t->capacity - t->length;
    va_list copy;
    va_copy(copy, args);
    int n = vsnprintf(t->data ? t->data + t->length : NULL, t->data ? room : 0, format, copy);
    va_end(copy);
    if (n < 0) {
      t->failed = 1;
      return;
    }
    if (t->data != NULL && (size_t)n < room) {
      t->length += (size_t)n;
      return;
    }
    size_t capacity = t->capacity ? t->capacity : 16384;
    while (capacity - t->length <= (size_t)n) capacity *= 2;
    char *grown = realloc(t->data, capacity);
    if (grown == NULL) {
      t->failed = 1;
      return;
    }
    t->data = grown;
    t->capacity = capacity;
  }
}

static void add(text *t, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *format, ...) {
  va_list args;
  va_start(args, format);
  dlop__fusion_text_vadd(t, format, args);
  va_end(args);
}

uint64_t dlop__fusion_hash(const char *string) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const unsigned char *p = (const unsigned char *)string; *p; p++)
    hash = (hash ^ *p) * 0x100000001b3ull;
  return hash;
}

/* The C type holding a dtype's storage (float16 and bfloat16 as their bits). */
static const char *c_type(int32_t dtype) {
  switch (dtype) {
    case DLOP_INT8: return "int8_t";
    case DLOP_INT16: return "int16_t";
    case DLOP_INT32: return "int32_t";
    case DLOP_INT64: return "int64_t";
    case DLOP_FLOAT16:
    case DLOP_BFLOAT16: return "uint16_t";
    case DLOP_FLOAT32: return "float";
    case DLOP_FLOAT64: return "double";
    default: return "uint8_t"; /* bool (one byte, 0 or 1) and uint8 */
  }
}

/* Storage to compute (fusion_group.c admits only these): a float16/bfloat16 as float32. */
static const char *load_function(int32_t storage, int32_t compute) {
  if (storage == compute) return "";
  return storage == DLOP_FLOAT16 ? "dlop_scalar_load_float16" : "dlop_scalar_load_bfloat16";
}
static const char *store_function(int32_t storage, int32_t compute) {
  if (storage == compute) return "";
  return storage == DLOP_FLOAT16 ? "dlop_scalar_store_float16" : "dlop_scalar_store_bfloat16";
}

const char *dlop__fusion_c_type(int32_t dtype) { return c_type(dtype); }
const char *dlop__fusion_load_function(int32_t storage, int32_t compute) {
  return load_function(storage, compute);
}
const char *dlop__fusion_store_function(int32_t storage, int32_t compute) {
  return store_function(storage, compute);
}

void dlop__fusion_add_value(text *t, int32_t dtype, uint64_t bits) {
  switch (dtype) {
    case DLOP_INT8: add(t, "((int8_t)%d)", (int)(int8_t)(uint8_t)bits); break;
    case DLOP_INT16: add(t, "((int16_t)%d)", (int)(int16_t)(uint16_t)bits); break;
    case DLOP_INT32: add(t, "((int32_t)(%lldLL))", (long long)(int32_t)(uint32_t)bits); break;
    case DLOP_INT64:
      if (bits == 0x8000000000000000ull)
        add(t, "((int64_t)(-9223372036854775807LL - 1))");
      else
        add(t, "((int64_t)(%lldLL))", (long long)bits);
      break;
    case DLOP_FLOAT16:
    case DLOP_BFLOAT16: add(t, "((uint16_t)0x%04xu)", (unsigned)(bits & 0xFFFFu)); break;
    case DLOP_FLOAT32: {
      float value;
      uint32_t word = (uint32_t)bits;
      memcpy(&value, &word, sizeof value);
      add(t, "dlop_scalar_float_from_bits(0x%08xu) /* %.9g */", (unsigned)word, (double)value);
      break;
    }
    case DLOP_FLOAT64: {
      double value;
      memcpy(&value, &bits, sizeof value);
      add(t, "dlop_scalar_double_from_bits(0x%016llxull) /* %.17g */", (unsigned long long)bits,
          value);
      break;
    }
    default: add(t, "((uint8_t)%uu)", (unsigned)(bits & 0xFFu)); break;
  }
}

/* A literal's storage value as an expression of its C type. */
static void add_literal(text *t, const dlop__fusion_literal *literal) {
  dlop__fusion_add_value(t, literal->dtype, literal->bits);
}

/* ---- which members, inputs and outputs an element function covers ----------------------- */

/* The part of a group one element function computes: every member (main), or the members an
 * output depends on (per output), with the inputs they read. */
typedef struct part {
  char member[DLOP__FUSION_MAX_MEMBERS];
  char input[DLOP__FUSION_MAX_OPERANDS];
  char output[DLOP__FUSION_MAX_OPERANDS];
} part;

/* The member computing value v (-1: none). */
int32_t dlop__fusion_member_of_value(const dlop__fusion_group *group, int32_t v) {
  for (int32_t m = 0; m < group->num_members; m++)
    for (int32_t o = 0; o < group->members[m].node.num_outputs; o++)
      if (group->members[m].values[o] == v) return m;
  return -1;
}

static void mark_member(const dlop__fusion_group *group, part *p, int32_t m) {
  if (m < 0 || p->member[m]) return;
  p->member[m] = 1;
  const dlop__fusion_member *member = &group->members[m];
  for (int32_t j = 0; j < member->node.num_inputs; j++) {
    const dlop__fusion_source *source = &member->sources[j];
    if (source->kind == DLOP__FUSION_FROM_VALUE)
      mark_member(group, p, dlop__fusion_member_of_value(group, source->index));
    else if (source->kind == DLOP__FUSION_FROM_INPUT)
      p->input[source->index] = 1;
  }
}

/* output < 0: the whole group; else output `output` alone. */
static void make_part(const dlop__fusion_group *group, int32_t output, part *p) {
  memset(p, 0, sizeof *p);
  for (int32_t o = 0; o < group->num_outputs; o++) {
    if (output >= 0 && o != output) continue;
    p->output[o] = 1;
    mark_member(group, p, dlop__fusion_member_of_value(group, group->output_values[o]));
  }
  if (output < 0)
    for (int32_t m = 0; m < group->num_members; m++) mark_member(group, p, m);
}

void dlop__fusion_output_inputs(const dlop__fusion_group *group, int32_t output, char *used) {
  part p;
  make_part(group, output, &p);
  for (int32_t k = 0; k < group->num_inputs; k++) used[k] = p.input[k];
}

/* ---- the element function ------------------------------------------------------------------ */

static void add_source(text *t, const dlop__fusion_group *group, const dlop__fusion_source *s) {
  if (s->kind == DLOP__FUSION_FROM_INPUT)
    add(t, "x%d", (int)s->index);
  else if (s->kind == DLOP__FUSION_FROM_VALUE)
    add(t, "v%d", (int)s->index);
  else
    add_literal(t, &group->literals[s->index]);
}

/* dlop_p<k>, the parameters a body from source reads: the group's run-time value q<n> (an
 * argument of the element function), or the value itself where the member has none. */
static void add_member_params(text *t, const dlop__fusion_member *member) {
  const dlop__function_node *node = &member->node;
  for (int32_t k = 0; k < node->num_params; k++) {
    const dlop_param_value *value = &node->params[k];
    int is_float = value->kind == DLOP_PARAM_FLOAT;
    add(t, "    const %s dlop_p%d = ", is_float ? "double" : "int64_t", (int)k);
    if (member->param_base >= 0) {
      add(t, "q%d;\n", (int)(member->param_base + k));
    } else {
      uint64_t bits = (uint64_t)value->u.i;
      if (is_float) memcpy(&bits, &value->u.f, sizeof bits);
      dlop__fusion_add_value(t, is_float ? DLOP_FLOAT64 : DLOP_INT64, bits);
      add(t, ";\n");
    }
  }
}

/* The element function's trailing arguments: the group's run-time parameter values. */
static void add_param_arguments(text *t, const dlop__fusion_group *group, int first, int typed) {
  for (int32_t q = 0; q < group->num_params; q++) {
    const char *type = group->param_kinds[q] == DLOP_PARAM_FLOAT ? "double " : "int64_t ";
    add(t, "%s%sq%d", first && q == 0 ? "" : ", ", typed ? type : "", (int)q);
  }
}

/* The run-time parameter values q<n> at the top of an entry point, from their bits: the C
 * entry's pointer after the operands, the CUDA kernels' pointers struct (p.q). */
static void add_param_values(text *t, const dlop__fusion_group *group, const char *pointer,
                             const char *indent) {
  int32_t count = group->num_outputs + group->num_inputs;
  if (group->num_params == 0) return;
  if (strcmp(pointer, "p[%d]") == 0)
    add(t, "%sconst uint64_t *q = (const uint64_t *)p[%d];\n", indent, (int)count);
  for (int32_t q = 0; q < group->num_params; q++) {
    const char *from = strcmp(pointer, "p[%d]") == 0 ? "q" : "p.q";
    if (group->param_kinds[q] == DLOP_PARAM_FLOAT)
      add(t, "%sconst double q%d = dlop_scalar_double_from_bits(%s[%d]);\n", indent, (int)q,
          from, (int)q);
    else
      add(t, "%sconst int64_t q%d = (int64_t)%s[%d];\n", indent, (int)q, from, (int)q);
  }
}

/* DLOP_SCALAR_FN void <name>(inputs by value..., outputs by pointer...) */
static void add_element(text *t, const dlop_function *function, const dlop__fusion_group *group,
                        const part *p, const char *name) {
  int32_t k, first = 1;
  add(t, "DLOP_SCALAR_FN void %s(", name);
  for (k = 0; k < group->num_inputs; k++) {
    if (!p->input[k]) continue;
    add(t, "%s%s x%d", first ? "" : ", ", c_type(group->input_types[k].dtype), (int)k);
    first = 0;
  }
  for (k = 0; k < group->num_outputs; k++) {
    if (!p->output[k]) continue;
    add(t, "%s%s *y%d", first ? "" : ", ", c_type(group->output_types[k].dtype), (int)k);
    first = 0;
  }
  add_param_arguments(t, group, first, 1);
  add(t, ") {\n");
  dlop__fusion_add_members(t, function, group, p->member);
  for (k = 0; k < group->num_outputs; k++)
    if (p->output[k]) add(t, "  *y%d = v%d;\n", (int)k, (int)group->output_values[k]);
  add(t, "}\n\n");
}

void dlop__fusion_add_members(text *t, const dlop_function *function,
                              const dlop__fusion_group *group, const char *which) {
  for (int32_t m = 0; m < group->num_members; m++) {
    const dlop__fusion_member *member = &group->members[m];
    const dlop__function_node *node = &member->node;
    int32_t j;
    if (which != NULL && !which[m]) continue;
    for (j = 0; j < node->num_outputs; j++)
      add(t, "  %s v%d; /* %s */\n", c_type(node->output_types[j].dtype), (int)member->values[j],
          function->slot_names[node->output_slots[j]]);
    add(t, "  { /* #%d %s */\n", (int)node->index, node->op->name);
    for (j = 0; j < node->num_inputs; j++) {
      add(t, "    %s in%d = %s(", c_type(member->input_compute[j]), (int)j,
          load_function(node->input_types[j].dtype, member->input_compute[j]));
      add_source(t, group, &member->sources[j]);
      add(t, ");\n");
    }
    for (j = 0; j < node->num_outputs; j++)
      add(t, "    %s out%d;\n", c_type(member->output_compute[j]), (int)j);
    if (member->runtime_params) add_member_params(t, member);
    add(t, "    {\n%s\n    }\n", member->code);
    for (j = 0; j < node->num_outputs; j++)
      add(t, "    v%d = %s(out%d);\n", (int)member->values[j],
          store_function(node->output_types[j].dtype, member->output_compute[j]), (int)j);
    add(t, "  }\n");
  }
}

/* The call of an element function on element expressions: inputs `<prefix>x<k><suffix>` as
 * given by the caller's format. index_of(k) gives the subscript of operand k. */
typedef enum access_kind { ACCESS_UNIT, ACCESS_STRIDED, ACCESS_OFFSETS, ACCESS_PACK } access_kind;

/* Operand k of the kernel: outputs 0..O-1, then inputs. */
static void add_access(text *t, access_kind access, int32_t operand) {
  switch (access) {
    case ACCESS_UNIT: add(t, "[i]"); break;
    case ACCESS_STRIDED: add(t, "[i * s%d]", (int)operand); break;
    case ACCESS_OFFSETS: add(t, "[off[%d]]", (int)operand); break;
    case ACCESS_PACK: add(t, ".e[e]"); break;
  }
}

/* One element: the outputs' temporaries, the call, the stores. */
static void add_call(text *t, const dlop__fusion_group *group, const part *p, const char *name,
                     access_kind access, const char *indent) {
  int32_t k, first = 1, outputs = group->num_outputs;
  for (k = 0; k < outputs; k++)
    if (p->output[k] && access != ACCESS_PACK)
      add(t, "%s%s y%d;\n", indent, c_type(group->output_types[k].dtype), (int)k);
  add(t, "%s%s(", indent, name);
  for (k = 0; k < group->num_inputs; k++) {
    if (!p->input[k]) continue;
    add(t, "%s", first ? "" : ", ");
    first = 0;
    if (group->input_scalar[k]) {
      add(t, "c%d", (int)k);
    } else {
      add(t, "%s%d", access == ACCESS_PACK ? "x" : "a", (int)k);
      add_access(t, access, outputs + k);
    }
  }
  for (k = 0; k < outputs; k++) {
    if (!p->output[k]) continue;
    add(t, "%s", first ? "" : ", ");
    first = 0;
    if (access == ACCESS_PACK)
      add(t, "&r%d.e[e]", (int)k);
    else
      add(t, "&y%d", (int)k);
  }
  add_param_arguments(t, group, first, 0);
  add(t, ");\n");
  for (k = 0; k < outputs && access != ACCESS_PACK; k++) {
    if (!p->output[k]) continue;
    add(t, "%so%d", indent, (int)k);
    add_access(t, access, k);
    add(t, " = y%d;\n", (int)k);
  }
}

/* Typed names for the operands: o<k> outputs, a<k> array inputs, c<k> scalar inputs (read
 * once). pointer is "p[%d]" (C) or "p.p[%d]" (CUDA). */
static void add_operands(text *t, const dlop__fusion_group *group, const part *p,
                         const char *pointer, const char *indent) {
  char where[32];
  int32_t k, outputs = group->num_outputs;
  for (k = 0; k < outputs; k++) {
    if (!p->output[k]) continue;
    snprintf(where, sizeof where, pointer, (int)k);
    add(t, "%s%s *o%d = (%s *)%s;\n", indent, c_type(group->output_types[k].dtype), (int)k,
        c_type(group->output_types[k].dtype), where);
  }
  for (k = 0; k < group->num_inputs; k++) {
    const char *type = c_type(group->input_types[k].dtype);
    if (!p->input[k]) continue;
    snprintf(where, sizeof where, pointer, (int)(outputs + k));
    if (group->input_scalar[k])
      add(t, "%sconst %s c%d = *(const %s *)%s;\n", indent, type, (int)k, type, where);
    else
      add(t, "%sconst %s *a%d = (const %s *)%s;\n", indent, type, (int)k, type, where);
  }
  add_param_values(t, group, pointer, indent);
}

/* ---- C --------------------------------------------------------------------------------------- */

/* The condition (after "else if (") and the loop of a run whose outputs step by 1 and whose
 * inputs step by 1 or 0 (a row's statistic broadcast along it, as in a softmax): each input
 * constant along the run is copied into 1024 slots once, so that the loop, in chunks of 1024,
 * reads every input with unit stride and vectorizes. */
static void add_c_broadcast_run(text *t, const dlop__fusion_group *group, const part *p,
                                const char *element) {
  int32_t k, outputs = group->num_outputs, first = 1;
  for (k = 0; k < outputs + group->num_inputs; k++) {
    int input = k >= outputs,
        used = input ? p->input[k - outputs] && !group->input_scalar[k - outputs] : p->output[k];
    if (!used) continue;
    if (input)
      add(t, "%s(s[%d] == 0 || s[%d] == 1)", first ? "" : " && ", (int)k, (int)k);
    else
      add(t, "%ss[%d] == 1", first ? "" : " && ", (int)k);
    first = 0;
  }
  add(t, "%s) {\n", first ? "1" : "");
  for (k = 0; k < group->num_inputs; k++) {
    const char *type = c_type(group->input_types[k].dtype);
    int operand = (int)(outputs + k);
    if (!p->input[k] || group->input_scalar[k]) continue;
    add(t, "    %s splat%d[1024];\n    const %s *base%d = a%d;\n", type, (int)k, type, (int)k,
        (int)k);
    add(t,
        "    if (s[%d] == 0)\n      for (int64_t i = 0; i < (n < 1024 ? n : 1024); i++) "
        "splat%d[i] = a%d[0];\n",
        operand, (int)k, (int)k);
  }
  for (k = 0; k < outputs; k++)
    if (p->output[k])
      add(t, "    %s *obase%d = o%d;\n", c_type(group->output_types[k].dtype), (int)k, (int)k);
  add(t, "    for (int64_t start = 0; start < n; start += 1024) {\n");
  add(t, "      const int64_t m = n - start < 1024 ? n - start : 1024;\n");
  for (k = 0; k < group->num_inputs; k++) {
    if (!p->input[k] || group->input_scalar[k]) continue;
    add(t, "      const %s *a%d = s[%d] ? base%d + start : splat%d;\n",
        c_type(group->input_types[k].dtype), (int)k, (int)(outputs + k), (int)k, (int)k);
  }
  for (k = 0; k < outputs; k++)
    if (p->output[k])
      add(t, "      %s *o%d = obase%d + start;\n", c_type(group->output_types[k].dtype), (int)k,
          (int)k);
  add(t, "#pragma omp simd\n      for (int64_t i = 0; i < m; i++) {\n");
  add_call(t, group, p, element, ACCESS_UNIT, "        ");
  add(t, "      }\n    }\n");
}

static void add_c_run(text *t, const dlop__fusion_group *group, const part *p,
                      const char *element, const char *name) {
  int32_t k, outputs = group->num_outputs, first = 1;
  add(t, "DLOP_FUSED_EXPORT void %s(char *const *p, const int64_t *s, int64_t n) {\n", name);
  add_operands(t, group, p, "p[%d]", "  ");
  add(t, "  if (");
  for (k = 0; k < outputs + group->num_inputs; k++) {
    int used = k < outputs ? p->output[k] : p->input[k - outputs] && !group->input_scalar[k - outputs];
    if (!used) continue;
    add(t, "%ss[%d] == 1", first ? "" : " && ", (int)k);
    first = 0;
  }
  add(t, "%s) {\n", first ? "1" : "");
  add(t, "#pragma omp simd\n    for (int64_t i = 0; i < n; i++) {\n");
  add_call(t, group, p, element, ACCESS_UNIT, "      ");
  add(t, "    }\n  } else if (");
  add_c_broadcast_run(t, group, p, element);
  add(t, "  } else {\n");
  for (k = 0; k < outputs + group->num_inputs; k++) add(t, "    const int64_t s%d = s[%d];\n", (int)k, (int)k);
  add(t, "    for (int64_t i = 0; i < n; i++) {\n");
  add_call(t, group, p, element, ACCESS_STRIDED, "      ");
  add(t, "    }\n  }\n}\n\n");
}

/* ---- CUDA ------------------------------------------------------------------------------------ */

const char dlop__fusion_cuda_support[] =
    "/* ---- fused kernels' support (CUDA) ---- */\n"
    "template <typename T, int W> struct alignas(sizeof(T) * W) dlop_fused_pack { T e[W]; };\n"
    "template <int B> struct dlop_fused_bits;\n"
    "template <> struct dlop_fused_bits<16> { typedef int4 type; };\n"
    "template <> struct dlop_fused_bits<8> { typedef int2 type; };\n"
    "template <> struct dlop_fused_bits<4> { typedef int type; };\n"
    "template <> struct dlop_fused_bits<2> { typedef short type; };\n"
    "template <> struct dlop_fused_bits<1> { typedef signed char type; };\n"
    "/* plain loads and stores, one instruction per pack (no evict-first hint: the kit's\n"
    " * cuda_kernel_util.cuh says what it cost) */\n"
    "template <typename P> __device__ __forceinline__ P dlop_fused_load(const P *p) {\n"
    "  typedef typename dlop_fused_bits<sizeof(P)>::type B;\n"
    "  B b = *reinterpret_cast<const B *>(p);\n"
    "  return *reinterpret_cast<const P *>(&b);\n"
    "}\n"
    "template <typename P> __device__ __forceinline__ void dlop_fused_store(P *p, const P &v) {\n"
    "  typedef typename dlop_fused_bits<sizeof(P)>::type B;\n"
    "  *reinterpret_cast<B *>(p) = *reinterpret_cast<const B *>(&v);\n"
    "}\n"
    "#define DLOP_FUSED_THREAD ((int64_t)blockIdx.x * blockDim.x + threadIdx.x)\n"
    "#define DLOP_FUSED_THREADS ((int64_t)gridDim.x * blockDim.x)\n\n";

static void add_cuda_structs(text *t, const dlop__fusion_group *group) {
  int32_t count = group->num_outputs + group->num_inputs;
  if (group->num_params > 0) /* the run-time parameters' bits after the pointers */
    add(t, "struct dlop_fused_g%d_pointers { void *p[%d]; uint64_t q[%d]; };\n",
        (int)group->number, (int)count, (int)group->num_params);
  else
    add(t, "struct dlop_fused_g%d_pointers { void *p[%d]; };\n", (int)group->number, (int)count);
  add(t, "struct dlop_fused_g%d_layout { int64_t ndim; int64_t shape[%d]; int64_t strides[%d][%d]; };\n\n",
      (int)group->number, DLOP_MAX_NDIM, (int)count, DLOP_MAX_NDIM);
}

static void add_cuda_contiguous(text *t, const dlop__fusion_group *group, const part *p,
                                const char *element) {
  int32_t g = group->number;
  add(t, "extern \"C\" __global__ void __launch_bounds__(256) dlop_fused_g%d_contiguous("
         "dlop_fused_g%d_pointers p, int64_t n) {\n", (int)g, (int)g);
  add_operands(t, group, p, "p.p[%d]", "  ");
  add(t, "  for (int64_t i = DLOP_FUSED_THREAD; i < n; i += DLOP_FUSED_THREADS) {\n");
  add_call(t, group, p, element, ACCESS_UNIT, "    ");
  add(t, "  }\n}\n\n");
}

/* The pack loops of the vector kernel, the u-th pack at `pack_index` (of `index_type`): all U
 * packs loaded before any is computed so that U loads are in flight per thread, then computed
 * and stored; `checked`: a pack at or past `vectors` ends them. */
static void add_cuda_packs(text *t, const dlop__fusion_group *group, const part *p,
                           const char *element, const char *index_type, const char *pack_index,
                           int checked) {
  int32_t k, w = group->vector_width, outputs = group->num_outputs;
  int32_t u = group->packs_per_thread;
  for (k = 0; k < group->num_inputs; k++) {
    const char *type = c_type(group->input_types[k].dtype);
    if (!p->input[k] || group->input_scalar[k]) continue;
    add(t, "    dlop_fused_pack<%s, %d> x%d_[%d];\n", type, (int)w, (int)k, (int)u);
  }
  add(t, "#pragma unroll\n    for (int u = 0; u < %d; u++) {\n", (int)u);
  add(t, "      const %s v = %s;\n", index_type, pack_index);
  if (checked) add(t, "      if (v >= vectors) break;\n");
  for (k = 0; k < group->num_inputs; k++) {
    const char *type = c_type(group->input_types[k].dtype);
    if (!p->input[k] || group->input_scalar[k]) continue;
    add(t, "      x%d_[u] = dlop_fused_load(reinterpret_cast<const dlop_fused_pack<%s, %d> *>("
           "a%d + v * %d));\n", (int)k, type, (int)w, (int)k, (int)w);
  }
  add(t, "    }\n");
  add(t, "#pragma unroll\n    for (int u = 0; u < %d; u++) {\n", (int)u);
  add(t, "      const %s v = %s;\n", index_type, pack_index);
  if (checked) add(t, "      if (v >= vectors) break;\n");
  for (k = 0; k < group->num_inputs; k++) {
    const char *type = c_type(group->input_types[k].dtype);
    if (!p->input[k] || group->input_scalar[k]) continue;
    add(t, "      const dlop_fused_pack<%s, %d> &x%d = x%d_[u];\n", type, (int)w, (int)k, (int)k);
  }
  for (k = 0; k < outputs; k++)
    add(t, "      dlop_fused_pack<%s, %d> r%d;\n", c_type(group->output_types[k].dtype), (int)w, (int)k);
  add(t, "#pragma unroll\n      for (int e = 0; e < %d; e++) {\n", (int)w);
  add_call(t, group, p, element, ACCESS_PACK, "        ");
  add(t, "      }\n");
  for (k = 0; k < outputs; k++) {
    const char *type = c_type(group->output_types[k].dtype);
    add(t, "      dlop_fused_store(reinterpret_cast<dlop_fused_pack<%s, %d> *>(o%d + v * %d), r%d);\n",
        type, (int)w, (int)k, (int)w, (int)k);
  }
  add(t, "    }\n");
}

/* U packs of W elements per thread, one aligned pack per array operand (the host launches it
 * when every array operand's pointer is aligned to its pack), then the last elements one by one.
 * The grid-stride form: 256 threads, each step's packs a grid apart (coalesced), the rest
 * (n % W) by the whole grid. The chunk form (chunk_block threads): block b computes chunk b of
 * blockDim * U packs, with no loop or bounds check, its pointers moved to the chunk once so
 * that a thread's offsets are 32-bit (its packs blockDim apart); the host launches one block a
 * whole chunk and one more for the elements past them, if any. */
static void add_cuda_vector(text *t, const dlop__fusion_group *group, const part *p,
                            const char *element) {
  int32_t g = group->number, w = group->vector_width, u = group->packs_per_thread, k;
  int32_t block = group->chunk_block ? group->chunk_block : 256;
  add(t, "extern \"C\" __global__ void __launch_bounds__(%d) dlop_fused_g%d_vector("
         "dlop_fused_g%d_pointers p, int64_t n) {\n", (int)block, (int)g, (int)g);
  add_operands(t, group, p, "p.p[%d]", "  ");
  if (group->chunk_block) {
    add(t, "  const int64_t chunk = (int64_t)blockDim.x * %d, chunks = n / %d / chunk;\n", (int)u,
        (int)w);
    add(t, "  if ((int64_t)blockIdx.x < chunks) {\n");
    add(t, "    const int64_t start = (int64_t)blockIdx.x * chunk * %d;\n", (int)w);
    for (k = 0; k < group->num_outputs; k++)
      if (p->output[k]) add(t, "    o%d += start;\n", (int)k);
    for (k = 0; k < group->num_inputs; k++)
      if (p->input[k] && !group->input_scalar[k]) add(t, "    a%d += start;\n", (int)k);
    add(t, "    const int v0 = threadIdx.x;\n");
    add_cuda_packs(t, group, p, element, "int", "v0 + u * (int)blockDim.x", 0);
    add(t, "    return;\n  }\n");
    add(t, "  for (int64_t i = chunks * chunk * %d + threadIdx.x; i < n; i += blockDim.x) {\n",
        (int)w);
  } else {
    add(t, "  const int64_t vectors = n / %d, step = DLOP_FUSED_THREADS;\n", (int)w);
    add(t, "  for (int64_t v0 = DLOP_FUSED_THREAD; v0 < vectors; v0 += %d * step) {\n", (int)u);
    add_cuda_packs(t, group, p, element, "int64_t", "v0 + u * step", 1);
    add(t, "  }\n");
    add(t, "  for (int64_t i = vectors * %d + DLOP_FUSED_THREAD; i < n; i += DLOP_FUSED_THREADS) {\n",
        (int)w);
  }
  add_call(t, group, p, element, ACCESS_UNIT, "    ");
  add(t, "  }\n}\n\n");
}

/* Offsets from the linear index: one division per collapsed dim, in Index (uint32_t when the
 * loop has fewer than 2^32 elements: several times cheaper than 64-bit division). */
static void add_cuda_strided(text *t, const dlop__fusion_group *group, const part *p,
                             const char *element, const char *name) {
  int32_t g = group->number, k, count = group->num_outputs + group->num_inputs;
  add(t, "template <typename Index>\n__device__ __forceinline__ void %s_body("
         "const dlop_fused_g%d_pointers &p, int64_t n, const dlop_fused_g%d_layout &l) {\n",
      name, (int)g, (int)g);
  add_operands(t, group, p, "p.p[%d]", "  ");
  add(t, "  for (int64_t i = DLOP_FUSED_THREAD; i < n; i += DLOP_FUSED_THREADS) {\n");
  add(t, "    int64_t off[%d];\n", (int)count);
  add(t, "    if (l.ndim == 1) {\n");
  for (k = 0; k < count; k++) add(t, "      off[%d] = i * l.strides[%d][0];\n", (int)k, (int)k);
  add(t, "    } else {\n");
  for (k = 0; k < count; k++) add(t, "      off[%d] = 0;\n", (int)k);
  add(t, "      Index rest = (Index)i;\n");
  add(t, "      for (int d = (int)l.ndim - 1; d > 0; d--) {\n");
  add(t, "        const Index size = (Index)l.shape[d], q = rest / size;\n");
  add(t, "        const int64_t at = (int64_t)(rest - q * size);\n        rest = q;\n");
  for (k = 0; k < count; k++) add(t, "        off[%d] += at * l.strides[%d][d];\n", (int)k, (int)k);
  add(t, "      }\n"); /* the outermost index is what remains: no division */
  for (k = 0; k < count; k++)
    add(t, "      off[%d] += (int64_t)rest * l.strides[%d][0];\n", (int)k, (int)k);
  add(t, "    }\n");
  add_call(t, group, p, element, ACCESS_OFFSETS, "    ");
  add(t, "  }\n}\n");
  add(t, "extern \"C\" __global__ void __launch_bounds__(256) %s64(dlop_fused_g%d_pointers p, "
         "int64_t n, dlop_fused_g%d_layout l) {\n  %s_body<uint64_t>(p, n, l);\n}\n",
      name, (int)g, (int)g, name);
  add(t, "extern \"C\" __global__ void __launch_bounds__(256) %s32(dlop_fused_g%d_pointers p, "
         "int64_t n, dlop_fused_g%d_layout l) {\n  %s_body<uint32_t>(p, n, l);\n}\n\n",
      name, (int)g, (int)g, name);
}

/* ---- the module -------------------------------------------------------------------------------- */

/* One op's prelude as a group's member or reduction uses it. */
typedef struct prelude_use {
  const char *text, *name, *op;
} prelude_use;

/* The preludes the groups use, in order (members, then the reduction, group by group), into
 * uses when it is not NULL; returns how many. */
static int32_t prelude_uses(dlop__fusion_group *const *groups, int32_t count, prelude_use *uses) {
  int32_t found = 0;
  for (int32_t g = 0; g < count; g++) {
    for (int32_t m = 0; m < groups[g]->num_members; m++) {
      const dlop__fusion_member *member = &groups[g]->members[m];
      if (member->prelude == NULL) continue;
      if (uses != NULL)
        uses[found] = (prelude_use){member->prelude, member->prelude_name, member->node.op->name};
      found++;
    }
    for (int32_t r = 0; groups[g]->row != NULL && r < groups[g]->row->num_reductions; r++) {
      const dlop__fusion_reduction *body = &groups[g]->row->reductions[r].body;
      if (body->prelude == NULL) continue;
      if (uses != NULL) uses[found] = (prelude_use){body->prelude, body->prelude_name, body->node.op->name};
      found++;
    }
    const dlop__fusion_reduction *reduction = groups[g]->reduction;
    if (reduction == NULL || reduction->prelude == NULL) continue;
    if (uses != NULL)
      uses[found] =
          (prelude_use){reduction->prelude, reduction->prelude_name, reduction->node.op->name};
    found++;
  }
  return found;
}

/* Each prelude once per name, in order of first use; two of one name must be one text. */
static int add_preludes(text *t, dlop__fusion_group *const *groups, int32_t count) {
  int32_t total = prelude_uses(groups, count, NULL);
  prelude_use *uses = malloc(sizeof(prelude_use) * ((size_t)total + 1));
  if (uses == NULL) return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory writing the preludes");
  prelude_uses(groups, count, uses);
  for (int32_t i = 0; i < total; i++) {
    int seen = 0;
    for (int32_t j = 0; j < i && !seen; j++) {
      if (strcmp(uses[j].name, uses[i].name) != 0) continue;
      seen = 1;
      if (strcmp(uses[j].text, uses[i].text) != 0) {
        int status = dlop__error(DLOP_PLUGIN_ERROR,
                                 "fusion: ops '%s' and '%s' both name their body's prelude "
                                 "\"%s\" but the texts differ (one name must mean one text: "
                                 "give a changed prelude a new name)",
                                 uses[j].op, uses[i].op, uses[i].name);
        free(uses);
        return status;
      }
    }
    if (!seen)
      add(t, "/* ---- prelude \"%s\" (op %s) ---- */\n%s\n", uses[i].name, uses[i].op,
          uses[i].text);
  }
  free(uses);
  return DLOP_OK;
}

static void add_group(text *t, const dlop_function *function, const dlop__fusion_group *group,
                      dlop__fusion_target target) {
  char element[64], name[64];
  part whole, alone;
  int32_t g = group->number;
  add(t, "/* ---- fused group %d: %d nodes:", (int)g, (int)group->num_members);
  for (int32_t m = 0; m < group->num_members; m++)
    add(t, " #%d %s", (int)group->members[m].node.index, group->members[m].node.op->name);
  add(t, " ---- */\n");
  if (target == DLOP__FUSION_TARGET_CUDA) add_cuda_structs(t, group);
  make_part(group, -1, &whole);
  snprintf(element, sizeof element, "dlop_fused_g%d_element", (int)g);
  add_element(t, function, group, &whole, element);
  if (target == DLOP__FUSION_TARGET_C) {
    snprintf(name, sizeof name, "dlop_fused_g%d_run", (int)g);
    add_c_run(t, group, &whole, element, name);
  } else {
    add_cuda_contiguous(t, group, &whole, element);
    add_cuda_vector(t, group, &whole, element);
    snprintf(name, sizeof name, "dlop_fused_g%d_strided", (int)g);
    add_cuda_strided(t, group, &whole, element, name);
  }
  for (int32_t o = 0; group->per_output && o < group->num_outputs; o++) {
    make_part(group, o, &alone);
    snprintf(element, sizeof element, "dlop_fused_g%d_out%d_element", (int)g, (int)o);
    add_element(t, function, group, &alone, element);
    if (target == DLOP__FUSION_TARGET_C) {
      snprintf(name, sizeof name, "dlop_fused_g%d_out%d_run", (int)g, (int)o);
      add_c_run(t, group, &alone, element, name);
    } else {
      snprintf(name, sizeof name, "dlop_fused_g%d_out%d_strided", (int)g, (int)o);
      add_cuda_strided(t, group, &alone, element, name);
    }
  }
}

int dlop__fusion_generate(const dlop_function *function, dlop__fusion_group *const *groups,
                        int32_t count, dlop__fusion_target target, char **source) {
  text t = {NULL, 0, 0, 0};
  *source = NULL;
  add(&t, "/* generated by dlop: the kernels of %d fused group%s (%s) */\n", (int)count,
      count == 1 ? "" : "s", target == DLOP__FUSION_TARGET_C ? "C" : "CUDA");
  add(&t, "%s\n", dlop__fusion_host_prelude);
  int status = add_preludes(&t, groups, count);
  if (status != DLOP_OK) {
    free(t.data);
    return status;
  }
  if (target == DLOP__FUSION_TARGET_C)
    add(&t, "#define DLOP_FUSED_EXPORT __attribute__((visibility(\"default\")))\n\n");
  else
    add(&t, "%s", dlop__fusion_cuda_support);
  for (int32_t g = 0; g < count; g++) {
    if (groups[g]->row != NULL)
      dlop__fusion_add_row_group(&t, function, groups[g], target);
    else if (groups[g]->reduction != NULL)
      dlop__fusion_add_reduction_group(&t, function, groups[g], target);
    else
      add_group(&t, function, groups[g], target);
  }
  if (t.failed) {
    free(t.data);
    return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory writing the fused kernels' source");
  }
  *source = t.data;
  return DLOP_OK;
}
