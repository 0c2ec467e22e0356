/* array.c — dlop_array: a reference-counted tensor that owns memory from the device pool or
 * borrows memory with a deleter, and views over either. The array that owns the memory keeps
 * the stream of the last pending write (so views and copies wait for the right work) and the
 * streams that read it (so its memory is not reused by another stream while they still do). */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_driver.h"
#include "header_cache.h"
#include "internal.h"

struct dlop_array {
  atomic_int references;
  dlop_tensor tensor;
  dlop_dtype dtype;
  void *owned;                  /* pool memory freed with the array (NULL when borrowed) */
  dlop_array_deleter deleter;   /* borrowed memory: called once with deleter_context */
  void *deleter_context;
  dlop_array *base;             /* views: the array owning the memory (retained) */
  /* On the owning array, under stream_lock; each entry holds a stream reference. */
  atomic_flag stream_lock;
  dlop_stream *stream;                            /* last pending write, or NULL */
  int num_readers;
  /* Last, so that a new array zeroes only what comes before (new_array): these are written
   * before they are read. */
  dlop_stream *readers[DLOP__MEMORY_MAX_USERS];   /* other streams with reads enqueued */
  int64_t shape[DLOP_MAX_NDIM];
  int64_t strides[DLOP_MAX_NDIM];
};

_Static_assert(sizeof(struct dlop_array) <= DLOP__HEADER_CACHE_BLOCK_BYTES,
               "array headers come from header_cache.c's fixed-size blocks");

/* A spinlock: held only to read or swap a few pointers, never across a driver call. */
static void lock_streams(dlop_array *owner) {
  while (atomic_flag_test_and_set_explicit(&owner->stream_lock, memory_order_acquire)) {
  }
}

static void unlock_streams(dlop_array *owner) {
  atomic_flag_clear_explicit(&owner->stream_lock, memory_order_release);
}

/* Record stream as a user of owner besides the writer (lock held, reference taken by the
 * caller and given to the array or back in *dropped). When the list is full, the oldest reader
 * comes out in *evicted for the caller to wait for outside the lock. */
static void add_reader_locked(dlop_array *owner, dlop_stream *stream, dlop_stream **dropped,
                              dlop_stream **evicted) {
  *dropped = NULL;
  *evicted = NULL;
  if (stream == owner->stream) {
    *dropped = stream;
    return;
  }
  for (int i = 0; i < owner->num_readers; i++)
    if (owner->readers[i] == stream) {
      *dropped = stream;
      return;
    }
  if (owner->num_readers == DLOP__MEMORY_MAX_USERS) {
    *evicted = owner->readers[0];
    memmove(owner->readers, owner->readers + 1,
            (DLOP__MEMORY_MAX_USERS - 1) * sizeof owner->readers[0]);
    owner->num_readers--;
  }
  owner->readers[owner->num_readers++] = stream;
}

/* An evicted reader's work must be done before its record is dropped. */
static void drop_evicted(dlop_stream *evicted) {
  if (evicted == NULL) return;
  if (dlop_stream_synchronize(evicted) != DLOP_OK)
    dlop__warn("an array read on more than %d streams: waiting for the oldest failed: %s",
               DLOP__MEMORY_MAX_USERS, dlop_last_error());
  dlop_stream_destroy(evicted);
}

static dlop_array *owner_of(const dlop_array *array) {
  return array->base ? array->base : (dlop_array *)array;
}

/* The pending write's stream with a reference taken (NULL when none); dlop_stream_destroy it. */
static dlop_stream *writer_of(const dlop_array *array) {
  dlop_array *owner = owner_of(array);
  lock_streams(owner);
  dlop_stream *stream = owner->stream;
  dlop__stream_retain(stream);
  unlock_streams(owner);
  return stream;
}

static const char *device_text(dlop_device device, char *buffer, size_t size) {
  return dlop_device_format(device, buffer, size);
}

/* Only after check_shape: a shape that passed it has strides that fit. */
static void fill_contiguous_strides(dlop_array *array) {
  (void)dlop_contiguous_strides(array->shape, array->tensor.ndim, array->strides);
}

