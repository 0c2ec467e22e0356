/* test_array.c — dlop_array on the CPU: empty, from_host, wrap (deleter called exactly once),
 * to_host, copy_to with negative and zero strides and of transposes, views and their bounds,
 * reference counts. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "test_support.h"

static const dlop_device cpu = {DLOP_DEVICE_CPU, 0};

/* In the AddressSanitizer build: a request past ASan's 1 TiB maximum returns NULL, as the C
 * allocator's contract says and the pool expects (test_empty_rejects_bad_arguments asks for
 * 2^62 bytes), instead of ASan ending the process. ASAN_OPTIONS from the environment still
 * apply on top; without ASan nothing calls this. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

/* A new CPU float32 vector of n elements. */
static dlop_array *float32_vector(int64_t n) {
  dlop_array *array = NULL;
  DLOP_CK_OK(dlop_array_empty(cpu, DLOP_FLOAT32, 1, &n, &array));
  return array;
}

START_TEST(test_empty_is_contiguous) {
  int64_t shape[3] = {2, 3, 5};
  dlop_array *array;
  DLOP_CK_OK(dlop_array_empty(cpu, DLOP_FLOAT64, 3, shape, &array));
  const dlop_tensor *t = dlop_array_tensor(array);
  ck_assert_int_eq(t->ndim, 3);
  ck_assert_int_eq(t->strides[0], 15);
  ck_assert_int_eq(t->strides[1], 5);
  ck_assert_int_eq(t->strides[2], 1);
  ck_assert_int_eq(dlop_tensor_dtype(t), DLOP_FLOAT64);
  ck_assert_int_eq(dlop_array_numel(array), 30);
  ck_assert_int_eq(dlop_array_dtype(array), DLOP_FLOAT64);
  ck_assert_int_eq(dlop_array_device(array).type, DLOP_DEVICE_CPU);
  ck_assert_ptr_null(dlop_array_stream(array));
  DLOP_CK_OK(dlop_array_synchronize(array));
  memset(dlop_tensor_base(t), 0, 30 * sizeof(double));
  dlop_array_release(array);

  dlop_array *scalar, *empty;
  DLOP_CK_OK(dlop_array_empty(cpu, DLOP_INT8, 0, NULL, &scalar));
  ck_assert_int_eq(dlop_array_numel(scalar), 1);
  int64_t zero[2] = {4, 0};
  DLOP_CK_OK(dlop_array_empty(cpu, DLOP_INT8, 2, zero, &empty));
  ck_assert_int_eq(dlop_array_numel(empty), 0);
  dlop_array_release(scalar);
  dlop_array_release(empty);
}
END_TEST

START_TEST(test_empty_rejects_bad_arguments) {
  dlop_array *array = (dlop_array *)0x1;
  int64_t shape[2] = {2, -3};
  ck_assert_int_eq(dlop_array_empty(cpu, DLOP_FLOAT32, 2, shape, &array), DLOP_SHAPE_ERROR);
  ck_assert_ptr_null(array);
  ck_assert_msg(strstr(dlop_last_error(), "-3") != NULL, "%s", dlop_last_error());
  ck_assert_int_eq(dlop_array_empty(cpu, DLOP_FLOAT32, DLOP_MAX_NDIM + 1, shape, &array),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_int_eq(dlop_array_empty(cpu, (dlop_dtype)42, 1, shape, &array), DLOP_TYPE_ERROR);
  /* more elements, or more bytes, than int64 holds: shapes no array can have (NumPy's "array
   * is too big"), not an allocation that failed */
  int64_t huge[2] = {INT64_MAX / 2, 4};
  ck_assert_int_eq(dlop_array_empty(cpu, DLOP_FLOAT32, 2, huge, &array), DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "dlop_array_empty: shape (4611686018427387903, 4) has "
                                          "more than 2^63-1 elements") != NULL,
                "%s", dlop_last_error());
  int64_t wide[2] = {(int64_t)1 << 60, 4};
  ck_assert_int_eq(dlop_array_empty(cpu, DLOP_FLOAT32, 2, wide, &array), DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "shape (1152921504606846976, 4) of float32 has more "
                                          "than 2^63-1 bytes") != NULL, "%s", dlop_last_error());
  ck_assert_ptr_null(array);
  /* a shape that fits but no machine can allocate: the pool says so */
  int64_t big[2] = {(int64_t)1 << 40, (int64_t)1 << 20};
  ck_assert_int_eq(dlop_array_empty(cpu, DLOP_FLOAT32, 2, big, &array), DLOP_OUT_OF_MEMORY);
  ck_assert_ptr_null(array);
}
END_TEST

