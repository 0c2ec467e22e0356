/* test_fusion_parity.c — fused against unfused on the CPU for every fusable op and dtype: the
 * elemwise plugin's ops, double, multiply_them, exp, and cast between every pair of dtypes,
 * each inside a generated kernel (fusion_cases.h), on random values and the edge values (NaN,
 * infinities, signed zeros, subnormals, integer extremes), in odd and zero sizes, sizes that
 * the host's parallel_for splits, a broadcast operand and strided inputs. Bit for bit where the
 * op's body is exact; within 4 ulps where a math library is involved (pow, log, tanh, sigmoid,
 * exp: the unfused kernels route every element through libmvec's vector functions, a fused
 * loop's remainder through libm's scalar ones). */
#include <stdio.h>
#include <stdlib.h>

#include "fusion_cases.h"
#include "graph_runner.h"
#include "test_support.h"

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};

typedef struct layout {
  int64_t n, b_n;
  int32_t stride;
  const char *what;
} layout;

static const layout layouts[] = {
    {1003, 1003, 1, "1003 contiguous elements"},
    {0, 0, 1, "0 elements"},
    {40000, 40000, 1, "40000 elements (parallel chunks)"},
    {517, 1, 1, "517 elements, b broadcast from 1"},
    {301, 301, 2, "301 elements, a and b strided (every other element)"},
};

static void check_dtype(dlop_dtype dtype) {
  dlop_graph *graph = dlop_test_new_graph();
  dlop_test_fusion_cases cases;
  dlop_test_fusion_cases_build(graph, dtype, &cases);
  dlop_function *fused = NULL;
  DLOP_CK_OK(dlop_function_compile(graph, cases.inputs, 3, cases.outputs, cases.count, CPU, &fused));
  dlop_function *unfused =
      dlop_test_compile_unfused(graph, cases.inputs, 3, cases.outputs, cases.count, CPU);
  /* every case is a group of its own: as many fused nodes as cases */
  ck_assert_msg(dlop_function_node_count(fused) == cases.count,
                "%s: %d nodes for %d cases (a case that did not fuse)", dlop_dtype_name(dtype),
                (int)dlop_function_node_count(fused), (int)cases.count);
  for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
    dlop_array *in[3], *got[DLOP_TEST_FUSION_MAX_CASES], *want[DLOP_TEST_FUSION_MAX_CASES];
    dlop_test_fusion_inputs(dtype, layouts[l].n, layouts[l].b_n, layouts[l].stride, 0, 40 + l,
                            CPU, in);
    DLOP_CK_OK(dlop_function_run(fused, in, 3, got, cases.count, NULL));
    DLOP_CK_OK(dlop_function_run(unfused, in, 3, want, cases.count, NULL));
    for (int32_t c = 0; c < cases.count; c++) {
      dlop_test_fusion_compare(want[c], got[c], cases.exact[c], 4, cases.labels[c], layouts[l].what);
      dlop_test_release_arrays(2, got[c], want[c]);
    }
    dlop_test_release_arrays(3, in[0], in[1], in[2]);
  }
  dlop_function_destroy(fused);
  dlop_function_destroy(unfused);
  dlop_graph_destroy(graph);
}

START_TEST(fused_matches_unfused) { check_dtype((dlop_dtype)_i); }
END_TEST

int main(void) {
  Suite *suite = suite_create("fusion_parity");
  /* one test per dtype: a function of ~30 groups, compiled once (longer on a cold cache) */
  TCase *tcase = dlop_test_tcase(suite, "every_op_and_dtype", 300, NULL, NULL);
  tcase_add_loop_test(tcase, fused_matches_unfused, 0, DLOP_DTYPE_COUNT);
  return dlop_test_run_suite(suite);
}
