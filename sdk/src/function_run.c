/* function_run.c — running a compiled function: inputs checked against what was compiled,
 * then per node a concrete infer_shape (skipped when the node's input shapes equal the last
 * run's), outputs from the pool (or a dying input's array where the op allows in place),
 * contiguous copies where the op asks for them, the thunk on the function's stream, and dead
 * intermediates freed at once. View nodes (ABI 1.1) make views instead (function_view.c).
 * Per-run state lives on the caller's stack (or one allocation for big graphs), so several
 * threads may run one function at once. A CUDA function that replays CUDA graphs hands its
 * runs to cuda_graph.c first, which captures one through dlop__function_run_captured (the same
 * nodes, enqueued on a capturing stream). The compiler (function.c) calls in here to make and
 * free the run state; nothing here calls back into the compiler. */
#include <stdlib.h>
#include <string.h>

#include "cuda_driver.h"
#include "function_internal.h"

typedef struct run_state {
  dlop_function *function; /* not const: runs fill the nodes' shape caches */
  dlop_stream *stream; /* NULL on the CPU */
  void *handle;        /* CUstream, NULL on the CPU */
  dlop_array **slots;
  dlop_array **contiguous; /* per node input: a temporary contiguous copy, or NULL */
  dlop_tensor *input_tensors;
  dlop_tensor *output_tensors;
  dlop_type *input_types;
  dlop_type *output_types;
  int heap_scratch; /* the scratch block was allocated (else it is on the stack) */
  /* 1 in a run captured into a CUDA graph (handle is the capturing stream, stream the one the
   * graph will run on): function outputs come from the pool and never take over an input. */
  int capture;
} run_state;

static int same_device(dlop_device a, dlop_device b) { return a.type == b.type && a.id == b.id; }

static int check_inputs(const dlop_function *function, dlop_array *const *inputs,
                        int32_t num_inputs) {
  char have[32], want[32], text[96];
  int32_t i, d;
  if (num_inputs != function->num_inputs || (num_inputs > 0 && inputs == NULL))
    return dlop__error(DLOP_INVALID_ARGUMENT, "the function takes %d input%s, got %d%s",
                       (int)function->num_inputs, function->num_inputs == 1 ? "" : "s",
                       (int)num_inputs,
                       inputs == NULL && num_inputs > 0 ? " (inputs is NULL)" : "");
  for (i = 0; i < num_inputs; i++) {
    const char *name = function->slot_names[i];
    const dlop_type *expected = &function->slot_types[i];
    const dlop_tensor *tensor;
    dlop_dtype dtype;
    if (inputs[i] == NULL)
      return dlop__error(DLOP_INVALID_ARGUMENT, "input %d ('%s') is NULL", (int)i, name);
    tensor = dlop_array_tensor(inputs[i]);
    if (!same_device(tensor->device, function->device))
      return dlop__error(DLOP_DEVICE_MISMATCH,
                         "input %d ('%s') is on %s but the function runs on %s; move it with "
                         "dlop_array_copy_to",
                         (int)i, name, dlop_device_format(tensor->device, have, sizeof have),
                         dlop_device_format(function->device, want, sizeof want));
    dtype = dlop_tensor_dtype(tensor);
    if ((int32_t)dtype != expected->dtype)
      return dlop__error(DLOP_TYPE_ERROR, "input %d ('%s') is %s but the function expects %s",
                         (int)i, name, dlop_dtype_name(dtype),
                         dlop__type_format(expected, text, sizeof text));
    if (tensor->ndim != expected->ndim)
      return dlop__error(DLOP_TYPE_ERROR,
                         "input %d ('%s') has %d dimension%s but the function expects %s", (int)i,
                         name, (int)tensor->ndim, tensor->ndim == 1 ? "" : "s",
                         dlop__type_format(expected, text, sizeof text));
    for (d = 0; d < tensor->ndim; d++) {
      if (expected->shape[d] == DLOP_DIM_UNKNOWN || expected->shape[d] == tensor->shape[d])
        continue;
      return dlop__error(DLOP_SHAPE_ERROR,
                         "input %d ('%s'): dimension %d is %lld but the function expects %s",
                         (int)i, name, (int)d, (long long)tensor->shape[d],
                         dlop__type_format(expected, text, sizeof text));
    }
  }
  return DLOP_OK;
}

