/* cuda_kernel.c — dlop._C.CudaKernel, what dlop.SourceModule.get_function returns: one kernel
 * of a module compiled from source, launched through vectorcall with its arguments packed here
 * in C from a per-kernel list of type codes (read once from the source, or declared), and the
 * module functions SourceModule compiles and loads with (dlop/cuda_source.h). */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "dlpack_abi.h"
#include "module.h"

#include <structmember.h> /* PyMemberDef for __vectorcalloffset__ */

/* The most parameters a kernel takes here (CUDA allows 32764 bytes of them). */
#define MAX_PARAMS 512

typedef struct cuda_kernel {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  void *function;
  int32_t device_id;
  int32_t num_params;     /* -1 while the arguments are unknown */
  char codes[MAX_PARAMS]; /* one type code per parameter (see code_text) */
  PyObject *owner;        /* the SourceModule: keeps the module loaded */
  PyObject *name;         /* str */
  PyObject *param_names;  /* tuple of str, for messages */
  PyObject *param_types;  /* tuple of str (the C types), for messages */
  PyObject *unknown_why;  /* str: why the arguments are unknown (num_params -1) */
} cuda_kernel;

static dlop_py_state *state_of(PyObject *self) { return dlop_py_state_of_type(Py_TYPE(self)); }

/* The codes, as in Python's struct module (and PyCUDA's prepare), plus P for any pointer. */
static const char *code_text(char code) {
  switch (code) {
    case 'P': return "a pointer";
    case '?': return "bool";
    case 'b': return "signed char";
    case 'B': return "unsigned char";
    case 'h': return "short";
    case 'H': return "unsigned short";
    case 'i': return "int";
    case 'I': return "unsigned int";
    case 'l': case 'q': return "long long";
    case 'L': case 'Q': return "unsigned long long";
    case 'f': return "float";
    case 'd': return "double";
    default: return NULL;
  }
}

/* ---- arguments ------------------------------------------------------------------------- */

/* "argument 2 'a' (const float *)" for messages. */
static PyObject *describe(cuda_kernel *self, Py_ssize_t i) {
  PyObject *name = self->param_names ? PyTuple_GetItem(self->param_names, i) : NULL;
  PyObject *type = self->param_types ? PyTuple_GetItem(self->param_types, i) : NULL;
  if (name == NULL || type == NULL) {
    PyErr_Clear();
    return PyUnicode_FromFormat("argument %zd (%s)", i + 1, code_text(self->codes[i]));
  }
  return PyUnicode_FromFormat("argument %zd '%U' (%U)", i + 1, name, type);
}

/* Whether parameter i is a const pointer: its C type (read from the source, or declared as a C
 * type) says so. A type declared only by its code ("P") says nothing, and is taken as const. */
static int pointer_is_const(cuda_kernel *self, Py_ssize_t i) {
  PyObject *type = self->param_types ? PyTuple_GetItem(self->param_types, i) : NULL;
  if (type == NULL) {
    PyErr_Clear();
    return 1;
  }
  const char *text = PyUnicode_AsUTF8AndSize(type, NULL);
  if (text == NULL) {
    PyErr_Clear();
    return 1;
  }
  if (strcmp(text, "pointer") == 0) return 1; /* declared by its code */
  const char *star = strrchr(text, '*');
  /* "const float *" or "float const *": const before the last '*' qualifies the pointee */
  const char *found = strstr(text, "const");
  return found != NULL && (star == NULL || found < star);
}

static int fail_argument(cuda_kernel *self, Py_ssize_t i, PyObject *exception, int status,
                         const char *format, PyObject *value) {
  PyObject *what = describe(self, i);
  if (what == NULL) return -1;
  PyObject *detail = PyUnicode_FromFormat(format, value);
  if (detail != NULL) {
    if (exception != NULL)
      PyErr_Format(exception, "kernel '%U': %U %U", self->name, what, detail);
    else
      dlop_py_raisef(state_of((PyObject *)self), status, "kernel '%U': %U %U", self->name, what,
                     detail);
  }
  Py_XDECREF(detail);
  Py_DECREF(what);
  return -1;
}

/* A Python int (or anything with __index__) for an integer code, range-checked. */
static int pack_integer(cuda_kernel *self, Py_ssize_t i, PyObject *value, char code,
                        uint64_t *slot) {
  if (PyFloat_Check(value) || !PyIndex_Check(value))
    return fail_argument(self, i, NULL, DLOP_TYPE_ERROR, "takes an integer, not %R", value);
  PyObject *integer = PyNumber_Index(value);
  if (integer == NULL) return -1;
  int overflow = 0;
  long long low = 0, high = 0;
  unsigned long long unsigned_high = 0;
  int is_unsigned = code == 'B' || code == 'H' || code == 'I' || code == 'L' || code == 'Q';
  switch (code) {
    case '?': low = 0, high = 1; break;
    case 'b': low = SCHAR_MIN, high = SCHAR_MAX; break;
    case 'h': low = SHRT_MIN, high = SHRT_MAX; break;
    case 'i': low = INT_MIN, high = INT_MAX; break;
    case 'l': case 'q': low = LLONG_MIN, high = LLONG_MAX; break;
    case 'B': unsigned_high = UCHAR_MAX; break;
    case 'H': unsigned_high = USHRT_MAX; break;
    case 'I': unsigned_high = UINT_MAX; break;
    default: unsigned_high = ULLONG_MAX; break;
  }
  long long v = PyLong_AsLongLongAndOverflow(integer, &overflow);
  if (v == -1 && PyErr_Occurred()) {
    Py_DECREF(integer);
    return -1;
  }
  int ok;
  if (is_unsigned && overflow == 1) { /* above LLONG_MAX: only unsigned long long holds it */
    unsigned long long big = PyLong_AsUnsignedLongLong(integer);
    if (big == (unsigned long long)-1 && PyErr_Occurred()) PyErr_Clear(), big = 0, overflow = 2;
    ok = overflow != 2 && big <= unsigned_high;
    *slot = big;
  } else if (is_unsigned) {
    ok = !overflow && v >= 0 && (unsigned long long)v <= unsigned_high;
    *slot = (uint64_t)v;
  } else {
    ok = !overflow && v >= low && v <= high;
    *slot = (uint64_t)v;
  }
  if (!ok) {
    fail_argument(self, i, PyExc_OverflowError, 0, "cannot hold %R: out of its range", integer);
    Py_DECREF(integer);
    return -1;
  }
  Py_DECREF(integer);
  return 0;
}