START_TEST(test_from_host_to_host_round_trip) {
  for (int dt = 0; dt < DLOP_DTYPE_COUNT; dt++) {
    int64_t shape[2] = {7, 3};
    size_t bytes = 21 * dlop_dtype_size((dlop_dtype)dt);
    unsigned char in[21 * 8], out[21 * 8];
    dlop_test_fill_random(in, (dlop_dtype)dt, 21, 1234 + (uint64_t)dt, -50, 50);
    dlop_array *array;
    DLOP_CK_OK(dlop_array_from_host(cpu, (dlop_dtype)dt, 2, shape, in, &array));
    memset(out, 0xee, sizeof out);
    DLOP_CK_OK(dlop_array_to_host(array, out, bytes));
    ck_assert_msg(memcmp(in, out, bytes) == 0, "dtype %s differs", dlop_dtype_name((dlop_dtype)dt));
    ck_assert_int_eq(dlop_array_to_host(array, out, bytes - 1), DLOP_INVALID_ARGUMENT);
    ck_assert_msg(strstr(dlop_last_error(), "21") != NULL, "%s", dlop_last_error());
    dlop_array_release(array);
  }
}
END_TEST

static int deleter_calls;
static void count_deleter(void *context) {
  deleter_calls++;
  ck_assert_ptr_eq(context, &deleter_calls);
}

START_TEST(test_wrap_calls_deleter_once) {
  float data[6] = {0, 1, 2, 3, 4, 5};
  int64_t shape[2] = {2, 3};
  dlop_tensor t = {data, cpu, 2, {DLOP_DL_FLOAT, 32, 1}, shape, NULL, 0};
  dlop_array *array, *view;
  deleter_calls = 0;
  DLOP_CK_OK(dlop_array_wrap(&t, count_deleter, &deleter_calls, &array));
  shape[0] = 99; /* shape was copied */
  ck_assert_int_eq(dlop_array_tensor(array)->shape[0], 2);
  ck_assert_ptr_eq(dlop_array_tensor(array)->data, data);
  dlop_array_retain(array);
  int64_t view_shape[1] = {3}, view_strides[1] = {1};
  DLOP_CK_OK(dlop_array_view(array, 1, view_shape, view_strides, 3 * sizeof(float), &view));
  dlop_array_release(array);
  dlop_array_release(array);
  ck_assert_int_eq(deleter_calls, 0); /* the view still holds the memory */
  float out[3];
  DLOP_CK_OK(dlop_array_to_host(view, out, sizeof out));
  ck_assert(out[0] == 3 && out[1] == 4 && out[2] == 5);
  dlop_array_release(view);
  ck_assert_int_eq(deleter_calls, 1);

  /* A failed wrap does not call the deleter: the caller still owns the memory. */
  t.dtype.lanes = 2;
  ck_assert_int_eq(dlop_array_wrap(&t, count_deleter, &deleter_calls, &array), DLOP_TYPE_ERROR);
  ck_assert_int_eq(deleter_calls, 1);
  DLOP_CK_OK(dlop_array_wrap(&(dlop_tensor){data, cpu, 0, {DLOP_DL_FLOAT, 32, 1}, NULL, NULL, 0},
                             NULL, NULL, &array));
  dlop_array_release(array);
}
END_TEST

/* Reference: element i of a strided tensor, by index arithmetic. */
static double strided_get(const dlop_tensor *t, int64_t linear) {
  int64_t offset = 0;
  for (int d = t->ndim - 1; d >= 0; d--) {
    offset += (linear % t->shape[d]) * t->strides[d];
    linear /= t->shape[d];
  }
  const char *base = (const char *)dlop_tensor_base(t);
  dlop_dtype dtype = dlop_tensor_dtype(t);
  return dlop_test_get(base + offset * (int64_t)dlop_dtype_size(dtype), dtype, 0);
}

