/* test_shape_overflow.c — element counts, byte sizes and strided extents that would leave
 * int64: the helpers of <dlop/kit/checked_size.h> at their limits, the kit's broadcast, tensor
 * checks and strided loop, and the runtime's entry points (arrays, graph inputs, make_node,
 * function runs, a plugin's thunk called directly) refusing such shapes with a message that
 * names them. The huge cases are zero-stride views of one element: nothing big is allocated. */
#include <dlop/kit/kernel_util.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_runner.h"
#include "op_runner.h"
#include "test_support.h"

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};
#define TWO_32 ((int64_t)1 << 32)

#define CK_MESSAGE(text, expected)                                                           \
  ck_assert_msg(strstr((text), (expected)) != NULL, "expected \"%s\" in: %s", (expected), (text))

/* ---- the helpers -------------------------------------------------------------------------- */

START_TEST(multiply_and_add_report_overflow) {
  int64_t out = 7;
  ck_assert_int_eq(dlop_mul_overflow(INT64_MAX, 1, &out), 0);
  ck_assert_int_eq(out, INT64_MAX);
  ck_assert_int_eq(dlop_mul_overflow(TWO_32, TWO_32 / 2 - 1, &out), 0);
  ck_assert_int_eq(dlop_mul_overflow(TWO_32, TWO_32 / 2, &out), 1); /* 2^63 */
  ck_assert_int_eq(dlop_mul_overflow(INT64_MIN, -1, &out), 1);
  ck_assert_int_eq(dlop_mul_overflow(-TWO_32, TWO_32 / 2, &out), 0); /* -2^63 fits */
  ck_assert_int_eq(out, INT64_MIN);
  ck_assert_int_eq(dlop_add_overflow(INT64_MAX, 1, &out), 1);
  ck_assert_int_eq(dlop_add_overflow(INT64_MIN, -1, &out), 1);
  ck_assert_int_eq(dlop_add_overflow(INT64_MAX, INT64_MIN, &out), 0);
  ck_assert_int_eq(out, -1);
}
END_TEST

/* NumPy's rule: the nonzero dims times the element size at most 2^63-1; a zero dim empties the
 * shape without excusing the others; unknown dims count as 1. */
START_TEST(shape_size_follows_numpy) {
  int64_t numel = 5, bytes = 5;
  const int64_t plain[3] = {2, 3, 4};
  ck_assert_int_eq(dlop_shape_size(plain, 3, 8, &numel, &bytes), DLOP_SIZE_FITS);
  ck_assert_int_eq(numel, 24);
  ck_assert_int_eq(bytes, 192);
  ck_assert_int_eq(dlop_shape_size(NULL, 0, 4, &numel, &bytes), DLOP_SIZE_FITS); /* 0-d */
  ck_assert_int_eq(numel, 1);
  ck_assert_int_eq(bytes, 4);
  const int64_t wraps_to_zero[3] = {TWO_32, TWO_32, 2}; /* 2^65: wraps to 0 unchecked */
  ck_assert_int_eq(dlop_shape_size(wraps_to_zero, 3, 0, &numel, NULL), DLOP_SIZE_TOO_MANY_ELEMENTS);
  const int64_t limit[1] = {INT64_MAX};
  ck_assert_int_eq(dlop_shape_size(limit, 1, 1, &numel, &bytes), DLOP_SIZE_FITS);
  ck_assert_int_eq(bytes, INT64_MAX);
  ck_assert_int_eq(dlop_shape_size(limit, 1, 2, &numel, NULL), DLOP_SIZE_TOO_MANY_BYTES);
  const int64_t float64_limit[2] = {INT64_MAX / 8, 1}, float64_over[2] = {INT64_MAX / 8 + 1, 1};
  ck_assert_int_eq(dlop_shape_size(float64_limit, 2, 8, NULL, NULL), DLOP_SIZE_FITS);
  ck_assert_int_eq(dlop_shape_size(float64_over, 2, 8, NULL, NULL), DLOP_SIZE_TOO_MANY_BYTES);
  const int64_t empty_fits[3] = {0, TWO_32, TWO_32 / 4};
  ck_assert_int_eq(dlop_shape_size(empty_fits, 3, 1, &numel, &bytes), DLOP_SIZE_FITS);
  ck_assert_int_eq(numel, 0);
  ck_assert_int_eq(bytes, 0);
  const int64_t empty_too_big[3] = {TWO_32, 0, TWO_32};
  ck_assert_int_eq(dlop_shape_size(empty_too_big, 3, 1, &numel, NULL), DLOP_SIZE_TOO_MANY_ELEMENTS);
  const int64_t unknown[2] = {DLOP_DIM_UNKNOWN, 3};
  ck_assert_int_eq(dlop_shape_size(unknown, 2, 4, &numel, &bytes), DLOP_SIZE_FITS);
  ck_assert_int_eq(numel, -1);
  ck_assert_int_eq(bytes, -1);
  const int64_t unknown_too_big[3] = {DLOP_DIM_UNKNOWN, TWO_32, TWO_32};
  ck_assert_int_eq(dlop_shape_size(unknown_too_big, 3, 1, NULL, NULL), DLOP_SIZE_TOO_MANY_ELEMENTS);
  const int64_t unknown_empty[2] = {DLOP_DIM_UNKNOWN, 0};
  ck_assert_int_eq(dlop_shape_size(unknown_empty, 2, 4, &numel, NULL), DLOP_SIZE_FITS);
  ck_assert_int_eq(numel, 0);
}
END_TEST

