/* module.h — what the parts of the dlop._C extension share: the module state (no static
 * PyObject globals), the object layouts of its heap types, and the helpers they call. */
#ifndef DLOP_PY_MODULE_H
#define DLOP_PY_MODULE_H

#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlop.h>
#include <dlop/kit/checked_size.h> /* every count and byte size the extension computes */

/* Vectorcall is in the Limited API from 3.12 only, but the ABI it relies on (the flag, the
 * offset member and the calling convention) is the same in 3.11; these are its 3.12 spellings. */
#ifndef Py_TPFLAGS_HAVE_VECTORCALL
#define Py_TPFLAGS_HAVE_VECTORCALL (1UL << 11)
#endif
#ifndef PY_VECTORCALL_ARGUMENTS_OFFSET
#define PY_VECTORCALL_ARGUMENTS_OFFSET ((size_t)1 << (8 * sizeof(size_t) - 1))
typedef PyObject *(*vectorcallfunc)(PyObject *callable, PyObject *const *args, size_t nargsf,
                                    PyObject *kwnames);
#endif
#define DLOP_PY_NARGS(nargsf) ((Py_ssize_t)((nargsf) & ~PY_VECTORCALL_ARGUMENTS_OFFSET))

/* The most CUDA devices the extension keeps a stream for. */
#define DLOP_PY_MAX_DEVICES 64

/* How many stage exceptions wait at once for the error that reports them (py_op.c). */
#define DLOP_PY_STAGE_EXCEPTIONS 16

/* Exception classes, one per group of statuses (see errors.c). */
enum {
  DLOP_PY_ERROR,            /* DlopError: the base */
  DLOP_PY_TYPE_ERROR,       /* + TypeError */
  DLOP_PY_SHAPE_ERROR,      /* + ValueError */
  DLOP_PY_ARGUMENT_ERROR,   /* + ValueError */
  DLOP_PY_NOT_FOUND_ERROR,  /* + LookupError */
  DLOP_PY_NO_DEVICE_ERROR,  /* + RuntimeError */
  DLOP_PY_DEVICE_MISMATCH,  /* + RuntimeError */
  DLOP_PY_UNSUPPORTED,      /* + RuntimeError */
  DLOP_PY_PLUGIN_ERROR,     /* + RuntimeError: loading and ABI */
  DLOP_PY_KERNEL_ERROR,     /* + RuntimeError: CUDA, cuBLAS, plugin run failures */
  DLOP_PY_MEMORY_ERROR,     /* + MemoryError */
  DLOP_PY_ERROR_COUNT
};

/* What framework_arrays.c keeps of PyTorch and CuPy once they are imported. */
typedef struct dlop_py_frameworks dlop_py_frameworks;

typedef struct dlop_py_state {
  PyObject *errors[DLOP_PY_ERROR_COUNT];
  PyTypeObject *array_type;
  PyTypeObject *graph_type;
  PyTypeObject *function_type;
  PyTypeObject *op_call_type;
  PyTypeObject *cuda_kernel_type;
  allocfunc array_alloc; /* the Array type's tp_alloc, looked up once for the hot path */
  PyObject *numpy;       /* imported on first use */
  PyObject *str_dlpack, *str_dlpack_device, *str_cai, *str_stream, *str_max_version;
  PyObject *str_stage_token; /* "[pyexc ": see stage_exceptions */
  /* One stream per CUDA device for every run, copy and DLPack exchange the extension makes,
   * so all of them are ordered with each other (like a framework's current stream). */
  dlop_stream *streams[DLOP_PY_MAX_DEVICES];
  /* Exceptions Python ops' stages raised (py_op.c), each under the token its message starts
   * with ("[pyexc N] "): the dlop exception raised for a message holding the token chains it
   * and drops the token from the text (errors.c). The oldest is dropped when a slot is needed,
   * so an error nobody raised does not keep its exception alive for long. */
  struct {
    unsigned long long token; /* 0: a free slot */
    PyObject *exception;
  } stage_exceptions[DLOP_PY_STAGE_EXCEPTIONS];
  unsigned long long next_stage_token;
  dlop_py_frameworks *frameworks; /* NULL after the module is cleared */
} dlop_py_state;

