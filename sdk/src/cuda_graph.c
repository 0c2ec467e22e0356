/* cuda_graph.c — capturing a compiled CUDA function's run into a CUDA graph and replaying it
 * (cuda_graph.h says how). A signature's first run goes node by node; its second is captured
 * on the function's private stream, instantiated and launched; later ones set the new input and
 * output addresses into the captured nodes (only the nodes that hold them, only when they
 * moved) and launch. Launches of one graph are ordered by the driver after each other, so
 * several threads and streams may replay one recording: its arena is never used by two
 * launches at once. */
#include <stdlib.h>
#include <string.h>

#include "function_internal.h"

enum { SEEN = 0, READY = 1 };

/* A captured node that holds a recorded address, and its parameters as a replay sets them. */
typedef struct node_patches {
  CUgraphNode node;
  int type; /* DLOP_CU_GRAPH_NODE_TYPE_KERNEL, _MEMCPY or _MEMSET */
  dlop__cuda_kernel_node_params kernel; /* kernel_params point into bytes */
  dlop__cuda_memcpy3d copy;
  dlop__cuda_memset_node_params set;
  unsigned char *bytes; /* kernel: its arguments; the copy or set params otherwise */
  void **pointers;      /* kernel: one per argument, into bytes */
  dlop__graph_patch *patches;
  int32_t num_patches;
} node_patches;

struct dlop__graph_recording {
  int64_t *key;
  int state; /* SEEN: run once, node by node; READY: graph and exec below */
  CUgraph graph;
  CUgraphExec exec;
  dlop__graph_arena arena;
  int32_t num_buffers;         /* the inputs, then one per distinct computed output */
  dlop__graph_buffer *buffers; /* as recorded */
  uint64_t *applied;           /* the element-0 addresses the exec holds now */
  int32_t *output_buffer;      /* per function output: its buffer, or -1 (an input, a constant) */
  dlop_type *output_types;     /* per function output: its concrete type */
  node_patches *nodes;
  int32_t num_nodes;
  size_t graph_nodes; /* all the captured graph's nodes; 0 (empty tensors): no exec, no launch */
  dlop_stream *last_stream; /* retained: where the last launch ran */
  dlop__graph_recording *next;
};

/* ---- recordings ------------------------------------------------------------------------ */

static void free_nodes(node_patches *nodes, int32_t count) {
  for (int32_t i = 0; i < count; i++) {
    if (nodes[i].type == DLOP_CU_GRAPH_NODE_TYPE_KERNEL) free(nodes[i].bytes);
    free(nodes[i].pointers);
    free(nodes[i].patches);
  }
  free(nodes);
}

/* The device's context is current (a run), or dlop__cuda_graphs_destroy made it so. */
static void destroy_recording(dlop__graph_recording *recording) {
  if (recording == NULL) return;
  if (recording->exec) dlop__cuda.cuGraphExecDestroy(recording->exec); /* freed when done */
  if (recording->graph) dlop__cuda.cuGraphDestroy(recording->graph);
  dlop__graph_arena_release(&recording->arena, recording->last_stream);
  dlop_stream_destroy(recording->last_stream);
  free_nodes(recording->nodes, recording->num_nodes);
  free(recording->buffers);
  free(recording->applied);
  free(recording->output_buffer);
  free(recording->output_types);
  free(recording->key);
  free(recording);
}

/* The recording of key, moved to the front (most recently used), or NULL. Lock held. */
static dlop__graph_recording *find_locked(dlop__cuda_graphs *graphs, const int64_t *key) {
  size_t bytes = sizeof(int64_t) * (size_t)graphs->key_length;
  for (dlop__graph_recording **link = &graphs->recordings; *link; link = &(*link)->next) {
    dlop__graph_recording *found = *link;
    if (memcmp(found->key, key, bytes) != 0) continue;
    *link = found->next;
    found->next = graphs->recordings;
    graphs->recordings = found;
    return found;
  }
  return NULL;
}