START_TEST(size_messages_name_the_shape) {
  char error[256];
  const int64_t shape[3] = {TWO_32, TWO_32, 2}, wide[2] = {(int64_t)1 << 31, (int64_t)1 << 31};
  ck_assert_int_eq(dlop_check_shape_size("broadcast_to", shape, 3, DLOP_FLOAT64, NULL, error,
                                         sizeof error),
                   DLOP_SHAPE_ERROR);
  ck_assert_str_eq(error, "broadcast_to: shape (4294967296, 4294967296, 2) has more than 2^63-1 "
                          "elements");
  ck_assert_int_eq(dlop_check_shape_size(NULL, wide, 2, DLOP_FLOAT64, NULL, error, sizeof error),
                   DLOP_SHAPE_ERROR);
  ck_assert_str_eq(error, "shape (2147483648, 2147483648) of float64 has more than 2^63-1 bytes");
  /* the same shape of int8 fits */
  int64_t numel = 0;
  ck_assert_int_eq(dlop_check_shape_size("x", wide, 2, DLOP_INT8, &numel, error, sizeof error),
                   DLOP_OK);
  ck_assert_int_eq(numel, (int64_t)1 << 62);
}
END_TEST

START_TEST(contiguous_strides_are_checked) {
  int64_t strides[3];
  const int64_t shape[3] = {5, 3, 4};
  ck_assert_int_eq(dlop_contiguous_strides(shape, 3, strides), 0);
  ck_assert_int_eq(strides[0], 12);
  ck_assert_int_eq(strides[1], 4);
  ck_assert_int_eq(strides[2], 1);
  const int64_t too_big[3] = {2, TWO_32, TWO_32};
  ck_assert_int_eq(dlop_contiguous_strides(too_big, 3, strides), 1);
  const int64_t outer_huge[2] = {INT64_MAX, 1}; /* the outermost dim's product is never needed */
  ck_assert_int_eq(dlop_contiguous_strides(outer_huge, 2, strides), 0);
}
END_TEST

/* [low, high) is exact; the check counts one step past the end along each dim of size > 1, and
 * nothing for size-1 dims, whose strides frameworks set freely. */
