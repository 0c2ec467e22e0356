/* convert.c — Python objects to dlop arrays without copying: dlop.Array, the buffer protocol
 * (NumPy), DLPack producers (CuPy, PyTorch, JAX) and __cuda_array_interface__ producers (Numba,
 * CuPy); and dlop.asarray, which adds an explicit device move and dtype conversion. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "dlpack_abi.h"
#include "module.h"

/* ---- the buffer protocol ---------------------------------------------------------------- */

/* What a wrapped buffer's deleter frees. malloc: the deleter may run without the GIL. */
typedef struct buffer_owner {
  Py_buffer view;
} buffer_owner;

/* Set while this thread, holding the GIL, releases arrays (dlop_py_release_holding_gil): the
 * deleter then skips PyGILState_Ensure, which is a measurable part of a small call. */
static _Thread_local int releasing_with_gil;

void dlop_py_release_holding_gil(dlop_array *array) {
  /* Saved and restored, not reset: a deleter may run Python code that releases arrays too. */
  int outer = releasing_with_gil;
  releasing_with_gil = 1;
  dlop_array_release(array);
  releasing_with_gil = outer;
}

static void release_buffer(void *context) {
  buffer_owner *owner = context;
  if (releasing_with_gil) {
    PyBuffer_Release(&owner->view);
  } else {
    /* The last reference may go on a thread without the GIL (a worker, a stream callback). */
    PyGILState_STATE gil = PyGILState_Ensure();
    PyBuffer_Release(&owner->view);
    PyGILState_Release(gil);
  }
  free(owner);
}

/* A struct-module format and item size to a dlop dtype. */
static dlop_dtype format_dtype(const char *format, Py_ssize_t itemsize) {
  if (format == NULL) return itemsize == 1 ? DLOP_UINT8 : DLOP_DTYPE_INVALID;
  if (*format == '@' || *format == '=' || *format == '<') format++;
  else if ((*format == '>' || *format == '!') && itemsize != 1) return DLOP_DTYPE_INVALID;
  else if (*format == '>' || *format == '!') format++;
  if (format[0] == '\0' || format[1] != '\0') return DLOP_DTYPE_INVALID;
  switch (format[0]) {
    case '?': return DLOP_BOOL;
    case 'b': return DLOP_INT8;
    case 'B': return DLOP_UINT8;
    case 'h': return itemsize == 2 ? DLOP_INT16 : DLOP_DTYPE_INVALID;
    case 'i':
    case 'l':
    case 'q':
    case 'n': return itemsize == 4 ? DLOP_INT32 : itemsize == 8 ? DLOP_INT64 : DLOP_DTYPE_INVALID;
    case 'e': return DLOP_FLOAT16;
    case 'f': return DLOP_FLOAT32;
    case 'd': return DLOP_FLOAT64;
    default: return DLOP_DTYPE_INVALID;
  }
}

static int has_attribute(PyObject *object, PyObject *name);

/* True for an object that describes device memory: it has __cuda_array_interface__, or its
 * __dlpack_device__() names a device other than the CPU (NumPy's says CPU). No exception set. */
static int is_device_producer(dlop_py_state *state, PyObject *object) {
  PyObject *saved_type, *saved_value, *saved_traceback;
  PyErr_Fetch(&saved_type, &saved_value, &saved_traceback); /* keep the caller's error */
  int device = has_attribute(object, state->str_cai);
  if (!device) {
    PyObject *where = PyObject_CallMethodObjArgs(object, state->str_dlpack_device, NULL);
    if (where != NULL && PyTuple_Check(where) && PyTuple_Size(where) == 2) {
      long type = PyLong_AsLong(PyTuple_GetItem(where, 0));
      device = type != -1 && type != 1; /* kDLCPU */
    }
    Py_XDECREF(where);
    PyErr_Clear();
  }
  PyErr_Restore(saved_type, saved_value, saved_traceback);
  return device;
}