/* Put recording in front, in place of one of the same key, and forget the least recently used
 * past the cap. Lock held. */
static void insert_locked(dlop__cuda_graphs *graphs, dlop__graph_recording *recording) {
  size_t bytes = sizeof(int64_t) * (size_t)graphs->key_length;
  for (dlop__graph_recording **link = &graphs->recordings; *link; link = &(*link)->next) {
    if (memcmp((*link)->key, recording->key, bytes) != 0) continue;
    dlop__graph_recording *old = *link;
    *link = old->next;
    destroy_recording(old);
    graphs->num_recordings--;
    break;
  }
  recording->next = graphs->recordings;
  graphs->recordings = recording;
  graphs->num_recordings++;
  if (graphs->num_recordings <= DLOP__CUDA_GRAPHS_MAX_RECORDINGS) return;
  dlop__graph_recording **link = &graphs->recordings;
  while ((*link)->next) link = &(*link)->next;
  destroy_recording(*link);
  *link = NULL;
  graphs->num_recordings--;
}

/* Replays stop for good (the recordings made so far are kept until the function goes): the
 * reason is what explain() shows, and it is said once on stderr. Lock held. */
static void turn_off_locked(dlop__cuda_graphs *graphs, const char *why) {
  if (!atomic_load(&graphs->replay)) return;
  atomic_store(&graphs->replay, 0);
  dlop__format(graphs->reason, sizeof graphs->reason, "%s; its runs go node by node from now on",
               why);
  dlop__warn("a CUDA function stopped replaying CUDA graphs: %s", graphs->reason);
}

static void turn_off(dlop__cuda_graphs *graphs, const char *why) {
  pthread_mutex_lock(&graphs->lock);
  turn_off_locked(graphs, why);
  pthread_mutex_unlock(&graphs->lock);
}

/* ---- reading a captured graph ---------------------------------------------------------- */

static int32_t buffer_containing(const dlop__graph_buffer *buffers, int32_t count,
                                 uint64_t address) {
  for (int32_t b = 0; b < count; b++)
    if (address >= buffers[b].low && address < buffers[b].high) return b;
  return -1;
}

/* A kernel node's arguments copied out, with the words that hold recorded addresses. */
static int read_kernel(node_patches *node, const dlop__graph_buffer *buffers, int32_t count,
                       char *why, size_t why_size) {
  CUresult result = dlop__cuda.cuGraphKernelNodeGetParams(node->node, &node->kernel);
  if (result != DLOP_CUDA_SUCCESS) {
    dlop__format(why, why_size, "cuGraphKernelNodeGetParams failed: %s",
                 dlop__cuda_result_text(result));
    return 0;
  }
  if (node->kernel.func == NULL || node->kernel.kernel_params == NULL) {
    dlop__format(why, why_size, "a captured kernel's arguments are not in a form a replay can "
                                "rewrite (no function handle or no argument array)");
    return 0;
  }
  size_t (*params)[2] = NULL, total = 0, n = 0;
  for (;; n++) {
    size_t offset = 0, size = 0;
    result = dlop__cuda.cuFuncGetParamInfo(node->kernel.func, n, &offset, &size);
    if (result == DLOP_CUDA_ERROR_INVALID_VALUE) break; /* past the last argument */
    size_t (*grown)[2] = realloc(params, sizeof *params * (n + 1));
    if (result != DLOP_CUDA_SUCCESS || grown == NULL) {
      free(grown ? grown : params);
      dlop__format(why, why_size, "cuFuncGetParamInfo failed: %s",
                   grown ? dlop__cuda_result_text(result) : "out of host memory");
      return 0;
    }
    params = grown;
    params[n][0] = offset;
    params[n][1] = size;
    if (offset + size > total) total = offset + size;
  }
  node->bytes = calloc(total + 8, 1);
  node->pointers = calloc(n + 1, sizeof(void *));
  if (node->bytes == NULL || node->pointers == NULL) {
    free(params);
    dlop__format(why, why_size, "out of host memory");
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    memcpy(node->bytes + params[i][0], node->kernel.kernel_params[i], params[i][1]);
    node->pointers[i] = node->bytes + params[i][0];
  }
  int status = dlop__graph_find_patches(node->bytes, (const size_t(*)[2])params, n, buffers,
                                        count, &node->patches, &node->num_patches);
  free(params);
  if (status != DLOP_OK) {
    dlop__format(why, why_size, "%s", dlop_last_error());
    return 0;
  }
  node->kernel.kernel_params = node->pointers;
  node->kernel.extra = NULL;
  return 1;
}

