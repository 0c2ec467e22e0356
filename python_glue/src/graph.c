/* graph.c — dlop._C.Graph: a dlop_graph that the Python front end fills from its own variables
 * (inputs, constants, op applications) to learn types and shapes and to compile functions.
 * Variables are small ints indexing the graph's dlop_var pointers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "module.h"

typedef struct graph_object {
  PyObject_HEAD
  dlop_graph *graph;
  dlop_var **vars;
  Py_ssize_t count, capacity;
} graph_object;

static dlop_py_state *state_of(PyObject *self) { return dlop_py_state_of_type(Py_TYPE(self)); }

static PyObject *graph_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  if (PyTuple_Size(args) != 0 || (kwargs && PyDict_Size(kwargs) != 0)) {
    PyErr_SetString(PyExc_TypeError, "Graph() takes no arguments");
    return NULL;
  }
  allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
  graph_object *self = (graph_object *)alloc(type, 0);
  if (self == NULL) return NULL;
  int status = dlop_graph_create(&self->graph);
  if (status != DLOP_OK) {
    Py_DECREF(self);
    return dlop_py_raise(dlop_py_state_of_type(type), status, NULL);
  }
  return (PyObject *)self;
}

static void graph_dealloc(PyObject *object) {
  graph_object *self = (graph_object *)object;
  PyTypeObject *type = Py_TYPE(object);
  if (self->graph) dlop_graph_destroy(self->graph);
  free(self->vars);
  ((freefunc)PyType_GetSlot(type, Py_tp_free))(object);
  Py_DECREF(type);
}

static PyObject *remember(graph_object *self, dlop_var *var) {
  if (self->count == self->capacity) {
    Py_ssize_t capacity = self->capacity ? self->capacity * 2 : 16;
    dlop_var **grown = realloc(self->vars, (size_t)capacity * sizeof *grown);
    if (grown == NULL) return PyErr_NoMemory();
    self->vars = grown;
    self->capacity = capacity;
  }
  self->vars[self->count] = var;
  return PyLong_FromSsize_t(self->count++);
}

static int var_at(graph_object *self, PyObject *index_object, dlop_var **var) {
  Py_ssize_t index = PyLong_AsSsize_t(index_object);
  if (index == -1 && PyErr_Occurred()) return -1;
  if (index < 0 || index >= self->count) {
    PyErr_Format(PyExc_IndexError, "graph variable %zd does not exist (the graph has %zd)", index,
                 self->count);
    return -1;
  }
  *var = self->vars[index];
  return 0;
}

int dlop_py_parse_shape(dlop_py_state *state, PyObject *tuple, const char *what,
                        dlop_dtype dtype, int64_t *shape, int32_t *ndim) {
  if (!PyTuple_Check(tuple)) {
    dlop_py_raisef(state, DLOP_SHAPE_ERROR, "%s: shape %R is not a tuple", what, tuple);
    return -1;
  }
  Py_ssize_t n = PyTuple_Size(tuple);
  if (n > DLOP_MAX_NDIM) {
    dlop_py_raisef(state, DLOP_SHAPE_ERROR, "%s has %zd dimensions; dlop takes at most %d", what,
                   n, DLOP_MAX_NDIM);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *dim = PyTuple_GetItem(tuple, i);
    if (dim == Py_None) {
      shape[i] = DLOP_DIM_UNKNOWN;
      continue;
    }
    int overflow = 0;
    shape[i] = PyLong_AsLongLongAndOverflow(dim, &overflow); /* ints and __index__ */
    if (shape[i] == -1 && PyErr_Occurred()) {
      if (!PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
      PyErr_Clear();
      overflow = -1; /* not an int: said below */
    }
    if (overflow > 0) {
      dlop_py_raisef(state, DLOP_SHAPE_ERROR, "%s: dimension %zd is %R, more than "
                     DLOP_SIZE_LIMIT_TEXT, what, i, dim);
      return -1;
    }
    if (overflow < 0 || shape[i] < 0) {
      dlop_py_raisef(state, DLOP_SHAPE_ERROR,
                     "%s: dimension %zd is %R; expected a size >= 0 or None", what, i, dim);
      return -1;
    }
  }
  *ndim = (int32_t)n;
  char message[1024];
  if (dlop_check_shape_size(what, shape, *ndim, (int32_t)dtype, NULL, message, sizeof message) !=
      DLOP_OK) {
    dlop_py_raisef(state, DLOP_SHAPE_ERROR, "%s", message);
    return -1;
  }
  return 0;
}

