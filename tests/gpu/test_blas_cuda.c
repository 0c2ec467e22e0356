/* test_blas_cuda.c — the blas plugin (dot, matmul, gemm) on CUDA against a naive triple loop in
 * double over the same host data: float32 and float64 at tight tolerances (so TF32, off by
 * default, would fail them), float16 and bfloat16 at loose ones; transposed, sliced, copied
 * and broadcast layouts, batched matmul through one strided-batched call and through a loop,
 * k = 0, m = 0, gemm's alpha/beta/trans/c broadcast/in place, outputs written through scratch.
 * Outputs are poisoned (0xFF) first. Exits 77 without a GPU (1 with DLOP_REQUIRE_GPU=1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

static const dlop_device CUDA = {DLOP_DEVICE_CUDA, 0};

typedef struct spec {
  int32_t ndim;
  int64_t shape[4];
  int64_t strides[4]; /* all zero: C-contiguous */
} spec;

/* A tensor over a span of host data and the same span on the GPU. */
typedef struct tensor {
  dlop_tensor t;      /* on the host (what the reference reads) */
  dlop_tensor device; /* the same layout over the GPU copy */
  int64_t shape[4], strides[4];
  char *allocation;
  size_t span_elements;
  dlop_array *span;
} tensor;

static int64_t numel(int32_t ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int32_t d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

static void tensor_init(tensor *x, dlop_dtype dtype, const spec *s, uint64_t seed) {
  int64_t contiguous = 1, lo = 0, hi = 0, any = 0;
  size_t element = dlop_dtype_size(dtype);
  memset(x, 0, sizeof *x);
  for (int32_t d = 0; d < s->ndim; d++) any |= s->strides[d];
  for (int32_t d = s->ndim - 1; d >= 0; d--) {
    x->shape[d] = s->shape[d];
    x->strides[d] = any ? s->strides[d] : contiguous;
    contiguous *= s->shape[d];
  }
  if (numel(s->ndim, s->shape) > 0)
    for (int32_t d = 0; d < s->ndim; d++) {
      int64_t reach = (s->shape[d] - 1) * x->strides[d];
      if (reach < 0) lo += reach;
      else hi += reach;
    }
  x->span_elements = (size_t)(hi - lo + 1);
  x->allocation = malloc(x->span_elements * element);
  ck_assert_ptr_nonnull(x->allocation);
  dlop_test_fill_random(x->allocation, dtype, (int64_t)x->span_elements, seed, -1.0, 1.0);
  x->t.data = x->allocation;
  x->t.byte_offset = (uint64_t)(-lo * (int64_t)element);
  x->t.device = (dlop_device){DLOP_DEVICE_CPU, 0};
  x->t.ndim = s->ndim;
  x->t.dtype = dlop_dtype_to_dl(dtype);
  x->t.shape = x->shape;
  x->t.strides = x->strides;
  int64_t span = (int64_t)x->span_elements;
  DLOP_CK_OK(dlop_array_from_host(CUDA, dtype, 1, &span, x->allocation, &x->span));
  DLOP_CK_OK(dlop_array_synchronize(x->span));
  x->device = x->t;
  x->device.data = dlop_array_tensor(x->span)->data;
  x->device.byte_offset = dlop_array_tensor(x->span)->byte_offset + x->t.byte_offset;
  x->device.device = CUDA;
}

/* Bring the GPU span back into the host span. */
static void tensor_download(tensor *x) {
  DLOP_CK_OK(dlop_array_to_host(x->span, x->allocation,
                                x->span_elements * dlop_dtype_size(dlop_tensor_dtype(&x->t))));
}

static void tensor_free(tensor *x) {
  dlop_array_release(x->span);
  free(x->allocation);
}

static double tensor_get(const tensor *x, int64_t i) {
  int64_t offset = 0;
  for (int32_t d = x->t.ndim - 1; d >= 0; d--) {
    offset += (i % x->shape[d]) * x->strides[d];
    i /= x->shape[d];
  }
  return dlop_test_get((char *)x->t.data + x->t.byte_offset, dlop_tensor_dtype(&x->t), offset);
}

static double *gather(const tensor *x) {
  int64_t n = numel(x->t.ndim, x->shape);
  double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; i < n; i++) v[i] = tensor_get(x, i);
  return v;
}

static const dlop_op_desc *op_named(const char *name) {
  dlop_test_load_bundled_plugins();
  const dlop_op_desc *op = dlop_find_op(name);
  ck_assert_msg(op != NULL, "op %s not found: %s", name, dlop_last_error());
  return op;
}

typedef struct gemm_params {
  double alpha, beta;
  int trans_a, trans_b;
} gemm_params;

