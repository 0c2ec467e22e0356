/* source_elementwise.c — dlop_define_elementwise: an elementwise op from one scalar body,
 * defined at run time. The source is checked (names, dtypes, parameters), copied into a state
 * the op keeps for the life of the process, its body compiled once with the host's C compiler
 * for every dtype (before anything is registered, so a body that does not compile leaves no op
 * behind), and the op registered as a one-op in-process plugin (dlop_register_plugin), the
 * same path a Python-defined op would take. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlop/kit/kernel_error.h>

#include "fusion.h"
#include "fusion_alone.h"
#include "source_elementwise.h"

/* The ops defined so far, to return one again for an identical source. */
static pthread_mutex_t define_lock = PTHREAD_MUTEX_INITIALIZER;
static dlop__source_elementwise **defined;
static int num_defined, defined_capacity;

static int grow_defined(void) {
  if (num_defined < defined_capacity) return 0;
  int next = defined_capacity ? defined_capacity * 2 : 8;
  void *grown = realloc(defined, sizeof *defined * (size_t)next);
  if (grown == NULL) return -1;
  defined = grown;
  defined_capacity = next;
  return 0;
}

/* The size of the first release's struct: fields appended later are read only where a caller's
 * struct_size covers them (DESIGN.md: append-only, struct_size-gated). */
#define DLOP__ELEMENTWISE_SOURCE_V1_SIZE \
  (offsetof(dlop_elementwise_source, reserved) + sizeof(int32_t))

/* Names the wrapper itself uses, the keywords of C11 and C++17 (NVRTC compiles C++) with C++'s
 * alternative tokens, and the object-like macros of <math.h> that a body may see. */
static const char *const reserved_names[] = {
    "T", "auto", "bool", "break", "case", "char", "class", "const", "continue", "default",
    "delete", "do", "double", "else", "enum", "extern", "false", "float", "for", "goto", "if",
    "inline", "int", "long", "namespace", "new", "operator", "private", "public", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "template",
    "this", "true", "typedef", "typename", "union", "unsigned", "using", "void", "volatile",
    "while",
    /* C11 */
    "_Alignas", "_Alignof", "_Atomic", "_Bool", "_Complex", "_Generic", "_Imaginary",
    "_Noreturn", "_Static_assert", "_Thread_local",
    /* C++17 */
    "alignas", "alignof", "asm", "catch", "char16_t", "char32_t", "const_cast", "constexpr",
    "decltype", "dynamic_cast", "explicit", "export", "friend", "mutable", "noexcept", "nullptr",
    "protected", "reinterpret_cast", "static_assert", "static_cast", "thread_local", "throw",
    "try", "typeid", "virtual", "wchar_t",
    /* C++'s alternative tokens */
    "and", "and_eq", "bitand", "bitor", "compl", "not", "not_eq", "or", "or_eq", "xor", "xor_eq",
    /* <math.h>'s object-like macros */
    "NAN", "INFINITY", "HUGE_VAL", "HUGE_VALF", "HUGE_VALL", "M_PI", "M_E", NULL};

static int is_identifier(const char *name) {
  if (name == NULL || name[0] == '\0') return 0;
  for (const char *p = name; *p; p++) {
    int letter = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_';
    if (!letter && !(*p >= '0' && *p <= '9' && p != name)) return 0;
  }
  return 1;
}

/* in0, out12: the wrapper's own variables. */
static int is_numbered(const char *name, const char *prefix) {
  size_t length = strlen(prefix);
  if (strncmp(name, prefix, length) != 0 || name[length] == '\0') return 0;
  for (const char *p = name + length; *p; p++)
    if (*p < '0' || *p > '9') return 0;
  return 1;
}

