/* test_dtype.c — dtypes: sizes, names, float classification, the DLPack round trip for every
 * dtype, and triples that are not dlop dtypes (vector lanes, odd widths, unknown codes); the
 * inline helpers of dtype.h and tensor.h on out-of-range dtypes and huge empty shapes. */
#include <string.h>

#include "test_support.h"

START_TEST(test_sizes_and_names) {
  static const size_t sizes[DLOP_DTYPE_COUNT] = {1, 1, 2, 4, 8, 1, 2, 2, 4, 8};
  static const char *const names[DLOP_DTYPE_COUNT] = {"bool",    "int8",     "int16",   "int32",
                                                      "int64",   "uint8",    "float16", "bfloat16",
                                                      "float32", "float64"};
  for (int i = 0; i < DLOP_DTYPE_COUNT; i++) {
    ck_assert_uint_eq(dlop_dtype_size((dlop_dtype)i), sizes[i]);
    ck_assert_str_eq(dlop_dtype_name((dlop_dtype)i), names[i]);
  }
  ck_assert_uint_eq(dlop_dtype_size(DLOP_DTYPE_INVALID), 0);
  ck_assert_uint_eq(dlop_dtype_size((dlop_dtype)DLOP_DTYPE_COUNT), 0);
  ck_assert_str_eq(dlop_dtype_name(DLOP_DTYPE_INVALID), "invalid");
  ck_assert_str_eq(dlop_dtype_name((dlop_dtype)99), "invalid");
}
END_TEST

START_TEST(test_float_classification) {
  for (int i = 0; i < DLOP_DTYPE_COUNT; i++) {
    int expected = i == DLOP_FLOAT16 || i == DLOP_BFLOAT16 || i == DLOP_FLOAT32 || i == DLOP_FLOAT64;
    ck_assert_int_eq(dlop_dtype_is_float((dlop_dtype)i) != 0, expected);
  }
  ck_assert(!dlop_dtype_is_float(DLOP_DTYPE_INVALID));
  ck_assert_uint_eq(__builtin_popcount(DLOP_DTYPES_ALL), DLOP_DTYPE_COUNT);
  ck_assert_uint_eq(DLOP_DTYPES_FLOAT & DLOP_DTYPES_INT, 0);
}
END_TEST

START_TEST(test_dlpack_round_trip) {
  for (int i = 0; i < DLOP_DTYPE_COUNT; i++) {
    dlop_dl_dtype dl = dlop_dtype_to_dl((dlop_dtype)i);
    ck_assert_uint_eq(dl.lanes, 1);
    ck_assert_uint_eq(dl.bits, dlop_dtype_size((dlop_dtype)i) * 8);
    ck_assert_int_eq(dlop_dtype_from_dl(dl), i);
    int64_t shape[1] = {1};
    dlop_tensor t = {NULL, {DLOP_DEVICE_CPU, 0}, 1, dl, shape, NULL, 0};
    ck_assert_int_eq(dlop_tensor_dtype(&t), i);
  }
  /* A few triples spelled out, as DLPack producers (NumPy, PyTorch) write them. */
  ck_assert_int_eq(dlop_dtype_from_dl((dlop_dl_dtype){DLOP_DL_FLOAT, 32, 1}), DLOP_FLOAT32);
  ck_assert_int_eq(dlop_dtype_from_dl((dlop_dl_dtype){DLOP_DL_BFLOAT, 16, 1}), DLOP_BFLOAT16);
  ck_assert_int_eq(dlop_dtype_from_dl((dlop_dl_dtype){DLOP_DL_BOOL, 8, 1}), DLOP_BOOL);
  ck_assert_int_eq(dlop_dtype_from_dl((dlop_dl_dtype){DLOP_DL_UINT, 8, 1}), DLOP_UINT8);
}
END_TEST

