/* copy.c — dlop__tensor_copy: copy one tensor into another of the same dtype and shape, any
 * strides on either side (negative and zero too), CPU or CUDA on either side. Contiguous copies
 * are one memcpy / cuMemcpyAsync; strided ones copy_cpu.c's loops on the CPU, or a kernel of
 * copy_kernels.cu on CUDA (tiled through shared memory when the source is contiguous along one
 * dim and the destination along another, a gather otherwise); a strided copy between devices is
 * staged through a contiguous buffer. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "copy_cpu.h"
#include "copy_layout.h"
#include "cuda_driver.h"
#include "internal.h"

_Static_assert(DLOP_COPY_MAX_NDIM == DLOP_MAX_NDIM, "copy_layout.h must follow DLOP_MAX_NDIM");

#if DLOP_HAVE_CUDA_KERNELS
extern const unsigned char dlop__copy_kernels_fatbin[];
#endif

/* ---- layouts ----------------------------------------------------------------------------- */

/* Build a layout with size-1 dimensions dropped and neighbours merged where both sides allow
 * it, so a contiguous or simply sliced copy becomes one or two long dimensions. */
static void build_layout(const dlop_tensor *source, const dlop_tensor *destination,
                         dlop__copy_layout *layout) {
  /* validate() checked the sizes and extents: no product below leaves int64 */
  int64_t source_strides[DLOP_MAX_NDIM], destination_strides[DLOP_MAX_NDIM];
  (void)dlop_contiguous_strides(source->shape, source->ndim, source_strides);
  (void)dlop_contiguous_strides(destination->shape, destination->ndim, destination_strides);
  for (int d = 0; d < source->ndim; d++) {
    if (source->strides) source_strides[d] = source->strides[d];
    if (destination->strides) destination_strides[d] = destination->strides[d];
  }
  memset(layout, 0, sizeof *layout);
  layout->numel = 1;
  int n = 0;
  for (int d = 0; d < source->ndim; d++) {
    int64_t size = source->shape[d];
    layout->numel *= size;
    if (size == 1) continue;
    if (n > 0 && layout->source_strides[n - 1] == source_strides[d] * size &&
        layout->destination_strides[n - 1] == destination_strides[d] * size) {
      /* The outer dimension steps exactly over this one on both sides: fold them. */
      layout->shape[n - 1] *= size;
      layout->source_strides[n - 1] = source_strides[d];
      layout->destination_strides[n - 1] = destination_strides[d];
      continue;
    }
    layout->shape[n] = size;
    layout->source_strides[n] = source_strides[d];
    layout->destination_strides[n] = destination_strides[d];
    n++;
  }
  if (n == 0) { /* a single element */
    layout->shape[0] = 1;
    layout->source_strides[0] = 1;
    layout->destination_strides[0] = 1;
    n = 1;
  }
  layout->ndim = n;
}

static int layout_is_contiguous(const dlop__copy_layout *layout) {
  return layout->ndim == 1 && layout->source_strides[0] == 1 &&
         layout->destination_strides[0] == 1;
}

/* ---- CUDA kernels -------------------------------------------------------------------------- */

#define DLOP__COPY_MAX_DEVICES 64

typedef struct copy_module {
  CUmodule module;
  CUfunction gather[4], transpose[4]; /* element sizes 1, 2, 4, 8 */
} copy_module;

#if DLOP_HAVE_CUDA_KERNELS
static copy_module copy_modules[DLOP__COPY_MAX_DEVICES];
static pthread_mutex_t copy_modules_lock = PTHREAD_MUTEX_INITIALIZER;
#endif

/* The strided-copy function (the gather, or the tiled one when transpose is set) for an element
 * size on a device, loading the module once. */
