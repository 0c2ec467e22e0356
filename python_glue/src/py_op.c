/* py_op.c — ops whose stages are Python methods (dlop.Op subclasses, dlop/_py_op.py). Each
 * distinct op becomes a one-op in-process plugin (dlop_register_plugin) whose make_node,
 * infer_shape, make_thunk and thunk run are C trampolines calling the Python side under the
 * GIL (PyGILState_Ensure, so any thread may call them). An exception raised there becomes a
 * status and a message naming the op and the stage; it is also kept in the module state so
 * that the dlop exception raised for that message chains it as __cause__ (errors.c). The
 * arrays a run lends to Python must not outlive it: one still held afterwards is expired and
 * fails the run (release_lent). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "module.h"

/* One registered Python op. Lives until the process ends, as the registry requires. */
typedef struct py_op {
  dlop_py_state *state;
  PyObject *callbacks; /* the Python side: make_node, infer_shape, make_thunk methods */
  char *name, *doc, *plugin_name, *origin;
  dlop_op_desc desc;
  const dlop_op_desc *ops[1];
  dlop_plugin_desc plugin;
} py_op;

/* What one thunk holds: the launch make_thunk returned. */
typedef struct py_thunk {
  py_op *op;
  PyObject *run;
} py_thunk;

/* The status a Python exception maps to: the dlop class it is (or the builtin it derives
 * from), DLOP_PLUGIN_ERROR for anything else. */
static int status_of(dlop_py_state *state, PyObject *type) {
  static const struct { int index, status; } dlop_classes[] = {
      {DLOP_PY_SHAPE_ERROR, DLOP_SHAPE_ERROR},
      {DLOP_PY_NOT_FOUND_ERROR, DLOP_NOT_FOUND},
      {DLOP_PY_NO_DEVICE_ERROR, DLOP_NO_DEVICE},
      {DLOP_PY_DEVICE_MISMATCH, DLOP_DEVICE_MISMATCH},
      {DLOP_PY_UNSUPPORTED, DLOP_UNSUPPORTED},
      {DLOP_PY_MEMORY_ERROR, DLOP_OUT_OF_MEMORY},
  };
  for (size_t i = 0; i < sizeof dlop_classes / sizeof dlop_classes[0]; i++)
    if (PyErr_GivenExceptionMatches(type, state->errors[dlop_classes[i].index]))
      return dlop_classes[i].status;
  if (PyErr_GivenExceptionMatches(type, PyExc_TypeError)) return DLOP_TYPE_ERROR;
  if (PyErr_GivenExceptionMatches(type, PyExc_MemoryError)) return DLOP_OUT_OF_MEMORY;
  if (PyErr_GivenExceptionMatches(type, PyExc_ValueError)) return DLOP_INVALID_ARGUMENT;
  return DLOP_PLUGIN_ERROR;
}

/* The most bytes of the exception's own text a stage message quotes: with the token, the op
 * and the stage it stays well inside the host's error buffers, so the token always arrives. */
#define MAX_QUOTED_TEXT 600

/* Keep exception (a new reference) under a fresh token, dropping the oldest slot if all are
 * taken. Its traceback's frames are cleared: they hold the arrays borrowed for the run, whose
 * memory dlop reuses as soon as the run returns. */
static unsigned long long keep_exception(dlop_py_state *state, PyObject *exception) {
  PyObject *traceback = PyException_GetTraceback(exception);
  if (traceback != NULL) {
    PyObject *module = PyImport_ImportModule("traceback");
    PyObject *done = module ? PyObject_CallMethod(module, "clear_frames", "O", traceback) : NULL;
    Py_XDECREF(done);
    Py_XDECREF(module);
    Py_DECREF(traceback);
    PyErr_Clear(); /* the locals stay: the error itself is still reported */
  }
  int slot = 0;
  for (int i = 0; i < DLOP_PY_STAGE_EXCEPTIONS; i++) {
    if (state->stage_exceptions[i].token == 0) {
      slot = i;
      break;
    }
    if (state->stage_exceptions[i].token < state->stage_exceptions[slot].token) slot = i;
  }
  PyObject *old = state->stage_exceptions[slot].exception;
  unsigned long long token = ++state->next_stage_token;
  state->stage_exceptions[slot].token = token;
  state->stage_exceptions[slot].exception = exception;
  Py_XDECREF(old);
  return token;
}

