/* framework_arrays.c — kernel arguments of the exact types torch.Tensor and cupy.ndarray, read
 * from the libraries' own attributes for dlop.SourceModule's launches (cuda_kernel.c): the
 * pointer, the device the library states and the stream its work is on, meaning what that
 * library's __cuda_array_interface__ would say, without building the dict per call or asking the
 * driver which device owns the pointer. The classes are looked up in sys.modules once their
 * library has been imported (nothing is imported from here) and kept in the module state.
 * Every other type, and every case that needs a closer look (a subclass, a CPU, sparse, nested
 * or grad-requiring tensor, an active torch function mode, an attribute that raises), is left to
 * the generic path, so the errors are the generic path's own. One difference stays: a tensor of
 * a dtype torch's interface has no typestr for (bfloat16, float8) is taken here, by pointer, as
 * a DLPack producer's would be; the kernel's signature says what it reads. */
#include <string.h>

#include "module.h"

enum {
  NAME_LAYOUT,
  NAME_IS_CUDA,
  NAME_REQUIRES_GRAD,
  NAME_IS_NESTED,
  NAME_NUMEL,
  NAME_GET_DEVICE,
  NAME_DATA_PTR,
  NAME_SIZE,
  NAME_DATA,
  NAME_PTR,
  NAME_DEVICE_ID,
  NAME_EXPORT_VERSION,
  NAME_COUNT
};

static const char *const name_texts[NAME_COUNT] = {
    "layout", "is_cuda", "requires_grad", "is_nested", "numel", "get_device",
    "data_ptr", "size",  "data",          "ptr",      "device_id",
    "CUDA_ARRAY_INTERFACE_EXPORT_VERSION"};

struct dlop_py_frameworks {
  PyObject *names[NAME_COUNT]; /* interned attribute names of the hot path */
  /* PyTorch, once sys.modules holds a torch with all of these. */
  PyObject *torch_tensor;       /* torch.Tensor */
  PyObject *torch_strided;      /* torch.strided */
  PyObject *torch_mode_enabled; /* torch._C._is_torch_function_mode_enabled() */
  PyObject *torch_raw_stream;   /* torch._C._cuda_getCurrentRawStream(device) -> cudaStream_t */
  /* CuPy, likewise. */
  PyObject *cupy_ndarray;        /* cupy.ndarray */
  PyObject *cupy_util;           /* cupy._util, whose EXPORT_VERSION CuPy's CAI reads per call */
  PyObject *cupy_current_stream; /* cupy.cuda.get_current_stream() */
  void *cupy_default_stream;     /* what CuPy's CAI names for its null stream: 1, or 2 (PTDS) */
  /* A module found without what the fast path needs (a CPU-only torch build, another package
   * of that name): not looked at again while sys.modules holds that same module. */
  PyObject *torch_unusable, *cupy_unusable;
};

