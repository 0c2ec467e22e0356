/* test_dtype.c — dtypes: sizes, names, float classification, the DLPack round trip for every
 * dtype, and triples that are not dlop dtypes (vector lanes, odd widths, unknown codes). */
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

int main(void) {
  Suite *suite = suite_create("dtype");
  TCase *tc = tcase_create("dtype");
  tcase_add_test(tc, test_sizes_and_names);
  tcase_add_test(tc, test_float_classification);
  tcase_add_test(tc, test_dlpack_round_trip);
  tcase_add_test(tc, test_invalid_triples);
  suite_add_tcase(suite, tc);
  return dlop_test_run_suite(suite);
}
