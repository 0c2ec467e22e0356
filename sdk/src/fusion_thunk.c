/* fusion_thunk.c — a fused group as one node of the schedule: a host-made op descriptor whose
 * infer_shape runs the members' own shape rules in turn (and holds them to the scalar-body
 * contract: each output has its inputs' broadcast shape), and a thunk that runs the generated
 * kernel. The runner, the buffer plan and views treat the node as any other. A run writes
 * every output in one pass over the outputs' shape; when the outputs' shapes differ (possible
 * only where static shapes left it open), each output gets a pass of its own over its shape,
 * computing only what it depends on. CPU: the module's run functions over the host's
 * parallel_for, walking the loop in runs along its inner dim. CUDA: the kernel that fits the
 * layout, through the host table's cuda_launch. */
#include <stdlib.h>
#include <string.h>

#include "fusion.h"
#include "jit.h"

/* Elements per parallel chunk on the CPU: a fused element costs several ops' worth. */
#define FUSED_CPU_GRAIN 16384
#define FUSED_CUDA_BLOCK 256
#define FUSED_CUDA_MAX_GRID (1u << 30)

/* The CUDA module's kernels in group->functions. */
enum { CUDA_CONTIGUOUS = 0, CUDA_VECTOR = 1, CUDA_STRIDED32 = 2, CUDA_STRIDED64 = 3, CUDA_OUTPUT = 4 };
/* The C module's: [0] the run, [1 + o] output o's own run. */
enum { C_RUN = 0, C_OUTPUT = 1 };

static int fused_make_node(const dlop_node_args *args) {
  dlop__format(args->error, args->error_size,
               "fused: a fused node exists only inside a compiled function");
  return DLOP_INVALID_ARGUMENT;
}

static int fused_make_thunk(const dlop_thunk_args *args) {
  dlop__format(args->error, args->error_size,
               "fused: the host makes a fused node's thunk when it compiles the kernel");
  return DLOP_INVALID_ARGUMENT;
}

dlop__fusion_group *dlop__fusion_group_of(const dlop_op_desc *op) {
  return op != NULL && op->make_node == fused_make_node ? (dlop__fusion_group *)op->op_data : NULL;
}

/* ---- infer_shape: the members' own rules, in turn ----------------------------------------- */

/* The output's shape is the inputs' broadcast (dims unknown on either side pass). */
static int broadcast_holds(const dlop_type *inputs, int32_t count, const dlop_type *output) {
  for (int32_t d = 0; d < output->ndim; d++) {
    int64_t want = 1;
    int unknown = output->shape[d] == DLOP_DIM_UNKNOWN;
    for (int32_t i = 0; i < count; i++) {
      int32_t j = d - (output->ndim - inputs[i].ndim);
      if (inputs[i].ndim > output->ndim) return 0;
      if (j < 0) continue;
      int64_t dim = inputs[i].shape[j];
      if (dim == DLOP_DIM_UNKNOWN) {
        unknown = 1;
      } else if (dim != 1) {
        if (want != 1 && want != dim) return 0;
        want = dim;
      }
    }
    if (!unknown && output->shape[d] != want) return 0;
  }
  return 1;
}

/* A reduction group's output: the reduction's own shape rule on its input's shape, held to the
 * reduction body (the reduced axes dropped, or kept as 1 with keepdims), which is what its
 * kernel writes. */
static int reduction_shape(const dlop__fusion_reduction *r, const dlop_type *input,
                           dlop_type *output, const dlop_node_args *args) {
  int32_t d, o = 0, fits = 1;
  memset(output, 0, sizeof *output);
  output->dtype = r->node.output_types[0].dtype;
  output->ndim = r->node.output_types[0].ndim;
  for (d = 0; d < output->ndim; d++) output->shape[d] = DLOP_DIM_UNKNOWN;
  dlop__stage_node stage = dlop__function_stage_node(&r->node, -1);
  int status = dlop__stage_infer_shape(&stage, input, output);
  if (status != DLOP_OK) {
    dlop__format(args->error, args->error_size, "the reduction: %s", dlop_last_error());
    return status;
  }
  for (d = 0; d < input->ndim && fits; d++) {
    int reduced = (r->axes >> d) & 1u;
    if (reduced && !r->keepdims) continue;
    int64_t want = reduced ? 1 : input->shape[d];
    fits = o < output->ndim && (want == DLOP_DIM_UNKNOWN || output->shape[o] == DLOP_DIM_UNKNOWN ||
                                output->shape[o] == want);
    o++;
  }
  if (fits && o == output->ndim) return DLOP_OK;
  char have[96], from[96];
  dlop__format(args->error, args->error_size,
               "op '%s' declares a reduction body reducing axes 0x%x%s, but infer_shape gave %s "
               "for an input of %s",
               r->node.op->name, (unsigned)r->axes, r->keepdims ? " (keepdims)" : "",
               dlop__type_format(output, have, sizeof have),
               dlop__type_format(input, from, sizeof from));
  return DLOP_PLUGIN_ERROR;
}

