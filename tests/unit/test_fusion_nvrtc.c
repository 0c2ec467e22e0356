/* test_fusion_nvrtc.c — the CUDA source of fused groups compiles through NVRTC, here, without a
 * GPU: for every dtype, the parity cases' function (every fusable op, fusion_cases.h) compiled
 * on the CPU has its groups' kernels regenerated for CUDA and compiled with the options the
 * fusion pass uses: to PTX for every dtype (NVRTC's front end and optimizer, a few seconds), to
 * a cubin for sm_90 (the H200) for float32 and bfloat16 (ptxas too, three times as long), and
 * for sm_75 (before hardware bfloat16 conversions: the prelude's software path) for the 16-bit
 * floats; and so does a group with per-output kernels (outputs whose shapes may differ at run
 * time); and so do reductions fed by groups, for every dtype the reduce ops declare; and so does
 * a row group (a softmax and a log-softmax of one input, the row's max an output too) for the
 * float dtypes, its kernels keeping exp(x - max) in registers; and the seed chain's vector
 * kernel takes its form from the body (float64's chunk form, float32's grid-stride one).
 * gpu_test_fusion_cuda and test_gpu_fusion_reduce.py run them. With DLOP_TEST_SCALE below 1 (the
 * sanitizer tree) every source is still generated and checked for its kernels, but NVRTC
 * compiles only float32's groups and reductions and the per-output group, to PTX: NVRTC itself
 * is not instrumented, what runs under the sanitizers is the generator and dlop's compile path
 * (test_jit_nvrtc compiles cubins there), and the main tree compiles every one (cold, the
 * elementwise ones alone took 2 minutes of CPU under ASan). */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusion.h"
#include "fusion_cases.h"
#include "graph_runner.h"
#include "jit.h"
#include "test_support.h"

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};
#define EM_CUDA 190

/* The kernels the thunk of an elementwise group 0 looks up. */
static const char *const elementwise_kernels[] = {
    "dlop_fused_g0_contiguous", "dlop_fused_g0_vector", "dlop_fused_g0_strided32",
    "dlop_fused_g0_strided64", NULL};

/* 0 when DLOP_TEST_SCALE is below 1: float32's PTX only (the file's comment). Set in main. */
static int every_compile = 1;

/* The function's groups as CUDA source, each of kernels defined in it. */
static char *cuda_source(const dlop_function *function, const char *what,
                         const char *const *kernels) {
  char *source = NULL;
  DLOP_CK_OK(dlop__function_fused_source(function, DLOP__FUSION_TARGET_CUDA, &source));
  for (size_t k = 0; kernels[k] != NULL; k++) {
    char definition[96];
    snprintf(definition, sizeof definition, ") %s(", kernels[k]); /* after __launch_bounds__(N) */
    ck_assert_msg(strstr(source, definition) != NULL, "%s: %s is not defined in the source", what,
                  kernels[k]);
  }
  return source;
}

/* The function's groups as CUDA, compiled for arch: a cubin with each group's kernels in it;
 * arch 0: PTX (for an architecture newer than NVRTC knows: NVRTC's newest). */
static void compile_cuda_kernels(const dlop_function *function, int32_t arch, const char *what,
                                 const char *const *kernels) {
  int want_ptx = arch == 0;
  if (want_ptx) arch = 1000;
  char error[16384] = "";
  void *image = NULL;
  size_t bytes = 0;
  int is_ptx = -1;
  char *source = cuda_source(function, what, kernels);
  int status = dlop__nvrtc_compile(arch, source, dlop__fusion_nvrtc_options,
                                   dlop__fusion_nvrtc_option_count, &image, &bytes, &is_ptx, error,
                                   sizeof error);
  ck_assert_msg(status == DLOP_OK, "%s for sm_%d: %s: %s", what, (int)arch, dlop_status_name(status),
                error);
  ck_assert_int_eq(is_ptx, want_ptx);
  const unsigned char *elf = image;
  if (!want_ptx) {
    ck_assert_msg(bytes > 64 && memcmp(elf, "\177ELF", 4) == 0, "%s: not an ELF file", what);
    ck_assert_int_eq(elf[18] | elf[19] << 8, EM_CUDA);
  }
  /* the kernels the thunk looks up are in the image (their names are in its symbol table, or
   * the PTX's .entry lines) */
  for (size_t k = 0; kernels[k] != NULL; k++) {
    char entry[96];
    snprintf(entry, sizeof entry, want_ptx ? ".entry %s(" : "%s", kernels[k]);
    ck_assert_msg(memmem(image, bytes, entry, strlen(entry) + !want_ptx) != NULL,
                  "%s: %s is not in the %s", what, kernels[k], want_ptx ? "PTX" : "cubin");
  }
  free(image);
  free(source);
}