START_TEST(test_copy_to_with_negative_and_zero_strides) {
  for (int dt = 0; dt < DLOP_DTYPE_COUNT; dt++) {
    dlop_dtype dtype = (dlop_dtype)dt;
    size_t esize = dlop_dtype_size(dtype);
    unsigned char storage[60 * 8];
    dlop_test_fill_random(storage, dtype, 60, 99 + (uint64_t)dt, -100, 100);
    /* A 3 x 4 x 5 block viewed reversed along dim 0, broadcast along a new dim, every other
     * element along the last dim reversed: shape (3, 2, 4, 3). */
    int64_t shape[4] = {3, 2, 4, 3};
    int64_t strides[4] = {-20, 0, 5, -2};
    uint64_t offset = (uint64_t)(2 * 20 + 4) * esize;
    dlop_tensor t = {storage, cpu, 4, dlop_dtype_to_dl(dtype), shape, strides, offset};
    dlop_array *source, *copy;
    DLOP_CK_OK(dlop_array_wrap(&t, NULL, NULL, &source));
    DLOP_CK_OK(dlop_array_copy_to(source, cpu, &copy));
    const dlop_tensor *c = dlop_array_tensor(copy);
    ck_assert(dlop_tensor_is_contiguous(c));
    ck_assert_int_eq(dlop_array_numel(copy), 72);
    unsigned char out[72 * 8];
    DLOP_CK_OK(dlop_array_to_host(source, out, 72 * esize)); /* to_host of strided too */
    for (int64_t i = 0; i < 72; i++) {
      double expected = strided_get(&t, i);
      ck_assert_msg(dlop_test_get(dlop_tensor_base(c), dtype, i) == expected,
                    "%s copy_to [%lld]", dlop_dtype_name(dtype), (long long)i);
      ck_assert_msg(dlop_test_get(out, dtype, i) == expected, "%s to_host [%lld]",
                    dlop_dtype_name(dtype), (long long)i);
    }
    dlop_array_release(source);
    dlop_array_release(copy);
  }
}
END_TEST

/* Checks that copy_to of the view (shape, strides, offset in elements) of storage holds the
 * view's elements in C order, byte for byte. */
static void check_strided_copy(unsigned char *storage, dlop_dtype dtype, int32_t ndim,
                               const int64_t *shape, const int64_t *strides, int64_t offset) {
  const int64_t esize = (int64_t)dlop_dtype_size(dtype);
  dlop_tensor t = {storage, cpu, ndim, dlop_dtype_to_dl(dtype), (int64_t *)shape,
                   (int64_t *)strides, (uint64_t)(offset * esize)};
  dlop_array *source, *copy;
  DLOP_CK_OK(dlop_array_wrap(&t, NULL, NULL, &source));
  DLOP_CK_OK(dlop_array_copy_to(source, cpu, &copy));
  const unsigned char *c = dlop_tensor_base(dlop_array_tensor(copy));
  int64_t numel = dlop_array_numel(copy);
  for (int64_t i = 0; i < numel; i++) {
    int64_t element = offset, rest = i;
    for (int32_t d = ndim - 1; d >= 0; d--) {
      element += (rest % shape[d]) * strides[d];
      rest /= shape[d];
    }
    if (memcmp(c + i * esize, storage + element * esize, (size_t)esize) != 0)
      ck_abort_msg("%s copy of a %d-d view [%lld] (element %lld of the storage) differs",
                   dlop_dtype_name(dtype), (int)ndim, (long long)i, (long long)element);
  }
  dlop_array_release(source);
  dlop_array_release(copy);
}

/* Copies of views whose source is contiguous along one dim and the copy along another (the
 * CPU copies these in tiles): partial tiles on both sides, dims between and around the tiled
 * ones (reversed and broadcast among them), a transpose large enough to be split over the
 * thread pool, and a thin one (a dim shorter than a tile's minimum) that goes row by row. */
START_TEST(test_copy_to_transposes) {
  const int64_t count = 300 * 500;
  unsigned char *storage = malloc((size_t)count * 8);
  ck_assert_ptr_nonnull(storage);
  for (int dt = 0; dt < DLOP_DTYPE_COUNT; dt++) {
    dlop_dtype dtype = (dlop_dtype)dt;
    dlop_test_fill_random(storage, dtype, count, 7 + (uint64_t)dt, -100, 100);
    /* (70, 37) read transposed: 37 = 32 + 5 and 70 = 2 x 32 + 6 */
    check_strided_copy(storage, dtype, 2, (int64_t[]){37, 70}, (int64_t[]){1, 37}, 0);
    /* (33, 6, 40) as (40, 6, 33): the tiled dims first and last, one between */
    check_strided_copy(storage, dtype, 3, (int64_t[]){40, 6, 33}, (int64_t[]){1, 40, 240}, 0);
    /* (3, 20, 50) as (3, 2, 50, 20): the outer dim reversed, a broadcast dim */
    check_strided_copy(storage, dtype, 4, (int64_t[]){3, 2, 50, 20},
                       (int64_t[]){-1000, 0, 1, 50}, 2000);
    /* (300, 500) as (500, 300): many tiles, over the pool's threads */
    check_strided_copy(storage, dtype, 2, (int64_t[]){500, 300}, (int64_t[]){1, 500}, 0);
    /* (1000, 5) as (5, 1000): too thin for tiles */
    check_strided_copy(storage, dtype, 2, (int64_t[]){5, 1000}, (int64_t[]){1, 5}, 0);
  }
  free(storage);
}
END_TEST

