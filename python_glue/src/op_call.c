/* op_call.c — dlop._C.OpCall: a dlop_op_call (dlop/op_call.h) for Python framework adapters
 * (dlop.torch). It is prepared for dtypes and ranks (dims unknown, so one call serves every
 * shape), gives the output shapes for concrete input shapes, and runs on DLPack capsules of the
 * framework's own tensors and on the framework's CUstream: no copy, no allocation of outputs
 * (the framework allocates them), no stream handshake (producer and kernel share the stream). */
#include <stdlib.h>
#include <string.h>

#include "dlpack_abi.h"
#include "module.h"

typedef struct op_call_object {
  PyObject_HEAD
  dlop_op_call *call;
  int32_t num_inputs;
  int32_t num_outputs;
} op_call_object;

static dlop_py_state *state_of(PyObject *self) { return dlop_py_state_of_type(Py_TYPE(self)); }

/* params (a dict) as named parameters of op; *storage[i] holds ints arrays (freed by caller). */
static int convert_params(dlop_py_state *state, const dlop_op_desc *op, PyObject *dict,
                          dlop_named_param *params, int64_t **storage) {
  Py_ssize_t position = 0, p = 0;
  PyObject *key, *value;
  while (PyDict_Next(dict, &position, &key, &value)) {
    const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8AndSize(key, NULL) : NULL;
    if (name == NULL) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "parameter names are str, got %R", key);
      return -1;
    }
    const dlop_param_decl *decl = NULL;
    for (int32_t d = 0; d < op->num_params && decl == NULL; d++)
      if (strcmp(op->params[d].name, name) == 0) decl = &op->params[d];
    if (decl == NULL) {
      dlop_py_raisef(state, DLOP_NOT_FOUND, "op '%s' has no parameter '%s'", op->name, name);
      return -1;
    }
    params[p].name = decl->name;
    if (dlop_py_convert_param(state, op, decl, value, &params[p].value, &storage[p]) < 0) return -1;
    p++;
  }
  return 0;
}

/* OpCall(op_name, dtypes, ndims, params, device) */
static PyObject *op_call_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  dlop_py_state *state = dlop_py_state_of_type(type);
  const char *op_name;
  PyObject *dtypes, *ndims, *params_dict, *device_object;
  if (kwargs && PyDict_Size(kwargs) != 0) {
    PyErr_SetString(PyExc_TypeError, "OpCall() takes positional arguments only");
    return NULL;
  }
  if (!PyArg_ParseTuple(args, "sO!O!O!O:OpCall", &op_name, &PyTuple_Type, &dtypes, &PyTuple_Type,
                        &ndims, &PyDict_Type, &params_dict, &device_object))
    return NULL;
  const dlop_op_desc *op = dlop_find_op(op_name);
  if (op == NULL) return dlop_py_raise(state, DLOP_NOT_FOUND, NULL);
  Py_ssize_t num_inputs = PyTuple_Size(dtypes);
  if (PyTuple_Size(ndims) != num_inputs || num_inputs > 1024) {
    PyErr_Format(PyExc_ValueError, "OpCall: %zd dtypes but %zd ranks (at most 1024 inputs)",
                 num_inputs, PyTuple_Size(ndims));
    return NULL;
  }
  dlop_device device;
  if (dlop_py_parse_device(state, device_object, &device) < 0) return NULL;
  Py_ssize_t num_params = PyDict_Size(params_dict);
  dlop_type *types = calloc((size_t)num_inputs + 1, sizeof *types);
  dlop_named_param *params = calloc((size_t)num_params + 1, sizeof *params);
  int64_t **storage = calloc((size_t)num_params + 1, sizeof *storage);
  PyObject *result = NULL;
  if (types == NULL || params == NULL || storage == NULL) {
    PyErr_NoMemory();
    goto done;
  }
  for (Py_ssize_t i = 0; i < num_inputs; i++) {
    dlop_dtype dtype;
    if (dlop_py_parse_dtype(state, PyTuple_GetItem(dtypes, i), &dtype) < 0) goto done;
    long ndim = PyLong_AsLong(PyTuple_GetItem(ndims, i));
    if (ndim == -1 && PyErr_Occurred()) goto done;
    if (ndim < 0 || ndim > DLOP_MAX_NDIM) {
      dlop_py_raisef(state, DLOP_INVALID_ARGUMENT, "op '%s': input %zd has %ld dimensions "
                     "(dlop takes 0 to %d)", op->name, i, ndim, DLOP_MAX_NDIM);
      goto done;
    }
    types[i].dtype = (int32_t)dtype;
    types[i].ndim = (int32_t)ndim;
    for (long d = 0; d < ndim; d++) types[i].shape[d] = DLOP_DIM_UNKNOWN;
  }
  if (convert_params(state, op, params_dict, params, storage) < 0) goto done;
  dlop_op_call *call = NULL;
  int status;
  Py_BEGIN_ALLOW_THREADS /* make_thunk may load CUDA modules */
  status = dlop_op_call_create(op_name, types, (int32_t)num_inputs, params, (int32_t)num_params,
                               device, &call);
  Py_END_ALLOW_THREADS
  if (status != DLOP_OK) {
    dlop_py_raise(state, status, NULL);
    goto done;
  }
  allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
  op_call_object *self = (op_call_object *)alloc(type, 0);
  if (self == NULL) {
    dlop_op_call_destroy(call);
    goto done;
  }
  self->call = call;
  self->num_inputs = (int32_t)num_inputs;
  self->num_outputs = dlop_op_call_num_outputs(call);
  result = (PyObject *)self;