static void fill_params(const dlop_op_desc *op, const gemm_params *g, int allow_tf32,
                        dlop_param_value *v) {
  for (int32_t i = 0; i < op->num_params; i++) v[i] = op->params[i].default_value;
  v[op->num_params - 1].u.i = allow_tf32; /* allow_tf32 is every op's last parameter */
  if (g != NULL) {
    v[0].u.f = g->alpha;
    v[1].u.f = g->beta;
    v[2].u.i = g->trans_a;
    v[3].u.i = g->trans_b;
  }
}

/* ---- the reference ----------------------------------------------------------------------- */

/* NumPy's matmul (dot for ranks <= 2 is the same) or gemm, in double. */
static void reference(const char *op, const gemm_params *g, const tensor *a, const tensor *b,
                      const tensor *c, const dlop_type *out_type, double *out) {
  const double *va = gather(a), *vb = gather(b), *vc = c ? gather(c) : NULL;
  int32_t na = a->t.ndim, nb = b->t.ndim, no = out_type->ndim;
  int is_gemm = strcmp(op, "gemm") == 0;
  int64_t m = na == 1 ? 1 : a->shape[na - 2], k = a->shape[na - 1];
  int64_t n = nb == 1 ? 1 : b->shape[nb - 1];
  if (is_gemm && g->trans_a) m = a->shape[1], k = a->shape[0];
  if (is_gemm && g->trans_b) n = b->shape[0];
  int has_m = is_gemm || na > 1, has_n = is_gemm || nb > 1;
  int32_t batch = no - has_m - has_n, batch_a = na > 2 ? na - 2 : 0, batch_b = nb > 2 ? nb - 2 : 0;
  int64_t total = numel(no, out_type->shape);
  for (int64_t o = 0; o < total; o++) {
    int64_t index[DLOP_MAX_NDIM], rest = o;
    for (int32_t d = no - 1; d >= 0; d--) index[d] = rest % out_type->shape[d], rest /= out_type->shape[d];
    int64_t i = has_m ? index[batch] : 0, j = has_n ? index[no - 1] : 0;
    int64_t base_a = 0, base_b = 0; /* linear element of the batch's matrix start */
    for (int32_t d = 0; d < batch_a; d++) {
      int64_t idx = a->shape[d] == 1 ? 0 : index[batch - batch_a + d];
      base_a = base_a * a->shape[d] + idx;
    }
    for (int32_t d = 0; d < batch_b; d++) {
      int64_t idx = b->shape[d] == 1 ? 0 : index[batch - batch_b + d];
      base_b = base_b * b->shape[d] + idx;
    }
    base_a *= (na == 1 ? k : m * k);
    base_b *= (nb == 1 ? k : k * n);
    double sum = 0;
    for (int64_t q = 0; q < k; q++) {
      double x = is_gemm && g->trans_a ? va[q * m + i] : va[base_a + i * k + q];
      double y = is_gemm && g->trans_b ? vb[j * k + q] : vb[base_b + q * n + j];
      sum += x * y;
    }
    if (is_gemm) {
      double cv = 0;
      if (c->t.ndim == 2) cv = vc[(c->shape[0] == 1 ? 0 : i) * c->shape[1] + (c->shape[1] == 1 ? 0 : j)];
      else if (c->t.ndim == 1) cv = vc[c->shape[0] == 1 ? 0 : j];
      else cv = vc[0];
      sum = g->alpha * sum + (g->beta != 0 ? g->beta * cv : 0);
    }
    out[o] = sum;
  }
  free((void *)va);
  free((void *)vb);
  free((void *)vc);
}


static double tolerance(dlop_dtype dtype, int allow_tf32) {
  switch (dtype) {
    case DLOP_FLOAT64: return 1e-12;
    case DLOP_FLOAT32: return allow_tf32 ? 2e-2 : 2e-5; /* TF32 would miss 2e-5 by far */
    case DLOP_FLOAT16: return 8e-3;
    default: return 4e-2; /* bfloat16: 8 bits of mantissa in the output */
  }
}

