/* bench_util.h — what both benchmark programs share: a monotonic clock, medians, random
 * fills (never zeros: they hide unwritten outputs), output checks against a C reference, and
 * the reading of their command-line flags. */
#ifndef DLOP_BENCH_UTIL_H
#define DLOP_BENCH_UTIL_H

#include <stddef.h>
#include <stdio.h>
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
/* --dtypes' value: at most max of the dtypes the benches measure ("float32", "float64"), comma
 * separated, into dtypes and their number into *count; 0, after a message from program naming
 * the bad entry, for any other name (text is modified). */
int bench_parse_dtypes(char *text, dlop_dtype *dtypes, int max, int *count, const char *program);

/* The value of the flag at argv[*i] in a bench program's option loop: argv[*i + 1], with *i
 * moved to it. "--help" and "-h" print usage on stdout and exit 0; switch_flag (NULL: none)
 * takes no value and comes back as itself; NULL, after "<program>: <flag> needs a value" on
 * stderr, when a value is missing. */
char *bench_flag_value(int argc, char **argv, int *i, const char *program, void (*usage)(FILE *),
                       const char *switch_flag);

#endif
