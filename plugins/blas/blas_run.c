/* blas_run.c — a thunk's run, shared by the CPU and CUDA: check the tensors against the shape
 * rule, copy operands BLAS cannot read as they lie into contiguous scratch, lay gemm's c into
 * the output, issue the GEMMs (one strided-batched call per run of the batch dims), and copy
 * back when the output itself could not be written by BLAS. */
#include <string.h>

#include "blas_plugin.h"

/* Memory taken during one run (stream-ordered on CUDA), given back on every path. */
typedef struct run_scratch {
  void *pointers[4];
  int32_t count;
} run_scratch;

static int scratch_alloc(const blas_thunk_state *s, const dlop_run_args *args, run_scratch *scratch,
                         size_t bytes, void **pointer) {
  int status = s->host->memory_alloc(s->device, bytes ? bytes : 1, args->stream, pointer,
                                     args->error, args->error_size);
  if (status != DLOP_OK) {
    if (args->error && args->error[0] == '\0')
      dlop_set_error(args->error, args->error_size, "%s: could not allocate %zu bytes of scratch",
                     s->info->name, bytes);
    return status;
  }
  scratch->pointers[scratch->count++] = *pointer;
  return DLOP_OK;
}

static void scratch_release(const blas_thunk_state *s, const dlop_run_args *args,
                            run_scratch *scratch) {
  for (int32_t i = 0; i < scratch->count; i++)
    s->host->memory_free(s->device, scratch->pointers[i], args->stream);
  scratch->count = 0;
}

/* A C-contiguous tensor of src's shape and dtype over new scratch memory; shape and strides
 * live in the caller's arrays. */
static int contiguous_like(const blas_thunk_state *s, const dlop_run_args *args,
                           run_scratch *scratch, const dlop_tensor *src, dlop_tensor *dst,
                           int64_t *shape, int64_t *strides) {
  int64_t bytes;
  /* src passed dlop_check_tensors, so its size fits; a broadcast operand's copy may still be
   * far larger than its memory, which the allocation then refuses */
  if (dlop_shape_size(src->shape, src->ndim, (int64_t)dlop_dtype_size(dlop_tensor_dtype(src)),
                      NULL, &bytes) != DLOP_SIZE_FITS ||
      dlop_contiguous_strides(src->shape, src->ndim, strides)) {
    char text[DLOP_MAX_NDIM * 22 + 4];
    dlop_set_error(args->error, args->error_size, "%s: a contiguous copy of shape %s has more "
                   "than " DLOP_SIZE_LIMIT_TEXT " bytes", s->info->name,
                   dlop_format_shape(src->shape, src->ndim, text, sizeof text));
    return DLOP_SHAPE_ERROR;
  }
  *dst = *src;
  for (int32_t d = 0; d < src->ndim; d++) shape[d] = src->shape[d];
  dst->shape = shape;
  dst->strides = strides;
  dst->byte_offset = 0;
  return scratch_alloc(s, args, scratch, (size_t)bytes, &dst->data);
}

/* True when x and y are the same elements in the same layout (gemm's c handed as the output). */
static int same_layout(const dlop_tensor *x, const dlop_tensor *y) {
  if (dlop_tensor_base(x) != dlop_tensor_base(y) || x->ndim != y->ndim) return 0;
  for (int32_t d = 0; d < x->ndim; d++) {
    if (x->shape[d] != y->shape[d]) return 0;
    if (x->shape[d] == 1) continue;
    if (dlop_tensor_is_contiguous(x) && dlop_tensor_is_contiguous(y)) continue;
    if (!x->strides || !y->strides || x->strides[d] != y->strides[d]) return 0;
  }
  return 1;
}

