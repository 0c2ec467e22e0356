/* dlop/op.h — what a plugin declares about each op: parameters, dtypes, devices, flags, and
 * the three stages make_node, infer_shape and make_thunk, plus the thunk they produce. */
#ifndef DLOP_OP_H
#define DLOP_OP_H

#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- parameters ------------------------------------------------------------------------ */

typedef enum dlop_param_kind {
  DLOP_PARAM_BOOL = 1,   /* u.i, 0 or 1 */
  DLOP_PARAM_INT = 2,    /* u.i */
  DLOP_PARAM_FLOAT = 3,  /* u.f */
  DLOP_PARAM_STRING = 4, /* u.s, NUL-terminated */
  DLOP_PARAM_INTS = 5    /* u.ints, count values (axes, shapes) */
} dlop_param_kind;

/* "bool", "int", "float", "string", "ints" (as docs and messages spell kinds); "unknown" else. */
static inline const char *dlop_param_kind_name(int32_t kind) {
  switch (kind) {
    case DLOP_PARAM_BOOL: return "bool";
    case DLOP_PARAM_INT: return "int";
    case DLOP_PARAM_FLOAT: return "float";
    case DLOP_PARAM_STRING: return "string";
    case DLOP_PARAM_INTS: return "ints";
    default: return "unknown";
  }
}

/* One parameter value. Frozen layout (travels in arrays, in declaration order). */
typedef struct dlop_param_value {
  int32_t kind;  /* dlop_param_kind */
  int32_t count; /* number of values for DLOP_PARAM_INTS, else 1 */
  union {
    int64_t i;
    double f;
    const char *s;
    const int64_t *ints;
  } u;
} dlop_param_value;

/* One declared parameter. Frozen layout (travels in arrays). */
typedef struct dlop_param_decl {
  const char *name; /* a C identifier, unique within the op */
  int32_t kind;     /* dlop_param_kind */
  int32_t reserved;
  const char *doc;
  dlop_param_value default_value; /* kind must equal .kind */
} dlop_param_decl;

/* ---- flags ----------------------------------------------------------------------------- */

enum {
  /* Same inputs give bit-identical outputs on every run. */
  DLOP_OP_DETERMINISTIC = 1u << 0,
  /* The CUDA thunk may be captured in a CUDA graph: no allocation, no synchronization, no
   * host-side reads of device data while it runs. */
  DLOP_OP_CUDA_GRAPH_SAFE = 1u << 1,
  /* The thunk needs C-contiguous inputs; the host copies strided inputs before calling it.
   * Without this flag the thunk must handle any strides, negative and zero ones included. */
  DLOP_OP_NEEDS_CONTIGUOUS_INPUTS = 1u << 2
};

/* ---- the stages ------------------------------------------------------------------------ */

struct dlop_op_desc;

/* Arguments of make_node and infer_shape. The host zeroes outputs and sets num_outputs.
 * make_node: inputs carry dtype, ndim and static shapes (DLOP_DIM_UNKNOWN where unknown);
 *   it checks them and fills each output's dtype, ndim and shape (unknown where it cannot tell).
 * infer_shape: inputs carry shapes (static ones while the graph is built, concrete ones at run
 *   time) and outputs carry make_node's dtype and ndim; it fills each output's shape.
 * Both are pure: no allocation that outlives the call, no global state, no device work. */
typedef struct dlop_node_args {
  uint32_t struct_size;
  uint32_t reserved;
  const struct dlop_op_desc *op;
  const dlop_param_value *params; /* op->num_params values, declaration order */
  int32_t num_params;
  int32_t num_inputs;
  const dlop_type *inputs;
  dlop_type *outputs;
  int32_t num_outputs;
  int32_t reserved2;
  char *error; /* on failure write a message naming what was wrong and what was expected */
  size_t error_size;
} dlop_node_args;

/* Arguments of a thunk's run. Outputs are allocated by the host with the shapes infer_shape
 * gave; the thunk writes every element of them and nothing else. */
typedef struct dlop_run_args {
  uint32_t struct_size;
  uint32_t reserved;
  const dlop_tensor *inputs;
  int32_t num_inputs;
  int32_t num_outputs;
  const dlop_tensor *outputs;
  void *stream;          /* CUstream on CUDA (never the default stream); NULL on the CPU */
  void *workspace;       /* thunk->workspace_bytes on the thunk's device, or NULL */
  size_t workspace_bytes;
  char *error;
  size_t error_size;
} dlop_run_args;