static int pack_real(cuda_kernel *self, Py_ssize_t i, PyObject *value, char code,
                     uint64_t *slot) {
  if (!PyFloat_Check(value) && !PyIndex_Check(value) &&
      PyObject_HasAttrString(value, "__float__") != 1)
    return fail_argument(self, i, NULL, DLOP_TYPE_ERROR, "takes a real number, not %R", value);
  double v = PyFloat_AsDouble(value);
  if (v == -1.0 && PyErr_Occurred()) return -1;
  if (code == 'd') {
    memcpy(slot, &v, sizeof v);
    return 0;
  }
  if (isfinite(v) && fabs(v) > FLT_MAX)
    return fail_argument(self, i, PyExc_OverflowError, 0,
                         "cannot hold %R: beyond float's range (3.4e38)", value);
  float f = (float)v;
  memcpy(slot, &f, sizeof f);
  return 0;
}

/* The producer's __cuda_array_interface__ getter raised (PyTorch's for a tensor that requires
 * grad): an InvalidArgumentError naming the argument and carrying the producer's message, the
 * producer's exception as its __cause__. KeyboardInterrupt, MemoryError and the like go up as
 * they are. */
static int fail_interface(cuda_kernel *self, Py_ssize_t i, PyObject *value) {
  if (!PyErr_ExceptionMatches(PyExc_Exception) || PyErr_ExceptionMatches(PyExc_MemoryError))
    return -1;
  PyObject *type, *cause, *traceback;
  PyErr_Fetch(&type, &cause, &traceback);
  PyErr_NormalizeException(&type, &cause, &traceback);
  if (traceback != NULL) PyException_SetTraceback(cause, traceback);
  PyObject *name = PyObject_GetAttrString(type, "__name__");
  PyObject *text = name ? PyObject_Str(cause) : NULL;
  PyObject *detail = text ? PyUnicode_FromFormat("%U: %U", name, text) : NULL;
  Py_XDECREF(name);
  Py_XDECREF(text);
  Py_XDECREF(type);
  Py_XDECREF(traceback);
  if (detail == NULL) {
    Py_XDECREF(cause);
    return -1;
  }
  PyObject *what = describe(self, i);
  if (what != NULL)
    dlop_py_raisef(state_of((PyObject *)self), DLOP_INVALID_ARGUMENT,
                   "kernel '%U': %U got %R, whose __cuda_array_interface__ raised %U", self->name,
                   what, (PyObject *)Py_TYPE(value), detail);
  Py_XDECREF(what);
  Py_DECREF(detail);
  PyObject *raised_type, *raised, *raised_traceback;
  PyErr_Fetch(&raised_type, &raised, &raised_traceback);
  PyErr_NormalizeException(&raised_type, &raised, &raised_traceback);
  if (raised != NULL && cause != NULL) PyException_SetCause(raised, cause); /* steals cause */
  else Py_XDECREF(cause);
  PyErr_Restore(raised_type, raised, raised_traceback);
  return -1;
}

/* The device memory an array argument points to: a dlop.Array, a torch.Tensor or cupy.ndarray
 * (read directly: framework_arrays.c), a __cuda_array_interface__ producer (CuPy, Numba,
 * PyTorch subclasses), a DLPack producer (JAX, ...). Nothing is copied; memory on the CPU or
 * another GPU is refused. *dlop_array is set for a dlop.Array (its stream is ordered with the
 * launch by the caller); *producer to a foreign producer's stream the launch must wait for
 * (NULL: none). */