/* Whether the body mentions name as a whole identifier. */
static int body_mentions(const char *body, const char *name) {
  size_t length = strlen(name);
  for (const char *p = strstr(body, name); p != NULL; p = strstr(p + 1, name)) {
    int before = p > body && (p[-1] == '_' || (p[-1] >= '0' && p[-1] <= '9') ||
                              (p[-1] >= 'A' && p[-1] <= 'Z') || (p[-1] >= 'a' && p[-1] <= 'z'));
    char c = p[length];
    int after = c == '_' || (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
    if (!before && !after) return 1;
  }
  return 0;
}

/* One name of the body: an identifier, not reserved, not an earlier one. what: "input". */
static int check_name(const char *op, const char *what, int32_t index, const char *name,
                      const char *const *earlier, int32_t num_earlier) {
  if (!is_identifier(name))
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_define_elementwise: %s: %s #%d is %s%.64s%s: expected a C identifier "
                       "([A-Za-z_][A-Za-z0-9_]*)",
                       op, what, (int)index, name ? "'" : "", name ? name : "NULL", name ? "'" : "");
  for (int k = 0; reserved_names[k] != NULL; k++)
    if (strcmp(reserved_names[k], name) == 0)
      return dlop__error(DLOP_INVALID_ARGUMENT,
                         "dlop_define_elementwise: %s: %s '%s' is reserved (%s): choose another "
                         "name",
                         op, what, name,
                         k == 0 ? "the body's compute type" : "a C or C++ keyword or a <math.h> macro");
  if (is_numbered(name, "in") || is_numbered(name, "out") || strncmp(name, "dlop_", 5) == 0)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_define_elementwise: %s: %s '%s' is reserved (in0.., out0.. and "
                       "dlop_* are the generated kernel's own names): choose another name",
                       op, what, name);
  for (int32_t k = 0; k < num_earlier; k++)
    if (strcmp(earlier[k], name) == 0)
      return dlop__error(DLOP_INVALID_ARGUMENT,
                         "dlop_define_elementwise: %s: the name '%s' is used twice (inputs, "
                         "outputs and parameters need distinct names)",
                         op, name);
  return DLOP_OK;
}

/* DLOP_DTYPES_FLOAT | DLOP_DTYPES_INT: what a body can compute (bool's 0-or-1 storage is a
 * promise a body cannot be held to). */
#define SOURCE_DTYPES (DLOP_DTYPES_FLOAT | DLOP_DTYPES_INT)

static int check_source(const dlop_elementwise_source *s) {
  if (s == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_define_elementwise: source is NULL: expected a dlop_elementwise_source");
  if (s->struct_size < DLOP__ELEMENTWISE_SOURCE_V1_SIZE)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_define_elementwise: struct_size is %u, expected at least %zu "
                       "(sizeof(dlop_elementwise_source) of the first release)",
                       s->struct_size, (size_t)DLOP__ELEMENTWISE_SOURCE_V1_SIZE);
  if (s->reserved != 0)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_define_elementwise: reserved is %d: expected 0", (int)s->reserved);
  if (!is_identifier(s->name))
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_define_elementwise: the op name %s%.64s%s is not an identifier: "
                       "expected [A-Za-z_][A-Za-z0-9_]*",
                       s->name ? "'" : "", s->name ? s->name : "NULL", s->name ? "'" : "");
  const char *op = s->name;
  if (s->body == NULL || strspn(s->body, " \t\r\n;") == strlen(s->body))
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_define_elementwise: %s: the body is %s: expected C statements "
                       "assigning every output",
                       op, s->body ? "empty" : "NULL");
  if (s->dtypes & ~(uint32_t)SOURCE_DTYPES) {
    char bad[160];
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_define_elementwise: %s: dtypes 0x%x holds %s: expected floats "
                       "and integers (bool is not supported)",
                       op, s->dtypes,
                       dlop_format_dtypes(s->dtypes & ~(uint32_t)SOURCE_DTYPES, bad, sizeof bad));
  }
  if (s->num_inputs < 1 || s->num_outputs < 1 || s->num_inputs > DLOP__FUSION_MAX_OPERANDS ||
      s->num_outputs > DLOP__FUSION_MAX_OPERANDS ||
      s->num_inputs + s->num_outputs > DLOP__FUSION_MAX_OPERANDS)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_define_elementwise: %s: %d inputs and %d outputs: expected at least "
                       "one of each, and at most %d together",
                       op, (int)s->num_inputs, (int)s->num_outputs, DLOP__FUSION_MAX_OPERANDS);
  if (s->num_params < 0 || (s->num_params > 0 && s->params == NULL) || s->inputs == NULL ||
      s->outputs == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_define_elementwise: %s: %s is NULL or num_params (%d) is negative",
                       op, s->inputs == NULL ? "inputs" : s->outputs == NULL ? "outputs" : "params",
                       (int)s->num_params);
  const char *names[DLOP__FUSION_MAX_OPERANDS + 64];
  int32_t count = 0;
  if (s->num_params > 64)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_define_elementwise: %s: %d parameters: expected at most 64", op,
                       (int)s->num_params);
  for (int32_t i = 0; i < s->num_inputs; i++) {
    int status = check_name(op, "input", i, s->inputs[i], names, count);
    if (status != DLOP_OK) return status;
    names[count++] = s->inputs[i];
  }
  for (int32_t o = 0; o < s->num_outputs; o++) {
    int status = check_name(op, "output", o, s->outputs[o], names, count);
    if (status != DLOP_OK) return status;
    if (!body_mentions(s->body, s->outputs[o]))
      return dlop__error(DLOP_INVALID_ARGUMENT,
                         "dlop_define_elementwise: %s: the body never names output '%s': it must "
                         "assign every output",
                         op, s->outputs[o]);
    names[count++] = s->outputs[o];
  }
  for (int32_t p = 0; p < s->num_params; p++) {
    const dlop_param_decl *decl = &s->params[p];
    int status = check_name(op, "parameter", p, decl->name, names, count);
    if (status != DLOP_OK) return status;
    if ((decl->kind != DLOP_PARAM_FLOAT && decl->kind != DLOP_PARAM_INT) ||
        decl->default_value.kind != decl->kind)
      return dlop__error(DLOP_INVALID_ARGUMENT,
                         "dlop_define_elementwise: %s: parameter '%s' is declared %s with a "
                         "default of kind %s: expected float or int, and a default of that kind",
                         op, decl->name, dlop_param_kind_name(decl->kind),
                         dlop_param_kind_name(decl->default_value.kind));
    names[count++] = decl->name;
  }
  return DLOP_OK;
}