done:
  for (Py_ssize_t i = 0; storage && i < num_params; i++) free(storage[i]);
  free(storage);
  free(params);
  free(types);
  return result;
}

/* The caller (the framework) makes sure no run is in flight: its tensors, on its stream, are
 * what the kernels used, and the framework orders their release after that stream's work. */
static void op_call_dealloc(PyObject *object) {
  op_call_object *self = (op_call_object *)object;
  PyTypeObject *type = Py_TYPE(object);
  dlop_op_call_destroy(self->call);
  ((freefunc)PyType_GetSlot(type, Py_tp_free))(object);
  Py_DECREF(type);
}

/* output_dtypes -> (dtype name, ...) */
static PyObject *op_call_output_dtypes(PyObject *object, void *unused) {
  op_call_object *self = (op_call_object *)object;
  PyObject *result = PyTuple_New(self->num_outputs);
  for (int32_t o = 0; result && o < self->num_outputs; o++) {
    const dlop_type *type = dlop_op_call_output_type(self->call, o);
    PyObject *name = PyUnicode_FromString(dlop_dtype_name((dlop_dtype)type->dtype));
    if (name == NULL || PyTuple_SetItem(result, o, name) < 0) Py_CLEAR(result);
  }
  return result;
}

/* infer_shapes((shape, ...)) -> (output shape, ...): the op's infer_shape on concrete shapes. */
static PyObject *op_call_infer_shapes(PyObject *object, PyObject *shapes) {
  op_call_object *self = (op_call_object *)object;
  dlop_py_state *state = state_of(object);
  if (!PyTuple_Check(shapes) || PyTuple_Size(shapes) != self->num_inputs) {
    PyErr_Format(PyExc_TypeError, "infer_shapes takes a tuple of %d shapes", (int)self->num_inputs);
    return NULL;
  }
  dlop_type *types = calloc((size_t)self->num_inputs + (size_t)self->num_outputs + 1,
                            sizeof *types);
  if (types == NULL) return PyErr_NoMemory();
  PyObject *result = NULL;
  for (int32_t i = 0; i < self->num_inputs; i++) {
    PyObject *shape = PyTuple_GetItem(shapes, i);
    dlop_dtype dtype = (dlop_dtype)dlop_op_call_input_type(self->call, i)->dtype;
    if (!PyTuple_Check(shape)) {
      PyErr_Format(PyExc_TypeError, "infer_shapes: shape %d is %R, not a tuple", (int)i, shape);
      goto done;
    }
    if (dlop_py_parse_shape(state, shape, "input", dtype, types[i].shape, &types[i].ndim) < 0)
      goto done;
    types[i].dtype = (int32_t)dtype;
  }
  {
    dlop_type *outputs = types + self->num_inputs;
    int status = dlop_op_call_infer_shapes(self->call, types, self->num_inputs, outputs,
                                           self->num_outputs);
    if (status != DLOP_OK) {
      dlop_py_raise(state, status, NULL);
      goto done;
    }
    result = PyTuple_New(self->num_outputs);
    for (int32_t o = 0; result && o < self->num_outputs; o++) {
      PyObject *shape = PyTuple_New(outputs[o].ndim);
      for (int32_t d = 0; shape && d < outputs[o].ndim; d++) {
        PyObject *dim = PyLong_FromLongLong(outputs[o].shape[d]);
        if (dim == NULL || PyTuple_SetItem(shape, d, dim) < 0) Py_CLEAR(shape);
      }
      if (shape == NULL || PyTuple_SetItem(result, o, shape) < 0) Py_CLEAR(result);
    }
  }
done:
  free(types);
  return result;
}