PyObject *dlop_py_check_shape(PyObject *module, PyObject *args) {
  dlop_py_state *state = dlop_py_state_of_module(module);
  const char *what;
  PyObject *dtype_object, *shape_object;
  if (!PyArg_ParseTuple(args, "sOO:check_shape", &what, &dtype_object, &shape_object)) return NULL;
  dlop_dtype dtype;
  int64_t shape[DLOP_MAX_NDIM];
  int32_t ndim;
  if (dlop_py_parse_dtype(state, dtype_object, &dtype) < 0 ||
      dlop_py_parse_shape(state, shape_object, what, dtype, shape, &ndim) < 0)
    return NULL;
  Py_RETURN_NONE;
}

/* input(name, dtype, shape): shape is a tuple of ints and None (unknown). */
static PyObject *graph_input(PyObject *object, PyObject *args) {
  graph_object *self = (graph_object *)object;
  dlop_py_state *state = state_of(object);
  const char *name;
  PyObject *dtype_object, *shape_object;
  if (!PyArg_ParseTuple(args, "sOO!:input", &name, &dtype_object, &PyTuple_Type, &shape_object))
    return NULL;
  dlop_dtype dtype;
  if (dlop_py_parse_dtype(state, dtype_object, &dtype) < 0) return NULL;
  int64_t shape[DLOP_MAX_NDIM];
  int32_t ndim;
  char what[192];
  snprintf(what, sizeof what, "input '%s'", name);
  if (dlop_py_parse_shape(state, shape_object, what, dtype, shape, &ndim) < 0) return NULL;
  dlop_var *var;
  int status = dlop_graph_input(self->graph, name, dtype, ndim, shape, &var);
  if (status != DLOP_OK) return dlop_py_raise(state, status, NULL);
  return remember(self, var);
}

static PyObject *graph_constant(PyObject *object, PyObject *args) {
  graph_object *self = (graph_object *)object;
  dlop_py_state *state = state_of(object);
  const char *name;
  PyObject *array_object;
  if (!PyArg_ParseTuple(args, "sO!:constant", &name, state->array_type, &array_object)) return NULL;
  dlop_array *array = dlop_py_array_get(array_object);
  if (array == NULL) return NULL;
  dlop_var *var;
  int status = dlop_graph_constant(self->graph, name, array, &var);
  if (status != DLOP_OK) return dlop_py_raise(state, status, NULL);
  return remember(self, var);
}

/* A Python int to an int parameter (or one item of an ints parameter): one that does not fit
 * in int64 is an InvalidArgumentError (a ValueError) naming the op and the parameter, not a bare
 * OverflowError. */
static int int64_param(dlop_py_state *state, const dlop_op_desc *op, const dlop_param_decl *decl,
                       PyObject *value, int64_t *out) {
  int overflow = 0;
  long long result = PyLong_AsLongLongAndOverflow(value, &overflow);
  if (result == -1 && PyErr_Occurred()) return -1;
  if (overflow) {
    dlop_py_raisef(state, DLOP_INVALID_ARGUMENT,
                   "op '%s' parameter '%s': %R does not fit in a 64-bit integer", op->name,
                   decl->name, value);
    return -1;
  }
  *out = (int64_t)result;
  return 0;
}

