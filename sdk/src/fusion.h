/* fusion.h — elementwise fusion inside a compiled function: which nodes form a group
 * (fusion_plan.c), what a group reads, computes and writes (fusion_group.c), the kernel source
 * generated for it (fusion_source.c, C or CUDA), its node in the schedule: a host-made op and
 * thunk (fusion_thunk.c, over the N-operand layout of fusion_layout.c), and the pass of the
 * function compiler that puts it all together (function_fuse.c). Not part of the public ABI. */
#ifndef DLOP_FUSION_H
#define DLOP_FUSION_H

#include <stddef.h>
#include <stdint.h>

#include "function_internal.h"

/* A group's kernel takes at most this many tensors (its inputs and outputs): every pointer and,
 * on CUDA, its strides go into the kernel's parameters (under 2.2 KB of the 4 KB allowed). */
#define DLOP__FUSION_MAX_OPERANDS 16
/* Nodes per group: bounds the generated source and its compile time. */
#define DLOP__FUSION_MAX_MEMBERS 128
/* The code buffer a scalar body may write into. */
#define DLOP__FUSION_CODE_SIZE 4096
/* Run-time parameter values per group (each 8 bytes of the CUDA kernels' parameters, beside
 * the pointers and the strided layout); members past it get theirs written into the code. */
#define DLOP__FUSION_MAX_PARAMS 64
/* A scalar_body flag only the host's own ops set (ops from source, source_elementwise.c): the
 * code reads parameter k from dlop_p<k> (double for a float parameter, int64_t for an int),
 * which the host declares, so that new values reuse the compiled kernel. */
#define DLOP__SCALAR_BODY_RUNTIME_PARAMS (1u << 30)

typedef enum dlop__fusion_target {
  DLOP__FUSION_TARGET_C = 0,   /* the host's C compiler (dlop__c_compile) */
  DLOP__FUSION_TARGET_CUDA = 1 /* NVRTC (dlop__cuda_compile_module / dlop__nvrtc_compile) */
} dlop__fusion_target;

/* Where a member's input comes from inside the kernel. */
typedef enum dlop__fusion_source_kind {
  DLOP__FUSION_FROM_INPUT = 0,  /* the group's input `index` (a tensor the kernel is given) */
  DLOP__FUSION_FROM_VALUE = 1,  /* value `index`: an output of an earlier member */
  DLOP__FUSION_FROM_LITERAL = 2 /* literal `index`: a one-element constant, written into the code */
} dlop__fusion_source_kind;

typedef struct dlop__fusion_source {
  int32_t kind; /* dlop__fusion_source_kind */
  int32_t index;
} dlop__fusion_source;

/* A one-element constant of the function, embedded in the kernel as its bits. */
typedef struct dlop__fusion_literal {
  int32_t slot;
  int32_t dtype;
  uint64_t bits;  /* the element's storage bits, zero-extended */
  dlop_type type; /* the constant's type (its shape has one element) */
} dlop__fusion_literal;

/* A node of the group: the node as compiled (owned: op, params, slots, static types), its
 * scalar body and how its operands connect. */
typedef struct dlop__fusion_member {
  dlop__function_node node;
  char *code;                 /* the body's statements (owned copy) */
  const char *prelude;        /* the plugin's text, or NULL */
  const char *prelude_name;   /* NULL when prelude is */
  uint32_t body_flags;        /* DLOP_SCALAR_BODY_* */
  int32_t *input_compute;     /* per input: the dtype the body reads it as */
  int32_t *output_compute;    /* per output: the dtype the body computes it in */
  dlop__fusion_source *sources; /* per input */
  int32_t *values;            /* per output: its value index */
  int32_t runtime_params;     /* the code reads its parameters from dlop_p<k> */
  int32_t param_base;         /* its parameter k is the group's run-time value param_base + k,
                                 or -1: the values are written into the code */
} dlop__fusion_member;

/* A reduction that takes a group as its input stage (fusion_reduce.c): the reduce node as
 * compiled (owned: op, params, slots, static types) and its reduction body (owned copies), and
 * the group's value it reduces. Its axes are every axis or the trailing ones (what the kernels
 * cover); the group evaluates its members per element of the reduction's input. */
