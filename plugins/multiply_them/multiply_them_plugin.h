/* multiply_them_plugin.h — declarations shared by the files of the multiply_them plugin
 * (z = a * b with broadcasting). Hidden visibility: the plugin exports only dlop_plugin_init. */
#ifndef DLOP_MULTIPLY_THEM_PLUGIN_H
#define DLOP_MULTIPLY_THEM_PLUGIN_H

#include <dlop/kit/elementwise.h>

#define MULTIPLY_THEM_DTYPES (DLOP_DTYPES_FLOAT | DLOP_DTYPES_INT)

/* z = a * b on one run of the loop, for each dtype of MULTIPLY_THEM_DTYPES (multiply_them_cpu.c). */
extern const dlop_elementwise_cpu_kernel multiply_them_cpu_kernels[DLOP_DTYPE_COUNT];

#endif
