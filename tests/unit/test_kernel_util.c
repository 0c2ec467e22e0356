/* test_kernel_util.c — the plugin-side helpers in <dlop/kernel_util.h>: error formatting,
 * float16/bfloat16 conversions (against test_support's independent reference), broadcasting
 * of static shapes, tensor checks, and the strided loop's collapsing and cursor. */
#include <dlop/kernel_util.h>
#include <math.h>
#include <string.h>

#include "test_support.h"

START_TEST(test_set_error_truncates_and_terminates) {
  char small[8];
  memset(small, 'x', sizeof small);
  dlop_set_error(small, sizeof small, "%s %d", "abcdefgh", 42);
  ck_assert_str_eq(small, "abcdefg");
  dlop_set_error(NULL, 0, "ignored %d", 1); /* no buffer: nothing happens */
}
END_TEST

START_TEST(test_half_conversions_match_reference) {
  for (uint32_t h = 0; h < 65536; h++) {
    float f = dlop_half_to_float((uint16_t)h), r = dlop_test_half_to_float((uint16_t)h);
    ck_assert_msg((isnan(f) && isnan(r)) || memcmp(&f, &r, 4) == 0, "half 0x%04x: %g vs %g", h, f, r);
    if (!isnan(f)) ck_assert_uint_eq(dlop_float_to_half(f), h); /* round trip is exact */
  }
  /* every float16 midpoint and its neighbours: ties go to even */
  for (uint32_t h = 0; h < 0x7c00; h++) {
    float lo = dlop_half_to_float((uint16_t)h), hi = dlop_half_to_float((uint16_t)(h + 1));
    float mid = (float)(((double)lo + (double)hi) / 2.0);
    float probes[3] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
    for (int k = 0; k < 3; k++) {
      ck_assert_uint_eq(dlop_float_to_half(probes[k]), dlop_test_float_to_half(probes[k]));
      ck_assert_uint_eq(dlop_float_to_half(-probes[k]), dlop_test_float_to_half(-probes[k]));
    }
  }
  ck_assert_uint_eq(dlop_float_to_half(INFINITY), 0x7c00);
  ck_assert_uint_eq(dlop_float_to_half(-INFINITY), 0xfc00);
  ck_assert_uint_eq(dlop_float_to_half(65520.0f), 0x7c00); /* rounds up to inf */
  ck_assert_uint_eq(dlop_float_to_half(65519.0f), 0x7bff);
  ck_assert_uint_eq(dlop_float_to_half(1e-10f), 0);
  ck_assert(isnan(dlop_half_to_float(dlop_float_to_half(NAN))));
}
END_TEST

START_TEST(test_bfloat16_conversions_match_reference) {
  for (uint32_t b = 0; b < 65536; b++) {
    float f = dlop_bfloat16_to_float((uint16_t)b), r = dlop_test_bfloat16_to_float((uint16_t)b);
    ck_assert(memcmp(&f, &r, 4) == 0);
    if (!isnan(f)) ck_assert_uint_eq(dlop_float_to_bfloat16(f), b);
  }
  uint64_t state = 7;
  for (int i = 0; i < 1000000; i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t bits = (uint32_t)(state >> 32);
    float f;
    memcpy(&f, &bits, 4);
    if (isnan(f)) {
      ck_assert(isnan(dlop_bfloat16_to_float(dlop_float_to_bfloat16(f))));
      continue;
    }
    ck_assert_uint_eq(dlop_float_to_bfloat16(f), dlop_test_float_to_bfloat16(f));
  }
}
END_TEST

START_TEST(test_broadcast_shapes) {
  int64_t out[DLOP_MAX_NDIM];
  int32_t ndim = -1;
  char error[128];
  int64_t a[2] = {3, 1}, b[2] = {1, 4}, c[1] = {5}, d[2] = {3, 4}, u[2] = {DLOP_DIM_UNKNOWN, 1};
  ck_assert_int_eq(dlop_broadcast_shapes(a, 2, b, 2, out, &ndim, error, sizeof error), DLOP_OK);
  ck_assert_int_eq(ndim, 2);
  ck_assert_int_eq(out[0], 3);
  ck_assert_int_eq(out[1], 4);
  ck_assert_int_eq(dlop_broadcast_shapes(d, 2, c, 1, out, &ndim, error, sizeof error), DLOP_SHAPE_ERROR);
  ck_assert_str_eq(error, "cannot broadcast (3, 4) with (5,)");
  ck_assert_int_eq(dlop_broadcast_shapes(NULL, 0, c, 1, out, &ndim, error, sizeof error), DLOP_OK);
  ck_assert_int_eq(ndim, 1);
  ck_assert_int_eq(out[0], 5);
  ck_assert_int_eq(dlop_broadcast_shapes(u, 2, b, 2, out, &ndim, error, sizeof error), DLOP_OK);
  ck_assert_int_eq(out[0], DLOP_DIM_UNKNOWN);
  ck_assert_int_eq(out[1], 4);
  ck_assert_int_eq(dlop_broadcast_shapes(u, 2, d, 2, out, &ndim, error, sizeof error), DLOP_OK);
  ck_assert_int_eq(out[0], 3);
  char text[64];
  ck_assert_str_eq(dlop_format_shape(u, 2, text, sizeof text), "(?, 1)");
  ck_assert_str_eq(dlop_format_shape(NULL, 0, text, sizeof text), "()");
}
END_TEST