static int pack_pointer(cuda_kernel *self, Py_ssize_t i, PyObject *value, void *stream,
                        dlop_py_framework_call *call, void **slot,
                        dlop_array **dlop_array_out, void **producer_out) {
  dlop_py_state *state = state_of((PyObject *)self);
  *dlop_array_out = NULL;
  *producer_out = NULL;
  if (value == Py_None) {
    *slot = NULL;
    return 0;
  }
  dlop_device device = {DLOP_DEVICE_CPU, 0};
  void *data = NULL;
  if (PyObject_TypeCheck(value, state->array_type)) {
    dlop_array *array = dlop_py_array_get(value); /* NULL: expired (py_op.c) */
    if (array == NULL) return -1;
    /* A read-only dlop.Array (a Python op's inputs, a read-only producer's memory) only for a
     * parameter the kernel cannot write through, as for read-only CAI data below. */
    if (((dlop_py_array *)value)->readonly && !pointer_is_const(self, i))
      return fail_argument(self, i, NULL, DLOP_INVALID_ARGUMENT,
                           "got a read-only dlop.Array (%R) for a parameter that is not a const "
                           "pointer (the kernel may write it): declare it const",
                           value);
    const dlop_tensor *tensor = dlop_array_tensor(array);
    device = tensor->device;
    data = (char *)tensor->data + tensor->byte_offset;
    *dlop_array_out = array;
  } else {
    dlop_py_framework_array read;
    int fast = dlop_py_framework_array_read(state, value, self->device_id, call, &read);
    if (fast < 0) return -1;
    if (fast) {
      /* As the library's interface would say: writable memory (so any parameter takes it),
       * pointer 0 for an empty array (passed as NULL, on no device in particular). */
      *slot = read.data;
      if (read.data == NULL) return 0;
      device.type = DLOP_DEVICE_CUDA;
      device.id = read.device_id;
      if (device.id != self->device_id) goto other_device;
      *producer_out = read.producer;
      return 0;
    }
    PyObject *interface = PyObject_GetAttr(value, state->str_cai);
    if (interface != NULL) {
      PyObject *pair = PyDict_Check(interface) ? PyDict_GetItemString(interface, "data") : NULL;
      if (pair == NULL || !PyTuple_Check(pair) || PyTuple_Size(pair) != 2) {
        Py_DECREF(interface);
        return fail_argument(self, i, NULL, DLOP_INVALID_ARGUMENT,
                             "got %R, whose __cuda_array_interface__ has no 'data' (pointer, "
                             "read_only)", value);
      }
      data = PyLong_AsVoidPtr(PyTuple_GetItem(pair, 0));
      int read_only = data == NULL && PyErr_Occurred() ? 0 : PyObject_IsTrue(PyTuple_GetItem(pair, 1));
      PyObject *producer_stream = PyErr_Occurred() ? NULL : PyDict_GetItemString(interface, "stream");
      int names_stream = producer_stream != NULL;
      void *producer = producer_stream && producer_stream != Py_None
                           ? PyLong_AsVoidPtr(producer_stream) : NULL;
      Py_DECREF(interface);
      if (PyErr_Occurred()) return -1;
      /* an immutable array (JAX's, or one marked read-only) is refused where the kernel's
       * parameter may write it: a pointer whose type, read or declared as a C type, is not const */
      if (read_only && !pointer_is_const(self, i))
        return fail_argument(self, i, NULL, DLOP_INVALID_ARGUMENT,
                             "got %R, whose __cuda_array_interface__ says it is read-only, for a "
                             "parameter that is not a const pointer (the kernel may write it)",
                             value);
      *slot = data;
      if (data == NULL) return 0; /* an empty array */
      device.type = DLOP_DEVICE_CUDA;
      int status = dlop_cuda_pointer_device(data, &device.id);
      if (status != DLOP_OK)
        return fail_argument(self, i, NULL, status,
                             "got %R, whose __cuda_array_interface__ pointer is not CUDA memory",
                             value);
      if (device.id != self->device_id) goto other_device;
      /* CAI version 3: the launch is ordered after the producer's stream (by the caller). An
       * interface without a stream entry (version 2) from a torch.Tensor subclass: after
       * PyTorch's current stream, as for a torch.Tensor. */
      if (!names_stream) {
        int torch = dlop_py_framework_torch_stream(state, value, self->device_id, call, &producer);
        if (torch < 0) return -1;
      }
      *producer_out = producer;
      return 0;
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return fail_interface(self, i, value);
    PyErr_Clear();
    PyObject *where = PyObject_CallMethod(value, "__dlpack_device__", NULL);
    if (where == NULL) {
      PyErr_Clear();
      if (PyObject_CheckBuffer(value) || PyObject_HasAttrString(value, "__array_interface__") == 1)
        return fail_argument(self, i, NULL, DLOP_DEVICE_MISMATCH,
                             "got %R, which lives on the CPU: kernels read GPU memory (move it "
                             "first: dlop.asarray(x, device='cuda'), cupy.asarray(x), "
                             "torch.as_tensor(x, device='cuda'))", (PyObject *)Py_TYPE(value));
      return fail_argument(self, i, NULL, DLOP_TYPE_ERROR,
                           "takes a GPU array (a dlop.Array, or an object with "
                           "__cuda_array_interface__ or __dlpack__) or None, not %R",
                           (PyObject *)Py_TYPE(value));
    }
    int device_type = 0, device_id = 0;
    int parsed = dlop_py_device_pair(where, &device_type, &device_id);
    Py_DECREF(where);
    if (parsed < 0) return -1;
    if (parsed == 0 || (device_type != DLOP_DEVICE_CUDA && device_type != DLOP_DLPACK_CUDA_MANAGED))
      return fail_argument(self, i, NULL, DLOP_DEVICE_MISMATCH,
                           "got %R, which lives in host memory (its __dlpack_device__ is not "
                           "CUDA): kernels read GPU memory (move it first: dlop.asarray(x, "
                           "device='cuda'), cupy.asarray(x), torch.as_tensor(x, device='cuda'))",
                           (PyObject *)Py_TYPE(value));
    device.type = DLOP_DEVICE_CUDA;
    device.id = device_id;
    if (device.id != self->device_id) goto other_device;
    /* DLPack: the producer orders its pending work before our stream. */
    PyObject *capsule = NULL;
    PyObject *kwargs = Py_BuildValue("{s:N}", "stream", PyLong_FromVoidPtr(stream));
    PyObject *empty = PyTuple_New(0);
    PyObject *method = PyObject_GetAttr(value, state->str_dlpack);
    Py_XDECREF(capsule);
    capsule = method && kwargs && empty ? PyObject_Call(method, empty, kwargs) : NULL;
    Py_XDECREF(method);
    Py_XDECREF(kwargs);
    Py_XDECREF(empty);
    if (capsule == NULL) return -1;
    dlop_dl_managed_tensor *managed = PyCapsule_GetPointer(capsule, "dltensor");
    if (managed == NULL) {
      Py_DECREF(capsule);
      return -1;
    }
    *slot = (char *)managed->dl_tensor.data + managed->dl_tensor.byte_offset;
    /* Not consumed: dropping the capsule calls its deleter; value itself keeps the memory. */
    Py_DECREF(capsule);
    return 0;
  }
  if (device.type != DLOP_DEVICE_CUDA)
    return fail_argument(self, i, NULL, DLOP_DEVICE_MISMATCH,
                         "got a dlop.Array on the CPU: kernels read GPU memory (move it first: "
                         "dlop.asarray(x, device='cuda'))", NULL);
  if (device.id != self->device_id) goto other_device;
  *slot = data;
  return 0;
other_device:;
  char text[96];
  PyOS_snprintf(text, sizeof text, "got an array on cuda:%d, but the kernel is loaded on cuda:%d",
                (int)device.id, (int)self->device_id);
  PyObject *message = PyUnicode_FromString(text);
  if (message == NULL) return -1;
  fail_argument(self, i, NULL, DLOP_DEVICE_MISMATCH, "%U", message);
  Py_DECREF(message);
  return -1;
}

/* ---- launch options ---------------------------------------------------------------------- */

/* block=, grid=: an int or a tuple of 1 to 3 ints, each within unsigned int (> 0 for block). */
static int parse_dims(dlop_py_state *state, PyObject *value, const char *what, uint32_t dims[3]) {
  dims[0] = dims[1] = dims[2] = 1;
  PyObject *items = PyTuple_Check(value) ? Py_NewRef(value)
                    : PyList_Check(value) ? PyList_AsTuple(value)
                    : PyIndex_Check(value) ? PyTuple_Pack(1, value) : NULL;
  if (items == NULL) {
    if (!PyErr_Occurred())
      dlop_py_raisef(state, DLOP_TYPE_ERROR, "%s= takes a tuple of 1 to 3 ints (x, y, z), not %R",
                     what, value);
    return -1;
  }
  Py_ssize_t n = PyTuple_Size(items);
  int status = 0;
  if (n < 1 || n > 3) {
    dlop_py_raisef(state, DLOP_INVALID_ARGUMENT, "%s= takes 1 to 3 sizes (x, y, z), got %zd", what,
                   n);
    status = -1;
  }
  for (Py_ssize_t d = 0; d < n && status == 0; d++) {
    PyObject *item = PyTuple_GetItem(items, d);
    long long size = PyIndex_Check(item) && !PyFloat_Check(item) ? PyLong_AsLongLong(item) : -2;
    if (size == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      size = -3;
    }
    long long lowest = what[0] == 'b' ? 1 : 0;
    if (size < lowest || size > (long long)UINT32_MAX) {
      dlop_py_raisef(state, size == -2 ? DLOP_TYPE_ERROR : DLOP_INVALID_ARGUMENT,
                     "%s=%R: size %zd must be an int in %lld .. 4294967295", what, value, d,
                     lowest);
      status = -1;
    } else {
      dims[d] = (uint32_t)size;
    }
  }
  Py_DECREF(items);
  return status;
}

/* stream=: None or 0 (the legacy default stream), an int handle, or a stream object of CuPy
 * (.ptr), PyTorch (.cuda_stream), Numba (.handle) or one with __cuda_stream__. */
static int parse_stream(dlop_py_state *state, PyObject *value, void **stream) {
  if (value == Py_None) {
    *stream = (void *)(uintptr_t)1;
    return 0;
  }
  PyObject *handle = NULL;
  if (PyLong_Check(value)) {
    handle = Py_NewRef(value);
  } else if (PyObject_HasAttrString(value, "__cuda_stream__") == 1) {
    PyObject *pair = PyObject_CallMethod(value, "__cuda_stream__", NULL);
    if (pair == NULL) return -1;
    if (PyTuple_Check(pair) && PyTuple_Size(pair) == 2)
      handle = Py_NewRef(PyTuple_GetItem(pair, 1));
    Py_DECREF(pair);
  } else {
    static const char *const names[] = {"cuda_stream", "ptr", "handle"};
    for (int n = 0; n < 3 && handle == NULL; n++) {
      handle = PyObject_GetAttrString(value, names[n]);
      if (handle == NULL) PyErr_Clear();
    }
    /* Numba's handle is a ctypes c_void_p: its .value */
    if (handle != NULL && !PyLong_Check(handle) && PyObject_HasAttrString(handle, "value") == 1) {
      PyObject *inner = PyObject_GetAttrString(handle, "value");
      Py_DECREF(handle);
      handle = inner;
      if (handle == Py_None) {
        Py_DECREF(handle);
        handle = PyLong_FromLong(0);
      }
    }
  }
  if (handle == NULL || !PyLong_Check(handle)) {
    Py_XDECREF(handle);
    if (!PyErr_Occurred())
      dlop_py_raisef(state, DLOP_TYPE_ERROR,
                   "stream= takes None (CUDA's legacy default stream), an int CUstream handle, "
                   "or a CuPy, PyTorch or Numba stream, not %R",
                   value);
    return -1;
  }
  void *pointer = PyLong_AsVoidPtr(handle);
  Py_DECREF(handle);
  if (pointer == NULL && PyErr_Occurred()) return -1;
  *stream = pointer ? pointer : (void *)(uintptr_t)1;
  return 0;
}

/* ---- the call ---------------------------------------------------------------------------- */

/* Add producer to the distinct streams the launch waits for (never the launch's own). */
static void add_wait(void **waits, int *num_waits, void *producer, void *stream) {
  if (producer == NULL || producer == stream) return;
  for (int w = 0; w < *num_waits; w++)
    if (waits[w] == producer) return;
  waits[(*num_waits)++] = producer;
}

static PyObject *kernel_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames) {
  cuda_kernel *self = (cuda_kernel *)callable;
  dlop_py_state *state = state_of(callable);
  Py_ssize_t nargs = DLOP_PY_NARGS(nargsf);
  if (self->num_params < 0)
    return dlop_py_raisef(state, DLOP_TYPE_ERROR,
                          "kernel '%U': its arguments are unknown (%U): declare them, "
                          "k.prepare(\"PPPi\") or get_function(name, arg_types=...)",
                          self->name, self->unknown_why);
  PyObject *block = NULL, *grid = NULL, *shared = NULL, *stream_object = NULL;
  Py_ssize_t nkw = kwnames ? PyTuple_Size(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; k++) {
    PyObject *key = PyTuple_GetItem(kwnames, k);
    PyObject *value = args[nargs + k];
    const char *name = PyUnicode_AsUTF8AndSize(key, NULL);
    if (name == NULL) return NULL;
    if (strcmp(name, "block") == 0) block = value;
    else if (strcmp(name, "grid") == 0) grid = value;
    else if (strcmp(name, "shared") == 0) shared = value;
    else if (strcmp(name, "stream") == 0) stream_object = value;
    else
      return dlop_py_raisef(state, DLOP_TYPE_ERROR,
                          "kernel '%U': unknown keyword argument '%s' (expected block=, grid=, "
                          "shared=, stream=)",
                          self->name, name);
  }
  if (nargs != self->num_params) {
    PyObject *separator = PyUnicode_FromString(", ");
    PyObject *types = separator ? PyUnicode_Join(separator, self->param_types) : NULL;
    Py_XDECREF(separator);
    if (types == NULL) return NULL;
    dlop_py_raisef(state, DLOP_TYPE_ERROR, "kernel '%U' takes %d arguments (%U), got %zd",
                   self->name, (int)self->num_params, types, nargs);
    Py_DECREF(types);
    return NULL;
  }
  if (block == NULL)
    return dlop_py_raisef(state, DLOP_TYPE_ERROR,
                        "kernel '%U': block= is required (threads per block, e.g. (256, 1, 1))",
                        self->name);
  uint32_t block_dims[3], grid_dims[3] = {1, 1, 1};
  if (parse_dims(state, block, "block", block_dims) < 0) return NULL;
  if (grid != NULL && parse_dims(state, grid, "grid", grid_dims) < 0) return NULL;
  uint32_t shared_bytes = 0;
  if (shared != NULL) {
    long long value = PyIndex_Check(shared) && !PyFloat_Check(shared) ? PyLong_AsLongLong(shared) : -1;
    if (value == -1 && PyErr_Occurred()) PyErr_Clear();
    if (value < 0 || value > (long long)UINT32_MAX)
      return dlop_py_raisef(state, DLOP_INVALID_ARGUMENT,
                            "kernel '%U': shared=%R: expected a byte count, an int in 0 .. "
                            "4294967295",
                            self->name, shared);
    shared_bytes = (uint32_t)value;
  }
  void *stream = (void *)(uintptr_t)1;
  if (stream_object != NULL && parse_stream(state, stream_object, &stream) < 0) return NULL;

  uint64_t slots[MAX_PARAMS];
  void *pointers[MAX_PARAMS];
  dlop_array *arrays[MAX_PARAMS];
  int num_arrays = 0;
  /* The distinct streams the launch waits for (foreign producers' first, then dlop's), at most
   * one per argument. */
  void *waits[MAX_PARAMS];
  int num_waits = 0;
  dlop_py_framework_call call = {0};
  /* The codes as they are now: packing runs Python code (__index__, __dlpack__), which may call
   * prepare() and change them mid-call. */
  char codes[MAX_PARAMS];
  memcpy(codes, self->codes, (size_t)nargs);
  for (Py_ssize_t i = 0; i < nargs; i++) {
    char code = codes[i];
    pointers[i] = &slots[i];
    slots[i] = 0;
    int failed;
    if (code == 'P') {
      dlop_array *array = NULL;
      void *producer = NULL;
      failed = pack_pointer(self, i, args[i], stream, &call, (void **)&slots[i], &array,
                            &producer);
      if (array != NULL) arrays[num_arrays++] = array;
      add_wait(waits, &num_waits, producer, stream);
    } else if (code == 'f' || code == 'd') {
      failed = pack_real(self, i, args[i], code, &slots[i]);
    } else {
      failed = pack_integer(self, i, args[i], code, &slots[i]);
      /* Little-endian: the low bytes of the slot hold the narrower value. */
    }
    if (failed) return NULL;
  }
  /* A foreign producer's stream (CAI version 3's, PyTorch's current one): the launch waits for
   * the work enqueued on it so far. */
  int num_foreign = num_waits;
  for (int w = 0; w < num_foreign; w++) {
    int status = dlop_cuda_stream_wait_stream(self->device_id, stream, waits[w]);
    if (status != DLOP_OK)
      return dlop_py_raise(state, status, "ordering the launch after an array argument's stream");
  }
  /* dlop's own work runs on the extension's stream: the launch waits for a dlop.Array's pending
   * writes, and dlop's stream waits for the launch before its next work. */
  dlop_stream *dlop_stream_of_device = NULL;
  if (num_arrays > 0) {
    dlop_device device = {DLOP_DEVICE_CUDA, self->device_id};
    if (dlop_py_stream(state, device, &dlop_stream_of_device) < 0) return NULL;
    /* One wait per distinct stream with pending writes (usually dlop's one), not per array. */
    for (int a = 0; a < num_arrays; a++) {
      dlop_stream *pending = dlop_array_stream(arrays[a]);
      int before = num_waits;
      add_wait(waits, &num_waits, pending ? dlop_stream_handle(pending) : NULL, stream);
      if (num_waits == before) continue;
      int status = dlop_cuda_stream_wait_stream(self->device_id, stream, waits[before]);
      if (status != DLOP_OK) return dlop_py_raise(state, status, "ordering a dlop.Array argument");
    }
  }
  int status = dlop_cuda_launch(self->device_id, self->function, grid_dims, block_dims,
                                shared_bytes, stream, pointers);
  if (status != DLOP_OK) {
    PyObject *context = PyUnicode_FromFormat("kernel '%U'", self->name);
    if (context == NULL) return NULL;
    dlop_py_raise(state, status, PyUnicode_AsUTF8AndSize(context, NULL));
    Py_DECREF(context);
    return NULL;
  }
  if (dlop_stream_of_device != NULL && dlop_stream_handle(dlop_stream_of_device) != stream) {
    status = dlop_stream_wait_foreign(dlop_stream_of_device, stream);
    if (status != DLOP_OK)
      return dlop_py_raise(state, status, "ordering dlop's stream after the kernel");
  }
  Py_RETURN_NONE;
}

