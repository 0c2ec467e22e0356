/* validate.c — checks everything a plugin hands back before the host trusts it: descriptor
 * sizes, the ABI major, names, required stages, input/output counts, parameters, dtype masks,
 * devices, flags, the in-place map, the view map (ABI 1.1: view ops bring make_view instead
 * of make_thunk) and the scalar body (ABI 1.2: never on a view op). Each failure returns a status with a message "PATH: what, value, expected". */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "loader_internal.h"

int dlop__is_identifier(const char *name) {
  if (name == NULL || name[0] == '\0') return 0;
  for (const char *p = name; *p; p++) {
    char c = *p;
    int letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
    int digit = c >= '0' && c <= '9';
    if (!letter && !(digit && p != name)) return 0;
  }
  return 1;
}

/* A name for messages: quoted, shortened, or "(null)"; plugins can hand back anything. */
static const char *shown(const char *name, char *buffer, size_t size) {
  if (name == NULL) return "(null)";
  snprintf(buffer, size, "'%.64s%s'", name, strlen(name) > 64 ? "..." : "");
  return buffer;
}

int dlop__validate_plugin_desc(dlop__loader_report *report, const char *path,
                               const dlop_plugin_desc *desc, uint32_t host_abi) {
  char name[80];
  if (desc == NULL)
    return dlop__loader_error(
        report, DLOP_INVALID_PLUGIN,
        "%s: dlop_plugin_init returned DLOP_OK but no plugin descriptor (NULL)", path);
  /* struct_size and abi_version are the two fields every ABI major keeps in place, so they
   * are read first: a plugin of another major gets the clear version message. */
  if (desc->struct_size < 2 * sizeof(uint32_t))
    return dlop__loader_error(
        report, DLOP_INVALID_PLUGIN,
        "%s: plugin descriptor has struct_size %u, too small to hold even its "
        "version (a dlop ABI 1.0 descriptor is at least %zu bytes)",
        path, desc->struct_size, (size_t)DLOP__PLUGIN_DESC_MIN_SIZE);
  unsigned plugin_major = DLOP_ABI_VERSION_MAJOR_OF(desc->abi_version);
  unsigned plugin_minor = DLOP_ABI_VERSION_MINOR_OF(desc->abi_version);
  if (plugin_major != DLOP_ABI_VERSION_MAJOR_OF(host_abi))
    return dlop__loader_error(
        report, DLOP_ABI_MISMATCH,
        "%s: built for dlop ABI %u.%u, this host speaks %u.%u: rebuild the plugin "
        "against dlop %u.x headers",
        path, plugin_major, plugin_minor, DLOP_ABI_VERSION_MAJOR_OF(host_abi),
        DLOP_ABI_VERSION_MINOR_OF(host_abi), DLOP_ABI_VERSION_MAJOR_OF(host_abi));
  if (desc->struct_size < DLOP__PLUGIN_DESC_MIN_SIZE)
    return dlop__loader_error(
        report, DLOP_INVALID_PLUGIN,
        "%s: plugin descriptor has struct_size %u, smaller than the %zu bytes of a "
        "dlop ABI 1.0 plugin descriptor (set it to sizeof(dlop_plugin_desc))",
        path, desc->struct_size, (size_t)DLOP__PLUGIN_DESC_MIN_SIZE);
  if (!dlop__is_identifier(desc->name))
    return dlop__loader_error(
        report, DLOP_INVALID_PLUGIN,
        "%s: plugin name %s is not well-formed: expected [A-Za-z_][A-Za-z0-9_]*", path,
        shown(desc->name, name, sizeof name));
  if (desc->num_ops < 0)
    return dlop__loader_error(report, DLOP_INVALID_PLUGIN,
                              "%s: plugin '%s' declares num_ops %d: expected >= 0", path,
                              desc->name, (int)desc->num_ops);
  if (desc->num_ops > 0 && desc->ops == NULL)
    return dlop__loader_error(report, DLOP_INVALID_PLUGIN,
                              "%s: plugin '%s' declares %d ops but its ops array is NULL", path,
                              desc->name, (int)desc->num_ops);
  return DLOP_OK;
}