static dlop_tensor make_tensor(void *data, dlop_dtype dtype, int32_t ndim, int64_t *shape,
                               int64_t *strides) {
  dlop_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.type = DLOP_DEVICE_CPU;
  t.ndim = ndim;
  t.dtype = dlop_dtype_to_dl(dtype);
  t.shape = shape;
  t.strides = strides;
  return t;
}

START_TEST(test_strided_loop_collapses_and_walks) {
  float out[60], in[60];
  int64_t shape[3] = {3, 4, 5}, transposed[3] = {1, 3, 12};
  char error[256];
  dlop_strided_loop loop;
  /* both contiguous: one flat dim */
  dlop_tensor y = make_tensor(out, DLOP_FLOAT32, 3, shape, NULL);
  dlop_tensor x = make_tensor(in, DLOP_FLOAT32, 3, shape, NULL);
  ck_assert_int_eq(dlop_strided_loop_init(&loop, &y, &x, 1, "t", error, sizeof error), DLOP_OK);
  ck_assert_int_eq(loop.layout.ndim, 1);
  ck_assert_int_eq(loop.numel, 60);
  ck_assert(dlop_strided_loop_is_contiguous(&loop));
  /* transposed input: not collapsible, and the cursor visits every element exactly once */
  x.strides = transposed;
  ck_assert_int_eq(dlop_strided_loop_init(&loop, &y, &x, 1, "t", error, sizeof error), DLOP_OK);
  ck_assert(!dlop_strided_loop_is_contiguous(&loop));
  for (int64_t begin = 0; begin <= 60; begin += 7) {
    dlop_strided_cursor cursor;
    char *p[DLOP_KERNEL_MAX_OPERANDS];
    int64_t n, seen = 0;
    dlop_strided_cursor_init(&cursor, &loop, begin, 60);
    while ((n = dlop_strided_cursor_next(&cursor, &loop, p)) > 0) {
      for (int64_t i = 0; i < n; i++) {
        int64_t linear = begin + seen + i;
        int64_t i0 = linear / 20, i1 = (linear / 5) % 4, i2 = linear % 5;
        float *yp = (float *)p[0] + i * loop.layout.strides[0][loop.layout.ndim - 1];
        float *xp = (float *)p[1] + i * loop.layout.strides[1][loop.layout.ndim - 1];
        ck_assert_ptr_eq(yp, &out[i0 * 20 + i1 * 5 + i2]);
        ck_assert_ptr_eq(xp, &in[i0 * 1 + i1 * 3 + i2 * 12]);
      }
      seen += n;
    }
    ck_assert_int_eq(seen, 60 - begin);
  }
  /* a shape that does not broadcast */
  int64_t bad_shape[1] = {4};
  dlop_tensor bad = make_tensor(in, DLOP_FLOAT32, 1, bad_shape, NULL);
  ck_assert_int_eq(dlop_strided_loop_init(&loop, &y, &bad, 1, "t", error, sizeof error), DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(error, "(4,)") && strstr(error, "(3, 4, 5)"), "%s", error);
}
END_TEST

START_TEST(test_check_tensors) {
  float data[4];
  int64_t shape[1] = {4};
  dlop_tensor t = make_tensor(data, DLOP_FLOAT32, 1, shape, NULL);
  dlop_type want;
  char error[256];
  memset(&want, 0, sizeof want);
  want.dtype = DLOP_FLOAT32;
  want.ndim = 1;
  want.shape[0] = DLOP_DIM_UNKNOWN;
  ck_assert_int_eq(dlop_check_tensors("op", "input", &t, 1, &want, DLOP_DEVICE_CPU, error, sizeof error), DLOP_OK);
  want.shape[0] = 5;
  ck_assert_int_eq(dlop_check_tensors("op", "input", &t, 1, &want, DLOP_DEVICE_CPU, error, sizeof error),
                   DLOP_SHAPE_ERROR);
  ck_assert_str_eq(error, "op: input 0 has shape (4,), expected (5,)");
  want.shape[0] = 4;
  want.dtype = DLOP_FLOAT64;
  ck_assert_int_eq(dlop_check_tensors("op", "input", &t, 1, &want, DLOP_DEVICE_CPU, error, sizeof error),
                   DLOP_TYPE_ERROR);
  ck_assert_str_eq(error, "op: input 0 has dtype float32, expected float64");
  ck_assert_int_eq(dlop_check_tensors("op", "input", &t, 1, &want, DLOP_DEVICE_CUDA, error, sizeof error),
                   DLOP_DEVICE_MISMATCH);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("kernel_util");
  TCase *tc = tcase_create("helpers");
  tcase_add_test(tc, test_set_error_truncates_and_terminates);
  tcase_add_test(tc, test_half_conversions_match_reference);
  tcase_add_test(tc, test_bfloat16_conversions_match_reference);
  tcase_add_test(tc, test_broadcast_shapes);
  tcase_add_test(tc, test_strided_loop_collapses_and_walks);
  tcase_add_test(tc, test_check_tensors);
  suite_add_tcase(suite, tc);
  return dlop_test_run_suite(suite);
}