/* tp_call for callers that do not use vectorcall: the tuple and dict as a vectorcall stack. */
static PyObject *kernel_call(PyObject *callable, PyObject *args, PyObject *kwargs) {
  Py_ssize_t nargs = PyTuple_Size(args);
  Py_ssize_t nkw = kwargs ? PyDict_Size(kwargs) : 0;
  PyObject **stack = PyMem_Calloc((size_t)(nargs + nkw) + 1, sizeof *stack);
  PyObject *kwnames = nkw ? PyTuple_New(nkw) : NULL;
  if (stack == NULL || (nkw && kwnames == NULL)) {
    PyMem_Free(stack);
    Py_XDECREF(kwnames);
    return PyErr_NoMemory();
  }
  for (Py_ssize_t i = 0; i < nargs; i++) stack[i] = PyTuple_GetItem(args, i);
  Py_ssize_t position = 0, k = 0;
  PyObject *key, *value;
  while (nkw && PyDict_Next(kwargs, &position, &key, &value)) {
    PyTuple_SetItem(kwnames, k, Py_NewRef(key));
    stack[nargs + k++] = value;
  }
  PyObject *result = kernel_vectorcall(callable, stack, (size_t)nargs, kwnames);
  PyMem_Free(stack);
  Py_XDECREF(kwnames);
  return result;
}