static void compile_cuda(const dlop_function *function, int32_t arch, const char *what) {
  compile_cuda_kernels(function, arch, what, elementwise_kernels);
}

START_TEST(every_op_and_dtype_compiles_for_cuda) {
  dlop_dtype dtype = (dlop_dtype)_i;
  dlop_graph *graph = dlop_test_new_graph();
  dlop_test_fusion_cases cases;
  dlop_test_fusion_cases_build(graph, dtype, &cases);
  dlop_function *function = NULL;
  DLOP_CK_OK(dlop_function_compile(graph, cases.inputs, 3, cases.outputs, cases.count, CPU, &function));
  ck_assert_int_eq(dlop_function_node_count(function), cases.count);
  char what[64];
  snprintf(what, sizeof what, "the %s cases", dlop_dtype_name(dtype));
  if (!every_compile && dtype != DLOP_FLOAT32) {
    free(cuda_source(function, what, elementwise_kernels));
  } else {
    compile_cuda(function, 0, what);
    if (every_compile && (dtype == DLOP_FLOAT32 || dtype == DLOP_BFLOAT16)) compile_cuda(function, 90, what);
    if (every_compile && (dtype == DLOP_BFLOAT16 || dtype == DLOP_FLOAT16)) compile_cuda(function, 75, what);
  }
  dlop_function_destroy(function);
  dlop_graph_destroy(graph);
}
END_TEST

/* t = exp(x), y = t * b, both outputs, lengths unknown: the group has per-output kernels. */
START_TEST(per_output_kernels_compile_for_cuda) {
  dlop_graph *graph = dlop_test_new_graph();
  int64_t unknown = DLOP_DIM_UNKNOWN;
  dlop_var *x, *b, *t, *y, *pair[2];
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT64, 1, &unknown, &x));
  DLOP_CK_OK(dlop_graph_input(graph, "b", DLOP_FLOAT64, 1, &unknown, &b));
  DLOP_CK_OK(dlop_graph_apply(graph, "exp", &x, 1, NULL, 0, &t, 1));
  pair[0] = t;
  pair[1] = b;
  DLOP_CK_OK(dlop_graph_apply(graph, "mul", pair, 2, NULL, 0, &y, 1));
  dlop_var *inputs[2] = {x, b}, *outputs[2] = {y, t};
  dlop_function *function = NULL;
  DLOP_CK_OK(dlop_function_compile(graph, inputs, 2, outputs, 2, CPU, &function));
  char *source = NULL;
  DLOP_CK_OK(dlop__function_fused_source(function, DLOP__FUSION_TARGET_CUDA, &source));
  ck_assert_msg(strstr(source, "dlop_fused_g0_out1_strided64(") != NULL, "no per-output kernel");
  free(source);
  compile_cuda(function, every_compile ? 90 : 0, "per-output kernels");
  dlop_function_destroy(function);
  dlop_graph_destroy(graph);
}
END_TEST

/* Reductions fed by groups, for every dtype the reduce ops declare: sum over every axis, max
 * and min over the last one (keepdims for max) and, for floats, mean over the last axis, of
 * exp(a) * b (floats) or a * b + a (integers): four reduction groups, no elementwise one (nothing
 * else reads the body). PTX for each dtype; cubins for sm_90 for float32, float16 and int8 and
 * for sm_75 for bfloat16 (its software conversions). gpu_test_fusion_reduce runs them. */
