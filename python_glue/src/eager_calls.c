/* eager_calls.c — dlop._C.EagerCalls: an op's eager call (Op.__call__) in C for its common
 * case, every argument a dlop.Array on one device and every parameter a bool, int or float.
 * The compiled function of the call's signature (the arguments' dtypes and ranks, their device,
 * the parameters' names, types and values: everything the eager path's compile depends on) is
 * found among a few remembered ones and called at once, so a repeated call runs no Python code
 * of dlop. Anything else goes to Python: slow(args, params) takes every other call (Variables,
 * NumPy arrays, scalars, parameters of other types), and resolve(args, params) checks the
 * first call of a signature and compiles (or finds) its function, which is remembered here. */
#include <string.h>

#include "module.h"
#include <structmember.h> /* PyMemberDef for __vectorcalloffset__ */

/* Signatures remembered per op: a call site uses one or a few; the Python cache behind resolve
 * holds many more. */
#define EAGER_ENTRIES 8
/* Calls with more arguments or parameters than this take the Python path. */
#define EAGER_MAX_ARGS 8
#define EAGER_MAX_PARAMS 8

enum { PARAM_BOOL, PARAM_INT, PARAM_FLOAT };

/* One parameter of a signature: its name and its value with its Python type (True, 1 and 1.0
 * are three values, as -0.0 and 0.0 are: a float is kept as its bits). */
typedef struct param_key {
  PyObject *name; /* an entry's: a strong reference; a call's: borrowed */
  int kind;
  int64_t bits;
} param_key;

typedef struct signature {
  int32_t num_args, num_params;
  dlop_device device;
  int32_t dtypes[EAGER_MAX_ARGS], ndims[EAGER_MAX_ARGS];
  param_key params[EAGER_MAX_PARAMS];
} signature;

typedef struct eager_entry {
  signature key;
  PyObject *function; /* the compiled dlop.Function; NULL for an unused entry */
} eager_entry;

typedef struct eager_calls {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject *resolve, *slow;
  int tuple_result; /* the op has other than one output: the function's list becomes a tuple */
  int32_t next;     /* the entry the next new signature takes */
  eager_entry entries[EAGER_ENTRIES];
} eager_calls;

static dlop_py_state *state_of(PyObject *self) { return dlop_py_state_of_type(Py_TYPE(self)); }

/* One parameter value as a key; 0 for a value the fast path does not take (another type, an
 * int beyond int64), which then goes to Python. */
static int param_value_key(PyObject *value, param_key *key) {
  if (PyBool_Check(value)) {
    key->kind = PARAM_BOOL;
    key->bits = value == Py_True;
    return 1;
  }
  if (PyLong_CheckExact(value)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return 0;
    }
    key->kind = PARAM_INT;
    key->bits = (int64_t)v;
    return 1;
  }
  if (PyFloat_CheckExact(value)) {
    double v = PyFloat_AsDouble(value);
    key->kind = PARAM_FLOAT;
    memcpy(&key->bits, &v, sizeof v);
    return 1;
  }
  return 0;
}

/* The call's signature into *key and its arguments into items (borrowed); 0 when the call is
 * not one the fast path takes. */
static int call_signature(dlop_py_state *state, PyObject *args, PyObject *params, signature *key,
                          PyObject **items) {
  Py_ssize_t nargs = PyTuple_Size(args), nparams = PyDict_Size(params);
  if (nargs < 1 || nargs > EAGER_MAX_ARGS || nparams < 0 || nparams > EAGER_MAX_PARAMS) return 0;
  key->num_args = (int32_t)nargs;
  key->num_params = (int32_t)nparams;
  for (Py_ssize_t i = 0; i < nargs; i++) {
    PyObject *item = items[i] = PyTuple_GetItem(args, i);
    if (Py_TYPE(item) != state->array_type) return 0;
    const dlop_array *array = ((dlop_py_array *)item)->array;
    if (array == NULL) return 0; /* expired (lent to a Python op's run): the Python path says so */
    const dlop_tensor *tensor = dlop_array_tensor(array);
    dlop_device device = dlop_array_device(array);
    if (i == 0) key->device = device;
    else if (device.type != key->device.type || device.id != key->device.id) return 0;
    key->dtypes[i] = (int32_t)dlop_tensor_dtype(tensor);
    key->ndims[i] = tensor->ndim;
  }
  Py_ssize_t position = 0, p = 0;
  PyObject *name, *value;
  while (PyDict_Next(params, &position, &name, &value)) {
    if (!PyUnicode_CheckExact(name) || !param_value_key(value, &key->params[p])) return 0;
    key->params[p++].name = name;
  }
  return 1;
}

