/* test_plugins_cpu.c — the seed plugins (double, multiply_them, exp) driven directly through
 * their op descriptors on the CPU: make_node, infer_shape, make_thunk and thunk.run on tensors
 * this file allocates, for every declared dtype, many sizes and layouts, against references
 * computed here in double (integers in wrapping integer arithmetic). */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_runner.h"
#include "test_support.h"

#define GUARD_BYTES 64
#define GUARD_BYTE 0xAB

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};

/* ---- tensors with any strides ---------------------------------------------------------- */

/* A tensor over its own allocation: the span its strides reach, with guard bytes either side. */
typedef struct test_tensor {
  dlop_tensor t;
  int64_t shape[DLOP_MAX_NDIM];
  int64_t strides[DLOP_MAX_NDIM];
  unsigned char *allocation;
  size_t span_bytes; /* between the guards */
} test_tensor;

/* strides NULL: C-contiguous. Negative and zero strides allowed. */
static void tensor_init(test_tensor *x, dlop_dtype dtype, int32_t ndim, const int64_t *shape,
                        const int64_t *strides) {
  size_t elsize = dlop_dtype_size(dtype);
  int64_t first;
  memset(x, 0, sizeof *x);
  memcpy(x->shape, shape, sizeof(int64_t) * (size_t)ndim);
  x->span_bytes = (size_t)dlop_test_layout_span(ndim, shape, strides, x->strides, &first) * elsize;
  x->allocation = malloc(x->span_bytes + 2 * GUARD_BYTES);
  ck_assert_ptr_nonnull(x->allocation);
  memset(x->allocation, GUARD_BYTE, x->span_bytes + 2 * GUARD_BYTES);
  dlop_test_host_tensor(&x->t, x->allocation + GUARD_BYTES, (uint64_t)(first * (int64_t)elsize),
                        dtype, ndim, x->shape, x->strides);
}

static void tensor_free(test_tensor *x) { free(x->allocation); }

static void *element_base(const test_tensor *x) { return (char *)x->t.data + x->t.byte_offset; }

/* Copy the tensor's elements in C order into contiguous memory. */
static void gather(const test_tensor *x, void *out) {
  size_t elsize = dlop_dtype_size(dlop_tensor_dtype(&x->t));
  int64_t n = dlop_test_numel(x->t.ndim, x->shape);
  for (int64_t i = 0; i < n; i++)
    memcpy((char *)out + i * elsize,
           (char *)element_base(x) + dlop_test_element_offset(&x->t, i) * (int64_t)elsize, elsize);
}

/* Random values everywhere in the span (the elements and the holes between them). */
static void fill_span_random(test_tensor *x, dlop_dtype dtype, uint64_t seed, double low,
                             double high) {
  dlop_test_fill_random(x->allocation + GUARD_BYTES, dtype,
                        (int64_t)(x->span_bytes / dlop_dtype_size(dtype)), seed, low, high);
}

static void check_guards(const test_tensor *x, const char *what) {
  for (size_t i = 0; i < GUARD_BYTES; i++) {
    DLOP_CK_EACH(x->allocation[i] == GUARD_BYTE, "%s: guard byte %zu before the data changed", what, i);
    DLOP_CK_EACH(x->allocation[GUARD_BYTES + x->span_bytes + i] == GUARD_BYTE,
                  "%s: guard byte %zu after the data changed", what, i);
  }
}

/* ---- references ------------------------------------------------------------------------ */

typedef enum op_kind { OP_DOUBLE, OP_EXP, OP_MULTIPLY } op_kind;

/* NumPy's wrapping integer result of v truncated to dtype's width. */
static int64_t wrap_int(uint64_t v, dlop_dtype dtype) {
  switch (dtype) {
    case DLOP_INT8: return (int8_t)(uint8_t)v;
    case DLOP_INT16: return (int16_t)(uint16_t)v;
    case DLOP_INT32: return (int32_t)(uint32_t)v;
    case DLOP_UINT8: return (uint8_t)v;
    default: return (int64_t)v;
  }
}

static void set_int(void *data, dlop_dtype dtype, int64_t i, int64_t v) {
  switch (dtype) {
    case DLOP_INT8: ((int8_t *)data)[i] = (int8_t)v; break;
    case DLOP_INT16: ((int16_t *)data)[i] = (int16_t)v; break;
    case DLOP_INT32: ((int32_t *)data)[i] = (int32_t)v; break;
    case DLOP_INT64: ((int64_t *)data)[i] = v; break;
    case DLOP_UINT8: ((uint8_t *)data)[i] = (uint8_t)v; break;
    default: ck_abort_msg("set_int on %s", dlop_dtype_name(dtype));
  }
}

