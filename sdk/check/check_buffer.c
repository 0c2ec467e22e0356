/* check_buffer.c — tensors for the checks: each lives inside a device allocation with guard
 * bytes before and after it, laid out contiguous, with gaps (every other element), reversed
 * (negative strides) or column-major (transposed); the suite keeps the image it uploaded to compare with what comes back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"

int check_copy_bytes(dlop_device device, void *destination, const void *source, size_t bytes,
                     void *stream) {
  if (bytes == 0) return DLOP_OK;
  if (device.type == DLOP_DEVICE_CPU) {
    memcpy(destination, source, bytes);
    return DLOP_OK;
  }
  const dlop_host_api *host = dlop_host_api_table();
  int status = host->cuda_memcpy_async(destination, source, bytes, stream);
  if (status == DLOP_OK) status = host->cuda_stream_synchronize(stream);
  return status;
}

/* Offset in elements of logical element i (C order) from the tensor's base. The suite's own on
 * purpose, though plugins and fixtures compute the same: the layouts it certifies them on must
 * not share a bug with them. */
static int64_t element_offset(const check_buffer *b, int64_t i) {
  int64_t offset = 0;
  for (int32_t d = b->ndim - 1; d >= 0; d--) {
    int64_t index = b->shape[d] ? i % b->shape[d] : 0;
    i = b->shape[d] ? i / b->shape[d] : 0;
    offset += index * b->strides[d];
  }
  return offset;
}

void check_buffer_init(check_buffer *b, const check_case *c, dlop_device device, int dtype,
                       int32_t ndim, const int64_t *shape, check_layout layout,
                       const void *values, const unsigned char *poison, void *stream) {
  memset(b, 0, sizeof *b);
  b->device = device;
  b->dtype = dtype;
  b->ndim = ndim;
  b->element_size = dlop_dtype_size((dlop_dtype)dtype);
  b->numel = 1;
  for (int32_t d = ndim - 1; d >= 0; d--) {
    b->shape[d] = shape[d];
    b->strides[d] = b->numel;
    b->numel *= shape[d];
  }
  int64_t span = b->numel, base = 0; /* elements the tensor spans; base: offset of element 0 */
  if (layout == CHECK_EVERY_OTHER) {
    for (int32_t d = 0; d < ndim; d++) b->strides[d] *= 2;
    span = b->numel ? 2 * b->numel - 1 : 0;
  } else if (layout == CHECK_TRANSPOSED) {
    int64_t stride = 1;
    for (int32_t d = 0; d < ndim; d++) {
      b->strides[d] = stride;
      stride *= shape[d];
    }
  } else if (layout == CHECK_REVERSED) {
    for (int32_t d = 0; d < ndim; d++) b->strides[d] = -b->strides[d];
    base = b->numel ? b->numel - 1 : 0;
  }
  b->data_offset = CHECK_GUARD_BYTES;
  b->bytes = 2 * CHECK_GUARD_BYTES + (size_t)span * b->element_size;
  b->image = malloc(b->bytes);
  ck_assert_msg(b->image != NULL, "out of host memory for a %zu-byte image", b->bytes);
  memset(b->image, CHECK_GUARD_BYTE, b->bytes);
  unsigned char *origin = b->image + b->data_offset + (size_t)base * b->element_size;
  for (int64_t i = 0; i < b->numel; i++) {
    unsigned char *slot = origin + element_offset(b, i) * (int64_t)b->element_size;
    const unsigned char *from = values ? (const unsigned char *)values + (size_t)i * b->element_size
                                       : poison;
    memcpy(slot, from, b->element_size);
  }
  int status = dlop_memory_alloc(device, b->bytes, stream, &b->memory);
  if (status != DLOP_OK)
    check_fail(c, "suite setup", shape, ndim, "allocating %zu bytes on %s failed: %s", b->bytes,
               check_device_text(device), dlop_last_error());
  int copied = check_copy_bytes(device, b->memory, b->image, b->bytes, stream);
  if (copied != DLOP_OK)
    check_fail(c, "suite setup", NULL, 0, "copying %zu bytes to or from the device failed: %s (%s)",
               b->bytes, dlop_status_name(copied), dlop_last_error());
  b->tensor.data = (char *)b->memory + b->data_offset;
  b->tensor.device = device;
  b->tensor.ndim = ndim;
  b->tensor.dtype = dlop_dtype_to_dl((dlop_dtype)dtype);
  b->tensor.shape = b->shape;
  b->tensor.strides = b->strides;
  b->tensor.byte_offset = (uint64_t)base * b->element_size;
}

size_t check_buffer_element_at_index(const check_buffer *b, int64_t i) {
  return b->data_offset + (size_t)((int64_t)b->tensor.byte_offset +
                                   element_offset(b, i) * (int64_t)b->element_size);
}

int64_t check_buffer_element_at(const check_buffer *b, size_t byte) {
  if (byte < b->data_offset || b->element_size == 0) return -1;
  int64_t from_origin = (int64_t)(byte - b->data_offset) - (int64_t)b->tensor.byte_offset;
  for (int64_t i = 0; i < b->numel; i++) {
    int64_t start = element_offset(b, i) * (int64_t)b->element_size;
    if (from_origin >= start && from_origin < start + (int64_t)b->element_size) return i;
  }
  return -1;
}

const char *check_index_text(const check_buffer *b, int64_t i, char *buffer, size_t size) {
  int64_t index[DLOP_MAX_NDIM];
  for (int32_t d = b->ndim - 1; d >= 0; d--) {
    index[d] = b->shape[d] ? i % b->shape[d] : 0;
    i = b->shape[d] ? i / b->shape[d] : 0;
  }
  size_t used = (size_t)snprintf(buffer, size, "[");
  for (int32_t d = 0; d < b->ndim && used < size; d++)
    used += (size_t)snprintf(buffer + used, size - used, "%s%lld", d ? ", " : "",
                             (long long)index[d]);
  if (used < size) snprintf(buffer + used, size - used, "]");
  return buffer;
}

unsigned char *check_buffer_download(const check_buffer *b, void *stream) {
  unsigned char *out = malloc(b->bytes);
  ck_assert_msg(out != NULL, "out of host memory for a %zu-byte copy", b->bytes);
  int status = check_copy_bytes(b->device, out, b->memory, b->bytes, stream);
  ck_assert_msg(status == DLOP_OK, "copying %zu bytes from the device failed: %s (%s)", b->bytes,
                dlop_status_name(status), dlop_last_error());
  return out;
}

void check_buffer_extract(const check_buffer *b, const unsigned char *downloaded, void *values) {
  int64_t base = b->tensor.byte_offset / b->element_size;
  const unsigned char *origin = downloaded + b->data_offset + (size_t)base * b->element_size;
  for (int64_t i = 0; i < b->numel; i++)
    memcpy((unsigned char *)values + (size_t)i * b->element_size,
           origin + element_offset(b, i) * (int64_t)b->element_size, b->element_size);
}

void check_buffer_free(check_buffer *b) {
  if (b->memory) dlop_memory_free(b->device, b->memory, NULL);
  free(b->image);
  b->memory = NULL;
  b->image = NULL;
}