START_TEST(test_invalid_triples) {
  const dlop_dl_dtype invalid[] = {
      {DLOP_DL_FLOAT, 32, 4}, /* vector lanes */
      {DLOP_DL_FLOAT, 32, 0}, {DLOP_DL_INT, 24, 1}, {DLOP_DL_UINT, 16, 1}, {DLOP_DL_BFLOAT, 32, 1},
      {DLOP_DL_BOOL, 1, 1},   {3, 64, 1} /* opaque handle */,           {5, 64, 1} /* complex */};
  for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
    ck_assert_int_eq(dlop_dtype_from_dl(invalid[i]), DLOP_DTYPE_INVALID);
    int64_t shape[1] = {1};
    dlop_tensor t = {NULL, {DLOP_DEVICE_CPU, 0}, 1, invalid[i], shape, NULL, 0};
    ck_assert_int_eq(dlop_tensor_dtype(&t), DLOP_DTYPE_INVALID);
  }
  dlop_dl_dtype none = dlop_dtype_to_dl(DLOP_DTYPE_INVALID);
  ck_assert_int_eq(dlop_dtype_from_dl(none), DLOP_DTYPE_INVALID);
}
END_TEST

/* Out-of-range dtypes never reach a shift (that is undefined behaviour, and on x86 a shift by
 * 38 is a shift by 6, which would call dtype 38 a float16). volatile: no constant folding. */
START_TEST(test_helpers_with_out_of_range_dtypes) {
  volatile int values[] = {DLOP_DTYPE_INVALID, DLOP_DTYPE_COUNT, 32 + DLOP_FLOAT16,
                           32 + DLOP_FLOAT32, 64 + DLOP_FLOAT64, -32 + DLOP_FLOAT16, 1000};
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
    dlop_dtype dtype = (dlop_dtype)values[i];
    ck_assert_msg(!dlop_dtype_is_float(dtype), "dtype %d", values[i]);
    ck_assert_uint_eq(dlop_dtype_size(dtype), 0);
    ck_assert_str_eq(dlop_dtype_name(dtype), "invalid");
    ck_assert_uint_eq(dlop_dtype_to_dl(dtype).lanes, 0);
    if (values[i] < 0 || values[i] >= 32) ck_assert_uint_eq(DLOP_DTYPE_BIT(values[i]), 0);
  }
  ck_assert_uint_eq(DLOP_DTYPE_BIT(DLOP_FLOAT64), 1u << 9);
}
END_TEST

/* An empty tensor may have other dimensions whose product exceeds int64 (libdlop's arrays
 * refuse that, as NumPy does, but a plugin may be handed one by another host): numel is still
 * 0 and is_contiguous must not overflow on the way. */
START_TEST(test_tensor_helpers_with_huge_empty_shapes) {
  int64_t shape[3] = {INT64_MAX / 2, 4, 0}, strides[3] = {0, 0, 1};
  dlop_tensor t = {NULL, {DLOP_DEVICE_CPU, 0}, 3, {DLOP_DL_FLOAT, 32, 1}, shape, strides, 0};
  ck_assert_int_eq(dlop_tensor_numel(&t), 0);
  ck_assert(dlop_tensor_is_contiguous(&t));
  int64_t front[3] = {0, INT64_MAX / 2, 4}, front_strides[3] = {7, 4, 1};
  t.shape = front;
  t.strides = front_strides;
  ck_assert_int_eq(dlop_tensor_numel(&t), 0);
  ck_assert(dlop_tensor_is_contiguous(&t));
}
END_TEST

int main(void) {
  Suite *suite = suite_create("dtype");
  TCase *tc = tcase_create("dtype");
  tcase_add_test(tc, test_sizes_and_names);
  tcase_add_test(tc, test_float_classification);
  tcase_add_test(tc, test_dlpack_round_trip);
  tcase_add_test(tc, test_invalid_triples);
  tcase_add_test(tc, test_helpers_with_out_of_range_dtypes);
  tcase_add_test(tc, test_tensor_helpers_with_huge_empty_shapes);
  suite_add_tcase(suite, tc);
  return dlop_test_run_suite(suite);
}