static int copy_function(int32_t device_id, size_t element_size, int transpose,
                         CUfunction *function) {
#if DLOP_HAVE_CUDA_KERNELS
  static const char *const names[4] = {"dlop_copy_strided_1", "dlop_copy_strided_2",
                                       "dlop_copy_strided_4", "dlop_copy_strided_8"};
  static const char *const transpose_names[4] = {"dlop_copy_transpose_1", "dlop_copy_transpose_2",
                                                 "dlop_copy_transpose_4", "dlop_copy_transpose_8"};
  int slot = element_size == 1 ? 0 : element_size == 2 ? 1 : element_size == 4 ? 2 : 3;
  if (device_id < 0 || device_id >= DLOP__COPY_MAX_DEVICES)
    return dlop__error(DLOP_NO_DEVICE, "strided copy: CUDA device %d out of range", (int)device_id);
  pthread_mutex_lock(&copy_modules_lock);
  copy_module *entry = &copy_modules[device_id];
  int status = DLOP_OK;
  if (entry->module == NULL) {
    CUmodule module = NULL;
    CUresult result = dlop__cuda.cuModuleLoadData(&module, dlop__copy_kernels_fatbin);
    for (int i = 0; i < 4 && result == DLOP_CUDA_SUCCESS; i++) {
      result = dlop__cuda.cuModuleGetFunction(&entry->gather[i], module, names[i]);
      if (result == DLOP_CUDA_SUCCESS)
        result = dlop__cuda.cuModuleGetFunction(&entry->transpose[i], module, transpose_names[i]);
    }
    if (result != DLOP_CUDA_SUCCESS) {
      if (module) dlop__cuda.cuModuleUnload(module);
      status = dlop__cuda_fail(result, "loading libdlop's strided-copy kernels (cuModuleLoadData)");
    } else {
      entry->module = module;
    }
  }
  if (status == DLOP_OK) *function = transpose ? entry->transpose[slot] : entry->gather[slot];
  pthread_mutex_unlock(&copy_modules_lock);
  return status;
#else
  (void)device_id;
  (void)element_size;
  (void)transpose;
  (void)function;
  return dlop__error(DLOP_UNSUPPORTED,
                     "strided CUDA copy: libdlop was built without CUDA kernels "
                     "(DLOP_WITH_CUDA=OFF); make the tensor contiguous first");
#endif
}

/* Blocks along one grid dim: count, at most limit (the kernels stride over the rest). */
static unsigned grid_dim(int64_t count, int64_t limit) {
  return (unsigned)(count < 1 ? 1 : count > limit ? limit : count);
}

/* Launch the strided copy between two tensors on one CUDA device (context already current). */
static int cuda_strided_copy(int32_t device_id, CUdeviceptr source, CUdeviceptr destination,
                             size_t element_size, dlop__copy_layout layout, CUstream stream) {
  if ((source | destination) % element_size != 0 ||
      (element_size != 1 && element_size != 2 && element_size != 4 && element_size != 8)) {
    /* Misaligned or odd-sized elements: copy bytes, with the element's bytes as a new
     * innermost dimension. */
    if (layout.ndim >= DLOP_MAX_NDIM)
      return dlop__error(DLOP_UNSUPPORTED,
                         "strided CUDA copy of misaligned %zu-byte elements needs fewer than %d "
                         "dimensions after merging (has %d)",
                         element_size, DLOP_MAX_NDIM, (int)layout.ndim);
    for (int d = 0; d < layout.ndim; d++) {
      layout.source_strides[d] *= (int64_t)element_size;
      layout.destination_strides[d] *= (int64_t)element_size;
    }
    layout.shape[layout.ndim] = (int64_t)element_size;
    layout.source_strides[layout.ndim] = 1;
    layout.destination_strides[layout.ndim] = 1;
    layout.ndim++;
    layout.numel *= (int64_t)element_size;
    element_size = 1;
  }
  CUfunction function = NULL;
  int32_t source_dim, destination_dim;
  const int transpose = dlop__copy_transpose_dims(&layout, &source_dim, &destination_dim);
  int status = copy_function(device_id, element_size, transpose, &function);
  if (status != DLOP_OK) return status;
  CUresult result;
  if (transpose) {
    /* x: tiles along the source's contiguous dim, y: along the destination's, z: the rest */
    const int64_t along_source = layout.shape[source_dim], along_destination = layout.shape[destination_dim];
    const unsigned x = grid_dim((along_source + DLOP_COPY_TILE - 1) / DLOP_COPY_TILE, 65535);
    const unsigned y = grid_dim((along_destination + DLOP_COPY_TILE - 1) / DLOP_COPY_TILE, 65535);
    const unsigned z = grid_dim(layout.numel / (along_source * along_destination), 65535);
    void *arguments[5] = {&source, &destination, &layout, &source_dim, &destination_dim};
    result = dlop__cuda.cuLaunchKernel(function, x, y, z, DLOP_COPY_TILE, DLOP_COPY_TILE_ROWS, 1, 0,
                                       stream, arguments, NULL);
  } else {
    const unsigned block = 256;
    const unsigned blocks = grid_dim(layout.numel / block + (layout.numel % block != 0), 1 << 20);
    void *arguments[3] = {&source, &destination, &layout};
    result = dlop__cuda.cuLaunchKernel(function, blocks, 1, 1, block, 1, 1, 0, stream, arguments,
                                       NULL); /* the grid-stride loop covers the rest */
  }
  if (result != DLOP_CUDA_SUCCESS) return dlop__cuda_fail(result, "launching the strided copy");
  return DLOP_OK;
}

