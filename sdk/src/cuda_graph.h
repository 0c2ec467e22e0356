/* cuda_graph.h — replayed CUDA graphs of compiled functions, internal to libdlop. A CUDA
 * function whose nodes are all capture-safe is captured once per input signature (shapes,
 * strides and address alignment of each input) on the signature's second run and replayed with
 * one cuGraphLaunch per later run. The captured kernels' arguments hold the addresses of that
 * run's inputs and outputs; each replay rewrites those words (kernel, memcpy and memset node
 * parameters) for the new addresses, found once by scanning the captured parameters for
 * addresses inside the recorded inputs and outputs. Intermediates and workspace come from an
 * arena the recording owns, so their addresses stay valid and fixed for the graph's life.
 * Files: cuda_graph_plan.c (the decisions, keys and address scanning: no driver calls, tested
 * in CI), cuda_graph_arena.c (the capture's allocations and the checks on what thunks do while
 * captured), cuda_graph.c (capture, replay and their driver calls). */
#ifndef DLOP_CUDA_GRAPH_H
#define DLOP_CUDA_GRAPH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_driver.h"
#include "internal.h"

struct dlop_function;
typedef struct dlop__graph_recording dlop__graph_recording;

/* Recordings kept per function (least recently used go first). A signature seen once counts:
 * it is what lets its second run record. */
#define DLOP__CUDA_GRAPHS_MAX_RECORDINGS 16

/* A function's graphs: what compile decided, and the recordings made since. */
typedef struct dlop__cuda_graphs {
  dlop_device device;
  atomic_int replay;    /* 1: signatures are recorded and replayed; 0: node by node */
  char reason[384];     /* replay 0: why ("the cuda_graphs option is 0", "node #1 ..."); under lock */
  char *slot_is_output; /* per slot: 1 for a function output that a node computes */
  int32_t key_length;   /* int64 words of a signature key */
  pthread_mutex_t lock; /* the recordings, the counters, reason, and every launch */
  pthread_mutex_t capture_lock; /* one capture at a time per function */
  dlop_stream *capture_stream;  /* captures run here, never on a stream others enqueue on */
  dlop__graph_recording *recordings; /* most recently used first */
  int32_t num_recordings;
  uint64_t recorded, replays, updates; /* graphs captured, launches, launches that moved addresses */
} dlop__cuda_graphs;

/* ---- decisions, keys, scanning (cuda_graph_plan.c) -------------------------------------- */

/* Whether function may replay graphs with the option cuda_graphs (0 or 1), and if not why, in
 * reason: the option; a node not declared DLOP_OP_CUDA_GRAPH_SAFE (named); an output that is a
 * view; fewer than two kernel nodes. Looks at the nodes only, so it answers for a function of
 * any device (the tests ask it about CPU functions). */
int dlop__cuda_graphs_decide(const struct dlop_function *function, int cuda_graphs, char *reason,
                             size_t size);
/* The graphs of a CUDA function compiled with option cuda_graphs (NULL *graphs for the CPU).
 * A driver without the graph entry points gives replay 0 with the reason. */
int dlop__cuda_graphs_create(const struct dlop_function *function, int cuda_graphs,
                             dlop__cuda_graphs **graphs);
/* Frees what create made; the recordings must be gone (dlop__cuda_graphs_destroy). */
void dlop__cuda_graphs_free_plan(dlop__cuda_graphs *graphs);

/* A run's signature: per input its shape, strides (elements) and data address mod 256 (kernels
 * may choose wide loads by alignment), key_length words. */
int32_t dlop__cuda_graphs_key_length(const struct dlop_function *function);
void dlop__cuda_graphs_key(const struct dlop_function *function, dlop_array *const *inputs,
                           int64_t *key);

/* A recorded input or output: the address of its element 0 and the bytes it spans. */
typedef struct dlop__graph_buffer {
  uint64_t first; /* data + byte_offset */
  uint64_t low;   /* [low, high): every byte an element of it occupies */
  uint64_t high;
} dlop__graph_buffer;
/* The buffer a tensor is (an empty one spans nothing). */
dlop__graph_buffer dlop__graph_buffer_of(const dlop_tensor *tensor);
/* 1 when two non-empty buffers share a byte: an address inside both could not be followed. */
int dlop__graph_buffers_overlap(const dlop__graph_buffer *buffers, int32_t count);