/* How many of text's first bytes fit in limit without cutting a UTF-8 character. */
static int utf8_prefix(const char *text, int limit) {
  int length = (int)strlen(text);
  if (length <= limit) return length;
  while (limit > 0 && ((unsigned char)text[limit] & 0xC0) == 0x80) limit--;
  return limit;
}

/* The Python exception now set, as a status and "[pyexc N] op 'NAME': STAGE raised TYPE: TEXT"
 * in error; the exception is kept under N for errors.c to chain. The exception is cleared. */
static int fail_from_python(py_op *op, const char *stage, char *error, size_t error_size) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  if (value != NULL && traceback != NULL) PyException_SetTraceback(value, traceback);
  int status = type ? status_of(op->state, type) : DLOP_INTERNAL;
  PyObject *text = value ? PyObject_Str(value) : NULL;
  PyObject *type_name = type ? PyObject_GetAttrString(type, "__qualname__") : NULL;
  const char *text_c = text ? PyUnicode_AsUTF8AndSize(text, NULL) : NULL;
  const char *type_c = type_name ? PyUnicode_AsUTF8AndSize(type_name, NULL) : NULL;
  PyErr_Clear(); /* a failure to describe the exception must not leak out of the trampoline */
  if (text_c == NULL) text_c = "(no message)";
  int quoted = utf8_prefix(text_c, MAX_QUOTED_TEXT);
  unsigned long long token = value ? keep_exception(op->state, Py_NewRef(value)) : 0;
  if (error != NULL && error_size > 0) {
    char tag[40] = "";
    if (token) snprintf(tag, sizeof tag, "[pyexc %llu] ", token);
    snprintf(error, error_size, "%sop '%s': %s raised %s: %.*s%s", tag, op->name, stage,
             type_c ? type_c : "an exception", quoted, text_c,
             text_c[quoted] ? " ... (cut)" : "");
  }
  Py_XDECREF(text);
  Py_XDECREF(type_name);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  PyErr_Clear();
  return status;
}

static PyObject *shape_tuple(const int64_t *shape, int32_t ndim) {
  PyObject *tuple = PyTuple_New(ndim);
  for (int32_t d = 0; tuple && d < ndim; d++) {
    PyObject *dim = shape[d] == DLOP_DIM_UNKNOWN ? Py_NewRef(Py_None) : PyLong_FromLongLong(shape[d]);
    if (dim == NULL || PyTuple_SetItem(tuple, d, dim) < 0) Py_CLEAR(tuple);
  }
  return tuple;
}

/* The types as a list of (dtype name, shape with None where unknown). */
static PyObject *type_list(const dlop_type *types, int32_t count) {
  PyObject *list = PyList_New(count);
  for (int32_t i = 0; list && i < count; i++) {
    PyObject *shape = shape_tuple(types[i].shape, types[i].ndim);
    PyObject *item = shape ? Py_BuildValue("(sN)", dlop_dtype_name((dlop_dtype)types[i].dtype), shape)
                           : NULL;
    if (item == NULL || PyList_SetItem(list, i, item) < 0) Py_CLEAR(list);
  }
  return list;
}

/* A result that is not what the stage must return: a TypeError naming it (then reported). */
static int bad_result(const char *stage, const char *expected, PyObject *got) {
  PyErr_Format(PyExc_TypeError, "%s returned %R: expected %s", stage, got, expected);
  return -1;
}