typedef struct dlop__fusion_reduction {
  dlop__function_node node;
  uint32_t axes; /* bit d: input axis d is reduced (the last popcount(axes) axes) */
  int32_t keepdims;
  int32_t accumulator;    /* the accumulator's dtype */
  int32_t output_compute; /* the dtype finalize computes the output in */
  uint64_t identity;      /* the accumulator's identity, its bits */
  char *combine;          /* the statements (owned copies) */
  char *finalize;
  const char *prelude;      /* the plugin's text, or NULL */
  const char *prelude_name; /* NULL when prelude is */
  int32_t value;            /* the group's value that is the reduction's input */
} dlop__fusion_reduction;

/* A row group (fusion_row.c): reductions over the last axis with keepdims and the elementwise
 * nodes around them over the same rows, in one kernel that reads each row of its inputs once.
 * Rows are the last axis of `ndim`-dimensional values; a value is either row-varying (it steps
 * along the row) or per-row (one element per row: a reduction's result, what is computed from
 * such results alone). The kernel runs the reductions one after another over the row (each a
 * fixed tree), then writes the outputs. */
#define DLOP__FUSION_ROW_LIMIT 16384 /* a row kept on chip: CUDA keeps up to this many elements */
typedef struct dlop__fusion_row_reduction {
  dlop__fusion_reduction body; /* a copy of the node, its reduction body (value unused) */
  dlop__fusion_source input;   /* where its input comes from (an input or a member's value) */
  int32_t value;               /* the group's value that is its result */
} dlop__fusion_row_reduction;

typedef struct dlop__fusion_row {
  int32_t ndim;          /* rank of the rows' values */
  int64_t length;        /* the row's static length, or DLOP_DIM_UNKNOWN */
  int32_t num_reductions;
  dlop__fusion_row_reduction *reductions; /* in schedule order */
  int32_t num_steps;
  int32_t *steps;      /* the schedule: a member m >= 0, or reduction -1 - r */
  char *value_per_row; /* per value */
  char *input_per_row; /* per input: its last dim is 1 (or it has fewer dims, or one element) */
  /* Values that more than one phase reads and whose body calls math functions are kept
   * (computed once, as the unfused node's buffer would hold them): cached[v]; on the CPU in a
   * buffer of the row, with what they take per element of it (each buffer 64-byte aligned), on
   * CUDA in registers where they fit */
  char *cached;
  int32_t num_cached;
  int64_t scratch_bytes;
} dlop__fusion_row;
#define DLOP__FUSION_ROW_MAX_VALUES 512 /* a row group's values: members' and reductions' */

