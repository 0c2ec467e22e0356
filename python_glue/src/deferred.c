/* deferred.c — handing foreign CUDA memory (DLPack, __cuda_array_interface__) back to its
 * producer without blocking the host: a wrap's release records a stream marker after the work
 * that read the memory and queues (marker, owner); cheap polls give back the owners whose work
 * is done, synchronize and interpreter exit give back everything, and a bound keeps a tight
 * loop from holding unbounded producer memory. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "module.h"

/* The bound: past this many queued owners, or this many distinct bytes, a release waits for
 * the oldest queued work first (as every release did before this queue existed). */
#define MAX_PENDING 1024
#define MAX_PENDING_BYTES ((size_t)1 << 30)
/* A release evicts at most this many owners at once; each release adds one, so the queue
 * still shrinks back under the bound. */
#define MAX_EVICT 16
/* The same memory passed again and again (f(t) in a loop) is counted once among the newest
 * entries: it holds no more producer memory. */
#define SAME_MEMORY_WINDOW 8
/* Owners given back per poll, so one call never pays for a long backlog at once. */
#define MAX_POLL_RELEASES 64

typedef struct pending {
  dlop_stream_marker *marker;
  dlop_py_foreign_owner *owner;
  const void *data;
  size_t bytes; /* counted against MAX_PENDING_BYTES (0 for repeated memory) */
} pending;

/* Process-wide, not module state: the wraps that queue here can outlive the module (inside a
 * PyTorch tensor at interpreter exit), like the extension's streams (see module_free). A ring
 * of MAX_PENDING entries, oldest at head; the mutex is never held while an owner is given back
 * (that runs producer code, which may release more wraps). */
static struct {
  pthread_mutex_t lock;
  pending items[MAX_PENDING];
  size_t head, count, bytes;
} queue = {.lock = PTHREAD_MUTEX_INITIALIZER};
/* queue.count, readable without the lock: the empty poll is one relaxed load. */
static atomic_size_t queued;
/* Set at interpreter exit: releases then wait and give back at once, as without a queue. */
static atomic_int closed;

static pending *item_at(size_t index) { return &queue.items[(queue.head + index) % MAX_PENDING]; }

static pending pop_oldest_locked(void) {
  pending oldest = queue.items[queue.head];
  queue.head = (queue.head + 1) % MAX_PENDING;
  queue.count--;
  queue.bytes -= oldest.bytes;
  return oldest;
}

/* Wait for an entry's work (when wait is set) and give its owner back. */
static int finish(pending *entry, int wait, int holding_gil) {
  int status = DLOP_OK;
  if (wait) {
    /* Waiting for the GPU with the GIL held would stall every other Python thread. */
    PyThreadState *saved = holding_gil ? PyEval_SaveThread() : NULL;
    status = dlop_stream_marker_wait(entry->marker);
    if (saved) PyEval_RestoreThread(saved);
  }
  dlop_stream_marker_destroy(entry->marker);
  /* Given back even when the wait failed: a failed context has nothing left that could read
   * the memory, and keeping it would only leak the producer's block. */
  dlop_py_foreign_give_back(entry->owner, holding_gil);
  return status;
}

