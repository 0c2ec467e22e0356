/* test_fusion_cuda.c — fused kernels on CUDA (NVRTC at compile time): for every fusable op and
 * dtype (fusion_cases.h), the fused CUDA function against the unfused CUDA one and against the
 * CPU, on random values and the edge values, in odd and zero sizes, a size of many blocks, a
 * broadcast operand, strided and misaligned inputs (the vector kernel in both forms, its tail, the plain
 * contiguous one, the strided ones); the seed chain with its constants; outputs whose shapes
 * differ at run time (per-output kernels); four threads on one fused function. Bit for bit where
 * the body is exact; where a math library is involved, within 2 ulps of the unfused CUDA
 * results and within docs/ops.md's CPU and CUDA bounds of the CPU's. Without a GPU it exits 77. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusion_cases.h"
#include "graph_runner.h"
#include "test_support.h"

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};
static const dlop_device CUDA = {DLOP_DEVICE_CUDA, 0};

typedef struct layout {
  int64_t n, b_n;
  int32_t stride, offset;
  const char *what;
} layout;

static const layout layouts[] = {
    {1003, 1003, 1, 0, "1003 contiguous elements (vector kernel and tail)"},
    {0, 0, 1, 0, "0 elements"},
    {(1 << 20) + 3, (1 << 20) + 3, 1, 0, "2^20 + 3 elements"},
    {2048, 2048, 1, 0, "2048 elements (whole chunks of the vector kernel's chunk form)"},
    {4072, 4072, 1, 0, "4072 elements (3 whole chunks of 1024 and a tail of 1000)"},
    {517, 1, 1, 0, "517 elements, b broadcast from 1 (strided kernel)"},
    {301, 301, 2, 0, "301 elements, a and b strided"},
    {1001, 1001, 1, 1, "1001 elements one past a 16-byte boundary (contiguous, no vectors)"},
};

static int explain_has(const dlop_function *function, const char *needle) {
  static char text[65536];
  DLOP_CK_OK(dlop_function_explain(function, text, sizeof text));
  return strstr(text, needle) != NULL;
}

START_TEST(fused_cuda_matches_unfused_and_cpu) {
  dlop_dtype dtype = (dlop_dtype)_i;
  dlop_graph *graph = dlop_test_new_graph();
  dlop_test_fusion_cases cases;
  dlop_test_fusion_cases_build(graph, dtype, &cases);
  dlop_function *fused = NULL, *cpu = NULL;
  DLOP_CK_OK(dlop_function_compile(graph, cases.inputs, 3, cases.outputs, cases.count, CUDA, &fused));
  DLOP_CK_OK(dlop_function_compile(graph, cases.inputs, 3, cases.outputs, cases.count, CPU, &cpu));
  dlop_function *unfused =
      dlop_test_compile_unfused(graph, cases.inputs, 3, cases.outputs, cases.count, CUDA);
  ck_assert_msg(dlop_function_node_count(fused) == cases.count && explain_has(fused, "compiled by NVRTC"),
                "%s: %d nodes for %d cases: not every case fused on CUDA", dlop_dtype_name(dtype),
                (int)dlop_function_node_count(fused), (int)cases.count);
  int sixteen = dtype == DLOP_FLOAT16 || dtype == DLOP_BFLOAT16;
  for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
    const layout *at = &layouts[l];
    dlop_array *in[3], *host_in[3];
    dlop_array *got[DLOP_TEST_FUSION_MAX_CASES], *want[DLOP_TEST_FUSION_MAX_CASES],
        *host[DLOP_TEST_FUSION_MAX_CASES];
    dlop_test_fusion_inputs(dtype, at->n, at->b_n, at->stride, at->offset, 70 + l, CUDA, in);
    dlop_test_fusion_inputs(dtype, at->n, at->b_n, at->stride, at->offset, 70 + l, CPU, host_in);
    DLOP_CK_OK(dlop_function_run(fused, in, 3, got, cases.count, NULL));
    DLOP_CK_OK(dlop_function_run(unfused, in, 3, want, cases.count, NULL));
    DLOP_CK_OK(dlop_function_run(cpu, host_in, 3, host, cases.count, NULL));
    for (int32_t c = 0; c < cases.count; c++) {
      char what[160];
      snprintf(what, sizeof what, "%s, fused CUDA against unfused CUDA", at->what);
      dlop_test_fusion_compare(want[c], got[c], cases.exact[c], 2, cases.labels[c], what);
      snprintf(what, sizeof what, "%s, fused CUDA against the CPU", at->what);
      dlop_test_fusion_compare(host[c], got[c], cases.exact[c], sixteen ? 2 : 16, cases.labels[c],
                               what);
      dlop_test_release_arrays(3, got[c], want[c], host[c]);
    }
    dlop_test_release_arrays(6, in[0], in[1], in[2], host_in[0], host_in[1], host_in[2]);
  }
  dlop_function_destroy(fused);
  dlop_function_destroy(unfused);
  dlop_function_destroy(cpu);
  dlop_graph_destroy(graph);
}
END_TEST

static dlop_var *apply2(dlop_graph *graph, const char *op, dlop_var *a, dlop_var *b) {
  dlop_var *pair[2] = {a, b}, *y;
  DLOP_CK_OK(dlop_graph_apply(graph, op, pair, 2, NULL, 0, &y, 1));
  return y;
}

static dlop_var *apply1(dlop_graph *graph, const char *op, dlop_var *x) {
  dlop_var *y;
  DLOP_CK_OK(dlop_graph_apply(graph, op, &x, 1, NULL, 0, &y, 1));
  return y;
}

/* y = exp(2x) * b + tanh(x) - 1 in float32 on 2^22 + 1 elements, and t = exp(x), y = t * b with
 * x of 1 element and b of 5 (outputs of different shapes: per-output kernels). */
