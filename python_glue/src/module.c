/* module.c — dlop._C: multi-phase initialization (PEP 489), the module state every part reads
 * through its type or module, and the extension's one stream per CUDA device. */
#include <stdio.h>
#include <string.h>

#include "module.h"

static struct PyModuleDef dlop_py_module_def;

dlop_py_state *dlop_py_state_of_module(PyObject *module) {
  return (dlop_py_state *)PyModule_GetState(module);
}

dlop_py_state *dlop_py_state_of_type(PyTypeObject *type) {
  return (dlop_py_state *)PyType_GetModuleState(type);
}

int dlop_py_stream(dlop_py_state *state, dlop_device device, dlop_stream **stream) {
  *stream = NULL;
  if (device.type != DLOP_DEVICE_CUDA) return 0;
  if (device.id < 0 || device.id >= DLOP_PY_MAX_DEVICES) {
    dlop_py_raisef(state, DLOP_NO_DEVICE, "cuda:%d: the dlop extension handles CUDA devices 0..%d",
                   (int)device.id, DLOP_PY_MAX_DEVICES - 1);
    return -1;
  }
  /* Created under the GIL, so two threads never both create one. */
  if (state->streams[device.id] == NULL) {
    int status = dlop_stream_create(device, &state->streams[device.id]);
    if (status != DLOP_OK) {
      dlop_py_raise(state, status, NULL);
      return -1;
    }
  }
  *stream = state->streams[device.id];
  return 0;
}

PyObject *dlop_py_numpy(dlop_py_state *state) {
  if (state->numpy == NULL) state->numpy = PyImport_ImportModule("numpy");
  return state->numpy;
}

static PyObject *py_version(PyObject *module, PyObject *unused) {
  return PyUnicode_FromString(dlop_version_string());
}

static PyObject *py_cuda_device_count(PyObject *module, PyObject *unused) {
  int count = 0;
  int status = dlop_cuda_device_count(&count);
  if (status != DLOP_OK) return dlop_py_raise(dlop_py_state_of_module(module), status, NULL);
  return PyLong_FromLong(count);
}

/* device_check("cuda:0") -> None, or NoDeviceError saying what is missing. */
static PyObject *py_device_check(PyObject *module, PyObject *text) {
  dlop_py_state *state = dlop_py_state_of_module(module);
  dlop_device device;
  if (dlop_py_parse_device(state, text, &device) < 0) return NULL;
  int status = dlop_device_check(device);
  if (status != DLOP_OK) return dlop_py_raise(state, status, NULL);
  Py_RETURN_NONE;
}

/* raise_status(status[, message]): dlop's exception for a status, with message or else this
 * thread's last error, as the extension raises it everywhere (for code that called libdlop
 * outside the extension: the Numba dispatch through ctypes, dlop.torch's C++ kernels). */
static PyObject *py_raise_status(PyObject *module, PyObject *args) {
  dlop_py_state *state = dlop_py_state_of_module(module);
  long status;
  const char *message = NULL;
  if (!PyArg_ParseTuple(args, "l|z:raise_status", &status, &message)) return NULL;
  if (status >= 0 || status < INT32_MIN)
    return PyErr_Format(PyExc_ValueError, "raise_status needs a dlop error status (below 0), "
                        "not %ld", status);
  if (message != NULL) return dlop_py_raisef(state, (int)status, "%s", message);
  return dlop_py_raise(state, (int)status, NULL);
}

/* synchronize(device): wait for the extension's work on a device. */
static PyObject *py_synchronize(PyObject *module, PyObject *text) {
  dlop_py_state *state = dlop_py_state_of_module(module);
  dlop_device device;
  if (dlop_py_parse_device(state, text, &device) < 0) return NULL;
  dlop_py_deferred_poll();
  if (device.type != DLOP_DEVICE_CUDA) Py_RETURN_NONE;
  dlop_stream *stream;
  if (dlop_py_stream(state, device, &stream) < 0) return NULL;
  int status;
  Py_BEGIN_ALLOW_THREADS
  status = dlop_stream_synchronize(stream);
  Py_END_ALLOW_THREADS
  if (status != DLOP_OK) return dlop_py_raise(state, status, NULL);
  /* Everything the device's queued foreign memory waited for is done: give it all back. */
  status = dlop_py_deferred_drain(device.id);
  if (status != DLOP_OK)
    return dlop_py_raise(state, status, "giving foreign CUDA memory back to its producer");
  Py_RETURN_NONE;
}

/* pending_foreign_releases() -> int: foreign CUDA inputs (DLPack, CAI) whose memory waits for
 * dlop's work before it goes back to its producer. */
static PyObject *py_pending_foreign_releases(PyObject *module, PyObject *unused) {
  return PyLong_FromSize_t(dlop_py_deferred_count());
}

/* Registered with atexit by the package: give every queued foreign input back while the
 * producers' libraries are still alive, and wait at once for any released later. */