int dlop_py_convert_param(dlop_py_state *state, const dlop_op_desc *op,
                          const dlop_param_decl *decl,
                          PyObject *value, dlop_param_value *out, int64_t **storage) {
  out->kind = decl->kind;
  out->count = 1;
  switch (decl->kind) {
    case DLOP_PARAM_BOOL:
      if (!PyBool_Check(value)) break;
      out->u.i = value == Py_True;
      return 0;
    case DLOP_PARAM_INT:
      if (!PyLong_Check(value) || PyBool_Check(value)) break;
      return int64_param(state, op, decl, value, &out->u.i);
    case DLOP_PARAM_FLOAT:
      if (!PyFloat_Check(value) && !(PyLong_Check(value) && !PyBool_Check(value))) break;
      out->u.f = PyFloat_AsDouble(value);
      return (out->u.f == -1.0 && PyErr_Occurred()) ? -1 : 0;
    case DLOP_PARAM_STRING:
      if (!PyUnicode_Check(value)) break;
    {
      Py_ssize_t length = 0;
      out->u.s = PyUnicode_AsUTF8AndSize(value, &length); /* lives as long as value, the call */
      if (out->u.s == NULL) return -1;
      if ((size_t)length != strlen(out->u.s)) {
        dlop_py_raisef(state, DLOP_INVALID_ARGUMENT,
                       "op '%s' parameter '%s': %R contains a NUL character", op->name,
                       decl->name, value);
        return -1;
      }
      return 0;
    }
    case DLOP_PARAM_INTS: {
      if (!PyTuple_Check(value) && !PyList_Check(value)) break;
      PyObject *tuple = PySequence_Tuple(value);
      if (tuple == NULL) return -1;
      Py_ssize_t n = PyTuple_Size(tuple);
      *storage = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
      if (*storage == NULL) {
        Py_DECREF(tuple);
        PyErr_NoMemory();
        return -1;
      }
      for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GetItem(tuple, i);
        if (!PyLong_Check(item)) {
          Py_DECREF(tuple);
          dlop_py_raisef(state, DLOP_TYPE_ERROR,
                         "op '%s' parameter '%s' takes ints; item %zd is %R", op->name, decl->name,
                         i, item);
          return -1;
        }
        if (int64_param(state, op, decl, item, &(*storage)[i]) < 0) {
          Py_DECREF(tuple);
          return -1;
        }
      }
      Py_DECREF(tuple);
      out->count = (int32_t)n;
      out->u.ints = *storage;
      return 0;
    }
    default: break;
  }
  dlop_py_raisef(state, DLOP_TYPE_ERROR, "op '%s' parameter '%s' takes a %s, not %R", op->name,
                 decl->name, dlop_param_kind_name(decl->kind), value);
  return -1;
}

