/* dlpack.c — exporting a dlop.Array without copying: __dlpack__ (a versioned DLPack 1.x capsule
 * when the consumer asks with max_version >= (1, 0), the legacy one otherwise; the consumer's
 * stream waits for pending writes), __dlpack_device__ and __cuda_array_interface__ version 3. */
#include <stdlib.h>
#include <string.h>

#include "dlpack_abi.h"
#include "module.h"

/* One allocation per export: the managed tensor (either kind), the dlop_array reference that
 * keeps the memory alive, and the shape and strides the DLTensor points to. */
typedef struct export_block {
  union {
    dlop_dl_managed_tensor legacy;
    dlop_dl_managed_tensor_versioned versioned;
  } managed;
  dlop_array *array;
  int64_t shape[DLOP_MAX_NDIM];
  int64_t strides[DLOP_MAX_NDIM];
} export_block;

/* Deleters run wherever the consumer drops the tensor, perhaps without the GIL: plain C only
 * (a wrapped NumPy buffer's own deleter takes the GIL itself). */
static void delete_legacy(dlop_dl_managed_tensor *managed) {
  export_block *block = managed->manager_ctx;
  dlop_array_release(block->array);
  free(block);
}

static void delete_versioned(dlop_dl_managed_tensor_versioned *managed) {
  export_block *block = managed->manager_ctx;
  dlop_array_release(block->array);
  free(block);
}

/* A capsule nobody consumed still owns its tensor. */
static void capsule_destructor_legacy(PyObject *capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor")) return; /* renamed: consumed */
  dlop_dl_managed_tensor *managed = PyCapsule_GetPointer(capsule, "dltensor");
  if (managed && managed->deleter) managed->deleter(managed);
}

static void capsule_destructor_versioned(PyObject *capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor_versioned")) return;
  dlop_dl_managed_tensor_versioned *managed = PyCapsule_GetPointer(capsule, "dltensor_versioned");
  if (managed && managed->deleter) managed->deleter(managed);
}

static int keyword_arguments(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                             const char *const *names, int count, PyObject **values,
                             const char *function) {
  if (nargs > count) {
    PyErr_Format(PyExc_TypeError, "%s() takes at most %d arguments (%zd given)", function, count,
                 nargs);
    return -1;
  }
  for (Py_ssize_t i = 0; i < nargs; i++) values[i] = args[i];
  Py_ssize_t nkw = kwnames ? PyTuple_Size(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; k++) {
    const char *name = PyUnicode_AsUTF8AndSize(PyTuple_GetItem(kwnames, k), NULL);
    if (name == NULL) return -1;
    int i;
    for (i = 0; i < count; i++)
      if (strcmp(name, names[i]) == 0) break;
    if (i == count) {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%s'", function, name);
      return -1;
    }
    values[i] = args[nargs + k];
  }
  return 0;
}

