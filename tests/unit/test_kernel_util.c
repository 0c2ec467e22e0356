/* test_kernel_util.c — the plugin-side helpers in <dlop/kit/kernel_util.h>: error formatting,
 * float16/bfloat16 conversions (against test_support's independent reference), broadcasting
 * of static shapes, tensor checks, the strided loop, and <dlop/kit/elementwise_thunk.h> (its
 * CPU run, kernel names and CUDA launch choices, against a fake host). */
#include <dlop/kit/elementwise_thunk.h>
#include <dlop/kit/kernel_util.h>
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
    DLOP_CK_EACH((isnan(f) && isnan(r)) || memcmp(&f, &r, 4) == 0, "half 0x%04x: %g vs %g", h, f, r);
    if (!isnan(f)) /* round trip is exact */
      DLOP_CK_EACH(dlop_float_to_half(f) == h, "half 0x%04x: %g rounds back to 0x%04x", h, f,
                   dlop_float_to_half(f));
  }
  /* every float16 midpoint and its neighbours: ties go to even */
  for (uint32_t h = 0; h < 0x7c00; h++) {
    float lo = dlop_half_to_float((uint16_t)h), hi = dlop_half_to_float((uint16_t)(h + 1));
    float mid = (float)(((double)lo + (double)hi) / 2.0);
    float probes[3] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
    for (int k = 0; k < 6; k++) {
      float probe = k < 3 ? probes[k] : -probes[k - 3];
      DLOP_CK_EACH(dlop_float_to_half(probe) == dlop_test_float_to_half(probe),
                   "%.9g: float16 0x%04x, expected 0x%04x", probe, dlop_float_to_half(probe),
                   dlop_test_float_to_half(probe));
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
    DLOP_CK_EACH(memcmp(&f, &r, 4) == 0, "bfloat16 0x%04x: %g vs %g", b, f, r);
    if (!isnan(f))
      DLOP_CK_EACH(dlop_float_to_bfloat16(f) == b, "bfloat16 0x%04x: %g rounds back to 0x%04x", b,
                   f, dlop_float_to_bfloat16(f));
  }
  uint64_t state = 7;
  for (int i = 0; i < 1000000; i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t bits = (uint32_t)(state >> 32);
    float f;
    memcpy(&f, &bits, 4);
    if (isnan(f)) {
      DLOP_CK_EACH(isnan(dlop_bfloat16_to_float(dlop_float_to_bfloat16(f))),
                   "NaN 0x%08x is no NaN in bfloat16", bits);
      continue;
    }
    DLOP_CK_EACH(dlop_float_to_bfloat16(f) == dlop_test_float_to_bfloat16(f),
                 "%.9g (0x%08x): bfloat16 0x%04x, expected 0x%04x", f, bits,
                 dlop_float_to_bfloat16(f), dlop_test_float_to_bfloat16(f));
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
  /* ints (axes, patterns) print as given: -1 is a value there, not an unknown dim */
  ck_assert_str_eq(dlop_format_ints(u, 2, text, sizeof text), "(-1, 1)");
  ck_assert_str_eq(dlop_format_ints(c, 1, text, sizeof text), "(5,)");
  ck_assert_str_eq(dlop_format_ints(NULL, 0, text, sizeof text), "()");
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

static const dlop_device cpu0 = {DLOP_DEVICE_CPU, 0};
static const dlop_device cuda0 = {DLOP_DEVICE_CUDA, 0};
static const dlop_device cuda1 = {DLOP_DEVICE_CUDA, 1};

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
  ck_assert_int_eq(dlop_check_tensors("op", "input", &t, 1, &want, cpu0, error, sizeof error), DLOP_OK);
  want.shape[0] = 5;
  ck_assert_int_eq(dlop_check_tensors("op", "input", &t, 1, &want, cpu0, error, sizeof error),
                   DLOP_SHAPE_ERROR);
  ck_assert_str_eq(error, "op: input 0 has shape (4,), expected (5,)");
  want.shape[0] = 4;
  want.dtype = DLOP_FLOAT64;
  ck_assert_int_eq(dlop_check_tensors("op", "input", &t, 1, &want, cpu0, error, sizeof error),
                   DLOP_TYPE_ERROR);
  ck_assert_str_eq(error, "op: input 0 has dtype float32, expected float64");
  ck_assert_int_eq(dlop_check_tensors("op", "input", &t, 1, &want, cuda0, error, sizeof error),
                   DLOP_DEVICE_MISMATCH);
  ck_assert_str_eq(error, "op: input 0 is on cpu:0, but the thunk was made for cuda:0 (make a thunk per device)");
  /* the same device type on another ordinal is another device */
  want.dtype = DLOP_FLOAT32;
  t.device = cuda1;
  ck_assert_int_eq(dlop_check_tensors("op", "output", &t, 1, &want, cuda0, error, sizeof error),
                   DLOP_DEVICE_MISMATCH);
  ck_assert_str_eq(error, "op: output 0 is on cuda:1, but the thunk was made for cuda:0 (make a thunk per device)");
  ck_assert_int_eq(dlop_check_tensors("op", "output", &t, 1, &want, cuda1, error, sizeof error), DLOP_OK);
}
END_TEST

START_TEST(test_check_tensors_rejects_misaligned_data) {
  double storage[4];
  int64_t shape[1] = {2};
  dlop_tensor t = make_tensor(storage, DLOP_FLOAT32, 1, shape, NULL);
  dlop_type want;
  char error[256], expected[256];
  memset(&want, 0, sizeof want);
  want.dtype = DLOP_FLOAT32;
  want.ndim = 1;
  want.shape[0] = DLOP_DIM_UNKNOWN;
  t.byte_offset = 4; /* a whole float32 further: fine */
  ck_assert_int_eq(dlop_check_tensors("op", "input", &t, 1, &want, cpu0, error, sizeof error), DLOP_OK);
  t.byte_offset = 6;
  ck_assert_int_eq(dlop_check_tensors("op", "input", &t, 1, &want, cpu0, error, sizeof error),
                   DLOP_INVALID_ARGUMENT);
  snprintf(expected, sizeof expected,
           "op: input 0 is misaligned: data %p + byte_offset 6 is 2 bytes past a multiple of its "
           "float32 element size 4", (void *)storage);
  ck_assert_str_eq(error, expected);
  t.data = (char *)storage + 1; /* the data pointer itself misaligned, no offset */
  t.byte_offset = 0;
  ck_assert_int_eq(dlop_check_tensors("op", "input", &t, 1, &want, cpu0, error, sizeof error),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_msg(strstr(error, "1 bytes past") != NULL, "%s", error);
  t.byte_offset = 3; /* together aligned again */
  ck_assert_int_eq(dlop_check_tensors("op", "input", &t, 1, &want, cpu0, error, sizeof error), DLOP_OK);
  /* one-byte elements are always aligned; empty tensors are never read */
  t.dtype = dlop_dtype_to_dl(DLOP_INT8);
  want.dtype = DLOP_INT8;
  t.byte_offset = 0;
  ck_assert_int_eq(dlop_check_tensors("op", "input", &t, 1, &want, cpu0, error, sizeof error), DLOP_OK);
  t.dtype = dlop_dtype_to_dl(DLOP_FLOAT64);
  want.dtype = DLOP_FLOAT64;
  shape[0] = 0;
  ck_assert_int_eq(dlop_check_tensors("op", "input", &t, 1, &want, cpu0, error, sizeof error), DLOP_OK);
}
END_TEST

/* ---- elementwise_thunk.h, against a fake host that records what the helper asks of it ---- */

static struct {
  int cpu_calls, unloads, launches;
  int64_t cpu_numel;
  dlop_dtype cpu_dtype;
  const void *image;
  char names[3][64];
  int num_names;
  void *launched;
  uint32_t grid0, grid1, block0;
  int record_args;       /* kernel arguments to keep the first 4 bytes of, at the next launch */
  uint32_t arg_words[8]; /* ... kept here */
} fake;

/* The CPU kernels, one per dtype: each run of the loop adds its elements. */
static void fake_cpu_run(dlop_dtype dtype, int64_t n) {
  fake.cpu_calls++;
  fake.cpu_numel += n;
  fake.cpu_dtype = dtype;
}

static void fake_cpu_float32(char *const *pointers, const int64_t *strides, int64_t n,
                             const void *params) {
  fake_cpu_run(DLOP_FLOAT32, n);
}

static void fake_cpu_int8(char *const *pointers, const int64_t *strides, int64_t n,
                          const void *params) {
  fake_cpu_run(DLOP_INT8, n);
}

static const dlop_elementwise_cpu_kernel fake_cpu_kernels[DLOP_DTYPE_COUNT] = {
    [DLOP_FLOAT32] = fake_cpu_float32, [DLOP_INT8] = fake_cpu_int8};

static int fake_module_load(int32_t device_id, const void *image, void **module, char *error,
                            size_t error_size) {
  fake.image = image;
  *module = &fake;
  return DLOP_OK;
}

static int fake_module_unload(void *module) {
  fake.unloads++;
  return DLOP_OK;
}

/* The "function" handed back is the index of the name + 1, so a launch says which it was. */
static int fake_module_function(void *module, const char *name, void **function, char *error,
                                size_t error_size) {
  snprintf(fake.names[fake.num_names], sizeof fake.names[0], "%s", name);
  *function = (void *)(uintptr_t)(++fake.num_names);
  return DLOP_OK;
}

static int fake_device_attribute(int32_t device_id, int32_t attribute, int32_t *value) {
  *value = attribute == 16 ? 3 : 0;
  return DLOP_OK;
}

static int fake_launch(void *function, const uint32_t grid[3], const uint32_t block[3],
                       uint32_t shared_bytes, void *stream, void **kernel_args, char *error,
                       size_t error_size) {
  fake.launches++;
  fake.launched = function;
  fake.grid0 = grid[0];
  fake.grid1 = grid[1];
  fake.block0 = block[0];
  for (int k = 0; k < fake.record_args && k < 8; k++) memcpy(&fake.arg_words[k], kernel_args[k], 4);
  return DLOP_OK;
}

static dlop_host_api fake_host_table;
static const dlop_host_api *fake_host(void) { return &fake_host_table; }

static const unsigned char fake_fatbin[16];

static const dlop_elementwise_spec binary_spec = {
    .op_name = "mul",
    .host = fake_host,
    .num_inputs = 2,
    .broadcast = 1,
    .cpu_dtypes = DLOP_DTYPE_BIT(DLOP_FLOAT32) | DLOP_DTYPE_BIT(DLOP_INT8),
    .cuda_dtypes = DLOP_DTYPE_BIT(DLOP_FLOAT32),
    .cpu_kernels = fake_cpu_kernels,
    .cuda_fatbin = fake_fatbin,
    .cuda_kernel_prefix = "dlop_mul",
    .cuda_contiguous_vectors = 2,
    .cuda_rows = DLOP_ELEMENTWISE_ROWS,
};

static const dlop_elementwise_spec unary_spec = {
    .op_name = "neg",
    .host = fake_host,
    .num_inputs = 1,
    .broadcast = 0,
    .cpu_dtypes = DLOP_DTYPE_BIT(DLOP_FLOAT32),
    .cuda_dtypes = DLOP_DTYPE_BIT(DLOP_FLOAT32),
    .cpu_kernels = fake_cpu_kernels,
    .cuda_fatbin = NULL, /* as in a build without CUDA */
};

static void reset_fake(void) {
  memset(&fake, 0, sizeof fake);
  memset(&fake_host_table, 0, sizeof fake_host_table);
  fake_host_table.struct_size = sizeof fake_host_table;
  fake_host_table.cuda_module_load = fake_module_load;
  fake_host_table.cuda_module_unload = fake_module_unload;
  fake_host_table.cuda_module_function = fake_module_function;
  fake_host_table.cuda_device_attribute = fake_device_attribute;
  fake_host_table.cuda_launch = fake_launch;
}

static dlop_type make_type(dlop_dtype dtype, int32_t ndim, int64_t d0, int64_t d1) {
  dlop_type t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.ndim = ndim;
  t.shape[0] = d0;
  t.shape[1] = d1;
  return t;
}

static dlop_thunk_args make_thunk_args(dlop_type *inputs, int32_t num_inputs, dlop_type *output,
                                       int32_t device_type, dlop_thunk *thunk, char *error,
                                       size_t error_size) {
  dlop_thunk_args a;
  memset(&a, 0, sizeof a);
  memset(thunk, 0, sizeof *thunk);
  a.struct_size = sizeof a;
  a.num_inputs = num_inputs;
  a.inputs = inputs;
  a.num_outputs = 1;
  a.outputs = output;
  a.device.type = device_type;
  a.thunk = thunk;
  a.error = error;
  a.error_size = error_size;
  return a;
}

static dlop_run_args make_run_args(const dlop_tensor *inputs, int32_t num_inputs,
                                   const dlop_tensor *output, char *error, size_t error_size) {
  dlop_run_args run;
  memset(&run, 0, sizeof run);
  run.struct_size = sizeof run;
  run.num_inputs = num_inputs;
  run.inputs = inputs;
  run.num_outputs = 1;
  run.outputs = output;
  run.error = error;
  run.error_size = error_size;
  return run;
}

START_TEST(test_elementwise_make_thunk_rejects_with_clear_messages) {
  dlop_type in[2] = {make_type(DLOP_FLOAT32, 1, 3, 0), make_type(DLOP_FLOAT64, 1, 3, 0)};
  dlop_type out = make_type(DLOP_FLOAT32, 1, 3, 0);
  dlop_thunk thunk;
  char error[256];
  dlop_thunk_args a = make_thunk_args(in, 1, &out, DLOP_DEVICE_CPU, &thunk, error, sizeof error);
  reset_fake();
  ck_assert_int_eq(dlop_elementwise_make_thunk(&binary_spec, &a), DLOP_INVALID_ARGUMENT);
  ck_assert_str_eq(error, "mul: make_thunk with 1 inputs and 1 outputs, expected 2 and 1");
  a.num_inputs = 2;
  ck_assert_int_eq(dlop_elementwise_make_thunk(&binary_spec, &a), DLOP_UNSUPPORTED);
  ck_assert_str_eq(error, "mul: no kernel for input dtypes float32 and float64 and output dtype float32");
  in[1].dtype = DLOP_FLOAT32;
  a.device.type = 7;
  ck_assert_int_eq(dlop_elementwise_make_thunk(&binary_spec, &a), DLOP_UNSUPPORTED);
  ck_assert_str_eq(error, "mul: device type 7 is not supported (cpu or cuda)");
  in[0].dtype = in[1].dtype = out.dtype = DLOP_INT8; /* a CPU dtype only */
  a.device.type = DLOP_DEVICE_CUDA;
  ck_assert_int_eq(dlop_elementwise_make_thunk(&binary_spec, &a), DLOP_UNSUPPORTED);
  ck_assert_str_eq(error, "mul: no kernel for input dtypes int8 and int8 and output dtype int8");
  in[0].dtype = DLOP_INT8;
  out.dtype = DLOP_FLOAT32;
  a.num_inputs = 1;
  ck_assert_int_eq(dlop_elementwise_make_thunk(&unary_spec, &a), DLOP_UNSUPPORTED);
  ck_assert_str_eq(error, "neg: no kernel for input dtype int8 and output dtype float32");
  in[0].dtype = DLOP_FLOAT32;
  ck_assert_int_eq(dlop_elementwise_make_thunk(&unary_spec, &a), DLOP_UNSUPPORTED);
  ck_assert_str_eq(error, "neg: this build of the plugin has no CUDA kernels (built with DLOP_WITH_CUDA=OFF)");
  ck_assert_ptr_null(thunk.run);
  ck_assert_int_eq(fake.num_names, 0);
}
END_TEST

START_TEST(test_elementwise_cpu_thunk_checks_and_runs) {
  float a_data[6] = {0}, b_data[3] = {0}, z_data[6] = {0};
  int64_t a_shape[2] = {2, 3}, b_shape[1] = {3}, z_shape[2] = {2, 3}, bad_shape[2] = {3, 2};
  dlop_type in[2] = {make_type(DLOP_FLOAT32, 2, DLOP_DIM_UNKNOWN, 3), make_type(DLOP_FLOAT32, 1, 3, 0)};
  dlop_type out = make_type(DLOP_FLOAT32, 2, DLOP_DIM_UNKNOWN, DLOP_DIM_UNKNOWN);
  dlop_tensor inputs[2] = {make_tensor(a_data, DLOP_FLOAT32, 2, a_shape, NULL),
                           make_tensor(b_data, DLOP_FLOAT32, 1, b_shape, NULL)};
  dlop_tensor output = make_tensor(z_data, DLOP_FLOAT32, 2, z_shape, NULL);
  dlop_run_args run;
  dlop_thunk thunk;
  char error[256];
  dlop_thunk_args a = make_thunk_args(in, 2, &out, DLOP_DEVICE_CPU, &thunk, error, sizeof error);
  reset_fake();
  ck_assert_int_eq(dlop_elementwise_make_thunk(&binary_spec, &a), DLOP_OK);
  ck_assert_ptr_nonnull(thunk.run);
  run = make_run_args(inputs, 2, &output, error, sizeof error);
  ck_assert_int_eq(thunk.run(thunk.state, &run), DLOP_OK);
  ck_assert_int_eq(fake.cpu_calls, 2); /* two rows of 3: b broadcasts along the rows */
  ck_assert_int_eq(fake.cpu_numel, 6);
  ck_assert_int_eq(fake.cpu_dtype, DLOP_FLOAT32);
  output.shape = bad_shape;
  ck_assert_int_eq(thunk.run(thunk.state, &run), DLOP_SHAPE_ERROR);
  ck_assert_str_eq(error, "mul: output shape (3, 2) differs from the inputs' broadcast shape (2, 3)");
  output.shape = z_shape;
  run.num_inputs = 1;
  ck_assert_int_eq(thunk.run(thunk.state, &run), DLOP_INVALID_ARGUMENT);
  ck_assert_str_eq(error, "mul: run with 1 inputs and 1 outputs, expected 2 and 1");
  ck_assert_int_eq(fake.cpu_calls, 2); /* the refused runs ran no kernel */
  ck_assert_int_eq(fake.cpu_numel, 6);
  thunk.destroy(thunk.state);
  ck_assert_int_eq(fake.unloads, 0); /* no module on the CPU */

  /* one input: the output must have its shape */
  a.num_inputs = 1;
  in[0] = make_type(DLOP_FLOAT32, 1, DLOP_DIM_UNKNOWN, 0);
  out = make_type(DLOP_FLOAT32, 1, DLOP_DIM_UNKNOWN, 0);
  ck_assert_int_eq(dlop_elementwise_make_thunk(&unary_spec, &a), DLOP_OK);
  a_shape[0] = 4;
  z_shape[0] = 5;
  inputs[0].ndim = output.ndim = 1;
  run.num_inputs = 1;
  ck_assert_int_eq(thunk.run(thunk.state, &run), DLOP_SHAPE_ERROR);
  ck_assert_str_eq(error, "neg: output shape (5,) differs from input shape (4,)");
  thunk.destroy(thunk.state);
}
END_TEST

START_TEST(test_elementwise_cuda_thunk_loads_finds_and_launches) {
  int64_t shape[1] = {1000};
  float data[1];
  dlop_type in[2] = {make_type(DLOP_FLOAT32, 1, 1000, 0), make_type(DLOP_FLOAT32, 1, 1000, 0)};
  dlop_type out = make_type(DLOP_FLOAT32, 1, 1000, 0);
  dlop_tensor inputs[2] = {make_tensor(data, DLOP_FLOAT32, 1, shape, NULL),
                           make_tensor(data, DLOP_FLOAT32, 1, shape, NULL)};
  dlop_tensor output = make_tensor(data, DLOP_FLOAT32, 1, shape, NULL);
  dlop_run_args run;
  dlop_thunk thunk;
  dlop_elementwise_state *state;
  char error[256];
  dlop_thunk_args a = make_thunk_args(in, 2, &out, DLOP_DEVICE_CUDA, &thunk, error, sizeof error);
  reset_fake();
  ck_assert_int_eq(dlop_elementwise_make_thunk(&binary_spec, &a), DLOP_OK);
  ck_assert_ptr_eq(fake.image, fake_fatbin);
  ck_assert_int_eq(fake.num_names, 3);
  ck_assert_str_eq(fake.names[0], "dlop_mul_contiguous_float32");
  ck_assert_str_eq(fake.names[1], "dlop_mul_rows_float32");
  ck_assert_str_eq(fake.names[2], "dlop_mul_strided_float32");
  state = (dlop_elementwise_state *)thunk.state;
  ck_assert_int_eq(state->kernels.contiguous_elements, 8); /* 2 vectors of 4 float32 */
  ck_assert_uint_eq(state->kernels.max_blocks, 3 * DLOP_CUDA_BLOCKS_PER_SM);
  run = make_run_args(inputs, 2, &output, error, sizeof error);
  run.stream = &run; /* any non-NULL stream: the fake launch never uses it */
  for (int i = 0; i < 2; i++) inputs[i].device.type = DLOP_DEVICE_CUDA;
  output.device.type = DLOP_DEVICE_CUDA;
  ck_assert_int_eq(thunk.run(thunk.state, &run), DLOP_OK);
  ck_assert_int_eq(fake.launches, 1);
  ck_assert_ptr_eq(fake.launched, (void *)(uintptr_t)1); /* contiguous */
  ck_assert_uint_eq(fake.grid0, (1000 / 8 + 255) / 256);
  inputs[1].device.type = DLOP_DEVICE_CPU;
  ck_assert_int_eq(thunk.run(thunk.state, &run), DLOP_DEVICE_MISMATCH);
  ck_assert_str_eq(error, "mul: input 1 is on cpu:0, but the thunk was made for cuda:0 (make a thunk per device)");
  ck_assert_int_eq(fake.launches, 1);
  /* tensors on cuda:1 given to a thunk made for cuda:0: refused before any launch (device 0's
   * kernels on device 1's pointers would be an illegal address) */
  for (int i = 0; i < 2; i++) inputs[i].device = cuda1;
  output.device = cuda1;
  ck_assert_int_eq(thunk.run(thunk.state, &run), DLOP_DEVICE_MISMATCH);
  ck_assert_str_eq(error, "mul: input 0 is on cuda:1, but the thunk was made for cuda:0 (make a thunk per device)");
  for (int i = 0; i < 2; i++) inputs[i].device = cuda0;
  ck_assert_int_eq(thunk.run(thunk.state, &run), DLOP_DEVICE_MISMATCH);
  ck_assert_str_eq(error, "mul: output 0 is on cuda:1, but the thunk was made for cuda:0 (make a thunk per device)");
  ck_assert_int_eq(fake.launches, 1);
  thunk.destroy(thunk.state);
  ck_assert_int_eq(fake.unloads, 1);

  /* a host without module loading: a clear refusal, nothing left loaded */
  reset_fake();
  fake_host_table.cuda_module_load = NULL;
  ck_assert_int_eq(dlop_elementwise_make_thunk(&binary_spec, &a), DLOP_UNSUPPORTED);
  ck_assert_str_eq(error, "mul: the host offers no CUDA module loading");
}
END_TEST

/* An op whose float64 contiguous kernel is in the chunk form: float64 loops launch it in
 * blocks of DLOP_CUDA_CHUNK_BLOCK threads, a block per chunk, and float32 ones (not named)
 * keep the grid form's 256; a loop too long for one launch of chunks is refused, not cut. */
static const dlop_elementwise_spec chunk_spec = {
    .op_name = "tanh",
    .host = fake_host,
    .num_inputs = 1,
    .cpu_dtypes = DLOP_DTYPE_BIT(DLOP_FLOAT32) | DLOP_DTYPE_BIT(DLOP_FLOAT64),
    .cuda_dtypes = DLOP_DTYPE_BIT(DLOP_FLOAT32) | DLOP_DTYPE_BIT(DLOP_FLOAT64),
    .cpu_kernels = fake_cpu_kernels,
    .cuda_fatbin = fake_fatbin,
    .cuda_kernel_prefix = "dlop_tanh",
    .cuda_contiguous_vectors = 2,
    .cuda_chunk_dtypes = DLOP_DTYPE_BIT(DLOP_FLOAT64),
};

START_TEST(test_elementwise_cuda_chunk_form_launch) {
  int64_t shape[1] = {100001};
  double data[1];
  char error[256];
  for (int f64 = 0; f64 < 2; f64++) {
    const dlop_dtype dtype = f64 ? DLOP_FLOAT64 : DLOP_FLOAT32;
    const int64_t per_thread = f64 ? 4 : 8; /* 2 vectors of 2 float64 or 4 float32 */
    dlop_type in = make_type(dtype, 1, shape[0], 0), out = in;
    dlop_thunk thunk;
    dlop_thunk_args a = make_thunk_args(&in, 1, &out, DLOP_DEVICE_CUDA, &thunk, error, sizeof error);
    dlop_tensor input = make_tensor(data, dtype, 1, shape, NULL);
    dlop_tensor output = make_tensor(data, dtype, 1, shape, NULL);
    dlop_run_args run;
    reset_fake();
    ck_assert_int_eq(dlop_elementwise_make_thunk(&chunk_spec, &a), DLOP_OK);
    ck_assert_int_eq(((dlop_elementwise_state *)thunk.state)->kernels.chunk_block,
                     f64 ? DLOP_CUDA_CHUNK_BLOCK : 0);
    input.device = cuda0;
    output.device = cuda0;
    run = make_run_args(&input, 1, &output, error, sizeof error);
    run.stream = &run;
    ck_assert_int_eq(thunk.run(thunk.state, &run), DLOP_OK);
    ck_assert_int_eq(fake.launches, 1);
    ck_assert_ptr_eq(fake.launched, (void *)(uintptr_t)1); /* contiguous */
    const int64_t work = (shape[0] + per_thread - 1) / per_thread;
    const int64_t block = f64 ? DLOP_CUDA_CHUNK_BLOCK : DLOP_CUDA_ELEMENTWISE_BLOCK;
    ck_assert_uint_eq(fake.block0, (uint32_t)block);
    ck_assert_uint_eq(fake.grid0, (uint32_t)((work + block - 1) / block));
    /* every element inside one of the grid's chunks */
    ck_assert_int_ge((int64_t)fake.grid0 * block * per_thread, shape[0]);
    thunk.destroy(thunk.state);
  }
}
END_TEST

START_TEST(test_elementwise_cuda_chunk_form_refuses_a_grid_it_cannot_cover) {
  /* 2^40 contiguous float64 (never touched: the fake launch reads nothing), 2^31 chunks */
  int64_t shape[1] = {(int64_t)1 << 40}, strides[1] = {1};
  double data[1];
  char error[256];
  dlop_cuda_elementwise kernels;
  dlop_strided_loop loop;
  dlop_tensor output = make_tensor(data, DLOP_FLOAT64, 1, shape, strides);
  dlop_tensor input = output;
  memset(&kernels, 0, sizeof kernels);
  kernels.contiguous = (void *)(uintptr_t)1;
  kernels.strided = (void *)(uintptr_t)3;
  kernels.contiguous_elements = 4;
  kernels.chunk_block = DLOP_CUDA_CHUNK_BLOCK;
  reset_fake();
  ck_assert_int_eq(dlop_strided_loop_init(&loop, &output, &input, 1, "tanh", error, sizeof error),
                   DLOP_OK);
  ck_assert_int_eq(dlop_cuda_launch_elementwise(fake_host(), &loop, &kernels, &kernels, "tanh",
                                                error, sizeof error),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_str_eq(error, "tanh: 1099511627776 elements need more than 1073741824 blocks of 128 threads in one launch");
  ck_assert_int_eq(fake.launches, 0);
}
END_TEST

/* ---- the spec's optional parts: kernel dtypes, a parameter block, 2-d rows kernels ---- */

/* As a cast: input 0's and the output's dtypes pick the kernels. */
static int pair_kernel_dtypes(const dlop_thunk_args *args, dlop_dtype *dtypes, int32_t *count) {
  dtypes[0] = (dlop_dtype)args->inputs[0].dtype;
  dtypes[1] = (dlop_dtype)args->outputs[0].dtype;
  *count = 2;
  return DLOP_OK;
}

static int alpha_params(const dlop_thunk_args *args, void *params, char *error, size_t error_size) {
  *(float *)params = 2.5f;
  return DLOP_OK;
}

static const dlop_elementwise_cpu_kernel pair_cpu_kernels[DLOP_DTYPE_COUNT * DLOP_DTYPE_COUNT] = {
    [DLOP_FLOAT32 * DLOP_DTYPE_COUNT + DLOP_INT8] = fake_cpu_int8};

/* a cast-like op, strided kernels only */
static const dlop_elementwise_spec pair_spec = {
    .op_name = "cast", .host = fake_host, .num_inputs = 1, .cpu_kernels = pair_cpu_kernels,
    .cuda_fatbin = fake_fatbin, .cuda_kernel_prefix = "dlop_cast",
    .kernel_dtypes = pair_kernel_dtypes};

/* a binary op with a parameter, a 2-d rows kernel and no contiguous kernel */
static const dlop_elementwise_spec rows_2d_spec = {
    .op_name = "add", .host = fake_host, .num_inputs = 2, .broadcast = 1,
    .cpu_dtypes = DLOP_DTYPE_BIT(DLOP_FLOAT32), .cuda_dtypes = DLOP_DTYPE_BIT(DLOP_FLOAT32),
    .cpu_kernels = fake_cpu_kernels, .cuda_fatbin = fake_fatbin, .cuda_kernel_prefix = "dlop_add",
    .cuda_rows = DLOP_ELEMENTWISE_ROWS_2D, .make_params = alpha_params};

START_TEST(test_elementwise_two_kernel_dtypes) {
  float x[3] = {0};
  int8_t y[3] = {0};
  int64_t shape[1] = {3};
  dlop_type in = make_type(DLOP_FLOAT32, 1, 3, 0), out = make_type(DLOP_INT8, 1, 3, 0);
  dlop_tensor input = make_tensor(x, DLOP_FLOAT32, 1, shape, NULL);
  dlop_tensor output = make_tensor(y, DLOP_INT8, 1, shape, NULL);
  dlop_run_args run = make_run_args(&input, 1, &output, NULL, 0);
  dlop_thunk thunk;
  char error[256];
  dlop_thunk_args a = make_thunk_args(&in, 1, &out, DLOP_DEVICE_CPU, &thunk, error, sizeof error);
  reset_fake();
  /* the CPU kernel at [d0 * DLOP_DTYPE_COUNT + d1] */
  ck_assert_int_eq(dlop_elementwise_make_thunk(&pair_spec, &a), DLOP_OK);
  run.error = error;
  run.error_size = sizeof error;
  ck_assert_int_eq(thunk.run(thunk.state, &run), DLOP_OK);
  ck_assert_int_eq(fake.cpu_dtype, DLOP_INT8);
  ck_assert_int_eq(fake.cpu_numel, 3);
  thunk.destroy(thunk.state);
  out.dtype = DLOP_INT16;
  ck_assert_int_eq(dlop_elementwise_make_thunk(&pair_spec, &a), DLOP_UNSUPPORTED);
  ck_assert_str_eq(error, "cast: no CPU kernel for dtype float32");
  /* the CUDA kernels named by both dtypes; an op with neither contiguous nor rows kernels */
  out.dtype = DLOP_INT8;
  a.device.type = DLOP_DEVICE_CUDA;
  ck_assert_int_eq(dlop_elementwise_make_thunk(&pair_spec, &a), DLOP_OK);
  ck_assert_int_eq(fake.num_names, 1);
  ck_assert_str_eq(fake.names[0], "dlop_cast_strided_float32_int8");
  ck_assert_ptr_null(((dlop_elementwise_state *)thunk.state)->kernels.contiguous);
  ck_assert_ptr_null(((dlop_elementwise_state *)thunk.state)->kernels.rows);
  thunk.destroy(thunk.state);
}
END_TEST

/* Runs rows_2d_spec's CUDA thunk on a of shape a_shape (strides a_strides) and b of shape
 * (cols,) or, when b_rows > 1, (b_rows, cols); returns the status. */
static int run_rows_2d(const dlop_thunk *thunk, int64_t *a_shape, int64_t *a_strides,
                       int64_t *b_shape, int32_t b_ndim) {
  static _Alignas(16) float a_data[64 * 1024], b_data[64 * 1024], z_data[64 * 1024];
  dlop_tensor inputs[2] = {make_tensor(a_data, DLOP_FLOAT32, 2, a_shape, a_strides),
                           make_tensor(b_data, DLOP_FLOAT32, b_ndim, b_shape, NULL)};
  dlop_tensor output = make_tensor(z_data, DLOP_FLOAT32, 2, a_shape, NULL);
  char error[256];
  dlop_run_args run = make_run_args(inputs, 2, &output, error, sizeof error);
  inputs[0].device.type = inputs[1].device.type = output.device.type = DLOP_DEVICE_CUDA;
  run.stream = &run;
  fake.record_args = 6; /* a, b, z, rows or n, pattern or offsets, params */
  return thunk->run(thunk->state, &run);
}

START_TEST(test_elementwise_cuda_rows_2d_launch_and_params) {
  dlop_type in[2] = {make_type(DLOP_FLOAT32, 2, DLOP_DIM_UNKNOWN, DLOP_DIM_UNKNOWN),
                     make_type(DLOP_FLOAT32, 1, DLOP_DIM_UNKNOWN, 0)};
  dlop_type out = make_type(DLOP_FLOAT32, 2, DLOP_DIM_UNKNOWN, DLOP_DIM_UNKNOWN);
  int64_t matrix[2] = {64, 1024}, row[1] = {1024}, small[2] = {4, 8}, small_row[1] = {8};
  int64_t square[2] = {8, 8}, transposed[2] = {1, 8}, square_row[1] = {8};
  float alpha;
  dlop_thunk thunk;
  char error[256];
  reset_fake();
  dlop_thunk_args a = make_thunk_args(in, 2, &out, DLOP_DEVICE_CUDA, &thunk, error, sizeof error);
  ck_assert_int_eq(dlop_elementwise_make_thunk(&rows_2d_spec, &a), DLOP_OK);
  ck_assert_int_eq(fake.num_names, 2);
  ck_assert_str_eq(fake.names[0], "dlop_add_rows_float32");
  ck_assert_str_eq(fake.names[1], "dlop_add_strided_float32");
  /* a matrix and a broadcast row: the 2-d grid, y over the rows, the pattern of (full, row) */
  ck_assert_int_eq(run_rows_2d(&thunk, matrix, NULL, row, 1), DLOP_OK);
  ck_assert_ptr_eq(fake.launched, (void *)(uintptr_t)1);
  ck_assert_uint_eq(fake.grid0, 1); /* 256 vectors of 4 float32 a row, one per thread */
  ck_assert_uint_eq(fake.grid1, 64);
  ck_assert_uint_eq(fake.arg_words[4], DLOP_ROWS_PATTERN(DLOP_ROWS_FULL, DLOP_ROWS_ROW));
  memcpy(&alpha, &fake.arg_words[5], 4);
  ck_assert_float_eq(alpha, 2.5f); /* the parameter block, last */
  /* rows of 2 vectors: the 1-d body on a 1-d grid */
  ck_assert_int_eq(run_rows_2d(&thunk, small, NULL, small_row, 1), DLOP_OK);
  ck_assert_ptr_eq(fake.launched, (void *)(uintptr_t)1);
  ck_assert_uint_eq(fake.arg_words[4], DLOP_ROWS_SHORT);
  ck_assert_uint_eq(fake.grid0, 1);
  ck_assert_uint_eq(fake.grid1, 1);
  /* a transposed matrix: the strided kernel, the parameter block last again */
  ck_assert_int_eq(run_rows_2d(&thunk, square, transposed, square_row, 1), DLOP_OK);
  ck_assert_ptr_eq(fake.launched, (void *)(uintptr_t)2);
  ck_assert_uint_eq(fake.grid0, 1);
  memcpy(&alpha, &fake.arg_words[5], 4);
  ck_assert_float_eq(alpha, 2.5f);
  thunk.destroy(thunk.state);
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
  tcase_add_test(tc, test_check_tensors_rejects_misaligned_data);
  tcase_add_test(tc, test_elementwise_make_thunk_rejects_with_clear_messages);
  tcase_add_test(tc, test_elementwise_cpu_thunk_checks_and_runs);
  tcase_add_test(tc, test_elementwise_cuda_thunk_loads_finds_and_launches);
  tcase_add_test(tc, test_elementwise_cuda_chunk_form_launch);
  tcase_add_test(tc, test_elementwise_cuda_chunk_form_refuses_a_grid_it_cannot_cover);
  tcase_add_test(tc, test_elementwise_two_kernel_dtypes);
  tcase_add_test(tc, test_elementwise_cuda_rows_2d_launch_and_params);
  suite_add_tcase(suite, tc);
  return dlop_test_run_suite(suite);
}