START_TEST(seed_chain_and_per_output_kernels) {
  dlop_graph *graph = dlop_test_new_graph();
  int64_t unknown = DLOP_DIM_UNKNOWN, n = (1 << 22) + 1, one = 1, five = 5;
  dlop_var *x, *b, *two, *minus;
  float two_value = 2.0f, one_value = 1.0f;
  dlop_array *c2 = dlop_test_host_array(DLOP_FLOAT32, 0, NULL, &two_value);
  dlop_array *c1 = dlop_test_host_array(DLOP_FLOAT32, 0, NULL, &one_value);
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, &unknown, &x));
  DLOP_CK_OK(dlop_graph_input(graph, "b", DLOP_FLOAT32, 1, &unknown, &b));
  DLOP_CK_OK(dlop_graph_constant(graph, "two", c2, &two));
  DLOP_CK_OK(dlop_graph_constant(graph, "one", c1, &minus));
  dlop_var *y = apply2(graph, "sub",
                       apply2(graph, "add", apply2(graph, "mul", apply1(graph, "exp", apply2(graph, "mul", two, x)), b),
                              apply1(graph, "tanh", x)),
                       minus);
  dlop_var *inputs[2] = {x, b};
  dlop_function *fused = dlop_test_compile(graph, inputs, 2, y, CUDA);
  dlop_function *unfused = dlop_test_compile_unfused(graph, inputs, 2, &y, 1, CUDA);
  ck_assert_int_eq(dlop_function_node_count(fused), 1);
  dlop_array *host[2], *dev[2], *got = NULL, *want = NULL;
  for (int k = 0; k < 2; k++) {
    float *data = malloc(sizeof(float) * (size_t)n);
    ck_assert_ptr_nonnull(data);
    dlop_test_fill_random(data, DLOP_FLOAT32, n, 5 + (uint64_t)k, -4, 4);
    host[k] = dlop_test_host_array(DLOP_FLOAT32, 1, &n, data);
    DLOP_CK_OK(dlop_array_copy_to(host[k], CUDA, &dev[k]));
    free(data);
  }
  DLOP_CK_OK(dlop_function_run(fused, dev, 2, &got, 1, NULL));
  DLOP_CK_OK(dlop_function_run(unfused, dev, 2, &want, 1, NULL));
  dlop_test_fusion_compare(want, got, 0, 2, "the seed chain", "fused CUDA against unfused CUDA");
  dlop_test_release_arrays(8, got, want, host[0], host[1], dev[0], dev[1], c2, c1);
  dlop_function_destroy(fused);
  dlop_function_destroy(unfused);

  dlop_var *t = apply1(graph, "exp", x), *z = apply2(graph, "mul", t, b), *outputs[2] = {z, t};
  fused = NULL;
  DLOP_CK_OK(dlop_function_compile(graph, inputs, 2, outputs, 2, CUDA, &fused));
  unfused = dlop_test_compile_unfused(graph, inputs, 2, outputs, 2, CUDA);
  float xs[1] = {0.5f}, bs[5] = {1, -2, 3, 0.25f, -0.5f};
  dlop_array *args[2], *fused_out[2], *unfused_out[2];
  DLOP_CK_OK(dlop_array_from_host(CUDA, DLOP_FLOAT32, 1, &one, xs, &args[0]));
  DLOP_CK_OK(dlop_array_from_host(CUDA, DLOP_FLOAT32, 1, &five, bs, &args[1]));
  DLOP_CK_OK(dlop_function_run(fused, args, 2, fused_out, 2, NULL));
  DLOP_CK_OK(dlop_function_run(unfused, args, 2, unfused_out, 2, NULL));
  ck_assert_int_eq(dlop_array_numel(fused_out[0]), 5);
  ck_assert_int_eq(dlop_array_numel(fused_out[1]), 1);
  dlop_test_fusion_compare(unfused_out[0], fused_out[0], 0, 2, "t * b", "per-output kernels");
  dlop_test_fusion_compare(unfused_out[1], fused_out[1], 0, 2, "exp(x)", "per-output kernels");
  dlop_test_release_arrays(6, args[0], args[1], fused_out[0], fused_out[1], unfused_out[0],
                           unfused_out[1]);
  dlop_function_destroy(fused);
  dlop_function_destroy(unfused);
  dlop_graph_destroy(graph);
}
END_TEST

/* Four threads run one fused function (exp(double(x)), fused by default) at once. */
START_TEST(four_threads_one_fused_function) {
  static const dlop_test_repeated_runs runs = {CUDA, 100003, 20, 300};
  dlop_graph *graph = dlop_test_new_graph();
  dlop_test_exp_double_in_threads(graph, 4, &runs);
  dlop_graph_destroy(graph);
}
END_TEST

int main(void) {
  dlop_test_require_cuda_or_skip();
  Suite *suite = suite_create("fusion_cuda");
  TCase *parity = dlop_test_tcase(suite, "parity", 600, NULL, NULL);
  tcase_add_loop_test(parity, fused_cuda_matches_unfused_and_cpu, 0, DLOP_DTYPE_COUNT);
  TCase *runs = dlop_test_tcase(suite, "runs", 300, NULL, NULL);
  dlop_test_add_tests(runs, seed_chain_and_per_output_kernels, four_threads_one_fused_function,
                      NULL);
  return dlop_test_run_suite(suite);
}