START_TEST(strided_extent_is_exact_and_checked) {
  int64_t low = 1, high = 1;
  int32_t dim = 9;
  const int64_t shape[2] = {3, 4}, strides[2] = {-4, 1};
  ck_assert_int_eq(dlop_strided_extent(shape, strides, 2, 4, 32, &low, &high, &dim), 0);
  ck_assert_int_eq(low, 0);   /* 32 + 2 * -4 * 4 */
  ck_assert_int_eq(high, 48); /* 32 + 3 * 4 + 4 */
  ck_assert_int_eq(dim, -1);
  const int64_t broadcast[2] = {TWO_32, TWO_32}, zero[2] = {0, 0};
  ck_assert_int_eq(dlop_strided_extent(broadcast, zero, 2, 8, 0, &low, &high, &dim), 0);
  ck_assert_int_eq(high - low, 8);
  const int64_t one[2] = {1, 7}, free_stride[2] = {INT64_MAX, 1};
  ck_assert_int_eq(dlop_strided_extent(one, free_stride, 2, 8, 0, &low, &high, &dim), 0);
  ck_assert_int_eq(high, 56);
  const int64_t pair[2] = {3, 2}, huge[2] = {INT64_MAX / 2, 1};
  ck_assert_int_eq(dlop_strided_extent(pair, huge, 2, 4, 0, &low, &high, &dim), 1);
  ck_assert_int_eq(dim, 0);
  /* the span (2 - 1) * 2^62 fits, one step past the end (2 * 2^62) does not */
  const int64_t two[1] = {2}, quarter[1] = {(int64_t)1 << 62};
  ck_assert_int_eq(dlop_strided_extent(two, quarter, 1, 1, 0, &low, &high, &dim), 1);
  const int64_t min_stride[1] = {INT64_MIN};
  ck_assert_int_eq(dlop_strided_extent(two, min_stride, 1, 1, 0, &low, &high, &dim), 1);
  const int64_t plain[1] = {8}, unit[1] = {1};
  ck_assert_int_eq(dlop_strided_extent(plain, unit, 1, 1, (uint64_t)INT64_MAX + 1, &low, &high, &dim),
                   1);
  ck_assert_int_eq(dim, -1);
  ck_assert_int_eq(dlop_strided_extent(plain, unit, 1, 8, (uint64_t)INT64_MAX - 32, &low, &high, &dim),
                   1);
  const int64_t empty[2] = {0, 5}, wild[2] = {INT64_MAX, INT64_MAX};
  ck_assert_int_eq(dlop_strided_extent(empty, wild, 2, 8, 16, &low, &high, &dim), 0);
  ck_assert_int_eq(low, 16);
  ck_assert_int_eq(high, 16);
  char error[512];
  dlop_set_extent_error(error, sizeof error, "op: input 1", pair, huge, 2, 4, 0, 0);
  ck_assert_str_eq(error, "op: input 1: shape (3, 2) with strides (4611686018427387903, 1) of "
                          "4-byte elements at byte offset 0 reaches beyond the 2^63-1 bytes of "
                          "int64 (dimension 0)");
}
END_TEST

/* dlop_tensor_size is dlop_shape_size and dlop_strided_extent's check in one pass: the same
 * answers on the same layouts. */
START_TEST(tensor_size_agrees_with_the_two_checks) {
  double one = 1.0;
  int64_t numel = 9;
  int32_t dim = 9;
  int64_t shape[3] = {3, 1, 4}, strides[3] = {-4, INT64_MAX, 1};
  dlop_tensor t = {&one, CPU, 3, {DLOP_DL_FLOAT, 64, 1}, shape, strides, 64};
  ck_assert_int_eq(dlop_tensor_size(&t, 8, &numel, &dim), DLOP_SIZE_FITS);
  ck_assert_int_eq(numel, 12);
  t.strides = NULL;
  ck_assert_int_eq(dlop_tensor_size(&t, 8, &numel, &dim), DLOP_SIZE_FITS);
  t.strides = strides;
  shape[0] = TWO_32, shape[1] = TWO_32;
  ck_assert_int_eq(dlop_tensor_size(&t, 8, &numel, &dim), DLOP_SIZE_TOO_MANY_ELEMENTS);
  shape[0] = (int64_t)1 << 30, shape[1] = (int64_t)1 << 30, shape[2] = 8; /* 2^63 bytes */
  strides[0] = strides[1] = strides[2] = 0;
  ck_assert_int_eq(dlop_tensor_size(&t, 1, &numel, &dim), DLOP_SIZE_TOO_MANY_ELEMENTS);
  shape[2] = 4; /* 2^62 elements, 2^65 bytes */
  ck_assert_int_eq(dlop_tensor_size(&t, 8, &numel, &dim), DLOP_SIZE_TOO_MANY_BYTES);
  ck_assert_int_eq(dlop_tensor_size(&t, 1, &numel, &dim), DLOP_SIZE_FITS);
  ck_assert_int_eq(numel, (int64_t)1 << 62);
  shape[0] = 3, shape[1] = 2, shape[2] = 1;
  strides[0] = INT64_MAX / 4, strides[1] = 1;
  ck_assert_int_eq(dlop_tensor_size(&t, 8, &numel, &dim), DLOP_SIZE_STRIDES_TOO_FAR);
  ck_assert_int_eq(dim, 0);
  strides[0] = 1;
  t.byte_offset = (uint64_t)INT64_MAX;
  ck_assert_int_eq(dlop_tensor_size(&t, 8, &numel, &dim), DLOP_SIZE_STRIDES_TOO_FAR);
  ck_assert_int_eq(dim, -1);
  shape[1] = 0; /* empty: no reach */
  ck_assert_int_eq(dlop_tensor_size(&t, 8, &numel, &dim), DLOP_SIZE_FITS);
  ck_assert_int_eq(numel, 0);
  /* against the two checks on a few layouts */
  const int64_t layouts[][2][2] = {{{5, 7}, {7, 1}}, {{5, 7}, {-7, -1}}, {{2, 3}, {INT64_MAX / 16, 1}},
                                   {{1, 3}, {INT64_MIN, 1}}, {{4, 1}, {INT64_MAX / 2, 5}},
                                   {{4, 3}, {0, 0}}, {{4, 3}, {3, 1}}, {{4, 3}, {-3, 1}}};
  /* offsets near the top: the reach, and one element past the highest byte, must both fit */
  const uint64_t offsets[] = {0, (uint64_t)INT64_MAX - 4, (uint64_t)INT64_MAX - 60,
                              (uint64_t)INT64_MAX - 100};
  for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
    for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++) {
      int64_t lshape[2] = {layouts[i][0][0], layouts[i][0][1]};
      int64_t lstrides[2] = {layouts[i][1][0], layouts[i][1][1]}, low, high;
      dlop_tensor l = {&one, CPU, 2, {DLOP_DL_FLOAT, 64, 1}, lshape, lstrides, offsets[o]};
      int both = dlop_shape_size(lshape, 2, 8, NULL, NULL) != DLOP_SIZE_FITS
                     ? 1
                     : dlop_strided_extent(lshape, lstrides, 2, 8, offsets[o], &low, &high, NULL);
      ck_assert_msg((dlop_tensor_size(&l, 8, NULL, NULL) != DLOP_SIZE_FITS) == both,
                    "layout %zu, offset %zu", i, o);
    }
  }
  /* zero strides near the top: only one element past the highest byte leaves int64 */
  {
    int64_t zshape[2] = {4, 3}, zstrides[2] = {0, 0}, low, high;
    dlop_tensor z = {&one, CPU, 2, {DLOP_DL_FLOAT, 64, 1}, zshape, zstrides,
                     (uint64_t)INT64_MAX - 4};
    ck_assert_int_eq(dlop_strided_extent(zshape, zstrides, 2, 8, z.byte_offset, &low, &high, NULL), 1);
    ck_assert_int_eq(dlop_tensor_size(&z, 8, NULL, NULL), DLOP_SIZE_STRIDES_TOO_FAR);
  }
}
END_TEST