/* One address field of a copy or set node: patched when its target lies in a buffer. */
static int patch_field(node_patches *node, size_t field, uint64_t value, uint64_t target,
                       const dlop__graph_buffer *buffers, int32_t count) {
  int32_t b = buffer_containing(buffers, count, target);
  if (b < 0) return 1;
  dlop__graph_patch *grown =
      realloc(node->patches, sizeof(dlop__graph_patch) * (size_t)(node->num_patches + 1));
  if (grown == NULL) return 0;
  node->patches = grown;
  grown[node->num_patches].offset = (uint32_t)field;
  grown[node->num_patches].buffer = b;
  grown[node->num_patches].value = value;
  node->num_patches++;
  return 1;
}

static int device_memory(int type) {
  return type == DLOP_CU_MEMORYTYPE_DEVICE || type == DLOP_CU_MEMORYTYPE_UNIFIED;
}

static int read_copy(node_patches *node, const dlop__graph_buffer *buffers, int32_t count,
                     char *why, size_t why_size) {
  dlop__cuda_memcpy3d *copy = &node->copy;
  CUresult result = dlop__cuda.cuGraphMemcpyNodeGetParams(node->node, copy);
  if (result != DLOP_CUDA_SUCCESS) {
    dlop__format(why, why_size, "cuGraphMemcpyNodeGetParams failed: %s",
                 dlop__cuda_result_text(result));
    return 0;
  }
  if (!device_memory(copy->src_memory_type) || !device_memory(copy->dst_memory_type)) {
    dlop__format(why, why_size, "a node copies between the host and the device while it runs "
                                "(a replay would copy stale host memory)");
    return 0;
  }
  node->bytes = (unsigned char *)copy;
  /* The copy starts x bytes into the address it names: the buffer is the one it starts in. */
  if (!patch_field(node, offsetof(dlop__cuda_memcpy3d, src_device), copy->src_device,
                   copy->src_device + copy->src_x_bytes, buffers, count) ||
      !patch_field(node, offsetof(dlop__cuda_memcpy3d, dst_device), copy->dst_device,
                   copy->dst_device + copy->dst_x_bytes, buffers, count)) {
    dlop__format(why, why_size, "out of host memory");
    return 0;
  }
  return 1;
}

static int read_set(node_patches *node, const dlop__graph_buffer *buffers, int32_t count,
                    char *why, size_t why_size) {
  CUresult result = dlop__cuda.cuGraphMemsetNodeGetParams(node->node, &node->set);
  if (result != DLOP_CUDA_SUCCESS) {
    dlop__format(why, why_size, "cuGraphMemsetNodeGetParams failed: %s",
                 dlop__cuda_result_text(result));
    return 0;
  }
  node->bytes = (unsigned char *)&node->set;
  if (!patch_field(node, offsetof(dlop__cuda_memset_node_params, dst), node->set.dst,
                   node->set.dst, buffers, count)) {
    dlop__format(why, why_size, "out of host memory");
    return 0;
  }
  return 1;
}

/* The captured nodes that hold a recorded input's or output's address, in recording->nodes;
 * 0 and why when the graph holds something a replay cannot follow. */
