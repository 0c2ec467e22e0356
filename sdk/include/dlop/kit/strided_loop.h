/* dlop/kit/strided_loop.h — the N-d elementwise loop of CPU kernels: broadcast and collapse the
 * operands' strides, walk them in runs along the inner dim, and split the work over the
 * host's parallel_for. Part of kernel_util.h; the layout struct is shared with CUDA kernels. */
#ifndef DLOP_STRIDED_LOOP_H
#define DLOP_STRIDED_LOOP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../dtype.h"
#include "../host_api.h"
#include "checked_size.h"
#include "kernel_error.h"
#include "../status.h"
#include "../tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Put on hot contiguous CPU loops: gcc builds an AVX-512, an AVX2 and a baseline copy and
 * picks one at load time, so one plugin binary uses the widest vectors the CPU has. The
 * AVX-512 copy is x86-64-v4 (F, BW, DQ, VL, CD: every AVX-512 CPU since Skylake-SP) where gcc
 * knows that level (12 and newer): BW packs comparisons into bytes and DQ converts floats to
 * 64-bit integers in vectors, which AVX-512F alone does element by element. */
#if defined(__GNUC__) && defined(__x86_64__) && defined(__ELF__) && !defined(__CUDACC__)
#if !defined(__clang__) && __GNUC__ >= 12
#define DLOP__CPU_AVX512_CLONE "arch=x86-64-v4"
#else
#define DLOP__CPU_AVX512_CLONE "avx512f"
#endif
#define DLOP_CPU_MULTIVERSION \
  __attribute__((target_clones(DLOP__CPU_AVX512_CLONE, "avx2", "default")))
#else
#define DLOP_CPU_MULTIVERSION
#endif

/* Operands of one elementwise loop: the output first, then the inputs. */
#define DLOP_KERNEL_MAX_OPERANDS 4

/* Shape and per-operand strides (in elements) after broadcasting and collapsing. Plain data,
 * the same layout in C and CUDA: elementwise CUDA kernels take it by value. */
typedef struct dlop_nd_offsets {
  int32_t ndim; /* >= 1 */
  int32_t num_operands;
  int64_t shape[DLOP_MAX_NDIM];
  int64_t strides[DLOP_KERNEL_MAX_OPERANDS][DLOP_MAX_NDIM];
} dlop_nd_offsets;

typedef struct dlop_strided_loop {
  dlop_nd_offsets layout;
  int64_t numel;
  char *base[DLOP_KERNEL_MAX_OPERANDS]; /* data + byte_offset: the element at index 0 */
  int64_t element_size[DLOP_KERNEL_MAX_OPERANDS];
} dlop_strided_loop;

/* Set up a loop writing output from inputs broadcast to its shape (NumPy rules: missing
 * leading dims and size-1 dims get stride 0). Strides may be anything, negative and zero
 * included; NULL strides mean C-contiguous. Dims of size 1 are dropped and dims that are
 * contiguous with each other in every operand are merged, so a contiguous operation becomes
 * one flat loop with unit strides. DLOP_SHAPE_ERROR when an input does not broadcast or a
 * shape breaks checked_size.h's rule; DLOP_INVALID_ARGUMENT when an operand's strides reach
 * beyond int64 in bytes. After it every offset the cursor and the kernels compute (an index
 * times a stride times an element size, one step past a run's end included) fits in int64. */
static inline int dlop_strided_loop_setup(dlop_strided_loop *loop, const dlop_tensor *output,
                                          const dlop_tensor *inputs, int32_t num_inputs,
                                          int tensors_checked, const char *op_name, char *error,
                                          size_t error_size);

static inline int dlop_strided_loop_init(dlop_strided_loop *loop, const dlop_tensor *output,
                                         const dlop_tensor *inputs, int32_t num_inputs,
                                         const char *op_name, char *error, size_t error_size) {
  return dlop_strided_loop_setup(loop, output, inputs, num_inputs, 0, op_name, error, error_size);
}

/* dlop_strided_loop_init for tensors that passed dlop_check_tensors (tensors_checked 1): the
 * size and reach checks that one made already are not made again (a collapsed loop's reach is
 * at most each operand's own), which is what the elementwise thunk's run does. With 0 it is
 * dlop_strided_loop_init. */