static int same_name(PyObject *a, PyObject *b) {
  if (a == b) return 1;
  int equal = PyUnicode_Compare(a, b) == 0;
  if (PyErr_Occurred()) PyErr_Clear(); /* both are str: cannot fail */
  return equal;
}

/* The entry's signature is the call's: the same arguments and the same parameters (names are
 * unique on both sides, so finding each of the call's in the entry matches them one to one). */
static int matches(const signature *entry, const signature *call) {
  if (entry->num_args != call->num_args || entry->num_params != call->num_params ||
      entry->device.type != call->device.type || entry->device.id != call->device.id)
    return 0;
  for (int32_t i = 0; i < call->num_args; i++)
    if (entry->dtypes[i] != call->dtypes[i] || entry->ndims[i] != call->ndims[i]) return 0;
  for (int32_t p = 0; p < call->num_params; p++) {
    const param_key *want = &call->params[p];
    int found = 0;
    for (int32_t q = 0; q < entry->num_params && !found; q++) {
      const param_key *have = &entry->params[q];
      found = have->kind == want->kind && have->bits == want->bits &&
              same_name(have->name, want->name);
    }
    if (!found) return 0;
  }
  return 1;
}

static void clear_entry(eager_entry *entry) {
  for (int32_t p = 0; entry->function != NULL && p < entry->key.num_params; p++)
    Py_CLEAR(entry->key.params[p].name);
  Py_CLEAR(entry->function);
}

static void remember(eager_calls *self, const signature *key, PyObject *function) {
  eager_entry *entry = &self->entries[self->next];
  self->next = (self->next + 1) % EAGER_ENTRIES;
  clear_entry(entry);
  entry->key = *key;
  for (int32_t p = 0; p < key->num_params; p++) Py_INCREF(entry->key.params[p].name);
  entry->function = Py_NewRef(function);
}

/* The compiled function's result as Op.__call__ returns it. */
static PyObject *as_returned(eager_calls *self, PyObject *result) {
  if (result == NULL || !self->tuple_result) return result;
  PyObject *tuple = PySequence_Tuple(result);
  Py_DECREF(result);
  return tuple;
}

/* calls(args, params): what op(*args, **params) returns. */
static PyObject *eager_call(eager_calls *self, PyObject *args, PyObject *params) {
  dlop_py_state *state = state_of((PyObject *)self);
  signature key;
  PyObject *items[EAGER_MAX_ARGS];
  if (!call_signature(state, args, params, &key, items))
    return PyObject_CallFunctionObjArgs(self->slow, args, params, NULL);
  PyObject *function = NULL;
  for (int32_t e = 0; e < EAGER_ENTRIES && function == NULL; e++)
    if (self->entries[e].function != NULL && matches(&self->entries[e].key, &key))
      function = Py_NewRef(self->entries[e].function); /* held: a call may replace the entry */
  if (function == NULL) {
    /* resolve gets a copy of params: the key borrows its names from this dict, and the items
     * from args, a tuple (neither can change while resolve's Python code runs) */
    PyObject *copy = PyDict_Copy(params);
    if (copy == NULL) return NULL;
    function = PyObject_CallFunctionObjArgs(self->resolve, args, copy, NULL);
    Py_DECREF(copy);
    if (function == NULL) return NULL;
    if (Py_TYPE(function) != state->function_type) {
      PyErr_Format(PyExc_TypeError, "EagerCalls: resolve gave %R, not a dlop.Function", function);
      Py_DECREF(function);
      return NULL;
    }
    remember(self, &key, function);
  }
  PyObject *result = dlop_py_function_call(function, items, key.num_args);
  Py_DECREF(function);
  return as_returned(self, result);
}

static PyObject *eager_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames) {
  Py_ssize_t nargs = DLOP_PY_NARGS(nargsf);
  if ((kwnames != NULL && PyTuple_Size(kwnames) > 0) || nargs != 2 || !PyTuple_Check(args[0]) ||
      !PyDict_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "EagerCalls takes (args: tuple, params: dict)");
    return NULL;
  }
  return eager_call((eager_calls *)callable, args[0], args[1]);
}