static int read_graph(dlop__graph_recording *recording, char *why, size_t why_size) {
  size_t count = 0;
  CUresult result = dlop__cuda.cuGraphGetNodes(recording->graph, NULL, &count);
  CUgraphNode *all = result == DLOP_CUDA_SUCCESS ? calloc(count + 1, sizeof *all) : NULL;
  if (all != NULL && count > 0) result = dlop__cuda.cuGraphGetNodes(recording->graph, all, &count);
  if (result != DLOP_CUDA_SUCCESS || all == NULL) {
    dlop__format(why, why_size, "cuGraphGetNodes failed: %s",
                 all ? dlop__cuda_result_text(result) : "out of host memory");
    free(all);
    return 0;
  }
  recording->graph_nodes = count;
  recording->nodes = calloc(count + 1, sizeof(node_patches));
  if (recording->nodes == NULL) {
    free(all);
    dlop__format(why, why_size, "out of host memory");
    return 0;
  }
  int ok = 1;
  for (size_t i = 0; ok && i < count; i++) {
    node_patches *node = &recording->nodes[recording->num_nodes];
    memset(node, 0, sizeof *node);
    node->node = all[i];
    result = dlop__cuda.cuGraphNodeGetType(all[i], &node->type);
    if (result != DLOP_CUDA_SUCCESS) {
      dlop__format(why, why_size, "cuGraphNodeGetType failed: %s", dlop__cuda_result_text(result));
      ok = 0;
      break;
    }
    switch (node->type) {
      case DLOP_CU_GRAPH_NODE_TYPE_EMPTY: continue;
      case DLOP_CU_GRAPH_NODE_TYPE_KERNEL:
        ok = read_kernel(node, recording->buffers, recording->num_buffers, why, why_size);
        break;
      case DLOP_CU_GRAPH_NODE_TYPE_MEMCPY:
        ok = read_copy(node, recording->buffers, recording->num_buffers, why, why_size);
        break;
      case DLOP_CU_GRAPH_NODE_TYPE_MEMSET:
        ok = read_set(node, recording->buffers, recording->num_buffers, why, why_size);
        break;
      default:
        dlop__format(why, why_size,
                     "the captured graph holds a node of type %d (a replay follows kernels, "
                     "copies and memsets only)",
                     node->type);
        ok = 0;
    }
    /* keep only the nodes a replay must rewrite (a failed one too, for freeing) */
    if (!ok || node->num_patches > 0) recording->num_nodes++;
    else if (node->type == DLOP_CU_GRAPH_NODE_TYPE_KERNEL) {
      free(node->bytes);
      free(node->pointers);
    }
  }
  free(all);
  return ok;
}

/* ---- capture ------------------------------------------------------------------------- */

/* The recorded outputs: each computed output's buffer (one per distinct slot) and type. */
static int describe_outputs(const dlop_function *function, dlop__graph_recording *recording,
                            dlop_array **outputs) {
  int32_t n = function->num_outputs;
  recording->output_buffer = malloc(sizeof(int32_t) * (size_t)n);
  recording->output_types = calloc((size_t)n, sizeof(dlop_type));
  if (recording->output_buffer == NULL || recording->output_types == NULL)
    return dlop__error(DLOP_OUT_OF_MEMORY, "out of host memory recording a CUDA graph");
  for (int32_t j = 0; j < n; j++) {
    int32_t slot = function->output_slots[j];
    const dlop_tensor *tensor = dlop_array_tensor(outputs[j]);
    recording->output_buffer[j] = -1;
    recording->output_types[j].dtype = (int32_t)dlop_tensor_dtype(tensor);
    recording->output_types[j].ndim = tensor->ndim;
    for (int32_t d = 0; d < tensor->ndim; d++) recording->output_types[j].shape[d] = tensor->shape[d];
    if (slot < function->first_node_slot) continue;
    for (int32_t k = 0; k < j; k++)
      if (function->output_slots[k] == slot) recording->output_buffer[j] = recording->output_buffer[k];
    if (recording->output_buffer[j] >= 0) continue;
    recording->output_buffer[j] = recording->num_buffers;
    recording->buffers[recording->num_buffers++] = dlop__graph_buffer_of(tensor);
  }
  return DLOP_OK;
}