/* Check a shape of dtype and return its element count in *numel and its bytes in *bytes (may
 * be NULL): NumPy's rule (dlop/kit/checked_size.h), for owned memory, views and wraps alike,
 * so that no array's element count, byte size or strides can wrap in any later computation. */
static int check_shape(const char *what, int32_t ndim, const int64_t *shape, dlop_dtype dtype,
                       int64_t *numel, size_t *bytes) {
  if (ndim < 0 || ndim > DLOP_MAX_NDIM)
    return dlop__error(DLOP_INVALID_ARGUMENT, "%s: ndim %d is outside 0..%d", what, (int)ndim,
                       DLOP_MAX_NDIM);
  if (ndim > 0 && shape == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "%s: shape is NULL for ndim %d", what, (int)ndim);
  /* one pass: a negative dim makes the count -1 (the size check counts it as 1) */
  int status = dlop__check_shape_size(what, shape, ndim, (int32_t)dtype, numel);
  if (status != DLOP_OK || *numel < 0) { /* a negative dim is the first thing to name */
    for (int d = 0; d < ndim; d++)
      if (shape[d] < 0)
        return dlop__error(DLOP_SHAPE_ERROR, "%s: dimension %d is %lld (must be >= 0)", what, d,
                           (long long)shape[d]);
  }
  if (status == DLOP_OK && bytes) *bytes = (size_t)*numel * dlop_dtype_size(dtype);
  return status;
}

static dlop_array *new_array(dlop_device device, dlop_dtype dtype, int32_t ndim,
                             const int64_t *shape) {
  /* From this thread's free list: every call wraps its inputs and makes its outputs. */
  dlop_array *array = dlop__header_take(sizeof *array);
  if (array == NULL) return NULL;
  memset(array, 0, offsetof(dlop_array, readers));
  atomic_init(&array->references, 1);
  atomic_flag_clear(&array->stream_lock);
  array->dtype = dtype;
  array->tensor.device = device;
  array->tensor.ndim = ndim;
  array->tensor.dtype = dlop_dtype_to_dl(dtype);
  array->tensor.shape = array->shape;
  array->tensor.strides = array->strides;
  if (ndim > 0) memcpy(array->shape, shape, (size_t)ndim * sizeof *shape);
  return array;
}

