/* scale_add.h — declarations shared by the files of the template plugin: one op, scale_add,
 * z = alpha * x + y with NumPy broadcasting, float32 and float64, on the CPU and CUDA.
 * Everything but dlop_plugin_init is hidden (dlop_add_plugin builds with -fvisibility=hidden). */
#ifndef SCALE_ADD_H
#define SCALE_ADD_H

#include <dlop/kit/kernel_util.h> /* header-only helpers: errors, broadcasting, loops, launches */
#include <dlop/plugin.h>      /* the ABI: descriptors, stages, the host table */

/* The dtypes scale_add runs in, on both devices: a DLOP_DTYPE_BIT mask. */
#define SCALE_ADD_DTYPES (DLOP_DTYPE_BIT(DLOP_FLOAT32) | DLOP_DTYPE_BIT(DLOP_FLOAT64))

/* Index of the op's only parameter in the params arrays the host passes (declaration order). */
#define SCALE_ADD_PARAM_ALPHA 0

/* The host table given to dlop_plugin_init (plugin.c); NULL before it ran. */
const dlop_host_api *scale_add_host(void);

/* The three stages (scale_add_node.c, scale_add_thunk.c). */
int scale_add_make_node(const dlop_node_args *args);
int scale_add_infer_shape(const dlop_node_args *args);
int scale_add_make_thunk(const dlop_thunk_args *args);

/* The CPU kernel (scale_add_cpu.c): z = alpha * x + y over a loop set up with z first, then x
 * and y, as dlop_strided_loop_init builds it. */
int scale_add_cpu_run(const dlop_strided_loop *loop, dlop_dtype dtype, double alpha, char *error,
                      size_t error_size);

#endif