int dlop__function_prepare_runs(dlop_function *function) {
  for (int32_t n = 0; n < function->num_nodes; n++) {
    dlop__function_node *node = &function->nodes[n];
    dlop__shape_cache *cache = &node->shapes;
    int32_t dims = 0;
    for (int32_t i = 0; i < node->num_inputs; i++) dims += node->input_types[i].ndim;
    atomic_flag_clear(&cache->lock);
    cache->valid = 0;
    cache->input_dims = malloc(sizeof(int64_t) * ((size_t)dims + 1));
    cache->output_types = calloc((size_t)node->num_outputs + 1, sizeof(dlop_type));
    if (cache->input_dims == NULL || cache->output_types == NULL)
      return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory compiling a function");
  }
  return DLOP_OK;
}

void dlop__function_free_runs(dlop_function *function) {
  for (int32_t n = 0; function->nodes != NULL && n < function->num_nodes; n++) {
    free(function->nodes[n].shapes.input_dims);
    free(function->nodes[n].shapes.output_types);
    function->nodes[n].shapes.input_dims = NULL;
    function->nodes[n].shapes.output_types = NULL;
  }
}

/* The run's concrete input types against the cached key (lock held). Input ndims always equal
 * the compiled ones (checked for inputs, enforced for node outputs), so shapes line up. */
static int cache_matches(const dlop__shape_cache *cache, const run_state *run,
                         const dlop__function_node *node) {
  const int64_t *dims = cache->input_dims;
  if (!cache->valid) return 0;
  for (int32_t i = 0; i < node->num_inputs; i++) {
    const dlop_type *type = &run->input_types[i];
    for (int32_t d = 0; d < type->ndim; d++)
      if (*dims++ != type->shape[d]) return 0;
  }
  return 1;
}

static void copy_type(dlop_type *to, const dlop_type *from) {
  to->dtype = from->dtype;
  to->ndim = from->ndim;
  for (int32_t d = 0; d < from->ndim; d++) to->shape[d] = from->shape[d];
}

/* The cached output types when this node's input shapes equal the cached ones. A busy cache
 * (another thread running the node right now) counts as a miss: never wait on it. */
static int cached_shapes(const run_state *run, dlop__function_node *node) {
  dlop__shape_cache *cache = &node->shapes;
  int hit = 0;
  if (atomic_flag_test_and_set_explicit(&cache->lock, memory_order_acquire)) return 0;
  if (cache_matches(cache, run, node)) {
    hit = 1;
    for (int32_t o = 0; o < node->num_outputs; o++)
      copy_type(&run->output_types[o], &cache->output_types[o]);
  }
  atomic_flag_clear_explicit(&cache->lock, memory_order_release);
  return hit;
}

static void remember_shapes(const run_state *run, dlop__function_node *node) {
  dlop__shape_cache *cache = &node->shapes;
  int64_t *dims = cache->input_dims;
  if (atomic_flag_test_and_set_explicit(&cache->lock, memory_order_acquire)) return;
  for (int32_t i = 0; i < node->num_inputs; i++)
    for (int32_t d = 0; d < run->input_types[i].ndim; d++) *dims++ = run->input_types[i].shape[d];
  for (int32_t o = 0; o < node->num_outputs; o++)
    copy_type(&cache->output_types[o], &run->output_types[o]);
  cache->valid = 1;
  atomic_flag_clear_explicit(&cache->lock, memory_order_release);
}