static int check_run(const blas_thunk_state *s, const dlop_run_args *args) {
  const char *name = s->info->name;
  dlop_type types[3], expected;
  char got[DLOP_MAX_NDIM * 22 + 4], want[DLOP_MAX_NDIM * 22 + 4];
  int status;
  if (args->num_inputs != s->num_inputs || args->num_outputs != 1) {
    dlop_set_error(args->error, args->error_size,
                   "%s: run with %d inputs and %d outputs, expected %d and 1", name,
                   (int)args->num_inputs, (int)args->num_outputs, (int)s->num_inputs);
    return DLOP_INVALID_ARGUMENT;
  }
  status = dlop_check_tensors(name, "input", args->inputs, s->num_inputs, s->inputs, s->device,
                              args->error, args->error_size);
  if (status == DLOP_OK)
    status = dlop_check_tensors(name, "output", args->outputs, 1, &s->output, s->device,
                                args->error, args->error_size);
  if (status != DLOP_OK) return status;
  for (int32_t i = 0; i < s->num_inputs; i++) {
    const dlop_tensor *t = &args->inputs[i];
    memset(&types[i], 0, sizeof types[i]);
    types[i].dtype = s->inputs[i].dtype;
    types[i].ndim = t->ndim;
    memcpy(types[i].shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  }
  status = blas_shape_rule(s->info, &s->params, types, s->num_inputs, 1, &expected, args->error,
                           args->error_size);
  if (status != DLOP_OK) return status;
  const dlop_tensor *out = &args->outputs[0];
  if (expected.ndim != out->ndim ||
      (out->ndim > 0 && memcmp(expected.shape, out->shape, sizeof(int64_t) * (size_t)out->ndim))) {
    dlop_set_error(args->error, args->error_size, "%s: output shape %s, expected %s", name,
                   dlop_format_shape(out->shape, out->ndim, got, sizeof got),
                   dlop_format_shape(expected.shape, expected.ndim, want, sizeof want));
    return DLOP_SHAPE_ERROR;
  }
  return DLOP_OK;
}

/* The GEMMs of a prepared problem: batch dims merged, then one call per run of the last one. */
static int issue_gemms(const blas_thunk_state *s, const dlop_run_args *args, blas_problem *p) {
  blas_gemm_call call;
  int64_t index[DLOP_MAX_NDIM] = {0};
  size_t element = dlop_dtype_size(p->dtype);
  int status, c_transposed = 1;
  blas_problem_collapse_batch(p);
  memset(&call, 0, sizeof call);
  call.dtype = p->dtype;
  call.m = p->m, call.n = p->n, call.k = p->k;
  call.alpha = s->params.alpha;
  call.beta = s->info->kind == BLAS_GEMM ? s->params.beta : 0.0;
  if (!blas_matrix_direct(&p->matrix[BLAS_A], &call.trans_a, &call.lda) ||
      !blas_matrix_direct(&p->matrix[BLAS_B], &call.trans_b, &call.ldb) ||
      !blas_matrix_direct(&p->matrix[BLAS_C], &c_transposed, &call.ldc) || c_transposed) {
    dlop_set_error(args->error, args->error_size,
                   "%s: internal error: an operand BLAS cannot read reached the GEMM call",
                   s->info->name);
    return DLOP_INTERNAL;
  }
  int32_t last = p->batch_ndim - 1;
  call.batch_count = last >= 0 ? p->batch_shape[last] : 1;
  call.stride_a = last >= 0 ? p->batch_stride[BLAS_A][last] : 0;
  call.stride_b = last >= 0 ? p->batch_stride[BLAS_B][last] : 0;
  call.stride_c = last >= 0 ? p->batch_stride[BLAS_C][last] : 0;
  for (;;) {
    int64_t offset[BLAS_OPERANDS] = {0, 0, 0};
    for (int32_t d = 0; d < last; d++)
      for (int32_t k = 0; k < BLAS_OPERANDS; k++) offset[k] += index[d] * p->batch_stride[k][d];
    call.a = p->base[BLAS_A] + offset[BLAS_A] * (int64_t)element;
    call.b = p->base[BLAS_B] + offset[BLAS_B] * (int64_t)element;
    call.c = p->base[BLAS_C] + offset[BLAS_C] * (int64_t)element;
    status = s->backend->gemm(s, args, &call);
    if (status != DLOP_OK) return status;
    /* next index over the outer batch dims (all but the last) */
    int32_t d = last - 1;
    while (d >= 0 && ++index[d] == p->batch_shape[d]) index[d--] = 0;
    if (d < 0) return DLOP_OK;
  }
}

static int run_problem(const blas_thunk_state *s, const dlop_run_args *args, run_scratch *scratch) {
  const char *name = s->info->name;
  const dlop_tensor *out = &args->outputs[0];
  dlop_tensor operand[2] = {args->inputs[0], args->inputs[1]}, work = *out;
  int64_t shapes[3][DLOP_MAX_NDIM], strides[3][DLOP_MAX_NDIM];
  blas_problem p;
  int transpose, status;
  int64_t ld;
  status = blas_problem_init(&p, s->info->kind, &s->params, &operand[0], &operand[1], out, name,
                             args->error, args->error_size);
  if (status != DLOP_OK) return status;
  if (p.m == 0 || p.n == 0 || p.batch_count == 0) return DLOP_OK; /* nothing to write */
  /* a or b in a layout BLAS cannot read (no unit stride, negative or zero strides): a
   * contiguous copy. k = 0 reads neither. */
  for (int32_t i = 0; i < 2 && p.k > 0; i++) {
    if (blas_matrix_direct(&p.matrix[i], &transpose, &ld)) continue;
    status = contiguous_like(s, args, scratch, &args->inputs[i], &operand[i], shapes[i], strides[i]);
    if (status == DLOP_OK) status = s->backend->copy(s, args, &operand[i], &args->inputs[i]);
    if (status != DLOP_OK) return status;
  }
  /* the output: written directly when BLAS can (row- or column-major), else through scratch */
  int through_scratch = !blas_matrix_direct(&p.matrix[BLAS_C], &transpose, &ld);
  if (through_scratch) {
    status = contiguous_like(s, args, scratch, out, &work, shapes[2], strides[2]);
    if (status != DLOP_OK) return status;
  }
  status = blas_problem_init(&p, s->info->kind, &s->params, &operand[0], &operand[1], &work, name,
                             args->error, args->error_size);
  if (status != DLOP_OK) return status;
  if (blas_matrix_direct(&p.matrix[BLAS_C], &transpose, &ld) && transpose)
    blas_problem_transpose(&p);
  if (p.k == 0) {
    /* an empty sum: out = beta * c (matmul: 0). BLAS is asked for alpha * Z1 @ Z2 + beta * C
     * with zero matrices Z1 (m x 1), Z2 (1 x n), which every BLAS handles alike. */
    size_t element = dlop_dtype_size(p.dtype);
    int64_t zero_bytes;
    void *zeros;
    if (dlop_add_overflow(p.m, p.n, &zero_bytes) ||
        dlop_mul_overflow(zero_bytes, (int64_t)element, &zero_bytes)) {
      dlop_set_error(args->error, args->error_size, "%s: %lld + %lld zeros have more than "
                     DLOP_SIZE_LIMIT_TEXT " bytes", name, (long long)p.m, (long long)p.n);
      return DLOP_SHAPE_ERROR;
    }
    status = scratch_alloc(s, args, scratch, (size_t)zero_bytes, &zeros);
    if (status == DLOP_OK) status = s->backend->zero(s, args, zeros, (size_t)zero_bytes);
    if (status != DLOP_OK) return status;
    p.k = 1;
    p.matrix[BLAS_A] = (blas_matrix){p.m, 1, 1, 1};
    p.matrix[BLAS_B] = (blas_matrix){1, p.n, p.n, 1};
    p.base[BLAS_A] = (char *)zeros;
    p.base[BLAS_B] = (char *)zeros + (size_t)p.m * element;
    memset(p.batch_stride[BLAS_A], 0, sizeof p.batch_stride[BLAS_A]);
    memset(p.batch_stride[BLAS_B], 0, sizeof p.batch_stride[BLAS_B]);
  }
  /* gemm: c broadcast into the output first (nothing to do when the host gave c's own memory
   * as the output), then the GEMM updates it in place with beta */
  if (s->info->kind == BLAS_GEMM && s->params.beta != 0.0 && !same_layout(&work, &args->inputs[2])) {
    status = s->backend->copy(s, args, &work, &args->inputs[2]);
    if (status != DLOP_OK) return status;
  }
  status = issue_gemms(s, args, &p);
  if (status == DLOP_OK && through_scratch) status = s->backend->copy(s, args, out, &work);
  return status;
}

int blas_run(void *state, const dlop_run_args *args) {
  const blas_thunk_state *s = (const blas_thunk_state *)state;
  run_scratch scratch = {{NULL}, 0};
  if (args->error && args->error_size) args->error[0] = '\0';
  int status = check_run(s, args);
  if (status != DLOP_OK) return status;
  status = run_problem(s, args, &scratch);
  scratch_release(s, args, &scratch);
  return status;
}