/* result[i] (a shape tuple) into type->shape; ndim must be keep_ndim unless it is < 0. */
static int read_shape(py_op *op, PyObject *shape, const char *what, dlop_type *type,
                      int32_t keep_ndim) {
  int32_t ndim = 0;
  if (dlop_py_parse_shape(op->state, shape, what, (dlop_dtype)type->dtype, type->shape, &ndim) < 0)
    return -1;
  if (keep_ndim >= 0 && ndim != keep_ndim) {
    PyErr_Format(op->state->errors[DLOP_PY_SHAPE_ERROR],
                 "%s has %d dimension(s); make_node gave it %d", what, (int)ndim, (int)keep_ndim);
    return -1;
  }
  type->ndim = ndim;
  return 0;
}

/* make_node: callbacks.make_node([(dtype, shape)...]) -> [(dtype, shape)...], one per output. */
static int trampoline_make_node(const dlop_node_args *args) {
  py_op *op = (py_op *)args->op->op_data;
  PyGILState_STATE gil = PyGILState_Ensure();
  int status = DLOP_OK;
  PyObject *inputs = type_list(args->inputs, args->num_inputs);
  PyObject *result = inputs ? PyObject_CallMethod(op->callbacks, "make_node", "O", inputs) : NULL;
  int ok = result != NULL;
  if (ok && (!PyList_Check(result) || PyList_Size(result) != args->num_outputs))
    ok = bad_result("make_node", "one (dtype, shape) per output", result) == 0;
  for (int32_t i = 0; ok && i < args->num_outputs; i++) {
    PyObject *dtype, *shape;
    dlop_dtype parsed;
    if (!PyArg_ParseTuple(PyList_GetItem(result, i), "OO", &dtype, &shape) ||
        dlop_py_parse_dtype(op->state, dtype, &parsed) < 0) {
      ok = 0;
      break;
    }
    args->outputs[i].dtype = (int32_t)parsed;
    ok = read_shape(op, shape, "make_node's output", &args->outputs[i], -1) == 0;
  }
  if (!ok) status = fail_from_python(op, "make_node", args->error, args->error_size);
  Py_XDECREF(result);
  Py_XDECREF(inputs);
  PyGILState_Release(gil);
  return status;
}

/* infer_shape: callbacks.infer_shape(input types, output types) -> [shape...]. */
static int trampoline_infer_shape(const dlop_node_args *args) {
  py_op *op = (py_op *)args->op->op_data;
  PyGILState_STATE gil = PyGILState_Ensure();
  int status = DLOP_OK;
  PyObject *inputs = type_list(args->inputs, args->num_inputs);
  PyObject *outputs = inputs ? type_list(args->outputs, args->num_outputs) : NULL;
  PyObject *result = outputs ? PyObject_CallMethod(op->callbacks, "infer_shape", "OO", inputs, outputs)
                             : NULL;
  int ok = result != NULL;
  if (ok && (!PyList_Check(result) || PyList_Size(result) != args->num_outputs))
    ok = bad_result("infer_shape", "one shape per output", result) == 0;
  for (int32_t i = 0; ok && i < args->num_outputs; i++)
    ok = read_shape(op, PyList_GetItem(result, i), "infer_shape's output shape", &args->outputs[i],
                    args->outputs[i].ndim) == 0;
  if (!ok) status = fail_from_python(op, "infer_shape", args->error, args->error_size);
  Py_XDECREF(result);
  Py_XDECREF(outputs);
  Py_XDECREF(inputs);
  PyGILState_Release(gil);
  return status;
}

/* Who holds the arrays lent for one run from C: one count per lent dlop_array, dropped by its
 * deleter when its last reference goes (a DLPack export or a dlop view keeps it after the
 * dlop.Array is gone), and one for the run. Whoever drops the last frees it: a deleter may run
 * long after the run, on any thread, without the GIL. */
typedef struct run_lease {
  atomic_int holders;
} run_lease;

static run_lease *lease_new(void) {
  run_lease *lease = malloc(sizeof *lease);
  if (lease != NULL) atomic_init(&lease->holders, 1);
  return lease;
}