/* dlop.Array: a reference to a dlop_array. */
typedef struct dlop_py_array {
  PyObject_HEAD
  /* NULL once expired (dlop_py_array_expire): read it through dlop_py_array_get. */
  dlop_array *array;
  /* Borrowed from a read-only producer (a read-only NumPy array, bytes, a DLPack tensor flagged
   * read-only, CAI data (ptr, True)): exported read-only too, never as writable memory. */
  int readonly;
  /* Set when expired: the Python op whose run lent this array and which it outlived. */
  const char *expired_op;
} dlop_py_array;

/* dlop._C.Function: a compiled function, called through vectorcall. */
typedef struct dlop_py_function {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  dlop_function *function;
  dlop_device device;
  int32_t num_inputs;
  int32_t num_outputs;
  int return_list;          /* outputs were given as a list: return a list */
  int fuse, cuda_graphs;    /* the options it was compiled with (kept for dlop.dumps) */
  dlop_type *input_types;   /* cached at compile time for the per-call checks */
  PyObject *inputs;         /* tuple of the input Variables (or None) */
  PyObject *outputs;        /* tuple of the output Variables (or None) */
  PyObject *input_names;    /* tuple of str, for messages */
} dlop_py_function;

/* ---- module.c ---- */
dlop_py_state *dlop_py_state_of_type(PyTypeObject *type);
dlop_py_state *dlop_py_state_of_module(PyObject *module);
/* The extension's stream for a device (NULL for the CPU); created on first use. */
int dlop_py_stream(dlop_py_state *state, dlop_device device, dlop_stream **stream);
PyObject *dlop_py_numpy(dlop_py_state *state);

/* ---- errors.c ---- */
int dlop_py_add_errors(PyObject *module, dlop_py_state *state);
/* Raise the exception for status with dlop_last_error() (prefixed by context when not NULL).
 * Returns NULL for `return dlop_py_raise(...)`. */
PyObject *dlop_py_raise(dlop_py_state *state, int status, const char *context);
/* Raise the exception for status with a formatted message. */
PyObject *dlop_py_raisef(dlop_py_state *state, int status, const char *format, ...);
/* A DLPack device, (device_type, device_id): 1 with both set when value is a tuple of two
 * ints that fit int, 0 when it is anything else (no exception set), -1 with an exception. */
int dlop_py_device_pair(PyObject *value, int *device_type, int *device_id);
/* Loading a plugin failed: a PluginError whatever the status (kept in .status: a missing file
 * is DLOP_NOT_FOUND, an init failure DLOP_PLUGIN_ERROR), with dlop_last_error()'s message. */
PyObject *dlop_py_raise_load_error(dlop_py_state *state, int status);

/* ---- array.c ---- */
int dlop_py_add_array_type(PyObject *module, dlop_py_state *state);
/* A new dlop.Array taking over one reference to array (released on failure too). */
PyObject *dlop_py_array_new(dlop_py_state *state, dlop_array *array);
/* The dlop_array of a dlop.Array (a borrowed reference), or NULL with an InvalidArgumentError
 * naming the op when it was lent for one run of a Python op and has expired. */
dlop_array *dlop_py_array_get(PyObject *object);
/* Expire a dlop.Array lent for one run of the Python op op_name that outlived the run (py_op.c):
 * its reference to the memory is dropped now and every later use raises. op_name must live as
 * long as the object (a registered op's name lives until the process ends). */
void dlop_py_array_expire(PyObject *object, const char *op_name);
/* "float32" or a NumPy dtype object / type to a dlop dtype; -1 with TypeError otherwise. */
int dlop_py_parse_dtype(dlop_py_state *state, PyObject *object, dlop_dtype *dtype);
int dlop_py_parse_device(dlop_py_state *state, PyObject *object, dlop_device *device);
PyObject *dlop_py_device_str(dlop_device device);