/* ---- the kit ------------------------------------------------------------------------------ */

START_TEST(kit_broadcast_refuses_huge_results) {
  char error[512];
  int64_t out[DLOP_MAX_NDIM];
  int32_t ndim = 0;
  const int64_t column[2] = {TWO_32, 1}, row[2] = {1, TWO_32};
  ck_assert_int_eq(dlop_broadcast_shapes(column, 2, row, 2, out, &ndim, error, sizeof error),
                   DLOP_SHAPE_ERROR);
  ck_assert_str_eq(error, "broadcasting (4294967296, 1) with (1, 4294967296) gives shape "
                          "(4294967296, 4294967296), which has more than 2^63-1 elements");
  /* unknown dims count as 1: (?, 2^32) with (2^32, 1) is refused while the graph is built */
  const int64_t unknown_row[2] = {DLOP_DIM_UNKNOWN, TWO_32};
  ck_assert_int_eq(dlop_broadcast_shapes(unknown_row, 2, column, 2, out, &ndim, error, sizeof error),
                   DLOP_SHAPE_ERROR);
  /* elements that fit, bytes that do not: the types' check */
  dlop_type a = dlop_test_type(DLOP_FLOAT64, 2, (const int64_t[]){(int64_t)1 << 31, 1});
  dlop_type b = dlop_test_type(DLOP_FLOAT64, 2, (const int64_t[]){1, (int64_t)1 << 31});
  dlop_type result;
  ck_assert_int_eq(dlop_broadcast_shapes(a.shape, 2, b.shape, 2, out, &ndim, error, sizeof error),
                   DLOP_OK);
  ck_assert_int_eq(dlop_broadcast_types(&a, &b, &result, error, sizeof error), DLOP_SHAPE_ERROR);
  CK_MESSAGE(error, "gives shape (2147483648, 2147483648) of float64, which has more than 2^63-1 bytes");
  a.dtype = DLOP_INT8;
  DLOP_CK_OK(dlop_broadcast_types(&a, &b, &result, error, sizeof error));
  ck_assert_int_eq(result.shape[0], (int64_t)1 << 31);
}
END_TEST

