/* exp_plugin.h — declarations shared by the files of the exp plugin (y = e^x).
 * Everything here has hidden visibility: the plugin exports only dlop_plugin_init. */
#ifndef DLOP_EXP_PLUGIN_H
#define DLOP_EXP_PLUGIN_H

#include <dlop/kit/elementwise.h>

#define EXP_DTYPES DLOP_DTYPES_FLOAT

/* y = e^x on one run of the loop, for each dtype of EXP_DTYPES (exp_cpu.c). */
extern const dlop_elementwise_cpu_kernel exp_cpu_kernels[DLOP_DTYPE_COUNT];

#endif
