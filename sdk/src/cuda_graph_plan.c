/* cuda_graph_plan.c — what needs no GPU in replaying CUDA graphs (cuda_graph.h): which
 * functions may replay and why not, a run's signature key, the recorded buffers, and the scan
 * of captured kernel parameters for the addresses a replay must move. */
#include <stdlib.h>
#include <string.h>

#include "function_internal.h"

/* The node whose output is slot, or NULL (an input or a constant). */
static const dlop__function_node *producer_of(const dlop_function *function, int32_t slot) {
  for (int32_t n = 0; n < function->num_nodes; n++)
    for (int32_t o = 0; o < function->nodes[n].num_outputs; o++)
      if (function->nodes[n].output_slots[o] == slot) return &function->nodes[n];
  return NULL;
}

int dlop__cuda_graphs_decide(const dlop_function *function, int cuda_graphs, char *reason,
                             size_t size) {
  int32_t kernels = 0;
  if (size > 0) reason[0] = '\0';
  if (!cuda_graphs) {
    dlop__format(reason, size, "turned off by the cuda_graphs option");
    return 0;
  }
  /* A node that is not capture-safe may allocate, synchronize or read device data on the host
   * while it runs: none of that can be replayed, so it keeps the whole function out. */
  for (int32_t n = 0; n < function->num_nodes; n++) {
    const dlop__function_node *node = &function->nodes[n];
    if (!(node->op->flags & DLOP_OP_CUDA_GRAPH_SAFE)) {
      dlop__format(reason, size,
                   "node #%d %s is not declared safe for capture (its op lacks "
                   "DLOP_OP_CUDA_GRAPH_SAFE)",
                   (int)node->index, node->op->name);
      return 0;
    }
    if (!node->is_view) kernels++;
  }
  /* A replay hands out a fresh array for every output a node computes; a view would have to be
   * laid out again over memory the graph does not know. */
  for (int32_t i = 0; i < function->num_outputs; i++) {
    int32_t slot = function->output_slots[i];
    if (slot < function->first_node_slot) continue; /* an input or constant, handed back as is */
    const dlop__function_node *node = producer_of(function, slot);
    if (node != NULL && node->is_view) {
      dlop__format(reason, size,
                   "output %d ('%s') is a view made by node #%d %s, which a replay could not "
                   "lay out over a fresh array",
                   (int)i, function->slot_names[slot], (int)node->index, node->op->name);
      return 0;
    }
  }
  if (kernels < 2) {
    dlop__format(reason, size, "%d kernel node%s: a graph launch would save nothing over %s",
                 (int)kernels, kernels == 1 ? "" : "s",
                 kernels == 1 ? "its launch" : "running no kernel");
    return 0;
  }
  return 1;
}

int32_t dlop__cuda_graphs_key_length(const dlop_function *function) {
  int32_t words = 0;
  for (int32_t i = 0; i < function->num_inputs; i++) words += 2 * function->slot_types[i].ndim + 1;
  return words;
}

int dlop__cuda_graphs_create(const dlop_function *function, int cuda_graphs,
                             dlop__cuda_graphs **graphs) {
  *graphs = NULL;
  if (function->device.type != DLOP_DEVICE_CUDA) return DLOP_OK;
  dlop__cuda_graphs *made = calloc(1, sizeof *made);
  if (made != NULL) made->slot_is_output = calloc((size_t)function->num_slots + 1, 1);
  if (made == NULL || made->slot_is_output == NULL) {
    free(made);
    return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory compiling a function");
  }
  made->device = function->device;
  pthread_mutex_init(&made->lock, NULL);
  pthread_mutex_init(&made->capture_lock, NULL);
  for (int32_t i = 0; i < function->num_outputs; i++)
    if (function->output_slots[i] >= function->first_node_slot)
      made->slot_is_output[function->output_slots[i]] = 1;
  made->key_length = dlop__cuda_graphs_key_length(function);
  int replay = dlop__cuda_graphs_decide(function, cuda_graphs, made->reason, sizeof made->reason);
  const char *missing = replay ? dlop__cuda_graphs_missing() : NULL;
  if (missing != NULL) {
    replay = 0;
    dlop__format(made->reason, sizeof made->reason,
                 "the CUDA driver lacks %s (drivers of CUDA 12.4 and later have it)", missing);
  }
  atomic_init(&made->replay, replay);
  *graphs = made;
  return DLOP_OK;
}

void dlop__cuda_graphs_free_plan(dlop__cuda_graphs *graphs) {
  if (graphs == NULL) return;
  if (graphs->capture_stream) dlop_stream_destroy(graphs->capture_stream);
  pthread_mutex_destroy(&graphs->lock);
  pthread_mutex_destroy(&graphs->capture_lock);
  free(graphs->slot_is_output);
  free(graphs);
}

