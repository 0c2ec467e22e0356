/* dlop.h — the umbrella header for hosts (programs that load plugins and run graphs).
 * Plugins include <dlop/plugin.h> instead and never link libdlop. */
#ifndef DLOP_H
#define DLOP_H

#include "dlop/cuda_source.h"
#include "dlop/dtype.h"
#include "dlop/graph.h"
#include "dlop/host_api.h"
#include "dlop/op.h"
#include "dlop/op_call.h"
#include "dlop/plugin.h"
#include "dlop/registry.h"
#include "dlop/runtime.h"
#include "dlop/source_ops.h"
#include "dlop/status.h"
#include "dlop/tensor.h"
#include "dlop/version.h"

#endif
