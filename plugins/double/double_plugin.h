/* double_plugin.h — declarations shared by the files of the double plugin (y = 2x).
 * Everything here has hidden visibility: the plugin exports only dlop_plugin_init. */
#ifndef DLOP_DOUBLE_PLUGIN_H
#define DLOP_DOUBLE_PLUGIN_H

#include <dlop/kit/kernel_util.h>
#include <dlop/plugin.h>

#define DOUBLE_DTYPES (DLOP_DTYPES_FLOAT | DLOP_DTYPES_INT)

/* The host table given to dlop_plugin_init (NULL before it ran). */
const dlop_host_api *double_host(void);

int double_make_node(const dlop_node_args *args);
int double_infer_shape(const dlop_node_args *args);
int double_make_thunk(const dlop_thunk_args *args);

/* y = 2x over a loop set up with output first, input second, on the CPU. */
int double_cpu_run(const dlop_strided_loop *loop, dlop_dtype dtype, char *error,
                   size_t error_size);

#endif