START_TEST(kit_tensor_check_refuses_wrapping_tensors) {
  char error[512];
  double one = 1.0;
  int64_t shape[3] = {TWO_32, TWO_32, 2}, strides[3] = {0, 0, 0};
  dlop_tensor t = {&one, CPU, 3, {DLOP_DL_FLOAT, 64, 1}, shape, strides, 0};
  dlop_type want = dlop_test_type(DLOP_FLOAT64, 3, (const int64_t[]){-1, -1, -1});
  ck_assert_int_eq(dlop_check_tensors("add", "input", &t, 1, &want, CPU, error, sizeof error),
                   DLOP_SHAPE_ERROR);
  ck_assert_str_eq(error, "add: input 0: shape (4294967296, 4294967296, 2) has more than 2^63-1 "
                          "elements");
  /* a zero dim does not excuse the others */
  shape[1] = 0, shape[2] = TWO_32;
  ck_assert_int_eq(dlop_check_tensors("add", "input", &t, 1, &want, CPU, error, sizeof error),
                   DLOP_SHAPE_ERROR);
  /* the shape fits; the strides reach past int64 */
  shape[0] = 3, shape[1] = 2, shape[2] = 1;
  strides[0] = INT64_MAX / 4, strides[1] = 1;
  ck_assert_int_eq(dlop_check_tensors("add", "output", &t, 1, &want, CPU, error, sizeof error),
                   DLOP_INVALID_ARGUMENT);
  CK_MESSAGE(error, "add: output 0: shape (3, 2, 1) with strides (2305843009213693951, 1, 0) of "
                    "8-byte elements");
  /* a zero-stride view of one element broadcast to 2^62 float64... bytes */
  shape[0] = (int64_t)1 << 31, shape[1] = (int64_t)1 << 31, shape[2] = 1;
  strides[0] = strides[1] = strides[2] = 0;
  ck_assert_int_eq(dlop_check_tensors("add", "input", &t, 1, &want, CPU, error, sizeof error),
                   DLOP_SHAPE_ERROR);
  CK_MESSAGE(error, "of float64 has more than 2^63-1 bytes");
  /* ...fits as int8 */
  t.dtype = (dlop_dl_dtype){DLOP_DL_INT, 8, 1};
  want.dtype = DLOP_INT8;
  ck_assert_int_eq(dlop_check_tensors("add", "input", &t, 1, &want, CPU, error, sizeof error),
                   DLOP_OK);
}
END_TEST

START_TEST(kit_strided_loop_refuses_wrapping_layouts) {
  char error[512];
  float x = 1.0f, y = 0.0f;
  dlop_strided_loop loop;
  int64_t y_shape[2] = {TWO_32, TWO_32}, y_strides[2] = {0, 0};
  int64_t x_shape[2] = {1, 1}, x_strides[2] = {0, 0};
  dlop_tensor out = {&y, CPU, 2, {DLOP_DL_FLOAT, 32, 1}, y_shape, y_strides, 0};
  dlop_tensor in = {&x, CPU, 2, {DLOP_DL_FLOAT, 32, 1}, x_shape, x_strides, 0};
  ck_assert_int_eq(dlop_strided_loop_init(&loop, &out, &in, 1, "neg", error, sizeof error),
                   DLOP_SHAPE_ERROR);
  ck_assert_str_eq(error, "neg: output: shape (4294967296, 4294967296) has more than 2^63-1 "
                          "elements");
  /* an output whose steps reach past int64 */
  y_shape[0] = 3, y_shape[1] = 2;
  y_strides[0] = INT64_MAX / 8, y_strides[1] = 1;
  ck_assert_int_eq(dlop_strided_loop_init(&loop, &out, &in, 1, "neg", error, sizeof error),
                   DLOP_INVALID_ARGUMENT);
  CK_MESSAGE(error, "neg: output: shape (3, 2) with strides (1152921504606846975, 1)");
  /* an input of its own huge C-contiguous shape (it does not broadcast either: refused first
   * for its size, not wrapped) */
  int64_t big[3] = {TWO_32, TWO_32, 2};
  dlop_tensor contiguous_in = {&x, CPU, 3, {DLOP_DL_FLOAT, 32, 1}, big, NULL, 0};
  y_strides[0] = 2, y_strides[1] = 1;
  ck_assert_int_eq(dlop_strided_loop_init(&loop, &out, &contiguous_in, 1, "neg", error, sizeof error),
                   DLOP_SHAPE_ERROR);
}
END_TEST

/* A plugin built on the kit cannot be made to wrap by a shape, whoever calls it: add's thunk,
 * called directly with zero-stride views whose broadcast has 2^64 elements. */
