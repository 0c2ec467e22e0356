/* test_fusion_nvrtc.c — the CUDA source of fused groups compiles through NVRTC, here, without a
 * GPU: for every dtype, the parity cases' function (every fusable op, fusion_cases.h) compiled
 * on the CPU has its groups' kernels regenerated for CUDA and compiled with the options the
 * fusion pass uses: to PTX for every dtype (NVRTC's front end and optimizer, a few seconds), to
 * a cubin for sm_90 (the H200) for float32 and bfloat16 (ptxas too, three times as long), and
 * for sm_75 (before hardware bfloat16 conversions: the prelude's software path) for the 16-bit
 * floats; and so does a group with per-output kernels (outputs whose shapes may differ at run
 * time). gpu_test_fusion_cuda runs them. */
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

/* The function's groups as CUDA, compiled for arch: a cubin with each group's kernels in it;
 * arch 0: PTX (for an architecture newer than NVRTC knows: NVRTC's newest). */
static void compile_cuda(const dlop_function *function, int32_t arch, const char *what) {
  int want_ptx = arch == 0;
  if (want_ptx) arch = 1000;
  char *source = NULL, error[16384] = "";
  void *image = NULL;
  size_t bytes = 0;
  int is_ptx = -1;
  DLOP_CK_OK(dlop__function_fused_source(function, DLOP__FUSION_TARGET_CUDA, &source));
  ck_assert_msg(strstr(source, "extern \"C\" __global__ void __launch_bounds__(256) dlop_fused_g0_vector("),
                "%s: no vector kernel in the source", what);
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
  static const char *const kernels[] = {"dlop_fused_g0_contiguous", "dlop_fused_g0_vector",
                                        "dlop_fused_g0_strided32", "dlop_fused_g0_strided64"};
  for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
    char entry[96];
    snprintf(entry, sizeof entry, want_ptx ? ".entry %s(" : "%s", kernels[k]);
    ck_assert_msg(memmem(image, bytes, entry, strlen(entry) + !want_ptx) != NULL,
                  "%s: %s is not in the %s", what, kernels[k], want_ptx ? "PTX" : "cubin");
  }
  free(image);
  free(source);
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
  compile_cuda(function, 0, what);
  if (dtype == DLOP_FLOAT32 || dtype == DLOP_BFLOAT16) compile_cuda(function, 90, what);
  if (dtype == DLOP_BFLOAT16 || dtype == DLOP_FLOAT16) compile_cuda(function, 75, what);
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
  compile_cuda(function, 90, "per-output kernels");
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
  Suite *suite = suite_create("fusion_nvrtc");
  TCase *tcase = dlop_test_tcase(suite, "compile", 300, NULL, NULL);
  tcase_add_loop_test(tcase, every_op_and_dtype_compiles_for_cuda, 0, DLOP_DTYPE_COUNT);
  dlop_test_add_tests(tcase, per_output_kernels_compile_for_cuda, NULL);
  return dlop_test_run_suite(suite);
}