static const dlop_dtype reduce_dtypes[] = {DLOP_INT8, DLOP_INT16, DLOP_INT32, DLOP_INT64,
                                           DLOP_UINT8, DLOP_FLOAT16, DLOP_BFLOAT16, DLOP_FLOAT32,
                                           DLOP_FLOAT64};

static dlop_var *reduce(dlop_graph *graph, const char *op, dlop_var *x, int64_t axis, int keepdims) {
  dlop_named_param params[2] = {
      {"axes", {.kind = DLOP_PARAM_INTS, .count = axis == 99 ? 0 : 1, .u.ints = &axis}},
      {"keepdims", {.kind = DLOP_PARAM_BOOL, .count = 1, .u.i = keepdims}}};
  dlop_var *y;
  DLOP_CK_OK(dlop_graph_apply(graph, op, &x, 1, params, 2, &y, 1));
  return y;
}

START_TEST(reductions_compile_for_cuda) {
  dlop_dtype dtype = reduce_dtypes[_i];
  int is_float = dlop_dtype_is_float(dtype);
  dlop_graph *graph = dlop_test_new_graph();
  int64_t unknown[2] = {DLOP_DIM_UNKNOWN, DLOP_DIM_UNKNOWN};
  dlop_var *a, *b, *t, *u, *pair[2];
  DLOP_CK_OK(dlop_graph_input(graph, "a", dtype, 2, unknown, &a));
  DLOP_CK_OK(dlop_graph_input(graph, "b", dtype, 2, unknown, &b));
  pair[0] = a;
  pair[1] = b;
  if (is_float) {
    DLOP_CK_OK(dlop_graph_apply(graph, "exp", &a, 1, NULL, 0, &t, 1));
    pair[0] = t;
    DLOP_CK_OK(dlop_graph_apply(graph, "mul", pair, 2, NULL, 0, &u, 1));
  } else {
    DLOP_CK_OK(dlop_graph_apply(graph, "mul", pair, 2, NULL, 0, &t, 1));
    pair[0] = t;
    pair[1] = a;
    DLOP_CK_OK(dlop_graph_apply(graph, "add", pair, 2, NULL, 0, &u, 1));
  }
  dlop_var *outputs[4] = {reduce(graph, "sum", u, 99, 0), reduce(graph, "max", u, -1, 1),
                          reduce(graph, "min", u, -1, 0), NULL};
  int32_t count = 3;
  if (is_float) outputs[count++] = reduce(graph, "mean", u, -1, 0);
  dlop_var *inputs[2] = {a, b};
  dlop_function *function = NULL;
  DLOP_CK_OK(dlop_function_compile(graph, inputs, 2, outputs, count, CPU, &function));
  ck_assert_int_eq(dlop_function_node_count(function), count);
  const char *kernels[4 * 3 + 1] = {NULL};
  char names[4 * 3][48];
  static const char *const suffixes[] = {"reduce_block", "reduce_warp", "reduce_finish"};
  for (int32_t g = 0; g < count; g++)
    for (int k = 0; k < 3; k++) {
      snprintf(names[g * 3 + k], sizeof names[0], "dlop_fused_g%d_%s", (int)g, suffixes[k]);
      kernels[g * 3 + k] = names[g * 3 + k];
    }
  char what[64];
  snprintf(what, sizeof what, "the %s reductions", dlop_dtype_name(dtype));
  if (!every_compile && dtype != DLOP_FLOAT32) {
    free(cuda_source(function, what, kernels));
  } else {
    compile_cuda_kernels(function, 0, what, kernels);
    if (every_compile && (dtype == DLOP_FLOAT32 || dtype == DLOP_FLOAT16 || dtype == DLOP_INT8))
      compile_cuda_kernels(function, 90, what, kernels);
    if (every_compile && dtype == DLOP_BFLOAT16) compile_cuda_kernels(function, 75, what, kernels);
  }
  dlop_function_destroy(function);
  dlop_graph_destroy(graph);
}
END_TEST

