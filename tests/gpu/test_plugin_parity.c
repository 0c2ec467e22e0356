/* test_plugin_parity.c — CPU vs CUDA parity of the seed plugins (double, multiply_them, exp):
 * random data for every declared dtype, sizes 0, 1, 1000 and 2^20 + 3, strided, negative-stride,
 * misaligned and broadcast inputs, each thunk run directly on a dlop stream with its output
 * poisoned (0xFF bytes) first, so an element it fails to write shows up as a mismatch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};
static const dlop_device CUDA = {DLOP_DEVICE_CUDA, 0};

typedef struct layout {
  int32_t ndim;
  int64_t shape[3];
  int64_t strides[3]; /* elements; all zero means C-contiguous */
  int64_t offset;     /* extra elements before the first one (misalignment) */
} layout;

static int64_t numel_of(int32_t ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int32_t d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

/* Strides of a layout (contiguous when none given) and the element span it needs, with
 * *first the element index of element 0 inside that span. */
static int64_t layout_span(const layout *l, int64_t *strides, int64_t *first) {
  int64_t contiguous = 1, lo = 0, hi = 0, any = 0;
  for (int32_t d = 0; d < l->ndim; d++) any |= l->strides[d];
  for (int32_t d = l->ndim - 1; d >= 0; d--) {
    strides[d] = any ? l->strides[d] : contiguous;
    contiguous *= l->shape[d];
  }
  *first = l->offset;
  if (numel_of(l->ndim, l->shape) == 0) return l->offset;
  for (int32_t d = 0; d < l->ndim; d++) {
    int64_t reach = (l->shape[d] - 1) * strides[d];
    if (reach < 0) lo += reach;
    else hi += reach;
  }
  *first = l->offset - lo;
  return l->offset + hi - lo + 1;
}

/* One input: the same random span on the host and on the GPU, viewed with the layout. */
typedef struct operand {
  dlop_tensor host_tensor;
  int64_t shape[3], strides[3];
  void *host_span;
  dlop_array *device_span, *device_view;
} operand;

static void operand_init(operand *o, dlop_dtype dtype, const layout *l, uint64_t seed, double low,
                         double high) {
  int64_t first, span = layout_span(l, o->strides, &first);
  size_t elsize = dlop_dtype_size(dtype);
  memset(&o->host_tensor, 0, sizeof o->host_tensor);
  memcpy(o->shape, l->shape, sizeof o->shape);
  o->host_span = malloc((size_t)span * elsize + 16);
  ck_assert_ptr_nonnull(o->host_span);
  dlop_test_fill_random(o->host_span, dtype, span, seed, low, high);
  o->host_tensor.data = o->host_span;
  o->host_tensor.device = CPU;
  o->host_tensor.ndim = l->ndim;
  o->host_tensor.dtype = dlop_dtype_to_dl(dtype);
  o->host_tensor.shape = o->shape;
  o->host_tensor.strides = o->strides;
  o->host_tensor.byte_offset = (uint64_t)first * elsize;
  DLOP_CK_OK(dlop_array_from_host(CUDA, dtype, 1, &span, o->host_span, &o->device_span));
  DLOP_CK_OK(dlop_array_view(o->device_span, l->ndim, l->shape, o->strides,
                             (uint64_t)first * elsize, &o->device_view));
}

static void operand_free(operand *o) {
  dlop_array_release(o->device_view);
  dlop_array_release(o->device_span);
  free(o->host_span);
}

static dlop_type type_of(dlop_dtype dtype, const layout *l) {
  dlop_type t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.ndim = l->ndim;
  for (int32_t d = 0; d < l->ndim; d++) t.shape[d] = l->shape[d];
  return t;
}

static void make_thunk_ok(const dlop_op_desc *op, const dlop_type *inputs, int32_t num_inputs,
                          const dlop_type *output, dlop_device device, dlop_thunk *thunk) {
  char error[512] = "";
  dlop_thunk_args args;
  memset(&args, 0, sizeof args);
  memset(thunk, 0, sizeof *thunk);
  thunk->struct_size = sizeof *thunk;
  args.struct_size = sizeof args;
  args.op = op;
  args.num_inputs = num_inputs;
  args.inputs = inputs;
  args.outputs = output;
  args.num_outputs = 1;
  args.device = device;
  args.thunk = thunk;
  args.error = error;
  args.error_size = sizeof error;
  int status = op->make_thunk(&args);
  ck_assert_msg(status == DLOP_OK, "%s make_thunk on %s: %s (%s)", op->name,
                device.type == DLOP_DEVICE_CUDA ? "cuda" : "cpu", dlop_status_name(status), error);
}

static void run_ok(const dlop_thunk *thunk, const dlop_tensor *inputs, int32_t num_inputs,
                   const dlop_tensor *output, void *stream, const char *what) {
  char error[512] = "";
  dlop_run_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.inputs = inputs;
  args.num_inputs = num_inputs;
  args.outputs = output;
  args.num_outputs = 1;
  args.stream = stream;
  args.error = error;
  args.error_size = sizeof error;
  int status = thunk->run(thunk->state, &args);
  ck_assert_msg(status == DLOP_OK, "%s: run failed: %s (%s)", what, dlop_status_name(status), error);
}

static void value_range(const char *op_name, dlop_dtype dtype, double *low, double *high) {
  switch (dtype) {
    case DLOP_INT8: *low = -128; *high = 127; return;
    case DLOP_UINT8: *low = 0; *high = 255; return;
    case DLOP_INT16: *low = -32768; *high = 32767; return;
    case DLOP_INT32: *low = -2147483648.0; *high = 2147483647.0; return;
    case DLOP_INT64: *low = -9.0e18; *high = 9.0e18; return;
    default: break;
  }
  int is_exp = strcmp(op_name, "exp") == 0;
  *low = is_exp ? (dtype == DLOP_FLOAT16 ? -9 : -80) : -100;
  *high = is_exp ? (dtype == DLOP_FLOAT16 ? 10 : 80) : 100;
}

/* Run op on the CPU and on CUDA with the same inputs; the outputs must agree. */
static void check_parity(const char *op_name, dlop_dtype dtype, const layout *a_layout,
                         const layout *b_layout, uint64_t seed) {
  const dlop_op_desc *op = dlop_find_op(op_name);
  ck_assert_msg(op != NULL, "%s: %s", op_name, dlop_last_error());
  const dlop_host_api *host = dlop_host_api_table();
  int32_t num_inputs = b_layout ? 2 : 1;
  const layout *layouts[2] = {a_layout, b_layout};
  operand in[2];
  dlop_type in_types[2], out_type;
  double low, high;
  value_range(op_name, dtype, &low, &high);
  for (int k = 0; k < num_inputs; k++) {
    operand_init(&in[k], dtype, layouts[k], seed + (uint64_t)k, low, high);
    in_types[k] = type_of(dtype, layouts[k]);
  }
  /* output type and shape from the op's own rules */
  char error[512] = "";
  dlop_node_args node;
  memset(&node, 0, sizeof node);
  memset(&out_type, 0, sizeof out_type);
  node.struct_size = sizeof node;
  node.op = op;
  node.num_inputs = num_inputs;
  node.inputs = in_types;
  node.outputs = &out_type;
  node.num_outputs = 1;
  node.error = error;
  node.error_size = sizeof error;
  ck_assert_msg(op->make_node(&node) == DLOP_OK, "make_node: %s", error);
  ck_assert_msg(op->infer_shape(&node) == DLOP_OK, "infer_shape: %s", error);
  int64_t n = numel_of(out_type.ndim, out_type.shape);
  size_t bytes = (size_t)n * dlop_dtype_size(dtype);
  char what[160];
  snprintf(what, sizeof what, "%s %s n=%lld (a ndim %d%s)", op_name, dlop_dtype_name(dtype),
           (long long)n, (int)a_layout->ndim, b_layout ? ", broadcast pair" : "");

  /* CPU */
  void *cpu_out = malloc(bytes + 16), *gpu_out = malloc(bytes + 16);
  ck_assert(cpu_out && gpu_out);
  memset(cpu_out, 0xFF, bytes);
  dlop_tensor cpu_output;
  memset(&cpu_output, 0, sizeof cpu_output);
  cpu_output.data = cpu_out;
  cpu_output.device = CPU;
  cpu_output.ndim = out_type.ndim;
  cpu_output.dtype = dlop_dtype_to_dl(dtype);
  cpu_output.shape = out_type.shape;
  dlop_thunk cpu_thunk, gpu_thunk;
  make_thunk_ok(op, in_types, num_inputs, &out_type, CPU, &cpu_thunk);
  dlop_tensor cpu_inputs[2] = {in[0].host_tensor, in[num_inputs - 1].host_tensor};
  run_ok(&cpu_thunk, cpu_inputs, num_inputs, &cpu_output, NULL, what);
  if (cpu_thunk.destroy) cpu_thunk.destroy(cpu_thunk.state);

  /* CUDA: output poisoned on the same stream first */
  dlop_stream *stream = NULL;
  dlop_array *output = NULL;
  DLOP_CK_OK(dlop_stream_create(CUDA, &stream));
  DLOP_CK_OK(dlop_array_empty(CUDA, dtype, out_type.ndim, out_type.shape, &output));
  const dlop_tensor *gpu_output = dlop_array_tensor(output);
  if (bytes > 0)
    ck_assert_int_eq(host->cuda_memset_async(dlop_tensor_base(gpu_output), 0xFF, bytes,
                                             dlop_stream_handle(stream)), DLOP_OK);
  make_thunk_ok(op, in_types, num_inputs, &out_type, CUDA, &gpu_thunk);
  dlop_tensor gpu_inputs[2] = {*dlop_array_tensor(in[0].device_view),
                               *dlop_array_tensor(in[num_inputs - 1].device_view)};
  run_ok(&gpu_thunk, gpu_inputs, num_inputs, gpu_output, dlop_stream_handle(stream), what);
  /* twice: a second run on the same thunk (module loaded once) must give the same result */
  run_ok(&gpu_thunk, gpu_inputs, num_inputs, gpu_output, dlop_stream_handle(stream), what);
  DLOP_CK_OK(dlop_stream_synchronize(stream));
  DLOP_CK_OK(dlop_array_to_host(output, gpu_out, bytes));
  if (gpu_thunk.destroy) gpu_thunk.destroy(gpu_thunk.state);

  char report[512];
  double atol = dtype == DLOP_FLOAT32 ? 1.5e-45 : dtype == DLOP_FLOAT64 ? 5e-324 : 0.0;
  int64_t bad = dlop_test_compare(cpu_out, gpu_out, dtype, n, atol, dlop_test_tolerance(dtype),
                                  report, sizeof report);
  ck_assert_msg(bad == 0, "%s: %lld of %lld differ between CPU (expected) and CUDA (got): %s",
                what, (long long)bad, (long long)n, report);

  dlop_array_release(output);
  dlop_stream_destroy(stream);
  for (int k = 0; k < num_inputs; k++) operand_free(&in[k]);
  free(cpu_out);
  free(gpu_out);
}

static const int64_t sizes[] = {0, 1, 1000, (1 << 20) + 3};

static void check_unary(const char *op_name) {
  const dlop_op_desc *op = dlop_find_op(op_name);
  ck_assert_msg(op != NULL, "%s: %s", op_name, dlop_last_error());
  uint64_t seed = 1;
  for (int dt = 0; dt < DLOP_DTYPE_COUNT; dt++) {
    if (!(op->cuda_dtypes & DLOP_DTYPE_BIT(dt))) continue;
    ck_assert_msg(op->cpu_dtypes & DLOP_DTYPE_BIT(dt), "%s: %s on CUDA only", op_name,
                  dlop_dtype_name((dlop_dtype)dt));
    dlop_dtype dtype = (dlop_dtype)dt;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      layout flat = {1, {sizes[s]}, {0}, 0};
      layout misaligned = {1, {sizes[s]}, {0}, 1}; /* not on a 16-byte boundary: scalar path */
      layout stepped = {1, {sizes[s]}, {2}, 0};
      layout reversed = {1, {sizes[s]}, {-1}, 0};
      check_parity(op_name, dtype, &flat, NULL, seed++);
      check_parity(op_name, dtype, &misaligned, NULL, seed++);
      check_parity(op_name, dtype, &stepped, NULL, seed++);
      check_parity(op_name, dtype, &reversed, NULL, seed++);
    }
    layout transposed = {2, {513, 257}, {1, 513}, 0};
    layout rows_reversed = {3, {3, 70, 51}, {-70 * 51, 51, 1}, 0};
    layout broadcast_rows = {2, {1000, 77}, {0, 1}, 0};
    check_parity(op_name, dtype, &transposed, NULL, seed++);
    check_parity(op_name, dtype, &rows_reversed, NULL, seed++);
    check_parity(op_name, dtype, &broadcast_rows, NULL, seed++);
    /* 2-d with the inner dim contiguous (the kernels' rows fast path when rows start 16-byte
     * aligned; the general path otherwise): padded, reversed, broadcast and odd-pitch rows */
    layout padded = {2, {300, 64}, {128, 1}, 0}, flipped = {2, {300, 64}, {-64, 1}, 0};
    layout repeated = {2, {1000, 64}, {0, 1}, 0}, odd_pitch = {2, {300, 64}, {67, 1}, 0};
    layout padded_misaligned = {2, {300, 64}, {128, 1}, 1};
    check_parity(op_name, dtype, &padded, NULL, seed++);
    check_parity(op_name, dtype, &flipped, NULL, seed++);
    check_parity(op_name, dtype, &repeated, NULL, seed++);
    check_parity(op_name, dtype, &odd_pitch, NULL, seed++);
    check_parity(op_name, dtype, &padded_misaligned, NULL, seed++);
  }
}