/* A member's output shapes from its own rule, held to the scalar-body contract. */
static int member_shape(const dlop__fusion_group *group, int32_t m, const dlop_type *values,
                        const dlop_node_args *args, dlop_type *inputs, dlop_type *outputs) {
  const dlop__fusion_member *member = &group->members[m];
  const dlop__function_node *node = &member->node;
  int32_t j;
  for (j = 0; j < node->num_inputs; j++) {
    const dlop__fusion_source *source = &member->sources[j];
    inputs[j] = source->kind == DLOP__FUSION_FROM_INPUT   ? args->inputs[source->index]
                : source->kind == DLOP__FUSION_FROM_VALUE ? values[source->index]
                                                          : group->literals[source->index].type;
  }
  for (j = 0; j < node->num_outputs; j++) {
    memset(&outputs[j], 0, sizeof outputs[j]);
    outputs[j].dtype = node->output_types[j].dtype;
    outputs[j].ndim = node->output_types[j].ndim;
    for (int32_t d = 0; d < outputs[j].ndim; d++) outputs[j].shape[d] = DLOP_DIM_UNKNOWN;
  }
  dlop__stage_node stage = dlop__function_stage_node(node, -1);
  int status = dlop__stage_infer_shape(&stage, inputs, outputs);
  if (status != DLOP_OK) {
    dlop__format(args->error, args->error_size, "group member %d: %s", (int)m, dlop_last_error());
    return status;
  }
  for (j = 0; j < node->num_outputs; j++)
    if (!broadcast_holds(inputs, node->num_inputs, &outputs[j])) {
      char have[96];
      dlop__format(args->error, args->error_size,
                   "group member %d: op '%s' declares a scalar body (elementwise with "
                   "broadcasting) but infer_shape gave output %d as %s, which is not the "
                   "broadcast of its inputs' shapes",
                   (int)m, node->op->name, (int)j, dlop__type_format(&outputs[j], have, sizeof have));
      return DLOP_PLUGIN_ERROR;
    }
  return DLOP_OK;
}

static int fused_infer_shape(const dlop_node_args *args) {
  const dlop__fusion_group *group = (const dlop__fusion_group *)args->op->op_data;
  int32_t most = 1, m, j;
  if (group->row != NULL) return dlop__fusion_row_infer_shape(group, args);
  for (m = 0; m < group->num_members; m++) {
    if (group->members[m].node.num_inputs > most) most = group->members[m].node.num_inputs;
    if (group->members[m].node.num_outputs > most) most = group->members[m].node.num_outputs;
  }
  dlop_type *values = malloc(sizeof(dlop_type) * ((size_t)group->num_values + 2 * (size_t)most));
  if (values == NULL) {
    dlop__format(args->error, args->error_size, "fused: out of memory inferring shapes");
    return DLOP_OUT_OF_MEMORY;
  }
  dlop_type *inputs = values + group->num_values, *outputs = inputs + most;
  int status = DLOP_OK;
  for (m = 0; m < group->num_members && status == DLOP_OK; m++) {
    const dlop__fusion_member *member = &group->members[m];
    status = member_shape(group, m, values, args, inputs, outputs);
    for (j = 0; j < member->node.num_outputs && status == DLOP_OK; j++)
      values[member->values[j]] = outputs[j];
  }
  if (group->reduction != NULL && status == DLOP_OK)
    status = reduction_shape(group->reduction, &values[group->reduction->value], &args->outputs[0],
                             args);
  for (int32_t o = 0; o < group->num_outputs && status == DLOP_OK && group->reduction == NULL; o++)
    args->outputs[o] = values[group->output_values[o]];
  free(values);
  return status;
}