static void lease_drop(void *context) {
  run_lease *lease = context;
  if (atomic_fetch_sub_explicit(&lease->holders, 1, memory_order_acq_rel) == 1) free(lease);
}

/* A dlop.Array borrowing tensor for the length of one run (nothing is copied). On CUDA the
 * run's stream is recorded as its pending write, so whatever reads it inside the launch (a dlop
 * kernel, a DLPack or __cuda_array_interface__ consumer, .numpy()) waits for the producer. */
static PyObject *borrow(dlop_py_state *state, const dlop_tensor *tensor, dlop_stream *run_stream,
                        int readonly, run_lease *lease) {
  dlop_array *array = NULL;
  atomic_fetch_add_explicit(&lease->holders, 1, memory_order_relaxed);
  int status = dlop_array_wrap(tensor, lease_drop, lease, &array);
  if (status != DLOP_OK) lease_drop(lease); /* not called on failure: the count is ours */
  if (status == DLOP_OK && run_stream != NULL) {
    status = dlop_array_record_write(array, run_stream);
    if (status != DLOP_OK) dlop_array_release(array);
  }
  if (status != DLOP_OK) return dlop_py_raise(state, status, "wrapping a tensor for a Python op");
  PyObject *object = dlop_py_array_new(state, array);
  if (object != NULL) ((dlop_py_array *)object)->readonly = readonly;
  return object;
}

static PyObject *borrow_all(dlop_py_state *state, const dlop_tensor *tensors, int32_t count,
                            dlop_stream *run_stream, int readonly, run_lease *lease) {
  PyObject *tuple = PyTuple_New(count);
  for (int32_t i = 0; tuple && i < count; i++) {
    PyObject *item = borrow(state, &tensors[i], run_stream, readonly, lease);
    if (item == NULL || PyTuple_SetItem(tuple, i, item) < 0) Py_CLEAR(tuple);
  }
  return tuple;
}

/* CUDA's legacy default stream, as DLPack numbers it: where a launch without stream= (and
 * PyCUDA's, CuPy's, PyTorch's default) runs. dlop's streams never synchronize with it. */
#define LEGACY_STREAM ((void *)(uintptr_t)1)

/* Before the Python call: the run's stream wrapped (for the borrowed arrays), and the legacy
 * default stream made to wait for it, so work there starts after the producer nodes. */
static int order_before(dlop_py_state *state, dlop_device device, void *stream,
                        dlop_stream **run_stream) {
  *run_stream = NULL;
  if (stream == NULL) return 0;
  int status = dlop_stream_wrap(device, stream, run_stream);
  if (status == DLOP_OK) status = dlop_cuda_stream_wait_stream(device.id, LEGACY_STREAM, stream);
  if (status != DLOP_OK) {
    dlop_py_raise(state, status, "ordering a Python op's launch after its inputs");
    return -1;
  }
  return 0;
}

/* After it: the run's stream waits for the legacy default stream and for the extension's own
 * stream (dlop calls made inside the launch), so the next node reads finished outputs and the
 * planner reuses no memory that work still touches. */
static int order_after(dlop_py_state *state, dlop_device device, void *stream) {
  if (stream == NULL) return 0;
  int status = dlop_cuda_stream_wait_stream(device.id, stream, LEGACY_STREAM);
  dlop_stream *own = device.id >= 0 && device.id < DLOP_PY_MAX_DEVICES ? state->streams[device.id]
                                                                      : NULL;
  if (status == DLOP_OK && own != NULL)
    status = dlop_cuda_stream_wait_stream(device.id, stream, dlop_stream_handle(own));
  if (status != DLOP_OK && !PyErr_Occurred()) { /* else the launch's own error is reported */
    dlop_py_raise(state, status, "ordering the run's stream after a Python op's launch");
    return -1;
  }
  return 0;
}