static int buffer_to_array(dlop_py_state *state, PyObject *object, dlop_array **array,
                           int *readonly) {
  if (!PyObject_CheckBuffer(object)) return 1;
  buffer_owner *owner = malloc(sizeof *owner);
  if (owner == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  if (PyObject_GetBuffer(object, &owner->view, PyBUF_RECORDS_RO) < 0) {
    free(owner);
    /* CuPy and JAX arrays have a buffer slot that refuses device memory: such an object is
     * taken through DLPack or __cuda_array_interface__ instead (the caller tries those next). */
    if (is_device_producer(state, object)) {
      PyErr_Clear();
      return 1;
    }
    return -1;
  }
  Py_buffer *view = &owner->view;
  dlop_dtype dtype = format_dtype(view->format, view->itemsize);
  int64_t shape[DLOP_MAX_NDIM], strides[DLOP_MAX_NDIM];
  if (dtype == DLOP_DTYPE_INVALID) {
    dlop_py_raisef(state, DLOP_TYPE_ERROR,
                   "a buffer of format '%s' (item size %zd) has no dlop dtype; expected bool, "
                   "int8/16/32/64, uint8, float16/32/64 in native byte order",
                   view->format ? view->format : "B", view->itemsize);
    goto fail;
  }
  if (view->ndim > DLOP_MAX_NDIM) {
    dlop_py_raisef(state, DLOP_SHAPE_ERROR, "a buffer of %d dimensions; dlop takes at most %d",
                   view->ndim, DLOP_MAX_NDIM);
    goto fail;
  }
  for (int i = 0; i < view->ndim; i++) {
    shape[i] = view->shape[i];
    Py_ssize_t stride = view->strides ? view->strides[i] : 0;
    if (stride % view->itemsize != 0) {
      dlop_py_raisef(state, DLOP_INVALID_ARGUMENT,
                     "buffer stride %zd bytes in dimension %d is not a multiple of the item size "
                     "%zd (dlop strides count elements)", stride, i, view->itemsize);
      goto fail;
    }
    strides[i] = stride / view->itemsize;
  }
  dlop_tensor tensor = {view->buf, {DLOP_DEVICE_CPU, 0}, view->ndim, dlop_dtype_to_dl(dtype),
                        shape, view->strides ? strides : NULL, 0};
  int status = dlop_array_wrap(&tensor, release_buffer, owner, array);
  if (status != DLOP_OK) {
    dlop_py_raise(state, status, "wrapping a buffer");
    goto fail;
  }
  if (readonly) *readonly = view->readonly != 0;
  return 0;
fail:
  PyBuffer_Release(view);
  free(owner);
  return -1;
}

/* ---- foreign device memory ------------------------------------------------------------- */

/* What a DLPack or CAI wrap owns. On CUDA our kernels may still read the memory when the last
 * reference goes, so the memory goes back to its producer only after the extension's stream on
 * that device (all dlop work from Python goes there) has passed the point where the wrap was
 * released: deferred.c records a stream marker there and gives the owner back at a later poll,
 * without blocking the host. Waiting for our stream is chosen over keeping the producer alive
 * from outputs: an output can die before the work that read the input has finished, and the
 * producer's allocator may reuse the memory at once. */
struct dlop_py_foreign_owner {
  dlop_stream *stream;                         /* the extension's stream, or NULL (CPU) */
  dlop_dl_managed_tensor *legacy;              /* DLPack legacy, or */
  dlop_dl_managed_tensor_versioned *versioned; /* DLPack versioned, or */
  PyObject *producer;                          /* CAI: a reference to the producer */
  const void *data;                            /* the first byte, and */
  size_t bytes;                                /* the size, for the queue's bound */
};
typedef dlop_py_foreign_owner foreign_owner;

void dlop_py_foreign_give_back(foreign_owner *owner, int holding_gil) {
  /* DLPack deleters take the GIL themselves when they need it (the spec requires it). A
   * deleter may be Python code (a ctypes callback), which must not run with this thread's
   * exception pending: it would replace the error being reported with a SystemError. */
  PyObject *type = NULL, *value = NULL, *traceback = NULL;
  if (holding_gil) PyErr_Fetch(&type, &value, &traceback);
  if (owner->legacy && owner->legacy->deleter) owner->legacy->deleter(owner->legacy);
  if (owner->versioned && owner->versioned->deleter) owner->versioned->deleter(owner->versioned);
  if (holding_gil) PyErr_Restore(type, value, traceback);
  if (owner->producer && holding_gil) {
    Py_DECREF(owner->producer);
  } else if (owner->producer) {
    PyGILState_STATE gil = PyGILState_Ensure();
    Py_DECREF(owner->producer);
    PyGILState_Release(gil);
  }
  free(owner);
}

static void release_foreign(void *context) {
  foreign_owner *owner = context;
  int holding_gil = releasing_with_gil;
  /* The extension's streams live for the whole process (see module_free), so this is safe
   * even after the module is gone. Queuing needs no GIL: any thread may release a wrap. */
  if (owner->stream &&
      dlop_py_defer_release(owner->stream, owner, owner->data, owner->bytes, holding_gil) == 0)
    return;
  if (owner->stream) {
    /* No queue (interpreter exit) or no marker: wait here, as the queue would have. Waiting
     * for the GPU with the GIL held would stall every other Python thread. */
    PyThreadState *saved = holding_gil ? PyEval_SaveThread() : NULL;
    (void)dlop_stream_synchronize(owner->stream);
    if (saved) PyEval_RestoreThread(saved);
  }
  dlop_py_foreign_give_back(owner, holding_gil);
}

/* Remember the wrap's memory for the queue's bound (the same memory is counted once): the
 * bytes its strides reach, not numel * itemsize, which a zero-stride view of one element
 * would make 2^62 bytes and so stall the queue for memory it does not hold. */
static void note_extent(foreign_owner *owner, const dlop_array *array) {
  const dlop_tensor *tensor = dlop_array_tensor(array);
  int64_t low = 0, high = 0;
  owner->data = (const char *)tensor->data + tensor->byte_offset;
  /* dlop_array_wrap checked this extent: it fits */
  if (dlop_array_numel(array) > 0)
    (void)dlop_strided_extent(tensor->shape, tensor->strides, tensor->ndim,
                              (int64_t)dlop_dtype_size(dlop_array_dtype(array)), 0, &low, &high,
                              NULL);
  owner->bytes = (size_t)(high - low);
}

int dlop_py_device_pair(PyObject *value, int *device_type, int *device_id) {
  int values[2];
  if (!PyTuple_Check(value) || PyTuple_Size(value) != 2) return 0;
  for (Py_ssize_t i = 0; i < 2; i++) {
    PyObject *item = PyTuple_GetItem(value, i);
    if (!PyLong_Check(item)) return 0;
    int overflow = 0;
    long number = PyLong_AsLongAndOverflow(item, &overflow);
    if (number == -1 && PyErr_Occurred()) return -1;
    if (overflow || number < INT_MIN || number > INT_MAX) return 0;
    values[i] = (int)number;
  }
  *device_type = values[0];
  *device_id = values[1];
  return 1;
}

/* Drop a reference whose destructor may run a producer's Python code (a capsule's deleter)
 * while an exception is being raised: the exception stays the one reported. */
static void decref_keeping_error(PyObject *object) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  Py_DECREF(object);
  PyErr_Restore(type, value, traceback);
}