/* One DLPack capsule ("dltensor" or "dltensor_versioned") as a tensor; the managed tensor stays
 * the producer's (the capsule keeps it, and frees it when collected). */
static int capsule_tensor(dlop_py_state *state, PyObject *capsule, int is_output, int index,
                          dlop_tensor *tensor) {
  const char *role = is_output ? "output" : "input";
  if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    dlop_dl_managed_tensor_versioned *managed = PyCapsule_GetPointer(capsule, "dltensor_versioned");
    if (managed->version.major != DLOP_DLPACK_MAJOR) {
      dlop_py_raisef(state, DLOP_UNSUPPORTED, "%s %d is a DLPack %u.%u tensor; dlop reads DLPack 1.x",
                     role, index, managed->version.major, managed->version.minor);
      return -1;
    }
    if ((managed->flags & DLOP_DLPACK_FLAG_READ_ONLY) && is_output) {
      dlop_py_raisef(state, DLOP_INVALID_ARGUMENT, "output %d is a read-only DLPack tensor", index);
      return -1;
    }
    *tensor = managed->dl_tensor;
    return 0;
  }
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    *tensor = ((dlop_dl_managed_tensor *)PyCapsule_GetPointer(capsule, "dltensor"))->dl_tensor;
    return 0;
  }
  dlop_py_raisef(state, DLOP_INVALID_ARGUMENT,
                 "%s %d is %R, not an unused 'dltensor' or 'dltensor_versioned' capsule", role,
                 index, capsule);
  return -1;
}

/* run((input capsules), (output capsules), stream): stream is the CUstream (an int; 0 is CUDA's
 * legacy default stream, as PyTorch reports it) for a CUDA call, ignored on the CPU. The work is
 * enqueued on that stream; nothing waits. The capsules are read, not consumed: their tensors
 * belong to the framework, which keeps them alive. */