static void free_source(dlop__source_elementwise *source) {
  if (source == NULL) return;
  for (int32_t i = 0; source->inputs && i < source->num_inputs; i++) free(source->inputs[i]);
  for (int32_t o = 0; source->outputs && o < source->num_outputs; o++) free(source->outputs[o]);
  for (int32_t p = 0; source->params && p < source->num_params; p++) {
    free((char *)source->params[p].name);
    free((char *)source->params[p].doc);
  }
  free(source->inputs);
  free(source->outputs);
  free(source->params);
  free(source->name);
  free(source->doc);
  free(source->body);
  free(source->body_file);
  free(source->plugin_name);
  free(source->origin);
  free(source);
}

static char *copy_text(const char *text, int *failed) {
  char *copy = strdup(text ? text : "");
  if (copy == NULL) *failed = 1;
  return copy;
}

static char *format_text(int *failed, const char *format, const char *a, const char *b) {
  size_t length = strlen(format) + strlen(a) + strlen(b) + 1;
  char *text = malloc(length);
  if (text == NULL) {
    *failed = 1;
    return NULL;
  }
  snprintf(text, length, format, a, b);
  return text;
}

/* The op's own copy of s, with its descriptors filled. */
static dlop__source_elementwise *copy_source(const dlop_elementwise_source *s) {
  int failed = 0;
  dlop__source_elementwise *c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  c->num_inputs = s->num_inputs;
  c->num_outputs = s->num_outputs;
  c->num_params = s->num_params;
  c->dtypes = s->dtypes ? s->dtypes : DLOP_DTYPES_FLOAT;
  c->name = copy_text(s->name, &failed);
  c->body = copy_text(s->body, &failed);
  c->doc = s->doc ? copy_text(s->doc, &failed)
                  : format_text(&failed, "elementwise op defined from source: %s%s", s->body, "");
  c->body_file = format_text(&failed, "%s (body)%s", s->name, "");
  c->plugin_name = format_text(&failed, "source_%s%s", s->name, "");
  c->origin = format_text(&failed, "dlop_define_elementwise %s%s", s->name, "");
  c->inputs = calloc((size_t)s->num_inputs, sizeof(char *));
  c->outputs = calloc((size_t)s->num_outputs, sizeof(char *));
  c->params = calloc((size_t)s->num_params + 1, sizeof(dlop_param_decl));
  if (!c->inputs || !c->outputs || !c->params) failed = 1;
  for (int32_t i = 0; !failed && i < s->num_inputs; i++) c->inputs[i] = copy_text(s->inputs[i], &failed);
  for (int32_t o = 0; !failed && o < s->num_outputs; o++)
    c->outputs[o] = copy_text(s->outputs[o], &failed);
  for (int32_t p = 0; !failed && p < s->num_params; p++) {
    c->params[p] = s->params[p];
    c->params[p].name = copy_text(s->params[p].name, &failed);
    c->params[p].doc = copy_text(s->params[p].doc, &failed);
  }
  if (failed) {
    free_source(c);
    return NULL;
  }
  dlop_op_desc *op = &c->op;
  op->struct_size = sizeof *op;
  /* the generated kernels allocate nothing and never synchronize */
  op->flags = DLOP_OP_DETERMINISTIC | DLOP_OP_CUDA_GRAPH_SAFE;
  op->name = c->name;
  op->doc = c->doc;
  op->num_inputs = c->num_inputs;
  op->num_outputs = c->num_outputs;
  op->params = c->params;
  op->num_params = c->num_params;
  op->cpu_dtypes = op->cuda_dtypes = c->dtypes;
  op->op_data = c;
  dlop__source_elementwise_stages(c);
  c->op_list[0] = op;
  c->plugin.struct_size = sizeof c->plugin;
  c->plugin.abi_version = DLOP_ABI_VERSION;
  c->plugin.name = c->plugin_name;
  c->plugin.version = DLOP_VERSION_STRING;
  c->plugin.doc = c->doc;
  c->plugin.ops = c->op_list;
  c->plugin.num_ops = 1;
  return c;
}

