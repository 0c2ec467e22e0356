/* multiply_them_plugin.h — declarations shared by the files of the multiply_them plugin
 * (z = a * b with broadcasting). Hidden visibility: the plugin exports only dlop_plugin_init. */
#ifndef DLOP_MULTIPLY_THEM_PLUGIN_H
#define DLOP_MULTIPLY_THEM_PLUGIN_H

#include <dlop/kit/kernel_util.h>
#include <dlop/plugin.h>

#define MULTIPLY_THEM_DTYPES (DLOP_DTYPES_FLOAT | DLOP_DTYPES_INT)

/* The host table given to dlop_plugin_init (NULL before it ran). */
const dlop_host_api *multiply_them_host(void);

int multiply_them_make_node(const dlop_node_args *args);
int multiply_them_infer_shape(const dlop_node_args *args);
int multiply_them_make_thunk(const dlop_thunk_args *args);

/* z = a * b over a loop set up with z first, then a and b, on the CPU. */
int multiply_them_cpu_run(const dlop_strided_loop *loop, dlop_dtype dtype, char *error,
                          size_t error_size);

#endif