/* ---- construction and declaration -------------------------------------------------------- */

/* Set the type codes (a str of codes, or None for unknown with why), names and C types. */
static int set_arguments(cuda_kernel *self, PyObject *codes, PyObject *names, PyObject *types,
                         PyObject *why) {
  dlop_py_state *state = state_of((PyObject *)self);
  if (codes == Py_None) {
    self->num_params = -1;
    Py_XDECREF(self->unknown_why);
    self->unknown_why = Py_NewRef(why);
    return 0;
  }
  Py_ssize_t length = 0;
  const char *text = PyUnicode_Check(codes) ? PyUnicode_AsUTF8AndSize(codes, &length) : NULL;
  if (text == NULL) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_TypeError, "argument types: expected a str of type codes, not %R", codes);
    return -1;
  }
  if (length > MAX_PARAMS) {
    dlop_py_raisef(state, DLOP_UNSUPPORTED, "kernel '%U': %zd parameters, dlop launches at most %d",
                   self->name, length, MAX_PARAMS);
    return -1;
  }
  for (Py_ssize_t i = 0; i < length; i++) {
    if (code_text(text[i]) == NULL) {
      dlop_py_raisef(state, DLOP_INVALID_ARGUMENT,
                     "kernel '%U': argument type code '%c' (position %zd of %R) is not one of "
                     "P (pointer), ? b B h H i I l L q Q (integers), f d (float, double)",
                     self->name, text[i], i + 1, codes);
      return -1;
    }
  }
  if (!PyTuple_Check(names) || !PyTuple_Check(types) || PyTuple_Size(names) != length ||
      PyTuple_Size(types) != length) {
    PyErr_SetString(PyExc_ValueError, "CudaKernel: names and types are tuples, one per code");
    return -1;
  }
  memcpy(self->codes, text, (size_t)length);
  self->num_params = (int32_t)length;
  Py_INCREF(names);
  Py_INCREF(types);
  Py_XDECREF(self->param_names);
  Py_XDECREF(self->param_types);
  self->param_names = names;
  self->param_types = types;
  return 0;
}

