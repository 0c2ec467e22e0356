/* elemwise_thunk.c — what the elemwise ops add to the SDK's elementwise thunk (their specs are
 * in plugin.c): the dtype rule of operands that differ (a comparison's bool output, where's
 * bool condition, cast's two dtypes) and the dtypes that pick each op's kernels. */
#include "elemwise_plugin.h"

/* "no kernel for input dtypes (float32, int8) and output dtype float32" */
static int no_kernel(const dlop_thunk_args *args, const char *name) {
  char text[128];
  size_t used = 0;
  int32_t i;
  text[0] = '\0';
  for (i = 0; i < args->num_inputs && used < sizeof text; i++) {
    int written = snprintf(text + used, sizeof text - used, "%s%s", i ? ", " : "",
                           dlop_dtype_name((dlop_dtype)args->inputs[i].dtype));
    if (written > 0) used += (size_t)written;
  }
  dlop_set_error(args->error, args->error_size, "%s: no kernel for input dtypes (%s) and output dtype %s",
                 name, text, dlop_dtype_name((dlop_dtype)args->outputs[0].dtype));
  return DLOP_UNSUPPORTED;
}

int elemwise_kernel_dtypes(const dlop_thunk_args *args, dlop_dtype *dtypes, int32_t *count) {
  const elemwise_op_info *info = (const elemwise_op_info *)args->op->op_data;
  int32_t first = info->kind == EW_KIND_WHERE ? 1 : 0, i;
  int32_t value = args->inputs[first].dtype, expected_out = value;
  int ok = (info->spec.cpu_dtypes & DLOP_DTYPE_BIT(value)) != 0;
  for (i = first + 1; i < args->num_inputs; i++) ok &= args->inputs[i].dtype == value;
  if (info->kind == EW_KIND_WHERE) ok &= args->inputs[0].dtype == DLOP_BOOL;
  if (info->kind == EW_KIND_COMPARE) expected_out = DLOP_BOOL;
  if (info->kind == EW_KIND_CAST) {
    expected_out = args->outputs[0].dtype;
    ok &= (DLOP_DTYPES_ALL & DLOP_DTYPE_BIT(expected_out)) != 0;
  }
  ok &= args->outputs[0].dtype == expected_out;
  if (!ok) return no_kernel(args, info->spec.op_name);
  dtypes[0] = (dlop_dtype)value;
  *count = 1;
  if (info->kind == EW_KIND_CAST) {
    dtypes[1] = (dlop_dtype)args->outputs[0].dtype;
    if (dtypes[0] == dtypes[1]) dtypes[0] = dtypes[1] = elemwise_bit_copy_dtype(dtypes[0]);
    *count = 2;
  }
  return DLOP_OK;
}