struct dlop__fusion_group {
  int32_t number; /* 0, 1, ... in the function: "group 0" in explain, dlop_fused_g0_* symbols */
  int32_t num_members;
  dlop__fusion_member *members; /* in schedule order (topological) */
  /* values: every member output, in the kernel held in its storage dtype (rounded as the
   * unfused node's buffer would be) */
  int32_t num_values;
  int32_t *value_slots;
  /* inputs: the tensors the kernel reads (function inputs, constants, other nodes' outputs,
   * views); scalar ones (a static shape of one element) are read once per run of the kernel */
  int32_t num_inputs;
  int32_t *input_slots;
  dlop_type *input_types;
  char *input_scalar;
  int32_t num_literals;
  dlop__fusion_literal *literals;
  /* run-time parameter values (members' runtime_params): kernel arguments, so that the source,
   * hence the compiled module, does not depend on them. kind: DLOP_PARAM_FLOAT or _INT. */
  int32_t num_params;
  int32_t param_kinds[DLOP__FUSION_MAX_PARAMS];
  uint64_t param_bits[DLOP__FUSION_MAX_PARAMS];
  /* outputs: the values read outside the group (later nodes, function outputs) */
  int32_t num_outputs;
  int32_t *output_slots;
  dlop_type *output_types;
  int32_t *output_values;
  /* 1 when the outputs' static shapes do not prove them equal: the kernel source then also
   * has one function per output, for runs whose output shapes differ */
  int per_output;
  /* A reduction group: the members are the reduction's input stage, evaluated per element of
   * its input and reduced without an intermediate buffer; its one output is the reduction's
   * (output_values[0] is -1: no member's value is written). NULL for an elementwise group. */
  dlop__fusion_reduction *reduction;
  /* A row group: members are its elementwise nodes, row->reductions its reductions, values
   * both's results; NULL for any other group. */
  dlop__fusion_row *row;
  /* what the kernel became (function_fuse.c): the node's op and its thunk state */
  dlop_op_desc op;
  char op_name[32];
  dlop__fusion_target target;
  uint64_t source_hash; /* FNV-1a of the generated source, shown by explain */
  int32_t vector_width; /* CUDA: elements of one pack of the vector kernel (16 bytes of the widest operand) */
  int32_t packs_per_thread; /* CUDA: packs a thread loads before it computes, a grid apart
                             * (a block apart in the chunk form) */
  int32_t chunk_block;  /* CUDA: 0, or the threads of a block of the vector kernel's chunk form */
  void *module;         /* the function's dlop__c_module or CUDA module (not the group's) */
  void *functions[DLOP__FUSION_MAX_OPERANDS + 8]; /* the symbols the thunk calls */
  dlop_device device;
  uint32_t max_blocks; /* CUDA: the strided kernels' grid cap */
};

/* ---- planning (fusion_plan.c) ----------------------------------------------------------- */

/* Groups the fusable nodes of the function's schedule (fusable[n] nonzero): each node joins
 * the groups of the nodes that produce its inputs when the union stays convex (no path leaves
 * it and comes back through another node) and within the operand and member limits. Writes
 * group_of[n] (a group number, or -1 for nodes left alone: not fusable, or a group of one) and
 * *num_groups. Pure: the schedule is not changed. */
int dlop__fusion_plan(const dlop_function *function, const char *fusable, int32_t *group_of,
                      int32_t *num_groups);

/* ---- groups (fusion_group.c) ------------------------------------------------------------ */

/* The scalar body of node n for the function's static types: DLOP_OK with the body in *member
 * (code copied, compute dtypes checked: each a storage dtype, or float32 for a float16 or
 * bfloat16 storage), DLOP_UNSUPPORTED when the op does not fuse these types (not an error),
 * or DLOP_PLUGIN_ERROR for a body the host cannot use, naming the op and what was wrong. */
int dlop__fusion_query_body(const dlop__function_node *node, dlop__fusion_member *member);
/* Builds group number `number` from the nodes n with group_of[n] == number, whose bodies
 * members_of_node[n] holds (moved into the group): values, inputs (one-element constants
 * become literals, their values read now), outputs (what the rest of the function reads). */
int dlop__fusion_group_build(const dlop_function *function, const int32_t *group_of,
                             int32_t number, dlop__fusion_member *members_of_node,
                             dlop__fusion_group **group);
void dlop__fusion_group_free(dlop__fusion_group *group);
/* Frees what a member owns (its body and node), for members never moved into a group. */
void dlop__fusion_member_free(dlop__fusion_member *member);
/* A zeroed group with room for members, their reads (inputs, literals) and writes (values,
 * outputs); NULL when out of memory. */
dlop__fusion_group *dlop__fusion_group_alloc(int32_t members, int32_t reads, int32_t writes);
/* Where each member's inputs come from (earlier members' values, one-element constants as
 * literals, the group's inputs) and the values its outputs become; value_of_slot[slot] is -1
 * on entry for every slot and is filled with each value's index. */
int dlop__fusion_connect_sources(const dlop_function *function, dlop__fusion_group *group,
                                 int32_t *value_of_slot);

/* ---- reductions (fusion_reduce.c) -------------------------------------------------------- */

/* The reduction body of node n (its op has reduce_body) for the function's static types:
 * DLOP_OK with the body in *reduction (codes copied; checked: code given and terminated, a
 * prelude named, an accumulator and output compute dtype the host converts, axes within the
 * input's rank and agreeing with make_node's output rank), DLOP_UNSUPPORTED when the op does
 * not fuse these types, or DLOP_PLUGIN_ERROR naming the op and what was wrong. */