static int validate_default(dlop__loader_report *report, const char *path, const char *where,
                            const dlop_param_decl *param) {
  const dlop_param_value *value = &param->default_value;
  if (value->kind != param->kind)
    return dlop__loader_error(
        report, DLOP_INVALID_PLUGIN,
        "%s: %s: default value has kind %s (%d) but the parameter is declared %s "
        "(%d): they must match",
        path, where, dlop_param_kind_name(value->kind), (int)value->kind,
        dlop_param_kind_name(param->kind), (int)param->kind);
  if (param->kind == DLOP_PARAM_BOOL && value->u.i != 0 && value->u.i != 1)
    return dlop__loader_error(report, DLOP_INVALID_PLUGIN,
                              "%s: %s: bool default is %lld: expected 0 or 1", path, where,
                              (long long)value->u.i);
  if (param->kind == DLOP_PARAM_STRING && value->u.s == NULL)
    return dlop__loader_error(report, DLOP_INVALID_PLUGIN,
                              "%s: %s: string default is NULL: use \"\" for an empty default", path,
                              where);
  if (param->kind == DLOP_PARAM_INTS &&
      (value->count < 0 || (value->count > 0 && value->u.ints == NULL)))
    return dlop__loader_error(
        report, DLOP_INVALID_PLUGIN,
        "%s: %s: ints default has count %d and values %s: expected count >= 0 "
        "and a non-NULL array when count > 0",
        path, where, (int)value->count, value->u.ints ? "set" : "NULL");
  return DLOP_OK;
}

static int validate_params(dlop__loader_report *report, const char *path, const char *op_where,
                           const dlop_op_desc *op) {
  char where[256], name[80];
  if (op->num_params < 0)
    return dlop__loader_error(report, DLOP_INVALID_PLUGIN,
                              "%s: %s declares num_params %d: expected >= 0", path, op_where,
                              (int)op->num_params);
  if (op->num_params > 0 && op->params == NULL)
    return dlop__loader_error(report, DLOP_INVALID_PLUGIN,
                              "%s: %s declares %d parameters but its params array is NULL", path,
                              op_where, (int)op->num_params);
  for (int32_t i = 0; i < op->num_params; i++) {
    const dlop_param_decl *param = &op->params[i];
    if (!dlop__is_identifier(param->name))
      return dlop__loader_error(report, DLOP_INVALID_PLUGIN,
                                "%s: %s: parameter #%d name %s is not well-formed: expected "
                                "[A-Za-z_][A-Za-z0-9_]*",
                                path, op_where, (int)i, shown(param->name, name, sizeof name));
    snprintf(where, sizeof where, "%s, parameter '%s'", op_where, param->name);
    for (int32_t j = 0; j < i; j++)
      if (strcmp(op->params[j].name, param->name) == 0)
        return dlop__loader_error(
            report, DLOP_INVALID_PLUGIN,
            "%s: %s is declared twice (parameters #%d and #%d): names must be "
            "unique within an op",
            path, where, (int)j, (int)i);
    if (param->kind < DLOP_PARAM_BOOL || param->kind > DLOP_PARAM_INTS)
      return dlop__loader_error(
          report, DLOP_INVALID_PLUGIN,
          "%s: %s has unknown kind %d: expected bool (1), int (2), float (3), "
          "string (4) or ints (5)",
          path, where, (int)param->kind);
    int status = validate_default(report, path, where, param);
    if (status != DLOP_OK) return status;
  }
  return DLOP_OK;
}

static int validate_dtype_mask(dlop__loader_report *report, const char *path, const char *where,
                               const char *field, uint32_t mask) {
  if ((mask & ~DLOP__VALID_DTYPE_MASK) == 0) return DLOP_OK;
  return dlop__loader_error(
      report, DLOP_INVALID_PLUGIN,
      "%s: %s: %s 0x%x has bits outside the %d known dtypes (invalid bits 0x%x; "
      "valid mask 0x%x): build masks with DLOP_DTYPE_BIT() (only a plugin built "
      "for a newer ABI minor than the host's may use bits the host does not know)",
      path, where, field, mask, DLOP_DTYPE_COUNT, mask & ~DLOP__VALID_DTYPE_MASK,
      DLOP__VALID_DTYPE_MASK);
}

/* The in-place map: per output, an input index or -1. */
static int validate_inplace_map(dlop__loader_report *report, const char *path, const char *where,
                                const dlop_op_desc *op) {
  const int32_t *map = op->inplace_map;
  if (map == NULL) return DLOP_OK;
  for (int32_t i = 0; i < op->num_outputs; i++) {
    int bad = map[i] < -1 || (op->num_inputs != DLOP_VARIADIC && map[i] >= op->num_inputs);
    if (bad)
      return dlop__loader_error(
          report, DLOP_INVALID_PLUGIN,
          "%s: %s: inplace_map[%d] is %d: expected -1 or an input index in [0, "
          "%d)",
          path, where, (int)i, (int)map[i], (int)op->num_inputs);
  }
  return DLOP_OK;
}

