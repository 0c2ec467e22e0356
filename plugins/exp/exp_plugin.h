/* exp_plugin.h — declarations shared by the files of the exp plugin (y = e^x).
 * Everything here has hidden visibility: the plugin exports only dlop_plugin_init. */
#ifndef DLOP_EXP_PLUGIN_H
#define DLOP_EXP_PLUGIN_H

#include <dlop/kit/kernel_util.h>
#include <dlop/plugin.h>

#define EXP_DTYPES DLOP_DTYPES_FLOAT

/* The host table given to dlop_plugin_init (NULL before it ran). */
const dlop_host_api *exp_host(void);

int exp_make_node(const dlop_node_args *args);
int exp_infer_shape(const dlop_node_args *args);
int exp_make_thunk(const dlop_thunk_args *args);

/* y = e^x over a loop set up with output first, input second, on the CPU. */
int exp_cpu_run(const dlop_strided_loop *loop, dlop_dtype dtype, char *error,
                   size_t error_size);

#endif
