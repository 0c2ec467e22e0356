/* fusion_cases.h — the fused-versus-unfused parity cases that the CPU test (test_fusion_parity)
 * and the GPU test (gpu_test_fusion_cuda) share: for one dtype, a graph holding every fusable
 * op that accepts it (the elemwise plugin's ops, double, multiply_them, exp, and cast to every
 * dtype), each fused with bit-copy casts of its inputs so that it runs inside a generated
 * kernel; inputs with random values and the edge values (NaN, infinities, zeros, subnormals,
 * integer extremes); and the comparison of two runs' outputs. */
#ifndef DLOP_TEST_FUSION_CASES_H
#define DLOP_TEST_FUSION_CASES_H

#include <stdint.h>

#include "dlop.h"

#define DLOP_TEST_FUSION_MAX_CASES 40

typedef struct dlop_test_fusion_cases {
  dlop_var *inputs[3]; /* a, b of the dtype, c of bool; every shape (?) */
  int32_t count;
  dlop_var *outputs[DLOP_TEST_FUSION_MAX_CASES];
  int exact[DLOP_TEST_FUSION_MAX_CASES]; /* the op's body is exact: compare bits */
  char labels[DLOP_TEST_FUSION_MAX_CASES][48];
} dlop_test_fusion_cases;

/* Adds dtype's cases to graph (fails the test on any error). */
void dlop_test_fusion_cases_build(dlop_graph *graph, dlop_dtype dtype, dlop_test_fusion_cases *cases);

/* The cases' inputs on device: a of n elements, b of b_n (n, or 1 to broadcast), c of n bools,
 * reproducible from seed, the edge values first. With stride 2 a and b are views taking every
 * other element of arrays twice as long; with offset 1 they start one element into theirs (not
 * aligned to a 16-byte vector). arrays[3] are released by the caller. */
void dlop_test_fusion_inputs(dlop_dtype dtype, int64_t n, int64_t b_n, int32_t stride,
                             int32_t offset, uint64_t seed, dlop_device device,
                             dlop_array **arrays);

/* Output `index` of two runs agrees: bit for bit (NaN equals NaN) when exact, else within the
 * dtype's rounding scaled by ulps; fails the test naming label, what and the first elements. */
void dlop_test_fusion_compare(const dlop_array *expected, const dlop_array *actual, int exact,
                              double ulps, const char *label, const char *what);

#endif