int dlop__array_empty_on_stream(dlop_device device, dlop_dtype dtype, int32_t ndim,
                                const int64_t *shape, dlop_stream *stream, dlop_array **array) {
  if (array == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_array_empty: array is NULL");
  *array = NULL;
  size_t element_size = dlop_dtype_size(dtype);
  if (element_size == 0)
    return dlop__error(DLOP_TYPE_ERROR, "dlop_array_empty: dtype %d is not a dlop dtype (0..%d)",
                       (int)dtype, DLOP_DTYPE_COUNT - 1);
  int64_t numel;
  size_t bytes;
  int status = check_shape("dlop_array_empty", ndim, shape, dtype, &numel, &bytes);
  if (status != DLOP_OK) return status;
  if (stream != NULL && (dlop_stream_device(stream).type != device.type ||
                         dlop_stream_device(stream).id != device.id)) {
    char a[32], b[32];
    return dlop__error(DLOP_DEVICE_MISMATCH, "dlop_array_empty: stream is on %s, array on %s",
                       device_text(dlop_stream_device(stream), a, sizeof a),
                       device_text(device, b, sizeof b));
  }
  dlop_array *created = new_array(device, dtype, ndim, shape);
  if (created == NULL)
    return dlop__error(DLOP_OUT_OF_MEMORY, "dlop_array_empty: out of host memory");
  fill_contiguous_strides(created);
  status = dlop__memory_alloc_on(device, bytes, stream, &created->owned);
  if (status != DLOP_OK) {
    dlop__header_give(created);
    return status;
  }
  created->tensor.data = created->owned;
  *array = created;
  return DLOP_OK;
}

int dlop_array_empty(dlop_device device, dlop_dtype dtype, int32_t ndim, const int64_t *shape,
                     dlop_array **array) {
  return dlop__array_empty_on_stream(device, dtype, ndim, shape, NULL, array);
}

/* Wait for the legacy default stream of a GPU (copies made without a stream go there, and it
 * is not ordered with dlop's non-blocking streams). */
static int synchronize_default_stream(dlop_device device) {
  if (device.type != DLOP_DEVICE_CUDA) return DLOP_OK;
  dlop__cuda_scope scope;
  int status = dlop__cuda_use_device(device.id, &scope);
  if (status != DLOP_OK) return status;
  CUresult result = dlop__cuda.cuStreamSynchronize(NULL);
  if (result != DLOP_CUDA_SUCCESS) status = dlop__cuda_fail(result, "cuStreamSynchronize");
  return dlop__cuda_restore_after(&scope, status);
}

int dlop_array_from_host(dlop_device device, dlop_dtype dtype, int32_t ndim,
                         const int64_t *shape, const void *data, dlop_array **array) {
  dlop_array *created;
  int status = dlop_array_empty(device, dtype, ndim, shape, &created);
  if (status != DLOP_OK) return status;
  int64_t numel = dlop_tensor_numel(&created->tensor);
  if (numel > 0 && data == NULL) {
    dlop_array_release(created);
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_array_from_host: data is NULL for %lld elements",
                       (long long)numel);
  }
  dlop_tensor host = created->tensor;
  host.data = (void *)data;
  host.device = (dlop_device){DLOP_DEVICE_CPU, 0};
  host.strides = NULL;
  host.byte_offset = 0;
  status = dlop__tensor_copy(&host, &created->tensor, NULL);
  if (status == DLOP_OK) status = synchronize_default_stream(device);
  if (status != DLOP_OK) {
    dlop_array_release(created);
    return status;
  }
  *array = created;
  return DLOP_OK;
}

/* Lowest and one-past-highest byte (relative to data) a tensor with numel > 0 addresses, with
 * every product and sum checked (dlop__check_extent): shapes and strides come from callers, and
 * a wrapped-around span would pass the bounds check and let kernels address memory far
 * outside the array. */
static int byte_span(const char *what, const dlop_tensor *tensor, size_t element_size,
                     int64_t *low, int64_t *high) {
  return dlop__check_extent(what, tensor->shape, tensor->strides, tensor->ndim,
                            (int64_t)element_size, tensor->byte_offset, low, high);
}

/* Kernels dereference typed pointers: a float32 at an odd address is undefined behaviour on the
 * CPU and a misaligned-address fault on CUDA, which poisons the whole context. Strides are in
 * elements, so an aligned first element keeps every element aligned. */
static int check_alignment(const char *what, const void *data, uint64_t byte_offset,
                           dlop_dtype dtype) {
  size_t element_size = dlop_dtype_size(dtype);
  uint64_t address = (uint64_t)(uintptr_t)data + byte_offset;
  if (element_size > 1 && address % element_size != 0)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "%s: the first element at data %p + byte_offset %llu is not aligned to the "
                       "%zu-byte elements of dtype %s (data + byte_offset must be a multiple of "
                       "%zu)",
                       what, data, (unsigned long long)byte_offset, element_size,
                       dlop_dtype_name(dtype), element_size);
  return DLOP_OK;
}