START_TEST(kit_thunk_refuses_wrapping_shapes_from_any_host) {
  const dlop_op_desc *add = dlop_test_find_op("add");
  char error[1024];
  double one = 1.0, out_value = 0.0;
  int64_t a_shape[2] = {TWO_32, 1}, b_shape[2] = {1, TWO_32}, zeros[2] = {0, 0};
  int64_t out_shape[2] = {TWO_32, TWO_32};
  dlop_type unknown = dlop_test_type(DLOP_FLOAT64, 2, (const int64_t[]){-1, -1});
  dlop_type inputs[2] = {unknown, unknown}, output;
  dlop_thunk thunk;
  ck_assert_int_eq(dlop_test_make_node(add, NULL, inputs, 2, &output, error, sizeof error), DLOP_OK);
  /* infer_shape on the concrete shapes refuses the 2^64-element output */
  dlop_type concrete[2] = {dlop_test_type(DLOP_FLOAT64, 2, a_shape),
                           dlop_test_type(DLOP_FLOAT64, 2, b_shape)};
  dlop_type concrete_out = output;
  ck_assert_int_eq(dlop_test_infer_shape(add, NULL, concrete, 2, &concrete_out, error, sizeof error),
                   DLOP_SHAPE_ERROR);
  CK_MESSAGE(error, "broadcasting (4294967296, 1) with (1, 4294967296) gives shape "
                    "(4294967296, 4294967296), which has more than 2^63-1 elements");
  /* and a host that skips infer_shape and hands the thunk such an output */
  dlop_test_make_thunk_ok(add, NULL, inputs, 2, &output, CPU, &thunk);
  dlop_tensor tensors[2] = {{&one, CPU, 2, {DLOP_DL_FLOAT, 64, 1}, a_shape, zeros, 0},
                            {&one, CPU, 2, {DLOP_DL_FLOAT, 64, 1}, b_shape, zeros, 0}};
  dlop_tensor out = {&out_value, CPU, 2, {DLOP_DL_FLOAT, 64, 1}, out_shape, zeros, 0};
  ck_assert_int_eq(dlop_test_run(&thunk, tensors, 2, &out, NULL, error, sizeof error),
                   DLOP_SHAPE_ERROR);
  CK_MESSAGE(error, "(4294967296, 4294967296) has more than 2^63-1 elements");
  ck_assert(out_value == 0.0); /* nothing was written */
  dlop_test_destroy_thunk(&thunk);
}
END_TEST

/* ---- the runtime ------------------------------------------------------------------------- */

static double one_element = 1.0;

/* A zero-stride float64 view of one element with the given shape, wrapped (borrowed). */
static int wrap_broadcast(int32_t ndim, int64_t *shape, dlop_array **array) {
  static int64_t zeros[DLOP_MAX_NDIM];
  dlop_tensor t = {&one_element, CPU, ndim, {DLOP_DL_FLOAT, 64, 1}, shape, zeros, 0};
  return dlop_array_wrap(&t, NULL, NULL, array);
}

START_TEST(arrays_refuse_shapes_that_wrap) {
  dlop_array *array = (dlop_array *)0x1;
  int64_t wraps[3] = {TWO_32, TWO_32, 2};
  ck_assert_int_eq(wrap_broadcast(3, wraps, &array), DLOP_SHAPE_ERROR);
  ck_assert_ptr_null(array);
  ck_assert_str_eq(dlop_last_error(), "dlop_array_wrap: shape (4294967296, 4294967296, 2) has "
                                      "more than 2^63-1 elements");
  int64_t bytes[2] = {(int64_t)1 << 31, (int64_t)1 << 31}; /* 2^62 float64 elements */
  ck_assert_int_eq(wrap_broadcast(2, bytes, &array), DLOP_SHAPE_ERROR);
  CK_MESSAGE(dlop_last_error(), "of float64 has more than 2^63-1 bytes");
  ck_assert_int_eq(dlop_array_empty(CPU, DLOP_FLOAT32, 3, wraps, &array), DLOP_SHAPE_ERROR);
  CK_MESSAGE(dlop_last_error(), "dlop_array_empty: shape (4294967296, 4294967296, 2)");
  /* a view of a small array with a zero-stride huge shape */
  int64_t fits[2] = {TWO_32, TWO_32 / 32}, zeros[3] = {0, 0, 0};
  dlop_array *base, *view = (dlop_array *)0x1;
  ck_assert_int_eq(wrap_broadcast(2, fits, &base), DLOP_OK); /* 2^59 float64: 2^62 bytes fit */
  ck_assert_int_eq(dlop_array_numel(base), (int64_t)1 << 59);
  ck_assert_int_eq(dlop_array_view(base, 3, wraps, zeros, 0, &view), DLOP_SHAPE_ERROR);
  ck_assert_ptr_null(view);
  CK_MESSAGE(dlop_last_error(), "dlop_array_view: shape (4294967296, 4294967296, 2)");
  dlop_array_release(base);
}
END_TEST