/* ---- convert.c: Python objects to dlop arrays ---- */
/* A new reference to a dlop_array for object: a dlop.Array (same array), the buffer protocol
 * (NumPy; no copy), __dlpack__ or __cuda_array_interface__ (no copy), or nested lists and
 * scalars (through numpy.asarray). Nothing is moved between devices here. *readonly says
 * whether the producer lent the memory read-only; *from_host whether it is host data (a
 * buffer or a list), which a function may copy to its device. Either may be NULL. -1 with an
 * exception set on failure. */
int dlop_py_to_array(dlop_py_state *state, PyObject *object, dlop_array **array, int *readonly,
                     int *from_host);
/* dlop_array_release for a caller holding the GIL (faster deleters for wrapped buffers). */
void dlop_py_release_holding_gil(dlop_array *array);
PyObject *dlop_py_asarray(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames);

/* What a DLPack or CAI wrap owns (convert.c). */
typedef struct dlop_py_foreign_owner dlop_py_foreign_owner;
/* Hand the memory back to its producer (DLPack deleter, or Py_DECREF of the CAI producer) and
 * free owner. holding_gil: the caller holds the GIL (otherwise it is taken for Py_DECREF). */
void dlop_py_foreign_give_back(dlop_py_foreign_owner *owner, int holding_gil);

/* ---- deferred.c: giving foreign CUDA memory back without waiting ---- */
/* Queue owner to be given back once the work enqueued so far on stream has finished (a
 * stream marker); needs no GIL. 0 when queued; -1 (nothing set) when the caller must wait and
 * give back itself: the queue is closed (interpreter exit) or the marker could not be
 * recorded. May first wait for and give back the oldest entries when the queue is over its
 * bound (1024 owners or 1 GiB of distinct memory). */
int dlop_py_defer_release(dlop_stream *stream, dlop_py_foreign_owner *owner, const void *data,
                          size_t bytes, int holding_gil);
/* With the GIL: give back the queued owners whose work has finished, oldest first, never
 * waiting. One relaxed atomic load when nothing is queued. */
void dlop_py_deferred_poll(void);
/* With the GIL: wait for and give back every owner queued for a CUDA device (all devices when
 * device_id < 0), waiting without the GIL. A dlop status: the first failed wait's. */
int dlop_py_deferred_drain(int device_id);
/* Owners queued now (debug: dlop._C.pending_foreign_releases()). */
size_t dlop_py_deferred_count(void);
/* Interpreter exit: drain everything and stop queuing (later releases wait at once). */
int dlop_py_deferred_close(void);

/* ---- dlpack.c: exporting ---- */
PyObject *dlop_py_array_dlpack(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames);
PyObject *dlop_py_array_dlpack_device(PyObject *self, PyObject *unused);
PyObject *dlop_py_array_cai(PyObject *self, void *closure);
/* Importing one DLPack capsule from producer (a new reference to its array). */
int dlop_py_from_dlpack(dlop_py_state *state, PyObject *producer, dlop_array **array,
                        int *readonly);
int dlop_py_from_cai(dlop_py_state *state, PyObject *producer, PyObject *interface,
                     dlop_array **array, int *readonly);

/* ---- graph.c, function.c ---- */
int dlop_py_add_graph_type(PyObject *module, dlop_py_state *state);
/* A static shape from a tuple of ints and None (unknown: DLOP_DIM_UNKNOWN) into shape[] and
 * *ndim, checked as dlop_graph_input checks it (at most DLOP_MAX_NDIM dims, sizes >= 0 that
 * fit int64, checked_size.h's rule for dtype); -1 with a ShapeError naming what otherwise. */
int dlop_py_parse_shape(dlop_py_state *state, PyObject *tuple, const char *what,
                        dlop_dtype dtype, int64_t *shape, int32_t *ndim);
/* _C.check_shape(what, dtype, shape): dlop_py_parse_shape for the Python front end, which
 * makes its Variables itself; None, or ShapeError. */