static PyObject *versioned_max(void) { return Py_BuildValue("(ii)", DLOP_DLPACK_MAJOR, 1); }

int dlop_py_from_dlpack(dlop_py_state *state, PyObject *producer, dlop_array **array,
                        int *readonly) {
  PyObject *device = PyObject_CallMethod(producer, "__dlpack_device__", NULL);
  if (device == NULL) return -1;
  int device_type = 0, device_id = 0;
  int pair = dlop_py_device_pair(device, &device_type, &device_id);
  if (pair == 0)
    dlop_py_raisef(state, DLOP_TYPE_ERROR,
                   "__dlpack_device__ of %R returned %R; expected a tuple (device_type, "
                   "device_id) of two ints", producer, device);
  if (pair <= 0) {
    Py_DECREF(device);
    return -1;
  }
  Py_DECREF(device);
  dlop_stream *stream = NULL;
  if (device_type == DLOP_DEVICE_CUDA) {
    dlop_device cuda = {DLOP_DEVICE_CUDA, device_id};
    if (dlop_py_stream(state, cuda, &stream) < 0) return -1;
  } else if (device_type != DLOP_DEVICE_CPU) {
    dlop_py_raisef(state, DLOP_UNSUPPORTED,
                   "a DLPack producer on device type %d (id %d): dlop takes CPU (1) and CUDA (2) "
                   "memory", device_type, device_id);
    return -1;
  }
  /* Our stream: the producer makes it wait for its pending writes (DLPack's contract). */
  PyObject *stream_arg = stream ? PyLong_FromVoidPtr(dlop_stream_handle(stream)) : Py_NewRef(Py_None);
  PyObject *max_version = versioned_max();
  PyObject *method = PyObject_GetAttr(producer, state->str_dlpack);
  PyObject *empty = PyTuple_New(0);
  PyObject *kwargs = PyDict_New();
  PyObject *capsule = NULL;
  if (stream_arg && max_version && method && empty && kwargs &&
      PyDict_SetItem(kwargs, state->str_stream, stream_arg) == 0 &&
      PyDict_SetItem(kwargs, state->str_max_version, max_version) == 0) {
    capsule = PyObject_Call(method, empty, kwargs);
    if (capsule == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
      /* A producer older than DLPack 1.0 does not take max_version: ask for a legacy one. */
      PyErr_Clear();
      if (PyDict_DelItem(kwargs, state->str_max_version) == 0)
        capsule = PyObject_Call(method, empty, kwargs);
    }
  }
  Py_XDECREF(method);
  Py_XDECREF(empty);
  Py_XDECREF(kwargs);
  Py_XDECREF(stream_arg);
  Py_XDECREF(max_version);
  if (capsule == NULL) return -1;

  foreign_owner *owner = calloc(1, sizeof *owner);
  if (owner == NULL) {
    Py_DECREF(capsule);
    PyErr_NoMemory();
    return -1;
  }
  dlop_tensor *tensor = NULL;
  if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    owner->versioned = PyCapsule_GetPointer(capsule, "dltensor_versioned");
    if (owner->versioned->version.major != DLOP_DLPACK_MAJOR) {
      dlop_py_raisef(state, DLOP_UNSUPPORTED,
                     "the producer sent a DLPack %u.%u tensor; dlop reads DLPack 1.x",
                     owner->versioned->version.major, owner->versioned->version.minor);
      free(owner);
      decref_keeping_error(capsule); /* unconsumed: the capsule's destructor frees it */
      return -1;
    }
    tensor = &owner->versioned->dl_tensor;
    if (PyCapsule_SetName(capsule, "used_dltensor_versioned") < 0) goto fail_unowned;
  } else if (PyCapsule_IsValid(capsule, "dltensor")) {
    owner->legacy = PyCapsule_GetPointer(capsule, "dltensor");
    tensor = &owner->legacy->dl_tensor;
    if (PyCapsule_SetName(capsule, "used_dltensor") < 0) goto fail_unowned;
  } else {
    dlop_py_raisef(state, DLOP_INVALID_ARGUMENT,
                   "__dlpack__ of %R returned %R, not a 'dltensor' or 'dltensor_versioned' capsule",
                   producer, capsule);
    free(owner);
    decref_keeping_error(capsule);
    return -1;
  }
  if ((int)tensor->device.type != device_type || (int)tensor->device.id != device_id) {
    /* Our stream handshake was for the device __dlpack_device__ named: refuse a mismatch. */
    dlop_py_raisef(state, DLOP_INVALID_ARGUMENT,
                   "__dlpack__ of %R gave a tensor on device (%d, %d) but __dlpack_device__ said "
                   "(%d, %d); expected the same device", producer, (int)tensor->device.type,
                   (int)tensor->device.id, device_type, device_id);
    dlop_py_foreign_give_back(owner, 1); /* renamed above: the deleter is ours to call */
    Py_DECREF(capsule);
    return -1;
  }
  Py_DECREF(capsule); /* consumed: the managed tensor is ours until we call its deleter */
  owner->stream = stream;
  /* Only versioned tensors can say read-only; legacy ones are writable by the spec. */
  int read_only = owner->versioned && (owner->versioned->flags & DLOP_DLPACK_FLAG_READ_ONLY);
  int status = dlop_array_wrap(tensor, release_foreign, owner, array);
  if (status != DLOP_OK) {
    dlop_py_raise(state, status, "wrapping a DLPack tensor");
    dlop_py_foreign_give_back(owner, 1); /* nothing was enqueued on it: give it back now */
    return -1;
  }
  note_extent(owner, *array);
  if (readonly) *readonly = read_only;
  return 0;