/* apply(op_name, [var ids], {param: value}) -> [output var ids] */
static PyObject *graph_apply(PyObject *object, PyObject *args) {
  graph_object *self = (graph_object *)object;
  dlop_py_state *state = state_of(object);
  const char *op_name;
  PyObject *input_list, *params_dict;
  if (!PyArg_ParseTuple(args, "sO!O!:apply", &op_name, &PyList_Type, &input_list, &PyDict_Type,
                        &params_dict))
    return NULL;
  const dlop_op_desc *op = dlop_find_op(op_name);
  if (op == NULL) return dlop_py_raise(state, DLOP_NOT_FOUND, NULL);
  Py_ssize_t num_inputs = PyList_Size(input_list);
  Py_ssize_t num_params = PyDict_Size(params_dict);
  int32_t num_outputs = op->num_outputs;
  dlop_var **inputs = calloc((size_t)(num_inputs + num_outputs + 1), sizeof *inputs);
  dlop_named_param *params = calloc((size_t)(num_params + 1), sizeof *params);
  int64_t **storage = calloc((size_t)(num_params + 1), sizeof *storage);
  PyObject *result = NULL;
  if (inputs == NULL || params == NULL || storage == NULL) {
    PyErr_NoMemory();
    goto done;
  }
  for (Py_ssize_t i = 0; i < num_inputs; i++)
    if (var_at(self, PyList_GetItem(input_list, i), &inputs[i]) < 0) goto done;
  Py_ssize_t position = 0, p = 0;
  PyObject *key, *value;
  while (PyDict_Next(params_dict, &position, &key, &value)) {
    const char *name = PyUnicode_AsUTF8AndSize(key, NULL);
    if (name == NULL) goto done;
    const dlop_param_decl *decl = NULL;
    for (int32_t d = 0; d < op->num_params; d++)
      if (strcmp(op->params[d].name, name) == 0) decl = &op->params[d];
    if (decl == NULL) {
      /* Name the parameters it does have. */
      PyObject *known = PyUnicode_FromString("");
      for (int32_t d = 0; known && d < op->num_params; d++) {
        PyObject *joined = PyUnicode_FromFormat("%U%s%s", known, d ? ", " : "", op->params[d].name);
        Py_DECREF(known);
        known = joined;
      }
      if (known == NULL) goto done;
      dlop_py_raisef(state, DLOP_NOT_FOUND, "op '%s' has no parameter '%s'; its parameters: %s",
                     op->name, name, op->num_params ? PyUnicode_AsUTF8AndSize(known, NULL) : "(none)");
      Py_DECREF(known);
      goto done;
    }
    params[p].name = decl->name;
    if (dlop_py_convert_param(state, op, decl, value, &params[p].value, &storage[p]) < 0) goto done;
    p++;
  }
  dlop_var **outputs = inputs + num_inputs;
  int status = dlop_graph_apply(self->graph, op_name, inputs, (int32_t)num_inputs, params,
                                (int32_t)num_params, outputs, num_outputs);
  if (status != DLOP_OK) {
    dlop_py_raise(state, status, NULL);
    goto done;
  }
  result = PyList_New(num_outputs);
  for (int32_t o = 0; result && o < num_outputs; o++) {
    PyObject *id = remember(self, outputs[o]);
    if (id == NULL || PyList_SetItem(result, o, id) < 0) Py_CLEAR(result);
  }
done:
  if (storage)
    for (Py_ssize_t i = 0; i < num_params; i++) free(storage[i]);
  free(storage);
  free(params);
  free(inputs);
  return result;
}

static PyObject *type_tuple(const dlop_type *type) {
  PyObject *shape = PyTuple_New(type->ndim);
  if (shape == NULL) return NULL;
  for (int32_t i = 0; i < type->ndim; i++) {
    PyObject *dim = type->shape[i] == DLOP_DIM_UNKNOWN ? Py_NewRef(Py_None)
                                                        : PyLong_FromLongLong(type->shape[i]);
    if (dim == NULL || PyTuple_SetItem(shape, i, dim) < 0) {
      Py_DECREF(shape);
      return NULL;
    }
  }
  return Py_BuildValue("(sN)", dlop_dtype_name((dlop_dtype)type->dtype), shape);
}

/* type(var id) -> (dtype, shape with None where unknown) */
static PyObject *graph_type(PyObject *object, PyObject *index) {
  dlop_var *var;
  if (var_at((graph_object *)object, index, &var) < 0) return NULL;
  return type_tuple(dlop_var_type(var));
}

static int var_list(graph_object *self, PyObject *list, dlop_var ***vars, Py_ssize_t *count) {
  *count = PyList_Size(list);
  *vars = calloc((size_t)(*count + 1), sizeof **vars);
  if (*vars == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < *count; i++)
    if (var_at(self, PyList_GetItem(list, i), &(*vars)[i]) < 0) return -1;
  return 0;
}

/* compile([input ids], [output ids], device, return_list, inputs, outputs, input_names
 *         [, cuda_graphs[, fuse]]) */
