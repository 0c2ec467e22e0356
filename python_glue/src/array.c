/* array.c — dlop.Array: a reference to a dlop_array with its device, shape and dtype; the
 * buffer protocol and __array__ on the CPU (no copy), numpy() and to(device) (copies); and the
 * expired state of an array lent to a Python op for one run that outlived it (py_op.c). */
#include <stdlib.h>
#include <string.h>

#include "module.h"

PyObject *dlop_py_device_str(dlop_device device) {
  char text[32];
  return PyUnicode_FromString(dlop_device_format(device, text, sizeof text));
}

int dlop_py_parse_dtype(dlop_py_state *state, PyObject *object, dlop_dtype *dtype) {
  PyObject *name = NULL;
  if (PyUnicode_Check(object)) {
    name = Py_NewRef(object);
  } else {
    /* NumPy dtypes and scalar types (np.float32, np.dtype("f4")): ask NumPy for the name. */
    PyObject *numpy = dlop_py_numpy(state);
    PyObject *numpy_dtype = numpy ? PyObject_CallMethod(numpy, "dtype", "O", object) : NULL;
    if (numpy_dtype == NULL) {
      PyErr_Clear();
      dlop_py_raisef(state, DLOP_TYPE_ERROR,
                     "dtype %R is not a dtype name; expected one of bool, int8, int16, int32, "
                     "int64, uint8, float16, bfloat16, float32, float64", object);
      return -1;
    }
    name = PyObject_GetAttrString(numpy_dtype, "name");
    Py_DECREF(numpy_dtype);
    if (name == NULL) return -1;
  }
  const char *text = PyUnicode_AsUTF8AndSize(name, NULL);
  if (text == NULL) {
    Py_DECREF(name);
    return -1;
  }
  for (int i = 0; i < DLOP_DTYPE_COUNT; i++) {
    if (strcmp(text, dlop_dtype_name((dlop_dtype)i)) == 0) {
      *dtype = (dlop_dtype)i;
      Py_DECREF(name);
      return 0;
    }
  }
  dlop_py_raisef(state, DLOP_TYPE_ERROR,
                 "dtype '%s' is not supported by dlop; expected one of bool, int8, int16, int32, "
                 "int64, uint8, float16, bfloat16, float32, float64", text);
  Py_DECREF(name);
  return -1;
}

int dlop_py_parse_device(dlop_py_state *state, PyObject *object, dlop_device *device) {
  if (!PyUnicode_Check(object)) {
    dlop_py_raisef(state, DLOP_INVALID_ARGUMENT,
                   "device must be a string such as 'cpu', 'cuda' or 'cuda:1', not %R", object);
    return -1;
  }
  Py_ssize_t length = 0;
  const char *text = PyUnicode_AsUTF8AndSize(object, &length);
  if (text == NULL) return -1;
  if ((size_t)length != strlen(text)) { /* C would read only up to the NUL: "cpu\0x" as "cpu" */
    dlop_py_raisef(state, DLOP_INVALID_ARGUMENT,
                   "device %R contains a NUL character; expected 'cpu', 'cuda' or 'cuda:N'", object);
    return -1;
  }
  int status = dlop_device_parse(text, device);
  if (status != DLOP_OK) {
    dlop_py_raise(state, status, NULL);
    return -1;
  }
  return 0;
}

PyObject *dlop_py_array_new(dlop_py_state *state, dlop_array *array) {
  dlop_py_array *self = (dlop_py_array *)state->array_alloc(state->array_type, 0);
  if (self == NULL) {
    dlop_array_release(array);
    return NULL;
  }
  self->array = array;
  self->readonly = 0;
  self->expired_op = NULL;
  return (PyObject *)self;
}

dlop_array *dlop_py_array_get(PyObject *object) {
  dlop_py_array *self = (dlop_py_array *)object;
  if (self->array != NULL) return self->array;
  dlop_py_raisef(dlop_py_state_of_type(Py_TYPE(object)), DLOP_INVALID_ARGUMENT,
                 "this dlop.Array was lent for one run of the Python op '%s' and is gone: dlop "
                 "took its memory back when the run ended. Copy what you keep inside the run "
                 "(perform: inputs[i].copy(); a launch: into memory of your own)",
                 self->expired_op ? self->expired_op : "?");
  return NULL;
}