static PyObject *eager_tp_call(PyObject *callable, PyObject *args, PyObject *kwargs) {
  if ((kwargs != NULL && PyDict_Size(kwargs) > 0) || PyTuple_Size(args) != 2) {
    PyErr_SetString(PyExc_TypeError, "EagerCalls takes (args: tuple, params: dict)");
    return NULL;
  }
  PyObject *items[2] = {PyTuple_GetItem(args, 0), PyTuple_GetItem(args, 1)};
  return eager_vectorcall(callable, items, 2, NULL);
}

/* EagerCalls(tuple_result, resolve, slow) */
static PyObject *eager_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  int tuple_result;
  PyObject *resolve, *slow;
  if (kwargs != NULL && PyDict_Size(kwargs) > 0) {
    PyErr_SetString(PyExc_TypeError, "EagerCalls() takes positional arguments only");
    return NULL;
  }
  if (!PyArg_ParseTuple(args, "pOO:EagerCalls", &tuple_result, &resolve, &slow)) return NULL;
  if (!PyCallable_Check(resolve) || !PyCallable_Check(slow)) {
    PyErr_SetString(PyExc_TypeError, "EagerCalls: resolve and slow must be callable");
    return NULL;
  }
  allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
  eager_calls *self = (eager_calls *)alloc(type, 0); /* zeroed: every entry unused */
  if (self == NULL) return NULL;
  self->vectorcall = eager_vectorcall;
  self->tuple_result = tuple_result;
  self->resolve = Py_NewRef(resolve);
  self->slow = Py_NewRef(slow);
  return (PyObject *)self;
}

/* remembered() -> int: how many signatures are remembered (for tests). */
static PyObject *eager_remembered(PyObject *object, PyObject *unused) {
  eager_calls *self = (eager_calls *)object;
  long count = 0;
  for (int32_t e = 0; e < EAGER_ENTRIES; e++) count += self->entries[e].function != NULL;
  return PyLong_FromLong(count);
}

/* A remembered function holds Variables whose nodes hold the op, which holds this object. */
static int eager_traverse(PyObject *object, visitproc visit, void *arg) {
  eager_calls *self = (eager_calls *)object;
  Py_VISIT(Py_TYPE(object));
  Py_VISIT(self->resolve);
  Py_VISIT(self->slow);
  for (int32_t e = 0; e < EAGER_ENTRIES; e++) Py_VISIT(self->entries[e].function);
  return 0;
}

static int eager_clear(PyObject *object) {
  eager_calls *self = (eager_calls *)object;
  Py_CLEAR(self->resolve);
  Py_CLEAR(self->slow);
  for (int32_t e = 0; e < EAGER_ENTRIES; e++) clear_entry(&self->entries[e]);
  return 0;
}

static void eager_dealloc(PyObject *object) {
  PyTypeObject *type = Py_TYPE(object);
  PyObject_GC_UnTrack(object);
  eager_clear(object);
  ((freefunc)PyType_GetSlot(type, Py_tp_free))(object);
  Py_DECREF(type);
}

static PyMethodDef eager_methods[] = {
    {"remembered", eager_remembered, METH_NOARGS, "How many signatures are remembered."},
    {NULL, NULL, 0, NULL}};

static PyMemberDef eager_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(eager_calls, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}};

static PyType_Slot eager_slots[] = {
    {Py_tp_doc, (void *)"EagerCalls(tuple_result, resolve, slow): an op's eager call, "
                        "called as calls(args, params)."},
    {Py_tp_new, (void *)eager_new},
    {Py_tp_dealloc, (void *)eager_dealloc},
    {Py_tp_traverse, (void *)eager_traverse},
    {Py_tp_clear, (void *)eager_clear},
    {Py_tp_call, (void *)eager_tp_call},
    {Py_tp_methods, eager_methods},
    {Py_tp_members, eager_members},
    {0, NULL}};

static PyType_Spec eager_spec = {"dlop._C.EagerCalls", sizeof(eager_calls), 0,
                                 Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                                     Py_TPFLAGS_HAVE_VECTORCALL,
                                 eager_slots};

int dlop_py_add_eager_calls_type(PyObject *module) {
  PyTypeObject *type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &eager_spec, NULL);
  if (type == NULL) return -1;
  int status = PyModule_AddType(module, type);
  Py_DECREF(type);
  return status;
}