/* ---- the copy ------------------------------------------------------------------------------ */

static int validate(const dlop_tensor *source, const dlop_tensor *destination,
                    size_t *element_size) {
  if (source == NULL || destination == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "tensor copy: source or destination is NULL");
  if (source->dtype.code != destination->dtype.code || source->dtype.bits != destination->dtype.bits ||
      source->dtype.lanes != destination->dtype.lanes)
    return dlop__error(DLOP_TYPE_ERROR,
                       "tensor copy: dtypes differ (source code %d bits %d lanes %d, destination "
                       "code %d bits %d lanes %d)",
                       source->dtype.code, source->dtype.bits, source->dtype.lanes,
                       destination->dtype.code, destination->dtype.bits, destination->dtype.lanes);
  if (source->dtype.bits == 0 || source->dtype.bits % 8 != 0 || source->dtype.lanes == 0)
    return dlop__error(DLOP_TYPE_ERROR,
                       "tensor copy: element of %d bits x %d lanes is not a whole number of bytes",
                       source->dtype.bits, source->dtype.lanes);
  *element_size = (size_t)source->dtype.bits / 8 * source->dtype.lanes;
  if (source->ndim != destination->ndim || source->ndim < 0 || source->ndim > DLOP_MAX_NDIM)
    return dlop__error(DLOP_SHAPE_ERROR,
                       "tensor copy: ranks %d (source) and %d (destination) must be equal and "
                       "between 0 and %d",
                       (int)source->ndim, (int)destination->ndim, DLOP_MAX_NDIM);
  for (int d = 0; d < source->ndim; d++) {
    if (source->shape[d] != destination->shape[d] || source->shape[d] < 0)
      return dlop__error(DLOP_SHAPE_ERROR,
                         "tensor copy: dimension %d is %lld in the source and %lld in the "
                         "destination (must be equal and non-negative)",
                         d, (long long)source->shape[d], (long long)destination->shape[d]);
  }
  for (int side = 0; side < 2; side++) {
    dlop_device device = side ? destination->device : source->device;
    if (device.type != DLOP_DEVICE_CPU && device.type != DLOP_DEVICE_CUDA)
      return dlop__error(DLOP_UNSUPPORTED, "tensor copy: %s is on device type %d (cpu or cuda expected)",
                         side ? "destination" : "source", (int)device.type);
  }
  /* Arrays passed these checks when they were made; the copy checks again because every
   * layout product below (strides, merged dims, bytes) relies on them. */
  int64_t numel, low, high;
  int size = dlop_shape_size(source->shape, source->ndim, (int64_t)*element_size, &numel, NULL);
  if (size != DLOP_SIZE_FITS)
    return dlop__size_error("tensor copy", size, source->shape, source->ndim,
                            (int32_t)dlop_tensor_dtype(source));
  for (int side = 0; side < 2 && numel > 0; side++) {
    const dlop_tensor *t = side ? destination : source;
    if (t->strides == NULL) continue;
    int status = dlop__check_extent(side ? "tensor copy: destination" : "tensor copy: source",
                                    t->shape, t->strides, t->ndim, (int64_t)*element_size,
                                    t->byte_offset, &low, &high);
    if (status != DLOP_OK) return status;
  }
  return DLOP_OK;
}

/* A contiguous tensor with the same dtype and shape as model, on device, from the pool. */
static int make_staging(const dlop_tensor *model, dlop_device device, size_t bytes,
                        CUstream stream, dlop_tensor *staging) {
  *staging = *model;
  staging->device = device;
  staging->strides = NULL;
  staging->byte_offset = 0;
  return dlop_memory_alloc(device, bytes, stream, &staging->data);
}