static void release_outputs(dlop_array **outputs, int32_t count) {
  for (int32_t j = 0; j < count; j++) {
    dlop_array_release(outputs[j]);
    outputs[j] = NULL;
  }
}

/* Capture one run of key's signature, instantiate it and launch it on stream: the run's outputs
 * in outputs[], *made the READY recording. A capture that cannot be replayed turns graphs off
 * (the caller then runs node by node); a failed launch is the call's error. */
static int capture(dlop_function *function, dlop__cuda_graphs *graphs, const int64_t *key,
                   dlop_array *const *inputs, dlop_stream *stream, dlop_array **outputs,
                   dlop__graph_recording **made) {
  char why[448];
  *made = NULL;
  dlop__graph_recording *recording = calloc(1, sizeof *recording);
  int32_t max_buffers = function->num_inputs + function->num_outputs;
  if (recording != NULL) {
    recording->key = malloc(sizeof(int64_t) * ((size_t)graphs->key_length + 1));
    recording->buffers = calloc((size_t)max_buffers + 1, sizeof(dlop__graph_buffer));
  }
  if (recording == NULL || recording->key == NULL || recording->buffers == NULL) {
    destroy_recording(recording);
    return dlop__error(DLOP_OUT_OF_MEMORY, "out of host memory recording a CUDA graph");
  }
  memcpy(recording->key, key, sizeof(int64_t) * (size_t)graphs->key_length);
  recording->state = READY;
  recording->arena.device = function->device;
  for (int32_t i = 0; i < function->num_inputs; i++)
    recording->buffers[i] = dlop__graph_buffer_of(dlop_array_tensor(inputs[i]));
  recording->num_buffers = function->num_inputs;
  /* An address inside two overlapping inputs could not tell which one it follows, and one
   * inside an input that overlaps a constant (the constant passed as an input too) would move
   * the constant's reads: this run goes node by node, the signature's next one tries again. */
  int overlap = dlop__graph_buffers_overlap(recording->buffers, function->num_inputs);
  for (int32_t i = 0; !overlap && i < function->num_inputs; i++)
    for (int32_t c = 0; !overlap && c < function->num_constants; c++) {
      dlop__graph_buffer pair[2] = {
          recording->buffers[i], dlop__graph_buffer_of(dlop_array_tensor(function->constants[c]))};
      overlap = dlop__graph_buffers_overlap(pair, 2);
    }
  if (overlap) {
    destroy_recording(recording);
    return DLOP_OK;
  }
  if (graphs->capture_stream == NULL) {
    if (dlop_stream_create(function->device, &graphs->capture_stream) != DLOP_OK) {
      dlop__format(why, sizeof why, "no stream to capture on: %s", dlop_last_error());
      turn_off(graphs, why);
      destroy_recording(recording);
      return DLOP_OK;
    }
  }
  void *handle = dlop_stream_handle(graphs->capture_stream);
  CUresult result = dlop__cuda.cuStreamBeginCapture((CUstream)handle,
                                                    DLOP_CU_STREAM_CAPTURE_MODE_RELAXED);
  if (result != DLOP_CUDA_SUCCESS) {
    dlop__format(why, sizeof why, "cuStreamBeginCapture failed: %s", dlop__cuda_result_text(result));
    turn_off(graphs, why);
    destroy_recording(recording);
    return DLOP_OK;
  }
  dlop__graph_capture watch;
  memset(&watch, 0, sizeof watch);
  watch.arena = &recording->arena;
  watch.stream = handle;
  watch.node = -1;
  dlop__graph_capturing = &watch;
  int status = dlop__function_run_captured(function, inputs, stream, handle, outputs);
  dlop__graph_capturing = NULL;
  if (status != DLOP_OK) dlop__format(why, sizeof why, "%s", dlop_last_error());
  CUresult ended = dlop__cuda.cuStreamEndCapture((CUstream)handle, &recording->graph);
  int ok = status == DLOP_OK && ended == DLOP_CUDA_SUCCESS && watch.problem[0] == '\0';
  if (!ok) {
    char message[512];
    if (watch.problem[0] != '\0') {
      /* that work ran at once, outside the capture, on memory about to go back to the pool */
      dlop__cuda.cuCtxSynchronize();
      dlop__format(message, sizeof message, "capturing a run failed: %s", watch.problem);
    } else if (status != DLOP_OK) {
      dlop__format(message, sizeof message, "capturing a run failed: %s", why);
    } else {
      dlop__format(message, sizeof message, "capturing a run failed: cuStreamEndCapture: %s",
                   dlop__cuda_result_text(ended));
    }
    release_outputs(outputs, function->num_outputs);
    turn_off(graphs, message);
    destroy_recording(recording);
    return DLOP_OK;
  }
  status = describe_outputs(function, recording, outputs);
  if (status != DLOP_OK) {
    release_outputs(outputs, function->num_outputs);
    destroy_recording(recording);
    return status;
  }
  ok = read_graph(recording, why, sizeof why);
  /* A run of empty tensors launches nothing: its replays only hand out fresh outputs. */
  if (ok && recording->graph_nodes > 0) {
    result = dlop__cuda.cuGraphInstantiateWithFlags(&recording->exec, recording->graph, 0);
    if (result != DLOP_CUDA_SUCCESS) {
      recording->exec = NULL;
      dlop__format(why, sizeof why, "cuGraphInstantiateWithFlags failed: %s",
                   dlop__cuda_result_text(result));
      ok = 0;
    }
  }
  if (!ok) {
    char message[512];
    dlop__format(message, sizeof message, "a captured run cannot be replayed: %s", why);
    release_outputs(outputs, function->num_outputs);
    turn_off(graphs, message);
    destroy_recording(recording);
    return DLOP_OK;
  }
  recording->applied = malloc(sizeof(uint64_t) * ((size_t)recording->num_buffers + 1));
  if (recording->applied == NULL) {
    release_outputs(outputs, function->num_outputs);
    destroy_recording(recording);
    return dlop__error(DLOP_OUT_OF_MEMORY, "out of host memory recording a CUDA graph");
  }
  for (int32_t b = 0; b < recording->num_buffers; b++)
    recording->applied[b] = recording->buffers[b].first;
  /* The exec holds this run's addresses: its first launch needs no update. */
  result = recording->exec ? dlop__cuda.cuGraphLaunch(recording->exec,
                                                      (CUstream)dlop_stream_handle(stream))
                           : DLOP_CUDA_SUCCESS;
  if (result != DLOP_CUDA_SUCCESS) {
    status = dlop__cuda_fail(result, "cuGraphLaunch (the function's newly captured CUDA graph)");
    release_outputs(outputs, function->num_outputs);
    destroy_recording(recording);
    return status;
  }
  dlop__stream_retain(stream);
  recording->last_stream = stream;
  *made = recording;
  return DLOP_OK;
}