static int64_t get_int(const void *data, dlop_dtype dtype, int64_t i) {
  if (dtype == DLOP_INT64) return ((const int64_t *)data)[i];
  return (int64_t)dlop_test_get(data, dtype, i);
}

/* expected[i] = op(a[i], b[i]) for contiguous a (and b), rounded to dtype. */
static void reference(op_kind kind, dlop_dtype dtype, const void *a, const void *b, void *expected,
                      int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    if (!dlop_dtype_is_float(dtype)) {
      uint64_t x = (uint64_t)get_int(a, dtype, i);
      uint64_t r = kind == OP_DOUBLE ? x * 2u : x * (uint64_t)get_int(b, dtype, i);
      set_int(expected, dtype, i, wrap_int(r, dtype));
      continue;
    }
    double x = dlop_test_get(a, dtype, i), r;
    if (kind == OP_DOUBLE) r = 2.0 * x;
    else if (kind == OP_EXP) r = exp(x);
    else r = x * dlop_test_get(b, dtype, i);
    dlop_test_set(expected, dtype, i, r);
  }
}

static void value_range(op_kind kind, dlop_dtype dtype, double *low, double *high) {
  if (dlop_test_integer_range(dtype, low, high)) return;
  if (kind == OP_EXP) {
    *low = dtype == DLOP_FLOAT16 ? -9 : -80; /* float16: stay above its subnormals */
    *high = dtype == DLOP_FLOAT16 ? 10 : 80;
  } else {
    *low = -100;
    *high = 100;
  }
}

/* ---- one check: an op on tensors of given layouts -------------------------------------- */

typedef struct layout {
  int32_t ndim;
  int64_t shape[4];
  const int64_t *strides; /* NULL: contiguous */
} layout;

/* Runs the op (unary when b is NULL) and compares every output element with the reference;
 * also checks that inputs are untouched and the output's guard bytes intact. */
static void check_op(const char *op_name, op_kind kind, dlop_dtype dtype, const layout *a_layout,
                     const layout *b_layout, const layout *out_layout, uint64_t seed) {
  const dlop_op_desc *op = dlop_test_find_op(op_name);
  int32_t num_inputs = b_layout ? 2 : 1;
  test_tensor in[2], out;
  dlop_type in_types[2], out_type;
  char error[512];
  double low, high;
  value_range(kind, dtype, &low, &high);
  const layout *layouts[2] = {a_layout, b_layout};
  for (int k = 0; k < num_inputs; k++) {
    tensor_init(&in[k], dtype, layouts[k]->ndim, layouts[k]->shape, layouts[k]->strides);
    fill_span_random(&in[k], dtype, seed + (uint64_t)k, low, high);
    in_types[k] = dlop_test_type(dtype, layouts[k]->ndim, layouts[k]->shape);
  }
  int status = dlop_test_make_node(op, NULL, in_types, num_inputs, &out_type, error, sizeof error);
  ck_assert_msg(status == DLOP_OK, "%s make_node %s: %s", op_name, dlop_dtype_name(dtype), error);
  ck_assert_int_eq(out_type.dtype, dtype);
  dlop_type shaped = out_type;
  status = dlop_test_infer_shape(op, NULL, in_types, num_inputs, &shaped, error, sizeof error);
  ck_assert_msg(status == DLOP_OK, "%s infer_shape: %s", op_name, error);
  ck_assert_int_eq(shaped.ndim, out_layout->ndim);
  for (int32_t d = 0; d < shaped.ndim; d++) ck_assert_int_eq(shaped.shape[d], out_layout->shape[d]);

  tensor_init(&out, dtype, out_layout->ndim, out_layout->shape, out_layout->strides);
  memset(out.allocation + GUARD_BYTES, 0xFF, out.span_bytes); /* poison */
  int64_t n = dlop_test_numel(out_layout->ndim, out_layout->shape);
  size_t elsize = dlop_dtype_size(dtype);
  unsigned char *before[2] = {NULL, NULL};
  void *a_flat = malloc(n * elsize + 1), *b_flat = malloc(n * elsize + 1);
  void *expected = malloc(n * elsize + 1), *actual = malloc(n * elsize + 1);
  ck_assert(a_flat && b_flat && expected && actual);
  for (int k = 0; k < num_inputs; k++) {
    before[k] = malloc(in[k].span_bytes + 1);
    memcpy(before[k], in[k].allocation + GUARD_BYTES, in[k].span_bytes);
  }
  /* the broadcast inputs, flattened in the output's C order */
  for (int64_t i = 0; i < n; i++) {
    for (int k = 0; k < num_inputs; k++) {
      int64_t offset = 0, rest = i;
      for (int32_t d = out_layout->ndim - 1; d >= 0; d--) {
        int64_t index = rest % out_layout->shape[d];
        rest /= out_layout->shape[d];
        int32_t j = d - (out_layout->ndim - in[k].t.ndim);
        if (j >= 0 && in[k].shape[j] != 1) offset += index * in[k].strides[j];
      }
      memcpy((char *)(k ? b_flat : a_flat) + i * elsize,
             (char *)element_base(&in[k]) + offset * (int64_t)elsize, elsize);
    }
  }
  reference(kind, dtype, a_flat, b_flat, expected, n);

  dlop_thunk thunk;
  dlop_test_make_thunk_ok(op, NULL, in_types, num_inputs, &out_type, CPU, &thunk);
  dlop_tensor inputs[2] = {in[0].t, num_inputs > 1 ? in[1].t : in[0].t};
  status = dlop_test_run(&thunk, inputs, num_inputs, &out.t, NULL, error, sizeof error);
  ck_assert_msg(status == DLOP_OK, "%s run %s: %s (%s)", op_name, dlop_dtype_name(dtype),
                dlop_status_name(status), error);
  dlop_test_destroy_thunk(&thunk);

  gather(&out, actual);
  char report[512];
  double rtol = dlop_test_tolerance(dtype);
  int64_t bad = dlop_test_compare(expected, actual, dtype, n, 0.0, rtol, report, sizeof report);
  ck_assert_msg(bad == 0, "%s %s n=%lld ndim=%d: %lld mismatches: %s", op_name,
                dlop_dtype_name(dtype), (long long)n, (int)out_layout->ndim, (long long)bad, report);
  check_guards(&out, "output");
  for (int k = 0; k < num_inputs; k++) {
    ck_assert_msg(memcmp(before[k], in[k].allocation + GUARD_BYTES, in[k].span_bytes) == 0,
                  "%s changed input %d", op_name, k);
    check_guards(&in[k], "input");
    free(before[k]);
    tensor_free(&in[k]);
  }
  tensor_free(&out);
  free(a_flat);
  free(b_flat);
  free(expected);
  free(actual);
}