static PyObject *py_release_foreign_at_exit(PyObject *module, PyObject *unused) {
  int status = dlop_py_deferred_close();
  if (status != DLOP_OK)
    return dlop_py_raise(dlop_py_state_of_module(module), status,
                         "giving foreign CUDA memory back at exit");
  Py_RETURN_NONE;
}

/* stream_handle(device) -> int: the CUstream the extension uses on a device (0 on the CPU). */
static PyObject *py_stream_handle(PyObject *module, PyObject *text) {
  dlop_py_state *state = dlop_py_state_of_module(module);
  dlop_device device;
  if (dlop_py_parse_device(state, text, &device) < 0) return NULL;
  dlop_stream *stream;
  if (dlop_py_stream(state, device, &stream) < 0) return NULL;
  return PyLong_FromVoidPtr(stream ? dlop_stream_handle(stream) : NULL);
}

/* Set key of dict to value, dropping the reference to value; -1 on failure. */
static int set_item(PyObject *dict, const char *key, PyObject *value) {
  if (value == NULL) return -1;
  int result = PyDict_SetItemString(dict, key, value);
  Py_DECREF(value);
  return result;
}

/* jit_stats() -> dict: run-time compilation's counters (dlop_jit_stats_get) and cache_dir. */
static PyObject *py_jit_stats(PyObject *module, PyObject *unused) {
  dlop_py_state *state = dlop_py_state_of_module(module);
  dlop_jit_stats stats;
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  int status = dlop_jit_stats_get(&stats);
  if (status != DLOP_OK) return dlop_py_raise(state, status, NULL);
  char directory[4096];
  status = dlop_jit_cache_directory(directory, sizeof directory);
  if (status != DLOP_OK) return dlop_py_raise(state, status, NULL);
  PyObject *result = PyDict_New();
  if (result == NULL) return NULL;
  if (set_item(result, "compiles", PyLong_FromUnsignedLongLong(stats.compiles)) < 0 ||
      set_item(result, "compile_errors", PyLong_FromUnsignedLongLong(stats.compile_errors)) < 0 ||
      set_item(result, "memory_hits", PyLong_FromUnsignedLongLong(stats.memory_hits)) < 0 ||
      set_item(result, "disk_hits", PyLong_FromUnsignedLongLong(stats.disk_hits)) < 0 ||
      set_item(result, "corrupt_entries", PyLong_FromUnsignedLongLong(stats.corrupt_entries)) < 0 ||
      set_item(result, "compile_seconds", PyFloat_FromDouble(stats.compile_seconds)) < 0 ||
      set_item(result, "disk_hit_seconds", PyFloat_FromDouble(stats.disk_hit_seconds)) < 0 ||
      set_item(result, "cache_dir",
               directory[0] ? PyUnicode_DecodeFSDefault(directory) : Py_NewRef(Py_None)) < 0) {
    Py_DECREF(result);
    return NULL;
  }
  return result;
}

static PyMethodDef module_methods[] = {
    {"version", py_version, METH_NOARGS, "The libdlop version string."},
    {"cuda_device_count", py_cuda_device_count, METH_NOARGS,
     "Number of CUDA devices (0 without a driver or GPU)."},
    {"device_check", py_device_check, METH_O,
     "Raise NoDeviceError (saying what is missing) unless the device can be used now."},
    {"raise_status", py_raise_status, METH_VARARGS,
     "raise_status(status[, message]): raise dlop's exception for a failed libdlop call's "
     "status, with message or else this thread's last error."},
    {"synchronize", py_synchronize, METH_O,
     "Wait until the work dlop enqueued on a device has finished."},
    {"stream_handle", py_stream_handle, METH_O,
     "The CUstream (as an int) dlop enqueues its work on for a device; 0 for the CPU."},
    {"pending_foreign_releases", py_pending_foreign_releases, METH_NOARGS,
     "Foreign CUDA inputs (DLPack, __cuda_array_interface__) not yet given back to their "
     "producers because dlop's work on them may be pending (a debug query)."},
    {"release_foreign_at_exit", py_release_foreign_at_exit, METH_NOARGS,
     "Wait for and give back every queued foreign input, and stop queuing (run at exit)."},
    {"check_shape", dlop_py_check_shape, METH_VARARGS,
     "check_shape(what, dtype, shape): raise ShapeError, naming what, unless shape (ints and "
     "None) is a static shape a dlop array of dtype can have."},
    {"jit_stats", py_jit_stats, METH_NOARGS,
     "Run-time compilation's counters for this process and its disk cache directory (see "
     "dlop.jit_stats)."},
    {"asarray", (PyCFunction)(void (*)(void))dlop_py_asarray, METH_FASTCALL | METH_KEYWORDS,
     "asarray(obj, device=None, dtype=None) -> Array (see dlop.asarray)."},
    {NULL, NULL, 0, NULL}};

