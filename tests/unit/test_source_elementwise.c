/* test_source_elementwise.c — ops defined by dlop_define_elementwise, from C: the generated CUDA
 * source of a function holding one (fused with a neighbour) compiles through NVRTC here,
 * without a GPU, to PTX and to an sm_90 cubin; parameters are the kernel's arguments, not in its
 * source (two fused nodes, two sets of values: one source); a body that C accepts and NVRTC (C++) does not
 * gets NVRTC's log against the body's own lines, as the first CUDA thunk would report it; the
 * C API's bad arguments. The Python tests (test_source_elementwise.py) cover results. */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusion.h"
#include "graph_runner.h"
#include "jit.h"
#include "source_elementwise.h"
#include "test_support.h"

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};

static const dlop_op_desc *define(const char *name, const char *body, uint32_t dtypes) {
  static const char *const inputs[] = {"x"}, *const outputs[] = {"y"};
  dlop_elementwise_source source = {.struct_size = sizeof source, .dtypes = dtypes, .name = name,
                                    .body = body, .inputs = inputs, .outputs = outputs,
                                    .num_inputs = 1, .num_outputs = 1};
  const dlop_op_desc *op = NULL;
  DLOP_CK_OK(dlop_define_elementwise(&source, &op));
  return op;
}

/* double(NAME(x)) for an x of dtype, compiled (and fused) on the CPU; its CUDA source. */
static char *fused_cuda_source(const char *name, dlop_dtype dtype, dlop_function **function) {
  dlop_graph *graph = dlop_test_new_graph();
  dlop_var *x, *t, *y;
  DLOP_CK_OK(dlop_graph_input(graph, "x", dtype, 1, NULL, &x));
  DLOP_CK_OK(dlop_graph_apply(graph, name, &x, 1, NULL, 0, &t, 1));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &t, 1, NULL, 0, &y, 1));
  DLOP_CK_OK(dlop_function_compile(graph, &x, 1, &y, 1, CPU, function));
  ck_assert_int_eq(dlop_function_node_count(*function), 1); /* one fused group */
  dlop_graph_destroy(graph);
  char *source = NULL;
  DLOP_CK_OK(dlop__function_fused_source(*function, DLOP__FUSION_TARGET_CUDA, &source));
  return source;
}

static int nvrtc_compile(const char *source, int32_t arch, char *error, size_t size) {
  void *image = NULL;
  size_t bytes = 0;
  int is_ptx = -1;
  int status = dlop__nvrtc_compile(arch, source, dlop__fusion_nvrtc_options,
                                   dlop__fusion_nvrtc_option_count, &image, &bytes, &is_ptx, error,
                                   size);
  if (status == DLOP_OK) {
    ck_assert_int_eq(is_ptx, arch == 1000);
    ck_assert(memmem(image, bytes, "dlop_fused_g0_contiguous", 24) != NULL);
  }
  free(image);
  return status;
}

static void require_nvrtc(void) {
  char why[512];
  if (!dlop__nvrtc_available(why, sizeof why)) {
    printf("skipped: NVRTC cannot be loaded here: %s\n", why);
    exit(77);
  }
}

START_TEST(cuda_source_compiles_through_nvrtc) {
  require_nvrtc();
  define("src_softplus", "y = x > 20 ? x : log1p(exp(x))", DLOP_DTYPES_FLOAT);
  static const dlop_dtype dtypes[] = {DLOP_FLOAT16, DLOP_BFLOAT16, DLOP_FLOAT32, DLOP_FLOAT64};
  for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++) {
    if (dlop_test_scale() < 1 && dtypes[k] != DLOP_FLOAT32) continue; /* the sanitizer tree */
    dlop_function *function = NULL;
    char *source = fused_cuda_source("src_softplus", dtypes[k], &function);
    ck_assert_msg(strstr(source, "#line 1 \"src_softplus (body)\"") != NULL, "%s", source);
    char error[16384] = "";
    int status = nvrtc_compile(source, 1000, error, sizeof error); /* newest: PTX */
    ck_assert_msg(status == DLOP_OK, "%s to PTX: %s", dlop_dtype_name(dtypes[k]), error);
    if (dtypes[k] == DLOP_FLOAT32 && dlop_test_scale() >= 1) {
      status = nvrtc_compile(source, 90, error, sizeof error); /* the H200's cubin */
      ck_assert_msg(status == DLOP_OK, "sm_90: %s", error);
    }
    free(source);
    dlop_function_destroy(function);
  }
}
END_TEST