/* Offset just past make_view: an op descriptor must cover it to declare a view (ABI 1.1). */
#define VIEW_DESC_MIN_SIZE (offsetof(dlop_op_desc, make_view) + sizeof(dlop_make_view_fn))

/* The view map (ABI 1.1): per output, the input it is a view of. A view op hands the host
 * strides over an input's memory through make_view, so it must have one (its descriptor must
 * be large enough to carry it), a fixed input count the map can name, every output mapped to
 * an input (no -1: the host allocates nothing for a view node) and no in-place map (the host
 * writes nothing for it). A make_view without a view_map would never be called: refused too,
 * rather than silently ignored. */
static int validate_view_map(dlop__loader_report *report, const char *path, const char *where,
                             const dlop_op_desc *op) {
  const int32_t *map = op->view_map;
  if (map == NULL) {
    if (op->make_view != NULL)
      return dlop__loader_error(
          report, DLOP_INVALID_PLUGIN,
          "%s: %s sets make_view but no view_map: the host calls make_view only "
          "for ops whose view_map names, per output, the input it views (set "
          "view_map, or leave make_view NULL)",
          path, where);
    return DLOP_OK;
  }
  if (op->struct_size < VIEW_DESC_MIN_SIZE)
    return dlop__loader_error(
        report, DLOP_INVALID_PLUGIN,
        "%s: %s declares a view_map but its descriptor has struct_size %u, which "
        "ends before make_view (views need ABI 1.1: a descriptor of at least %zu "
        "bytes with make_view set; rebuild against dlop ABI 1.1 or later headers)",
        path, where, op->struct_size, (size_t)VIEW_DESC_MIN_SIZE);
  if (op->make_view == NULL)
    return dlop__loader_error(
        report, DLOP_INVALID_PLUGIN,
        "%s: %s declares a view_map but no make_view function (NULL): a view op "
        "must set make_view, which gives the host each output's strides",
        path, where);
  if (op->num_inputs == DLOP_VARIADIC)
    return dlop__loader_error(
        report, DLOP_INVALID_PLUGIN,
        "%s: %s declares a view_map but takes any number of inputs "
        "(DLOP_VARIADIC): a view op needs a fixed num_inputs for its view_map to "
        "name",
        path, where);
  if (op->inplace_map != NULL)
    return dlop__loader_error(
        report, DLOP_INVALID_PLUGIN,
        "%s: %s declares both a view_map and an inplace_map: a view op writes "
        "nothing, so it cannot work in place (leave inplace_map NULL)",
        path, where);
  for (int32_t o = 0; o < op->num_outputs; o++)
    if (map[o] < 0 || map[o] >= op->num_inputs)
      return dlop__loader_error(
          report, DLOP_INVALID_PLUGIN,
          "%s: %s: view_map[%d] is %d: expected an input index in [0, %d) (every "
          "output of a view op is a view of one input)",
          path, where, (int)o, (int)map[o], (int)op->num_inputs);
  return DLOP_OK;
}

/* ABI 1.2: a reduction body says how one input is reduced into one output, so it belongs to an
 * op of one input and one output that computes (no view) and is not elementwise (no scalar
 * body). Descriptors that end before the field read NULL. */
static int validate_reduce_body(dlop__loader_report *report, const char *path, const char *where,
                                const dlop_op_desc *op) {
  if (op->reduce_body == NULL) return DLOP_OK;
  if (op->view_map != NULL)
    return dlop__loader_error(
        report, DLOP_INVALID_PLUGIN,
        "%s: %s declares both a view_map and a reduce_body: a view op runs no kernel, so "
        "there is nothing to fuse (leave reduce_body NULL)",
        path, where);
  if (op->scalar_body != NULL)
    return dlop__loader_error(
        report, DLOP_INVALID_PLUGIN,
        "%s: %s declares both a scalar_body and a reduce_body: an op is elementwise or a "
        "reduction, not both (leave one NULL)",
        path, where);
  if (op->num_inputs != 1 || op->num_outputs != 1)
    return dlop__loader_error(
        report, DLOP_INVALID_PLUGIN,
        "%s: %s declares a reduce_body with %d inputs and %d outputs: a reduction body "
        "reduces one input into one output (num_inputs 1, num_outputs 1)",
        path, where, (int)op->num_inputs, (int)op->num_outputs);
  return DLOP_OK;
}