/* Concrete output shapes for one node, checked against what was known when compiling. */
static int infer_concrete(run_state *run, dlop__function_node *node, int32_t index) {
  char text[96];
  int32_t i, d;
  if (cached_shapes(run, node)) return DLOP_OK;
  for (i = 0; i < node->num_outputs; i++) {
    memset(&run->output_types[i], 0, sizeof(dlop_type));
    run->output_types[i].dtype = node->output_types[i].dtype;
    run->output_types[i].ndim = node->output_types[i].ndim;
    for (d = 0; d < node->output_types[i].ndim; d++)
      run->output_types[i].shape[d] = DLOP_DIM_UNKNOWN;
  }
  dlop__stage_node stage = dlop__function_stage_node(node, index);
  int status = dlop__stage_infer_shape(&stage, run->input_types, run->output_types);
  if (status != DLOP_OK) return status;
  for (i = 0; i < node->num_outputs; i++) {
    const dlop_type *have = &run->output_types[i], *want = &node->output_types[i];
    int ok = have->dtype == want->dtype && have->ndim == want->ndim &&
             dlop__type_valid(have, 1) == DLOP_OK;
    for (d = 0; ok && d < want->ndim; d++)
      if (want->shape[d] != DLOP_DIM_UNKNOWN && want->shape[d] != have->shape[d]) ok = 0;
    if (!ok) {
      char compiled[96];
      return dlop__error(DLOP_PLUGIN_ERROR,
                         "node #%d %s: infer_shape at run time gave output %d as %s, which "
                         "contradicts the compiled type %s",
                         (int)index, node->op->name, (int)i,
                         dlop__type_format(have, text, sizeof text),
                         dlop__type_format(want, compiled, sizeof compiled));
    }
    /* concrete shapes no array can have (zero-stride inputs broadcast to 2^64 elements) stop
     * here, before anything is allocated or any thunk counts them */
    if (dlop_shape_size(have->shape, have->ndim, (int64_t)dlop_dtype_size((dlop_dtype)have->dtype),
                        NULL, NULL) != DLOP_SIZE_FITS) {
      char what[160];
      dlop__format(what, sizeof what, "node #%d %s: output %d", (int)index, node->op->name, (int)i);
      return dlop__check_shape_size(what, have->shape, have->ndim, have->dtype, NULL);
    }
  }
  remember_shapes(run, node); /* only results that passed every check */
  return DLOP_OK;
}

static void release_temporaries(run_state *run, const dlop__function_node *node) {
  int32_t i;
  for (i = 0; i < node->num_inputs; i++) {
    if (run->contiguous[i] == NULL) continue;
    dlop__array_set_stream(run->contiguous[i], run->stream);
    dlop_array_release(run->contiguous[i]);
    run->contiguous[i] = NULL;
  }
}

/* The node's input tensors (contiguous copies where the op needs them) and concrete types. */
static int gather_inputs(run_state *run, const dlop__function_node *node, int32_t index) {
  int needs_contiguous = (node->op->flags & DLOP_OP_NEEDS_CONTIGUOUS_INPUTS) != 0;
  int32_t i, d;
  for (i = 0; i < node->num_inputs; i++) {
    dlop_array *array = run->slots[node->input_slots[i]];
    dlop_tensor tensor = *dlop_array_tensor(array);
    if (needs_contiguous && !dlop_tensor_is_contiguous(&tensor)) {
      dlop_array *copy = NULL;
      int status = dlop__array_empty_on_stream(run->function->device, dlop_tensor_dtype(&tensor),
                                               tensor.ndim, tensor.shape, run->stream, &copy);
      if (status == DLOP_OK) {
        run->contiguous[i] = copy;
        status = dlop__tensor_copy(&tensor, dlop_array_tensor(copy), run->handle);
      }
      if (status != DLOP_OK) {
        char reason[1024];
        dlop__format(reason, sizeof reason, "%s", dlop_last_error());
        return dlop__error(status, "node #%d %s: making input %d contiguous failed: %s", (int)index,
                           node->op->name, (int)i, reason);
      }
      tensor = *dlop_array_tensor(copy);
    }
    run->input_tensors[i] = tensor;
    memset(&run->input_types[i], 0, sizeof(dlop_type)); /* plugins see zeros past ndim */
    run->input_types[i].dtype = node->input_types[i].dtype;
    run->input_types[i].ndim = tensor.ndim;
    for (d = 0; d < tensor.ndim && d < DLOP_MAX_NDIM; d++)
      run->input_types[i].shape[d] = tensor.shape[d];
  }
  return DLOP_OK;
}