/* Whether a lent dlop.Array (or the tuple that holds it) is referenced beyond the run's own
 * tuple: stored on self, in a global, or held by a NumPy view or a CAI consumer. */
static int held_beyond(PyObject *tuple, Py_ssize_t i) {
  return Py_REFCNT(tuple) > 1 || Py_REFCNT(PyTuple_GetItem(tuple, i)) > 1;
}

/* The first array of tuple held beyond the run (its index), or -1. */
static Py_ssize_t first_held(PyObject *tuple) {
  for (Py_ssize_t i = 0; tuple && i < PyTuple_Size(tuple); i++)
    if (held_beyond(tuple, i)) return i;
  return -1;
}

/* A reference cycle made in the run (a closure, a stored frame) may be all that still holds a
 * lent array: collected once before a run is blamed. gc.collect also runs when gc is off. */
static void collect_cycles(void) {
  PyObject *gc = PyImport_ImportModule("gc");
  PyObject *done = gc ? PyObject_CallMethod(gc, "collect", NULL) : NULL;
  Py_XDECREF(done);
  Py_XDECREF(gc);
  PyErr_Clear();
}

static void expire_held(py_op *op, PyObject *tuple) {
  for (Py_ssize_t i = 0; tuple && i < PyTuple_Size(tuple); i++)
    if (held_beyond(tuple, i)) dlop_py_array_expire(PyTuple_GetItem(tuple, i), op->name);
}

static int lease_held(run_lease *lease) {
  return atomic_load_explicit(&lease->holders, memory_order_acquire) > 1;
}

/* After the call, the run takes its arrays back. Each dlop.Array still referenced from Python
 * is expired (every later use raises, naming the op); then the tuples go, and what still holds
 * a lent dlop_array from C (a DLPack export, a dlop view) shows in the lease. Either fails the
 * run, naming what was kept: a NumPy, DLPack or CAI consumer of the memory cannot be expired,
 * so the run that made it says so. A run that failed already keeps its own error. Drops the
 * tuples and the run's count on the lease. */
static int release_lent(py_op *op, int on_cpu, PyObject *inputs, PyObject *outputs,
                        run_lease *lease, int status, char *error, size_t error_size) {
  Py_ssize_t input = first_held(inputs), output = first_held(outputs);
  int collected = 0;
  if (input >= 0 || output >= 0) {
    collect_cycles();
    collected = 1;
    input = first_held(inputs);
    output = first_held(outputs);
  }
  expire_held(op, inputs);
  expire_held(op, outputs);
  Py_XDECREF(inputs);
  Py_XDECREF(outputs);
  if (input < 0 && output < 0 && lease_held(lease) && !collected) collect_cycles();
  int held_in_c = input < 0 && output < 0 && lease_held(lease);
  lease_drop(lease);
  if (status != DLOP_OK || (input < 0 && output < 0 && !held_in_c)) return status;
  char what[80] = "an array it was lent (through a DLPack export or a dlop view)";
  if (input >= 0 || output >= 0)
    snprintf(what, sizeof what, "%s[%zd]%s", input >= 0 ? "inputs" : "outputs",
             input >= 0 ? input : output, on_cpu ? " (or a view of it)" : "");
  if (error != NULL && error_size > 0)
    snprintf(error, error_size,
             "op '%s': %s kept %s after the run: dlop lends a run's arrays for that run only and "
             "takes their memory back when it ends, so copy what you keep inside the run%s; %s",
             op->name, on_cpu ? "perform" : "the launch", what,
             on_cpu ? " (inputs[i].copy())" : "",
             on_cpu ? "a NumPy view kept would read memory that is no longer its own"
                    : "the kept dlop.Array is expired (any use raises), and a DLPack or "
                      "__cuda_array_interface__ consumer of it would read memory that is no "
                      "longer its own");
  return DLOP_PLUGIN_ERROR;
}

/* The thunk's run: launch(inputs, outputs, stream) with the tensors as dlop.Arrays (inputs
 * read-only) and the CUstream as an int (None on the CPU). */