int dlop_array_wrap(const dlop_tensor *tensor, dlop_array_deleter deleter, void *context,
                    dlop_array **array) {
  /* On failure the deleter is not called: the caller still owns the memory. */
  if (array == NULL || tensor == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_array_wrap: tensor or array is NULL");
  *array = NULL;
  dlop_dtype dtype = dlop_tensor_dtype(tensor);
  if (dtype == DLOP_DTYPE_INVALID)
    return dlop__error(DLOP_TYPE_ERROR,
                       "dlop_array_wrap: DLPack dtype (code %d, bits %d, lanes %d) is not one of "
                       "dlop's dtypes (lanes must be 1)",
                       tensor->dtype.code, tensor->dtype.bits, tensor->dtype.lanes);
  int64_t numel;
  int status = check_shape("dlop_array_wrap", tensor->ndim, tensor->shape, dtype, &numel, NULL);
  if (status != DLOP_OK) return status;
  status = dlop_device_check(tensor->device);
  if (status != DLOP_OK) return status;
  if (numel > 0 && tensor->data == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_array_wrap: data is NULL for %lld elements",
                       (long long)numel);
  /* Empty tensors are never dereferenced; frameworks give them arbitrary data pointers. */
  if (numel > 0) {
    status = check_alignment("dlop_array_wrap", tensor->data, tensor->byte_offset, dtype);
    if (status != DLOP_OK) return status;
  }
  dlop_array *created = new_array(tensor->device, dtype, tensor->ndim, tensor->shape);
  if (created == NULL)
    return dlop__error(DLOP_OUT_OF_MEMORY, "dlop_array_wrap: out of host memory");
  if (tensor->strides && tensor->ndim > 0)
    memcpy(created->strides, tensor->strides, (size_t)tensor->ndim * sizeof(int64_t));
  else
    fill_contiguous_strides(created);
  created->tensor.data = tensor->data;
  created->tensor.byte_offset = tensor->byte_offset;
  if (numel > 0) {
    /* The memory's extent is the caller's business, but the arithmetic must not overflow. */
    int64_t low, high;
    status = byte_span("dlop_array_wrap", &created->tensor, dlop_dtype_size(dtype), &low, &high);
    if (status != DLOP_OK) {
      dlop__header_give(created);
      return status;
    }
  }
  created->deleter = deleter;
  created->deleter_context = context;
  *array = created;
  return DLOP_OK;
}

int dlop_array_view(dlop_array *base, int32_t ndim, const int64_t *shape, const int64_t *strides,
                    uint64_t byte_offset, dlop_array **view) {
  if (base == NULL || view == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_array_view: base or view is NULL");
  *view = NULL;
  int64_t numel;
  int status = check_shape("dlop_array_view", ndim, shape, base->dtype, &numel, NULL);
  if (status != DLOP_OK) return status;
  dlop_array *owner = owner_of(base);
  if (numel > 0) {
    status = check_alignment("dlop_array_view", owner->tensor.data, byte_offset, base->dtype);
    if (status != DLOP_OK) return status;
  }
  dlop_array *created = new_array(base->tensor.device, base->dtype, ndim, shape);
  if (created == NULL)
    return dlop__error(DLOP_OUT_OF_MEMORY, "dlop_array_view: out of host memory");
  if (strides && ndim > 0) memcpy(created->strides, strides, (size_t)ndim * sizeof(int64_t));
  else fill_contiguous_strides(created);
  /* byte_offset is counted from the memory's data pointer, as in DLPack. */
  created->tensor.data = owner->tensor.data;
  created->tensor.byte_offset = byte_offset;
  if (numel > 0) {
    size_t element_size = dlop_dtype_size(base->dtype);
    int64_t low, high, owner_low = 0, owner_high = 0;
    status = byte_span("dlop_array_view", &created->tensor, element_size, &low, &high);
    /* The owner was checked when it was made; an empty owner spans nothing. */
    if (status == DLOP_OK && dlop_tensor_numel(&owner->tensor) > 0)
      status = byte_span("dlop_array_view", &owner->tensor, element_size, &owner_low, &owner_high);
    if (status != DLOP_OK) {
      dlop__header_give(created);
      return status;
    }
    if (low < owner_low || high > owner_high) {
      dlop__header_give(created);
      return dlop__error(DLOP_INVALID_ARGUMENT,
                         "dlop_array_view: the view reaches bytes [%lld, %lld) of the memory but "
                         "the array spans only [%lld, %lld)",
                         (long long)low, (long long)high, (long long)owner_low,
                         (long long)owner_high);
    }
  }
  dlop_array_retain(owner);
  created->base = owner;
  *view = created;
  return DLOP_OK;
}

void dlop_array_retain(dlop_array *array) {
  if (array) atomic_fetch_add_explicit(&array->references, 1, memory_order_relaxed);
}

/* Views retain the array that owns the memory, so an owner with one reference is held by its
 * caller alone: no view, and nobody else, can see its memory change. */
int dlop__array_owns_memory_alone(const dlop_array *array) {
  return array->base == NULL && array->owned != NULL &&
         atomic_load_explicit(&array->references, memory_order_acquire) == 1;
}

void dlop_array_release(dlop_array *array) {
  if (array == NULL) return;
  if (atomic_fetch_sub_explicit(&array->references, 1, memory_order_acq_rel) != 1) return;
  if (array->base) {
    dlop_array_release(array->base);
  } else {
    /* The last reference: no other thread touches the stream records any more. */
    dlop_stream *users[DLOP__MEMORY_MAX_USERS + 1];
    int count = 0;
    if (array->stream) users[count++] = array->stream;
    for (int i = 0; i < array->num_readers; i++) users[count++] = array->readers[i];
    if (array->owned) {
      /* Not reused by another stream before the pending work of every user is done. */
      int status = array->tensor.device.type == DLOP_DEVICE_CUDA
                       ? dlop__memory_free_after(array->tensor.device, array->owned, users, count)
                       : dlop_memory_free(array->tensor.device, array->owned, NULL);
      if (status != DLOP_OK) dlop__warn("releasing an array: %s", dlop_last_error());
    }
    for (int i = 0; i < count; i++) dlop_stream_destroy(users[i]); /* the array's references */
    if (array->deleter) array->deleter(array->deleter_context);
  }
  dlop__header_give(array);
}

int dlop_array_to_host(const dlop_array *array, void *destination, size_t bytes) {
  if (array == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_array_to_host: array is NULL");
  size_t expected = (size_t)dlop_array_numel(array) * dlop_dtype_size(array->dtype);
  if (bytes != expected)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_array_to_host: destination holds %zu bytes but the array has %zu "
                       "(%lld %s elements)",
                       bytes, expected, (long long)dlop_array_numel(array),
                       dlop_dtype_name(array->dtype));
  if (expected > 0 && destination == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_array_to_host: destination is NULL");
  dlop_tensor host = array->tensor;
  host.data = destination;
  host.device = (dlop_device){DLOP_DEVICE_CPU, 0};
  host.strides = NULL;
  host.byte_offset = 0;
  /* On the stream of the last write: ordered after it; the copy waits before returning. */
  dlop_stream *stream = writer_of(array);
  int status = dlop__tensor_copy(&array->tensor, &host, dlop_stream_handle(stream));
  dlop_stream_destroy(stream);
  return status;
}

int dlop_array_copy_to(const dlop_array *array, dlop_device device, dlop_array **copy) {
  if (array == NULL || copy == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_array_copy_to: array or copy is NULL");
  *copy = NULL;
  int status = dlop_device_check(device);
  if (status != DLOP_OK) return status;
  dlop_stream *pending = writer_of(array); /* referenced: another thread may clear it */
  dlop_device pending_device = dlop_stream_device(pending);
  /* Work on the pending stream when it belongs to the target GPU: the copy stays asynchronous
   * and ordered after the last write. Otherwise the copy waits as dlop__tensor_copy decides. */
  dlop_stream *on_target = (pending && device.type == DLOP_DEVICE_CUDA &&
                            pending_device.type == DLOP_DEVICE_CUDA && pending_device.id == device.id)
                               ? pending
                               : NULL;
  dlop_array *created;
  status = dlop__array_empty_on_stream(device, array->dtype, array->tensor.ndim, array->shape,
                                       on_target, &created);
  if (status != DLOP_OK) {
    dlop_stream_destroy(pending);
    return status;
  }
  void *stream = dlop_stream_handle(on_target ? on_target : pending);
  if (!on_target && pending && pending_device.type == DLOP_DEVICE_CUDA &&
      array->tensor.device.type == DLOP_DEVICE_CUDA && pending_device.id != array->tensor.device.id)
    stream = NULL; /* a stream of a third device: wait for it below */
  if (!on_target && pending && stream == NULL) status = dlop_stream_synchronize(pending);
  if (status == DLOP_OK) status = dlop__tensor_copy(&array->tensor, &created->tensor, stream);
  if (status == DLOP_OK) {
    if (on_target) dlop__array_set_stream(created, on_target);
    else if (device.type == DLOP_DEVICE_CUDA && stream == NULL)
      status = synchronize_default_stream(device);
    else if (device.type == DLOP_DEVICE_CUDA)
      status = dlop_stream_synchronize(pending); /* pending is on the source GPU */
  }
  dlop_stream_destroy(pending);
  if (status != DLOP_OK) {
    dlop_array_release(created);
    return status;
  }
  *copy = created;
  return DLOP_OK;
}

const dlop_tensor *dlop_array_tensor(const dlop_array *array) {
  return array ? &array->tensor : NULL;
}

dlop_dtype dlop_array_dtype(const dlop_array *array) {
  return array ? array->dtype : DLOP_DTYPE_INVALID;
}

dlop_device dlop_array_device(const dlop_array *array) {
  dlop_device none = {0, 0};
  return array ? array->tensor.device : none;
}

int64_t dlop_array_numel(const dlop_array *array) {
  return array ? dlop_tensor_numel(&array->tensor) : 0;
}

/* Borrowed: valid while the caller keeps the array from being written or synchronized. */
dlop_stream *dlop_array_stream(const dlop_array *array) {
  if (array == NULL) return NULL;
  dlop_array *owner = owner_of(array);
  lock_streams(owner);
  dlop_stream *stream = owner->stream;
  unlock_streams(owner);
  return stream;
}

void dlop__array_set_stream(dlop_array *array, dlop_stream *stream) {
  if (array == NULL) return;
  dlop_array *owner = owner_of(array);
  dlop_stream *dropped = NULL, *evicted = NULL;
  dlop__stream_retain(stream);
  lock_streams(owner);
  dlop_stream *previous = owner->stream;
  owner->stream = stream;
  /* A write replaced by one on another stream may still be in flight: it stays a user, so
   * the memory is not reused before it is done. */
  if (previous != NULL && previous != stream)
    add_reader_locked(owner, previous, &dropped, &evicted);
  else
    dropped = previous;
  unlock_streams(owner);
  dlop_stream_destroy(dropped);
  drop_evicted(evicted);
}

void dlop__array_add_reader(dlop_array *array, dlop_stream *stream) {
  if (array == NULL || stream == NULL) return;
  dlop_array *owner = owner_of(array);
  dlop_stream *dropped = NULL, *evicted = NULL;
  lock_streams(owner);
  /* The usual case, a stream already recorded, takes no reference and calls nothing. */
  int known = stream == owner->stream;
  for (int i = 0; !known && i < owner->num_readers; i++) known = owner->readers[i] == stream;
  if (!known) {
    dlop__stream_retain(stream);
    add_reader_locked(owner, stream, &dropped, &evicted);
  }
  unlock_streams(owner);
  dlop_stream_destroy(dropped);
  drop_evicted(evicted);
}

int dlop_array_synchronize(const dlop_array *array) {
  if (array == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_array_synchronize: array is NULL");
  dlop_array *owner = owner_of(array);
  dlop_stream *stream = writer_of(array); /* our own reference: another thread may drop it */
  if (stream == NULL) return DLOP_OK;
  int status = dlop_stream_synchronize(stream);
  /* Nothing is pending any more (unless another write was recorded meanwhile). Reads on other
   * streams stay recorded: the pool must still wait for them when the array is freed. */
  dlop_stream *dropped = NULL;
  if (status == DLOP_OK) {
    lock_streams(owner);
    if (owner->stream == stream) {
      owner->stream = NULL;
      dropped = stream; /* the reference the array held */
    }
    unlock_streams(owner);
  }
  dlop_stream_destroy(dropped);
  dlop_stream_destroy(stream);
  return status;
}