int dlop_py_frameworks_init(dlop_py_state *state) {
  dlop_py_frameworks *frameworks = PyMem_Calloc(1, sizeof *frameworks);
  if (frameworks == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  state->frameworks = frameworks;
  for (int n = 0; n < NAME_COUNT; n++) {
    frameworks->names[n] = PyUnicode_InternFromString(name_texts[n]);
    if (frameworks->names[n] == NULL) return -1;
  }
  return 0;
}

int dlop_py_frameworks_traverse(dlop_py_state *state, visitproc visit, void *arg) {
  dlop_py_frameworks *frameworks = state->frameworks;
  if (frameworks == NULL) return 0;
  Py_VISIT(frameworks->torch_tensor);
  Py_VISIT(frameworks->torch_strided);
  Py_VISIT(frameworks->torch_mode_enabled);
  Py_VISIT(frameworks->torch_raw_stream);
  Py_VISIT(frameworks->cupy_ndarray);
  Py_VISIT(frameworks->cupy_util);
  Py_VISIT(frameworks->cupy_current_stream);
  Py_VISIT(frameworks->torch_unusable);
  Py_VISIT(frameworks->cupy_unusable);
  return 0;
}

void dlop_py_frameworks_clear(dlop_py_state *state) {
  dlop_py_frameworks *frameworks = state->frameworks;
  if (frameworks == NULL) return;
  state->frameworks = NULL;
  for (int n = 0; n < NAME_COUNT; n++) Py_CLEAR(frameworks->names[n]);
  Py_CLEAR(frameworks->torch_tensor);
  Py_CLEAR(frameworks->torch_strided);
  Py_CLEAR(frameworks->torch_mode_enabled);
  Py_CLEAR(frameworks->torch_raw_stream);
  Py_CLEAR(frameworks->cupy_ndarray);
  Py_CLEAR(frameworks->cupy_util);
  Py_CLEAR(frameworks->cupy_current_stream);
  Py_CLEAR(frameworks->torch_unusable);
  Py_CLEAR(frameworks->cupy_unusable);
  PyMem_Free(frameworks);
}

/* A failure inside the fast path: the generic path does the same work again and raises what it
 * is (0). Only what must never be swallowed (KeyboardInterrupt, MemoryError) goes up (-1). */
static int leave_to_generic(void) {
  if (PyErr_ExceptionMatches(PyExc_Exception) && !PyErr_ExceptionMatches(PyExc_MemoryError)) {
    PyErr_Clear();
    return 0;
  }
  return -1;
}

/* ---- finding the libraries -------------------------------------------------------------- */

/* sys.modules[name] (borrowed), or NULL when it is not imported. */
static PyObject *imported(const char *name) {
  PyObject *modules = PyImport_GetModuleDict();
  PyObject *module = modules ? PyDict_GetItemString(modules, name) : NULL;
  return module == Py_None ? NULL : module;
}

/* getattr(object, "a.b.c") as a new reference, or NULL with nothing set. */
static PyObject *attribute_path(PyObject *object, const char *path) {
  PyObject *current = Py_NewRef(object);
  char part[64];
  while (current != NULL && *path) {
    size_t length = strcspn(path, ".");
    if (length >= sizeof part) {
      Py_CLEAR(current);
      break;
    }
    memcpy(part, path, length);
    part[length] = '\0';
    PyObject *next = PyObject_GetAttrString(current, part);
    Py_DECREF(current);
    current = next;
    path += length + (path[length] == '.');
  }
  if (current == NULL) PyErr_Clear();
  return current;
}

/* Whether module is still being imported (its __spec__._initializing): look again later. */
static int initializing(PyObject *module) {
  PyObject *flag = attribute_path(module, "__spec__._initializing");
  int result = flag != NULL && PyObject_IsTrue(flag) == 1;
  Py_XDECREF(flag);
  PyErr_Clear();
  return result;
}

/* A module that lacks what the fast path reads: remembered, unless it is mid-import. */
static void remember_unusable(PyObject *module, PyObject **slot) {
  if (initializing(module)) return;
  PyObject *old = *slot;
  *slot = Py_NewRef(module);
  Py_XDECREF(old);
}

static void find_torch(dlop_py_frameworks *frameworks) {
  PyObject *torch = imported("torch");
  if (torch == NULL || torch == frameworks->torch_unusable) return;
  PyObject *tensor = attribute_path(torch, "Tensor");
  PyObject *strided = attribute_path(torch, "strided");
  PyObject *mode = attribute_path(torch, "_C._is_torch_function_mode_enabled");
  PyObject *raw_stream = attribute_path(torch, "_C._cuda_getCurrentRawStream");
  if (tensor && PyType_Check(tensor) && strided && mode && raw_stream) {
    frameworks->torch_tensor = tensor;
    frameworks->torch_strided = strided;
    frameworks->torch_mode_enabled = mode;
    frameworks->torch_raw_stream = raw_stream;
    return;
  }
  Py_XDECREF(tensor);
  Py_XDECREF(strided);
  Py_XDECREF(mode);
  Py_XDECREF(raw_stream);
  remember_unusable(torch, &frameworks->torch_unusable);
}

static void find_cupy(dlop_py_frameworks *frameworks) {
  PyObject *cupy = imported("cupy");
  if (cupy == NULL || cupy == frameworks->cupy_unusable) return;
  PyObject *ndarray = attribute_path(cupy, "ndarray");
  PyObject *util = imported("cupy._util"); /* the module CuPy's CAI reads the version from */
  Py_XINCREF(util);
  PyObject *current_stream = attribute_path(cupy, "cuda.get_current_stream");
  PyObject *backend = imported("cupy_backends.cuda.stream");
  PyObject *default_stream = backend ? attribute_path(backend, "get_default_stream_ptr") : NULL;
  /* PTDS is fixed when CuPy is imported (CUPY_CUDA_PER_THREAD_DEFAULT_STREAM): read once. */
  PyObject *pointer = default_stream ? PyObject_CallNoArgs(default_stream) : NULL;
  void *null_stream = pointer && PyLong_Check(pointer) ? PyLong_AsVoidPtr(pointer) : NULL;
  PyErr_Clear();
  Py_XDECREF(default_stream);
  Py_XDECREF(pointer);
  if (ndarray && PyType_Check(ndarray) && util && current_stream && null_stream != NULL) {
    frameworks->cupy_ndarray = ndarray;
    frameworks->cupy_util = util;
    frameworks->cupy_current_stream = current_stream;
    frameworks->cupy_default_stream = null_stream;
    return;
  }
  Py_XDECREF(ndarray);
  Py_XDECREF(util);
  Py_XDECREF(current_stream);
  remember_unusable(cupy, &frameworks->cupy_unusable);
}

/* ---- small readers ------------------------------------------------------------------------ */

/* bool(object.name): 1 or 0, -1 with an exception. */
static int attribute_truth(PyObject *object, PyObject *name) {
  PyObject *value = PyObject_GetAttr(object, name);
  if (value == NULL) return -1;
  int truth = PyObject_IsTrue(value);
  Py_DECREF(value);
  return truth;
}

/* An int attribute (method 0) or the int a method returns (method 1); -1 with an exception. */
static int read_integer(PyObject *object, PyObject *name, int method, long long *out) {
  PyObject *value = method ? PyObject_CallMethodObjArgs(object, name, NULL)
                           : PyObject_GetAttr(object, name);
  if (value == NULL) return -1;
  *out = PyLong_Check(value) ? PyLong_AsLongLong(value) : -1;
  int failed = PyErr_Occurred() != NULL;
  if (!PyLong_Check(value) && !failed) {
    PyErr_SetString(PyExc_TypeError, "expected an int");
    failed = 1;
  }
  Py_DECREF(value);
  return failed ? -1 : 0;
}

/* A pointer-sized int attribute or method result; -1 with an exception. */
static int read_pointer(PyObject *object, PyObject *name, int method, void **out) {
  PyObject *value = method ? PyObject_CallMethodObjArgs(object, name, NULL)
                           : PyObject_GetAttr(object, name);
  if (value == NULL) return -1;
  if (!PyLong_Check(value)) {
    Py_DECREF(value);
    PyErr_SetString(PyExc_TypeError, "expected an int");
    return -1;
  }
  *out = PyLong_AsVoidPtr(value);
  Py_DECREF(value);
  return PyErr_Occurred() ? -1 : 0;
}

/* ---- PyTorch ------------------------------------------------------------------------------ */

/* torch's current stream on device_id, read once per launch. PyTorch's default stream is the
 * legacy default stream (handle 0), which dlop spells 1. */
static int torch_current_stream(dlop_py_frameworks *frameworks, int32_t device_id,
                                dlop_py_framework_call *call, void **stream) {
  if (!call->torch_stream_read) {
    PyObject *handle = PyObject_CallFunction(frameworks->torch_raw_stream, "i", (int)device_id);
    if (handle == NULL) return -1;
    void *pointer = PyLong_Check(handle) ? PyLong_AsVoidPtr(handle) : NULL;
    int bad = !PyLong_Check(handle);
    Py_DECREF(handle);
    if (bad) PyErr_SetString(PyExc_TypeError, "torch._C._cuda_getCurrentRawStream: not an int");
    if (PyErr_Occurred()) return -1;
    call->torch_stream = pointer ? pointer : (void *)(uintptr_t)1;
    call->torch_stream_read = 1;
  }
  *stream = call->torch_stream;
  return 0;
}

/* PyTorch's __cuda_array_interface__ (torch/_tensor.py) refuses non-CUDA and sparse tensors
 * and tensors that require grad, gives pointer 0 for an empty tensor and data_ptr() otherwise,
 * and says the memory is writable. It names no stream (version 2): PyTorch's rule is that a
 * tensor is ready on the current stream of its device (what its __dlpack__ orders a
 * consumer's stream after), so that is the producer stream. With a torch function mode active
 * the interface goes through the mode: the generic path asks it. */
static int read_torch(dlop_py_frameworks *frameworks, PyObject *value, int32_t device_id,
                      dlop_py_framework_call *call, dlop_py_framework_array *out) {
  PyObject *const *names = frameworks->names;
  if (call->torch_mode == 0) {
    PyObject *enabled = PyObject_CallNoArgs(frameworks->torch_mode_enabled);
    int truth = enabled ? PyObject_IsTrue(enabled) : -1;
    Py_XDECREF(enabled);
    if (truth < 0) return leave_to_generic();
    call->torch_mode = truth ? 1 : -1;
  }
  if (call->torch_mode > 0) return 0;
  PyObject *layout = PyObject_GetAttr(value, names[NAME_LAYOUT]);
  if (layout == NULL) return leave_to_generic();
  int strided = layout == frameworks->torch_strided;
  Py_DECREF(layout);
  if (!strided) return 0;
  int cuda = attribute_truth(value, names[NAME_IS_CUDA]);
  if (cuda != 1) return cuda < 0 ? leave_to_generic() : 0;
  int grad = attribute_truth(value, names[NAME_REQUIRES_GRAD]);
  if (grad != 0) return grad < 0 ? leave_to_generic() : 0;
  int nested = attribute_truth(value, names[NAME_IS_NESTED]);
  if (nested != 0) return nested < 0 ? leave_to_generic() : 0;
  long long count = 0, device = 0;
  if (read_integer(value, names[NAME_NUMEL], 1, &count) < 0) return leave_to_generic();
  out->data = NULL;
  out->device_id = device_id;
  out->producer = NULL;
  if (count == 0) return 1; /* pointer 0, as the interface says */
  if (read_integer(value, names[NAME_GET_DEVICE], 1, &device) < 0) return leave_to_generic();
  if (device < 0 || device > INT32_MAX) return 0;
  if (read_pointer(value, names[NAME_DATA_PTR], 1, &out->data) < 0) return leave_to_generic();
  out->device_id = (int32_t)device;
  /* another device: the caller refuses it; a NULL pointer is passed as NULL, like an empty one */
  if (out->data == NULL || device != device_id) return 1;
  if (torch_current_stream(frameworks, device_id, call, &out->producer) < 0)
    return leave_to_generic();
  return 1;
}

/* ---- CuPy --------------------------------------------------------------------------------- */

/* What CuPy's __cuda_array_interface__ (cupy/_core/core.pyx) names as the stream, read once
 * per launch: with cupy._util.CUDA_ARRAY_INTERFACE_EXPORT_VERSION 3 (CuPy's default) the
 * current stream of the current device, its null stream (0) named as the default stream; with 2
 * none. Any other version makes CuPy's interface raise: the generic path reports it. */
static int cupy_launch_state(dlop_py_frameworks *frameworks, dlop_py_framework_call *call) {
  long long version = 0;
  call->cupy_state = -1; /* until read: the generic path takes CuPy's arrays */
  call->cupy_stream = NULL;
  if (read_integer(frameworks->cupy_util, frameworks->names[NAME_EXPORT_VERSION], 0, &version) < 0)
    return leave_to_generic();
  if (version == 3) {
    PyObject *stream = PyObject_CallNoArgs(frameworks->cupy_current_stream);
    void *pointer = NULL;
    int failed = stream == NULL ||
                 read_pointer(stream, frameworks->names[NAME_PTR], 0, &pointer) < 0;
    Py_XDECREF(stream);
    if (failed) return leave_to_generic();
    call->cupy_stream = pointer ? pointer : frameworks->cupy_default_stream;
  } else if (version != 2) {
    return 0;
  }
  call->cupy_state = 1;
  return 0;
}

/* CuPy's interface gives pointer 0 for an empty array and data.ptr otherwise, and says the
 * memory is writable; data.device_id is the device CuPy allocated it on. */
static int read_cupy(dlop_py_frameworks *frameworks, PyObject *value, int32_t device_id,
                     dlop_py_framework_call *call, dlop_py_framework_array *out) {
  PyObject *const *names = frameworks->names;
  if (call->cupy_state == 0 && cupy_launch_state(frameworks, call) < 0) return -1;
  if (call->cupy_state < 0) return 0;
  long long size = 0, device = 0;
  if (read_integer(value, names[NAME_SIZE], 0, &size) < 0) return leave_to_generic();
  out->data = NULL;
  out->device_id = device_id;
  out->producer = NULL;
  if (size == 0) return 1; /* pointer 0, as the interface says */
  PyObject *memory = PyObject_GetAttr(value, names[NAME_DATA]);
  if (memory == NULL) return leave_to_generic();
  int failed = read_pointer(memory, names[NAME_PTR], 0, &out->data) < 0 ||
               read_integer(memory, names[NAME_DEVICE_ID], 0, &device) < 0;
  Py_DECREF(memory);
  if (failed) return leave_to_generic();
  if (device < 0 || device > INT32_MAX) return 0;
  out->device_id = (int32_t)device;
  out->producer = call->cupy_stream;
  return 1;
}

/* ---- the entry points --------------------------------------------------------------------- */

int dlop_py_framework_array_read(dlop_py_state *state, PyObject *value, int32_t device_id,
                                 dlop_py_framework_call *call, dlop_py_framework_array *out) {
  dlop_py_frameworks *frameworks = state->frameworks;
  if (frameworks == NULL) return 0;
  PyObject *type = (PyObject *)Py_TYPE(value);
  if (type == frameworks->torch_tensor) return read_torch(frameworks, value, device_id, call, out);
  if (type == frameworks->cupy_ndarray) return read_cupy(frameworks, value, device_id, call, out);
  /* Not a class found so far: perhaps one of a library imported since. */
  if (frameworks->torch_tensor == NULL) {
    find_torch(frameworks);
    if (type == frameworks->torch_tensor)
      return read_torch(frameworks, value, device_id, call, out);
  }
  if (frameworks->cupy_ndarray == NULL) {
    find_cupy(frameworks);
    if (type == frameworks->cupy_ndarray)
      return read_cupy(frameworks, value, device_id, call, out);
  }
  return 0;
}

int dlop_py_framework_torch_stream(dlop_py_state *state, PyObject *value, int32_t device_id,
                                   dlop_py_framework_call *call, void **stream) {
  dlop_py_frameworks *frameworks = state->frameworks;
  if (frameworks == NULL) return 0;
  if (frameworks->torch_tensor == NULL) find_torch(frameworks);
  if (frameworks->torch_tensor == NULL ||
      !PyType_IsSubtype(Py_TYPE(value), (PyTypeObject *)frameworks->torch_tensor))
    return 0;
  return torch_current_stream(frameworks, device_id, call, stream) < 0 ? -1 : 1;
}
