/* blas_node.c — the type and shape rule of dot, matmul and gemm (make_node and infer_shape
 * share it): one dtype for every input, ranks per op, inner dimensions that agree, NumPy
 * broadcasting of matmul's batch dims and of gemm's c. Pure. */
#include <string.h>

#include "blas_plugin.h"

#define SHAPE_TEXT (DLOP_MAX_NDIM * 22 + 4)

static const blas_op_info *info_of(const dlop_op_desc *op) {
  return (const blas_op_info *)op->op_data;
}

blas_params blas_read_params(const blas_op_info *info, const dlop_param_value *params,
                             int32_t num_params) {
  blas_params p = {1.0, info->kind == BLAS_GEMM ? 1.0 : 0.0, 0, 0, 0};
#define BLAS_PARAM(index, field, member)                                                   \
  if ((index) >= 0 && (index) < num_params && params != NULL) p.field = params[index].u.member
  BLAS_PARAM(info->alpha_index, alpha, f);
  BLAS_PARAM(info->beta_index, beta, f);
  BLAS_PARAM(info->trans_a_index, trans_a, i != 0);
  BLAS_PARAM(info->trans_b_index, trans_b, i != 0);
  BLAS_PARAM(info->allow_tf32_index, allow_tf32, i != 0);
#undef BLAS_PARAM
  return p;
}

/* Two known dims that differ. */
static int dims_differ(int64_t x, int64_t y) {
  return x != DLOP_DIM_UNKNOWN && y != DLOP_DIM_UNKNOWN && x != y;
}