/* The array output o may take over from input `input` (retained), or NULL. The plan already
 * proved that the input is an intermediate dying here and read once by this node; this checks
 * what only the run knows: the concrete dtype and shape equal the output's, the array is
 * C-contiguous and was handed to the thunk as is (not a contiguous copy), and no other slot
 * holds it, so nothing that is read later sees it change. */
static dlop_array *reusable_input(run_state *run, const dlop__function_node *node, int32_t o) {
  const dlop_type *type = &run->output_types[o];
  int32_t input = node->inplace_input[o], slot, d;
  dlop_array *array;
  const dlop_tensor *tensor;
  if (input < 0 || run->contiguous[input] != NULL) return NULL;
  slot = node->input_slots[input];
  array = run->slots[slot];
  if (array == NULL) return NULL;
  tensor = dlop_array_tensor(array);
  if ((int32_t)dlop_tensor_dtype(tensor) != type->dtype || tensor->ndim != type->ndim ||
      !dlop_tensor_is_contiguous(tensor))
    return NULL;
  for (d = 0; d < type->ndim; d++)
    if (tensor->shape[d] != type->shape[d]) return NULL;
  /* A view (ABI 1.1 view ops) writes into memory another array owns, and a live view of this
   * array would see it change: only an owner nobody else holds may be overwritten. */
  if (!dlop__array_owns_memory_alone(array)) return NULL;
  for (d = 0; d < run->function->num_slots; d++)
    if (d != slot && run->slots[d] == array) return NULL;
  dlop_array_retain(array);
  return array;
}

/* The dead slots of a node are released right after it (their memory goes back to the pool
 * unless a view still holds it: views retain the array that owns their memory). */
static void release_dead(run_state *run, const dlop__function_node *node) {
  for (int32_t i = 0; i < node->num_dead; i++) {
    dlop_array **slot = &run->slots[node->dead_slots[i]];
    dlop_array_release(*slot);
    *slot = NULL;
  }
}

/* A view node: inputs gathered (copied contiguous only when the op declares it needs that),
 * concrete shapes, then each output a view of the input its view_map names. No allocation, no
 * kernel, and no stream to record: a view shares its memory owner's record of pending work. */
static int run_view_node(run_state *run, dlop__function_node *node, int32_t index) {
  int32_t o;
  int status = gather_inputs(run, node, index);
  if (status == DLOP_OK) status = infer_concrete(run, node, index);
  for (o = 0; status == DLOP_OK && o < node->num_outputs; o++) {
    int32_t input = node->op->view_map[o];
    dlop_array *base =
        run->contiguous[input] ? run->contiguous[input] : run->slots[node->input_slots[input]];
    status = dlop__function_make_view(run->function, node, index, o, base, &run->output_types[o],
                                      run->stream, run->handle,
                                      &run->slots[node->output_slots[o]]);
  }
  release_temporaries(run, node);
  if (status != DLOP_OK) return status;
  release_dead(run, node);
  return DLOP_OK;
}