PyObject *dlop_py_array_dlpack(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
  static const char *const names[4] = {"stream", "max_version", "dl_device", "copy"};
  PyObject *values[4] = {Py_None, Py_None, Py_None, Py_None};
  if (keyword_arguments(args, nargs, kwnames, names, 4, values, "__dlpack__") < 0) return NULL;
  dlop_py_state *state = dlop_py_state_of_type(Py_TYPE(self));
  dlop_array *array = dlop_py_array_get(self);
  if (array == NULL) return NULL;
  dlop_device device = dlop_array_device(array);
  PyObject *stream = values[0], *max_version = values[1], *dl_device = values[2], *copy = values[3];

  int versioned = 0;
  if (max_version != Py_None) {
    long major = 0, minor = 0;
    if (!PyTuple_Check(max_version) || !PyArg_ParseTuple(max_version, "ll", &major, &minor)) {
      if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_SystemError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "__dlpack__: max_version is %R; expected a (major, minor) tuple of ints",
                     max_version);
      }
      return NULL;
    }
    versioned = major >= 1;
  }
  int copied = 0;
  dlop_array *exported = array;
  dlop_array_retain(exported);
  if (dl_device != Py_None) {
    int type = 0, id = 0;
    int pair = dlop_py_device_pair(dl_device, &type, &id);
    if (pair <= 0) {
      dlop_array_release(exported);
      if (pair == 0)
        PyErr_Format(PyExc_TypeError,
                     "__dlpack__: dl_device is %R; expected a (device_type, device_id) tuple",
                     dl_device);
      return NULL;
    }
    if (type != device.type || id != device.id) {
      if (copy == Py_False || (type != DLOP_DEVICE_CPU && type != DLOP_DEVICE_CUDA)) {
        dlop_array_release(exported);
        PyErr_Format(PyExc_BufferError,
                     "__dlpack__: the array is on device (%d, %d) and dl_device=(%d, %d) was "
                     "asked %s", (int)device.type, (int)device.id, type, id,
                     copy == Py_False ? "with copy=False" : "(dlop copies only to CPU or CUDA)");
        return NULL;
      }
      device.type = type;
      device.id = id;
      copied = 1;
    }
  }
  if (copy == Py_True) copied = 1;
  if (copied) {
    dlop_array *made = NULL;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = dlop_array_copy_to(exported, device, &made);
    if (status == DLOP_OK) status = dlop_array_synchronize(made);
    Py_END_ALLOW_THREADS
    dlop_array_release(exported);
    if (status != DLOP_OK) return dlop_py_raise(state, status, "__dlpack__ copy");
    exported = made;
  }

  /* Stream semantics (DLPack / array API): None = the legacy default stream, -1 = no
   * synchronization, another int = a CUstream the consumer will use; 0 is ambiguous. */
  if (device.type == DLOP_DEVICE_CUDA && !copied) {
    long long handle = 1;
    if (stream != Py_None) {
      handle = PyLong_AsLongLong(stream);
      if (handle == -1 && PyErr_Occurred()) {
        dlop_array_release(exported);
        return NULL;
      }
    }
    if (handle == 0) {
      dlop_array_release(exported);
      PyErr_SetString(PyExc_ValueError,
                      "__dlpack__: stream=0 is ambiguous for CUDA; pass 1 (legacy default "
                      "stream), 2 (per-thread default stream), a CUstream, or -1 (no sync)");
      return NULL;
    }
    if (handle != -1) {
      int status = dlop_array_wait_on_stream(exported, (void *)(intptr_t)handle);
      if (status != DLOP_OK) {
        dlop_array_release(exported);
        return dlop_py_raise(state, status, "__dlpack__ stream handshake");
      }
    }
  } else if (device.type == DLOP_DEVICE_CPU && stream != Py_None && !copied) {
    /* The array API: CPU arrays have no stream; only None (and -1, "no sync") are accepted. */
    long long handle = PyLong_Check(stream) ? PyLong_AsLongLong(stream) : 0;
    if (handle == -1 && PyErr_Occurred()) {
      dlop_array_release(exported);
      return NULL;
    }
    if (handle != -1) {
      dlop_array_release(exported);
      PyErr_Format(PyExc_BufferError, "__dlpack__: stream=%R was given for a CPU array; "
                   "expected None", stream);
      return NULL;
    }
  }

  /* Read-only memory goes out read-only: the versioned flag, and no legacy capsule at all
   * (legacy DLPack cannot say read-only; NumPy refuses the same way). A copy is writable. */
  int readonly = ((dlop_py_array *)self)->readonly && !copied;
  if (readonly && !versioned) {
    dlop_array_release(exported);
    PyErr_SetString(PyExc_BufferError,
                    "__dlpack__: this dlop.Array borrows read-only memory, which a legacy DLPack "
                    "capsule cannot mark; ask with max_version=(1, 0) or higher, or copy=True");
    return NULL;
  }

  export_block *block = calloc(1, sizeof *block);
  if (block == NULL) {
    dlop_array_release(exported);
    return PyErr_NoMemory();
  }
  const dlop_tensor *t = dlop_array_tensor(exported);
  block->array = exported;
  /* libdlop's arrays obey checked_size.h's rule, so C-contiguous strides fit */
  (void)dlop_contiguous_strides(t->shape, t->ndim, block->strides);
  for (int32_t i = 0; i < t->ndim; i++) {
    block->shape[i] = t->shape[i];
    if (t->strides) block->strides[i] = t->strides[i];
  }
  dlop_tensor *dl = versioned ? &block->managed.versioned.dl_tensor : &block->managed.legacy.dl_tensor;
  *dl = *t;
  dl->shape = block->shape;
  dl->strides = block->strides;
  PyObject *capsule;
  if (versioned) {
    block->managed.versioned.version.major = DLOP_DLPACK_MAJOR;
    block->managed.versioned.version.minor = DLOP_DLPACK_MINOR;
    block->managed.versioned.manager_ctx = block;
    block->managed.versioned.deleter = delete_versioned;
    block->managed.versioned.flags = (copied ? DLOP_DLPACK_FLAG_IS_COPIED : 0) |
                                     (readonly ? DLOP_DLPACK_FLAG_READ_ONLY : 0);
    capsule = PyCapsule_New(&block->managed.versioned, "dltensor_versioned",
                            capsule_destructor_versioned);
  } else {
    block->managed.legacy.manager_ctx = block;
    block->managed.legacy.deleter = delete_legacy;
    capsule = PyCapsule_New(&block->managed.legacy, "dltensor", capsule_destructor_legacy);
  }
  if (capsule == NULL) {
    dlop_array_release(exported);
    free(block);
  }
  return capsule;
}