static int same_params(const dlop__source_elementwise *a, const dlop_elementwise_source *s) {
  if (a->num_params != s->num_params) return 0;
  for (int32_t p = 0; p < s->num_params; p++) {
    const dlop_param_decl *x = &a->params[p], *y = &s->params[p];
    if (strcmp(x->name, y->name) != 0 || x->kind != y->kind ||
        strcmp(x->doc, y->doc ? y->doc : "") != 0)
      return 0;
    if (x->kind == DLOP_PARAM_FLOAT
            ? memcmp(&x->default_value.u.f, &y->default_value.u.f, sizeof(double)) != 0
            : x->default_value.u.i != y->default_value.u.i)
      return 0;
  }
  return 1;
}

/* Whether the op defined as a came from a source identical to s. */
static int same_source(const dlop__source_elementwise *a, const dlop_elementwise_source *s) {
  uint32_t dtypes = s->dtypes ? s->dtypes : DLOP_DTYPES_FLOAT;
  if (strcmp(a->body, s->body) != 0 || a->dtypes != dtypes || a->num_inputs != s->num_inputs ||
      a->num_outputs != s->num_outputs || !same_params(a, s))
    return 0;
  if (s->doc != NULL && strcmp(a->doc, s->doc) != 0) return 0;
  for (int32_t i = 0; i < s->num_inputs; i++)
    if (strcmp(a->inputs[i], s->inputs[i]) != 0) return 0;
  for (int32_t o = 0; o < s->num_outputs; o++)
    if (strcmp(a->outputs[o], s->outputs[o]) != 0) return 0;
  return 1;
}

/* Compiles the body for every dtype with the host's C compiler (default parameters, inputs of
 * rank 1), as the CPU kernels will be. Skipped where no C compiler can be run: the first
 * compile for a device reports errors then. */