static dlop_graph *graph;
static void graph_setup(void) { graph = dlop_test_new_graph(); }
static void graph_teardown(void) { dlop_graph_destroy(graph); }

/* Static shapes: refused where they are first known, as shape errors. */
START_TEST(graph_refuses_static_shapes_that_wrap) {
  dlop_var *x, *a, *b, *y = (dlop_var *)0x1;
  int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40}, one = 1;
  ck_assert_int_eq(dlop_graph_input(graph, "x", DLOP_FLOAT32, 2, huge, &x), DLOP_SHAPE_ERROR);
  ck_assert_str_eq(dlop_last_error(), "input 'x': shape (1099511627776, 1099511627776) has more "
                                      "than 2^63-1 elements");
  int64_t unknown_huge[3] = {DLOP_DIM_UNKNOWN, (int64_t)1 << 40, (int64_t)1 << 40};
  ck_assert_int_eq(dlop_graph_input(graph, "u", DLOP_INT8, 3, unknown_huge, &x), DLOP_SHAPE_ERROR);
  CK_MESSAGE(dlop_last_error(), "input 'u': shape (?, 1099511627776, 1099511627776)");
  /* broadcast_to's target, the reported case */
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT64, 1, &one, &x));
  const int64_t target[3] = {TWO_32, TWO_32, 2};
  ck_assert_int_eq(dlop_test_apply_ints(graph, "broadcast_to", x, "shape", target, 3, &y),
                   DLOP_SHAPE_ERROR);
  ck_assert_str_eq(dlop_last_error(), "broadcast_to: shape (4294967296, 4294967296, 2) has more "
                                      "than 2^63-1 elements");
  const int64_t empty_target[3] = {0, (int64_t)1 << 40, (int64_t)1 << 40};
  ck_assert_int_eq(dlop_test_apply_ints(graph, "broadcast_to", x, "shape", empty_target, 3, &y),
                   DLOP_SHAPE_ERROR);
  /* an elementwise op on static shapes whose broadcast wraps */
  int64_t column[2] = {TWO_32, 1}, row[2] = {1, TWO_32};
  DLOP_CK_OK(dlop_graph_input(graph, "a", DLOP_FLOAT64, 2, column, &a));
  DLOP_CK_OK(dlop_graph_input(graph, "b", DLOP_FLOAT64, 2, row, &b));
  dlop_var *ab[2] = {a, b};
  ck_assert_int_eq(dlop_graph_apply(graph, "add", ab, 2, NULL, 0, &y, 1), DLOP_SHAPE_ERROR);
  ck_assert_ptr_null(y);
  CK_MESSAGE(dlop_last_error(), "add: broadcasting (4294967296, 1) with (1, 4294967296) gives "
                                "shape (4294967296, 4294967296)");
  /* matmul's broadcast batch dims */
  int64_t batch_a[4] = {TWO_32, 1, 2, 2}, batch_b[4] = {1, TWO_32, 2, 2};
  DLOP_CK_OK(dlop_graph_input(graph, "p", DLOP_FLOAT64, 4, batch_a, &a));
  DLOP_CK_OK(dlop_graph_input(graph, "q", DLOP_FLOAT64, 4, batch_b, &b));
  dlop_var *pq[2] = {a, b};
  ck_assert_int_eq(dlop_graph_apply(graph, "matmul", pq, 2, NULL, 0, &y, 1), DLOP_SHAPE_ERROR);
  CK_MESSAGE(dlop_last_error(), "(4294967296, 4294967296)");
  /* reshape's target */
  const int64_t reshape_target[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
  ck_assert_int_eq(dlop_test_apply_ints(graph, "reshape", x, "shape", reshape_target, 2, &y),
                   DLOP_SHAPE_ERROR);
  CK_MESSAGE(dlop_last_error(), "reshape: shape (1099511627776, 1099511627776) has more than");
}
END_TEST

