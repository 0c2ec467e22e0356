/* fusion_source.h — what the generators of fused kernels' source share: fusion_source.c (the
 * module, its preludes and the elementwise groups) and fusion_reduce_source.c (the reduction
 * groups): a growing text, the C types and conversions of dtypes, values written from their
 * bits, and the members' bodies in order. Not part of the public ABI. */
#ifndef DLOP_FUSION_SOURCE_H
#define DLOP_FUSION_SOURCE_H

#include <stdarg.h>

#include "fusion.h"

/* Text that grows as it is written; failed is set (and nothing more written) when out of memory. */
typedef struct dlop__fusion_text {
  char *data;
  size_t length, capacity;
  int failed;
} dlop__fusion_text;

void dlop__fusion_text_vadd(dlop__fusion_text *t, const char *format, va_list args);
/* The C type holding a dtype's storage (float16 and bfloat16 as their bits). */
const char *dlop__fusion_c_type(int32_t dtype);
/* The conversion the host emits from a storage to a compute dtype and back: "" for none, or
 * the prelude's float16/bfloat16 functions. */
const char *dlop__fusion_load_function(int32_t storage, int32_t compute);
const char *dlop__fusion_store_function(int32_t storage, int32_t compute);
/* A value of dtype from its storage bits, as an expression of its C type. */
void dlop__fusion_add_value(dlop__fusion_text *t, int32_t dtype, uint64_t bits);
/* The members' bodies in order, each in its own block reading its inputs (x<k> for the group's
 * input k, v<n> for value n, literals in the code) and setting its values v<n>, declared before
 * it; only the members whose flag in member[] is set (all when member is NULL). */
void dlop__fusion_add_members(dlop__fusion_text *t, const dlop_function *function,
                              const dlop__fusion_group *group, const char *member);
/* The member of group computing value v, or -1. */
int32_t dlop__fusion_member_of_value(const dlop__fusion_group *group, int32_t v);
/* The CUDA support the module holds once: 16-byte packs, plain loads and stores, thread indices. */
extern const char dlop__fusion_cuda_support[];

/* A reduction group's functions and entry points for target (fusion_reduce_source.c). C:
 * dlop_fused_g<N>_{run,combine,identity,finish}; CUDA: dlop_fused_g<N>_reduce_{block,warp,finish}
 * (fusion_reduce_thunk.c calls them). */
void dlop__fusion_add_reduction_group(dlop__fusion_text *t, const dlop_function *function,
                                      const dlop__fusion_group *group, dlop__fusion_target target);

/* A row group's functions and entry points (fusion_row_source.c). C:
 * dlop_fused_g<N>_row(char *const *p, const int64_t *s, int64_t n), one row: p its operands'
 * first elements (outputs, then inputs), s their strides along the row, n its length. CUDA:
 * dlop_fused_g<N>_row<R> (fusion_row_thunk.c launches them). */
void dlop__fusion_add_row_group(dlop__fusion_text *t, const dlop_function *function,
                                const dlop__fusion_group *group, dlop__fusion_target target);

#endif
