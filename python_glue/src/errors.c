/* errors.c — dlop statuses as Python exceptions: DlopError (carrying .status, the status name)
 * and subclasses that also derive from the matching builtin, so `except TypeError` still works. */
#include <stdarg.h>
#include <stdio.h>

#include "module.h"

#include <string.h>

typedef struct error_spec {
  const char *name;   /* attribute name in dlop._C */
  const char *doc;
} error_spec;

static const error_spec specs[DLOP_PY_ERROR_COUNT] = {
    {"DlopError", "Base of every dlop error; .status is the dlop status name."},
    {"DlopTypeError", "A dtype, rank, arity or argument type is not what was declared."},
    {"ShapeError", "Shapes are incompatible with the declared or inferred ones."},
    {"InvalidArgumentError", "An argument value is invalid."},
    {"NotFoundError", "No op, plugin or parameter has that name."},
    {"NoDeviceError", "The device cannot be used here (no driver, no GPU, bad ordinal)."},
    {"DeviceMismatchError", "An array is on another device than the function's."},
    {"UnsupportedError", "The op or conversion does not support this dtype or device."},
    {"PluginError", "A plugin could not be loaded, or handed back invalid metadata."},
    {"KernelError", "A kernel, the CUDA driver or cuBLAS reported an error while running."},
    {"OutOfMemoryError", "Host or device memory ran out."},
};

static int error_index(int status) {
  switch (status) {
    case DLOP_TYPE_ERROR: return DLOP_PY_TYPE_ERROR;
    case DLOP_SHAPE_ERROR: return DLOP_PY_SHAPE_ERROR;
    case DLOP_INVALID_ARGUMENT: return DLOP_PY_ARGUMENT_ERROR;
    case DLOP_NOT_FOUND: return DLOP_PY_NOT_FOUND_ERROR;
    case DLOP_NO_DEVICE: return DLOP_PY_NO_DEVICE_ERROR;
    case DLOP_DEVICE_MISMATCH: return DLOP_PY_DEVICE_MISMATCH;
    case DLOP_UNSUPPORTED: return DLOP_PY_UNSUPPORTED;
    case DLOP_LOAD_ERROR:
    case DLOP_ABI_MISMATCH:
    case DLOP_INVALID_PLUGIN:
    case DLOP_DUPLICATE: return DLOP_PY_PLUGIN_ERROR;
    case DLOP_CUDA_ERROR:
    case DLOP_CUBLAS_ERROR:
    case DLOP_PLUGIN_ERROR: return DLOP_PY_KERNEL_ERROR;
    case DLOP_OUT_OF_MEMORY: return DLOP_PY_MEMORY_ERROR;
    default: return DLOP_PY_ERROR;
  }
}

int dlop_py_add_errors(PyObject *module, dlop_py_state *state) {
  PyObject *builtins[DLOP_PY_ERROR_COUNT] = {
      NULL,          PyExc_TypeError,    PyExc_ValueError,   PyExc_ValueError,
      PyExc_LookupError, PyExc_RuntimeError, PyExc_RuntimeError, PyExc_RuntimeError,
      PyExc_RuntimeError, PyExc_RuntimeError, PyExc_MemoryError};
  for (int i = 0; i < DLOP_PY_ERROR_COUNT; i++) {
    char qualified[96];
    snprintf(qualified, sizeof qualified, "dlop.%s", specs[i].name);
    PyObject *bases = i == DLOP_PY_ERROR ? Py_NewRef(PyExc_Exception)
                                         : PyTuple_Pack(2, state->errors[DLOP_PY_ERROR], builtins[i]);
    if (bases == NULL) return -1;
    state->errors[i] = PyErr_NewExceptionWithDoc(qualified, specs[i].doc, bases, NULL);
    Py_DECREF(bases);
    if (state->errors[i] == NULL) return -1;
    if (PyModule_AddObjectRef(module, specs[i].name, state->errors[i]) < 0) return -1;
  }
  return 0;
}

/* A Python op's stage raised an exception that this message reports under its token
 * ("[pyexc N] ", py_op.c): the message without the token, and that exception (a new reference,
 * taken out of the table) in *cause; message itself (a new reference) when there is none. */
