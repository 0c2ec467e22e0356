/* checked_size.c — the out-of-line half of the runtime's size checks (internal.h): the
 * messages of dlop/kit/checked_size.h recorded as this thread's last error. The checks
 * themselves are inline, on every call's path; only a failure comes here. */
#include "internal.h"

int dlop__size_error(const char *what, int result, const int64_t *shape, int32_t ndim,
                     int32_t dtype) {
  char message[1024];
  dlop_set_size_error(message, sizeof message, what, result, shape, ndim, dtype);
  return dlop__error(DLOP_SHAPE_ERROR, "%s", message);
}

int dlop__extent_error(const char *what, const int64_t *shape, const int64_t *strides,
                       int32_t ndim, int64_t element_size, uint64_t byte_offset,
                       int32_t failed_dim) {
  char message[1024];
  dlop_set_extent_error(message, sizeof message, what, shape, strides, ndim, element_size,
                        byte_offset, failed_dim);
  return dlop__error(DLOP_INVALID_ARGUMENT, "%s", message);
}