START_TEST(nvrtc_errors_are_shown_against_the_body) {
  require_nvrtc();
  /* "new" is a C identifier and a C++ keyword: the C compile at definition passes */
  const dlop_op_desc *op = define("src_cxx_keyword", "int new = 2;\ny = x * new;", DLOP_DTYPE_BIT(DLOP_FLOAT32));
  dlop_function *function = NULL;
  char *source = fused_cuda_source("src_cxx_keyword", DLOP_FLOAT32, &function);
  char log[16384] = "";
  ck_assert_int_eq(nvrtc_compile(source, 1000, log, sizeof log), DLOP_INVALID_ARGUMENT);
  char shown[4096];
  dlop__source_elementwise_log((const dlop__source_elementwise *)op->op_data, "NVRTC", log, shown,
                               sizeof shown);
  ck_assert_msg(strncmp(shown, "src_cxx_keyword: the body does not compile with NVRTC:", 54) == 0,
                "%s", shown);
  ck_assert_msg(strstr(shown, "\n  src_cxx_keyword (body)(1): error") != NULL, "%s", shown);
  ck_assert_msg(strstr(shown, "\n    1 | int new = 2;") != NULL, "%s", shown);
  ck_assert_msg(strstr(shown, "dlop_fused") == NULL, "the wrapper's lines: %s", shown);
  free(source);
  dlop_function_destroy(function);
}
END_TEST

/* Two nodes of an op with parameters, fused on the CPU with the given values; its CUDA source. */
static char *two_nodes_source(double alpha0, double alpha1, dlop_function **function) {
  dlop_graph *graph = dlop_test_new_graph();
  dlop_var *x, *t, *y;
  dlop_named_param first = {"alpha", {.kind = DLOP_PARAM_FLOAT, .count = 1, .u.f = alpha0}};
  dlop_named_param second = {"alpha", {.kind = DLOP_PARAM_FLOAT, .count = 1, .u.f = alpha1}};
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 1, NULL, &x));
  DLOP_CK_OK(dlop_graph_apply(graph, "src_scale_add", &x, 1, &first, 1, &t, 1));
  DLOP_CK_OK(dlop_graph_apply(graph, "src_scale_add", &t, 1, &second, 1, &y, 1));
  DLOP_CK_OK(dlop_function_compile(graph, &x, 1, &y, 1, CPU, function));
  ck_assert_int_eq(dlop_function_node_count(*function), 1);
  dlop_graph_destroy(graph);
  char *source = NULL;
  DLOP_CK_OK(dlop__function_fused_source(*function, DLOP__FUSION_TARGET_CUDA, &source));
  return source;
}

START_TEST(parameters_are_kernel_arguments) {
  require_nvrtc();
  static const char *const inputs[] = {"x"}, *const outputs[] = {"y"};
  dlop_param_decl decls[] = {
      {.name = "alpha", .kind = DLOP_PARAM_FLOAT, .default_value = {.kind = DLOP_PARAM_FLOAT, .count = 1, .u.f = 1.0}},
      {.name = "k", .kind = DLOP_PARAM_INT, .default_value = {.kind = DLOP_PARAM_INT, .count = 1, .u.i = 3}}};
  dlop_elementwise_source op = {.struct_size = sizeof op, .dtypes = DLOP_DTYPE_BIT(DLOP_FLOAT32),
                                .name = "src_scale_add", .body = "y = (T)(alpha * x + k)",
                                .inputs = inputs, .outputs = outputs, .params = decls,
                                .num_inputs = 1, .num_outputs = 1, .num_params = 2};
  const dlop_op_desc *defined = NULL;
  DLOP_CK_OK(dlop_define_elementwise(&op, &defined));
  dlop_function *f0 = NULL, *f1 = NULL;
  char *s0 = two_nodes_source(0.1, -2.5, &f0), *s1 = two_nodes_source(7.25, 1e-300, &f1);
  /* the values are not in the source: one source, one compile, whatever the values */
  ck_assert_msg(strcmp(s0, s1) == 0, "the source depends on the values:\n%s", s0);
  ck_assert_msg(strstr(s0, "uint64_t q[4]; };") != NULL, "%s", s0); /* 2 nodes x 2 values */
  ck_assert_msg(strstr(s0, "const double dlop_p0 = q2;") != NULL, "%s", s0);
  ck_assert_msg(strstr(s0, "const int64_t dlop_p1 = q3;") != NULL, "%s", s0);
  char error[16384] = "";
  int status = nvrtc_compile(s0, 1000, error, sizeof error);
  ck_assert_msg(status == DLOP_OK, "to PTX: %s", error);
  free(s0);
  free(s1);
  dlop_function_destroy(f0);
  dlop_function_destroy(f1);
}
END_TEST