int dlop__fusion_query_reduction(const dlop__function_node *node,
                                 dlop__fusion_reduction *reduction);
/* Frees what a reduction owns: its codes, its node's arrays, and itself. */
void dlop__fusion_reduction_free(dlop__fusion_reduction *reduction);
/* The input stage of node r (a reduction whose body is *reduction): in_stage[n] set for the
 * fusable nodes whose values its kernel computes per element (the cone of fusable nodes its
 * input comes from, within the operand and member limits; they stay in the schedule for
 * whoever else reads them). On the CPU (the function's device), a node that others read too
 * and whose body is not exact (it calls math functions: bodies[n].body_flags) is left out, its
 * value read as a tensor: computing it twice would cost more than reading it back; on CUDA,
 * where memory is what costs, it is computed twice. When there is no stage, why says why in a
 * phrase for explain, or is empty when no fusable node feeds the reduction (nothing to say).
 * DLOP_OUT_OF_MEMORY is the only error. */
int dlop__fusion_reduction_stage(const dlop_function *function, const char *fusable,
                                 const dlop__fusion_member *bodies, int32_t r,
                                 const dlop__fusion_reduction *reduction, char *in_stage, char *why,
                                 size_t why_size);
/* Whether a fusable node computes node r's (first) input. */
int dlop__fusion_input_is_fusable(const dlop_function *function, const char *fusable, int32_t r);
/* Builds reduction group `number` of node r: copies of the stage's nodes and bodies
 * (bodies[n] for node n: they may also join an elementwise group), the reduction moved in
 * (*reduction is left zeroed; its node is function->nodes[r], which the caller's schedule no
 * longer holds once the group replaces it), its inputs, and its one output: r's. */
int dlop__fusion_reduction_group_build(const dlop_function *function, const char *in_stage,
                                       const dlop__fusion_member *bodies, int32_t r,
                                       dlop__fusion_reduction *reduction, int32_t number,
                                       dlop__fusion_group **group);

/* A deep copy of a compiled node's description (op, params, slots, static types; no thunk),
 * and of a member's body (its code and compute dtypes; sources and values are the group's, its
 * run-time parameters written into the code). DLOP_OUT_OF_MEMORY leaves what was copied to
 * free. */
int dlop__fusion_copy_node(const dlop__function_node *from, dlop__function_node *to);
int dlop__fusion_copy_body(const dlop__fusion_member *from, const dlop__function_node *node,
                           dlop__fusion_member *to);
/* The group's input reading slot (added when new), and the literal of a one-element constant
 * slot (read now); fusion_group.c. */
int32_t dlop__fusion_group_add_input(const dlop_function *function, dlop__fusion_group *group,
                                     int32_t slot);
int dlop__fusion_group_add_literal(const dlop_function *function, dlop__fusion_group *group,
                                   int32_t slot, int32_t *index);

/* ---- row groups (fusion_row.c) --------------------------------------------------------- */

/* Chooses the row groups of the schedule and builds them (copies of their nodes and bodies:
 * bodies[n] for fusable node n, reductions[n] for a reduction node whose body was queried,
 * reducible[n]), numbered from 0: row_of[n] is the group of node n or -1; *groups gets
 * *num_groups groups (malloc'ed array). Reductions that could lead a row group but do not get a
 * fusion_note saying why. DLOP_OUT_OF_MEMORY is the only error. */
int dlop__fusion_row_groups(dlop_function *function, const char *fusable,
                            const dlop__fusion_member *bodies, const char *reducible,
                            const dlop__fusion_reduction *reductions, int32_t *row_of,
                            dlop__fusion_group ***groups, int32_t *num_groups);
void dlop__fusion_row_free(dlop__fusion_row *row);
/* The row group's output shapes for its inputs' (every value's shape from its members' and
 * reductions' own rules, checked to be the rows' full shape or its per-row one). */
