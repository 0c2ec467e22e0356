/* cuda_graph_layout.c — part of test_cuda_graph_plan, compiled only where the toolkit's cuda.h
 * is found: the sizes, offsets and constants of cuda.h that libdlop declares for itself in
 * sdk/src/cuda_driver.h (it builds without cuda.h). A separate file, since cuda.h and
 * cuda_driver.h declare the same names differently; the test compares the two lists. */
#include <stddef.h>

#include <cuda.h>

const size_t dlop_test_cuda_h_layout[] = {
    sizeof(CUDA_KERNEL_NODE_PARAMS_v2),
    offsetof(CUDA_KERNEL_NODE_PARAMS_v2, func),
    offsetof(CUDA_KERNEL_NODE_PARAMS_v2, gridDimX),
    offsetof(CUDA_KERNEL_NODE_PARAMS_v2, blockDimX),
    offsetof(CUDA_KERNEL_NODE_PARAMS_v2, sharedMemBytes),
    offsetof(CUDA_KERNEL_NODE_PARAMS_v2, kernelParams),
    offsetof(CUDA_KERNEL_NODE_PARAMS_v2, extra),
    offsetof(CUDA_KERNEL_NODE_PARAMS_v2, kern),
    offsetof(CUDA_KERNEL_NODE_PARAMS_v2, ctx),
    sizeof(CUDA_MEMCPY3D_v2),
    offsetof(CUDA_MEMCPY3D_v2, srcXInBytes),
    offsetof(CUDA_MEMCPY3D_v2, srcMemoryType),
    offsetof(CUDA_MEMCPY3D_v2, srcDevice),
    offsetof(CUDA_MEMCPY3D_v2, srcPitch),
    offsetof(CUDA_MEMCPY3D_v2, dstXInBytes),
    offsetof(CUDA_MEMCPY3D_v2, dstMemoryType),
    offsetof(CUDA_MEMCPY3D_v2, dstDevice),
    offsetof(CUDA_MEMCPY3D_v2, WidthInBytes),
    offsetof(CUDA_MEMCPY3D_v2, Depth),
    sizeof(CUDA_MEMSET_NODE_PARAMS_v1),
    offsetof(CUDA_MEMSET_NODE_PARAMS_v1, dst),
    offsetof(CUDA_MEMSET_NODE_PARAMS_v1, value),
    offsetof(CUDA_MEMSET_NODE_PARAMS_v1, elementSize),
    offsetof(CUDA_MEMSET_NODE_PARAMS_v1, width),
    offsetof(CUDA_MEMSET_NODE_PARAMS_v1, height),
    CUDA_ERROR_INVALID_VALUE,
    CU_STREAM_CAPTURE_MODE_RELAXED,
    CU_GRAPH_NODE_TYPE_KERNEL,
    CU_GRAPH_NODE_TYPE_MEMCPY,
    CU_GRAPH_NODE_TYPE_MEMSET,
    CU_GRAPH_NODE_TYPE_EMPTY,
    CU_MEMORYTYPE_HOST,
    CU_MEMORYTYPE_DEVICE,
    CU_MEMORYTYPE_UNIFIED,
};

const size_t dlop_test_cuda_h_layout_count =
    sizeof dlop_test_cuda_h_layout / sizeof dlop_test_cuda_h_layout[0];