static inline int dlop_strided_loop_setup(dlop_strided_loop *loop, const dlop_tensor *output,
                                          const dlop_tensor *inputs, int32_t num_inputs,
                                          int tensors_checked, const char *op_name, char *error,
                                          size_t error_size) {
  dlop_nd_offsets *l = &loop->layout;
  int32_t ndim = output->ndim, operands = num_inputs + 1, k, d, kept;
  /* No memset of the whole loop (~700 bytes, a visible part of a small call): every field a
   * reader uses (dims below ndim, operands below num_operands) is written below. */
  if (operands > DLOP_KERNEL_MAX_OPERANDS || ndim < 0 || ndim > DLOP_MAX_NDIM) {
    dlop_set_error(error, error_size, "%s: %d operands of rank %d exceed the loop's limits (%d, %d)",
                   op_name, (int)operands, (int)ndim, DLOP_KERNEL_MAX_OPERANDS, DLOP_MAX_NDIM);
    return DLOP_INVALID_ARGUMENT;
  }
  l->num_operands = operands;
  for (d = 0; d < ndim; d++) l->shape[d] = output->shape[d];
  if (tensors_checked) {
    loop->numel = dlop_tensor_numel(output); /* checked: it fits */
  } else {
    char what[96], so[DLOP_MAX_NDIM * 22 + 4];
    int size = dlop_shape_size(output->shape, ndim, 0, &loop->numel, NULL);
    if (size == DLOP_SIZE_FITS && loop->numel < 0) {
      dlop_set_error(error, error_size, "%s: output shape %s has a negative dim", op_name,
                     dlop_format_ints(output->shape, ndim, so, sizeof so));
      return DLOP_SHAPE_ERROR;
    }
    if (size != DLOP_SIZE_FITS) {
      snprintf(what, sizeof what, "%s: output", op_name);
      dlop_set_size_error(error, error_size, what, size, output->shape, ndim, -1);
      return DLOP_SHAPE_ERROR;
    }
  }
  for (k = 0; k < operands; k++) {
    const dlop_tensor *t = k == 0 ? output : &inputs[k - 1];
    int64_t contiguous = 1;
    if (t->ndim > ndim) {
      char st[DLOP_MAX_NDIM * 22 + 4], so[DLOP_MAX_NDIM * 22 + 4];
      dlop_set_error(error, error_size, "%s: input %d of shape %s does not broadcast to output shape %s",
                     op_name, (int)(k - 1), dlop_format_shape(t->shape, t->ndim, st, sizeof st),
                     dlop_format_shape(output->shape, ndim, so, sizeof so));
      return DLOP_SHAPE_ERROR;
    }
    loop->base[k] = (char *)t->data + t->byte_offset;
    loop->element_size[k] = (int64_t)dlop_dtype_size(dlop_tensor_dtype(t));
    for (d = ndim - 1; d >= 0; d--) {
      int32_t j = d - (ndim - t->ndim);
      int64_t stride;
      if (j < 0) {
        l->strides[k][d] = 0;
        continue;
      }
      stride = t->strides ? t->strides[j] : contiguous;
      /* an input's own shape may break the rule (the output's fits) */
      if (t->strides == NULL && j > 0 && !tensors_checked &&
          dlop_mul_overflow(contiguous, t->shape[j], &contiguous)) {
        char st[DLOP_MAX_NDIM * 22 + 4];
        dlop_set_error(error, error_size, "%s: input %d of shape %s has more than "
                       DLOP_SIZE_LIMIT_TEXT " elements", op_name, (int)(k - 1),
                       dlop_format_shape(t->shape, t->ndim, st, sizeof st));
        return DLOP_SHAPE_ERROR;
      }
      if (t->strides == NULL && tensors_checked) contiguous *= t->shape[j];
      if (t->shape[j] == l->shape[d]) {
        l->strides[k][d] = l->shape[d] == 1 ? 0 : stride;
      } else if (t->shape[j] == 1 && k > 0) {
        l->strides[k][d] = 0;
      } else {
        char st[DLOP_MAX_NDIM * 22 + 4], so[DLOP_MAX_NDIM * 22 + 4];
        dlop_set_error(error, error_size, "%s: input %d of shape %s does not broadcast to output shape %s",
                       op_name, (int)(k - 1), dlop_format_shape(t->shape, t->ndim, st, sizeof st),
                       dlop_format_shape(output->shape, ndim, so, sizeof so));
        return DLOP_SHAPE_ERROR;
      }
    }
  }
  if (loop->numel == 0) {
    l->ndim = 1;
    l->shape[0] = 0;
    for (k = 0; k < operands; k++) l->strides[k][0] = 0;
    return DLOP_OK;
  }
  /* drop size-1 dims, then merge each dim into the previous kept one where every operand
   * steps through both as one run (stride[outer] == stride[inner] * shape[inner]) */
  kept = 0;
  for (d = 0; d < ndim; d++) {
    int mergeable = kept > 0;
    if (l->shape[d] == 1) continue;
    for (k = 0; k < operands && mergeable; k++) {
      int64_t step; /* checked: strides may be anything until the reach check below */
      mergeable = !dlop_mul_overflow(l->strides[k][d], l->shape[d], &step) &&
                  l->strides[k][kept - 1] == step;
    }
    if (mergeable) {
      l->shape[kept - 1] *= l->shape[d];
      for (k = 0; k < operands; k++) l->strides[k][kept - 1] = l->strides[k][d];
    } else {
      l->shape[kept] = l->shape[d];
      for (k = 0; k < operands; k++) l->strides[k][kept] = l->strides[k][d];
      kept++;
    }
  }
  if (kept == 0) { /* a single element */
    l->shape[0] = 1;
    for (k = 0; k < operands; k++) l->strides[k][0] = 0;
    kept = 1;
  }
  l->ndim = kept;
  /* each operand's reach over the collapsed layout, in bytes (one dim for a contiguous loop):
   * it bounds every offset the cursor and the kernels compute, one step past a run included */
  for (k = 0; k < operands && !tensors_checked; k++) {
    int64_t low, high;
    int32_t failed_dim;
    if (dlop_strided_extent(l->shape, l->strides[k], kept, loop->element_size[k], 0, &low, &high,
                            &failed_dim) != 0) {
      char what[96];
      if (k == 0) snprintf(what, sizeof what, "%s: output", op_name);
      else snprintf(what, sizeof what, "%s: input %d broadcast", op_name, (int)(k - 1));
      dlop_set_extent_error(error, error_size, what, l->shape, l->strides[k], kept,
                            loop->element_size[k], 0, failed_dim);
      return DLOP_INVALID_ARGUMENT;
    }
  }
  return DLOP_OK;
}

