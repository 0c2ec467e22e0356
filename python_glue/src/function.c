/* function.c — dlop._C.Function: a compiled dlop_function whose call is one vectorcall that
 * checks and converts the arguments, runs the whole schedule in C (the GIL released while
 * kernels run) and wraps the outputs. Nothing in the call path is Python code. */
#include <stdlib.h>
#include <string.h>

#include "module.h"
#include <structmember.h> /* PyMemberDef for __vectorcalloffset__ */

/* Below this many input elements a CPU run takes less time than releasing and re-taking the
 * GIL (about 0.1 us), so small CPU runs keep it; CUDA runs always release it. */
#define CPU_RELEASE_GIL_ELEMENTS 32768
/* Arguments and outputs handled without a heap allocation. */
#define STACK_ARRAYS 8

static dlop_py_state *state_of(PyObject *self) { return dlop_py_state_of_type(Py_TYPE(self)); }

static const char *input_name(dlop_py_function *self, int32_t i) {
  PyObject *name = self->input_names ? PyTuple_GetItem(self->input_names, i) : NULL;
  const char *text = name && PyUnicode_Check(name) ? PyUnicode_AsUTF8AndSize(name, NULL) : NULL;
  if (text == NULL) PyErr_Clear();
  return text ? text : "?";
}