/* Every value's shape in schedule order; each reduction's input then runs along the whole row
 * (its last dim is the rows' when known), which is what the kernel reduces. */
int dlop__fusion_row_infer_shape(const dlop__fusion_group *group, const dlop_node_args *args) {
  const dlop__fusion_row *row = group->row;
  int32_t most = 1, i, j;
  for (i = 0; i < group->num_members; i++) {
    if (group->members[i].node.num_inputs > most) most = group->members[i].node.num_inputs;
    if (group->members[i].node.num_outputs > most) most = group->members[i].node.num_outputs;
  }
  dlop_type *values = malloc(sizeof(dlop_type) * ((size_t)group->num_values + 2 * (size_t)most));
  if (values == NULL) {
    dlop__format(args->error, args->error_size, "fused: out of memory inferring shapes");
    return DLOP_OUT_OF_MEMORY;
  }
  dlop_type *inputs = values + group->num_values, *outputs = inputs + most;
  int status = DLOP_OK;
  int64_t length = DLOP_DIM_UNKNOWN; /* the rows' length: the broadcast of the inputs' last dims */
  for (i = 0; i < group->num_inputs; i++) {
    const dlop_type *t = &args->inputs[i];
    if (t->ndim > 0 && t->shape[t->ndim - 1] != 1 && !row->input_per_row[i])
      length = t->shape[t->ndim - 1];
  }
  for (i = 0; i < row->num_steps && status == DLOP_OK; i++) {
    int32_t step = row->steps[i];
    if (step >= 0) {
      const dlop__fusion_member *member = &group->members[step];
      status = member_shape(group, step, values, args, inputs, outputs);
      for (j = 0; j < member->node.num_outputs && status == DLOP_OK; j++)
        values[member->values[j]] = outputs[j];
      continue;
    }
    const dlop__fusion_row_reduction *r = &row->reductions[-1 - step];
    const dlop__fusion_source *source = &r->input;
    const dlop_type *input = source->kind == DLOP__FUSION_FROM_INPUT ? &args->inputs[source->index]
                             : source->kind == DLOP__FUSION_FROM_VALUE
                                 ? &values[source->index]
                                 : &group->literals[source->index].type;
    int64_t last = input->ndim > 0 ? input->shape[input->ndim - 1] : 1;
    if (last != DLOP_DIM_UNKNOWN && length != DLOP_DIM_UNKNOWN && last != length) {
      char have[96];
      dlop__format(args->error, args->error_size,
                   "row group %d: %s reduces a value of shape %s, whose rows are not the "
                   "group's (%lld elements): these shapes broadcast in a way a row group does "
                   "not cover; compile the function with fuse=False",
                   (int)group->number, r->body.node.op->name,
                   dlop__type_format(input, have, sizeof have), (long long)length);
      status = DLOP_SHAPE_ERROR;
      break;
    }
    status = reduction_shape(&r->body, input, &values[r->value], args);
  }
  for (int32_t o = 0; o < group->num_outputs && status == DLOP_OK; o++)
    args->outputs[o] = values[group->output_values[o]];
  free(values);
  return status;
}

void dlop__fusion_group_describe(dlop__fusion_group *group) {
  uint32_t flags = DLOP_OP_DETERMINISTIC | DLOP_OP_CUDA_GRAPH_SAFE;
  for (int32_t m = 0; m < group->num_members; m++) flags &= group->members[m].node.op->flags;
  if (group->reduction != NULL) flags &= group->reduction->node.op->flags;
  for (int32_t r = 0; group->row != NULL && r < group->row->num_reductions; r++)
    flags &= group->row->reductions[r].body.node.op->flags;
  dlop__format(group->op_name, sizeof group->op_name, "fused");
  memset(&group->op, 0, sizeof group->op);
  group->op.struct_size = sizeof(dlop_op_desc);
  /* one kernel launch (or one per output), no allocation, no synchronization: as capture-safe
   * and deterministic as its members are */
  group->op.flags = flags;
  group->op.name = group->op_name;
  group->op.doc = group->row != NULL
                      ? "reductions over the last axis and the elementwise nodes reading them, "
                        "run as one generated kernel that reads each row once"
                  : group->reduction != NULL
                      ? "a reduction fed by a fused group of elementwise nodes, run as one "
                        "generated kernel"
                      : "a fused group of elementwise nodes, run as one generated kernel";
  group->op.num_inputs = group->num_inputs;
  group->op.num_outputs = group->num_outputs;
  group->op.cpu_dtypes = DLOP_DTYPES_ALL;
  group->op.cuda_dtypes = DLOP_DTYPES_ALL;
  group->op.make_node = fused_make_node;
  group->op.infer_shape = fused_infer_shape;
  group->op.make_thunk = fused_make_thunk;
  group->op.op_data = group;
}