/* Both tensors on the same device (the CPU or one GPU). */
static int copy_same_device(const dlop_tensor *source, const dlop_tensor *destination,
                            size_t element_size, const dlop__copy_layout *layout,
                            CUstream stream) {
  char *source_base = dlop_tensor_base(source);
  char *destination_base = dlop_tensor_base(destination);
  if (source->device.type == DLOP_DEVICE_CPU) {
    if (layout_is_contiguous(layout))
      memmove(destination_base, source_base, (size_t)layout->numel * element_size);
    else
      dlop__cpu_strided_copy(source_base, destination_base, element_size, layout);
    return DLOP_OK;
  }
  int status = dlop__cuda_set_device(source->device.id);
  if (status != DLOP_OK) return status;
  if (layout_is_contiguous(layout)) {
    CUresult result = dlop__cuda.cuMemcpyAsync((CUdeviceptr)(uintptr_t)destination_base,
                                               (CUdeviceptr)(uintptr_t)source_base,
                                               (size_t)layout->numel * element_size, stream);
    if (result != DLOP_CUDA_SUCCESS) return dlop__cuda_fail(result, "cuMemcpyAsync (device to device)");
    return DLOP_OK;
  }
  return cuda_strided_copy(source->device.id, (CUdeviceptr)(uintptr_t)source_base,
                           (CUdeviceptr)(uintptr_t)destination_base, element_size, *layout,
                           stream);
}

/* Contiguous bytes from one device to another (host<->device or between GPUs). */
static int copy_bytes_between(const dlop_tensor *source, const dlop_tensor *destination,
                              size_t bytes, CUstream stream) {
  void *source_base = dlop_tensor_base(source);
  void *destination_base = dlop_tensor_base(destination);
  CUresult result;
  const char *what;
  if (source->device.type == DLOP_DEVICE_CPU) {
    int status = dlop__cuda_set_device(destination->device.id);
    if (status != DLOP_OK) return status;
    result = dlop__cuda.cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)destination_base, source_base,
                                          bytes, stream);
    what = "cuMemcpyHtoDAsync";
  } else if (destination->device.type == DLOP_DEVICE_CPU) {
    int status = dlop__cuda_set_device(source->device.id);
    if (status != DLOP_OK) return status;
    result = dlop__cuda.cuMemcpyDtoHAsync(destination_base, (CUdeviceptr)(uintptr_t)source_base,
                                          bytes, stream);
    what = "cuMemcpyDtoHAsync";
  } else {
    /* Between GPUs unified addressing lets cuMemcpyAsync find both ends. */
    int status = dlop__cuda_set_device(destination->device.id);
    if (status != DLOP_OK) return status;
    result = dlop__cuda.cuMemcpyAsync((CUdeviceptr)(uintptr_t)destination_base,
                                      (CUdeviceptr)(uintptr_t)source_base, bytes, stream);
    what = "cuMemcpyAsync (between GPUs)";
  }
  if (result != DLOP_CUDA_SUCCESS) return dlop__cuda_fail(result, what);
  return DLOP_OK;
}

static int synchronize_stream(int32_t device_id, CUstream stream) {
  int status = dlop__cuda_set_device(device_id);
  if (status != DLOP_OK) return status;
  CUresult result = dlop__cuda.cuStreamSynchronize(stream);
  if (result != DLOP_CUDA_SUCCESS) return dlop__cuda_fail(result, "cuStreamSynchronize after a copy");
  return DLOP_OK;
}

