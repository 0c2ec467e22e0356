/* source_ops.c — ops defined from source at run time: define_elementwise(...) hands a body
 * and its names to dlop_define_elementwise (dlop/source_ops.h). The dlop package checks and
 * normalizes the arguments first (dlop/_source.py) and refreshes dlop.ops after. */
#include <string.h>

#include "module.h"

#define MAX_NAMES 64

/* A tuple of str into names (pointers into the tuple's strings, valid while it lives). */
static int name_list(dlop_py_state *state, PyObject *tuple, const char *what, const char **names,
                     int32_t *count) {
  if (!PyTuple_Check(tuple)) {
    dlop_py_raisef(state, DLOP_TYPE_ERROR, "define_elementwise: %s must be a tuple of str", what);
    return -1;
  }
  Py_ssize_t size = PyTuple_Size(tuple);
  if (size > MAX_NAMES) {
    dlop_py_raisef(state, DLOP_INVALID_ARGUMENT, "define_elementwise: %zd %s: at most %d", size,
                   what, MAX_NAMES);
    return -1;
  }
  for (Py_ssize_t i = 0; i < size; i++) {
    PyObject *item = PyTuple_GetItem(tuple, i);
    names[i] = item && PyUnicode_Check(item) ? PyUnicode_AsUTF8AndSize(item, NULL) : NULL;
    if (names[i] == NULL) {
      if (!PyErr_Occurred())
        dlop_py_raisef(state, DLOP_TYPE_ERROR, "define_elementwise: %s[%zd] must be a str", what, i);
      return -1;
    }
  }
  *count = (int32_t)size;
  return 0;
}

/* define_elementwise(name, body, inputs, outputs, dtypes, params, doc): params a tuple of
 * (name, 'float' | 'int', default); doc None or a str. Returns None; the op is then in the
 * registry under name. */
static PyObject *py_define_elementwise(PyObject *module, PyObject *args) {
  dlop_py_state *state = dlop_py_state_of_module(module);
  const char *name, *body, *doc = NULL;
  PyObject *inputs, *outputs, *dtypes, *params, *doc_object;
  if (!PyArg_ParseTuple(args, "ssOOOOO:define_elementwise", &name, &body, &inputs, &outputs,
                        &dtypes, &params, &doc_object))
    return NULL;
  if (doc_object != Py_None && (doc = PyUnicode_AsUTF8AndSize(doc_object, NULL)) == NULL)
    return NULL;
  const char *input_names[MAX_NAMES], *output_names[MAX_NAMES], *dtype_names[MAX_NAMES];
  int32_t num_inputs = 0, num_outputs = 0, num_dtypes = 0;
  if (name_list(state, inputs, "inputs", input_names, &num_inputs) < 0 ||
      name_list(state, outputs, "outputs", output_names, &num_outputs) < 0 ||
      name_list(state, dtypes, "dtypes", dtype_names, &num_dtypes) < 0)
    return NULL;
  uint32_t mask = 0;
  for (int32_t k = 0; k < num_dtypes; k++) {
    int found = -1;
    for (int d = 0; d < DLOP_DTYPE_COUNT && found < 0; d++)
      if (strcmp(dlop_dtype_name((dlop_dtype)d), dtype_names[k]) == 0) found = d;
    if (found < 0)
      return dlop_py_raisef(state, DLOP_INVALID_ARGUMENT,
                            "define_elementwise: unknown dtype '%s'", dtype_names[k]);
    mask |= DLOP_DTYPE_BIT(found);
  }
  if (!PyTuple_Check(params) || PyTuple_Size(params) > MAX_NAMES)
    return dlop_py_raisef(state, DLOP_TYPE_ERROR,
                          "define_elementwise: params must be a tuple of at most %d (name, kind, "
                          "default) tuples",
                          MAX_NAMES);
  dlop_param_decl decls[MAX_NAMES];
  memset(decls, 0, sizeof decls);
  int32_t num_params = (int32_t)PyTuple_Size(params);
  for (int32_t p = 0; p < num_params; p++) {
    const char *param_name, *kind;
    PyObject *value, *item = PyTuple_GetItem(params, p);
    if (!PyTuple_Check(item) || PyTuple_Size(item) != 3)
      return dlop_py_raisef(state, DLOP_TYPE_ERROR,
                            "define_elementwise: params item %d is %R: expected a (name, kind, "
                            "default) tuple", (int)p, item);
    if (!PyArg_ParseTuple(item, "ssO:define_elementwise params",
                          &param_name, &kind, &value))
      return NULL;
    decls[p].name = param_name;
    decls[p].doc = "";
    if (strcmp(kind, "float") == 0) {
      decls[p].kind = DLOP_PARAM_FLOAT;
      decls[p].default_value.u.f = PyFloat_AsDouble(value);
    } else if (strcmp(kind, "int") == 0) {
      decls[p].kind = DLOP_PARAM_INT;
      decls[p].default_value.u.i = PyLong_AsLongLong(value);
    } else {
      return dlop_py_raisef(state, DLOP_INVALID_ARGUMENT,
                            "define_elementwise: parameter '%s' has kind '%s': expected 'float' "
                            "or 'int'",
                            param_name, kind);
    }
    if (PyErr_Occurred()) return NULL;
    decls[p].default_value.kind = decls[p].kind;
    decls[p].default_value.count = 1;
  }
  dlop_elementwise_source source = {
      .struct_size = sizeof source, .dtypes = mask, .name = name, .doc = doc, .body = body,
      .inputs = input_names, .outputs = output_names, .params = decls,
      .num_inputs = num_inputs, .num_outputs = num_outputs, .num_params = num_params};
  const dlop_op_desc *op = NULL;
  int status;
  /* the body's check runs the C compiler: other threads go on meanwhile */
  Py_BEGIN_ALLOW_THREADS
  status = dlop_define_elementwise(&source, &op);
  Py_END_ALLOW_THREADS
  if (status != DLOP_OK) return dlop_py_raise(state, status, NULL);
  Py_RETURN_NONE;
}

PyMethodDef dlop_py_source_ops_methods[] = {
    {"define_elementwise", py_define_elementwise, METH_VARARGS,
     "define_elementwise(name, body, inputs, outputs, dtypes, params, doc): register an "
     "elementwise op defined by a body."},
    {NULL, NULL, 0, NULL}};