int blas_shape_rule(const blas_op_info *info, const blas_params *params, const dlop_type *inputs,
                    int32_t num_inputs, int32_t num_outputs, dlop_type *out, char *error,
                    size_t error_size) {
  const char *name = info->name;
  int32_t expected_inputs = info->kind == BLAS_GEMM ? 3 : 2, i;
  char sa[SHAPE_TEXT], sb[SHAPE_TEXT];
  if (num_inputs != expected_inputs || num_outputs != 1) {
    dlop_set_error(error, error_size,
                   "%s: takes %d inputs and gives 1 output, got %d inputs and %d outputs", name,
                   (int)expected_inputs, (int)num_inputs, (int)num_outputs);
    return DLOP_TYPE_ERROR;
  }
  const dlop_type *a = &inputs[0], *b = &inputs[1];
  for (i = 1; i < num_inputs; i++) {
    if (inputs[i].dtype != a->dtype) {
      static const char *const names[3] = {"a", "b", "c"};
      dlop_set_error(error, error_size,
                     "%s: a is %s and %s is %s: every input must have one dtype (cast first)",
                     name, dlop_dtype_name((dlop_dtype)a->dtype), names[i],
                     dlop_dtype_name((dlop_dtype)inputs[i].dtype));
      return DLOP_TYPE_ERROR;
    }
  }
  if (a->dtype < 0 || a->dtype >= DLOP_DTYPE_COUNT || !(BLAS_ANY_DTYPES & DLOP_DTYPE_BIT(a->dtype))) {
    char supported[128];
    dlop_set_error(error, error_size, "%s: dtype %s is not supported (expected one of %s)",
                   name, dlop_dtype_name((dlop_dtype)a->dtype),
                   dlop_format_dtypes(BLAS_ANY_DTYPES, supported, sizeof supported));
    return DLOP_TYPE_ERROR;
  }
  for (i = 0; i < num_inputs; i++) {
    const dlop_type *t = &inputs[i];
    int32_t low = info->kind == BLAS_GEMM ? (i == 2 ? 0 : 2) : 1;
    int32_t high = info->kind == BLAS_MATMUL ? DLOP_MAX_NDIM : 2;
    if (t->ndim < low || t->ndim > high) {
      static const char *const names[3] = {"a", "b", "c"};
      if (low == high)
        dlop_set_error(error, error_size, "%s: %s has rank %d, expected %d", name,
                       names[i], (int)t->ndim, (int)low);
      else
        dlop_set_error(error, error_size, "%s: %s has rank %d, expected %d to %d",
                       name, names[i], (int)t->ndim, (int)low, (int)high);
      return DLOP_TYPE_ERROR;
    }
  }
  /* the matrices: a is (m, ka) or (ka) promoted to (1, ka); b is (kb, n) or (kb) -> (kb, 1) */
  int64_t m, ka, kb, n;
  if (a->ndim == 1) {
    m = 1;
    ka = a->shape[0];
  } else {
    m = a->shape[a->ndim - 2];
    ka = a->shape[a->ndim - 1];
  }
  if (b->ndim == 1) {
    kb = b->shape[0];
    n = 1;
  } else {
    kb = b->shape[b->ndim - 2];
    n = b->shape[b->ndim - 1];
  }
  if (info->kind == BLAS_GEMM) {
    int64_t t;
    if (params->trans_a) t = m, m = ka, ka = t;
    if (params->trans_b) t = kb, kb = n, n = t;
  }
  if (dims_differ(ka, kb)) {
    dlop_set_error(error, error_size,
                   "%s: a %s and b %s: inner dimensions %lld and %lld differ%s", name,
                   dlop_format_shape(a->shape, a->ndim, sa, sizeof sa),
                   dlop_format_shape(b->shape, b->ndim, sb, sizeof sb), (long long)ka,
                   (long long)kb,
                   info->kind == BLAS_GEMM ? " (after trans_a and trans_b)" : "");
    return DLOP_SHAPE_ERROR;
  }
  memset(out, 0, sizeof *out);
  out->dtype = a->dtype;
  if (info->kind == BLAS_MATMUL && (a->ndim > 2 || b->ndim > 2)) {
    int32_t batch_a = a->ndim > 2 ? a->ndim - 2 : 0, batch_b = b->ndim > 2 ? b->ndim - 2 : 0;
    char why[256];
    if (dlop_broadcast_shapes(a->shape, batch_a, b->shape, batch_b, out->shape, &out->ndim,
                              why, sizeof why) != DLOP_OK) {
      dlop_set_error(error, error_size, "%s: a %s and b %s: batch dims: %s", name,
                     dlop_format_shape(a->shape, a->ndim, sa, sizeof sa),
                     dlop_format_shape(b->shape, b->ndim, sb, sizeof sb), why);
      return DLOP_SHAPE_ERROR;
    }
  }
  if (a->ndim > 1 || info->kind == BLAS_GEMM) out->shape[out->ndim++] = m;
  if (b->ndim > 1 || info->kind == BLAS_GEMM) out->shape[out->ndim++] = n;
  if (info->kind == BLAS_GEMM) {
    /* c broadcasts to (m, n) without growing it: each of its dims is 1 or the output's */
    const dlop_type *c = &inputs[2];
    for (i = 0; i < c->ndim; i++) {
      int64_t want = out->shape[2 - c->ndim + i], have = c->shape[i];
      if (have != 1 && dims_differ(have, want)) {
        dlop_set_error(error, error_size,
                       "%s: c %s does not broadcast to the output shape %s", name,
                       dlop_format_shape(c->shape, c->ndim, sa, sizeof sa),
                       dlop_format_shape(out->shape, out->ndim, sb, sizeof sb));
        return DLOP_SHAPE_ERROR;
      }
    }
  }
  return DLOP_OK;
}

static int node_output_type(const dlop_node_args *args, dlop_type *out) {
  const blas_op_info *info = info_of(args->op);
  blas_params params = blas_read_params(info, args->params, args->num_params);
  return blas_shape_rule(info, &params, args->inputs, args->num_inputs, args->num_outputs, out,
                         args->error, args->error_size);
}

int blas_make_node(const dlop_node_args *args) {
  dlop_type out;
  int status = node_output_type(args, &out);
  if (status == DLOP_OK) args->outputs[0] = out;
  return status;
}

int blas_infer_shape(const dlop_node_args *args) {
  dlop_type out;
  int status = node_output_type(args, &out);
  if (status != DLOP_OK) return status;
  if (out.ndim != args->outputs[0].ndim) {
    dlop_set_error(args->error, args->error_size,
                   "%s: the output has rank %d by the inputs' shapes but make_node gave rank %d",
                   info_of(args->op)->name, (int)out.ndim, (int)args->outputs[0].ndim);
    return DLOP_SHAPE_ERROR;
  }
  memcpy(args->outputs[0].shape, out.shape, sizeof out.shape);
  return DLOP_OK;
}