static int tensor_copy(const dlop_tensor *source, const dlop_tensor *destination, void *stream_handle) {
  size_t element_size = 0;
  int status = validate(source, destination, &element_size);
  if (status != DLOP_OK) return status;
  dlop__copy_layout layout;
  build_layout(source, destination, &layout);
  if (layout.numel == 0) return DLOP_OK;
  if (source->data == NULL || destination->data == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "tensor copy: %s data is NULL for %lld elements",
                       source->data == NULL ? "source" : "destination", (long long)layout.numel);
  CUstream stream = (CUstream)stream_handle;
  int same_device = source->device.type == destination->device.type &&
                    (source->device.type == DLOP_DEVICE_CPU || source->device.id == destination->device.id);
  if (same_device) return copy_same_device(source, destination, element_size, &layout, stream);

  /* Between devices: only contiguous bytes can move, so stage each strided side. */
  int gpu_to_gpu = source->device.type == DLOP_DEVICE_CUDA && destination->device.type == DLOP_DEVICE_CUDA;
  if (gpu_to_gpu && stream != NULL) {
    /* stream belongs to one of the two GPUs; do the work on each device's default stream
     * instead, after the given stream's pending work. */
    CUresult result = DLOP_CUDA_SUCCESS;
    status = dlop__cuda_set_context_of_stream(stream);
    if (status == DLOP_OK) result = dlop__cuda.cuStreamSynchronize(stream);
    if (status != DLOP_OK) return status;
    if (result != DLOP_CUDA_SUCCESS) return dlop__cuda_fail(result, "cuStreamSynchronize before a copy between GPUs");
    stream = NULL;
  }
  size_t bytes = (size_t)layout.numel * element_size;
  int source_contiguous = dlop_tensor_is_contiguous(source);
  int destination_contiguous = dlop_tensor_is_contiguous(destination);
  dlop_tensor source_staging, destination_staging;
  const dlop_tensor *from = source, *to = destination;
  int have_source_staging = 0, have_destination_staging = 0;
  if (!source_contiguous) {
    status = make_staging(source, source->device, bytes, stream, &source_staging);
    if (status != DLOP_OK) return status;
    have_source_staging = 1;
    dlop__copy_layout gather;
    build_layout(source, &source_staging, &gather);
    status = copy_same_device(source, &source_staging, element_size, &gather, stream);
    from = &source_staging;
  }
  if (status == DLOP_OK && !destination_contiguous) {
    status = make_staging(destination, destination->device, bytes, stream, &destination_staging);
    if (status == DLOP_OK) {
      have_destination_staging = 1;
      to = &destination_staging;
    }
  }
  if (status == DLOP_OK && gpu_to_gpu && have_source_staging)
    status = synchronize_stream(source->device.id, NULL); /* default streams of two GPUs are unordered */
  if (status == DLOP_OK) status = copy_bytes_between(from, to, bytes, stream);
  if (status == DLOP_OK && have_destination_staging) {
    if (destination->device.type == DLOP_DEVICE_CPU)
      status = synchronize_stream(source->device.id, stream); /* the CPU scatter reads it now */
    if (status == DLOP_OK) {
      dlop__copy_layout scatter;
      build_layout(&destination_staging, destination, &scatter);
      status = copy_same_device(&destination_staging, destination, element_size, &scatter, stream);
    }
  }
  /* A CPU destination is read as soon as we return, and CPU staging is freed below: wait for
   * the GPU. (A contiguous CPU source needs no wait: the caller keeps it alive, and pageable
   * memory is staged by the driver before cuMemcpyHtoDAsync returns.) */
  int wait = destination->device.type == DLOP_DEVICE_CPU || gpu_to_gpu ||
             (have_source_staging && source->device.type == DLOP_DEVICE_CPU);
  int32_t gpu = source->device.type == DLOP_DEVICE_CUDA ? source->device.id : destination->device.id;
  if (status == DLOP_OK && wait) {
    status = synchronize_stream(gpu, stream);
    if (status == DLOP_OK && gpu_to_gpu) status = synchronize_stream(destination->device.id, NULL);
  }
  /* CUDA staging is freed in stream order; CPU staging only after the synchronization above. */
  int saved = status;
  if (have_source_staging) dlop_memory_free(source_staging.device, source_staging.data, stream);
  if (have_destination_staging)
    dlop_memory_free(destination_staging.device, destination_staging.data, stream);
  return saved;
}

/* Puts the caller's current CUDA context back, whatever the work made current. */
int dlop__tensor_copy(const dlop_tensor *source, const dlop_tensor *destination, void *stream_handle) {
  dlop__cuda_scope scope = {NULL, 0};
  int on_gpu = source && destination && (source->device.type == DLOP_DEVICE_CUDA ||
                                         destination->device.type == DLOP_DEVICE_CUDA);
  /* the copy switches to whichever GPU each step needs; the caller's context comes back */
  if (on_gpu) dlop__cuda_save_context(&scope);
  int status = tensor_copy(source, destination, stream_handle);
  return dlop__cuda_restore_after(&scope, status);
}