/* A prepared kernel for one node on one device. make_thunk fills it; the host owns it and
 * calls destroy once. run may be called many times, from several threads at once on
 * different tensors, so it must not mutate state without its own locking. */
typedef struct dlop_thunk {
  uint32_t struct_size;
  uint32_t reserved;
  void *state;
  int (*run)(void *state, const dlop_run_args *args);
  void (*destroy)(void *state); /* may be NULL when state needs no cleanup */
  size_t workspace_bytes;       /* scratch the host provides on each run; 0 for none */
} dlop_thunk;

/* Arguments of make_thunk: types as make_node returned them, and the device to prepare for.
 * The host has set thunk->struct_size; make_thunk fills the rest. */
typedef struct dlop_thunk_args {
  uint32_t struct_size;
  uint32_t reserved;
  const struct dlop_op_desc *op;
  const dlop_param_value *params;
  int32_t num_params;
  int32_t num_inputs;
  const dlop_type *inputs;
  const dlop_type *outputs;
  int32_t num_outputs;
  dlop_device device;
  dlop_thunk *thunk;
  char *error;
  size_t error_size;
} dlop_thunk_args;

/* Arguments of make_view (ABI 1.1), the stage of ops whose outputs are views of an input
 * (transpose, reshape, broadcast_to): no kernel, no allocation, no copy. The host passes the
 * viewed input's layout (input->data is never read; input->strides are never NULL here) and
 * the output's type with its concrete shape from infer_shape. make_view fills
 * output_strides[0..output->ndim-1] (in elements) and *output_byte_offset (bytes from
 * input->data, like dlop_tensor.byte_offset) so that each output element is the input element
 * the op defines; the output has the input's dtype. When the input's strides cannot express
 * the view (reshaping a transposed matrix), it sets *needs_contiguous = 1 and returns DLOP_OK:
 * the host then passes a C-contiguous copy of the input and calls make_view again, and on a
 * C-contiguous input make_view must succeed. The host checks that the view stays inside the
 * input's memory. Pure, like infer_shape: the same arguments give the same view. */
typedef struct dlop_view_args {
  uint32_t struct_size;
  uint32_t reserved;
  const struct dlop_op_desc *op;
  const dlop_param_value *params; /* op->num_params values, declaration order */
  int32_t num_params;
  int32_t output_index; /* which output (0..num_outputs-1) */
  int32_t input_index;  /* op->view_map[output_index] */
  int32_t reserved2;
  const dlop_tensor *input;     /* the viewed input's layout, at run time */
  const dlop_type *output;      /* make_node's dtype and ndim, infer_shape's concrete shape */
  int64_t *output_strides;      /* to fill: output->ndim strides, in elements */
  uint64_t *output_byte_offset; /* to fill: bytes from input->data to the output's element 0 */
  int32_t *needs_contiguous;    /* 0 on entry; set to 1 to ask for a C-contiguous input */
  int32_t reserved3;
  char *error;
  size_t error_size;
} dlop_view_args;

/* Arguments of scalar_body (ABI 1.2), the stage of elementwise ops that fusion may inline:
 * given a node's types and parameters (as make_node saw them), the op says in a few C
 * statements what it computes on one element, so that the host can put the node into a
 * generated kernel with its neighbours (whoever wrote them) instead of calling its thunk.
 * Such an op is elementwise with NumPy broadcasting: every output has the broadcast shape of
 * the inputs, and element k of an output depends on element k of each (broadcast) input only
 * (the host checks the shapes at run time). The code is C99 that a C compiler and NVRTC both accept: it reads in0 .. in{m-1} and
 * assigns out0 .. out{n-1}, local variables of the compute dtypes the op reports (the host
 * loads each input from its storage dtype into its compute dtype before the code, and stores
 * each output from its compute dtype into the output's dtype after it: float16 and bfloat16
 * are usually computed in float32). Parameter values are known here: embed them as literals.
 * The code may call what the prelude defines (functions declared DLOP_SCALAR_FN, macros) and
 * what the host's own prelude offers on both targets: the <stdint.h> integer types, the
 * <math.h> functions of float and double, the macros DLOP_SCALAR_FN and DLOP_SCALAR_CUDA (set
 * under NVRTC only), and the conversions listed in docs/abi.md. Contract: on every dtype the op
 * declares, the code computes exactly what the op's own kernels compute — bit for bit where
 * flags has DLOP_SCALAR_BODY_EXACT, within the op's documented tolerance otherwise — and
 * dlop check holds it to that. Pure, like infer_shape. Return DLOP_UNSUPPORTED (with a
 * message) for types the op does not fuse: the node then runs its own thunk. */