/* True when every operand walks the (single, collapsed) dim with unit stride. */
static inline int dlop_strided_loop_is_contiguous(const dlop_strided_loop *loop) {
  int32_t k;
  if (loop->layout.ndim != 1) return 0;
  for (k = 0; k < loop->layout.num_operands; k++)
    if (loop->layout.strides[k][0] != 1 && loop->layout.shape[0] > 1) return 0;
  return 1;
}

/* Walks the linear range [begin, end) of a loop in runs along the innermost dim. */
typedef struct dlop_strided_cursor {
  int64_t index[DLOP_MAX_NDIM];
  int64_t remaining;
  char *pointer[DLOP_KERNEL_MAX_OPERANDS];
} dlop_strided_cursor;

static inline void dlop_strided_cursor_init(dlop_strided_cursor *c, const dlop_strided_loop *loop,
                                            int64_t begin, int64_t end) {
  const dlop_nd_offsets *l = &loop->layout;
  int64_t rest = begin;
  int32_t d, k;
  memset(c->index, 0, sizeof c->index); /* only index[] below ndim is read, but gcc can't tell */
  c->remaining = end > begin ? end - begin : 0;
  for (k = 0; k < l->num_operands; k++) c->pointer[k] = loop->base[k];
  for (d = l->ndim - 1; d >= 0; d--) {
    int64_t size = l->shape[d] > 0 ? l->shape[d] : 1;
    c->index[d] = rest % size;
    rest /= size;
    for (k = 0; k < l->num_operands; k++)
      c->pointer[k] += c->index[d] * l->strides[k][d] * loop->element_size[k];
  }
}

/* The next run: writes its operands' first-element pointers into pointers[] and returns its
 * length (0 when the range is done). Inner strides are loop->layout.strides[k][ndim - 1]. */
static inline int64_t dlop_strided_cursor_next(dlop_strided_cursor *c,
                                               const dlop_strided_loop *loop, char **pointers) {
  const dlop_nd_offsets *l = &loop->layout;
  int32_t last = l->ndim - 1, d, k;
  int64_t n = l->shape[last] - c->index[last];
  if (c->remaining <= 0) return 0;
  if (n > c->remaining) n = c->remaining;
  for (k = 0; k < l->num_operands; k++) {
    pointers[k] = c->pointer[k];
    c->pointer[k] += n * l->strides[k][last] * loop->element_size[k];
  }
  c->remaining -= n;
  c->index[last] += n;
  /* carry into outer dims */
  for (d = last; d > 0 && c->index[d] == l->shape[d]; d--) {
    c->index[d] = 0;
    c->index[d - 1]++;
    for (k = 0; k < l->num_operands; k++)
      c->pointer[k] += (l->strides[k][d - 1] - l->shape[d] * l->strides[k][d]) * loop->element_size[k];
  }
  return n;
}

/* Run body over [0, loop->numel) on the CPU, through the host's parallel_for in chunks of at
 * least grain elements when the loop is large enough, else inline. */
static inline int dlop_strided_loop_run(const dlop_host_api *host, const dlop_strided_loop *loop,
                                        int64_t grain, dlop_parallel_body body, void *context,
                                        const char *op_name, char *error, size_t error_size) {
  if (loop->numel <= 0) return DLOP_OK;
  if (loop->numel > grain && DLOP_HOST_HAS(host, parallel_for)) {
    int status = host->parallel_for(loop->numel, grain, body, context);
    if (status != DLOP_OK) {
      dlop_set_error(error, error_size, "%s: the host's parallel_for failed with status %d",
                     op_name, status);
      return status;
    }
    return DLOP_OK;
  }
  body(context, 0, loop->numel);
  return DLOP_OK;
}

#ifdef __cplusplus
}
#endif

#endif