static PyObject *op_call_run(PyObject *object, PyObject *const *args, Py_ssize_t nargs) {
  op_call_object *self = (op_call_object *)object;
  dlop_py_state *state = state_of(object);
  if (nargs != 3 || !PyTuple_Check(args[0]) || !PyTuple_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "run((input capsules), (output capsules), stream)");
    return NULL;
  }
  Py_ssize_t num_inputs = PyTuple_Size(args[0]), num_outputs = PyTuple_Size(args[1]);
  if (num_inputs != self->num_inputs || num_outputs != self->num_outputs)
    return dlop_py_raisef(state, DLOP_INVALID_ARGUMENT,
                          "op '%s': the call takes %d inputs and %d outputs, got %zd and %zd",
                          dlop_op_call_op(self->call)->name, (int)self->num_inputs,
                          (int)self->num_outputs, num_inputs, num_outputs);
  dlop_tensor local[8];
  dlop_tensor *tensors = local;
  if (num_inputs + num_outputs > 8) {
    tensors = malloc(sizeof(dlop_tensor) * (size_t)(num_inputs + num_outputs));
    if (tensors == NULL) return PyErr_NoMemory();
  }
  PyObject *result = NULL;
  for (Py_ssize_t i = 0; i < num_inputs; i++)
    if (capsule_tensor(state, PyTuple_GetItem(args[0], i), 0, (int)i, &tensors[i]) < 0)
      goto done;
  for (Py_ssize_t o = 0; o < num_outputs; o++)
    if (capsule_tensor(state, PyTuple_GetItem(args[1], o), 1, (int)o,
                       &tensors[num_inputs + o]) < 0)
      goto done;
  dlop_device device = dlop_op_call_device(self->call);
  dlop_stream *stream = NULL;
  int status = DLOP_OK;
  if (device.type == DLOP_DEVICE_CUDA) {
    void *handle = PyLong_AsVoidPtr(args[2]);
    if (handle == NULL && PyErr_Occurred()) goto done;
    /* PyTorch's default stream is the legacy one, which DLPack numbers 1 */
    status = dlop_stream_wrap(device, handle ? handle : (void *)1, &stream);
  }
  if (status == DLOP_OK) {
    Py_BEGIN_ALLOW_THREADS
    status = dlop_op_call_run(self->call, tensors, (int32_t)num_inputs, tensors + num_inputs,
                              (int32_t)num_outputs, stream);
    Py_END_ALLOW_THREADS
  }
  dlop_stream_destroy(stream);
  if (status != DLOP_OK) {
    dlop_py_raise(state, status, NULL);
    goto done;
  }
  result = Py_NewRef(Py_None);
done:
  if (tensors != local) free(tensors);
  return result;
}

static PyMethodDef op_call_methods[] = {
    {"infer_shapes", op_call_infer_shapes, METH_O,
     "infer_shapes((input shape, ...)) -> (output shape, ...)"},
    {"run", (PyCFunction)(void (*)(void))op_call_run, METH_FASTCALL,
     "run((input capsules), (output capsules), stream): the thunk on the tensors, on stream"},
    {NULL, NULL, 0, NULL}};

/* address -> the dlop_op_call's address, for callers that run it through the C API themselves
 * (the Numba dispatch, through ctypes); valid while this object lives. */
static PyObject *op_call_address(PyObject *object, void *unused) {
  return PyLong_FromVoidPtr(((op_call_object *)object)->call);
}

static PyGetSetDef op_call_getset[] = {
    {"output_dtypes", op_call_output_dtypes, NULL, "The outputs' dtypes.", NULL},
    {"address", op_call_address, NULL,
     "The dlop_op_call's address (for the C API; valid while this object lives).", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot op_call_slots[] = {
    {Py_tp_doc, (void *)"OpCall(op_name, dtypes, ndims, params, device): one op prepared for "
                        "framework adapters (runs on DLPack capsules and a foreign stream)."},
    {Py_tp_new, (void *)op_call_new},
    {Py_tp_dealloc, (void *)op_call_dealloc},
    {Py_tp_methods, op_call_methods},
    {Py_tp_getset, op_call_getset},
    {0, NULL}};

static PyType_Spec op_call_spec = {"dlop._C.OpCall", sizeof(op_call_object), 0,
                                   Py_TPFLAGS_DEFAULT, op_call_slots};

int dlop_py_add_op_call_type(PyObject *module, dlop_py_state *state) {
  state->op_call_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &op_call_spec, NULL);
  if (state->op_call_type == NULL) return -1;
  return PyModule_AddType(module, state->op_call_type);
}