START_TEST(test_view_bounds_and_sharing) {
  int64_t shape[1] = {10};
  int32_t in[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  dlop_array *base, *view, *reversed;
  DLOP_CK_OK(dlop_array_from_host(cpu, DLOP_INT32, 1, shape, in, &base));
  int64_t view_shape[2] = {2, 3}, view_strides[2] = {3, 1};
  DLOP_CK_OK(dlop_array_view(base, 2, view_shape, view_strides, 4 * sizeof(int32_t), &view));
  int32_t out[6];
  DLOP_CK_OK(dlop_array_to_host(view, out, sizeof out));
  for (int i = 0; i < 6; i++) ck_assert_int_eq(out[i], 4 + i);
  /* Writes through the base are seen by the view: same memory. */
  ((int32_t *)dlop_tensor_base(dlop_array_tensor(base)))[4] = 40;
  DLOP_CK_OK(dlop_array_to_host(view, out, sizeof out));
  ck_assert_int_eq(out[0], 40);
  /* A view of a view, reversed. */
  int64_t rshape[1] = {10}, rstrides[1] = {-1};
  DLOP_CK_OK(dlop_array_view(view, 1, rshape, rstrides, 9 * sizeof(int32_t), &reversed));
  int32_t all[10];
  DLOP_CK_OK(dlop_array_to_host(reversed, all, sizeof all));
  ck_assert_int_eq(all[0], 9);
  ck_assert_int_eq(all[5], 40);
  ck_assert_int_eq(all[9], 0);
  /* Out of bounds: one past the end, and below the start. */
  dlop_array *bad = NULL;
  int64_t long_shape[1] = {11};
  ck_assert_int_eq(dlop_array_view(base, 1, long_shape, NULL, 0, &bad), DLOP_INVALID_ARGUMENT);
  ck_assert_msg(strstr(dlop_last_error(), "spans only") != NULL, "%s", dlop_last_error());
  ck_assert_int_eq(dlop_array_view(base, 1, rshape, rstrides, 8 * sizeof(int32_t), &bad),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_null(bad);
  dlop_array_release(base);
  DLOP_CK_OK(dlop_array_to_host(reversed, all, sizeof all)); /* views keep the memory alive */
  ck_assert_int_eq(all[9], 0);
  dlop_array_release(view);
  dlop_array_release(reversed);
}
END_TEST

/* Shapes times strides that overflow int64 are rejected, not wrapped around into a span that
 * passes the bounds check; so are negative shapes and ndim outside 0..DLOP_MAX_NDIM. */
START_TEST(test_view_and_wrap_reject_overflowing_layouts) {
  int64_t shape[1] = {100};
  dlop_array *base = float32_vector(shape[0]), *view = (dlop_array *)0x1;
  int64_t view_shape[2] = {3, 2}, huge_strides[2] = {INT64_MAX / 2, 1};
  ck_assert_int_eq(dlop_array_view(base, 2, view_shape, huge_strides, 0, &view),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_null(view);
  ck_assert_msg(strstr(dlop_last_error(), "dimension 0") != NULL, "%s", dlop_last_error());
  ck_assert_msg(strstr(dlop_last_error(), "4611686018427387903") != NULL, "%s", dlop_last_error());
  /* The element offsets fit but the bytes do not. */
  int64_t byte_strides[2] = {INT64_MAX / 8, 1};
  ck_assert_int_eq(dlop_array_view(base, 2, view_shape, byte_strides, 0, &view),
                   DLOP_INVALID_ARGUMENT);
  int64_t low_strides[2] = {INT64_MIN / 2, 1};
  ck_assert_int_eq(dlop_array_view(base, 2, view_shape, low_strides, 0, &view),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_int_eq(dlop_array_view(base, 1, shape, NULL, (uint64_t)INT64_MAX + 8, &view),
                   DLOP_INVALID_ARGUMENT);
  int64_t negative[2] = {3, -2};
  ck_assert_int_eq(dlop_array_view(base, 2, negative, NULL, 0, &view), DLOP_SHAPE_ERROR);
  ck_assert_int_eq(dlop_array_view(base, -1, view_shape, NULL, 0, &view), DLOP_INVALID_ARGUMENT);
  ck_assert_int_eq(dlop_array_view(base, DLOP_MAX_NDIM + 1, view_shape, NULL, 0, &view),
                   DLOP_INVALID_ARGUMENT);
  dlop_array_release(base);

  float data[8];
  dlop_tensor t = {data, cpu, 2, {DLOP_DL_FLOAT, 32, 1}, view_shape, huge_strides, 0};
  dlop_array *wrapped = (dlop_array *)0x1;
  deleter_calls = 0;
  ck_assert_int_eq(dlop_array_wrap(&t, count_deleter, &deleter_calls, &wrapped),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_null(wrapped);
  ck_assert_int_eq(deleter_calls, 0);
  ck_assert_msg(strstr(dlop_last_error(), "dimension 0") != NULL, "%s", dlop_last_error());
  t.strides = low_strides;
  ck_assert_int_eq(dlop_array_wrap(&t, NULL, NULL, &wrapped), DLOP_INVALID_ARGUMENT);
  t.strides = NULL;
  t.shape = negative;
  ck_assert_int_eq(dlop_array_wrap(&t, NULL, NULL, &wrapped), DLOP_SHAPE_ERROR);
  t.shape = view_shape;
  t.ndim = DLOP_MAX_NDIM + 1;
  ck_assert_int_eq(dlop_array_wrap(&t, NULL, NULL, &wrapped), DLOP_INVALID_ARGUMENT);
  /* An empty tensor whose other dimensions multiply past int64 is refused as NumPy refuses it
   * (a zero dim does not excuse the others: their products are strides and merged dims)... */
  int64_t empty_shape[3] = {0, INT64_MAX / 2, 4};
  t.ndim = 3;
  t.shape = empty_shape;
  t.strides = NULL;
  ck_assert_int_eq(dlop_array_wrap(&t, NULL, NULL, &wrapped), DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "(0, 4611686018427387903, 4)") != NULL, "%s",
                dlop_last_error());
  /* ...and one whose other dimensions fit is an empty array. */
  int64_t empty_fits[3] = {0, (int64_t)1 << 30, (int64_t)1 << 30};
  t.shape = empty_fits;
  DLOP_CK_OK(dlop_array_wrap(&t, NULL, NULL, &wrapped));
  ck_assert_int_eq(dlop_array_numel(wrapped), 0);
  dlop_array_release(wrapped);
}
END_TEST

/* The first element must be aligned to the element size: kernels dereference typed pointers
 * (a misaligned float32 is UB on the CPU and a context-poisoning fault on CUDA). */
START_TEST(test_view_and_wrap_reject_misaligned_elements) {
  int64_t sixteen = 16, view_shape[1] = {3};
  dlop_array *base = float32_vector(sixteen), *view = (dlop_array *)0x1;
  for (uint64_t offset = 1; offset < 4; offset++) {
    ck_assert_int_eq(dlop_array_view(base, 1, view_shape, NULL, offset, &view),
                     DLOP_INVALID_ARGUMENT);
    ck_assert_ptr_null(view);
    ck_assert_msg(strstr(dlop_last_error(), "float32") != NULL, "%s", dlop_last_error());
    ck_assert_msg(strstr(dlop_last_error(), "4-byte") != NULL, "%s", dlop_last_error());
  }
  ck_assert_msg(strstr(dlop_last_error(), "byte_offset 3") != NULL, "%s", dlop_last_error());
  DLOP_CK_OK(dlop_array_view(base, 1, view_shape, NULL, 8, &view));
  dlop_array_release(view);
  /* An empty view is never dereferenced. */
  int64_t empty_shape[1] = {0};
  DLOP_CK_OK(dlop_array_view(base, 1, empty_shape, NULL, 1, &view));
  dlop_array_release(view);
  /* A uint8 view of the same memory may start anywhere. */
  dlop_array *bytes;
  DLOP_CK_OK(dlop_array_empty(cpu, DLOP_UINT8, 1, &sixteen, &bytes));
  DLOP_CK_OK(dlop_array_view(bytes, 1, view_shape, NULL, 5, &view));
  dlop_array_release(view);
  dlop_array_release(bytes);
  dlop_array_release(base);

  double storage[4];
  int64_t wrap_shape[1] = {2};
  char *raw = (char *)storage;
  dlop_tensor t = {raw + 4, cpu, 1, {DLOP_DL_FLOAT, 64, 1}, wrap_shape, NULL, 0};
  dlop_array *wrapped = (dlop_array *)0x1;
  ck_assert_int_eq(dlop_array_wrap(&t, NULL, NULL, &wrapped), DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_null(wrapped);
  ck_assert_msg(strstr(dlop_last_error(), "float64") != NULL, "%s", dlop_last_error());
  /* A misaligned data pointer made good by byte_offset is fine (data + byte_offset counts)... */
  t.byte_offset = 4;
  DLOP_CK_OK(dlop_array_wrap(&t, NULL, NULL, &wrapped));
  /* ...but a view counts its byte_offset from that data pointer again. */
  ck_assert_int_eq(dlop_array_view(wrapped, 1, wrap_shape, NULL, 0, &view), DLOP_INVALID_ARGUMENT);
  DLOP_CK_OK(dlop_array_view(wrapped, 1, wrap_shape, NULL, 4, &view));
  dlop_array_release(view);
  dlop_array_release(wrapped);
  t.data = storage;
  t.byte_offset = 2;
  ck_assert_int_eq(dlop_array_wrap(&t, NULL, NULL, &wrapped), DLOP_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_release_returns_memory_to_pool) {
  dlop_memory_stats before = {.struct_size = sizeof before}, after = before;
  DLOP_CK_OK(dlop_memory_stats_get(cpu, &before));
  int64_t shape[1] = {1000};
  for (int i = 0; i < 10; i++) {
    dlop_array *array;
    DLOP_CK_OK(dlop_array_empty(cpu, DLOP_FLOAT32, 1, shape, &array));
    dlop_array_retain(array);
    dlop_array_release(array);
    dlop_array_release(array);
  }
  DLOP_CK_OK(dlop_memory_stats_get(cpu, &after));
  ck_assert_uint_eq(after.bytes_in_use, before.bytes_in_use);
  ck_assert_uint_le(after.driver_allocations - before.driver_allocations, 1);
}
END_TEST

START_TEST(test_tensor_copy_errors) {
  float a[4], b[6];
  int64_t sa[1] = {4}, sb[1] = {6};
  dlop_tensor ta = {a, cpu, 1, {DLOP_DL_FLOAT, 32, 1}, sa, NULL, 0};
  dlop_tensor tb = {b, cpu, 1, {DLOP_DL_FLOAT, 32, 1}, sb, NULL, 0};
  ck_assert_int_eq(dlop__tensor_copy(&ta, &tb, NULL), DLOP_SHAPE_ERROR);
  tb.shape = sa;
  tb.dtype.bits = 64;
  ck_assert_int_eq(dlop__tensor_copy(&ta, &tb, NULL), DLOP_TYPE_ERROR);
}
END_TEST

int main(void) {
  /* the large transpose below splits over three threads, whatever this machine has */
  setenv("DLOP_NUM_THREADS", "3", 0);
  Suite *suite = suite_create("array");
  TCase *tc = tcase_create("array");
  tcase_add_test(tc, test_empty_is_contiguous);
  tcase_add_test(tc, test_empty_rejects_bad_arguments);
  tcase_add_test(tc, test_from_host_to_host_round_trip);
  tcase_add_test(tc, test_wrap_calls_deleter_once);
  tcase_add_test(tc, test_copy_to_with_negative_and_zero_strides);
  tcase_add_test(tc, test_copy_to_transposes);
  tcase_add_test(tc, test_view_bounds_and_sharing);
  tcase_add_test(tc, test_view_and_wrap_reject_overflowing_layouts);
  tcase_add_test(tc, test_view_and_wrap_reject_misaligned_elements);
  tcase_add_test(tc, test_release_returns_memory_to_pool);
  tcase_add_test(tc, test_tensor_copy_errors);
  suite_add_tcase(suite, tc);
  return dlop_test_run_suite(suite);
}