/* CudaKernel(owner, function, device_id, name, codes, names, types, why) */
static PyObject *kernel_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  PyObject *owner, *function, *name, *codes, *names, *types, *why;
  int device_id;
  if (kwargs && PyDict_Size(kwargs) != 0) {
    PyErr_SetString(PyExc_TypeError, "CudaKernel() takes positional arguments only");
    return NULL;
  }
  if (!PyArg_ParseTuple(args, "OOiUOOOU:CudaKernel", &owner, &function, &device_id, &name, &codes,
                        &names, &types, &why))
    return NULL;
  void *handle = PyLong_AsVoidPtr(function);
  if (handle == NULL) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "CudaKernel: the function is NULL");
    return NULL;
  }
  cuda_kernel *self = (cuda_kernel *)PyType_GenericAlloc(type, 0);
  if (self == NULL) return NULL;
  self->vectorcall = kernel_vectorcall;
  self->function = handle;
  self->device_id = device_id;
  self->owner = Py_NewRef(owner);
  self->name = Py_NewRef(name);
  if (set_arguments(self, codes, names, types, why) < 0) {
    Py_DECREF(self);
    return NULL;
  }
  return (PyObject *)self;
}

/* _declare(codes, names, types): what prepare() sets (the Python side checks and builds them). */
static PyObject *kernel_declare(PyObject *self, PyObject *args) {
  PyObject *codes, *names, *types;
  if (!PyArg_ParseTuple(args, "UOO:_declare", &codes, &names, &types)) return NULL;
  if (set_arguments((cuda_kernel *)self, codes, names, types, NULL) < 0) return NULL;
  Py_RETURN_NONE;
}

/* prepare(arg_types) -> self: declare the argument types, "PPPi" or C types such as
 * ["float *", "int"] (parsed and checked by dlop._source_module.prepare). */
static PyObject *kernel_prepare(PyObject *self, PyObject *arg_types) {
  PyObject *helpers = PyImport_ImportModule("dlop._source_module");
  if (helpers == NULL) return NULL;
  PyObject *result = PyObject_CallMethod(helpers, "prepare", "OO", self, arg_types);
  Py_DECREF(helpers);
  return result;
}

static PyObject *kernel_get_function(PyObject *self, void *closure) {
  return PyLong_FromVoidPtr(((cuda_kernel *)self)->function);
}

static PyObject *kernel_get_arg_types(PyObject *self, void *closure) {
  cuda_kernel *kernel = (cuda_kernel *)self;
  if (kernel->num_params < 0) Py_RETURN_NONE;
  return PyUnicode_FromStringAndSize(kernel->codes, kernel->num_params);
}