static void format_shape(char *buffer, size_t size, int32_t ndim, const int64_t *shape) {
  size_t used = (size_t)snprintf(buffer, size, "(");
  for (int32_t i = 0; i < ndim && used < size; i++) {
    if (shape[i] == DLOP_DIM_UNKNOWN)
      used += (size_t)snprintf(buffer + used, size - used, "%sNone", i ? ", " : "");
    else
      used += (size_t)snprintf(buffer + used, size - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
  }
  if (used < size) snprintf(buffer + used, size - used, ndim == 1 ? ",)" : ")");
}

/* The argument's dtype, rank and static dims against the declared input. */
static int check_input(dlop_py_state *state, dlop_py_function *self, int32_t i, dlop_array *array) {
  const dlop_type *want = &self->input_types[i];
  const dlop_tensor *t = dlop_array_tensor(array);
  dlop_dtype dtype = dlop_tensor_dtype(t);
  if ((int32_t)dtype != want->dtype) {
    dlop_py_raisef(state, DLOP_TYPE_ERROR,
                   "argument %d ('%s') has dtype %s; the function declares %s for it", (int)i + 1,
                   input_name(self, i), dlop_dtype_name(dtype), dlop_dtype_name((dlop_dtype)want->dtype));
    return -1;
  }
  int ok = t->ndim == want->ndim;
  for (int32_t d = 0; ok && d < t->ndim; d++)
    ok = want->shape[d] == DLOP_DIM_UNKNOWN || want->shape[d] == t->shape[d];
  if (!ok) {
    char have_text[256], want_text[256];
    format_shape(have_text, sizeof have_text, t->ndim, t->shape);
    format_shape(want_text, sizeof want_text, want->ndim, want->shape);
    dlop_py_raisef(state, DLOP_SHAPE_ERROR,
                   "argument %d ('%s') has shape %s; the function declares %s (None: any size)",
                   (int)i + 1, input_name(self, i), have_text, want_text);
    return -1;
  }
  return 0;
}

/* One argument to an array on the function's device: dlop.Array and device producers must
 * already be there; host buffers (NumPy, lists) are copied to a CUDA function's device. */
static int argument_array(dlop_py_state *state, dlop_py_function *self, int32_t i, PyObject *object,
                          dlop_array **array, int *readonly) {
  int from_host;
  if (dlop_py_to_array(state, object, array, readonly, &from_host) < 0) return -1;
  dlop_device here = dlop_array_device(*array);
  if (here.type != self->device.type || here.id != self->device.id) {
    if (from_host && here.type == DLOP_DEVICE_CPU) {
      dlop_array *copy = NULL;
      int status;
      Py_BEGIN_ALLOW_THREADS
      status = dlop_array_copy_to(*array, self->device, &copy);
      Py_END_ALLOW_THREADS
      dlop_array_release(*array);
      *array = NULL;
      if (status != DLOP_OK) {
        dlop_py_raise(state, status, "copying a host argument to the function's device");
        return -1;
      }
      *array = copy;
      *readonly = 0; /* a fresh copy of our own */
    } else {
      char have[32], want[32];
      dlop_device_format(here, have, sizeof have);
      dlop_device_format(self->device, want, sizeof want);
      dlop_array_release(*array);
      *array = NULL;
      dlop_py_raisef(state, DLOP_DEVICE_MISMATCH,
                     "argument %d ('%s') is on %s; this function runs on %s and never moves "
                     "device arrays itself: use dlop.asarray(a, device='%s') or a.to('%s')",
                     (int)i + 1, input_name(self, i), have, want, want, want);
      return -1;
    }
  }
  if (check_input(state, self, i, *array) < 0) {
    dlop_array_release(*array);
    *array = NULL;
    return -1;
  }
  return 0;
}

/* The bytes [*low, *high) that a tensor's elements span (empty for an empty tensor). */
static void tensor_extent(const dlop_tensor *t, uintptr_t *low, uintptr_t *high) {
  int64_t first = 0, last = 0;
  const uintptr_t origin = (uintptr_t)t->data + (uintptr_t)t->byte_offset;
  if (dlop_tensor_numel(t) == 0) {
    *low = *high = 0;
    return;
  }
  /* every dlop_array's extent was checked when it was made (dlop_array_wrap/_view): it fits */
  (void)dlop_strided_extent(t->shape, t->strides, t->ndim, (int64_t)(t->dtype.bits / 8), 0,
                            &first, &last, NULL);
  *low = origin + (uintptr_t)first;
  *high = origin + (uintptr_t)last;
}

/* An output that shares memory with a read-only input (a view: transpose, reshape,
 * broadcast_to, ...) is read-only too, so that no view can write what its source forbids. */
static int output_is_readonly(dlop_array *output, dlop_array *const *inputs,
                              const int *readonly, int32_t num_inputs) {
  uintptr_t low, high;
  tensor_extent(dlop_array_tensor(output), &low, &high);
  for (int32_t i = 0; i < num_inputs; i++) {
    if (!readonly[i]) continue;
    uintptr_t in_low, in_high;
    tensor_extent(dlop_array_tensor(inputs[i]), &in_low, &in_high);
    if (low < in_high && in_low < high) return 1;
  }
  return 0;
}

static PyObject *function_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                                     PyObject *kwnames) {
  dlop_py_function *self = (dlop_py_function *)callable;
  dlop_py_state *state = state_of(callable);
  Py_ssize_t nargs = DLOP_PY_NARGS(nargsf);
  dlop_py_deferred_poll(); /* foreign inputs of earlier calls whose work is done go back */
  if (kwnames != NULL && PyTuple_Size(kwnames) > 0)
    return dlop_py_raisef(state, DLOP_TYPE_ERROR,
                          "a dlop function takes its %d inputs by position, not by keyword",
                          (int)self->num_inputs);
  if (nargs != self->num_inputs) {
    PyObject *names = self->input_names ? PyObject_Repr(self->input_names) : NULL;
    PyObject *error = dlop_py_raisef(state, DLOP_TYPE_ERROR,
                                     "this function takes %d input%s %s; %zd were given",
                                     (int)self->num_inputs, self->num_inputs == 1 ? "" : "s",
                                     names ? PyUnicode_AsUTF8AndSize(names, NULL) : "", nargs);
    Py_XDECREF(names);
    return error;
  }
  dlop_array *stack[2 * STACK_ARRAYS];
  int32_t total = self->num_inputs + self->num_outputs;
  dlop_array **inputs = total <= 2 * STACK_ARRAYS ? stack : PyMem_Calloc((size_t)total, sizeof *inputs);
  if (inputs == NULL) return PyErr_NoMemory();
  dlop_array **outputs = inputs + self->num_inputs;
  PyObject *result = NULL;
  int32_t converted = 0;
  int64_t elements = 0;
  int readonly_stack[STACK_ARRAYS], any_readonly = 0;
  int *readonly = self->num_inputs <= STACK_ARRAYS ? readonly_stack
                                                  : PyMem_Calloc((size_t)self->num_inputs, sizeof *readonly);
  if (readonly == NULL) {
    if (inputs != stack) PyMem_Free(inputs);
    return PyErr_NoMemory();
  }
  for (; converted < self->num_inputs; converted++) {
    if (argument_array(state, self, converted, args[converted], &inputs[converted],
                       &readonly[converted]) < 0)
      goto done;
    any_readonly |= readonly[converted];
    /* saturating: only compared with a threshold, and two inputs of 2^62 elements (zero-stride
     * views) must not wrap the sum */
    if (dlop_add_overflow(elements, dlop_array_numel(inputs[converted]), &elements))
      elements = INT64_MAX;
  }
  dlop_stream *stream; /* NULL for the CPU */
  if (dlop_py_stream(state, self->device, &stream) < 0) goto done;
  int status;
  if (self->device.type == DLOP_DEVICE_CUDA || elements >= CPU_RELEASE_GIL_ELEMENTS) {
    Py_BEGIN_ALLOW_THREADS
    status = dlop_function_run(self->function, inputs, self->num_inputs, outputs,
                               self->num_outputs, stream);
    Py_END_ALLOW_THREADS
  } else {
    status = dlop_function_run(self->function, inputs, self->num_inputs, outputs,
                               self->num_outputs, stream);
  }
  if (status != DLOP_OK) {
    dlop_py_raise(state, status, NULL);
    goto done;
  }
  if (!self->return_list && self->num_outputs == 1) {
    result = dlop_py_array_new(state, outputs[0]);
    if (result && any_readonly)
      ((dlop_py_array *)result)->readonly =
          output_is_readonly(outputs[0], inputs, readonly, self->num_inputs);
  } else {
    result = PyList_New(self->num_outputs);
    for (int32_t o = 0; o < self->num_outputs; o++) {
      PyObject *item = result ? dlop_py_array_new(state, outputs[o]) : NULL;
      if (item == NULL) {
        for (int32_t r = o + (result ? 1 : 0); r < self->num_outputs; r++) dlop_array_release(outputs[r]);
        Py_CLEAR(result);
        break;
      }
      if (any_readonly)
        ((dlop_py_array *)item)->readonly =
            output_is_readonly(outputs[o], inputs, readonly, self->num_inputs);
      PyList_SetItem(result, o, item);
    }
  }
done:
  for (int32_t i = 0; i < converted; i++) dlop_py_release_holding_gil(inputs[i]);
  if (inputs != stack) PyMem_Free(inputs);
  if (readonly != readonly_stack) PyMem_Free(readonly);
  return result;
}