/* Shapes known only at run time: the function refuses them before allocating or running. */
START_TEST(function_runs_refuse_shapes_that_wrap) {
  const int64_t unknown[4] = {DLOP_DIM_UNKNOWN, DLOP_DIM_UNKNOWN, DLOP_DIM_UNKNOWN,
                              DLOP_DIM_UNKNOWN};
  dlop_var *a, *b, *sum, *product;
  DLOP_CK_OK(dlop_graph_input(graph, "a", DLOP_FLOAT64, 2, unknown, &a));
  DLOP_CK_OK(dlop_graph_input(graph, "b", DLOP_FLOAT64, 2, unknown, &b));
  dlop_var *ab[2] = {a, b};
  DLOP_CK_OK(dlop_graph_apply(graph, "add", ab, 2, NULL, 0, &sum, 1));
  dlop_function *add = dlop_test_compile(graph, ab, 2, sum, CPU);
  int64_t column[2] = {TWO_32, 1}, row[2] = {1, TWO_32};
  dlop_array *inputs[2], *output = (dlop_array *)0x1;
  DLOP_CK_OK(wrap_broadcast(2, column, &inputs[0]));
  DLOP_CK_OK(wrap_broadcast(2, row, &inputs[1]));
  dlop_memory_stats before = dlop_test_memory_stats(CPU);
  ck_assert_int_eq(dlop_function_run(add, inputs, 2, &output, 1, NULL), DLOP_SHAPE_ERROR);
  ck_assert_ptr_null(output);
  CK_MESSAGE(dlop_last_error(), "node #0 add: broadcasting (4294967296, 1) with (1, 4294967296) "
                                "gives shape (4294967296, 4294967296), which has more than "
                                "2^63-1 elements");
  dlop_memory_stats after = dlop_test_memory_stats(CPU);
  ck_assert_uint_eq(after.driver_allocations, before.driver_allocations);
  /* the same function still runs ordinary shapes */
  int64_t small_column[2] = {3, 1}, small_row[2] = {1, 2};
  dlop_array *small[2];
  DLOP_CK_OK(wrap_broadcast(2, small_column, &small[0]));
  DLOP_CK_OK(wrap_broadcast(2, small_row, &small[1]));
  DLOP_CK_OK(dlop_function_run(add, small, 2, &output, 1, NULL));
  double *values = dlop_test_read_back(output);
  ck_assert_int_eq(dlop_array_numel(output), 6);
  for (int i = 0; i < 6; i++) ck_assert(values[i] == 2.0);
  free(values);
  dlop_test_release_arrays(3, small[0], small[1], output);
  dlop_function_destroy(add);

  /* matmul with broadcast batch dims known only at run time */
  dlop_var *p, *q;
  DLOP_CK_OK(dlop_graph_input(graph, "p", DLOP_FLOAT64, 4, unknown, &p));
  DLOP_CK_OK(dlop_graph_input(graph, "q", DLOP_FLOAT64, 4, unknown, &q));
  dlop_var *pq[2] = {p, q};
  DLOP_CK_OK(dlop_graph_apply(graph, "matmul", pq, 2, NULL, 0, &product, 1));
  dlop_function *matmul = dlop_test_compile(graph, pq, 2, product, CPU);
  int64_t batch_a[4] = {TWO_32, 1, 1, 1}, batch_b[4] = {1, TWO_32, 1, 1};
  dlop_array *batches[2];
  DLOP_CK_OK(wrap_broadcast(4, batch_a, &batches[0]));
  DLOP_CK_OK(wrap_broadcast(4, batch_b, &batches[1]));
  output = (dlop_array *)0x1;
  ck_assert_int_eq(dlop_function_run(matmul, batches, 2, &output, 1, NULL), DLOP_SHAPE_ERROR);
  ck_assert_ptr_null(output);
  CK_MESSAGE(dlop_last_error(), "(4294967296, 4294967296)");
  dlop_test_release_arrays(4, inputs[0], inputs[1], batches[0], batches[1]);
  dlop_function_destroy(matmul);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("shape_overflow");
  TCase *helpers = dlop_test_tcase(suite, "helpers", 0, NULL, NULL);
  dlop_test_add_tests(helpers,
                      multiply_and_add_report_overflow,
                      shape_size_follows_numpy,
                      size_messages_name_the_shape,
                      contiguous_strides_are_checked,
                      strided_extent_is_exact_and_checked,
                      tensor_size_agrees_with_the_two_checks,
                      NULL);
  TCase *kit = dlop_test_tcase(suite, "kit", 0, NULL, NULL);
  dlop_test_add_tests(kit,
                      kit_broadcast_refuses_huge_results,
                      kit_tensor_check_refuses_wrapping_tensors,
                      kit_strided_loop_refuses_wrapping_layouts,
                      kit_thunk_refuses_wrapping_shapes_from_any_host,
                      NULL);
  TCase *runtime = dlop_test_tcase(suite, "runtime", 0, graph_setup, graph_teardown);
  dlop_test_add_tests(runtime,
                      arrays_refuse_shapes_that_wrap,
                      graph_refuses_static_shapes_that_wrap,
                      function_runs_refuse_shapes_that_wrap,
                      NULL);
  return dlop_test_run_suite(suite);
}