PyObject *dlop_py_check_shape(PyObject *module, PyObject *args);
int dlop_py_add_function_type(PyObject *module, dlop_py_state *state);
/* A Function over a compiled function (taken over; destroyed on failure). */
PyObject *dlop_py_function_new(dlop_py_state *state, dlop_function *function,
                               const dlop_type *input_types, int32_t num_inputs,
                               int32_t num_outputs, PyObject *input_names);
/* Call a Function (the caller checked its type) on nargs arrays, as function(*args) does. */
PyObject *dlop_py_function_call(PyObject *function, PyObject *const *args, Py_ssize_t nargs);

/* ---- eager_calls.c: Op.__call__'s C path ---- */
int dlop_py_add_eager_calls_type(PyObject *module);

/* One Python value as a parameter of the declared kind (graph.c): an ints parameter's values
 * go to *storage (the caller frees it), a string's stays in value (alive while it is). -1 with
 * a TypeError or InvalidArgumentError naming the op and the parameter otherwise. */
int dlop_py_convert_param(dlop_py_state *state, const dlop_op_desc *op,
                          const dlop_param_decl *decl, PyObject *value, dlop_param_value *out,
                          int64_t **storage);

/* ---- op_call.c ---- */
int dlop_py_add_op_call_type(PyObject *module, dlop_py_state *state);

/* ---- cuda_kernel.c: dlop.SourceModule's kernels and the functions it is built on ---- */
int dlop_py_add_cuda_kernel_type(PyObject *module, dlop_py_state *state);

/* ---- framework_arrays.c: torch.Tensor and cupy.ndarray kernel arguments, read directly ---- */
/* What a launch reads once of PyTorch's and CuPy's state, for all its arguments (zero it). */
typedef struct dlop_py_framework_call {
  int torch_mode;        /* 0 not read yet; 1 a torch function mode is active; -1 none is */
  int torch_stream_read; /* torch_stream is torch's current stream on the kernel's device */
  void *torch_stream;
  int cupy_state;    /* 0 not read yet; 1 cupy_stream is what CuPy's CAI names; -1 unusable */
  void *cupy_stream; /* NULL: CuPy names no stream (its CAI export version 2) */
} dlop_py_framework_call;
/* One array argument as the fast path read it. */
typedef struct dlop_py_framework_array {
  void *data;        /* NULL for an empty array (the interface's pointer 0) */
  int32_t device_id; /* the device the library states */
  void *producer;    /* the stream to order the launch after, or NULL */
} dlop_py_framework_array;
int dlop_py_frameworks_init(dlop_py_state *state);
int dlop_py_frameworks_traverse(dlop_py_state *state, visitproc visit, void *arg);
void dlop_py_frameworks_clear(dlop_py_state *state);
/* value exactly a torch.Tensor or cupy.ndarray, for a kernel on device_id: 1 with *out as its
 * library's __cuda_array_interface__ would describe it; 0 (nothing set) when the generic path
 * must take it: another type, or a case whose error that path raises; -1 with an exception
 * only for what is never swallowed (KeyboardInterrupt, MemoryError). */
int dlop_py_framework_array_read(dlop_py_state *state, PyObject *value, int32_t device_id,
                                 dlop_py_framework_call *call, dlop_py_framework_array *out);
/* For the generic path's interface that names no stream: 1 with *stream torch's current
 * stream on device_id when value is a torch.Tensor (a subclass too), 0 when it is not one, -1
 * with an exception. */
int dlop_py_framework_torch_stream(dlop_py_state *state, PyObject *value, int32_t device_id,
                                   dlop_py_framework_call *call, void **stream);

/* ---- registry.c ---- */
extern PyMethodDef dlop_py_registry_methods[];

/* ---- source_ops.c ---- */
extern PyMethodDef dlop_py_source_ops_methods[];

/* ---- py_op.c: dlop.Op subclasses as registered ops ---- */
extern PyMethodDef dlop_py_py_op_methods[];

/* ---- installation.c ---- */
/* 0 when the loaded libdlop is the version this extension was built for, else -1 with an
 * ImportError naming both versions and the libdlop file. Called first at import. */
int dlop_py_check_libdlop(PyObject *module);
extern PyMethodDef dlop_py_installation_methods[];

#endif
