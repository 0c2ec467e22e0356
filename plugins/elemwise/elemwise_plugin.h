/* elemwise_plugin.h — declarations shared by the files of the elemwise plugin (elementwise
 * algebra with NumPy broadcasting): the ops and their specs for the SDK's elementwise thunk,
 * the CPU kernel tables, the stages. Hidden visibility: the plugin exports only dlop_plugin_init. */
#ifndef DLOP_ELEMWISE_PLUGIN_H
#define DLOP_ELEMWISE_PLUGIN_H

#include <dlop/kit/elementwise.h>

#define ELEMWISE_NUMERIC (DLOP_DTYPES_FLOAT | DLOP_DTYPES_INT)

/* The ops, in the order plugin.c declares them. */
typedef enum elemwise_op_id {
  EW_ADD, EW_SUB, EW_MUL, EW_MAXIMUM, EW_MINIMUM, EW_DIV, EW_POW,
  EW_NEG, EW_ABS, EW_LOG, EW_SQRT, EW_TANH, EW_SIGMOID,
  EW_EQUAL, EW_NOT_EQUAL, EW_LESS, EW_LESS_EQUAL, EW_GREATER, EW_GREATER_EQUAL,
  EW_WHERE, EW_CAST,
  EW_OP_COUNT
} elemwise_op_id;

/* How an op's output relates to its inputs. */
typedef enum elemwise_kind {
  EW_KIND_UNARY,   /* x -> same dtype and shape */
  EW_KIND_BINARY,  /* a, b of one dtype -> that dtype, broadcast shape */
  EW_KIND_COMPARE, /* a, b of one dtype -> bool, broadcast shape */
  EW_KIND_WHERE,   /* bool condition, x, y of one dtype -> x's dtype, broadcast shape */
  EW_KIND_CAST     /* x -> the dtype parameter, same shape */
} elemwise_kind;

/* An op: its spec for the SDK's elementwise thunk (name, inputs, the dtypes its value inputs
 * may have, kernels) and its kind. The spec comes first: the descriptor's op_data points at the
 * info, which the kit's stages (dlop_elementwise_op_make_thunk, ..._op_infer_shape) read as
 * the spec. */
typedef struct elemwise_op_info {
  dlop_elementwise_spec spec;
  int32_t id;   /* elemwise_op_id */
  int32_t kind; /* elemwise_kind */
} elemwise_op_info;

int elemwise_make_node(const dlop_node_args *args);
/* The op's scalar body for fusion (ABI 1.2): statements over elemwise_scalar.h, its prelude
 * (elemwise_body.c). */
int elemwise_scalar_body(dlop_scalar_body_args *args);
/* The spec's kernel_dtypes: make_node's dtype rule again (the host passes make_node's types,
 * but a direct caller may not), and the dtypes that pick the kernels: the value dtype, or a
 * cast's from and to (elemwise_thunk.c). */
int elemwise_kernel_dtypes(const dlop_thunk_args *args, dlop_dtype *dtypes, int32_t *count);

/* The dtype named by cast's parameter, or DLOP_DTYPE_INVALID. */
dlop_dtype elemwise_dtype_from_name(const char *name);
/* The integer dtype of dtype's size: a cast to the same dtype copies bits, which that
 * dtype's same-size integer cast kernel does (CPU and CUDA alike). */
dlop_dtype elemwise_bit_copy_dtype(dlop_dtype dtype);

/* The CPU kernels of each op and (value) dtype; cast's of each from and to dtype. */
extern const dlop_elementwise_cpu_kernel elemwise_cpu_arith_kernels[EW_POW - EW_ADD + 1][DLOP_DTYPE_COUNT];
extern const dlop_elementwise_cpu_kernel elemwise_cpu_unary_kernels[EW_SIGMOID - EW_NEG + 1][DLOP_DTYPE_COUNT];
extern const dlop_elementwise_cpu_kernel elemwise_cpu_compare_kernels[EW_WHERE - EW_EQUAL + 1][DLOP_DTYPE_COUNT];
extern const dlop_elementwise_cpu_kernel elemwise_cpu_cast_kernels[DLOP_DTYPE_COUNT][DLOP_DTYPE_COUNT];

#endif