/* ---- replay ---------------------------------------------------------------------------- */

/* The parameters of node into the exec, for the addresses in moved. */
static CUresult set_node(CUgraphExec exec, node_patches *node, const dlop__graph_buffer *recorded,
                         const uint64_t *moved, CUcontext context) {
  dlop__graph_apply_patches(node->bytes, node->patches, node->num_patches, recorded, moved);
  switch (node->type) {
    case DLOP_CU_GRAPH_NODE_TYPE_KERNEL:
      return dlop__cuda.cuGraphExecKernelNodeSetParams(exec, node->node, &node->kernel);
    case DLOP_CU_GRAPH_NODE_TYPE_MEMCPY:
      return dlop__cuda.cuGraphExecMemcpyNodeSetParams(exec, node->node, &node->copy, context);
    default:
      return dlop__cuda.cuGraphExecMemsetNodeSetParams(exec, node->node, &node->set, context);
  }
}

/* Fresh outputs, the new addresses into the exec where they moved, one launch. Lock held. */
static int replay_locked(dlop_function *function, dlop__cuda_graphs *graphs,
                         dlop__graph_recording *recording, dlop_array *const *inputs,
                         dlop_stream *stream, dlop_array **outputs, int *handled) {
  uint64_t local[32];
  uint64_t *moved = recording->num_buffers <= 32
                        ? local
                        : malloc(sizeof(uint64_t) * (size_t)recording->num_buffers);
  if (moved == NULL) return dlop__error(DLOP_OUT_OF_MEMORY, "out of host memory starting a run");
  int status = DLOP_OK;
  for (int32_t i = 0; i < function->num_inputs; i++)
    moved[i] = dlop__graph_buffer_of(dlop_array_tensor(inputs[i])).first;
  for (int32_t j = 0; status == DLOP_OK && j < function->num_outputs; j++) {
    int32_t b = recording->output_buffer[j], slot = function->output_slots[j];
    dlop_array *same = NULL;
    if (b < 0) same = slot < function->num_inputs ? inputs[slot]
                                                 : function->constants[slot - function->num_inputs];
    for (int32_t k = 0; same == NULL && k < j; k++)
      if (recording->output_buffer[k] == b) same = outputs[k];
    if (same != NULL) {
      dlop_array_retain(same);
      outputs[j] = same;
      continue;
    }
    const dlop_type *type = &recording->output_types[j];
    status = dlop__array_empty_on_stream(function->device, (dlop_dtype)type->dtype, type->ndim,
                                         type->shape, stream, &outputs[j]);
    if (status == DLOP_OK) moved[b] = dlop__graph_buffer_of(dlop_array_tensor(outputs[j])).first;
  }
  int changed = 0;
  for (int32_t b = 0; status == DLOP_OK && b < recording->num_buffers; b++)
    changed |= moved[b] != recording->applied[b];
  if (status == DLOP_OK && changed && recording->exec != NULL) {
    CUcontext context = NULL;
    status = dlop__cuda_primary_context(function->device.id, &context);
    for (int32_t n = 0; status == DLOP_OK && n < recording->num_nodes; n++) {
      node_patches *node = &recording->nodes[n];
      int dirty = 0;
      for (int32_t p = 0; p < node->num_patches; p++)
        dirty |= moved[node->patches[p].buffer] != recording->applied[node->patches[p].buffer];
      if (!dirty) continue;
      CUresult result = set_node(recording->exec, node, recording->buffers, moved, context);
      if (result != DLOP_CUDA_SUCCESS) {
        /* The exec is half updated: it is never launched again, and this run goes node by node. */
        char why[320];
        dlop__format(why, sizeof why, "setting new addresses into a replayed graph failed: %s",
                     dlop__cuda_result_text(result));
        turn_off_locked(graphs, why);
        release_outputs(outputs, function->num_outputs);
        if (moved != local) free(moved);
        return DLOP_OK;
      }
    }
    if (status == DLOP_OK)
      memcpy(recording->applied, moved, sizeof(uint64_t) * (size_t)recording->num_buffers);
  }
  if (status == DLOP_OK && recording->exec != NULL) {
    CUresult result = dlop__cuda.cuGraphLaunch(recording->exec, (CUstream)dlop_stream_handle(stream));
    if (result != DLOP_CUDA_SUCCESS)
      status = dlop__cuda_fail(result, "cuGraphLaunch (replaying the function's CUDA graph)");
  }
  if (moved != local) free(moved);
  if (status != DLOP_OK) {
    release_outputs(outputs, function->num_outputs);
    return status;
  }
  for (int32_t j = 0; j < function->num_outputs; j++)
    if (recording->output_buffer[j] >= 0) dlop__array_set_stream(outputs[j], stream);
  if (recording->last_stream != stream) {
    dlop__stream_retain(stream);
    dlop_stream_destroy(recording->last_stream);
    recording->last_stream = stream;
  }
  graphs->replays++;
  if (changed) graphs->updates++;
  *handled = 1;
  return DLOP_OK;
}