PyObject *dlop_py_function_call(PyObject *function, PyObject *const *args, Py_ssize_t nargs) {
  return function_vectorcall(function, args, (size_t)nargs, NULL);
}

/* tp_call for callers that do not use vectorcall (PyObject_Call with a tuple). */
static PyObject *function_call(PyObject *callable, PyObject *args, PyObject *kwargs) {
  if (kwargs != NULL && PyDict_Size(kwargs) > 0) {
    dlop_py_function *self = (dlop_py_function *)callable;
    return dlop_py_raisef(state_of(callable), DLOP_TYPE_ERROR,
                          "a dlop function takes its %d inputs by position, not by keyword",
                          (int)self->num_inputs);
  }
  Py_ssize_t n = PyTuple_Size(args);
  PyObject *stack[STACK_ARRAYS];
  PyObject **items = n <= STACK_ARRAYS ? stack : PyMem_Calloc((size_t)n + 1, sizeof(PyObject *));
  if (items == NULL) return PyErr_NoMemory();
  for (Py_ssize_t i = 0; i < n; i++) items[i] = PyTuple_GetItem(args, i);
  PyObject *result = function_vectorcall(callable, items, (size_t)n, NULL);
  if (items != stack) PyMem_Free(items);
  return result;
}

PyObject *dlop_py_function_new(dlop_py_state *state, dlop_function *function,
                               const dlop_type *input_types, int32_t num_inputs,
                               int32_t num_outputs, PyObject *input_names) {
  allocfunc alloc = (allocfunc)PyType_GetSlot(state->function_type, Py_tp_alloc);
  dlop_py_function *self = (dlop_py_function *)alloc(state->function_type, 0);
  if (self == NULL) {
    dlop_function_destroy(function);
    return NULL;
  }
  self->vectorcall = function_vectorcall;
  self->function = function;
  self->device = dlop_function_device(function);
  self->num_inputs = num_inputs;
  self->num_outputs = num_outputs;
  self->fuse = self->cuda_graphs = 1; /* the defaults; graph.c sets what was asked for */
  self->input_names = Py_NewRef(input_names);
  self->inputs = Py_NewRef(Py_None);
  self->outputs = Py_NewRef(Py_None);
  self->input_types = malloc(sizeof(dlop_type) * (size_t)(num_inputs > 0 ? num_inputs : 1));
  if (self->input_types == NULL) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  memcpy(self->input_types, input_types, sizeof(dlop_type) * (size_t)num_inputs);
  return (PyObject *)self;
}