fail_unowned:
  free(owner);
  decref_keeping_error(capsule);
  return -1;
}

/* "<f4" and the like to a dlop dtype. */
static dlop_dtype typestr_dtype(const char *typestr) {
  if (typestr == NULL || strlen(typestr) < 3) return DLOP_DTYPE_INVALID;
  char order = typestr[0], kind = typestr[1];
  int size = atoi(typestr + 2);
  if (order == '>' && size != 1) return DLOP_DTYPE_INVALID;
  switch (kind) {
    case 'b': return size == 1 ? DLOP_BOOL : DLOP_DTYPE_INVALID;
    case 'i':
      return size == 1 ? DLOP_INT8 : size == 2 ? DLOP_INT16 : size == 4 ? DLOP_INT32
             : size == 8 ? DLOP_INT64 : DLOP_DTYPE_INVALID;
    case 'u': return size == 1 ? DLOP_UINT8 : DLOP_DTYPE_INVALID;
    case 'f':
      return size == 2 ? DLOP_FLOAT16 : size == 4 ? DLOP_FLOAT32 : size == 8 ? DLOP_FLOAT64
             : DLOP_DTYPE_INVALID;
    default: return DLOP_DTYPE_INVALID;
  }
}

static int tuple_int64(PyObject *tuple, int64_t *values, int *count, const char *what,
                       dlop_py_state *state) {
  if (!PyTuple_Check(tuple)) {
    dlop_py_raisef(state, DLOP_INVALID_ARGUMENT, "__cuda_array_interface__['%s'] is %R, not a tuple",
                   what, tuple);
    return -1;
  }
  Py_ssize_t n = PyTuple_Size(tuple);
  if (n > DLOP_MAX_NDIM) {
    dlop_py_raisef(state, DLOP_SHAPE_ERROR, "__cuda_array_interface__ has %zd dimensions; dlop "
                   "takes at most %d", n, DLOP_MAX_NDIM);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *item = PyTuple_GetItem(tuple, i);
    int overflow = 0;
    values[i] = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (values[i] == -1 && PyErr_Occurred()) return -1;
    if (overflow) {
      dlop_py_raisef(state, strcmp(what, "shape") == 0 ? DLOP_SHAPE_ERROR : DLOP_INVALID_ARGUMENT,
                     "__cuda_array_interface__['%s'][%zd] is %R, outside int64", what, i, item);
      return -1;
    }
  }
  *count = (int)n;
  return 0;
}