static int run_node(run_state *run, dlop__function_node *node, int32_t index) {
  const dlop_function *function = run->function;
  void *workspace = NULL;
  int32_t i;
  if (run->capture) {
    dlop__graph_capturing->node = index;
    dlop__graph_capturing->node_op = node->op->name;
  }
  if (node->is_view) return run_view_node(run, node, index);
  int status = gather_inputs(run, node, index);
  if (status == DLOP_OK) status = infer_concrete(run, node, index);
  for (i = 0; status == DLOP_OK && i < node->num_outputs; i++) {
    const dlop_type *type = &run->output_types[i];
    dlop_array **slot = &run->slots[node->output_slots[i]];
    /* In a capture a function output is the caller's fresh array, never the arena's memory
     * that every replay writes again. */
    int fresh = run->capture && function->graphs->slot_is_output[node->output_slots[i]];
    *slot = fresh ? NULL : reusable_input(run, node, i);
    if (fresh) dlop__graph_capturing->suspended = 1;
    if (*slot == NULL)
      status = dlop__array_empty_on_stream(function->device, (dlop_dtype)type->dtype, type->ndim,
                                           type->shape, run->stream, slot);
    if (fresh) dlop__graph_capturing->suspended = 0;
    if (status == DLOP_OK) run->output_tensors[i] = *dlop_array_tensor(*slot);
  }
  if (status == DLOP_OK && node->thunk.workspace_bytes > 0)
    status =
        dlop__memory_alloc_on(function->device, node->thunk.workspace_bytes, run->stream, &workspace);
  if (status == DLOP_OK) {
    dlop__stage_node stage = dlop__function_stage_node(node, index);
    status = dlop__stage_run(&stage, &node->thunk, run->input_tensors, run->output_tensors,
                             run->handle, workspace);
  }
  /* outputs record the stream so that releasing or reading them is ordered after the thunk
   * (without a stream there is nothing to record: fresh and reused arrays have none) */
  for (i = 0; run->stream != NULL && i < node->num_outputs; i++)
    if (run->slots[node->output_slots[i]])
      dlop__array_set_stream(run->slots[node->output_slots[i]], run->stream);
  if (workspace) dlop__memory_free_after(function->device, workspace, &run->stream, 1);
  release_temporaries(run, node);
  if (status != DLOP_OK) return status;
  release_dead(run, node);
  return DLOP_OK;
}

/* Scratch that fits here lives on the caller's stack (one-op functions need about 700 bytes);
 * a bigger graph makes one allocation. */
#define LOCAL_SCRATCH_BYTES 4096

/* All of a run's scratch in one block (it is on every call's path). dlop_type and dlop_tensor
 * need 8-byte alignment, which the pointer arrays keep. Only the pointer arrays are zeroed:
 * tensors and types are written before they are read. */
static int allocate_scratch(run_state *run, void *local, size_t local_bytes) {
  const dlop_function *function = run->function;
  size_t inputs = (size_t)function->max_node_inputs + 1;
  size_t outputs = (size_t)function->max_node_outputs + 1;
  size_t slots = (size_t)function->num_slots + 1;
  size_t pointer_bytes = (slots + inputs) * sizeof(dlop_array *);
  size_t bytes = pointer_bytes + (inputs + outputs) * (sizeof(dlop_tensor) + sizeof(dlop_type));
  char *block = local;
  run->heap_scratch = 0;
  if (bytes > local_bytes) {
    block = malloc(bytes);
    if (block == NULL) return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory starting a run");
    run->heap_scratch = 1;
  }
  memset(block, 0, pointer_bytes);
  run->slots = (dlop_array **)block;
  run->contiguous = run->slots + slots;
  run->input_tensors = (dlop_tensor *)(run->contiguous + inputs);
  run->output_tensors = run->input_tensors + inputs;
  run->input_types = (dlop_type *)(run->output_tensors + outputs);
  run->output_types = run->input_types + inputs;
  return DLOP_OK;
}

static void free_scratch(run_state *run) {
  int32_t slot;
  if (run->slots == NULL) return;
  for (slot = run->function->first_node_slot; slot < run->function->num_slots; slot++)
    if (run->slots[slot]) dlop_array_release(run->slots[slot]);
  if (run->heap_scratch) free(run->slots); /* the whole block */
}