static PyObject *kernel_get_param_types(PyObject *self, void *closure) {
  cuda_kernel *kernel = (cuda_kernel *)self;
  if (kernel->num_params < 0 || kernel->param_types == NULL) Py_RETURN_NONE;
  return Py_NewRef(kernel->param_types);
}

static PyObject *kernel_get_param_names(PyObject *self, void *closure) {
  cuda_kernel *kernel = (cuda_kernel *)self;
  if (kernel->num_params < 0 || kernel->param_names == NULL) Py_RETURN_NONE;
  return Py_NewRef(kernel->param_names);
}

static PyObject *kernel_get_name(PyObject *self, void *closure) {
  return Py_NewRef(((cuda_kernel *)self)->name);
}

static PyObject *kernel_get_module(PyObject *self, void *closure) {
  return Py_NewRef(((cuda_kernel *)self)->owner);
}

static PyObject *kernel_get_device(PyObject *self, void *closure) {
  return PyUnicode_FromFormat("cuda:%d", (int)((cuda_kernel *)self)->device_id);
}

static PyObject *kernel_repr(PyObject *self) {
  cuda_kernel *kernel = (cuda_kernel *)self;
  if (kernel->num_params < 0)
    return PyUnicode_FromFormat("<dlop kernel '%U' on cuda:%d, arguments not declared>",
                                kernel->name, (int)kernel->device_id);
  PyObject *types = PyUnicode_FromString(", ");
  PyObject *joined = types ? PyUnicode_Join(types, kernel->param_types) : NULL;
  Py_XDECREF(types);
  if (joined == NULL) return NULL;
  PyObject *text = PyUnicode_FromFormat("<dlop kernel %U(%U) on cuda:%d>", kernel->name, joined,
                                        (int)kernel->device_id);
  Py_DECREF(joined);
  return text;
}

static int kernel_traverse(PyObject *self, visitproc visit, void *arg) {
  cuda_kernel *kernel = (cuda_kernel *)self;
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(kernel->owner);
  return 0;
}

static int kernel_clear(PyObject *self) {
  cuda_kernel *kernel = (cuda_kernel *)self;
  Py_CLEAR(kernel->owner);
  Py_CLEAR(kernel->name);
  Py_CLEAR(kernel->param_names);
  Py_CLEAR(kernel->param_types);
  Py_CLEAR(kernel->unknown_why);
  return 0;
}

static void kernel_dealloc(PyObject *self) {
  PyTypeObject *type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  kernel_clear(self);
  freefunc free_slot = (freefunc)PyType_GetSlot(type, Py_tp_free);
  free_slot(self);
  Py_DECREF(type);
}

static PyGetSetDef kernel_getset[] = {
    {"name", kernel_get_name, NULL, "The kernel's name.", NULL},
    {"arg_types", kernel_get_arg_types, NULL,
     "The argument type codes (\"PPPi\"), or None while they are unknown.", NULL},
    {"param_types", kernel_get_param_types, NULL, "The C types of the parameters.", NULL},
    {"param_names", kernel_get_param_names, NULL, "The parameter names.", NULL},
    {"module", kernel_get_module, NULL, "The SourceModule the kernel belongs to.", NULL},
    {"device", kernel_get_device, NULL, "The device the kernel is loaded on (\"cuda:0\").", NULL},
    {"_function", kernel_get_function, NULL, "The CUfunction handle.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef kernel_methods[] = {
    {"prepare", kernel_prepare, METH_O,
     "prepare(arg_types) -> self: declare the argument types, \"PPPi\" (P a pointer, i int, "
     "f float, ... as Python's struct codes) or C types such as [\"float *\", \"int\"]."},
    {"_declare", kernel_declare, METH_VARARGS, "Set the argument types (used by prepare)."},
    {NULL, NULL, 0, NULL}};

static PyMemberDef kernel_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(cuda_kernel, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}};

static PyType_Slot kernel_slots[] = {
    {Py_tp_new, (void *)kernel_new},
    {Py_tp_dealloc, (void *)kernel_dealloc},
    {Py_tp_traverse, (void *)kernel_traverse},
    {Py_tp_clear, (void *)kernel_clear},
    {Py_tp_call, (void *)kernel_call},
    {Py_tp_repr, (void *)kernel_repr},
    {Py_tp_getset, kernel_getset},
    {Py_tp_methods, kernel_methods},
    {Py_tp_members, kernel_members},
    {Py_tp_doc, "A CUDA kernel of a dlop.SourceModule: k(*args, block=, grid=(1, 1), shared=0, "
                "stream=None)."},
    {0, NULL}};

static PyType_Spec kernel_spec = {
    "dlop._C.CudaKernel", sizeof(cuda_kernel), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, kernel_slots};

/* ---- the module functions SourceModule compiles and loads with ---------------------------- */

/* cuda_compile(arch, source, options) -> (image handle, image bytes, is_ptx). */
static PyObject *py_cuda_compile(PyObject *module, PyObject *args) {
  dlop_py_state *state = dlop_py_state_of_module(module);
  int arch;
  const char *source;
  PyObject *options;
  if (!PyArg_ParseTuple(args, "isO!:cuda_compile", &arch, &source, &PyTuple_Type, &options))
    return NULL;
  Py_ssize_t count = PyTuple_Size(options);
  const char **texts = PyMem_Calloc((size_t)count + 1, sizeof *texts);
  if (texts == NULL) return PyErr_NoMemory();
  for (Py_ssize_t i = 0; i < count; i++) {
    PyObject *option = PyTuple_GetItem(options, i);
    texts[i] = PyUnicode_Check(option) ? PyUnicode_AsUTF8AndSize(option, NULL) : NULL;
    if (texts[i] == NULL) {
      PyMem_Free(texts);
      if (!PyErr_Occurred())
        PyErr_Format(PyExc_TypeError, "options: each is a str (\"-DN=4\"), got %R", option);
      return NULL;
    }
  }
  const void *image = NULL;
  size_t bytes = 0;
  int is_ptx = 0, status;
  Py_BEGIN_ALLOW_THREADS
  status = dlop_cuda_compile(arch, source, texts, (int32_t)count, &image, &bytes, &is_ptx);
  Py_END_ALLOW_THREADS
  PyMem_Free(texts);
  if (status != DLOP_OK) return dlop_py_raise(state, status, NULL);
  return Py_BuildValue("(Ny#O)", PyLong_FromVoidPtr((void *)image), (const char *)image,
                       (Py_ssize_t)bytes, is_ptx ? Py_True : Py_False);
}

