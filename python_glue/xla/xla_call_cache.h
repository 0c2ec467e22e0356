/* xla_call_cache.h — the XLA handler's prepared calls, one per distinct op, parameter values,
 * input types and device, found by a key built from what the call frame carries (so a repeated
 * call costs a hash and a compare, not a make_node and make_thunk). Entries live as long as the
 * process: there is one per custom-call signature XLA compiled, and XLA may call any of them
 * again at any time. */
#ifndef DLOP_XLA_CALL_CACHE_H
#define DLOP_XLA_CALL_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "dlop.h"

/* Room for a key: the op name, the device, every parameter attribute's name and bytes and each
 * input's dtype and shape. A call whose key does not fit is refused (overflow). */
#define DLOP__XLA_CALL_KEY_BYTES 8192

typedef struct dlop__xla_call_key {
  size_t used;
  int overflow;
  unsigned char bytes[DLOP__XLA_CALL_KEY_BYTES];
} dlop__xla_call_key;

void dlop__xla_call_key_init(dlop__xla_call_key *key, const char *op_name, dlop_device device);
/* An attribute (XLA_FFI_AttrType type, value as the call frame points to it). */
void dlop__xla_call_key_add_attribute(dlop__xla_call_key *key, const char *name, size_t name_len,
                                      int type, const void *value);
void dlop__xla_call_key_add_tensor(dlop__xla_call_key *key, const dlop_tensor *tensor);

/* The call prepared for key, or NULL. Safe from any thread. */
const dlop_op_call *dlop__xla_call_find(const dlop__xla_call_key *key);
/* Keep call under key (a copy of the key is made) and return the kept call: call, or the one
 * another thread kept first under the same key (call is then destroyed). NULL, with call
 * destroyed, when there is no memory for the entry. */
const dlop_op_call *dlop__xla_call_insert(const dlop__xla_call_key *key, dlop_op_call *call);

#endif