/* The run's stream: the caller's, else the function's; never the default stream on CUDA. */
static int pick_stream(run_state *run, dlop_stream *stream) {
  const dlop_function *function = run->function;
  char have[32], want[32];
  run->stream = stream ? stream : function->stream;
  if (stream != NULL && !same_device(dlop_stream_device(stream), function->device))
    return dlop__error(DLOP_DEVICE_MISMATCH, "the stream is on %s but the function runs on %s",
                       dlop_device_format(dlop_stream_device(stream), have, sizeof have),
                       dlop_device_format(function->device, want, sizeof want));
  run->handle = run->stream ? dlop_stream_handle(run->stream) : NULL;
  if (function->device.type == DLOP_DEVICE_CUDA && run->handle == NULL)
    return dlop__error(DLOP_INTERNAL, "no CUDA stream to run the function on %s",
                       dlop_device_format(function->device, want, sizeof want));
  return DLOP_OK;
}

/* Record that a run was enqueued on stream (cheap when it is the function's own or known), so
 * that dlop_function_destroy waits for it. */
static void remember_stream(dlop_function *function, dlop_stream *stream) {
  int32_t i;
  dlop_stream *evicted = NULL;
  if (stream == NULL || stream == function->stream) return;
  pthread_mutex_lock(&function->run_streams_lock);
  for (i = 0; i < function->num_run_streams; i++)
    if (function->run_streams[i] == stream) {
      pthread_mutex_unlock(&function->run_streams_lock);
      return;
    }
  if (function->num_run_streams == DLOP__FUNCTION_MAX_RUN_STREAMS) {
    evicted = function->run_streams[0];
    memmove(function->run_streams, function->run_streams + 1,
            (DLOP__FUNCTION_MAX_RUN_STREAMS - 1) * sizeof(dlop_stream *));
    function->num_run_streams--;
  }
  dlop__stream_retain(stream);
  function->run_streams[function->num_run_streams++] = stream;
  pthread_mutex_unlock(&function->run_streams_lock);
  if (evicted != NULL) {
    /* Forgotten streams must not have this function's work in flight. */
    if (dlop_stream_synchronize(evicted) != DLOP_OK)
      dlop__warn("a function run on more than %d streams: waiting for the oldest failed: %s",
                 DLOP__FUNCTION_MAX_RUN_STREAMS, dlop_last_error());
    dlop_stream_destroy(evicted);
  }
}

/* The nodes of one run on run->stream / run->handle, the outputs moved to outputs[] (inputs
 * checked, their pending writes waited for, the context current). */
static int run_nodes(run_state *run, dlop_array *const *inputs, dlop_array **outputs,
                     void *local_scratch, size_t local_bytes) {
  dlop_function *function = run->function;
  int32_t i;
  int status = allocate_scratch(run, local_scratch, local_bytes);
  for (i = 0; status == DLOP_OK && i < function->num_inputs; i++) run->slots[i] = inputs[i];
  for (i = 0; status == DLOP_OK && i < function->num_constants; i++)
    run->slots[function->num_inputs + i] = function->constants[i];
  for (i = 0; status == DLOP_OK && i < function->num_nodes; i++)
    status = run_node(run, &function->nodes[i], i);
  if (status == DLOP_OK) {
    /* A node output's reference moves from the run to the caller (no retain and release);
     * outputs that are inputs or constants, or a slot given out twice, come back retained. */
    for (i = 0; i < function->num_outputs; i++) {
      int32_t slot = function->output_slots[i];
      dlop_array *array = run->slots[slot];
      int32_t j;
      for (j = 0; array == NULL && j < i; j++)
        if (function->output_slots[j] == slot) array = outputs[j]; /* moved already */
      outputs[i] = array;
      if (slot >= function->first_node_slot && run->slots[slot] != NULL)
        run->slots[slot] = NULL; /* moved: free_scratch does not release it */
      else
        dlop_array_retain(array);
    }
  }
  free_scratch(run);
  return status;
}

