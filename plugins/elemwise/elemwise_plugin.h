/* elemwise_plugin.h — declarations shared by the files of the elemwise plugin (elementwise
 * algebra with NumPy broadcasting): the table of ops, the CPU kernel lookups, the stages.
 * Hidden visibility: the plugin exports only dlop_plugin_init. */
#ifndef DLOP_ELEMWISE_PLUGIN_H
#define DLOP_ELEMWISE_PLUGIN_H

#include <dlop/kit/kernel_util.h>
#include <dlop/plugin.h>

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

/* The CUDA file (fatbin) an op's kernels live in: split so nvcc builds them in parallel. */
typedef enum elemwise_cuda_file {
  EW_CUDA_ARITH, EW_CUDA_UNARY, EW_CUDA_COMPARE, EW_CUDA_CAST, EW_CUDA_FILE_COUNT
} elemwise_cuda_file;

/* What the plugin's common code needs to know of an op (its descriptor's op_data). */
typedef struct elemwise_op_info {
  int32_t id;         /* elemwise_op_id */
  int32_t kind;       /* elemwise_kind */
  int32_t num_inputs;
  uint32_t dtypes;    /* accepted dtypes of the value inputs (not where's condition) */
  int32_t cuda_file;  /* elemwise_cuda_file */
  /* CUDA kernels beyond "strided": a vectorized "contiguous" one (16-byte vectors) and a
   * "rows" one (matrix with a broadcast row, column or scalar), for the cheap ops */
  int32_t cuda_contiguous, cuda_rows;
} elemwise_op_info;

/* The host table given to dlop_plugin_init (NULL before it ran). */
const dlop_host_api *elemwise_host(void);

/* "add", "equal", ... */
const char *elemwise_op_name(int32_t id);

int elemwise_make_node(const dlop_node_args *args);
int elemwise_infer_shape(const dlop_node_args *args);
int elemwise_make_thunk(const dlop_thunk_args *args);

/* The dtype named by cast's parameter, or DLOP_DTYPE_INVALID. */
dlop_dtype elemwise_dtype_from_name(const char *name);
/* The integer dtype of dtype's size: a cast to the same dtype copies bits, which that
 * dtype's same-size integer cast kernel does (CPU and CUDA alike). */
dlop_dtype elemwise_bit_copy_dtype(dlop_dtype dtype);

/* A CPU kernel over one run of a strided loop: p[0] the output, p[1..] the inputs, s[k] their
 * strides in elements, n elements. */
typedef void (*elemwise_cpu_inner_fn)(char *const *p, const int64_t *s, int64_t n);

/* The CPU kernel of an op for its input dtype (cast: from -> to), NULL when there is none. */
elemwise_cpu_inner_fn elemwise_cpu_arith(int32_t op, dlop_dtype dtype);
elemwise_cpu_inner_fn elemwise_cpu_unary(int32_t op, dlop_dtype dtype);
elemwise_cpu_inner_fn elemwise_cpu_compare(int32_t op, dlop_dtype dtype);
elemwise_cpu_inner_fn elemwise_cpu_cast(dlop_dtype from, dlop_dtype to);

#endif