/* A signature's second run: capture it (one capture at a time per function), unless another
 * thread recorded it meanwhile. */
static int record(dlop_function *function, dlop__cuda_graphs *graphs, const int64_t *key,
                  dlop_array *const *inputs, dlop_stream *stream, dlop_array **outputs,
                  int *handled) {
  int status = DLOP_OK;
  pthread_mutex_lock(&graphs->capture_lock);
  pthread_mutex_lock(&graphs->lock);
  dlop__graph_recording *recording =
      atomic_load(&graphs->replay) ? find_locked(graphs, key) : NULL;
  if (recording != NULL && recording->state == READY)
    status = replay_locked(function, graphs, recording, inputs, stream, outputs, handled);
  pthread_mutex_unlock(&graphs->lock);
  if (!*handled && status == DLOP_OK && atomic_load(&graphs->replay)) {
    dlop__graph_recording *made = NULL;
    status = capture(function, graphs, key, inputs, stream, outputs, &made);
    if (made != NULL) {
      pthread_mutex_lock(&graphs->lock);
      insert_locked(graphs, made);
      graphs->recorded++;
      graphs->replays++;
      pthread_mutex_unlock(&graphs->lock);
      *handled = 1;
    }
  }
  pthread_mutex_unlock(&graphs->capture_lock);
  return status;
}

