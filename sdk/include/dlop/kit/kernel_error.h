/* dlop/kit/kernel_error.h — error messages for plugins: bounded formatting into the host's error
 * buffer, and the text of dtype masks, shapes and ints that messages quote ("float32", "(3, 4)").
 * Part of kernel_util.h; static inline, needs nothing from libdlop. */
#ifndef DLOP_KERNEL_ERROR_H
#define DLOP_KERNEL_ERROR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../dtype.h"
#include "../tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define DLOP_PRINTF_LIKE(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define DLOP_PRINTF_LIKE(fmt, args)
#endif

/* Format into the host's error buffer: bounded, always NUL-terminated, buffer may be NULL. */
static inline void dlop_set_error(char *buffer, size_t size, const char *fmt, ...)
    DLOP_PRINTF_LIKE(3, 4);
static inline void dlop_set_error(char *buffer, size_t size, const char *fmt, ...) {
  va_list args;
  if (buffer == NULL || size == 0) return;
  va_start(args, fmt);
  vsnprintf(buffer, size, fmt, args);
  va_end(args);
  buffer[size - 1] = '\0';
}

/* "int8, float32, ..." for a DLOP_DTYPE_BIT mask ("none" when empty). Returns buffer. */
static inline const char *dlop_format_dtypes(uint32_t mask, char *buffer, size_t size) {
  size_t used = 0;
  int i;
  if (buffer == NULL || size == 0) return buffer;
  buffer[0] = '\0';
  for (i = 0; i < DLOP_DTYPE_COUNT; i++) {
    if (!(mask & DLOP_DTYPE_BIT(i)) || used >= size) continue;
    int written = snprintf(buffer + used, size - used, "%s%s", used ? ", " : "",
                           dlop_dtype_name((dlop_dtype)i));
    if (written > 0) used += (size_t)written;
  }
  if (used == 0) snprintf(buffer, size, "none");
  buffer[size - 1] = '\0';
  return buffer;
}

/* "(3, 4)", "(5,)", "()": a Python tuple of values; with unknown_as_question, DLOP_DIM_UNKNOWN
 * prints as "?". Returns buffer. dlop_format_shape and dlop_format_ints below are the callers. */
static inline const char *dlop_format_tuple(const int64_t *values, int32_t count,
                                             int unknown_as_question, char *buffer, size_t size) {
  size_t used = 0;
  int32_t i;
  if (buffer == NULL || size == 0) return buffer;
  buffer[0] = '\0';
#define DLOP__APPEND(...)                                                                  \
  do {                                                                                     \
    if (used < size) {                                                                     \
      int written_ = snprintf(buffer + used, size - used, __VA_ARGS__);                   \
      if (written_ > 0) used += (size_t)written_;                                          \
    }                                                                                      \
  } while (0)
  DLOP__APPEND("(");
  for (i = 0; i < count; i++) {
    if (unknown_as_question && values[i] == DLOP_DIM_UNKNOWN) DLOP__APPEND("%s?", i ? ", " : "");
    else DLOP__APPEND("%s%lld", i ? ", " : "", (long long)values[i]);
  }
  DLOP__APPEND(count == 1 ? ",)" : ")");
#undef DLOP__APPEND
  buffer[size - 1] = '\0';
  return buffer;
}

/* "(3, 4)", "(5,)", "()" with "?" for unknown dimensions. Returns buffer. */
static inline const char *dlop_format_shape(const int64_t *shape, int32_t ndim, char *buffer,
                                            size_t size) {
  return dlop_format_tuple(shape, ndim, 1, buffer, size);
}

/* "(0, -1)", "(2,)", "()": ints as given (an axes or pattern parameter, where -1 is a value,
 * not an unknown dimension). Returns buffer. */
static inline const char *dlop_format_ints(const int64_t *values, int32_t count, char *buffer,
                                           size_t size) {
  return dlop_format_tuple(values, count, 0, buffer, size);
}

#ifdef __cplusplus
}
#endif

#endif
