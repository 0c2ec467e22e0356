/* bench_util.h — what both benchmark programs share: a monotonic clock, medians, random
 * fills (never zeros: they hide unwritten outputs), output checks against a C reference, and
 * the machine-readable result line that bench/cpu_vs_numpy.py parses. */
#ifndef DLOP_BENCH_UTIL_H
#define DLOP_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "dlop.h"

/* Seconds on a monotonic clock. */
double bench_now(void);
/* Median of values[0..count) (sorts values in place). */
double bench_median(double *values, int count);

/* Uniform random values in [low, high) of dtype (float32 or float64), from seed. */
void bench_fill_uniform(void *data, dlop_dtype dtype, int64_t count, double low, double high,
                        uint64_t seed);

/* Compare y with the reference of op on x (and b, broadcast as a row of b_count elements, for
 * multiply_them). Every element is checked for NaN (the poison an unwritten output keeps);
 * values are checked every sample_stride-th element and over the last 4096. Writes the
 * largest relative error and returns the number of bad elements (first one in *first_bad). */
int64_t bench_check_output(const char *op, dlop_dtype dtype, const void *x, const void *b,
                           int64_t b_count, const void *y, int64_t count, int64_t sample_stride,
                           double *max_rel_error, int64_t *first_bad);
/* The relative error a correct kernel stays under, for the check above. */
double bench_tolerance(const char *op, dlop_dtype dtype);

/* Split "a,b,c" into at most max items (pointers into text, which is modified). */
int bench_split_list(char *text, char **items, int max);
/* The dtypes the benches measure, by name: "float32" or "float64". 0 for any other. */
int bench_parse_dtype(const char *name, dlop_dtype *dtype);

#endif