static int thunk_run(void *state, const dlop_run_args *args) {
  py_thunk *thunk = state;
  py_op *op = thunk->op;
  PyGILState_STATE gil = PyGILState_Ensure();
  int status = DLOP_OK;
  dlop_device device = args->outputs[0].device;
  dlop_stream *run_stream = NULL;
  PyObject *inputs = NULL, *outputs = NULL, *stream = NULL, *result = NULL;
  run_lease *lease = lease_new();
  if (lease == NULL) {
    PyErr_NoMemory();
  } else if (order_before(op->state, device, args->stream, &run_stream) == 0) {
    inputs = borrow_all(op->state, args->inputs, args->num_inputs, run_stream, 1, lease);
    outputs = inputs ? borrow_all(op->state, args->outputs, args->num_outputs, run_stream, 0, lease)
                     : NULL;
    stream = args->stream ? PyLong_FromVoidPtr(args->stream) : Py_NewRef(Py_None);
    result = outputs && stream
                 ? PyObject_CallFunctionObjArgs(thunk->run, inputs, outputs, stream, NULL)
                 : NULL;
    /* Ordered even after a failure: the memory goes back to the pool either way. */
    if (order_after(op->state, device, args->stream) < 0) Py_CLEAR(result);
  }
  /* Reported first, before the lent arrays are looked at: the exception is kept (for the
   * caller's __cause__) but its traceback's frames are cleared, so the arrays only they held
   * are not taken for arrays the run kept. */
  if (result == NULL) status = fail_from_python(op, "its thunk", args->error, args->error_size);
  Py_XDECREF(result);
  Py_XDECREF(stream);
  if (lease != NULL)
    status = release_lent(op, device.type == DLOP_DEVICE_CPU, inputs, outputs, lease, status,
                          args->error, args->error_size);
  dlop_stream_destroy(run_stream); /* the arrays that still hold it keep their own reference */
  PyGILState_Release(gil);
  return status;
}

static void thunk_destroy(void *state) {
  py_thunk *thunk = state;
  /* After the interpreter is gone (a function freed at exit) the reference is left alone. */
  if (Py_IsInitialized()) {
    PyGILState_STATE gil = PyGILState_Ensure();
    Py_XDECREF(thunk->run);
    PyGILState_Release(gil);
  }
  free(thunk);
}

/* make_thunk: callbacks.make_thunk(device, input types, output types) -> launch callable. */
static int trampoline_make_thunk(const dlop_thunk_args *args) {
  py_op *op = (py_op *)args->op->op_data;
  PyGILState_STATE gil = PyGILState_Ensure();
  int status = DLOP_OK;
  PyObject *inputs = type_list(args->inputs, args->num_inputs);
  PyObject *outputs = inputs ? type_list(args->outputs, args->num_outputs) : NULL;
  PyObject *device = outputs ? dlop_py_device_str(args->device) : NULL;
  PyObject *run = device ? PyObject_CallMethod(op->callbacks, "make_thunk", "OOO", device, inputs,
                                               outputs)
                         : NULL;
  if (run != NULL && !PyCallable_Check(run)) {
    bad_result("make_thunk", "a callable launch(inputs, outputs, stream)", run);
    Py_CLEAR(run);
  }
  py_thunk *thunk = run ? calloc(1, sizeof *thunk) : NULL;
  if (run != NULL && thunk == NULL) PyErr_NoMemory();
  if (thunk == NULL) {
    Py_XDECREF(run);
    status = fail_from_python(op, "make_thunk", args->error, args->error_size);
  } else {
    thunk->op = op;
    thunk->run = run;
    args->thunk->state = thunk;
    args->thunk->run = thunk_run;
    args->thunk->destroy = thunk_destroy;
    args->thunk->workspace_bytes = 0;
  }
  Py_XDECREF(device);
  Py_XDECREF(outputs);
  Py_XDECREF(inputs);
  PyGILState_Release(gil);
  return status;
}