int dlop_py_from_cai(dlop_py_state *state, PyObject *producer, PyObject *interface,
                     dlop_array **array, int *readonly) {
  if (!PyDict_Check(interface)) {
    dlop_py_raisef(state, DLOP_INVALID_ARGUMENT, "__cuda_array_interface__ of %R is not a dict",
                   producer);
    return -1;
  }
  PyObject *shape_obj = PyDict_GetItemString(interface, "shape");
  PyObject *typestr_obj = PyDict_GetItemString(interface, "typestr");
  PyObject *data_obj = PyDict_GetItemString(interface, "data");
  PyObject *strides_obj = PyDict_GetItemString(interface, "strides");
  PyObject *stream_obj = PyDict_GetItemString(interface, "stream");
  PyObject *mask_obj = PyDict_GetItemString(interface, "mask");
  if (shape_obj == NULL || typestr_obj == NULL || data_obj == NULL || !PyTuple_Check(data_obj) ||
      PyTuple_Size(data_obj) != 2) {
    dlop_py_raisef(state, DLOP_INVALID_ARGUMENT,
                   "__cuda_array_interface__ of %R lacks 'shape', 'typestr' or 'data' "
                   "(pointer, read_only)", producer);
    return -1;
  }
  if (mask_obj && mask_obj != Py_None) {
    dlop_py_raisef(state, DLOP_UNSUPPORTED, "__cuda_array_interface__ with a mask is not supported");
    return -1;
  }
  int64_t shape[DLOP_MAX_NDIM], strides[DLOP_MAX_NDIM];
  int ndim = 0, nstrides = 0;
  if (tuple_int64(shape_obj, shape, &ndim, "shape", state) < 0) return -1;
  const char *typestr = PyUnicode_Check(typestr_obj) ? PyUnicode_AsUTF8AndSize(typestr_obj, NULL) : NULL;
  dlop_dtype dtype = typestr_dtype(typestr);
  if (dtype == DLOP_DTYPE_INVALID) {
    dlop_py_raisef(state, DLOP_TYPE_ERROR,
                   "__cuda_array_interface__ typestr %R has no dlop dtype; expected e.g. '<f4'",
                   typestr_obj);
    return -1;
  }
  if (strides_obj && strides_obj != Py_None) {
    if (tuple_int64(strides_obj, strides, &nstrides, "strides", state) < 0) return -1;
    if (nstrides != ndim) {
      dlop_py_raisef(state, DLOP_INVALID_ARGUMENT,
                     "__cuda_array_interface__ of %R has %d strides for %d dimensions; expected "
                     "one stride (bytes) per dimension, or None", producer, nstrides, ndim);
      return -1;
    }
    size_t item = dlop_dtype_size(dtype);
    for (int i = 0; i < nstrides; i++) {
      if (strides[i] % (int64_t)item != 0) {
        dlop_py_raisef(state, DLOP_INVALID_ARGUMENT,
                       "__cuda_array_interface__ stride %lld bytes is not a multiple of the item "
                       "size %zu", (long long)strides[i], item);
        return -1;
      }
      strides[i] /= (int64_t)item;
    }
  }
  void *data = PyLong_AsVoidPtr(PyTuple_GetItem(data_obj, 0));
  if (data == NULL && PyErr_Occurred()) return -1;
  int read_only = PyObject_IsTrue(PyTuple_GetItem(data_obj, 1));
  if (read_only < 0) return -1;
  /* checked before the pointer is asked about: dlop_array_wrap refuses the same shapes later,
   * but this count must not wrap on the way (negative dims: wrap's message names them) */
  int64_t numel = 0;
  int size = dlop_shape_size(shape, ndim, (int64_t)dlop_dtype_size(dtype), &numel, NULL);
  if (size != DLOP_SIZE_FITS) {
    char message[512];
    dlop_set_size_error(message, sizeof message, "__cuda_array_interface__", size, shape, ndim,
                        (int32_t)dtype);
    dlop_py_raisef(state, DLOP_SHAPE_ERROR, "%s", message);
    return -1;
  }
  int32_t device_id = 0;
  if (numel > 0) {
    int status = dlop_cuda_pointer_device(data, &device_id);
    if (status != DLOP_OK) {
      dlop_py_raise(state, status, "__cuda_array_interface__");
      return -1;
    }
  }
  dlop_device device = {DLOP_DEVICE_CUDA, device_id};
  dlop_stream *stream;
  if (dlop_py_stream(state, device, &stream) < 0) return -1;
  /* CAI v3: the consumer orders its work after the producer's stream. 0 is not allowed. */
  if (stream_obj && stream_obj != Py_None) {
    void *handle = PyLong_AsVoidPtr(stream_obj);
    if (handle == NULL && PyErr_Occurred()) return -1;
    if (handle == NULL) {
      dlop_py_raisef(state, DLOP_INVALID_ARGUMENT,
                     "__cuda_array_interface__ stream 0 is not allowed (version 3 uses 1 for "
                     "the legacy default stream, 2 for the per-thread one)");
      return -1;
    }
    int status = dlop_stream_wait_foreign(stream, handle);
    if (status != DLOP_OK) {
      dlop_py_raise(state, status, "__cuda_array_interface__ stream");
      return -1;
    }
  }
  foreign_owner *owner = calloc(1, sizeof *owner);
  if (owner == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  owner->stream = stream;
  owner->producer = Py_NewRef(producer);
  dlop_tensor tensor = {data, device, ndim, dlop_dtype_to_dl(dtype), shape,
                        nstrides ? strides : NULL, 0};
  int status = dlop_array_wrap(&tensor, release_foreign, owner, array);
  if (status != DLOP_OK) {
    Py_DECREF(owner->producer);
    free(owner);
    dlop_py_raise(state, status, "wrapping a __cuda_array_interface__ array");
    return -1;
  }
  note_extent(owner, *array);
  if (readonly) *readonly = read_only;
  return 0;
}

/* ---- dispatch --------------------------------------------------------------------------- */

static int has_attribute(PyObject *object, PyObject *name) {
  PyObject *value = PyObject_GetAttr(object, name);
  if (value == NULL) {
    PyErr_Clear();
    return 0;
  }
  Py_DECREF(value);
  return 1;
}

int dlop_py_to_array(dlop_py_state *state, PyObject *object, dlop_array **array, int *readonly,
                     int *from_host) {
  if (readonly) *readonly = 0;
  if (from_host) *from_host = 0;
  if (Py_IS_TYPE(object, state->array_type)) {
    *array = dlop_py_array_get(object);
    if (*array == NULL) return -1;
    dlop_array_retain(*array);
    if (readonly) *readonly = ((dlop_py_array *)object)->readonly;
    return 0;
  }
  int result = buffer_to_array(state, object, array, readonly);
  if (result == 0 && from_host) *from_host = 1;
  if (result <= 0) return result;
  if (has_attribute(object, state->str_dlpack) && has_attribute(object, state->str_dlpack_device))
    return dlop_py_from_dlpack(state, object, array, readonly);
  PyObject *interface = PyObject_GetAttr(object, state->str_cai);
  if (interface != NULL) {
    result = dlop_py_from_cai(state, object, interface, array, readonly);
    Py_DECREF(interface);
    return result;
  }
  PyErr_Clear();
  /* Python scalars and nested lists: through NumPy, which gives a buffer. */
  PyObject *numpy = dlop_py_numpy(state);
  if (numpy == NULL) return -1;
  PyObject *converted = PyObject_CallMethod(numpy, "asarray", "O", object);
  if (converted == NULL) return -1;
  result = buffer_to_array(state, converted, array, readonly);
  Py_DECREF(converted);
  if (result == 1) {
    dlop_py_raisef(state, DLOP_TYPE_ERROR, "cannot make a dlop array from %R", object);
    return -1;
  }
  if (result == 0 && from_host) *from_host = 1;
  return result;
}

/* asarray(obj, device=None, dtype=None) */
PyObject *dlop_py_asarray(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames) {
  dlop_py_state *state = dlop_py_state_of_module(module);
  dlop_py_deferred_poll();
  PyObject *values[3] = {NULL, Py_None, Py_None};
  static const char *names[3] = {"obj", "device", "dtype"};
  if (nargs > 3) {
    PyErr_Format(PyExc_TypeError, "asarray() takes at most 3 arguments (%zd given)", nargs);
    return NULL;
  }
  for (Py_ssize_t i = 0; i < nargs; i++) values[i] = args[i];
  Py_ssize_t nkw = kwnames ? PyTuple_Size(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; k++) {
    const char *name = PyUnicode_AsUTF8AndSize(PyTuple_GetItem(kwnames, k), NULL);
    if (name == NULL) return NULL;
    int found = 0;
    for (int i = 0; i < 3; i++)
      if (strcmp(name, names[i]) == 0) {
        if (i < nargs) {
          PyErr_Format(PyExc_TypeError, "asarray() got multiple values for '%s'", name);
          return NULL;
        }
        values[i] = args[nargs + k];
        found = 1;
      }
    if (!found) {
      PyErr_Format(PyExc_TypeError, "asarray() got an unexpected keyword argument '%s'", name);
      return NULL;
    }
  }
  if (values[0] == NULL) {
    PyErr_SetString(PyExc_TypeError, "asarray() missing required argument 'obj'");
    return NULL;
  }
  PyObject *object = values[0];
  dlop_device device = {0, 0};
  int want_device = values[1] != Py_None;
  if (want_device && dlop_py_parse_device(state, values[1], &device) < 0) return NULL;
  dlop_dtype dtype = DLOP_DTYPE_INVALID;
  if (values[2] != Py_None && dlop_py_parse_dtype(state, values[2], &dtype) < 0) return NULL;
  if (want_device) {
    /* Fail early, with what is missing, before touching a producer. */
    int status = dlop_device_check(device);
    if (status != DLOP_OK) return dlop_py_raise(state, status, NULL);
  }

  PyObject *source = Py_NewRef(object);
  /* Host data has a buffer (NumPy also has __dlpack__, but NumPy converts dtypes itself). */
  int is_device_array = Py_IS_TYPE(object, state->array_type) ||
                        (!PyObject_CheckBuffer(object) && (has_attribute(object, state->str_dlpack) ||
                                                           has_attribute(object, state->str_cai))) ||
                        is_device_producer(state, object); /* CuPy, JAX: a buffer slot that refuses */
  if (dtype != DLOP_DTYPE_INVALID && !is_device_array) {
    /* Host data (NumPy, lists): NumPy converts the dtype (a copy only when it differs). */
    PyObject *numpy = dlop_py_numpy(state);
    Py_DECREF(source);
    source = numpy ? PyObject_CallMethod(numpy, "asarray", "Os", object, dlop_dtype_name(dtype)) : NULL;
    if (source == NULL) return NULL;
  }
  dlop_array *array = NULL;
  int readonly = 0;
  int result = dlop_py_to_array(state, source, &array, &readonly, NULL);
  Py_DECREF(source);
  if (result < 0) return NULL;
  if (dtype != DLOP_DTYPE_INVALID && dlop_array_dtype(array) != dtype) {
    dlop_dtype have = dlop_array_dtype(array);
    dlop_array_release(array);
    return dlop_py_raisef(state, DLOP_TYPE_ERROR,
                          "asarray: the array is %s and dtype=%s was asked; dlop does not convert "
                          "dtypes of device arrays (convert with the producing library first)",
                          dlop_dtype_name(have), dlop_dtype_name(dtype));
  }
  dlop_device here = dlop_array_device(array);
  if (want_device && (here.type != device.type || here.id != device.id)) {
    /* An explicit request: the one place a device move happens. */
    dlop_array *copy = NULL;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = dlop_array_copy_to(array, device, &copy);
    Py_END_ALLOW_THREADS
    dlop_array_release(array);
    if (status != DLOP_OK) return dlop_py_raise(state, status, "asarray: moving to the device");
    array = copy;
    readonly = 0; /* a fresh copy of our own */
  }
  PyObject *wrapped = dlop_py_array_new(state, array);
  if (wrapped != NULL) ((dlop_py_array *)wrapped)->readonly = readonly;
  return wrapped;
}