static int function_traverse(PyObject *object, visitproc visit, void *arg) {
  dlop_py_function *self = (dlop_py_function *)object;
  Py_VISIT(Py_TYPE(object));
  Py_VISIT(self->inputs);
  Py_VISIT(self->outputs);
  Py_VISIT(self->input_names);
  return 0;
}

static int function_clear(PyObject *object) {
  dlop_py_function *self = (dlop_py_function *)object;
  Py_CLEAR(self->inputs);
  Py_CLEAR(self->outputs);
  Py_CLEAR(self->input_names);
  return 0;
}

static void function_dealloc(PyObject *object) {
  dlop_py_function *self = (dlop_py_function *)object;
  PyTypeObject *type = Py_TYPE(object);
  PyObject_GC_UnTrack(object);
  function_clear(object);
  if (self->function) {
    /* Destroying waits for runs still in flight on the GPU: not while holding the GIL. */
    dlop_function *function = self->function;
    self->function = NULL;
    if (self->device.type == DLOP_DEVICE_CUDA) {
      Py_BEGIN_ALLOW_THREADS
      dlop_function_destroy(function);
      Py_END_ALLOW_THREADS
    } else {
      dlop_function_destroy(function);
    }
  }
  free(self->input_types);
  ((freefunc)PyType_GetSlot(type, Py_tp_free))(object);
  Py_DECREF(type);
}

static PyObject *function_explain(PyObject *object, PyObject *unused) {
  dlop_py_function *self = (dlop_py_function *)object;
  size_t size = 4096;
  for (int attempt = 0; attempt < 8; attempt++, size *= 4) {
    char *buffer = PyMem_Malloc(size);
    if (buffer == NULL) return PyErr_NoMemory();
    buffer[0] = '\0';
    int status = dlop_function_explain(self->function, buffer, size);
    if (status == DLOP_OK && strlen(buffer) + 1 < size) {
      PyObject *text = PyUnicode_FromString(buffer);
      PyMem_Free(buffer);
      return text;
    }
    PyMem_Free(buffer);
    if (status != DLOP_OK && strlen(dlop_last_error()) > 0 && attempt > 2)
      return dlop_py_raise(state_of(object), status, "explain");
  }
  return dlop_py_raisef(state_of(object), DLOP_INTERNAL, "explain: the listing is too long");
}

