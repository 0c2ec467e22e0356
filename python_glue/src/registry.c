/* registry.c — the plugin registry as plain Python data: plugins(), load_plugin(path),
 * load_errors(), op_infos() and the plugin probe mode (plugin_probe(), set_plugin_probe(mode));
 * the dlop package turns these into objects and dlop.ops. */
#include <string.h>

#include "module.h"

static PyObject *param_value(const dlop_param_value *value) {
  switch (value->kind) {
    case DLOP_PARAM_BOOL: return PyBool_FromLong((long)value->u.i);
    case DLOP_PARAM_INT: return PyLong_FromLongLong(value->u.i);
    case DLOP_PARAM_FLOAT: return PyFloat_FromDouble(value->u.f);
    case DLOP_PARAM_STRING: return PyUnicode_FromString(value->u.s ? value->u.s : "");
    case DLOP_PARAM_INTS: {
      PyObject *tuple = PyTuple_New(value->count);
      for (int32_t i = 0; tuple && i < value->count; i++) {
        PyObject *item = PyLong_FromLongLong(value->u.ints[i]);
        if (item == NULL || PyTuple_SetItem(tuple, i, item) < 0) Py_CLEAR(tuple);
      }
      return tuple;
    }
    default: Py_RETURN_NONE;
  }
}

static PyObject *dtype_list(uint32_t mask) {
  PyObject *list = PyList_New(0);
  for (int d = 0; list && d < DLOP_DTYPE_COUNT; d++) {
    if (!(mask & DLOP_DTYPE_BIT(d))) continue;
    PyObject *name = PyUnicode_FromString(dlop_dtype_name((dlop_dtype)d));
    if (name == NULL || PyList_Append(list, name) < 0) Py_CLEAR(list);
    Py_XDECREF(name);
  }
  return list;
}

/* An op's inplace_map or view_map as a list (one input index, or -1, per output), or None. */
static PyObject *index_map(const int32_t *map, int32_t count) {
  if (map == NULL) Py_RETURN_NONE;
  PyObject *list = PyList_New(count);
  for (int32_t o = 0; list && o < count; o++) {
    PyObject *index = PyLong_FromLong((long)map[o]);
    if (index == NULL || PyList_SetItem(list, o, index) < 0) Py_CLEAR(list);
  }
  return list;
}

static PyObject *op_info(const dlop_op_desc *op) {
  PyObject *params = PyList_New(op->num_params);
  for (int32_t p = 0; params && p < op->num_params; p++) {
    const dlop_param_decl *decl = &op->params[p];
    PyObject *item = Py_BuildValue("{s:s,s:s,s:N,s:s}", "name", decl->name, "kind",
                                   dlop_param_kind_name(decl->kind), "default", param_value(&decl->default_value),
                                   "doc", decl->doc ? decl->doc : "");
    if (item == NULL || PyList_SetItem(params, p, item) < 0) Py_CLEAR(params);
  }
  if (params == NULL) return NULL;
  const dlop_plugin *plugin = dlop_op_plugin(op);
  PyObject *inplace = index_map(op->inplace_map, op->num_outputs);
  PyObject *views = inplace ? index_map(op->view_map, op->num_outputs) : NULL;
  if (views == NULL) {
    Py_XDECREF(inplace);
    Py_DECREF(params);
    return NULL;
  }
  /* elementwise: the op declares a scalar body (ABI 1.2), which promises elementwise maths with
   * NumPy broadcasting (op.h): what framework adapters batch and fuse on */
  return Py_BuildValue("{s:s,s:s,s:i,s:i,s:N,s:{s:N,s:N},s:O,s:O,s:O,s:O,s:N,s:N,s:s}", "name",
                       op->name,
                       "doc", op->doc ? op->doc : "", "num_inputs", (int)op->num_inputs,
                       "num_outputs", (int)op->num_outputs, "params", params, "dtypes", "cpu",
                       dtype_list(dlop_op_dtypes(op, DLOP_DEVICE_CPU)), "cuda",
                       dtype_list(dlop_op_dtypes(op, DLOP_DEVICE_CUDA)), "deterministic",
                       (op->flags & DLOP_OP_DETERMINISTIC) ? Py_True : Py_False, "cuda_graph_safe",
                       (op->flags & DLOP_OP_CUDA_GRAPH_SAFE) ? Py_True : Py_False,
                       "needs_contiguous_inputs",
                       (op->flags & DLOP_OP_NEEDS_CONTIGUOUS_INPUTS) ? Py_True : Py_False,
                       "elementwise", op->scalar_body != NULL ? Py_True : Py_False,
                       "inplace_map", inplace, "view_map", views,
                       "plugin", plugin ? dlop_plugin_name(plugin) : "");
}

static PyObject *plugin_info(const dlop_plugin *plugin) {
  int count = dlop_plugin_op_count(plugin);
  PyObject *ops = PyList_New(count);
  for (int i = 0; ops && i < count; i++) {
    PyObject *name = PyUnicode_FromString(dlop_plugin_op(plugin, i)->name);
    if (name == NULL || PyList_SetItem(ops, i, name) < 0) Py_CLEAR(ops);
  }
  if (ops == NULL) return NULL;
  uint32_t abi = dlop_plugin_abi_version(plugin);
  const char *doc = dlop_plugin_doc(plugin);
  return Py_BuildValue("{s:s,s:s,s:s,s:s,s:(ii),s:N}", "name", dlop_plugin_name(plugin), "version",
                       dlop_plugin_version(plugin), "path", dlop_plugin_path(plugin), "doc",
                       doc ? doc : "", "abi_version", (int)(abi >> 16), (int)(abi & 0xffff), "ops", ops);
}