static void check_case(const char *op_name, dlop_dtype dtype, const spec *sa, const spec *sb,
                       const spec *sc, const gemm_params *g, const spec *out_strides,
                       int allow_tf32, int inplace, const char *what) {
  const dlop_op_desc *op = op_named(op_name);
  dlop_param_value params[8];
  tensor x[3], out;
  dlop_type types[3], out_type;
  dlop_tensor inputs[3];
  dlop_node_args node;
  dlop_thunk_args thunk_args;
  dlop_run_args run_args;
  dlop_thunk thunk;
  dlop_stream *stream = NULL;
  char error[1024] = "";
  int32_t num_inputs = sc ? 3 : 2;
  fill_params(op, g, allow_tf32, params);
  tensor_init(&x[0], dtype, sa, 11);
  tensor_init(&x[1], dtype, sb, 22);
  if (sc) tensor_init(&x[2], dtype, sc, 33);
  for (int32_t i = 0; i < num_inputs; i++) {
    memset(&types[i], 0, sizeof types[i]);
    types[i].dtype = dtype;
    types[i].ndim = x[i].t.ndim;
    memcpy(types[i].shape, x[i].shape, sizeof(int64_t) * (size_t)x[i].t.ndim);
    inputs[i] = x[i].device;
  }
  memset(&node, 0, sizeof node);
  memset(&out_type, 0, sizeof out_type);
  node.struct_size = sizeof node;
  node.op = op, node.params = params, node.num_params = op->num_params;
  node.num_inputs = num_inputs, node.inputs = types, node.outputs = &out_type, node.num_outputs = 1;
  node.error = error, node.error_size = sizeof error;
  ck_assert_msg(op->make_node(&node) == DLOP_OK, "%s %s: make_node: %s", op_name, what, error);
  spec os = {out_type.ndim, {0}, {0}};
  for (int32_t d = 0; d < out_type.ndim; d++) os.shape[d] = out_type.shape[d];
  if (out_strides) memcpy(os.strides, out_strides->strides, sizeof os.strides);
  int64_t n = numel(out_type.ndim, out_type.shape);
  double *expected = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  reference(op_name, g, &x[0], &x[1], sc ? &x[2] : NULL, &out_type, expected);
  DLOP_CK_OK(dlop_stream_create(CUDA, &stream));
  if (inplace) {
    out = x[2];
    out.t.shape = out.device.shape = out.shape;
    out.t.strides = out.device.strides = out.strides;
  } else {
    tensor_init(&out, dtype, &os, 44);
    const dlop_tensor *span = dlop_array_tensor(out.span);
    ck_assert_int_eq(dlop_host_api_table()->cuda_memset_async(
                         (char *)span->data + span->byte_offset, 0xFF,
                         out.span_elements * dlop_dtype_size(dtype), dlop_stream_handle(stream)),
                     DLOP_OK);
  }
  memset(&thunk_args, 0, sizeof thunk_args);
  memset(&thunk, 0, sizeof thunk);
  thunk.struct_size = sizeof thunk;
  thunk_args.struct_size = sizeof thunk_args;
  thunk_args.op = op, thunk_args.params = params, thunk_args.num_params = op->num_params;
  thunk_args.num_inputs = num_inputs, thunk_args.inputs = types, thunk_args.outputs = &out_type;
  thunk_args.num_outputs = 1, thunk_args.device = CUDA, thunk_args.thunk = &thunk;
  thunk_args.error = error, thunk_args.error_size = sizeof error;
  int status = op->make_thunk(&thunk_args);
  ck_assert_msg(status == DLOP_OK, "%s %s: make_thunk: %s (%s)", op_name, what, dlop_status_name(status), error);
  memset(&run_args, 0, sizeof run_args);
  run_args.struct_size = sizeof run_args;
  run_args.inputs = inputs, run_args.num_inputs = num_inputs;
  run_args.outputs = &out.device, run_args.num_outputs = 1;
  run_args.stream = dlop_stream_handle(stream);
  run_args.error = error, run_args.error_size = sizeof error;
  status = thunk.run(thunk.state, &run_args);
  ck_assert_msg(status == DLOP_OK, "%s %s %s: run: %s (%s)", op_name, dlop_dtype_name(dtype), what,
                dlop_status_name(status), error);
  DLOP_CK_OK(dlop_stream_synchronize(stream));
  tensor_download(&out);
  double tol = tolerance(dtype, allow_tf32);
  for (int64_t i = 0; i < n; i++) {
    double got = tensor_get(&out, i);
    ck_assert_msg(fabs(got - expected[i]) <= tol * (1 + fabs(expected[i])),
                  "%s %s %s: element %lld of %lld: expected %.10g, got %.10g", op_name,
                  dlop_dtype_name(dtype), what, (long long)i, (long long)n, expected[i], got);
  }
  thunk.destroy(thunk.state);
  dlop_stream_destroy(stream);
  free(expected);
  for (int32_t i = 0; i < num_inputs; i++) tensor_free(&x[i]);
  if (!inplace) tensor_free(&out);
}

#define S1(a) {1, {a}, {0}}
#define S2(a, b) {2, {a, b}, {0}}
#define S3(a, b, c) {3, {a, b, c}, {0}}
#define S4(a, b, c, d) {4, {a, b, c, d}, {0}}

static const dlop_dtype DTYPES[4] = {DLOP_FLOAT32, DLOP_FLOAT64, DLOP_FLOAT16, DLOP_BFLOAT16};