START_TEST(test_double_parity) { check_unary("double"); }
END_TEST

START_TEST(test_exp_parity) { check_unary("exp"); }
END_TEST

START_TEST(test_multiply_them_parity) {
  const dlop_op_desc *op = dlop_find_op("multiply_them");
  ck_assert_msg(op != NULL, "%s", dlop_last_error());
  uint64_t seed = 1000;
  for (int dt = 0; dt < DLOP_DTYPE_COUNT; dt++) {
    if (!(op->cuda_dtypes & DLOP_DTYPE_BIT(dt))) continue;
    dlop_dtype dtype = (dlop_dtype)dt;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      layout flat = {1, {sizes[s]}, {0}, 0};
      layout misaligned = {1, {sizes[s]}, {0}, 1};
      layout reversed = {1, {sizes[s]}, {-1}, 0};
      check_parity("multiply_them", dtype, &flat, &flat, seed++);
      check_parity("multiply_them", dtype, &misaligned, &flat, seed++);
      check_parity("multiply_them", dtype, &reversed, &flat, seed++);
    }
    layout col = {2, {3, 1}, {0}, 0}, row = {2, {1, 4}, {0}, 0};
    layout v5 = {1, {5}, {0}, 0}, m25 = {2, {2, 5}, {0}, 0};
    layout scalar = {0, {0}, {0}, 0}, big = {2, {1024, 1025}, {0}, 0};
    layout big_col = {2, {1024, 1}, {0}, 0}, big_row = {1, {1025}, {-1}, 0};
    layout transposed = {2, {513, 257}, {1, 513}, 0}, m = {2, {513, 257}, {0}, 0};
    check_parity("multiply_them", dtype, &col, &row, seed++);
    check_parity("multiply_them", dtype, &v5, &m25, seed++);
    check_parity("multiply_them", dtype, &scalar, &big, seed++);
    check_parity("multiply_them", dtype, &big_col, &big_row, seed++);
    check_parity("multiply_them", dtype, &transposed, &m, seed++);
    /* matrix times a row / column / scalar with rows of a multiple of 16 bytes (rows path) */
    layout m64 = {2, {1000, 64}, {0}, 0}, row64 = {1, {64}, {0}, 0}, col64 = {2, {1000, 1}, {0}, 0};
    layout padded = {2, {1000, 64}, {96, 1}, 0}, flat4k = {1, {4096}, {0}, 0};
    check_parity("multiply_them", dtype, &m64, &row64, seed++);
    check_parity("multiply_them", dtype, &row64, &m64, seed++);
    check_parity("multiply_them", dtype, &col64, &m64, seed++);
    check_parity("multiply_them", dtype, &padded, &row64, seed++);
    check_parity("multiply_them", dtype, &scalar, &flat4k, seed++);
    check_parity("multiply_them", dtype, &flat4k, &scalar, seed++);
  }
}
END_TEST

int main(void) {
  dlop_test_require_cuda_or_skip();
  /* The check above initialized CUDA in this process, and a CUDA context does not survive
   * fork(): run the tests in this process (a crash then fails the whole binary, as it should). */
  setenv("CK_FORK", "no", 1);
  Suite *suite = suite_create("plugin_parity");
  TCase *parity = tcase_create("parity");
  tcase_set_timeout(parity, 300);
  tcase_add_unchecked_fixture(parity, dlop_test_load_bundled_plugins, NULL);
  tcase_add_test(parity, test_double_parity);
  tcase_add_test(parity, test_exp_parity);
  tcase_add_test(parity, test_multiply_them_parity);
  suite_add_tcase(suite, parity);
  return dlop_test_run_suite(suite);
}