int dlop__fusion_row_infer_shape(const dlop__fusion_group *group, const dlop_node_args *args);
/* The thunk of a row group (fusion_row_thunk.c). */
void dlop__fusion_row_thunk(dlop__fusion_group *group, dlop_thunk *thunk);
/* CUDA: the row kernels' threads per block, and how many packs of the vector width a thread
 * keeps per row input at most (the kernels dlop_fused_g<N>_row<R> for R = 1, 2, 4, ... up to
 * it, and dlop_fused_g<N>_row0, which reads rows longer than that again in every phase). */
#define DLOP__FUSION_ROW_THREADS 512
int32_t dlop__fusion_row_max_packs(const dlop__fusion_group *group);
/* CUDA: the registers' bytes per thread (16-bit values counted as 4) that the values a row
 * kernel keeps (below) may take; kernels of more packs compute them again in each phase. The
 * kernels that keep them are built for two blocks per SM (64 registers a thread): ptxas fits a
 * float32 row of 8192 (16 inputs and 16 kept values a thread) in them without spilling, not one
 * of 16384. */
#define DLOP__FUSION_ROW_KEPT_BYTES 64
/* What the CUDA row kernels generated from now on take as that bound: DLOP__FUSION_ROW_KEPT_BYTES,
 * which tests set to 0 (no value kept) to compare the kernels' bits with and without kept
 * values. Read when a function is compiled: set it before, from one thread. */
extern int32_t dlop__fusion_row_kept_bytes;
/* Chooses the values a row kernel keeps instead of computing them again in a later phase: the
 * CPU's in the row's buffers, CUDA's in registers (fusion_row_source.c). */
void dlop__fusion_row_plan_buffers(dlop__fusion_group *group);

/* ---- source (fusion_source.c) ----------------------------------------------------------- */

/* The source of one module holding the kernels of groups[0..count) for target, malloc'ed into
 * *source: the host's prelude, each op prelude once per name, then per group its element
 * function(s) and entry points. C: void dlop_fused_g<N>_run(char *const *p, const int64_t *s,
 * int64_t n), a run of n elements, p and s the operands' pointers and strides (outputs first,
 * then inputs), and dlop_fused_g<N>_out<K>_run for output K alone when per_output is set.
 * CUDA: extern "C" kernels dlop_fused_g<N>_{contiguous,vector,strided32,strided64} and
 * dlop_fused_g<N>_out<K>_strided64 (fusion_thunk.c launches them). */
int dlop__fusion_generate(const dlop_function *function, dlop__fusion_group *const *groups,
                        int32_t count, dlop__fusion_target target, char **source);
/* Which inputs output `output` of the group depends on: used[k] for input k. */
void dlop__fusion_output_inputs(const dlop__fusion_group *group, int32_t output, char *used);
/* FNV-1a of text, for explain's "source 3fa2c1d0...". */
uint64_t dlop__fusion_hash(const char *text);

/* ---- layout (fusion_layout.c) ----------------------------------------------------------- */

/* The loop a run of a group's kernel walks: the iteration shape with its dims of size 1
 * dropped and dims every operand steps through contiguously merged, and per operand its
 * strides in elements (an unused or scalar operand: all 0) and its first element. */
typedef struct dlop__fusion_layout {
  int32_t ndim; /* >= 1 */
  int32_t num_operands;
  int64_t numel;
  int64_t shape[DLOP_MAX_NDIM];
  int64_t strides[DLOP__FUSION_MAX_OPERANDS][DLOP_MAX_NDIM];
  char *base[DLOP__FUSION_MAX_OPERANDS];
  int64_t element_size[DLOP__FUSION_MAX_OPERANDS];
} dlop__fusion_layout;

/* Sets up the loop over shape (ndim dims) for operands tensors[0..count): each broadcast to
 * shape (NumPy rules) unless its flag in flat[] is set (a scalar, or an operand this run does
 * not read: strides 0, its first element only). DLOP_SHAPE_ERROR when an operand does not
 * broadcast, naming it by its number after what. */
int dlop__fusion_layout_init(dlop__fusion_layout *layout, const int64_t *shape, int32_t ndim,
                             const dlop_tensor *const *tensors, const char *flat, int32_t count,
                             const char *what);