/* ---- runs ---------------------------------------------------------------------------------- */

typedef void (*fused_run_fn)(char *const *pointers, const int64_t *strides, int64_t n);

/* One pass: the loop over one shape, its operands (outputs, then inputs) and which are flat. */
typedef struct fused_pass {
  dlop__fusion_layout layout;
  char flat[DLOP__FUSION_MAX_OPERANDS];
  fused_run_fn run;
  const uint64_t *params; /* the run-time parameters' bits, passed after the operands */
} fused_pass;

static int same_shape(const dlop_tensor *a, const dlop_tensor *b) {
  if (a->ndim != b->ndim) return 0;
  for (int32_t d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

/* The layout of the pass writing output `output` (-1: every output) over its shape. */
static int prepare_pass(const dlop__fusion_group *group, const dlop_run_args *args,
                        int32_t output, fused_pass *pass) {
  const dlop_tensor *tensors[DLOP__FUSION_MAX_OPERANDS];
  char used[DLOP__FUSION_MAX_OPERANDS];
  int32_t outputs = group->num_outputs, k;
  const dlop_tensor *shape = &args->outputs[output < 0 ? 0 : output];
  if (output >= 0) dlop__fusion_output_inputs(group, output, used);
  for (k = 0; k < outputs; k++) {
    tensors[k] = &args->outputs[k];
    pass->flat[k] = output >= 0 && k != output;
  }
  for (k = 0; k < group->num_inputs; k++) {
    tensors[outputs + k] = &args->inputs[k];
    pass->flat[outputs + k] = group->input_scalar[k] || (output >= 0 && !used[k]);
  }
  return dlop__fusion_layout_init(&pass->layout, shape->shape, shape->ndim, tensors, pass->flat,
                                  outputs + group->num_inputs, "fused");
}

/* The parallel_for body: elements [begin, end) in runs along the inner dim; moving to the next
 * run is a pointer add per operand, with a carry into outer dims at their ends. */
static void cpu_chunk(void *context, int64_t begin, int64_t end) {
  const fused_pass *pass = (const fused_pass *)context;
  const dlop__fusion_layout *l = &pass->layout;
  const int32_t inner = l->ndim - 1, count = l->num_operands;
  const int64_t cols = l->shape[inner];
  int64_t strides[DLOP__FUSION_MAX_OPERANDS], index[DLOP_MAX_NDIM], row = begin / cols;
  int64_t col = begin - row * cols;
  char *row_start[DLOP__FUSION_MAX_OPERANDS], *pointers[DLOP__FUSION_MAX_OPERANDS + 1];
  int32_t k, d;
  pointers[count] = (char *)(uintptr_t)pass->params; /* read as p[count] by the kernel */
  for (k = 0; k < count; k++) {
    strides[k] = l->strides[k][inner];
    row_start[k] = l->base[k];
  }
  for (d = inner - 1; d >= 0; d--) {
    index[d] = row % l->shape[d];
    row /= l->shape[d];
    for (k = 0; k < count; k++) row_start[k] += index[d] * l->strides[k][d] * l->element_size[k];
  }
  for (k = 0; k < count; k++) pointers[k] = row_start[k] + col * strides[k] * l->element_size[k];
  for (;;) {
    int64_t n = cols - col < end - begin ? cols - col : end - begin;
    pass->run(pointers, strides, n);
    begin += n;
    if (begin >= end) return;
    col = 0;
    d = inner - 1;
    for (k = 0; k < count; k++) row_start[k] += l->strides[k][d] * l->element_size[k];
    while (++index[d] == l->shape[d] && d > 0) {
      index[d] = 0;
      for (k = 0; k < count; k++)
        row_start[k] += (l->strides[k][d - 1] - l->shape[d] * l->strides[k][d]) * l->element_size[k];
      d--;
    }
    for (k = 0; k < count; k++) pointers[k] = row_start[k];
  }
}

static int cpu_pass(const dlop__fusion_group *group, const dlop_run_args *args, int32_t output) {
  fused_pass pass;
  int status = prepare_pass(group, args, output, &pass);
  if (status != DLOP_OK) {
    dlop__format(args->error, args->error_size, "%s", dlop_last_error());
    return status;
  }
  if (pass.layout.numel == 0) return DLOP_OK;
  pass.run = (fused_run_fn)group->functions[output < 0 ? C_RUN : C_OUTPUT + output];
  pass.params = group->param_bits;
  if (pass.layout.numel <= FUSED_CPU_GRAIN) {
    cpu_chunk(&pass, 0, pass.layout.numel);
    return DLOP_OK;
  }
  status = dlop__host_api()->parallel_for(pass.layout.numel, FUSED_CPU_GRAIN, cpu_chunk, &pass);
  if (status != DLOP_OK)
    dlop__format(args->error, args->error_size, "fused: the host's parallel_for failed (%d)",
                 status);
  return status;
}

static int cuda_launch_blocks_of(void *function, uint32_t grid, uint32_t threads, void *stream,
                                 void **kernel_args, const dlop_run_args *args) {
  uint32_t grid3[3] = {grid, 1, 1}, block[3] = {threads, 1, 1};
  return dlop__host_api()->cuda_launch(function, grid3, block, 0, stream, kernel_args,
                                       args->error, args->error_size);
}

static int cuda_launch(void *function, uint32_t grid, void *stream, void **kernel_args,
                       const dlop_run_args *args) {
  return cuda_launch_blocks_of(function, grid, FUSED_CUDA_BLOCK, stream, kernel_args, args);
}

static uint32_t grid_for(int64_t threads, uint32_t cap) {
  int64_t blocks = threads / FUSED_CUDA_BLOCK + (threads % FUSED_CUDA_BLOCK != 0);
  if (blocks > (int64_t)cap) blocks = cap;
  return blocks < 1 ? 1u : (uint32_t)blocks;
}

/* The vector kernel fits when every operand it loads or stores as a pack is aligned to it. */
static int packs_aligned(const dlop__fusion_group *group, const fused_pass *pass) {
  for (int32_t k = 0; k < pass->layout.num_operands; k++) {
    uint64_t pack = (uint64_t)(group->vector_width * pass->layout.element_size[k]);
    if (!pass->flat[k] && (uint64_t)(uintptr_t)pass->layout.base[k] % pack != 0) return 0;
  }
  return 1;
}

static int cuda_pass(const dlop__fusion_group *group, const dlop_run_args *args, int32_t output) {
  fused_pass pass;
  /* the kernels' pointers struct: the operands' pointers, then the run-time parameters' bits */
  union {
    void *pointer;
    uint64_t bits;
  } pointers[DLOP__FUSION_MAX_OPERANDS + DLOP__FUSION_MAX_PARAMS];
  int64_t layout[1 + DLOP_MAX_NDIM + DLOP__FUSION_MAX_OPERANDS * DLOP_MAX_NDIM];
  void *kernel_args[3] = {pointers, NULL, layout};
  int status = prepare_pass(group, args, output, &pass);
  if (status != DLOP_OK) {
    dlop__format(args->error, args->error_size, "%s", dlop_last_error());
    return status;
  }
  int64_t n = pass.layout.numel;
  if (n == 0) return DLOP_OK;
  if (args->stream == NULL) {
    dlop__format(args->error, args->error_size, "fused: no CUDA stream given");
    return DLOP_INVALID_ARGUMENT;
  }
  kernel_args[1] = &n;
  for (int32_t k = 0; k < pass.layout.num_operands; k++) pointers[k].pointer = pass.layout.base[k];
  for (int32_t q = 0; q < group->num_params; q++)
    pointers[pass.layout.num_operands + q].bits = group->param_bits[q];
  if (output < 0 && dlop__fusion_layout_contiguous(&pass.layout, pass.flat)) {
    if (n >= group->vector_width && packs_aligned(group, &pass)) {
      int64_t vectors = n / group->vector_width, u = group->packs_per_thread;
      if (!group->chunk_block)
        return cuda_launch(group->functions[CUDA_VECTOR],
                           grid_for(vectors / u + (vectors % u != 0), FUSED_CUDA_MAX_GRID),
                           args->stream, kernel_args, args);
      /* the chunk form: one block a whole chunk (it has no loop), one more for the elements
       * past the whole chunks; past the grid's cap, the contiguous kernel below */
      int64_t chunk = group->chunk_block * u, chunks = vectors / chunk;
      int64_t blocks = chunks + (chunks * chunk * group->vector_width < n);
      if (blocks <= (int64_t)FUSED_CUDA_MAX_GRID)
        return cuda_launch_blocks_of(group->functions[CUDA_VECTOR], (uint32_t)blocks,
                                     (uint32_t)group->chunk_block, args->stream, kernel_args, args);
    }
    return cuda_launch(group->functions[CUDA_CONTIGUOUS], grid_for(n, FUSED_CUDA_MAX_GRID),
                       args->stream, kernel_args, args);
  }
  /* the layout struct of the kernels: ndim, shape[16], strides[operands][16], all int64 */
  const dlop__fusion_layout *l = &pass.layout;
  memset(layout, 0, sizeof layout);
  layout[0] = l->ndim;
  for (int32_t d = 0; d < l->ndim; d++) layout[1 + d] = l->shape[d];
  for (int32_t k = 0; k < l->num_operands; k++)
    for (int32_t d = 0; d < l->ndim; d++) layout[1 + DLOP_MAX_NDIM + k * DLOP_MAX_NDIM + d] = l->strides[k][d];
  void *function = output >= 0                       ? group->functions[CUDA_OUTPUT + output]
                   : n <= (int64_t)UINT32_MAX ? group->functions[CUDA_STRIDED32]
                                                     : group->functions[CUDA_STRIDED64];
  return cuda_launch(function, grid_for(n, group->max_blocks), args->stream, kernel_args, args);
}

static int fused_run(void *state, const dlop_run_args *args) {
  const dlop__fusion_group *group = (const dlop__fusion_group *)state;
  int (*pass)(const dlop__fusion_group *, const dlop_run_args *, int32_t) =
      group->target == DLOP__FUSION_TARGET_CUDA ? cuda_pass : cpu_pass;
  int one_shape = 1, status = DLOP_OK;
  if (args->num_inputs != group->num_inputs || args->num_outputs != group->num_outputs) {
    dlop__format(args->error, args->error_size, "fused: run with %d inputs and %d outputs, expected %d and %d",
                 (int)args->num_inputs, (int)args->num_outputs, (int)group->num_inputs,
                 (int)group->num_outputs);
    return DLOP_INVALID_ARGUMENT;
  }
  for (int32_t o = 1; o < group->num_outputs; o++)
    one_shape &= same_shape(&args->outputs[0], &args->outputs[o]);
  if (one_shape) return pass(group, args, -1);
  if (!group->per_output) {
    dlop__format(args->error, args->error_size,
                 "fused: the outputs' shapes differ, which their static shapes ruled out");
    return DLOP_INTERNAL;
  }
  for (int32_t o = 0; o < group->num_outputs && status == DLOP_OK; o++) status = pass(group, args, o);
  return status;
}

void dlop__fusion_group_thunk(dlop__fusion_group *group, dlop_thunk *thunk) {
  if (group->reduction != NULL) {
    dlop__fusion_reduction_thunk(group, thunk);
    return;
  }
  if (group->row != NULL) {
    dlop__fusion_row_thunk(group, thunk);
    return;
  }
  memset(thunk, 0, sizeof *thunk);
  thunk->struct_size = sizeof(dlop_thunk);
  thunk->state = group;
  thunk->run = fused_run;
  thunk->destroy = NULL; /* the module is the function's (function_fuse.c) */
  thunk->workspace_bytes = 0;
}
