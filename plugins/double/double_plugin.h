/* double_plugin.h — declarations shared by the files of the double plugin (y = 2x).
 * Everything here has hidden visibility: the plugin exports only dlop_plugin_init. */
#ifndef DLOP_DOUBLE_PLUGIN_H
#define DLOP_DOUBLE_PLUGIN_H

#include <dlop/kit/elementwise.h>

#define DOUBLE_DTYPES (DLOP_DTYPES_FLOAT | DLOP_DTYPES_INT)

/* y = 2x on one run of the loop, for each dtype of DOUBLE_DTYPES (double_cpu.c). */
extern const dlop_elementwise_cpu_kernel double_cpu_kernels[DLOP_DTYPE_COUNT];

#endif