PyObject *dlop_py_array_dlpack_device(PyObject *self, PyObject *unused) {
  dlop_array *array = dlop_py_array_get(self);
  if (array == NULL) return NULL;
  dlop_device device = dlop_array_device(array);
  return Py_BuildValue("(ii)", (int)device.type, (int)device.id);
}

static const char *typestr_of(dlop_dtype dtype) {
  switch (dtype) {
    case DLOP_BOOL: return "|b1";
    case DLOP_INT8: return "|i1";
    case DLOP_INT16: return "<i2";
    case DLOP_INT32: return "<i4";
    case DLOP_INT64: return "<i8";
    case DLOP_UINT8: return "|u1";
    case DLOP_FLOAT16: return "<f2";
    case DLOP_FLOAT32: return "<f4";
    case DLOP_FLOAT64: return "<f8";
    default: return NULL;
  }
}

PyObject *dlop_py_array_cai(PyObject *self, void *closure) {
  dlop_array *array = dlop_py_array_get(self);
  if (array == NULL) return NULL;
  const dlop_tensor *t = dlop_array_tensor(array);
  if (t->device.type != DLOP_DEVICE_CUDA) {
    PyErr_SetString(PyExc_AttributeError,
                    "__cuda_array_interface__: this dlop.Array is on the CPU (use the buffer "
                    "protocol, __array__ or __dlpack__)");
    return NULL;
  }
  dlop_dtype dtype = dlop_tensor_dtype(t);
  const char *typestr = typestr_of(dtype);
  if (typestr == NULL) {
    PyErr_Format(PyExc_AttributeError,
                 "__cuda_array_interface__ has no typestr for %s (use __dlpack__)",
                 dlop_dtype_name(dtype));
    return NULL;
  }
  size_t item = dlop_dtype_size(dtype);
  PyObject *shape = PyTuple_New(t->ndim);
  PyObject *strides = dlop_tensor_is_contiguous(t) ? Py_NewRef(Py_None) : PyTuple_New(t->ndim);
  if (shape == NULL || strides == NULL) goto fail;
  for (int32_t i = 0; i < t->ndim; i++) {
    PyObject *dim = PyLong_FromLongLong(t->shape[i]);
    if (dim == NULL || PyTuple_SetItem(shape, i, dim) < 0) goto fail;
    if (strides != Py_None) {
      PyObject *s = PyLong_FromLongLong(t->strides[i] * (int64_t)item);
      if (s == NULL || PyTuple_SetItem(strides, i, s) < 0) goto fail;
    }
  }
  PyObject *result = Py_BuildValue("{s:N,s:s,s:(N,O),s:i,s:N}", "shape", shape, "typestr", typestr,
                                   "data", PyLong_FromVoidPtr(dlop_tensor_base(t)),
                                   ((dlop_py_array *)self)->readonly ? Py_True : Py_False,
                                   "version", 3, "strides", strides);
  if (result == NULL) return NULL;
  /* Version 3: with writes pending, name the stream the consumer must wait for. */
  dlop_stream *pending = dlop_array_stream(array);
  void *handle = pending ? dlop_stream_handle(pending) : NULL;
  if (handle != NULL) {
    PyObject *value = PyLong_FromVoidPtr(handle);
    if (value == NULL || PyDict_SetItemString(result, "stream", value) < 0) {
      Py_XDECREF(value);
      Py_DECREF(result);
      return NULL;
    }
    Py_DECREF(value);
  }
  return result;
fail:
  Py_XDECREF(shape);
  Py_XDECREF(strides);
  return NULL;
}