START_TEST(bad_arguments) {
  const dlop_op_desc *op = (const dlop_op_desc *)1;
  ck_assert_int_eq(dlop_define_elementwise(NULL, &op), DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_null(op);
  ck_assert_msg(strstr(dlop_last_error(), "source is NULL") != NULL, "%s", dlop_last_error());
  dlop_elementwise_source small = {.struct_size = 8};
  ck_assert_int_eq(dlop_define_elementwise(&small, &op), DLOP_INVALID_ARGUMENT);
  ck_assert_msg(strstr(dlop_last_error(), "struct_size is 8") != NULL, "%s", dlop_last_error());
  ck_assert_int_eq(dlop_define_elementwise(&small, NULL), DLOP_INVALID_ARGUMENT);
  ck_assert_msg(strstr(dlop_last_error(), "op is NULL") != NULL, "%s", dlop_last_error());
  static const char *const names[] = {"x"};
  dlop_param_decl bool_param = {.name = "flag", .kind = DLOP_PARAM_BOOL,
                                .default_value = {.kind = DLOP_PARAM_BOOL, .count = 1}};
  dlop_elementwise_source source = {.struct_size = sizeof source, .name = "src_bad",
                                    .body = "y = x", .inputs = names, .outputs = names,
                                    .params = &bool_param, .num_inputs = 1, .num_outputs = 1,
                                    .num_params = 1};
  ck_assert_int_eq(dlop_define_elementwise(&source, &op), DLOP_INVALID_ARGUMENT);
  ck_assert_msg(strstr(dlop_last_error(), "the name 'x' is used twice") != NULL, "%s",
                dlop_last_error());
  static const char *const outputs[] = {"y"};
  source.outputs = outputs;
  ck_assert_int_eq(dlop_define_elementwise(&source, &op), DLOP_INVALID_ARGUMENT);
  ck_assert_msg(strstr(dlop_last_error(), "parameter 'flag' is declared bool") != NULL, "%s",
                dlop_last_error());
  ck_assert_ptr_null(dlop_find_op("src_bad"));
  /* a C++ keyword, an alternative token and a <math.h> macro as names */
  static const char *const taken[] = {"constexpr", "and", "NAN"};
  for (int k = 0; k < 3; k++) {
    const char *input[] = {taken[k]};
    dlop_elementwise_source named = {.struct_size = sizeof named, .name = "src_named",
                                     .body = "y = 1", .inputs = input, .outputs = outputs,
                                     .num_inputs = 1, .num_outputs = 1};
    ck_assert_int_eq(dlop_define_elementwise(&named, &op), DLOP_INVALID_ARGUMENT);
    ck_assert_msg(strstr(dlop_last_error(), "is reserved") != NULL, "%s", dlop_last_error());
  }
  dlop_elementwise_source reserved = {.struct_size = sizeof reserved, .name = "src_reserved",
                                      .body = "y = x", .inputs = names, .outputs = outputs,
                                      .num_inputs = 1, .num_outputs = 1, .reserved = 7};
  ck_assert_int_eq(dlop_define_elementwise(&reserved, &op), DLOP_INVALID_ARGUMENT);
  ck_assert_msg(strstr(dlop_last_error(), "reserved is 7") != NULL, "%s", dlop_last_error());
}
END_TEST

int main(void) {
  Suite *suite = suite_create("source_elementwise");
  TCase *cuda = dlop_test_tcase(suite, "cuda_source", 600, NULL, NULL);
  dlop_test_add_tests(cuda, cuda_source_compiles_through_nvrtc,
                      nvrtc_errors_are_shown_against_the_body, parameters_are_kernel_arguments,
                      NULL);
  TCase *arguments = dlop_test_tcase(suite, "arguments", 0, NULL, NULL);
  dlop_test_add_tests(arguments, bad_arguments, NULL);
  return dlop_test_run_suite(suite);
}