static char *copy_text(const char *text) {
  size_t size = strlen(text) + 1;
  char *copy = malloc(size);
  if (copy != NULL) memcpy(copy, text, size);
  return copy;
}

static void free_op(py_op *op) {
  free(op->name);
  free(op->doc);
  free(op->plugin_name);
  free(op->origin);
  free(op);
}

/* register_python_op(name, origin, doc, num_outputs, cpu, cuda, callbacks): registers the op,
 * or raises what the registry said (a name taken, a bad name). cpu, cuda: whether it declares
 * that device (every dtype; make_node decides which it takes). */
static PyObject *py_register_python_op(PyObject *module, PyObject *args) {
  dlop_py_state *state = dlop_py_state_of_module(module);
  const char *name, *origin, *doc;
  int num_outputs, cpu, cuda;
  PyObject *callbacks;
  if (!PyArg_ParseTuple(args, "sssippO:register_python_op", &name, &origin, &doc, &num_outputs,
                        &cpu, &cuda, &callbacks))
    return NULL;
  if (num_outputs < 1 || num_outputs > 64)
    return dlop_py_raisef(state, DLOP_INVALID_ARGUMENT,
                          "op '%s': %d outputs: expected 1 to 64", name, num_outputs);
  py_op *op = calloc(1, sizeof *op);
  if (op == NULL) return PyErr_NoMemory();
  size_t plugin_size = strlen(name) + sizeof "python_";
  op->name = copy_text(name);
  op->doc = copy_text(doc);
  op->origin = copy_text(origin);
  op->plugin_name = malloc(plugin_size);
  if (!op->name || !op->doc || !op->origin || !op->plugin_name) {
    free_op(op);
    return PyErr_NoMemory();
  }
  snprintf(op->plugin_name, plugin_size, "python_%s", name);
  const uint32_t every_dtype = DLOP_DTYPES_ALL;
  op->state = state;
  op->desc = (dlop_op_desc){
      .struct_size = sizeof op->desc,
      /* The seed's gpu_contiguous: kernels written from Python index their arrays linearly. */
      .flags = DLOP_OP_NEEDS_CONTIGUOUS_INPUTS,
      .name = op->name,
      .doc = op->doc,
      .num_inputs = DLOP_VARIADIC,
      .num_outputs = num_outputs,
      .cpu_dtypes = cpu ? every_dtype : 0,
      .cuda_dtypes = cuda ? every_dtype : 0,
      .make_node = trampoline_make_node,
      .infer_shape = trampoline_infer_shape,
      .make_thunk = trampoline_make_thunk,
      .op_data = op,
  };
  op->ops[0] = &op->desc;
  op->plugin = (dlop_plugin_desc){.struct_size = sizeof op->plugin,
                                  .abi_version = DLOP_ABI_VERSION,
                                  .name = op->plugin_name,
                                  .version = "0",
                                  .doc = op->doc,
                                  .ops = op->ops,
                                  .num_ops = 1};
  dlop_inprocess_plugin source = {.struct_size = sizeof source, .origin = op->origin,
                                  .descriptor = &op->plugin};
  op->callbacks = Py_NewRef(callbacks);
  int status = dlop_register_plugin(&source, NULL);
  if (status != DLOP_OK) {
    Py_DECREF(op->callbacks);
    free_op(op);
    return dlop_py_raise(state, status, NULL);
  }
  Py_RETURN_NONE; /* op stays allocated: the registry points into it until the process ends */
}

PyMethodDef dlop_py_py_op_methods[] = {
    {"register_python_op", py_register_python_op, METH_VARARGS,
     "register_python_op(name, origin, doc, num_outputs, cpu, cuda, callbacks): an op whose stages "
     "call callbacks.make_node / infer_shape / make_thunk (dlop/_py_op.py)."},
    {NULL, NULL, 0, NULL},
};