int dlop__validate_op(dlop__loader_report *report, const char *path, int index,
                      const dlop_op_desc *op, const dlop_op_desc *earlier_ops) {
  char where[160], name[80];
  if (!dlop__is_identifier(op->name))
    return dlop__loader_error(
        report, DLOP_INVALID_PLUGIN,
        "%s: op #%d name %s is not well-formed: expected [A-Za-z_][A-Za-z0-9_]*", path, index,
        shown(op->name, name, sizeof name));
  snprintf(where, sizeof where, "op '%.100s'", op->name);
  for (int j = 0; j < index; j++)
    if (strcmp(earlier_ops[j].name, op->name) == 0)
      return dlop__loader_error(
          report, DLOP_DUPLICATE,
          "%s: %s is declared twice in this plugin (ops #%d and #%d): op names "
          "must be unique",
          path, where, j, index);
  /* View ops (view_map set) run no kernel, so make_thunk is optional for them; checked in
   * validate_view_map. Every other op needs all three stages. */
  const char *missing = op->make_node == NULL                          ? "make_node"
                        : op->infer_shape == NULL                      ? "infer_shape"
                        : op->make_thunk == NULL && op->view_map == NULL ? "make_thunk"
                                                                         : NULL;
  if (missing != NULL)
    return dlop__loader_error(
        report, DLOP_INVALID_PLUGIN,
        "%s: %s has no %s function (NULL): make_node, infer_shape and make_thunk "
        "are all required (only a view op, with a view_map and make_view, may "
        "leave make_thunk NULL)",
        path, where, missing);
  if (op->num_outputs < 1)
    return dlop__loader_error(report, DLOP_INVALID_PLUGIN,
                              "%s: %s declares num_outputs %d: expected >= 1", path, where,
                              (int)op->num_outputs);
  if (op->num_inputs < 0 && op->num_inputs != DLOP_VARIADIC)
    return dlop__loader_error(report, DLOP_INVALID_PLUGIN,
                              "%s: %s declares num_inputs %d: expected >= 0 or DLOP_VARIADIC (%d)",
                              path, where, (int)op->num_inputs, DLOP_VARIADIC);
  int status = validate_params(report, path, where, op);
  if (status != DLOP_OK) return status;
  status = validate_dtype_mask(report, path, where, "cpu_dtypes", op->cpu_dtypes);
  if (status != DLOP_OK) return status;
  status = validate_dtype_mask(report, path, where, "cuda_dtypes", op->cuda_dtypes);
  if (status != DLOP_OK) return status;
  if (op->cpu_dtypes == 0 && op->cuda_dtypes == 0)
    return dlop__loader_error(
        report, DLOP_INVALID_PLUGIN,
        "%s: %s declares no device: cpu_dtypes and cuda_dtypes are both 0 (set the "
        "dtypes it accepts on at least one device)",
        path, where);
  if ((op->flags & ~DLOP__KNOWN_OP_FLAGS) != 0)
    return dlop__loader_error(
        report, DLOP_INVALID_PLUGIN,
        "%s: %s: flags 0x%x has unknown bits 0x%x (known flags: 0x%x; only a "
        "plugin built for a newer ABI minor than the host's may use bits the host "
        "does not know)",
        path, where, op->flags, op->flags & ~DLOP__KNOWN_OP_FLAGS, DLOP__KNOWN_OP_FLAGS);
  status = validate_view_map(report, path, where, op);
  if (status != DLOP_OK) return status;
  /* ABI 1.2: a scalar body says what a kernel computes per element; a view runs no kernel.
   * (Descriptors of 1.0 and 1.1 plugins end before the field: the host's copy reads NULL.) */
  if (op->scalar_body != NULL && op->view_map != NULL)
    return dlop__loader_error(
        report, DLOP_INVALID_PLUGIN,
        "%s: %s declares both a view_map and a scalar_body: a view op runs no kernel, so "
        "there is nothing to fuse (leave scalar_body NULL)",
        path, where);
  status = validate_reduce_body(report, path, where, op);
  if (status != DLOP_OK) return status;
  return validate_inplace_map(report, path, where, op);
}