/* A row group: max, sub, exp, sum, div, log and sub over the rows of x, its outputs the softmax,
 * the log-softmax and the max (a per-row output). PTX for every float dtype, a cubin for sm_90
 * for float32 and float16, sm_75 for bfloat16. test_gpu_fusion_row.py runs them. */
static const dlop_dtype row_dtypes[] = {DLOP_FLOAT16, DLOP_BFLOAT16, DLOP_FLOAT32, DLOP_FLOAT64};

static dlop_var *apply2(dlop_graph *graph, const char *op, dlop_var *a, dlop_var *b) {
  dlop_var *pair[2] = {a, b}, *y;
  DLOP_CK_OK(dlop_graph_apply(graph, op, pair, b != NULL ? 2 : 1, NULL, 0, &y, 1));
  return y;
}

START_TEST(row_groups_compile_for_cuda) {
  dlop_dtype dtype = row_dtypes[_i];
  dlop_graph *graph = dlop_test_new_graph();
  int64_t unknown[2] = {DLOP_DIM_UNKNOWN, DLOP_DIM_UNKNOWN};
  dlop_var *x;
  DLOP_CK_OK(dlop_graph_input(graph, "x", dtype, 2, unknown, &x));
  dlop_var *m = reduce(graph, "max", x, -1, 1), *d = apply2(graph, "sub", x, m);
  dlop_var *e = apply2(graph, "exp", d, NULL), *s = reduce(graph, "sum", e, -1, 1);
  dlop_var *outputs[3] = {apply2(graph, "div", e, s),
                          apply2(graph, "sub", d, apply2(graph, "log", s, NULL)), m};
  dlop_function *function = NULL;
  DLOP_CK_OK(dlop_function_compile(graph, &x, 1, outputs, 3, CPU, &function));
  ck_assert_int_eq(dlop_function_node_count(function), 1);
  static const char *const kernels[] = {"dlop_fused_g0_row0", "dlop_fused_g0_row1",
                                        "dlop_fused_g0_row2", "dlop_fused_g0_row4", NULL};
  char what[64];
  snprintf(what, sizeof what, "the %s row group", dlop_dtype_name(dtype));
  /* exp(x - max), read by the sum's phase and the outputs, is kept in registers where R packs
   * of it fit in 64 bytes a thread (16-bit values in 4 bytes each); those kernels are built for
   * two blocks per SM, the one reading rows again per phase is not */
  static const char *const keep_rules[DLOP_DTYPE_COUNT] = {
      [DLOP_FLOAT16] = "R * 8 * 4 <= 64", [DLOP_BFLOAT16] = "R * 8 * 4 <= 64",
      [DLOP_FLOAT32] = "R * 4 * 4 <= 64", [DLOP_FLOAT64] = "R * 2 * 8 <= 64"};
  char rule[96];
  snprintf(rule, sizeof rule, "constexpr bool keep = R > 0 && %s;", keep_rules[dtype]);
  char *source = cuda_source(function, what, kernels);
  ck_assert_msg(strstr(source, "_k_phase1(") != NULL && strstr(source, "_k_out(") != NULL &&
                    strstr(source, rule) != NULL,
                "%s: no kernel keeps exp(x - max) by the rule %s", what, rule);
  ck_assert_msg(strstr(source, "__launch_bounds__(512) dlop_fused_g0_row0(") != NULL &&
                    strstr(source, "__launch_bounds__(512, 2) dlop_fused_g0_row1(") != NULL,
                "%s: the row kernels' launch bounds", what);
  free(source);
  if (!every_compile && dtype != DLOP_FLOAT32) {
    free(cuda_source(function, what, kernels));
  } else {
    compile_cuda_kernels(function, 0, what, kernels);
    if (every_compile && (dtype == DLOP_FLOAT32 || dtype == DLOP_FLOAT16))
      compile_cuda_kernels(function, 90, what, kernels);
    if (every_compile && dtype == DLOP_BFLOAT16) compile_cuda_kernels(function, 75, what, kernels);
  }
  dlop_function_destroy(function);
  dlop_graph_destroy(graph);
}
END_TEST