static PyObject *take_stage_exception(dlop_py_state *state, PyObject *message, PyObject **cause) {
  *cause = NULL;
  Py_ssize_t length = PyUnicode_GetLength(message);
  Py_ssize_t at = length > 0 ? PyUnicode_Find(message, state->str_stage_token, 0, length, 1) : -1;
  if (at < 0) {
    PyErr_Clear();
    return Py_NewRef(message);
  }
  Py_ssize_t start = at + PyUnicode_GetLength(state->str_stage_token), end = start;
  unsigned long long token = 0;
  for (; end < length; end++) {
    Py_UCS4 c = PyUnicode_ReadChar(message, end);
    if (c < '0' || c > '9') break;
    token = token * 10 + (c - '0');
  }
  if (end == start || end + 1 >= length || PyUnicode_ReadChar(message, end) != ']' ||
      PyUnicode_ReadChar(message, end + 1) != ' ')
    return Py_NewRef(message);
  for (int i = 0; i < DLOP_PY_STAGE_EXCEPTIONS; i++)
    if (state->stage_exceptions[i].token == token) {
      *cause = state->stage_exceptions[i].exception; /* the table's reference, handed over */
      state->stage_exceptions[i].exception = NULL;
      state->stage_exceptions[i].token = 0;
    }
  PyObject *head = PyUnicode_Substring(message, 0, at);
  PyObject *tail = head ? PyUnicode_Substring(message, end + 2, length) : NULL;
  PyObject *stripped = tail ? PyUnicode_Concat(head, tail) : NULL;
  Py_XDECREF(head);
  Py_XDECREF(tail);
  if (stripped == NULL) {
    PyErr_Clear();
    return Py_NewRef(message);
  }
  return stripped;
}

/* Instantiate the class errors[index] with the message, set .status, and raise it. */
static void raise_message(dlop_py_state *state, int index, int status, PyObject *reported) {
  PyObject *type = state->errors[index], *cause = NULL;
  PyObject *message = take_stage_exception(state, reported, &cause);
  /* KeyboardInterrupt, SystemExit in a stage: raised as they are, not as a dlop error. */
  if (cause != NULL && !PyErr_GivenExceptionMatches(cause, PyExc_Exception)) {
    Py_DECREF(message);
    PyErr_SetObject((PyObject *)Py_TYPE(cause), cause);
    Py_DECREF(cause);
    return;
  }
  PyObject *exception = PyObject_CallFunctionObjArgs(type, message, NULL);
  Py_DECREF(message);
  if (exception == NULL) {
    Py_XDECREF(cause);
    return;
  }
  PyObject *name = PyUnicode_FromString(dlop_status_name(status));
  if (name == NULL || PyObject_SetAttrString(exception, "status", name) < 0) {
    Py_XDECREF(name);
    Py_XDECREF(cause);
    Py_DECREF(exception);
    return;
  }
  Py_DECREF(name);
  if (cause != NULL) PyException_SetCause(exception, cause); /* steals the reference */
  PyErr_SetObject(type, exception);
  Py_DECREF(exception);
}

/* The last error's message (or the status's text) as an exception of class errors[index]. */
static PyObject *raise_last_error(dlop_py_state *state, int index, int status,
                                  const char *context) {
  const char *detail = dlop_last_error();
  if (detail == NULL || detail[0] == '\0') detail = dlop_strerror(status);
  /* A message can quote bytes from a file (a corrupt plugin's strings): never fail to decode. */
  PyObject *message = context ? PyUnicode_FromFormat("%s: %s", context, detail)
                              : PyUnicode_DecodeUTF8(detail, (Py_ssize_t)strlen(detail),
                                                     "backslashreplace");
  if (message == NULL) return NULL;
  raise_message(state, index, status, message);
  Py_DECREF(message);
  return NULL;
}

PyObject *dlop_py_raise(dlop_py_state *state, int status, const char *context) {
  return raise_last_error(state, error_index(status), status, context);
}

PyObject *dlop_py_raise_load_error(dlop_py_state *state, int status) {
  return raise_last_error(state, DLOP_PY_PLUGIN_ERROR, status, NULL);
}

PyObject *dlop_py_raisef(dlop_py_state *state, int status, const char *format, ...) {
  va_list args;
  va_start(args, format);
  PyObject *message = PyUnicode_FromFormatV(format, args);
  va_end(args);
  if (message == NULL) return NULL;
  raise_message(state, error_index(status), status, message);
  Py_DECREF(message);
  return NULL;
}