static int check_compiles(dlop__source_elementwise *c) {
  dlop_device cpu = {DLOP_DEVICE_CPU, 0};
  char why[512];
  if (!dlop__fusion_alone_available(cpu, why, sizeof why)) return DLOP_OK;
  dlop_type types[DLOP_DTYPE_COUNT][DLOP__FUSION_MAX_OPERANDS];
  dlop__fusion_alone_node nodes[DLOP_DTYPE_COUNT];
  dlop_param_value defaults[64];
  int32_t count = 0;
  for (int32_t p = 0; p < c->num_params; p++) defaults[p] = c->params[p].default_value;
  char code[DLOP__SOURCE_CODE_SIZE];
  for (int dtype = 0; dtype < DLOP_DTYPE_COUNT; dtype++) {
    if (!(c->dtypes & DLOP_DTYPE_BIT(dtype))) continue;
    int32_t compute = dtype == DLOP_FLOAT16 || dtype == DLOP_BFLOAT16 ? DLOP_FLOAT32 : dtype;
    if (dlop__source_elementwise_code(c, compute, code, sizeof code) != DLOP_OK)
      return dlop__error(DLOP_INVALID_ARGUMENT,
                         "dlop_define_elementwise: %s: the body (%zu bytes) with its "
                         "declarations does not fit in the %d bytes of a scalar body: shorten it",
                         c->name, strlen(c->body), DLOP__SOURCE_CODE_SIZE);
    for (int32_t k = 0; k < c->num_inputs + c->num_outputs; k++) {
      memset(&types[count][k], 0, sizeof(dlop_type));
      types[count][k].dtype = dtype;
      types[count][k].ndim = 1;
      types[count][k].shape[0] = DLOP_DIM_UNKNOWN;
    }
    nodes[count].inputs = types[count];
    nodes[count].outputs = types[count] + c->num_inputs;
    count++;
  }
  char *log = malloc(16384);
  if (log == NULL) return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory compiling %s", c->name);
  dlop__fusion_alone *alone = NULL;
  int status = dlop__fusion_alone_compile(&c->op, defaults, c->num_inputs, count, nodes, cpu,
                                          &alone, log, 16384);
  if (status == DLOP_INVALID_ARGUMENT && log[0] != '\0') {
    char *message = malloc(8192);
    if (message != NULL) dlop__source_elementwise_log(c, "the host's C compiler", log, message, 8192);
    status = dlop__error(status, "%s", message ? message : log);
    free(message);
  } else if (status != DLOP_OK) {
    status = dlop__error(status, "%s: compiling the body failed: %s", c->name,
                         log[0] ? log : dlop_last_error());
  }
  dlop__fusion_alone_free(alone);
  free(log);
  return status;
}

static int define_locked(const dlop_elementwise_source *s, const dlop_op_desc **op) {
  for (int k = 0; k < num_defined; k++) {
    if (strcmp(defined[k]->name, s->name) != 0) continue;
    if (same_source(defined[k], s)) {
      *op = dlop_find_op(s->name);
      return *op ? DLOP_OK : DLOP_INTERNAL;
    }
    return dlop__error(DLOP_DUPLICATE,
                       "dlop_define_elementwise: op '%s' is already defined from another source "
                       "(body, names, dtypes, parameters or doc differ); ops stay registered for "
                       "the life of the process: give this definition another name",
                       s->name);
  }
  if (dlop_load_default_plugins() != DLOP_OK) return DLOP_INTERNAL;
  const dlop_op_desc *taken = dlop_find_op(s->name);
  dlop__clear_error();
  if (taken != NULL) {
    const dlop_plugin *plugin = dlop_op_plugin(taken);
    return dlop__error(DLOP_DUPLICATE,
                       "dlop_define_elementwise: op '%s' is already provided by %s (plugin '%s'): "
                       "give this definition another name",
                       s->name, plugin ? dlop_plugin_path(plugin) : "another plugin",
                       plugin ? dlop_plugin_name(plugin) : "?");
  }
  if (grow_defined() != 0) return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory defining %s", s->name);
  dlop__source_elementwise *c = copy_source(s);
  if (c == NULL) return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory defining %s", s->name);
  int status = check_compiles(c);
  if (status == DLOP_OK) {
    dlop_inprocess_plugin plugin = {.struct_size = sizeof plugin, .origin = c->origin,
                                    .descriptor = &c->plugin};
    status = dlop_register_plugin(&plugin, NULL);
  }
  if (status != DLOP_OK) {
    free_source(c);
    return status;
  }
  defined[num_defined++] = c;
  *op = dlop_find_op(c->name);
  return *op ? DLOP_OK : DLOP_INTERNAL;
}

int dlop_define_elementwise(const dlop_elementwise_source *source, const dlop_op_desc **op) {
  if (op == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_define_elementwise: op is NULL: expected "
                       "where to put the op's descriptor");
  *op = NULL;
  int status = check_source(source);
  if (status != DLOP_OK) return status;
  pthread_mutex_lock(&define_lock);
  status = define_locked(source, op);
  pthread_mutex_unlock(&define_lock);
  return status;
}