int dlop__function_run_captured(dlop_function *function, dlop_array *const *inputs,
                                dlop_stream *stream, void *capture_handle, dlop_array **outputs) {
  run_state run;
  _Alignas(16) char local_scratch[LOCAL_SCRATCH_BYTES];
  memset(&run, 0, sizeof run);
  run.function = function;
  run.stream = stream;
  run.handle = capture_handle;
  run.capture = 1;
  /* The thunks' launches on the capturing stream need no context checks either. */
  dlop__cuda_run_scope saved_run;
  dlop__cuda_run_begin(function->device.id, (CUstream)capture_handle, &saved_run);
  int status = run_nodes(&run, inputs, outputs, local_scratch, sizeof local_scratch);
  dlop__cuda_run_end(&saved_run);
  return status;
}

int dlop_function_run(dlop_function *function, dlop_array *const *inputs, int32_t num_inputs,
                      dlop_array **outputs, int32_t num_outputs, dlop_stream *stream) {
  run_state run;
  _Alignas(16) char local_scratch[LOCAL_SCRATCH_BYTES];
  int32_t i;
  int status;
  if (function == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_function_run: function is NULL");
  if (num_outputs != function->num_outputs || outputs == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "the function has %d output%s, but room for %d was given%s",
                       (int)function->num_outputs, function->num_outputs == 1 ? "" : "s",
                       (int)num_outputs, outputs == NULL ? " (outputs is NULL)" : "");
  for (i = 0; i < num_outputs; i++) outputs[i] = NULL;
  status = check_inputs(function, inputs, num_inputs);
  if (status != DLOP_OK) return status;

  memset(&run, 0, sizeof run);
  run.function = function;
  /* The device's context is current for the whole run (thunks calling cuBLAS need it; the
   * host's own calls then switch nothing), and the caller's comes back at the end. */
  dlop__cuda_scope scope = {NULL, 0};
  if (function->device.type == DLOP_DEVICE_CUDA) {
    status = dlop__cuda_use_device(function->device.id, &scope);
    if (status != DLOP_OK) return status;
  }
  status = pick_stream(&run, stream);
  /* From here the pool and the thunks' launches on run.handle need no context checks. */
  dlop__cuda_run_scope saved_run = {0, 0, NULL};
  int in_run = status == DLOP_OK && run.handle != NULL;
  if (in_run) dlop__cuda_run_begin(function->device.id, (CUstream)run.handle, &saved_run);
  /* A write still pending on another stream must finish before our stream reads it. Only
   * CUDA has such writes: inputs are on the function's device, and a CPU array's pending
   * stream (runs record only their own device's streams) is a CPU stream, whose work is
   * already done; skipping the look saves a lock per input on every CPU call. */
  int cuda = function->device.type == DLOP_DEVICE_CUDA;
  for (i = 0; status == DLOP_OK && cuda && i < num_inputs; i++) {
    dlop_stream *pending = dlop_array_stream(inputs[i]);
    if (pending != NULL && pending != run.stream) status = dlop_array_synchronize(inputs[i]);
  }
  /* A replayed CUDA graph (cuda_graph.c), or the nodes one by one. */
  int handled = 0;
  if (status == DLOP_OK && function->graphs != NULL)
    status = dlop__cuda_graphs_run(function, inputs, run.stream, outputs, &handled);
  if (status == DLOP_OK && !handled)
    status = run_nodes(&run, inputs, outputs, local_scratch, sizeof local_scratch);
  if (run.handle != NULL) {
    /* Work reading the inputs and constants may be in flight on our stream (even after a
     * failure): their memory must not go to another stream before it is done. */
    for (i = 0; i < num_inputs; i++) dlop__array_add_reader(inputs[i], run.stream);
    for (i = 0; i < function->num_constants; i++)
      dlop__array_add_reader(function->constants[i], run.stream);
    remember_stream(function, run.stream);
  }
  if (in_run) dlop__cuda_run_end(&saved_run);
  return scope.changed ? dlop__cuda_restore_after(&scope, status) : status;
}