static PyObject *graph_compile(PyObject *object, PyObject *args) {
  graph_object *self = (graph_object *)object;
  dlop_py_state *state = state_of(object);
  PyObject *input_ids, *output_ids, *device_object, *input_vars, *output_vars, *names;
  int return_list, cuda_graphs = 1, fuse = 1;
  if (!PyArg_ParseTuple(args, "O!O!OpO!O!O!|pp:compile", &PyList_Type, &input_ids, &PyList_Type,
                        &output_ids, &device_object, &return_list, &PyTuple_Type, &input_vars,
                        &PyTuple_Type, &output_vars, &PyTuple_Type, &names, &cuda_graphs, &fuse))
    return NULL;
  dlop_function_options options = DLOP_FUNCTION_OPTIONS_INIT;
  options.cuda_graphs = cuda_graphs;
  options.fuse = fuse;
  dlop_device device;
  if (dlop_py_parse_device(state, device_object, &device) < 0) return NULL;
  dlop_var **inputs = NULL, **outputs = NULL;
  Py_ssize_t num_inputs = 0, num_outputs = 0;
  PyObject *result = NULL;
  dlop_type *types = NULL;
  if (var_list(self, input_ids, &inputs, &num_inputs) < 0 ||
      var_list(self, output_ids, &outputs, &num_outputs) < 0)
    goto done;
  types = calloc((size_t)(num_inputs + 1), sizeof *types);
  if (types == NULL) {
    PyErr_NoMemory();
    goto done;
  }
  for (Py_ssize_t i = 0; i < num_inputs; i++) types[i] = *dlop_var_type(inputs[i]);
  dlop_function *function = NULL;
  int status;
  Py_BEGIN_ALLOW_THREADS /* make_thunk may load CUDA modules */
  status = dlop_function_compile_with_options(self->graph, inputs, (int32_t)num_inputs, outputs,
                                              (int32_t)num_outputs, device, &options, &function);
  Py_END_ALLOW_THREADS
  if (status != DLOP_OK) {
    dlop_py_raise(state, status, NULL);
    goto done;
  }
  result = dlop_py_function_new(state, function, types, (int32_t)num_inputs, (int32_t)num_outputs, names);
  if (result != NULL) {
    dlop_py_function *f = (dlop_py_function *)result;
    f->return_list = return_list;
    f->fuse = fuse;
    f->cuda_graphs = cuda_graphs;
    Py_XDECREF(f->inputs);
    f->inputs = Py_NewRef(input_vars);
    Py_XDECREF(f->outputs);
    f->outputs = Py_NewRef(output_vars);
  }
done:
  free(types);
  free(inputs);
  free(outputs);
  return result;
}

static PyObject *graph_count(PyObject *object, PyObject *unused) {
  return PyLong_FromSsize_t(((graph_object *)object)->count);
}

static PyMethodDef graph_methods[] = {
    {"input", graph_input, METH_VARARGS, "input(name, dtype, shape) -> var id"},
    {"constant", graph_constant, METH_VARARGS, "constant(name, Array) -> var id"},
    {"apply", graph_apply, METH_VARARGS, "apply(op, [var ids], {params}) -> [output var ids]"},
    {"type", graph_type, METH_O, "type(var id) -> (dtype, shape)"},
    {"compile", graph_compile, METH_VARARGS,
     "compile([inputs], [outputs], device, return_list, input_vars, output_vars, names"
     "[, cuda_graphs[, fuse]]) -> Function"},
    {"__len__", graph_count, METH_NOARGS, "Number of variables."},
    {NULL, NULL, 0, NULL}};

static PyType_Slot graph_slots[] = {
    {Py_tp_doc, (void *)"A C graph the dlop package builds to type-check ops and compile functions."},
    {Py_tp_new, (void *)graph_new},
    {Py_tp_dealloc, (void *)graph_dealloc},
    {Py_tp_methods, graph_methods},
    {0, NULL}};

static PyType_Spec graph_spec = {"dlop._C.Graph", sizeof(graph_object), 0, Py_TPFLAGS_DEFAULT,
                                 graph_slots};

int dlop_py_add_graph_type(PyObject *module, dlop_py_state *state) {
  state->graph_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &graph_spec, NULL);
  if (state->graph_type == NULL) return -1;
  return PyModule_AddType(module, state->graph_type);
}