static PyObject *function_get_device(PyObject *object, void *closure) {
  return dlop_py_device_str(((dlop_py_function *)object)->device);
}
static PyObject *function_get_inputs(PyObject *object, void *closure) {
  PyObject *value = ((dlop_py_function *)object)->inputs;
  if (value == NULL || !PyTuple_Check(value)) return PyList_New(0); /* cleared or not set */
  return PySequence_List(value);
}
static PyObject *function_get_outputs(PyObject *object, void *closure) {
  dlop_py_function *self = (dlop_py_function *)object;
  if (self->outputs == NULL || !PyTuple_Check(self->outputs) || PyTuple_Size(self->outputs) == 0)
    Py_RETURN_NONE;
  if (self->return_list) return PySequence_List(self->outputs);
  return Py_NewRef(PyTuple_GetItem(self->outputs, 0));
}
static PyObject *function_get_node_count(PyObject *object, void *closure) {
  return PyLong_FromLong(dlop_function_node_count(((dlop_py_function *)object)->function));
}

static PyObject *function_get_fuse(PyObject *object, void *closure) {
  return PyBool_FromLong(((dlop_py_function *)object)->fuse);
}
static PyObject *function_get_cuda_graphs(PyObject *object, void *closure) {
  return PyBool_FromLong(((dlop_py_function *)object)->cuda_graphs);
}

/* Pickling goes through the graph's text (dlop/_serialize.py): the receiving process rebuilds
 * the graph with its own plugins and compiles it again, refusing clearly what it lacks. */
static PyObject *function_reduce(PyObject *object, PyObject *unused) {
  PyObject *module = PyImport_ImportModule("dlop._serialize");
  if (module == NULL) return NULL;
  PyObject *result = PyObject_CallMethod(module, "_reduce_function", "O", object);
  Py_DECREF(module);
  return result;
}

static PyGetSetDef function_getset[] = {
    {"device", function_get_device, NULL, "The device every node runs on ('cpu', 'cuda:N').", NULL},
    {"inputs", function_get_inputs, NULL, "The input Variables, in call order.", NULL},
    {"outputs", function_get_outputs, NULL,
     "The output Variable, or the list of them when outputs were given as a list.", NULL},
    {"node_count", function_get_node_count, NULL, "Number of op nodes in the schedule.", NULL},
    {"fuse", function_get_fuse, NULL, "Whether elementwise groups were fused (the fuse option).",
     NULL},
    {"cuda_graphs", function_get_cuda_graphs, NULL, "The cuda_graphs option it was compiled with.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef function_methods[] = {
    {"explain", function_explain, METH_NOARGS,
     "One line per node: op, input and output types and shapes, device."},
    {"__reduce__", function_reduce, METH_NOARGS,
     "Pickles as the graph's dlop-graph text (dlop.dumps); unpickling compiles it again."},
    {NULL, NULL, 0, NULL}};

static PyMemberDef function_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(dlop_py_function, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}};

static PyType_Slot function_slots[] = {
    {Py_tp_doc, (void *)"A compiled dlop function: call it with one array per input."},
    {Py_tp_dealloc, (void *)function_dealloc},
    {Py_tp_traverse, (void *)function_traverse},
    {Py_tp_clear, (void *)function_clear},
    {Py_tp_call, (void *)function_call},
    {Py_tp_getset, function_getset},
    {Py_tp_methods, function_methods},
    {Py_tp_members, function_members},
    {0, NULL}};

static PyType_Spec function_spec = {
    "dlop.Function", sizeof(dlop_py_function), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
        Py_TPFLAGS_DISALLOW_INSTANTIATION,
    function_slots};

int dlop_py_add_function_type(PyObject *module, dlop_py_state *state) {
  state->function_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &function_spec, NULL);
  if (state->function_type == NULL) return -1;
  return PyModule_AddType(module, state->function_type);
}