/* Every dtype the op declares on the CPU, in a loop; the test's _i picks nothing. */
#define FOR_EACH_DTYPE(op_name, dtype)                                                      \
  for (int dtype##_index = 0; dtype##_index < DLOP_DTYPE_COUNT; dtype##_index++)            \
    if (dlop_test_find_op(op_name)->cpu_dtypes & DLOP_DTYPE_BIT(dtype##_index))                      \
      for (dlop_dtype dtype = (dlop_dtype)dtype##_index; dtype != DLOP_DTYPE_INVALID;       \
           dtype = DLOP_DTYPE_INVALID)

static const int64_t sizes[] = {0, 1, 7, 1000, 100003};

/* ---- declarations ------------------------------------------------------------------------ */

START_TEST(test_declared_dtypes_and_flags) {
  uint32_t ints = DLOP_DTYPE_BIT(DLOP_INT8) | DLOP_DTYPE_BIT(DLOP_INT16) | DLOP_DTYPE_BIT(DLOP_INT32) |
                  DLOP_DTYPE_BIT(DLOP_INT64) | DLOP_DTYPE_BIT(DLOP_UINT8);
  uint32_t floats = DLOP_DTYPE_BIT(DLOP_FLOAT16) | DLOP_DTYPE_BIT(DLOP_BFLOAT16) |
                    DLOP_DTYPE_BIT(DLOP_FLOAT32) | DLOP_DTYPE_BIT(DLOP_FLOAT64);
  const char *names[3] = {"double", "multiply_them", "exp"};
  uint32_t want[3] = {ints | floats, ints | floats, floats};
  int32_t arity[3] = {1, 2, 1};
  for (int i = 0; i < 3; i++) {
    const dlop_op_desc *op = dlop_test_find_op(names[i]);
    ck_assert_uint_eq(op->cpu_dtypes, want[i]);
    /* A build without nvcc has no CUDA kernels, and the plugins then declare no CUDA dtypes. */
    ck_assert_uint_eq(op->cuda_dtypes, DLOP_TEST_WITH_CUDA ? want[i] : 0);
    ck_assert_int_eq(op->num_inputs, arity[i]);
    ck_assert_int_eq(op->num_outputs, 1);
    ck_assert_uint_eq(op->flags & (DLOP_OP_DETERMINISTIC | DLOP_OP_CUDA_GRAPH_SAFE),
                      DLOP_OP_DETERMINISTIC | DLOP_OP_CUDA_GRAPH_SAFE);
    ck_assert_uint_eq(op->flags & DLOP_OP_NEEDS_CONTIGUOUS_INPUTS, 0);
    ck_assert_msg(op->doc && strlen(op->doc) > 20, "%s has no doc", names[i]);
  }
}
END_TEST

/* ---- unary ops: every dtype, sizes and layouts -------------------------------------------- */

static void check_unary_everything(const char *op_name, op_kind kind) {
  static const int64_t transposed[2] = {1, 37};     /* a (53, 37) buffer seen as (37, 53) */
  static const int64_t reversed[1] = {-1};
  static const int64_t rows_reversed[2] = {-53, 1};
  static const int64_t row_broadcast[2] = {0, 1};   /* every row is the same memory */
  static const int64_t three_d_strided[3] = {-2, 30, 3}; /* gaps, a negative outer stride */
  static const int64_t out_reversed[2] = {-53, -1};
  uint64_t seed = 100;
  FOR_EACH_DTYPE(op_name, dtype) {
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      layout flat = {1, {sizes[s]}, NULL};
      check_op(op_name, kind, dtype, &flat, NULL, &flat, seed++);
    }
    layout m = {2, {37, 53}, NULL}, cube = {3, {5, 7, 11}, NULL};
    layout t = {2, {37, 53}, transposed}, r = {1, {1000}, reversed}, rr = {2, {37, 53}, rows_reversed};
    layout z = {2, {37, 53}, row_broadcast}, s3 = {3, {2, 5, 10}, three_d_strided};
    layout scalar = {0, {0}, NULL}, out_r = {2, {37, 53}, out_reversed};
    layout big_t = {2, {400, 300}, (const int64_t[]){1, 400}}, big = {2, {400, 300}, NULL};
    check_op(op_name, kind, dtype, &m, NULL, &m, seed++);
    check_op(op_name, kind, dtype, &cube, NULL, &cube, seed++);
    check_op(op_name, kind, dtype, &t, NULL, &m, seed++);
    check_op(op_name, kind, dtype, &r, NULL, &(layout){1, {1000}, NULL}, seed++);
    check_op(op_name, kind, dtype, &rr, NULL, &m, seed++);
    check_op(op_name, kind, dtype, &z, NULL, &m, seed++);
    check_op(op_name, kind, dtype, &s3, NULL, &(layout){3, {2, 5, 10}, NULL}, seed++);
    check_op(op_name, kind, dtype, &scalar, NULL, &scalar, seed++);
    check_op(op_name, kind, dtype, &m, NULL, &out_r, seed++);        /* strided output */
    check_op(op_name, kind, dtype, &big_t, NULL, &big, seed++);      /* parallel + strided */
  }
}

/* Each bundled plugin's own entry point refuses a host of another ABI major, naming both
 * versions, and accepts any minor of its own major. */
START_TEST(test_entry_point_checks_the_abi) {
  const char *files[3] = {"libdlop_double.so", "libdlop_exp.so", "libdlop_multiply_them.so"};
  for (int i = 0; i < 3; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", DLOP_TEST_BUNDLED_PLUGIN_DIR, files[i]);
    void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(library != NULL, "dlopen %s: %s", path, dlerror());
    dlop_plugin_init_fn init = (dlop_plugin_init_fn)dlsym(library, DLOP_PLUGIN_ENTRY_SYMBOL);
    ck_assert_ptr_nonnull(init);
    const dlop_plugin_desc *plugin = NULL;
    char error[256] = "";
    int status = init(dlop_host_api_table(), DLOP_MAKE_ABI_VERSION(DLOP_ABI_MAJOR + 1, 0),
                      &plugin, error, sizeof error);
    ck_assert_int_eq(status, DLOP_ABI_MISMATCH);
    ck_assert_ptr_null(plugin);
    char expected[128];
    snprintf(expected, sizeof expected, "built for ABI %d.%d, the host speaks ABI %d.0",
             DLOP_ABI_MAJOR, DLOP_ABI_MINOR, DLOP_ABI_MAJOR + 1);
    ck_assert_msg(strstr(error, expected), "%s: message '%s' lacks '%s'", files[i], error, expected);
    status = init(NULL, DLOP_ABI_VERSION, &plugin, error, sizeof error);
    ck_assert_int_eq(status, DLOP_INVALID_ARGUMENT);
    status = init(dlop_host_api_table(), DLOP_MAKE_ABI_VERSION(DLOP_ABI_MAJOR, 99), &plugin,
                  error, sizeof error);
    ck_assert_int_eq(status, DLOP_OK);
    ck_assert_ptr_nonnull(plugin);
    dlclose(library);
  }
}
END_TEST

START_TEST(test_double_every_dtype_size_layout) { check_unary_everything("double", OP_DOUBLE); }
END_TEST

START_TEST(test_exp_every_dtype_size_layout) { check_unary_everything("exp", OP_EXP); }
END_TEST

/* ---- multiply_them: broadcasting --------------------------------------------------------- */

START_TEST(test_multiply_them_every_dtype_and_broadcast) {
  uint64_t seed = 500;
  FOR_EACH_DTYPE("multiply_them", dtype) {
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      layout flat = {1, {sizes[s]}, NULL};
      check_op("multiply_them", OP_MULTIPLY, dtype, &flat, &flat, &flat, seed++);
    }
    layout col = {2, {3, 1}, NULL}, row = {2, {1, 4}, NULL}, out34 = {2, {3, 4}, NULL};
    check_op("multiply_them", OP_MULTIPLY, dtype, &col, &row, &out34, seed++);
    layout v5 = {1, {5}, NULL}, m25 = {2, {2, 5}, NULL};
    check_op("multiply_them", OP_MULTIPLY, dtype, &v5, &m25, &m25, seed++);
    check_op("multiply_them", OP_MULTIPLY, dtype, &m25, &v5, &m25, seed++);
    layout scalar = {0, {0}, NULL}, v4 = {1, {4}, NULL}, m23 = {2, {2, 3}, NULL};
    check_op("multiply_them", OP_MULTIPLY, dtype, &scalar, &v4, &v4, seed++);
    check_op("multiply_them", OP_MULTIPLY, dtype, &m23, &scalar, &m23, seed++);
    check_op("multiply_them", OP_MULTIPLY, dtype, &scalar, &scalar, &scalar, seed++);
    /* 3-d broadcast, transposed and negative-stride operands, a zero-stride operand */
    layout a3 = {3, {4, 1, 6}, NULL}, b2 = {2, {5, 1}, NULL}, out456 = {3, {4, 5, 6}, NULL};
    check_op("multiply_them", OP_MULTIPLY, dtype, &a3, &b2, &out456, seed++);
    layout t = {2, {37, 53}, (const int64_t[]){1, 37}}, m = {2, {37, 53}, NULL};
    layout neg = {2, {37, 53}, (const int64_t[]){-53, -1}}, zero = {2, {37, 53}, (const int64_t[]){0, 1}};
    check_op("multiply_them", OP_MULTIPLY, dtype, &t, &neg, &m, seed++);
    check_op("multiply_them", OP_MULTIPLY, dtype, &neg, &zero, &m, seed++);
    layout e0 = {2, {0, 1}, NULL}, e1 = {2, {1, 7}, NULL}, e = {2, {0, 7}, NULL};
    check_op("multiply_them", OP_MULTIPLY, dtype, &e0, &e1, &e, seed++);
    /* large enough for the parallel path, with broadcasting on both sides */
    layout bc = {2, {300, 1}, NULL}, br = {2, {1, 401}, NULL}, bo = {2, {300, 401}, NULL};
    check_op("multiply_them", OP_MULTIPLY, dtype, &bc, &br, &bo, seed++);
  }
}
END_TEST

/* ---- type and shape errors --------------------------------------------------------------- */

START_TEST(test_type_errors_come_back_with_messages) {
  const dlop_op_desc *multiply = dlop_test_find_op("multiply_them"), *dbl = dlop_test_find_op("double");
  const dlop_op_desc *ex = dlop_test_find_op("exp");
  int64_t shape[1] = {4};
  dlop_type out, types[2] = {dlop_test_type(DLOP_FLOAT32, 1, shape), dlop_test_type(DLOP_FLOAT64, 1, shape)};
  char error[512];
  ck_assert_int_eq(dlop_test_make_node(multiply, NULL, types, 2, &out, error, sizeof error), DLOP_TYPE_ERROR);
  ck_assert_msg(strstr(error, "multiply_them: inputs must have the same dtype, got float32 and float64"),
                "message: %s", error);
  ck_assert_int_eq(dlop_test_make_node(dbl, NULL, types, 2, &out, error, sizeof error), DLOP_TYPE_ERROR);
  ck_assert_msg(strstr(error, "double") && strstr(error, "1 input") && strstr(error, "got 2"), "message: %s", error);
  ck_assert_int_eq(dlop_test_make_node(multiply, NULL, types, 1, &out, error, sizeof error), DLOP_TYPE_ERROR);
  ck_assert_msg(strstr(error, "2 inputs") && strstr(error, "got 1"), "message: %s", error);
  dlop_type flags[2] = {dlop_test_type(DLOP_BOOL, 1, shape), dlop_test_type(DLOP_BOOL, 1, shape)};
  ck_assert_int_eq(dlop_test_make_node(dbl, NULL, flags, 1, &out, error, sizeof error), DLOP_TYPE_ERROR);
  ck_assert_msg(strstr(error, "bool") && strstr(error, "not supported"), "message: %s", error);
  ck_assert_int_eq(dlop_test_make_node(multiply, NULL, flags, 2, &out, error, sizeof error), DLOP_TYPE_ERROR);
  ck_assert_msg(strstr(error, "bool"), "message: %s", error);
  ck_assert_int_eq(dlop_test_make_node(ex, NULL, flags, 1, &out, error, sizeof error), DLOP_TYPE_ERROR);
  ck_assert_msg(strstr(error, "exp") && strstr(error, "bool"), "message: %s", error);
  dlop_type int32s = dlop_test_type(DLOP_INT32, 1, shape);
  ck_assert_int_eq(dlop_test_make_node(ex, NULL, &int32s, 1, &out, error, sizeof error), DLOP_TYPE_ERROR);
  ck_assert_msg(strstr(error, "int32") && strstr(error, "float32"), "message: %s", error);
}
END_TEST

START_TEST(test_broadcast_shape_rules) {
  const dlop_op_desc *multiply = dlop_test_find_op("multiply_them");
  char error[512];
  dlop_type out;
  int64_t s34[2] = {3, 4}, s5[1] = {5}, su4[2] = {DLOP_DIM_UNKNOWN, 4}, s31[2] = {3, 1};
  int64_t su[1] = {DLOP_DIM_UNKNOWN}, s1[1] = {1};
  dlop_type bad[2] = {dlop_test_type(DLOP_FLOAT32, 2, s34), dlop_test_type(DLOP_FLOAT32, 1, s5)};
  ck_assert_int_eq(dlop_test_make_node(multiply, NULL, bad, 2, &out, error, sizeof error), DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(error, "cannot broadcast (3, 4) with (5,)"), "message: %s", error);
  out = dlop_test_type(DLOP_FLOAT32, 2, s34);
  ck_assert_int_eq(dlop_test_infer_shape(multiply, NULL, bad, 2, &out, error, sizeof error), DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(error, "cannot broadcast (3, 4) with (5,)"), "message: %s", error);
  /* unknown dims: against a known n > 1 they become n; against 1 they stay unknown */
  dlop_type partial[2] = {dlop_test_type(DLOP_INT16, 2, su4), dlop_test_type(DLOP_INT16, 2, s31)};
  ck_assert_int_eq(dlop_test_make_node(multiply, NULL, partial, 2, &out, error, sizeof error), DLOP_OK);
  ck_assert_int_eq(out.dtype, DLOP_INT16);
  ck_assert_int_eq(out.ndim, 2);
  ck_assert_int_eq(out.shape[0], 3);
  ck_assert_int_eq(out.shape[1], 4);
  dlop_type unknown[2] = {dlop_test_type(DLOP_FLOAT64, 1, su), dlop_test_type(DLOP_FLOAT64, 1, s1)};
  ck_assert_int_eq(dlop_test_make_node(multiply, NULL, unknown, 2, &out, error, sizeof error), DLOP_OK);
  ck_assert_int_eq(out.ndim, 1);
  ck_assert_int_eq(out.shape[0], DLOP_DIM_UNKNOWN);
  /* unary ops keep unknown dims */
  dlop_type x = dlop_test_type(DLOP_FLOAT32, 2, su4);
  ck_assert_int_eq(dlop_test_make_node(dlop_test_find_op("exp"), NULL, &x, 1, &out, error, sizeof error),
                   DLOP_OK);
  ck_assert_int_eq(out.shape[0], DLOP_DIM_UNKNOWN);
  ck_assert_int_eq(out.shape[1], 4);
}
END_TEST

START_TEST(test_run_rejects_mismatched_tensors) {
  const dlop_op_desc *dbl = dlop_test_find_op("double"), *multiply = dlop_test_find_op("multiply_them");
  int64_t shape[1] = {8}, other[1] = {9};
  dlop_type type = dlop_test_type(DLOP_FLOAT32, 1, shape), out_type;
  char error[512];
  ck_assert_int_eq(dlop_test_make_node(dbl, NULL, &type, 1, &out_type, error, sizeof error), DLOP_OK);
  dlop_thunk thunk;
  dlop_test_make_thunk_ok(dbl, NULL, &type, 1, &out_type, CPU, &thunk);
  test_tensor f64, f32, f32_9;
  tensor_init(&f64, DLOP_FLOAT64, 1, shape, NULL);
  tensor_init(&f32, DLOP_FLOAT32, 1, shape, NULL);
  tensor_init(&f32_9, DLOP_FLOAT32, 1, other, NULL);
  ck_assert_int_eq(dlop_test_run(&thunk, &f64.t, 1, &f32.t, NULL, error, sizeof error), DLOP_TYPE_ERROR);
  ck_assert_msg(strstr(error, "float64") && strstr(error, "float32"), "message: %s", error);
  ck_assert_int_eq(dlop_test_run(&thunk, &f32.t, 1, &f32_9.t, NULL, error, sizeof error), DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(error, "(9,)") && strstr(error, "(8,)"), "message: %s", error);
  dlop_test_destroy_thunk(&thunk);
  /* multiply_them: an output that is not the broadcast shape */
  dlop_type types[2] = {type, type};
  ck_assert_int_eq(dlop_test_make_node(multiply, NULL, types, 2, &out_type, error, sizeof error), DLOP_OK);
  out_type.shape[0] = DLOP_DIM_UNKNOWN;
  types[0].shape[0] = types[1].shape[0] = DLOP_DIM_UNKNOWN;
  dlop_test_make_thunk_ok(multiply, NULL, types, 2, &out_type, CPU, &thunk);
  dlop_tensor ins[2] = {f32.t, f32.t};
  ck_assert_int_eq(dlop_test_run(&thunk, ins, 2, &f32_9.t, NULL, error, sizeof error), DLOP_SHAPE_ERROR);
  ck_assert_msg(strstr(error, "broadcast"), "message: %s", error);
  dlop_test_destroy_thunk(&thunk);
  tensor_free(&f64);
  tensor_free(&f32);
  tensor_free(&f32_9);
}
END_TEST

/* A float64 tensor whose data + byte_offset is 4 bytes off an 8-byte boundary (as a caller
 * not using dlop's array API can hand over) is refused by every bundled op's run with a message,
 * not loaded (a fault on strict-alignment loads, a GPU's misaligned address). The storage holds
 * one element more, so the shifted view stays inside it whatever happened. */
START_TEST(test_run_rejects_misaligned_tensors) {
  static const char *const ops[] = {"double", "exp", "multiply_them"};
  int64_t shape[1] = {8}, roomy[1] = {9};
  char error[512];
  for (int k = 0; k < 3; k++) {
    const dlop_op_desc *op = dlop_test_find_op(ops[k]);
    int32_t num_inputs = strcmp(ops[k], "multiply_them") == 0 ? 2 : 1;
    dlop_type types[2] = {dlop_test_type(DLOP_FLOAT64, 1, shape), dlop_test_type(DLOP_FLOAT64, 1, shape)};
    dlop_type out_type;
    ck_assert_int_eq(dlop_test_make_node(op, NULL, types, num_inputs, &out_type, error, sizeof error),
                     DLOP_OK);
    dlop_thunk thunk;
    dlop_test_make_thunk_ok(op, NULL, types, num_inputs, &out_type, CPU, &thunk);
    test_tensor in, out;
    tensor_init(&in, DLOP_FLOAT64, 1, roomy, NULL);
    tensor_init(&out, DLOP_FLOAT64, 1, roomy, NULL);
    fill_span_random(&in, DLOP_FLOAT64, 7, -1.0, 1.0);
    in.shape[0] = out.shape[0] = 8;
    dlop_tensor ins[2] = {in.t, in.t};
    ck_assert_int_eq(dlop_test_run(&thunk, ins, num_inputs, &out.t, NULL, error, sizeof error), DLOP_OK);
    /* a misaligned input */
    ins[num_inputs - 1].byte_offset += 4;
    memset(out.allocation + GUARD_BYTES, 0x5a, out.span_bytes);
    ck_assert_int_eq(dlop_test_run(&thunk, ins, num_inputs, &out.t, NULL, error, sizeof error),
                     DLOP_INVALID_ARGUMENT);
    char want[160];
    snprintf(want, sizeof want, "input %d is misaligned", (int)num_inputs - 1);
    ck_assert_msg(strstr(error, want) && strstr(error, "byte_offset 4") &&
                      strstr(error, "4 bytes past") && strstr(error, "float64 element size 8"),
                  "%s: %s", ops[k], error);
    for (size_t b = 0; b < out.span_bytes; b++) /* nothing was written */
      ck_assert_uint_eq(out.allocation[GUARD_BYTES + b], 0x5a);
    /* a misaligned output */
    ins[num_inputs - 1].byte_offset -= 4;
    dlop_tensor shifted = out.t;
    shifted.byte_offset += 2;
    ck_assert_int_eq(dlop_test_run(&thunk, ins, num_inputs, &shifted, NULL, error, sizeof error),
                     DLOP_INVALID_ARGUMENT);
    ck_assert_msg(strstr(error, "output 0 is misaligned") && strstr(error, "byte_offset 2") &&
                      strstr(error, "2 bytes past"),
                  "%s: %s", ops[k], error);
    check_guards(&out, ops[k]);
    dlop_test_destroy_thunk(&thunk);
    tensor_free(&in);
    tensor_free(&out);
  }
}
END_TEST

/* ---- exp edge values --------------------------------------------------------------------- */

static void check_exp_edges(dlop_dtype dtype, const double *values, int64_t n) {
  const dlop_op_desc *ex = dlop_test_find_op("exp");
  dlop_type type = dlop_test_type(dtype, 1, &n), out_type;
  char error[512];
  ck_assert_int_eq(dlop_test_make_node(ex, NULL, &type, 1, &out_type, error, sizeof error), DLOP_OK);
  dlop_thunk thunk;
  dlop_test_make_thunk_ok(ex, NULL, &type, 1, &out_type, CPU, &thunk);
  test_tensor x, y;
  tensor_init(&x, dtype, 1, &n, NULL);
  tensor_init(&y, dtype, 1, &n, NULL);
  void *expected = malloc((size_t)n * 8);
  for (int64_t i = 0; i < n; i++) {
    dlop_test_set(element_base(&x), dtype, i, values[i]);
    dlop_test_set(expected, dtype, i, exp(dlop_test_get(element_base(&x), dtype, i)));
  }
  ck_assert_int_eq(dlop_test_run(&thunk, &x.t, 1, &y.t, NULL, error, sizeof error), DLOP_OK);
  char report[512];
  /* subnormal results: allow one unit of the smallest subnormal, rounding is coarse there */
  double atol = dtype == DLOP_FLOAT32 ? 1.5e-45 : 5e-324;
  int64_t bad = dlop_test_compare(expected, element_base(&y), dtype, n, atol,
                                  dlop_test_tolerance(dtype), report, sizeof report);
  ck_assert_msg(bad == 0, "exp %s edges: %s", dlop_dtype_name(dtype), report);
  /* exact special values, not just within tolerance */
  for (int64_t i = 0; i < n; i++) {
    double in = values[i], got = dlop_test_get(element_base(&y), dtype, i);
    if (isnan(in)) ck_assert_msg(isnan(got), "exp(nan) = %g", got);
    if (isinf(in) && in < 0) ck_assert_msg(got == 0.0 && !signbit(got), "exp(-inf) = %g", got);
    if (isinf(in) && in > 0) ck_assert_msg(isinf(got) && got > 0, "exp(inf) = %g", got);
    if (in == 0.0) ck_assert_msg(got == 1.0, "exp(0) = %.17g", got);
  }
  dlop_test_destroy_thunk(&thunk);
  tensor_free(&x);
  tensor_free(&y);
  free(expected);
}

START_TEST(test_exp_edge_values) {
  const double f32_values[] = {0.0, -0.0, -INFINITY, INFINITY, NAN, 88.7, 88.72, 88.73, -87.3,
                               -100.0, -103.9, -104.0, -200.0, 1000.0, -1000.0, 1e30, -1e30,
                               1e-30, 1.0, -1.0, 0.5, 10.0, -10.0};
  const double f64_values[] = {0.0, -0.0, -INFINITY, INFINITY, NAN, 88.7, -104.0, 709.7,
                               709.79, 710.0, -708.5, -740.0, -745.1, -746.0, 1000.0, -1000.0,
                               1e300, -1e300, 1e-300, 1.0, -1.0, 0.5, 20.0, -20.0};
  check_exp_edges(DLOP_FLOAT32, f32_values, (int64_t)(sizeof f32_values / sizeof f32_values[0]));
  check_exp_edges(DLOP_FLOAT64, f64_values, (int64_t)(sizeof f64_values / sizeof f64_values[0]));
  /* a sweep at a tighter tolerance than the generic one: a few ulp */
  enum { N = 20001 };
  static double sweep[N];
  for (int i = 0; i < N; i++) sweep[i] = -100.0 + 188.0 * i / (N - 1);
  check_exp_edges(DLOP_FLOAT32, sweep, N);
  for (int i = 0; i < N; i++) sweep[i] = -740.0 + 1448.0 * i / (N - 1);
  check_exp_edges(DLOP_FLOAT64, sweep, N);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("plugins_cpu");
  TCase *declarations = tcase_create("declarations");
  tcase_add_test(declarations, test_declared_dtypes_and_flags);
  tcase_add_test(declarations, test_entry_point_checks_the_abi);
  suite_add_tcase(suite, declarations);
  TCase *kernels = tcase_create("kernels");
  tcase_set_timeout(kernels, 120);
  tcase_add_test(kernels, test_double_every_dtype_size_layout);
  tcase_add_test(kernels, test_exp_every_dtype_size_layout);
  tcase_add_test(kernels, test_multiply_them_every_dtype_and_broadcast);
  tcase_add_test(kernels, test_exp_edge_values);
  suite_add_tcase(suite, kernels);
  TCase *errors = tcase_create("errors");
  tcase_add_test(errors, test_type_errors_come_back_with_messages);
  tcase_add_test(errors, test_broadcast_shape_rules);
  tcase_add_test(errors, test_run_rejects_mismatched_tensors);
  tcase_add_test(errors, test_run_rejects_misaligned_tensors);
  suite_add_tcase(suite, errors);
  return dlop_test_run_suite(suite);
}