void dlop_py_array_expire(PyObject *object, const char *op_name) {
  dlop_py_array *self = (dlop_py_array *)object;
  dlop_array *array = self->array;
  self->array = NULL;
  self->expired_op = op_name;
  /* Exports made while it was alive (a memoryview, NumPy) keep their Py_buffer: releasing
   * one only frees its shape block (array_releasebuffer), never touches the array. */
  if (array != NULL) dlop_py_release_holding_gil(array);
}

static void array_dealloc(PyObject *object) {
  dlop_py_array *self = (dlop_py_array *)object;
  PyTypeObject *type = Py_TYPE(object);
  /* Releasing may run a wrapped buffer's deleter; it is told that this thread holds the GIL
   * (and a foreign CUDA wrap lets it go while it waits for the GPU). */
  if (self->array) dlop_py_release_holding_gil(self->array);
  freefunc free_object = (freefunc)PyType_GetSlot(type, Py_tp_free);
  free_object(object);
  Py_DECREF(type);
}

static dlop_py_state *state_of(PyObject *self) { return dlop_py_state_of_type(Py_TYPE(self)); }
/* The array's tensor, or NULL with the error when it has expired. */
static const dlop_tensor *tensor_of(PyObject *self) {
  dlop_array *array = dlop_py_array_get(self);
  return array ? dlop_array_tensor(array) : NULL;
}

static PyObject *array_get_device(PyObject *self, void *closure) {
  const dlop_tensor *t = tensor_of(self);
  return t ? dlop_py_device_str(t->device) : NULL;
}

static PyObject *array_get_shape(PyObject *self, void *closure) {
  const dlop_tensor *t = tensor_of(self);
  if (t == NULL) return NULL;
  PyObject *shape = PyTuple_New(t->ndim);
  if (shape == NULL) return NULL;
  for (int32_t i = 0; i < t->ndim; i++) {
    PyObject *dim = PyLong_FromLongLong(t->shape[i]);
    if (dim == NULL || PyTuple_SetItem(shape, i, dim) < 0) {
      Py_DECREF(shape);
      return NULL;
    }
  }
  return shape;
}

static PyObject *array_get_strides(PyObject *self, void *closure) {
  const dlop_tensor *t = tensor_of(self);
  if (t == NULL) return NULL;
  PyObject *strides = PyTuple_New(t->ndim);
  if (strides == NULL) return NULL;
  int64_t contiguous[DLOP_MAX_NDIM];
  /* libdlop's arrays obey checked_size.h's rule, so C-contiguous strides fit */
  (void)dlop_contiguous_strides(t->shape, t->ndim, contiguous);
  for (int32_t i = t->ndim - 1; i >= 0; i--) {
    int64_t stride = t->strides ? t->strides[i] : contiguous[i];
    PyObject *value = PyLong_FromLongLong(stride);
    if (value == NULL || PyTuple_SetItem(strides, i, value) < 0) {
      Py_DECREF(strides);
      return NULL;
    }
  }
  return strides;
}

static PyObject *array_get_dtype(PyObject *self, void *closure) {
  const dlop_tensor *t = tensor_of(self);
  return t ? PyUnicode_FromString(dlop_dtype_name(dlop_tensor_dtype(t))) : NULL;
}

static PyObject *array_get_ndim(PyObject *self, void *closure) {
  const dlop_tensor *t = tensor_of(self);
  return t ? PyLong_FromLong(t->ndim) : NULL;
}

static PyObject *array_get_size(PyObject *self, void *closure) {
  const dlop_tensor *t = tensor_of(self);
  return t ? PyLong_FromLongLong(dlop_tensor_numel(t)) : NULL;
}

/* The struct-module format of a dtype for the buffer protocol; NULL for bfloat16 (none). */
static const char *buffer_format(dlop_dtype dtype) {
  switch (dtype) {
    case DLOP_BOOL: return "?";
    case DLOP_INT8: return "b";
    case DLOP_INT16: return "h";
    case DLOP_INT32: return "i";
    case DLOP_INT64: return "q";
    case DLOP_UINT8: return "B";
    case DLOP_FLOAT16: return "e";
    case DLOP_FLOAT32: return "f";
    case DLOP_FLOAT64: return "d";
    default: return NULL;
  }
}