enum {
  /* The code gives the bits of the op's own kernels (no math library function involved); a
   * NaN result is a NaN, its payload may differ, as dlop check compares NaNs. */
  DLOP_SCALAR_BODY_EXACT = 1u << 0
};
typedef struct dlop_scalar_body_args {
  uint32_t struct_size;
  uint32_t reserved;
  const struct dlop_op_desc *op;
  const dlop_param_value *params; /* op->num_params values, declaration order */
  int32_t num_params;
  int32_t num_inputs;
  const dlop_type *inputs;  /* make_node's input types */
  const dlop_type *outputs; /* make_node's output types */
  int32_t num_outputs;
  uint32_t flags; /* to fill: DLOP_SCALAR_BODY_* */
  /* to fill: the statements, either a string of static storage or written into code_buffer
   * (code_buffer_size bytes, host-owned) with code pointing at it */
  const char *code;
  char *code_buffer;
  size_t code_buffer_size;
  /* to fill, or leave NULL: definitions the code calls, static storage. prelude_name names the
   * content ("elemwise.scalar.1"): the host emits one prelude per name in a generated kernel,
   * so two preludes of one name must be identical, and a changed prelude needs a new name. */
  const char *prelude;
  const char *prelude_name;
  /* to fill: the dtype (dlop_dtype) each input is loaded as and each output is computed in;
   * the host preset both to the storage dtypes */
  int32_t *input_compute_dtypes;
  int32_t *output_compute_dtypes;
  char *error;
  size_t error_size;
} dlop_scalar_body_args;

/* Arguments of reduce_body (ABI 1.2), the stage of reductions that fusion may feed from a group:
 * given a node's types and parameters (as make_node saw them), the op says how it reduces, so
 * that the host can evaluate the fused group that computes the op's input element by element
 * inside the reduction's kernel, with no intermediate buffer. Such an op has one input and one
 * output; it reduces the input axes in `axes` (the output keeps the others in order, and the
 * reduced ones with size 1 when keepdims is 1). Each output element is finalize(acc), where
 * acc is identity combined with every element of its reduction, each loaded from the input's
 * dtype into the accumulator dtype by the host (the same dtype, float16 or bfloat16 as float32,
 * an integer or bool as int64). The host combines in any order and grouping (lanes, trees,
 * threads, blocks): combine must be associative and commutative and identity its neutral
 * element, exactly for integer accumulators and for selections such as max and min (a zero's
 * sign and a NaN's payload aside), up to rounding for floating-point sums. combine reads in0
 * and in1 and assigns out0, all of the accumulator's C type; finalize reads in0 (the
 * accumulator) and count (int64_t: the elements reduced into this output, 0 for an empty
 * reduction) and assigns out0 of the output compute dtype, which the host stores into the
 * output's dtype (float32 into float16 or bfloat16, else the same dtype). The code is what
 * scalar bodies may use (docs/abi.md, "Reduction bodies"). Contract: the results are the op's
 * own kernels' within its documented tolerance (values of integer sums, max and min exactly).
 * Pure, like infer_shape. Return DLOP_UNSUPPORTED (with a message) for types or parameters the
 * op does not fuse: the node then reads its input from memory with its own thunk. */
typedef struct dlop_reduce_body_args {
  uint32_t struct_size;
  uint32_t reserved;
  const struct dlop_op_desc *op;
  const dlop_param_value *params; /* op->num_params values, declaration order */
  int32_t num_params;
  int32_t reserved2;
  const dlop_type *input;  /* make_node's input type */
  const dlop_type *output; /* make_node's output type */
  /* to fill: bit d set when input axis d is reduced (d < input->ndim) */
  uint32_t axes;
  int32_t keepdims; /* to fill: 1 when reduced axes stay with size 1, 0 when they are dropped */
  /* to fill: the accumulator's dtype (preset to the input's) and the dtype finalize computes
   * the output in (preset to the output's) */
  int32_t accumulator_dtype;
  int32_t output_compute_dtype;
  uint64_t identity; /* to fill: the accumulator's identity as its bits, zero-extended */
  /* to fill: the statements, each a string of static storage or written into code_buffer
   * (code_buffer_size bytes, host-owned) */
  const char *combine;
  const char *finalize;
  char *code_buffer;
  size_t code_buffer_size;
  /* to fill, or leave NULL: as dlop_scalar_body_args' */
  const char *prelude;
  const char *prelude_name;
  char *error;
  size_t error_size;
} dlop_reduce_body_args;
/* Arguments of runtime_info (ABI 1.2): what only run time knows about how the op runs on a
 * device in this process (the library a CPU kernel calls and its version, the kernel set it
 * picked for this CPU, its thread count), for `dlop info` and dlop.info(). The op writes lines
 * of "key: value" into text; it may do the work its first thunk would do to find out (load a
 * library), and must not fail when it can report why it cannot run (say so in a line).
 * Return DLOP_UNSUPPORTED (with a message) for a device it has nothing to say about. */
