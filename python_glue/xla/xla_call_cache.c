/* xla_call_cache.c — prepared calls by key (xla_call_cache.h): a fixed table of buckets under a
 * reader-writer lock; lookups share the lock, an insert takes it alone. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "xla/ffi/api/c_api.h"
#include "xla_call_cache.h"

static void append(dlop__xla_call_key *key, const void *bytes, size_t count) {
  if (key->overflow || count > sizeof key->bytes - key->used) {
    key->overflow = 1;
    return;
  }
  memcpy(key->bytes + key->used, bytes, count);
  key->used += count;
}

static void append_size(dlop__xla_call_key *key, uint64_t value) { append(key, &value, sizeof value); }

void dlop__xla_call_key_init(dlop__xla_call_key *key, const char *op_name, dlop_device device) {
  key->used = 0;
  key->overflow = 0;
  size_t length = strlen(op_name);
  append_size(key, length);
  append(key, op_name, length);
  append(key, &device, sizeof device);
}

/* Bytes of one element of an XLA type, 0 for the types dlop never reads (the call then fails
 * at creation, whatever its key). */
static size_t element_size(XLA_FFI_DataType dtype) {
  switch (dtype) {
    case XLA_FFI_DataType_PRED:
    case XLA_FFI_DataType_S8:
    case XLA_FFI_DataType_U8: return 1;
    case XLA_FFI_DataType_S16:
    case XLA_FFI_DataType_U16:
    case XLA_FFI_DataType_F16:
    case XLA_FFI_DataType_BF16: return 2;
    case XLA_FFI_DataType_S32:
    case XLA_FFI_DataType_U32:
    case XLA_FFI_DataType_F32: return 4;
    case XLA_FFI_DataType_S64:
    case XLA_FFI_DataType_U64:
    case XLA_FFI_DataType_F64: return 8;
    default: return 0;
  }
}

void dlop__xla_call_key_add_attribute(dlop__xla_call_key *key, const char *name, size_t name_len,
                                      int type, const void *value) {
  append_size(key, name_len);
  append(key, name, name_len);
  append_size(key, (uint64_t)type);
  if (type == XLA_FFI_AttrType_SCALAR) {
    const XLA_FFI_Scalar *scalar = value;
    append_size(key, (uint64_t)scalar->dtype);
    append(key, scalar->value, element_size(scalar->dtype));
  } else if (type == XLA_FFI_AttrType_STRING) {
    const XLA_FFI_ByteSpan *text = value;
    append_size(key, text->len);
    append(key, text->ptr, text->len);
  } else if (type == XLA_FFI_AttrType_ARRAY) {
    const XLA_FFI_Array *array = value;
    size_t size = element_size(array->dtype);
    append_size(key, (uint64_t)array->dtype);
    append_size(key, array->size);
    if (size != 0 && array->size > (sizeof key->bytes) / size) key->overflow = 1;
    else append(key, array->data, array->size * size);
  }
  /* dictionaries: only their name and type (dlop declares no such parameter kind) */
}

void dlop__xla_call_key_add_tensor(dlop__xla_call_key *key, const dlop_tensor *tensor) {
  int32_t head[2] = {(int32_t)dlop_tensor_dtype(tensor), tensor->ndim};
  append(key, head, sizeof head);
  append(key, tensor->shape, sizeof(int64_t) * (size_t)tensor->ndim);
}

/* ---- the table ------------------------------------------------------------------------------ */

#define BUCKETS 256

typedef struct entry {
  struct entry *next;
  uint64_t hash;
  size_t used;
  dlop_op_call *call;
  unsigned char bytes[]; /* the key */
} entry;

static pthread_rwlock_t table_lock = PTHREAD_RWLOCK_INITIALIZER;
static entry *table[BUCKETS];

static uint64_t hash_of(const dlop__xla_call_key *key) {
  uint64_t hash = 14695981039346656037ull; /* FNV-1a */
  for (size_t i = 0; i < key->used; i++) hash = (hash ^ key->bytes[i]) * 1099511628211ull;
  return hash;
}

static entry *lookup_locked(const dlop__xla_call_key *key, uint64_t hash) {
  for (entry *e = table[hash % BUCKETS]; e; e = e->next)
    if (e->hash == hash && e->used == key->used && memcmp(e->bytes, key->bytes, key->used) == 0)
      return e;
  return NULL;
}

const dlop_op_call *dlop__xla_call_find(const dlop__xla_call_key *key) {
  if (key->overflow) return NULL;
  uint64_t hash = hash_of(key);
  pthread_rwlock_rdlock(&table_lock);
  entry *found = lookup_locked(key, hash);
  pthread_rwlock_unlock(&table_lock);
  return found ? found->call : NULL;
}

const dlop_op_call *dlop__xla_call_insert(const dlop__xla_call_key *key, dlop_op_call *call) {
  uint64_t hash = hash_of(key);
  entry *fresh = malloc(sizeof(entry) + key->used);
  if (fresh == NULL) {
    dlop_op_call_destroy(call);
    return NULL;
  }
  fresh->hash = hash;
  fresh->used = key->used;
  fresh->call = call;
  memcpy(fresh->bytes, key->bytes, key->used);
  pthread_rwlock_wrlock(&table_lock);
  entry *existing = lookup_locked(key, hash);
  if (existing == NULL) {
    fresh->next = table[hash % BUCKETS];
    table[hash % BUCKETS] = fresh;
  }
  pthread_rwlock_unlock(&table_lock);
  if (existing == NULL) return call;
  dlop_op_call_destroy(call); /* another thread prepared the same call first */
  free(fresh);
  return existing->call;
}
