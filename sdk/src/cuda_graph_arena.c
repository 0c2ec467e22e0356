/* cuda_graph_arena.c — the memory a captured run allocates, and what it must not do. While a
 * thread captures a function's run into a CUDA graph (cuda_graph.c) the pool hands its
 * intermediates, workspace and contiguous copies out of the recording's arena: blocks taken
 * from the pool once and kept for the graph's life, since every replay writes the same
 * addresses. A block freed during the capture is reused by a later request of its size in the
 * same capture (the captured work is ordered like the stream it was enqueued on). The host
 * table reports work a thunk enqueues on another stream, or a synchronization, as the capture's
 * problem: the graph would miss that work. */
#include <stdlib.h>

#include "cuda_graph.h"
#include "memory_pool.h"

_Thread_local dlop__graph_capture *dlop__graph_capturing;

int dlop__graph_arena_alloc(dlop__graph_arena *arena, size_t bytes, uint64_t stream_id,
                            void **pointer) {
  size_t size = dlop__pool_round_size(bytes);
  *pointer = NULL;
  if (size == 0)
    return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory: %zu bytes cannot be allocated", bytes);
  for (int32_t i = 0; i < arena->count; i++) {
    dlop__graph_arena_block *block = &arena->blocks[i];
    if (block->in_use || block->size != size) continue;
    block->in_use = 1;
    *pointer = block->pointer;
    return DLOP_OK;
  }
  if (arena->count == arena->capacity) {
    int32_t capacity = arena->capacity ? 2 * arena->capacity : 16;
    dlop__graph_arena_block *grown = realloc(arena->blocks, sizeof *grown * (size_t)capacity);
    if (grown == NULL)
      return dlop__error(DLOP_OUT_OF_MEMORY, "out of host memory recording a CUDA graph");
    arena->blocks = grown;
    arena->capacity = capacity;
  }
  /* From the pool, with the capture's hooks out of the way; the block stays in use there. */
  dlop__graph_capture *capture = dlop__graph_capturing;
  dlop__graph_capturing = NULL;
  dlop__memory_pool *pool;
  dlop__pool_block *block = NULL;
  dlop__cuda_scope scope;
  int status = dlop__device_pool_get(arena->device, &pool, &scope);
  if (status == DLOP_OK) status = dlop__pool_take(pool, arena->device, size, stream_id, 1, &block);
  status = dlop__cuda_restore_after(&scope, status);
  dlop__graph_capturing = capture;
  if (status != DLOP_OK) return status;
  arena->blocks[arena->count].pointer = block->pointer;
  arena->blocks[arena->count].size = size;
  arena->blocks[arena->count].in_use = 1;
  arena->count++;
  arena->bytes += size;
  *pointer = block->pointer;
  return DLOP_OK;
}

int dlop__graph_arena_take_back(dlop__graph_arena *arena, void *pointer) {
  for (int32_t i = 0; i < arena->count; i++) {
    if (arena->blocks[i].pointer != pointer) continue;
    arena->blocks[i].in_use = 0;
    return 1;
  }
  return 0;
}

void dlop__graph_arena_release(dlop__graph_arena *arena, dlop_stream *last_user) {
  for (int32_t i = 0; i < arena->count; i++) {
    /* The graph's last launch ran on last_user, after every earlier launch: once that work is
     * done no replay uses the block. */
    if (dlop__memory_free_after(arena->device, arena->blocks[i].pointer, &last_user,
                                last_user ? 1 : 0) != DLOP_OK)
      dlop__warn("freeing a CUDA graph's memory: %s", dlop_last_error());
  }
  free(arena->blocks);
  arena->blocks = NULL;
  arena->count = arena->capacity = 0;
  arena->bytes = 0;
}

/* The first problem is kept: it names the node that caused it. */
static void note(dlop__graph_capture *capture, const char *what, const char *detail) {
  if (capture->problem[0] != '\0') return;
  dlop__format(capture->problem, sizeof capture->problem, "node #%d %s %s%s", (int)capture->node,
               capture->node_op ? capture->node_op : "?", what, detail);
}

void dlop__graph_capture_saw_stream(void *stream, const char *what) {
  dlop__graph_capture *capture = dlop__graph_capturing;
  if (capture == NULL || stream == capture->stream) return;
  note(capture, what,
       stream == NULL ? " on the default stream, not the stream it was given"
                      : " on a stream other than the one it was given");
}

void dlop__graph_capture_saw(const char *what) {
  dlop__graph_capture *capture = dlop__graph_capturing;
  if (capture != NULL) note(capture, what, "");
}