/* True when every operand not flat walks the single collapsed dim with unit stride. */
int dlop__fusion_layout_contiguous(const dlop__fusion_layout *layout, const char *flat);

/* The loop of a fused reduction's run (fusion_reduce_layout.c): the iteration shape (the
 * reduction's input shape) as its leading kept dims (one per output element) then its trailing
 * reduced dims, each list with dims of size 1 dropped and dims every operand steps through as
 * one run merged (never a kept dim with a reduced one), at least one dim in each list (of size
 * 1 and stride 0 when there is none). Per input its strides (an unused or scalar input: all 0),
 * the output's strides over the kept dims, in elements. */
#define DLOP__FUSION_REDUCE_DIMS (DLOP_MAX_NDIM + 1) /* a padding dim may join 16 real ones */
typedef struct dlop__fusion_reduce_layout {
  int32_t kept_ndim, reduced_ndim; /* dims [0, kept_ndim) kept, then reduced_ndim reduced ones */
  int32_t num_inputs;
  int64_t outputs; /* the product of the kept dims */
  int64_t count;   /* the product of the reduced dims: elements reduced into each output */
  int64_t shape[DLOP__FUSION_REDUCE_DIMS];
  int64_t strides[DLOP__FUSION_MAX_OPERANDS][DLOP__FUSION_REDUCE_DIMS];
  int64_t output_strides[DLOP__FUSION_REDUCE_DIMS];
  char *base[DLOP__FUSION_MAX_OPERANDS];
  int64_t element_size[DLOP__FUSION_MAX_OPERANDS];
  char *output_base;
  int64_t output_element_size;
} dlop__fusion_reduce_layout;

/* The iteration shape of a reduction group's run: the broadcast (NumPy rules) of its inputs'
 * shapes and its literals' static ones. DLOP_SHAPE_ERROR when they do not broadcast. */
int dlop__fusion_reduce_shape(const dlop__fusion_group *group, const dlop_tensor *inputs,
                              int64_t *shape, int32_t *ndim);
/* Sets up the loop over shape (ndim dims, the last `reduced` of them reduced) for the inputs
 * (broadcast to shape unless flat[k]: a scalar) and the output (its first ndim - reduced dims are
 * the kept ones). DLOP_SHAPE_ERROR when an input does not broadcast or the output's kept dims
 * differ from shape's. */
int dlop__fusion_reduce_layout_init(dlop__fusion_reduce_layout *layout, const int64_t *shape,
                                    int32_t ndim, int32_t reduced, const dlop_tensor *inputs,
                                    const char *flat, int32_t count, const dlop_tensor *output);

/* ---- the node (fusion_thunk.c) ---------------------------------------------------------- */

/* Fills group->op: a host-owned descriptor the runner treats as any op's (name "fused", the
 * group's input and output counts, its members' flags in common, the group's infer_shape),
 * with op_data pointing at the group. */
void dlop__fusion_group_describe(dlop__fusion_group *group);
/* The thunk of a group whose module is loaded (group->module and group->functions set): run
 * launches the kernels on the device. The module belongs to the function. */
void dlop__fusion_group_thunk(dlop__fusion_group *group, dlop_thunk *thunk);
/* The thunk of a reduction group (fusion_reduce_thunk.c): dlop__fusion_group_thunk's for a
 * group with a reduction. On CUDA it takes a workspace for its partials. */
void dlop__fusion_reduction_thunk(dlop__fusion_group *group, dlop_thunk *thunk);
/* The group of a fused node's op, or NULL for any other op. */
dlop__fusion_group *dlop__fusion_group_of(const dlop_op_desc *op);

/* ---- reductions in the pass (function_fuse_reduce.c) ------------------------------------- */

/* What the first step of the pass changed, so that the rest can keep it or undo it. */
typedef struct dlop__reduction_pass {
  dlop__function_node *old_nodes; /* the schedule before, or NULL when nothing changed */
  int32_t old_count;
  char *dropped;      /* per old node: left out of the new schedule */
  int32_t num_groups; /* reduction groups 0 .. num_groups-1 */
  dlop__fusion_group **groups;
  int32_t declared; /* nodes whose op declares a reduction body */
} dlop__reduction_pass;