/* A word of captured parameters that holds an address inside a recorded buffer. */
typedef struct dlop__graph_patch {
  uint32_t offset; /* bytes into the node's parameter bytes */
  int32_t buffer;  /* which recorded buffer */
  uint64_t value;  /* the word as captured */
} dlop__graph_patch;
/* The 8-byte words of bytes[0..size) that lie wholly inside one parameter (params: offset and
 * size pairs, count of them) at an 8-byte-aligned offset, and whose value is an address inside
 * one of the buffers, appended to *patches (grown with realloc; *count updated). */
int dlop__graph_find_patches(const unsigned char *bytes, const size_t (*params)[2], size_t count,
                             const dlop__graph_buffer *buffers, int32_t num_buffers,
                             dlop__graph_patch **patches, int32_t *num_patches);
/* Write each patch's word for the buffers' new element-0 addresses (moved[b]: new first). */
void dlop__graph_apply_patches(unsigned char *bytes, const dlop__graph_patch *patches,
                               int32_t count, const dlop__graph_buffer *recorded,
                               const uint64_t *moved);

/* The explain() line: "cuda graphs: replayed, ..." or "cuda graphs: not replayed: reason". */
void dlop__cuda_graphs_describe(dlop__cuda_graphs *graphs, char *text, size_t size);

/* ---- the capture's allocations and checks (cuda_graph_arena.c) --------------------------- */

/* The blocks a recording's capture allocated (intermediates, workspace, contiguous copies):
 * held until the recording goes, reused within the capture (stream order covers it) for
 * requests of the same rounded size. */
typedef struct dlop__graph_arena_block {
  void *pointer;
  size_t size; /* rounded as the pool rounds */
  int in_use;
} dlop__graph_arena_block;

typedef struct dlop__graph_arena {
  dlop_device device;
  dlop__graph_arena_block *blocks;
  int32_t count, capacity;
  uint64_t bytes; /* held in all */
} dlop__graph_arena;

/* What a thread is capturing: set by cuda_graph.c for the capture's run only. */
typedef struct dlop__graph_capture {
  dlop__graph_arena *arena;
  void *stream;  /* the capturing CUstream */
  int suspended; /* 1 while the runner allocates a function output from the pool itself */
  int32_t node;  /* the node running, for messages */
  const char *node_op;
  char problem[512]; /* the first thing a thunk did that a graph cannot replay ("" none) */
} dlop__graph_capture;

#pragma GCC visibility push(hidden)
extern _Thread_local dlop__graph_capture *dlop__graph_capturing;
#pragma GCC visibility pop

/* The pool's hooks (memory_pool.c), called only while dlop__graph_capturing is set and not
 * suspended: allocate from the arena; give an arena pointer back to it (1), or 0 when the
 * pointer is not the arena's (the pool frees it as usual). */
int dlop__graph_arena_alloc(dlop__graph_arena *arena, size_t bytes, uint64_t stream_id,
                            void **pointer);
int dlop__graph_arena_take_back(dlop__graph_arena *arena, void *pointer);
/* Every block back to the pool, after the work of last_user (NULL: none ever ran). */
void dlop__graph_arena_release(dlop__graph_arena *arena, dlop_stream *last_user);
/* The host table's hooks (host_api.c): work enqueued on a stream other than the capturing one,
 * or a synchronization, is noted as the capture's problem. */
void dlop__graph_capture_saw_stream(void *stream, const char *what);
void dlop__graph_capture_saw(const char *what);

/* ---- capture and replay (cuda_graph.c) --------------------------------------------------- */

/* A run of function on stream (its context current, dlop__cuda_run_begin done, inputs checked
 * and their pending writes waited for): replays the signature's graph, or records it (second
 * run of a signature), writing the outputs and *handled = 1; or *handled = 0 and the caller runs
 * node by node (first run of a signature, graphs off, a capture that failed: then graphs are
 * turned off for the function and explain() says why). */
int dlop__cuda_graphs_run(struct dlop_function *function, dlop_array *const *inputs,
                          dlop_stream *stream, dlop_array **outputs, int *handled);
/* Every recording's graph and arena (at function destroy, after its streams were waited for). */
void dlop__cuda_graphs_destroy(dlop__cuda_graphs *graphs);

#endif