void dlop__cuda_graphs_key(const dlop_function *function, dlop_array *const *inputs,
                           int64_t *key) {
  for (int32_t i = 0; i < function->num_inputs; i++) {
    const dlop_tensor *tensor = dlop_array_tensor(inputs[i]);
    int64_t contiguous[DLOP_MAX_NDIM];
    const int64_t *strides = tensor->strides;
    if (strides == NULL) {
      (void)dlop_contiguous_strides(tensor->shape, tensor->ndim, contiguous);
      strides = contiguous;
    }
    for (int32_t d = 0; d < tensor->ndim; d++) *key++ = tensor->shape[d];
    for (int32_t d = 0; d < tensor->ndim; d++) *key++ = strides[d];
    *key++ = (int64_t)(((uintptr_t)tensor->data + tensor->byte_offset) % 256);
  }
}

dlop__graph_buffer dlop__graph_buffer_of(const dlop_tensor *tensor) {
  dlop__graph_buffer buffer;
  uint64_t element = dlop_dtype_size(dlop_tensor_dtype(tensor));
  buffer.first = (uint64_t)(uintptr_t)tensor->data + tensor->byte_offset;
  buffer.low = buffer.high = buffer.first;
  if (dlop_tensor_numel(tensor) == 0) return buffer;
  int64_t contiguous[DLOP_MAX_NDIM];
  const int64_t *strides = tensor->strides;
  if (strides == NULL) {
    (void)dlop_contiguous_strides(tensor->shape, tensor->ndim, contiguous);
    strides = contiguous;
  }
  /* Arrays keep these spans within int64 (dlop_array_wrap and dlop_array_view check it). */
  int64_t below = 0, above = 0;
  for (int32_t d = 0; d < tensor->ndim; d++) {
    int64_t reach = strides[d] * (tensor->shape[d] - 1);
    if (reach < 0) below += reach;
    else above += reach;
  }
  buffer.low = buffer.first + (uint64_t)(below * (int64_t)element);
  buffer.high = buffer.first + (uint64_t)above * element + element;
  return buffer;
}

int dlop__graph_buffers_overlap(const dlop__graph_buffer *buffers, int32_t count) {
  for (int32_t a = 0; a < count; a++) {
    if (buffers[a].low == buffers[a].high) continue;
    for (int32_t b = a + 1; b < count; b++) {
      if (buffers[b].low == buffers[b].high) continue;
      if (buffers[a].low < buffers[b].high && buffers[b].low < buffers[a].high) return 1;
    }
  }
  return 0;
}

int dlop__graph_find_patches(const unsigned char *bytes, const size_t (*params)[2], size_t count,
                             const dlop__graph_buffer *buffers, int32_t num_buffers,
                             dlop__graph_patch **patches, int32_t *num_patches) {
  for (size_t p = 0; p < count; p++) {
    size_t begin = params[p][0], end = params[p][0] + params[p][1];
    /* Only whole words inside one parameter: two small neighbours never make an address. */
    for (size_t offset = (begin + 7) / 8 * 8; offset + 8 <= end; offset += 8) {
      uint64_t word;
      memcpy(&word, bytes + offset, sizeof word);
      for (int32_t b = 0; b < num_buffers; b++) {
        if (word < buffers[b].low || word >= buffers[b].high) continue;
        dlop__graph_patch *grown =
            realloc(*patches, sizeof(dlop__graph_patch) * (size_t)(*num_patches + 1));
        if (grown == NULL)
          return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory recording a CUDA graph");
        *patches = grown;
        grown[*num_patches].offset = (uint32_t)offset;
        grown[*num_patches].buffer = b;
        grown[*num_patches].value = word;
        (*num_patches)++;
        break; /* buffers do not overlap (checked before capturing) */
      }
    }
  }
  return DLOP_OK;
}

void dlop__graph_apply_patches(unsigned char *bytes, const dlop__graph_patch *patches,
                               int32_t count, const dlop__graph_buffer *recorded,
                               const uint64_t *moved) {
  for (int32_t i = 0; i < count; i++) {
    const dlop__graph_patch *patch = &patches[i];
    /* unsigned: the new address may lie below the recorded one */
    uint64_t word = patch->value + (moved[patch->buffer] - recorded[patch->buffer].first);
    memcpy(bytes + patch->offset, &word, sizeof word);
  }
}

void dlop__cuda_graphs_describe(dlop__cuda_graphs *graphs, char *text, size_t size) {
  pthread_mutex_lock(&graphs->lock);
  if (atomic_load(&graphs->replay))
    dlop__format(text, size,
                 "cuda graphs: replayed (one graph per input signature, recorded on its second "
                 "run; %llu recorded, %llu graph launches, %llu of them with moved addresses)",
                 (unsigned long long)graphs->recorded, (unsigned long long)graphs->replays,
                 (unsigned long long)graphs->updates);
  else
    dlop__format(text, size, "cuda graphs: not replayed: %s", graphs->reason);
  pthread_mutex_unlock(&graphs->lock);
}