/* The buffer protocol (CPU only): NumPy and memoryview see the memory without a copy. */
static int array_getbuffer(PyObject *self, Py_buffer *view, int flags) {
  dlop_py_state *state = state_of(self);
  view->obj = NULL;
  dlop_array *array = dlop_py_array_get(self);
  if (array == NULL) return -1;
  const dlop_tensor *t = dlop_array_tensor(array);
  dlop_dtype dtype = dlop_tensor_dtype(t);
  if (t->device.type != DLOP_DEVICE_CPU) {
    char text[32];
    dlop_py_raisef(state, DLOP_DEVICE_MISMATCH,
                   "a dlop.Array on %s has no host buffer; call .numpy() to copy it to the host",
                   dlop_device_format(t->device, text, sizeof text));
    return -1;
  }
  const char *format = buffer_format(dtype);
  if (format == NULL) {
    dlop_py_raisef(state, DLOP_UNSUPPORTED,
                   "a %s array has no buffer-protocol format; convert it to float32 first",
                   dlop_dtype_name(dtype));
    return -1;
  }
  /* Shape and strides (bytes) live in one block freed by releasebuffer. */
  Py_ssize_t *dims = PyMem_Malloc(sizeof(Py_ssize_t) * 2 * (size_t)(t->ndim > 0 ? t->ndim : 1));
  if (dims == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  size_t item = dlop_dtype_size(dtype);
  /* len is numel * itemsize even for a zero-stride view (the buffer protocol's rule, and
   * NumPy's): it and the strides in bytes must fit Py_ssize_t. libdlop's arrays obey
   * checked_size.h, so this refuses nothing they can hold; it is the one check on this path. */
  int64_t numel, bytes, low, high, c_strides[DLOP_MAX_NDIM];
  int size = dlop_shape_size(t->shape, t->ndim, (int64_t)item, &numel, &bytes);
  if (size != DLOP_SIZE_FITS ||
      (t->strides == NULL && dlop_contiguous_strides(t->shape, t->ndim, c_strides)) ||
      (t->strides != NULL && numel > 0 &&
       dlop_strided_extent(t->shape, t->strides, t->ndim, (int64_t)item, 0, &low, &high, NULL))) {
    char what[512];
    PyMem_Free(dims);
    dlop_set_size_error(what, sizeof what, NULL, size == DLOP_SIZE_FITS ? DLOP_SIZE_TOO_MANY_BYTES : size,
                        t->shape, t->ndim, (int32_t)dtype);
    dlop_py_raisef(state, DLOP_SHAPE_ERROR, "a buffer of this dlop.Array: %s", what);
    return -1;
  }
  for (int32_t i = t->ndim - 1; i >= 0; i--) {
    dims[i] = (Py_ssize_t)t->shape[i];
    dims[t->ndim + i] = (Py_ssize_t)((t->strides ? t->strides[i] : c_strides[i]) * (int64_t)item);
  }
  if (((dlop_py_array *)self)->readonly && (flags & PyBUF_WRITABLE) == PyBUF_WRITABLE) {
    PyMem_Free(dims);
    PyErr_SetString(PyExc_BufferError,
                    "this dlop.Array borrows read-only memory; a writable buffer was asked");
    return -1;
  }
  int contiguous = dlop_tensor_is_contiguous(t);
  if (!contiguous && (flags & PyBUF_STRIDES) != PyBUF_STRIDES) {
    PyMem_Free(dims);
    PyErr_SetString(PyExc_BufferError, "dlop.Array is not C-contiguous; the consumer must accept strides");
    return -1;
  }
  view->buf = dlop_tensor_base(t);
  view->obj = Py_NewRef(self);
  view->len = (Py_ssize_t)bytes;
  view->itemsize = (Py_ssize_t)item;
  view->readonly = ((dlop_py_array *)self)->readonly;
  view->ndim = t->ndim;
  view->format = (flags & PyBUF_FORMAT) ? (char *)format : NULL;
  view->shape = dims;
  view->strides = dims + t->ndim;
  view->suboffsets = NULL;
  view->internal = dims;
  /* Writes through the buffer must see finished writes: wait for pending work (CPU: none). */
  return 0;
}

static void array_releasebuffer(PyObject *self, Py_buffer *view) { PyMem_Free(view->internal); }

static PyObject *array_numpy(PyObject *self, PyObject *unused) {
  dlop_py_state *state = state_of(self);
  dlop_array *array = dlop_py_array_get(self);
  if (array == NULL) return NULL;
  const dlop_tensor *t = dlop_array_tensor(array);
  PyObject *numpy = dlop_py_numpy(state);
  if (numpy == NULL) return NULL;
  if (t->device.type == DLOP_DEVICE_CPU) {
    /* The same memory, no copy (like torch.Tensor.numpy()). */
    PyObject *view = PyMemoryView_FromObject(self);
    if (view == NULL) return NULL;
    PyObject *result = PyObject_CallMethod(numpy, "asarray", "O", view);
    Py_DECREF(view);
    return result;
  }
  dlop_dtype dtype = dlop_tensor_dtype(t);
  if (buffer_format(dtype) == NULL)
    return dlop_py_raisef(state, DLOP_UNSUPPORTED, "NumPy has no %s dtype", dlop_dtype_name(dtype));
  PyObject *shape = array_get_shape(self, NULL);
  if (shape == NULL) return NULL;
  PyObject *host = PyObject_CallMethod(numpy, "empty", "Os", shape, dlop_dtype_name(dtype));
  Py_DECREF(shape);
  if (host == NULL) return NULL;
  Py_buffer buffer;
  if (PyObject_GetBuffer(host, &buffer, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
    Py_DECREF(host);
    return NULL;
  }
  int status;
  Py_BEGIN_ALLOW_THREADS
  status = dlop_array_to_host(array, buffer.buf, (size_t)buffer.len);
  Py_END_ALLOW_THREADS
  PyBuffer_Release(&buffer);
  if (status != DLOP_OK) {
    Py_DECREF(host);
    return dlop_py_raise(state, status, "copying a dlop.Array to the host");
  }
  return host;
}

/* __array__(dtype=None, copy=None): NumPy's conversion; the CPU only, never a hidden copy
 * from the GPU. */
static PyObject *array_array(PyObject *self, PyObject *args, PyObject *kwargs) {
  static char *keywords[] = {"dtype", "copy", NULL};
  PyObject *dtype = Py_None, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO:__array__", keywords, &dtype, &copy))
    return NULL;
  dlop_py_state *state = state_of(self);
  const dlop_tensor *t = tensor_of(self);
  if (t == NULL) return NULL;
  if (t->device.type != DLOP_DEVICE_CPU) {
    char text[32];
    return dlop_py_raisef(state, DLOP_DEVICE_MISMATCH,
                          "this dlop.Array lives on %s: NumPy cannot read it in place, and dlop "
                          "never copies from the GPU behind your back; call .numpy() to copy it "
                          "to the host", dlop_device_format(t->device, text, sizeof text));
  }
  PyObject *host = array_numpy(self, NULL);
  if (host == NULL) return NULL;
  PyObject *converted = NULL;
  if (dtype != Py_None)
    converted = PyObject_CallMethod(host, "astype", "OO", dtype, copy == Py_True ? Py_True : Py_False);
  else if (copy == Py_True)
    converted = PyObject_CallMethod(host, "copy", NULL);
  else
    return host;
  Py_DECREF(host);
  return converted;
}

/* to(device): a copy on another device, or this array when it is already there. */
static PyObject *array_to(PyObject *self, PyObject *device_object) {
  dlop_py_state *state = state_of(self);
  dlop_array *array = dlop_py_array_get(self);
  if (array == NULL) return NULL;
  dlop_device device;
  if (dlop_py_parse_device(state, device_object, &device) < 0) return NULL;
  dlop_device here = dlop_array_device(array);
  if (here.type == device.type && here.id == device.id) return Py_NewRef(self);
  /* A copy is our own memory: writable, whatever the source was. */
  int status = dlop_device_check(device);
  if (status != DLOP_OK) return dlop_py_raise(state, status, NULL);
  dlop_array *copy = NULL;
  Py_BEGIN_ALLOW_THREADS
  status = dlop_array_copy_to(array, device, &copy);
  Py_END_ALLOW_THREADS
  if (status != DLOP_OK) return dlop_py_raise(state, status, "dlop.Array.to");
  return dlop_py_array_new(state, copy);
}

static PyObject *array_synchronize(PyObject *self, PyObject *unused) {
  int status;
  dlop_array *array = dlop_py_array_get(self);
  if (array == NULL) return NULL;
  Py_BEGIN_ALLOW_THREADS
  status = dlop_array_synchronize(array);
  Py_END_ALLOW_THREADS
  if (status != DLOP_OK) return dlop_py_raise(state_of(self), status, NULL);
  Py_RETURN_NONE;
}

static PyObject *array_repr(PyObject *self) {
  const char *expired_op = ((dlop_py_array *)self)->expired_op;
  if (expired_op != NULL) /* printing it is no use of the memory: it says what happened */
    return PyUnicode_FromFormat("dlop.Array(expired: lent for one run of '%s')", expired_op);
  PyObject *shape = array_get_shape(self, NULL);
  if (shape == NULL) return NULL;
  const dlop_tensor *t = tensor_of(self);
  char text[32];
  PyObject *result = PyUnicode_FromFormat("dlop.Array(shape=%R, dtype=%s, device=%s)", shape,
                                          dlop_dtype_name(dlop_tensor_dtype(t)),
                                          dlop_device_format(t->device, text, sizeof text));
  Py_DECREF(shape);
  return result;
}

static Py_ssize_t array_length(PyObject *self) {
  const dlop_tensor *t = tensor_of(self);
  if (t == NULL) return -1;
  if (t->ndim == 0) {
    PyErr_SetString(PyExc_TypeError, "len() of a 0-d dlop.Array");
    return -1;
  }
  return (Py_ssize_t)t->shape[0];
}

static PyObject *array_data_pointer(PyObject *self, void *closure) {
  const dlop_tensor *t = tensor_of(self);
  return t ? PyLong_FromVoidPtr(dlop_tensor_base(t)) : NULL;
}

static PyGetSetDef array_getset[] = {
    {"device", array_get_device, NULL, "'cpu' or 'cuda:N'.", NULL},
    {"shape", array_get_shape, NULL, "Tuple of dimensions.", NULL},
    {"strides", array_get_strides, NULL, "Strides in elements (DLPack's convention).", NULL},
    {"dtype", array_get_dtype, NULL, "Element type name, e.g. 'float32'.", NULL},
    {"ndim", array_get_ndim, NULL, "Number of dimensions.", NULL},
    {"size", array_get_size, NULL, "Number of elements.", NULL},
    {"data_pointer", array_data_pointer, NULL, "Address of the first element.", NULL},
    {"__cuda_array_interface__", dlop_py_array_cai, NULL,
     "CUDA Array Interface version 3 (CUDA arrays only; AttributeError on the CPU).", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef array_methods[] = {
    {"numpy", array_numpy, METH_NOARGS,
     "A NumPy array: the same memory on the CPU, a host copy of a CUDA array."},
    {"__array__", (PyCFunction)(void (*)(void))array_array, METH_VARARGS | METH_KEYWORDS,
     "NumPy conversion without a copy (CPU arrays only)."},
    {"__dlpack__", (PyCFunction)(void (*)(void))dlop_py_array_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "__dlpack__(stream=None, max_version=None, dl_device=None, copy=None) -> capsule."},
    {"__dlpack_device__", dlop_py_array_dlpack_device, METH_NOARGS,
     "(device_type, device_id) as DLPack numbers them."},
    {"to", array_to, METH_O, "to(device) -> Array: a copy on device (self when already there)."},
    {"synchronize", array_synchronize, METH_NOARGS, "Wait for pending writes to this array."},
    {NULL, NULL, 0, NULL}};

static PyType_Slot array_slots[] = {
    {Py_tp_doc, (void *)"An n-dimensional array on a dlop device (CPU or CUDA). Results of dlop "
                        "functions and ops; exchanged without copies through the buffer "
                        "protocol, DLPack and __cuda_array_interface__."},
    {Py_tp_dealloc, (void *)array_dealloc},
    {Py_tp_getset, array_getset},
    {Py_tp_methods, array_methods},
    {Py_tp_repr, (void *)array_repr},
    {Py_sq_length, (void *)array_length},
    {Py_bf_getbuffer, (void *)array_getbuffer},
    {Py_bf_releasebuffer, (void *)array_releasebuffer},
    {0, NULL}};

static PyType_Spec array_spec = {"dlop.Array", sizeof(dlop_py_array), 0,
                                 Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
                                 array_slots};

int dlop_py_add_array_type(PyObject *module, dlop_py_state *state) {
  state->array_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &array_spec, NULL);
  if (state->array_type == NULL) return -1;
  state->array_alloc = (allocfunc)PyType_GetSlot(state->array_type, Py_tp_alloc);
  return PyModule_AddType(module, state->array_type);
}