START_TEST(matmul_cases) {
  dlop_dtype dt = DTYPES[_i];
  static const struct { spec a, b; const char *what; } cases[] = {
      {S2(37, 53), S2(53, 29), "37x53 @ 53x29"},
      {S2(1, 1), S2(1, 1), "1x1"},
      {S2(0, 5), S2(5, 3), "m = 0"},
      {S2(4, 0), S2(0, 3), "k = 0: zeros"},
      {S1(7), S1(7), "(n)(n) -> ()"},
      {S2(6, 7), S1(7), "(m,k)(k)"},
      {S1(7), S2(7, 5), "(k)(k,n)"},
      {{2, {37, 53}, {1, 37}}, {2, {53, 29}, {1, 53}}, "both transposed"},
      {{2, {37, 53}, {64, 1}}, {2, {53, 29}, {31, 1}}, "sliced rows"},
      {{2, {7, 9}, {20, 2}}, {2, {9, 5}, {-5, -1}}, "copied: no unit stride, negative"},
      {{2, {7, 9}, {0, 1}}, S2(9, 5), "copied: zero stride"},
      {S3(4, 6, 7), S2(7, 5), "batch, b broadcast (stride 0): one strided-batched call"},
      {S4(2, 1, 3, 4), S3(5, 4, 2), "batch (2,1) with (5,): a loop of strided-batched calls"},
      {{3, {3, 5, 4}, {40, 8, 1}}, {3, {3, 4, 6}, {24, 1, 4}}, "batched, sliced and transposed"},
      {S2(300, 200), S2(200, 250), "300x200x250"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    check_case("matmul", dt, &cases[i].a, &cases[i].b, NULL, NULL, NULL, 0, 0, cases[i].what);
  spec a = S2(6, 7), b = S2(7, 5), column_major = {2, {0}, {1, 6}}, strided = {2, {0}, {10, 2}};
  check_case("matmul", dt, &a, &b, NULL, NULL, &column_major, 0, 0, "column-major output");
  check_case("matmul", dt, &a, &b, NULL, NULL, &strided, 0, 0, "strided output (scratch)");
  spec d1 = S2(9, 33), d2 = S1(33);
  check_case("dot", dt, &d1, &d2, NULL, NULL, NULL, 0, 0, "dot (m,k)(k)");
}
END_TEST

START_TEST(gemm_cases) {
  dlop_dtype dt = DTYPES[_i];
  spec a = S2(37, 53), b = S2(53, 29), at = S2(53, 37), bt = S2(29, 53);
  spec c_full = S2(37, 29), c_row = S2(1, 29), c_scalar = {0, {0}, {0}};
  gemm_params plain = {1.0, 1.0, 0, 0}, scaled = {-0.5, 2.0, 0, 0}, no_c = {1.5, 0.0, 0, 0};
  gemm_params both = {2.0, 0.5, 1, 1};
  check_case("gemm", dt, &a, &b, &c_full, &plain, NULL, 0, 0, "c (m,n)");
  check_case("gemm", dt, &a, &b, &c_row, &scaled, NULL, 0, 0, "c (1,n)");
  check_case("gemm", dt, &a, &b, &c_scalar, &scaled, NULL, 0, 0, "c ()");
  check_case("gemm", dt, &a, &b, &c_full, &no_c, NULL, 0, 0, "beta 0");
  check_case("gemm", dt, &at, &bt, &c_row, &both, NULL, 0, 0, "trans_a and trans_b");
  spec a_k0 = S2(5, 0), b_k0 = S2(0, 4), c_k0 = S2(5, 4);
  check_case("gemm", dt, &a_k0, &b_k0, &c_k0, &scaled, NULL, 0, 0, "k = 0: beta * c");
  check_case("gemm", dt, &a, &b, &c_full, &scaled, NULL, 0, 1, "in place on c");
}
END_TEST

/* allow_tf32 = true still gives float32 products within TF32's error (and is accepted). */
START_TEST(tf32_opt_in) {
  spec a = S2(256, 512), b = S2(512, 128);
  check_case("matmul", DLOP_FLOAT32, &a, &b, NULL, NULL, NULL, 0, 0, "TF32 off (default): tight");
  check_case("matmul", DLOP_FLOAT32, &a, &b, NULL, NULL, NULL, 1, 0, "TF32 on: loose");
}
END_TEST

int main(void) {
  dlop_test_require_cuda_or_skip();
  Suite *suite = suite_create("blas_cuda");
  TCase *tc = tcase_create("cuda");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, matmul_cases, 0, 4);
  tcase_add_loop_test(tc, gemm_cases, 0, 4);
  tcase_add_test(tc, tf32_opt_in);
  suite_add_tcase(suite, tc);
  return dlop_test_run_suite(suite);
}
