/* dlop/kit/elementwise.h — everything the C side of an elementwise op needs, in one include:
 * the thunk from a spec, the type and shape rules, CPU kernels from an element function, the
 * plugin entry point, and the rest of the kit. The op's .cu file includes cuda_kernel_util.cuh. */
#ifndef DLOP_ELEMENTWISE_H
#define DLOP_ELEMENTWISE_H

#include "kernel_util.h"       /* errors, broadcasting, tensor checks, loops, CUDA launches */
#include "elementwise_thunk.h" /* dlop_elementwise_spec and its make_thunk */
#include "elementwise_node.h"  /* make_node and infer_shape of an op of one dtype */
#include "elementwise_cpu.h"   /* DLOP_CPU_UNARY_KERNEL, DLOP_CPU_BINARY_KERNEL */
#include "plugin_entry.h"      /* DLOP_PLUGIN_ENTRY: the plugin descriptor and dlop_plugin_init */

#endif