static PyObject *py_plugins(PyObject *module, PyObject *unused) {
  int count = dlop_plugin_count();
  PyObject *list = PyList_New(count);
  for (int i = 0; list && i < count; i++) {
    PyObject *info = plugin_info(dlop_plugin_at(i));
    if (info == NULL || PyList_SetItem(list, i, info) < 0) Py_CLEAR(list);
  }
  return list;
}

static PyObject *py_op_infos(PyObject *module, PyObject *unused) {
  int count = dlop_op_count();
  PyObject *list = PyList_New(count);
  for (int i = 0; list && i < count; i++) {
    PyObject *info = op_info(dlop_op_at(i));
    if (info == NULL || PyList_SetItem(list, i, info) < 0) Py_CLEAR(list);
  }
  return list;
}

static PyObject *py_load_plugin(PyObject *module, PyObject *path_object) {
  dlop_py_state *state = dlop_py_state_of_module(module);
  PyObject *encoded = NULL;
  if (!PyUnicode_FSConverter(path_object, &encoded)) return NULL;
  const char *path = PyBytes_AsString(encoded);
  const dlop_plugin *plugin = NULL;
  int status = path ? DLOP_OK : -1;
  if (path) {
    Py_BEGIN_ALLOW_THREADS
    status = dlop_load_plugin(path, &plugin);
    Py_END_ALLOW_THREADS
  }
  Py_DECREF(encoded);
  if (status == -1) return NULL;
  if (status != DLOP_OK) return dlop_py_raise_load_error(state, status);
  return plugin_info(plugin);
}

static PyObject *py_load_errors(PyObject *module, PyObject *unused) {
  int count = dlop_load_error_count();
  PyObject *list = PyList_New(count);
  for (int i = 0; list && i < count; i++) {
    PyObject *text = PyUnicode_FromString(dlop_load_error_at(i));
    if (text == NULL || PyList_SetItem(list, i, text) < 0) Py_CLEAR(list);
  }
  return list;
}

/* The probe modes by the names Python uses, in dlop_plugin_probe_mode order. */
static const char *const probe_modes[] = {"off", "all", "external"};

static PyObject *py_plugin_probe(PyObject *module, PyObject *unused) {
  int mode = dlop_plugin_probe();
  return PyUnicode_FromString(mode >= 0 && mode < 3 ? probe_modes[mode] : "unknown");
}

static PyObject *py_set_plugin_probe(PyObject *module, PyObject *mode_object) {
  dlop_py_state *state = dlop_py_state_of_module(module);
  if (!PyUnicode_Check(mode_object))
    return dlop_py_raisef(state, DLOP_TYPE_ERROR,
                          "set_plugin_probe: mode must be a str ('off', 'all' or 'external'), "
                          "got %R", mode_object);
  for (int mode = 0; mode < 3; mode++) {
    if (PyUnicode_CompareWithASCIIString(mode_object, probe_modes[mode]) != 0) continue;
    if (dlop_set_plugin_probe(mode) != DLOP_OK) return dlop_py_raise(state, DLOP_INTERNAL, NULL);
    Py_RETURN_NONE;
  }
  return dlop_py_raisef(state, DLOP_INVALID_ARGUMENT,
                        "set_plugin_probe: mode %R is not one of 'off', 'all', 'external'",
                        mode_object);
}

/* op_runtime_info(name, device): what the op reports about how it runs on "cpu" or "cuda" in
 * this process (ABI 1.2 runtime_info) as its text of "key: value" lines, or None when it
 * reports nothing there. The op may load a library to answer, so the GIL is released. */
static PyObject *py_op_runtime_info(PyObject *module, PyObject *args) {
  dlop_py_state *state = dlop_py_state_of_module(module);
  const char *name, *device_name;
  if (!PyArg_ParseTuple(args, "ss:op_runtime_info", &name, &device_name)) return NULL;
  dlop_device_type device;
  if (strcmp(device_name, "cpu") == 0) device = DLOP_DEVICE_CPU;
  else if (strcmp(device_name, "cuda") == 0) device = DLOP_DEVICE_CUDA;
  else
    return dlop_py_raisef(state, DLOP_INVALID_ARGUMENT,
                          "op_runtime_info: device must be 'cpu' or 'cuda', got '%s'", device_name);
  const dlop_op_desc *op = dlop_find_op(name);
  if (op == NULL) return dlop_py_raise(state, DLOP_NOT_FOUND, NULL);
  char text[4096];
  int status;
  Py_BEGIN_ALLOW_THREADS
  status = dlop_op_runtime_info(op, device, text, sizeof text);
  Py_END_ALLOW_THREADS
  if (status == DLOP_UNSUPPORTED) Py_RETURN_NONE;
  if (status != DLOP_OK) return dlop_py_raise(state, status, NULL);
  return PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
}

PyMethodDef dlop_py_registry_methods[] = {
    {"plugins", py_plugins, METH_NOARGS, "Loaded plugins as dicts (name, version, path, doc, ops)."},
    {"op_infos", py_op_infos, METH_NOARGS, "Every loaded op as a dict."},
    {"op_runtime_info", py_op_runtime_info, METH_VARARGS,
     "op_runtime_info(name, device): the op's run-time report ('key: value' lines) or None."},
    {"load_plugin", py_load_plugin, METH_O, "Load one plugin file; returns its dict."},
    {"load_errors", py_load_errors, METH_NOARGS, "Plugin files that failed to load, one line each."},
    {"plugin_probe", py_plugin_probe, METH_NOARGS, "The plugin probe mode: 'off', 'all' or 'external'."},
    {"set_plugin_probe", py_set_plugin_probe, METH_O, "Set the plugin probe mode for later loads."},
    {NULL, NULL, 0, NULL}};