static dlop_var *scalar_constant(dlop_graph *graph, const char *name, dlop_dtype dtype,
                                 double value) {
  float single = (float)value;
  dlop_array *array = NULL;
  dlop_var *var = NULL;
  DLOP_CK_OK(dlop_array_from_host(CPU, dtype, 0, NULL,
                                  dtype == DLOP_FLOAT32 ? (const void *)&single : (const void *)&value,
                                  &array));
  DLOP_CK_OK(dlop_graph_constant(graph, name, array, &var));
  dlop_array_release(array);
  return var;
}

/* The seed chain exp(2x) * b + tanh(x) - 1: a float64 body that calls functions gets the vector
 * kernel's chunk form (blocks of 128, no grid-stride loop), float32's the grid-stride form in
 * blocks of 256; both compile for sm_90. */
START_TEST(vector_kernels_take_their_form_from_the_body) {
  const dlop_dtype dtype = _i == 0 ? DLOP_FLOAT32 : DLOP_FLOAT64;
  dlop_graph *graph = dlop_test_new_graph();
  int64_t unknown = DLOP_DIM_UNKNOWN;
  dlop_var *in[2], *two, *one;
  DLOP_CK_OK(dlop_graph_input(graph, "x", dtype, 1, &unknown, &in[0]));
  DLOP_CK_OK(dlop_graph_input(graph, "b", dtype, 1, &unknown, &in[1]));
  two = scalar_constant(graph, "two", dtype, 2.0);
  one = scalar_constant(graph, "one", dtype, 1.0);
  dlop_var *e = apply2(graph, "exp", apply2(graph, "mul", two, in[0]), NULL);
  dlop_var *y = apply2(graph, "sub",
                       apply2(graph, "add", apply2(graph, "mul", e, in[1]),
                              apply2(graph, "tanh", in[0], NULL)),
                       one);
  dlop_function *function = NULL;
  DLOP_CK_OK(dlop_function_compile(graph, in, 2, &y, 1, CPU, &function));
  ck_assert_int_eq(dlop_function_node_count(function), 1);
  char what[64];
  snprintf(what, sizeof what, "the %s seed chain", dlop_dtype_name(dtype));
  char *source = cuda_source(function, what, elementwise_kernels);
  const char *bounds = dtype == DLOP_FLOAT64 ? "__launch_bounds__(128) dlop_fused_g0_vector("
                                             : "__launch_bounds__(256) dlop_fused_g0_vector(";
  const char *form = dtype == DLOP_FLOAT64 ? "chunks = n / 2 / chunk;" : "step = DLOP_FUSED_THREADS;";
  ck_assert_msg(strstr(source, bounds) != NULL && strstr(source, form) != NULL,
                "%s: the vector kernel is not '%s' with '%s'", what, bounds, form);
  free(source);
  compile_cuda_kernels(function, every_compile ? 90 : 0, what, elementwise_kernels);
  dlop_function_destroy(function);
  dlop_graph_destroy(graph);
}
END_TEST

int main(void) {
  char why[2048];
  if (!dlop__nvrtc_available(why, sizeof why) && !DLOP_TEST_WITH_CUDA) {
    printf("SKIP: a CPU-only build, and NVRTC cannot be loaded: %s\n", why);
    return 77;
  }
  every_compile = dlop_test_scale() >= 1;
  Suite *suite = suite_create("fusion_nvrtc");
  TCase *tcase = dlop_test_tcase(suite, "compile", 300, NULL, NULL);
  tcase_add_loop_test(tcase, every_op_and_dtype_compiles_for_cuda, 0, DLOP_DTYPE_COUNT);
  dlop_test_add_tests(tcase, per_output_kernels_compile_for_cuda, NULL);
  tcase_add_loop_test(tcase, reductions_compile_for_cuda, 0,
                      (int)(sizeof reduce_dtypes / sizeof reduce_dtypes[0]));
  tcase_add_loop_test(tcase, row_groups_compile_for_cuda, 0,
                      (int)(sizeof row_dtypes / sizeof row_dtypes[0]));
  tcase_add_loop_test(tcase, vector_kernels_take_their_form_from_the_body, 0, 2);
  return dlop_test_run_suite(suite);
}