static int module_exec(PyObject *module) {
  dlop_py_state *state = dlop_py_state_of_module(module);
  /* Before anything else touches libdlop: one of another version is refused, never used. */
  if (dlop_py_check_libdlop(module) < 0) return -1;
  if (dlop_py_add_errors(module, state) < 0) return -1;
  if (dlop_py_add_array_type(module, state) < 0) return -1;
  if (dlop_py_add_graph_type(module, state) < 0) return -1;
  if (dlop_py_add_function_type(module, state) < 0) return -1;
  if (dlop_py_add_op_call_type(module, state) < 0) return -1;
  if (dlop_py_add_eager_calls_type(module) < 0) return -1;
  if (dlop_py_add_cuda_kernel_type(module, state) < 0) return -1;
  if (PyModule_AddFunctions(module, dlop_py_registry_methods) < 0) return -1;
  if (PyModule_AddFunctions(module, dlop_py_source_ops_methods) < 0) return -1;
  if (PyModule_AddFunctions(module, dlop_py_py_op_methods) < 0) return -1;
  if (PyModule_AddFunctions(module, dlop_py_installation_methods) < 0) return -1;
  state->str_dlpack = PyUnicode_InternFromString("__dlpack__");
  state->str_dlpack_device = PyUnicode_InternFromString("__dlpack_device__");
  state->str_cai = PyUnicode_InternFromString("__cuda_array_interface__");
  state->str_stream = PyUnicode_InternFromString("stream");
  state->str_max_version = PyUnicode_InternFromString("max_version");
  state->str_stage_token = PyUnicode_InternFromString("[pyexc ");
  if (!state->str_dlpack || !state->str_dlpack_device || !state->str_cai || !state->str_stream ||
      !state->str_max_version || !state->str_stage_token)
    return -1;
  if (dlop_py_frameworks_init(state) < 0) return -1;
  if (PyModule_AddIntConstant(module, "MAX_NDIM", DLOP_MAX_NDIM) < 0) return -1;
  /* The bundled plugins and DLOP_PLUGIN_PATH load on import; failures are kept for
   * load_errors() rather than raised, as for the `dlop` command. */
  int status = dlop_load_default_plugins();
  if (status != DLOP_OK) {
    dlop_py_raise(state, status, "loading the default plugins");
    return -1;
  }
  return 0;
}

static int module_traverse(PyObject *module, visitproc visit, void *arg) {
  dlop_py_state *state = dlop_py_state_of_module(module);
  if (state == NULL) return 0;
  for (int i = 0; i < DLOP_PY_ERROR_COUNT; i++) Py_VISIT(state->errors[i]);
  Py_VISIT(state->array_type);
  Py_VISIT(state->graph_type);
  Py_VISIT(state->function_type);
  Py_VISIT(state->op_call_type);
  Py_VISIT(state->cuda_kernel_type);
  Py_VISIT(state->numpy);
  for (int i = 0; i < DLOP_PY_STAGE_EXCEPTIONS; i++) Py_VISIT(state->stage_exceptions[i].exception);
  return dlop_py_frameworks_traverse(state, visit, arg);
}

static int module_clear(PyObject *module) {
  dlop_py_state *state = dlop_py_state_of_module(module);
  if (state == NULL) return 0;
  for (int i = 0; i < DLOP_PY_ERROR_COUNT; i++) Py_CLEAR(state->errors[i]);
  Py_CLEAR(state->array_type);
  Py_CLEAR(state->graph_type);
  Py_CLEAR(state->function_type);
  Py_CLEAR(state->op_call_type);
  Py_CLEAR(state->cuda_kernel_type);
  Py_CLEAR(state->numpy);
  for (int i = 0; i < DLOP_PY_STAGE_EXCEPTIONS; i++) Py_CLEAR(state->stage_exceptions[i].exception);
  Py_CLEAR(state->str_dlpack);
  Py_CLEAR(state->str_dlpack_device);
  Py_CLEAR(state->str_cai);
  Py_CLEAR(state->str_stream);
  Py_CLEAR(state->str_max_version);
  Py_CLEAR(state->str_stage_token);
  dlop_py_frameworks_clear(state);
  return 0;
}

static void module_free(void *module) {
  /* Foreign inputs still queued go back now (the package's atexit hook normally did this
   * already); releases after this wait at once. */
  if (dlop_py_deferred_close() != DLOP_OK)
    fprintf(stderr, "dlop: giving foreign CUDA memory back at exit: %s\n", dlop_last_error());
  /* The streams are deliberately not destroyed: arrays wrapping DLPack / CAI memory keep a
   * plain pointer to them (convert.c's release_foreign records markers on it or synchronizes
   * it) and may outlive the module, e.g. inside a PyTorch tensor at interpreter exit. One
   * stream per used device per module instance lives until the process ends. */
  module_clear((PyObject *)module);
}

static PyModuleDef_Slot module_slots[] = {{Py_mod_exec, (void *)module_exec}, {0, NULL}};

static struct PyModuleDef dlop_py_module_def = {
    PyModuleDef_HEAD_INIT,
    "dlop._C",
    "The C core of dlop: arrays, graphs, compiled functions and the plugin registry.",
    sizeof(dlop_py_state),
    module_methods,
    module_slots,
    module_traverse,
    module_clear,
    module_free,
};

PyMODINIT_FUNC PyInit__C(void) { return PyModuleDef_Init(&dlop_py_module_def); }