static PyObject *py_cuda_device_arch(PyObject *module, PyObject *arg) {
  long device_id = PyLong_AsLong(arg);
  if (device_id == -1 && PyErr_Occurred()) return NULL;
  if (device_id < 0 || device_id > INT32_MAX)
    return dlop_py_raisef(dlop_py_state_of_module(module), DLOP_INVALID_ARGUMENT,
                          "cuda_device_arch: device %ld: expected a GPU index in 0 .. %d",
                          device_id, INT32_MAX);
  int32_t arch = 0;
  int status = dlop_cuda_device_arch((int32_t)device_id, &arch);
  if (status != DLOP_OK) return dlop_py_raise(dlop_py_state_of_module(module), status, NULL);
  return PyLong_FromLong(arch);
}

/* cuda_module_load(device_id, image handle) -> module handle */
static PyObject *py_cuda_module_load(PyObject *module, PyObject *args) {
  int device_id;
  PyObject *image_object;
  if (!PyArg_ParseTuple(args, "iO:cuda_module_load", &device_id, &image_object)) return NULL;
  void *image = PyLong_AsVoidPtr(image_object);
  if (image == NULL && PyErr_Occurred()) return NULL;
  void *loaded = NULL;
  int status;
  Py_BEGIN_ALLOW_THREADS
  status = dlop_cuda_module_load(device_id, image, &loaded);
  Py_END_ALLOW_THREADS
  if (status != DLOP_OK) return dlop_py_raise(dlop_py_state_of_module(module), status, NULL);
  return PyLong_FromVoidPtr(loaded);
}

static PyObject *py_cuda_module_unload(PyObject *module, PyObject *arg) {
  void *loaded = PyLong_AsVoidPtr(arg);
  if (loaded == NULL && PyErr_Occurred()) return NULL;
  int status = dlop_cuda_module_unload(loaded);
  if (status != DLOP_OK) return dlop_py_raise(dlop_py_state_of_module(module), status, NULL);
  Py_RETURN_NONE;
}

/* cuda_module_function(module handle, name) -> function handle */
static PyObject *py_cuda_module_function(PyObject *module, PyObject *args) {
  PyObject *module_object;
  const char *name;
  if (!PyArg_ParseTuple(args, "Os:cuda_module_function", &module_object, &name)) return NULL;
  void *loaded = PyLong_AsVoidPtr(module_object);
  if (loaded == NULL && PyErr_Occurred()) return NULL;
  void *function = NULL;
  int status = dlop_cuda_module_function(loaded, name, &function);
  if (status != DLOP_OK) return dlop_py_raise(dlop_py_state_of_module(module), status, NULL);
  return PyLong_FromVoidPtr(function);
}

/* cuda_function_params(function handle) -> tuple of parameter sizes, or None when the driver
 * cannot tell. */
static PyObject *py_cuda_function_params(PyObject *module, PyObject *arg) {
  void *function = PyLong_AsVoidPtr(arg);
  if (function == NULL && PyErr_Occurred()) return NULL;
  size_t sizes[MAX_PARAMS];
  int32_t count = 0;
  int status = dlop_cuda_function_params(function, &count, sizes, MAX_PARAMS);
  if (status == DLOP_UNSUPPORTED) Py_RETURN_NONE;
  if (status != DLOP_OK) return dlop_py_raise(dlop_py_state_of_module(module), status, NULL);
  PyObject *result = PyTuple_New(count);
  for (int32_t i = 0; result && i < count; i++) {
    PyObject *size = i < MAX_PARAMS ? PyLong_FromSize_t(sizes[i]) : Py_NewRef(Py_None);
    if (size == NULL) Py_CLEAR(result);
    else PyTuple_SetItem(result, i, size);
  }
  return result;
}

static PyMethodDef cuda_methods[] = {
    {"cuda_compile", py_cuda_compile, METH_VARARGS,
     "cuda_compile(arch, source, options) -> (image handle, image bytes, is_ptx)."},
    {"cuda_device_arch", py_cuda_device_arch, METH_O,
     "cuda_device_arch(device_id) -> major * 10 + minor."},
    {"cuda_module_load", py_cuda_module_load, METH_VARARGS,
     "cuda_module_load(device_id, image handle) -> module handle."},
    {"cuda_module_unload", py_cuda_module_unload, METH_O, "cuda_module_unload(module handle)."},
    {"cuda_module_function", py_cuda_module_function, METH_VARARGS,
     "cuda_module_function(module handle, name) -> function handle."},
    {"cuda_function_params", py_cuda_function_params, METH_O,
     "cuda_function_params(function handle) -> parameter sizes, or None when unknown."},
    {NULL, NULL, 0, NULL}};

int dlop_py_add_cuda_kernel_type(PyObject *module, dlop_py_state *state) {
  PyObject *type = PyType_FromModuleAndSpec(module, &kernel_spec, NULL);
  if (type == NULL) return -1;
  state->cuda_kernel_type = (PyTypeObject *)type;
  if (PyModule_AddObjectRef(module, "CudaKernel", type) < 0) return -1;
  return PyModule_AddFunctions(module, cuda_methods);
}