int dlop__cuda_graphs_run(dlop_function *function, dlop_array *const *inputs, dlop_stream *stream,
                          dlop_array **outputs, int *handled) {
  dlop__cuda_graphs *graphs = function->graphs;
  *handled = 0;
  if (!atomic_load_explicit(&graphs->replay, memory_order_relaxed)) return DLOP_OK;
  int64_t local_key[64];
  int64_t *key = graphs->key_length <= 64
                     ? local_key
                     : malloc(sizeof(int64_t) * (size_t)graphs->key_length);
  if (key == NULL) return dlop__error(DLOP_OUT_OF_MEMORY, "out of host memory starting a run");
  dlop__cuda_graphs_key(function, inputs, key);
  int status = DLOP_OK, second = 0;
  pthread_mutex_lock(&graphs->lock);
  /* turned off meanwhile? (a failed update leaves a half-updated exec that must not run) */
  int on = atomic_load(&graphs->replay);
  dlop__graph_recording *recording = on ? find_locked(graphs, key) : NULL;
  if (!on) {
    /* node by node */
  } else if (recording != NULL && recording->state == READY) {
    status = replay_locked(function, graphs, recording, inputs, stream, outputs, handled);
  } else if (recording != NULL) {
    second = 1;
  } else {
    /* First sight of this signature: remember it and run node by node (a shape seen once
     * costs no capture). */
    recording = calloc(1, sizeof *recording);
    if (recording != NULL) recording->key = malloc(sizeof(int64_t) * ((size_t)graphs->key_length + 1));
    if (recording != NULL && recording->key != NULL) {
      memcpy(recording->key, key, sizeof(int64_t) * (size_t)graphs->key_length);
      recording->state = SEEN;
      insert_locked(graphs, recording);
    } else {
      free(recording);
    }
  }
  pthread_mutex_unlock(&graphs->lock);
  if (second) status = record(function, graphs, key, inputs, stream, outputs, handled);
  if (key != local_key) free(key);
  return status;
}

void dlop__cuda_graphs_destroy(dlop__cuda_graphs *graphs) {
  if (graphs == NULL || graphs->recordings == NULL) return;
  /* the graphs live in the device's primary context */
  dlop__cuda_scope scope;
  if (dlop__cuda_use_device(graphs->device.id, &scope) != DLOP_OK)
    dlop__warn("destroying a function's CUDA graphs: %s", dlop_last_error());
  while (graphs->recordings != NULL) {
    dlop__graph_recording *next = graphs->recordings->next;
    destroy_recording(graphs->recordings);
    graphs->recordings = next;
  }
  graphs->num_recordings = 0;
  dlop__cuda_restore_context(&scope);
}