typedef struct dlop_runtime_info_args {
  uint32_t struct_size;
  int32_t device_type; /* dlop_device_type */
  const struct dlop_op_desc *op;
  char *text; /* to fill: NUL-terminated, text_size bytes, host-owned */
  size_t text_size;
  char *error;
  size_t error_size;
} dlop_runtime_info_args;

typedef int (*dlop_make_node_fn)(const dlop_node_args *args);
typedef int (*dlop_infer_shape_fn)(const dlop_node_args *args);
typedef int (*dlop_make_thunk_fn)(const dlop_thunk_args *args);
typedef int (*dlop_make_view_fn)(const dlop_view_args *args);
/* Not const, unlike the other stages: the stage fills fields of its arguments (code, flags,
 * prelude, prelude_name), not only memory they point to. */
typedef int (*dlop_scalar_body_fn)(dlop_scalar_body_args *args);
/* Not const either: the stage fills fields of its arguments. */
typedef int (*dlop_reduce_body_fn)(dlop_reduce_body_args *args);
typedef int (*dlop_runtime_info_fn)(const dlop_runtime_info_args *args);

/* ---- the op descriptor ----------------------------------------------------------------- */

/* Number of inputs when an op takes any number (num_inputs = DLOP_VARIADIC). */
#define DLOP_VARIADIC (-1)

typedef struct dlop_op_desc {
  uint32_t struct_size; /* sizeof(dlop_op_desc) as the plugin was compiled */
  uint32_t flags;       /* DLOP_OP_* */
  const char *name;     /* [A-Za-z_][A-Za-z0-9_]*, unique among all loaded ops */
  const char *doc;
  int32_t num_inputs; /* or DLOP_VARIADIC */
  int32_t num_outputs;
  const dlop_param_decl *params;
  int32_t num_params;
  /* Dtypes the op accepts on each device (DLOP_DTYPE_BIT masks). 0 = device not supported. */
  uint32_t cpu_dtypes;
  uint32_t cuda_dtypes;
  uint32_t reserved;
  /* Per output: index of an input it may overwrite, or -1. NULL when none. When
   * inplace_map[o] = i, the host MAY pass input i's memory as output o (same dtype and same
   * shape as that output, C-contiguous or otherwise an identical layout); it need not. The thunk
   * must be correct both when they alias and when they do not (element k of the output may only
   * depend on element k of input i, or read all it needs before writing). The function runner
   * reuses input i only when it is an intermediate of the function (never a function input,
   * constant or output) whose last reader is this node, read once by it, and, at run time, of
   * the output's dtype and concrete shape, C-contiguous and held by no other value. Entries
   * outside 0..num_inputs-1 of a node mean no reuse. */
  const int32_t *inplace_map;
  /* Per output: index of the input it is a view of (ABI 1.1). NULL for ops whose thunk
   * computes every output. When set, every entry must name an input (0..num_inputs-1), the
   * op must set make_view (below) and may leave make_thunk NULL: the host runs no kernel and
   * allocates nothing for the node, it asks make_view for the output's strides and byte
   * offset over the input's memory. ABI 1.0 hosts refuse such an op (the last 1.0 release)
   * or ignore view_map and need make_thunk (earlier ones). */
  const int32_t *view_map;
  dlop_make_node_fn make_node;
  dlop_infer_shape_fn infer_shape;
  dlop_make_thunk_fn make_thunk;
  void *op_data; /* the plugin's own pointer, untouched by the host */
  /* ---- since ABI 1.1 ---- */
  dlop_make_view_fn make_view; /* for ops with a view_map; NULL otherwise */
  /* ---- since ABI 1.2 ---- */
  dlop_scalar_body_fn scalar_body; /* elementwise ops that fusion may inline; NULL otherwise */
  /* reductions that may take a fused group as their input stage; NULL otherwise. Appended to
   * ABI 1.2 after scalar_body: descriptors that end before it read as NULL. */
  dlop_reduce_body_fn reduce_body;
  /* run-time facts for dlop info; NULL: none. Appended after reduce_body. */
  dlop_runtime_info_fn runtime_info;
} dlop_op_desc;

#ifdef __cplusplus
}
#endif

#endif