/* Each reduction node whose input fusable nodes compute (fusable[n], their bodies members[n])
 * gets a group of them as its input stage and is replaced in the schedule by its fused node;
 * the stage's nodes that nothing else reads any more are left out. fusable and members are
 * compacted to the new schedule; reductions left as they are get a fusion_note saying why
 * when a group computes their input. The new schedule is topological and pass remembers the
 * old one. */
int dlop__function_fuse_reductions(dlop_function *function, char *fusable,
                                   dlop__fusion_member *members, dlop__reduction_pass *pass);
/* Puts the old schedule back (the module did not compile, fusion is unavailable, an error):
 * the fused nodes and their groups are freed, the nodes they replaced belong to the schedule
 * again. */
void dlop__reduction_pass_undo(dlop_function *function, dlop__reduction_pass *pass);
/* Keeps the new schedule: frees the nodes left out and the old array. */
void dlop__reduction_pass_keep(dlop__reduction_pass *pass);

/* ---- the pass (function_fuse.c) --------------------------------------------------------- */

/* The options the pass compiles CUDA sources with (NVRTC); the tests compile with them too. */
extern const char *const dlop__fusion_nvrtc_options[];
extern const int32_t dlop__fusion_nvrtc_option_count;

/* Fills a built group's host-made descriptor (dlop__fusion_group_describe) and what its kernel
 * is compiled for: the target of device (C on the CPU, CUDA), the device and, on CUDA, the
 * vector kernel's elements per thread. */
void dlop__fusion_group_prepare(dlop__fusion_group *group, dlop_device device);

/* The conversions the host emits around a body or a reduction's finalize: none, or
 * float16/bfloat16 storage to and from float32 (fusion_group.c). */
int dlop__fusion_conversion_allowed(int32_t storage, int32_t compute);

/* A function constant of one element, which a kernel's code holds as a literal (fusion_plan.c). */
int dlop__fusion_is_literal_slot(const dlop_function *function, int32_t slot);
/* Compiles source (dlop__fusion_generate's for groups[0..count)) with function->device's
 * compiler and fusion's options (the host's C compiler, or NVRTC for the device's
 * architecture), keeps the module in function->fusion_module (dlop__function_release_fusion
 * releases it, after a failure too) and points each group at its entry points. A status with what
 * failed in error (the compiler's log for a source it rejects). */
int dlop__fusion_compile_module(dlop_function *function, dlop__fusion_group *const *groups,
                                int32_t count, const char *source, char *error,
                                size_t error_size);

/* Fuses what it can of the function's schedule for device (after constants are placed, before
 * make_thunk): a fused node per group replaces its members, the schedule is put back in a
 * topological order, and function->fusion_note says what happened (off, unavailable and why,
 * or what was fused). With enabled 0, or when the device's compiler is missing or fails, the
 * schedule is unchanged and the note says so: never an error. Errors are a plugin's bad
 * scalar body and running out of memory. */
int dlop__function_fuse(dlop_function *function, int enabled);
/* The source of the function's fused groups regenerated for target (malloc'ed into *source),
 * whatever device the function runs on: the CUDA source of a CPU function compiles with
 * NVRTC where no GPU is (the tests do). DLOP_NOT_FOUND when nothing was fused. */
int dlop__function_fused_source(const dlop_function *function, dlop__fusion_target target,
                                char **source);
/* Makes node the fused node of group (schedule index unset): the group's op, inputs and outputs
 * (allocated), the thunk of its kernel, node->fused = group. DLOP_OUT_OF_MEMORY leaves nothing
 * allocated. */
int dlop__function_fused_node(dlop__fusion_group *group, dlop__function_node *node);
/* Frees a fused node's group (its members and descriptor). */
void dlop__function_free_fused(dlop__function_node *node);
/* Releases the function's module of fused kernels, after the fused nodes' last run. */
void dlop__function_release_fusion(dlop_function *function);

#endif