int dlop_py_defer_release(dlop_stream *stream, dlop_py_foreign_owner *owner, const void *data,
                          size_t bytes, int holding_gil) {
  if (atomic_load_explicit(&closed, memory_order_acquire)) return -1;
  dlop_stream_marker *marker = NULL;
  if (dlop_stream_marker_record(stream, &marker) != DLOP_OK) return -1; /* caller waits instead */
  pending evicted[MAX_EVICT];
  int num_evicted = 0;
  pthread_mutex_lock(&queue.lock);
  if (atomic_load_explicit(&closed, memory_order_acquire)) {
    pthread_mutex_unlock(&queue.lock);
    dlop_stream_marker_destroy(marker);
    return -1;
  }
  size_t counted = bytes;
  for (size_t i = 0; i < queue.count && i < SAME_MEMORY_WINDOW; i++)
    if (item_at(queue.count - 1 - i)->data == data) counted = 0;
  while (queue.count > 0 && num_evicted < MAX_EVICT &&
         (queue.count >= MAX_PENDING || queue.bytes + counted > MAX_PENDING_BYTES))
    evicted[num_evicted++] = pop_oldest_locked();
  /* MAX_EVICT >= 1, so a full ring always has a free slot here. */
  *item_at(queue.count) = (pending){marker, owner, data, counted};
  queue.count++;
  queue.bytes += counted;
  atomic_store_explicit(&queued, queue.count, memory_order_relaxed);
  pthread_mutex_unlock(&queue.lock);
  for (int i = 0; i < num_evicted; i++) {
    if (finish(&evicted[i], 1, holding_gil) != DLOP_OK)
      fprintf(stderr, "dlop: waiting to give foreign CUDA memory back: %s\n", dlop_last_error());
  }
  return 0;
}

void dlop_py_deferred_poll(void) {
  if (atomic_load_explicit(&queued, memory_order_relaxed) == 0) return;
  pending done[MAX_POLL_RELEASES];
  int num_done = 0;
  pthread_mutex_lock(&queue.lock);
  /* Oldest first; work on one stream completes in order, so the first pending entry ends the
   * poll (an entry of another device behind it waits for a later poll or synchronize). */
  while (queue.count > 0 && num_done < MAX_POLL_RELEASES) {
    int complete = 0;
    if (dlop_stream_marker_query(queue.items[queue.head].marker, &complete) != DLOP_OK) break;
    if (!complete) break;
    done[num_done++] = pop_oldest_locked();
  }
  atomic_store_explicit(&queued, queue.count, memory_order_relaxed);
  pthread_mutex_unlock(&queue.lock);
  for (int i = 0; i < num_done; i++) finish(&done[i], 0, 1);
}

/* Take up to n of the device's entries (all devices when device_id < 0) out of the ring,
 * keeping the others in order. */
static size_t take_locked(int device_id, pending *taken, size_t n) {
  size_t num_taken = 0, kept = 0, kept_bytes = 0, total = queue.count;
  for (size_t i = 0; i < total; i++) {
    pending entry = *item_at(i);
    if (num_taken < n &&
        (device_id < 0 || dlop_stream_marker_device(entry.marker).id == device_id)) {
      taken[num_taken++] = entry;
    } else {
      *item_at(kept++) = entry;
      kept_bytes += entry.bytes;
    }
  }
  queue.count = kept;
  queue.bytes = kept_bytes;
  atomic_store_explicit(&queued, queue.count, memory_order_relaxed);
  return num_taken;
}

int dlop_py_deferred_drain(int device_id) {
  pending batch[MAX_POLL_RELEASES];
  int status = DLOP_OK;
  pthread_mutex_lock(&queue.lock);
  /* What was queued when the drain began; entries other threads add meanwhile are theirs. */
  size_t left = queue.count;
  pthread_mutex_unlock(&queue.lock);
  while (left > 0) {
    pthread_mutex_lock(&queue.lock);
    size_t n = take_locked(device_id, batch, left < MAX_POLL_RELEASES ? left : MAX_POLL_RELEASES);
    pthread_mutex_unlock(&queue.lock);
    if (n == 0) break;
    left -= n;
    for (size_t i = 0; i < n; i++) {
      int result = finish(&batch[i], 1, 1);
      if (result != DLOP_OK && status == DLOP_OK) status = result;
    }
  }
  return status;
}

size_t dlop_py_deferred_count(void) {
  return atomic_load_explicit(&queued, memory_order_relaxed);
}

int dlop_py_deferred_close(void) {
  atomic_store_explicit(&closed, 1, memory_order_release);
  return dlop_py_deferred_drain(-1);
}
