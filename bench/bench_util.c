/* bench_util.c — clock, median, random fill, reference checks and flag and list parsing shared
 * by dlop-bench-cpu and dlop-bench-gpu. */
#include "bench_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double bench_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int compare_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double bench_median(double *values, int count) {
  if (count <= 0) return NAN;
  qsort(values, (size_t)count, sizeof(double), compare_double);
  return count % 2 ? values[count / 2] : 0.5 * (values[count / 2 - 1] + values[count / 2]);
}

/* The next of a reproducible sequence of whole numbers in [0, 2^53), as doubles. splitmix64:
 * fast, and good enough to make data that is not zeros or a pattern. */
static double next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (double)((z ^ (z >> 31)) >> 11);
}

void bench_fill_uniform(void *data, dlop_dtype dtype, int64_t count, double low, double high,
                        uint64_t seed) {
  uint64_t state = seed;
  double scale = (high - low) / 9007199254740992.0; /* 2^53 */
  int64_t i;
  if (dtype == DLOP_FLOAT32) {
    float *out = data;
    for (i = 0; i < count; i++) out[i] = (float)(low + scale * next_random(&state));
  } else {
    double *out = data;
    for (i = 0; i < count; i++) out[i] = low + scale * next_random(&state);
  }
}

double bench_tolerance(const char *op, dlop_dtype dtype) {
  if (strcmp(op, "exp") != 0) return 0.0; /* 2x and a*b are exactly rounded */
  /* A few ulps: vectorized exp implementations are not always correctly rounded. */
  return dtype == DLOP_FLOAT32 ? 2e-6 : 1e-14;
}

static double element(const void *data, dlop_dtype dtype, int64_t i) {
  return dtype == DLOP_FLOAT32 ? (double)((const float *)data)[i] : ((const double *)data)[i];
}

/* The reference rounded to dtype, so that exact ops compare exactly. */
static double reference(const char *op, dlop_dtype dtype, double x, double b) {
  if (strcmp(op, "double") == 0) return dtype == DLOP_FLOAT32 ? (double)(2.0f * (float)x) : 2.0 * x;
  if (strcmp(op, "exp") == 0) return exp(x);
  return dtype == DLOP_FLOAT32 ? (double)((float)x * (float)b) : x * b;
}

int64_t bench_check_output(const char *op, dlop_dtype dtype, const void *x, const void *b,
                           int64_t b_count, const void *y, int64_t count, int64_t sample_stride,
                           double *max_rel_error, int64_t *first_bad) {
  double tolerance = bench_tolerance(op, dtype), worst = 0.0;
  int64_t bad = 0, i;
  *first_bad = -1;
  if (sample_stride < 1) sample_stride = 1;
  for (i = 0; i < count; i++) {
    double got = element(y, dtype, i), want, error;
    int sampled = (i % sample_stride) == 0 || i >= count - 4096;
    if (!sampled) {
      if (isnan(got)) goto bad_element; /* unwritten (poisoned) output */
      continue;
    }
    want = reference(op, dtype, element(x, dtype, i), b ? element(b, dtype, i % b_count) : 0.0);
    error = fabs(got - want) / (fabs(want) > 1e-300 ? fabs(want) : 1.0);
    if (!(error <= tolerance)) goto bad_element; /* NaN fails too */
    if (error > worst) worst = error;
    continue;
  bad_element:
    if (bad == 0) *first_bad = i;
    bad++;
    worst = INFINITY;
  }
  *max_rel_error = worst;
  return bad;
}

int bench_split_list(char *text, char **items, int max) {
  int count = 0;
  char *save = NULL, *item;
  for (item = strtok_r(text, ",", &save); item != NULL && count < max;
       item = strtok_r(NULL, ",", &save))
    items[count++] = item;
  return count;
}

int bench_parse_dtypes(char *text, dlop_dtype *dtypes, int max, int *count, const char *program) {
  char *save = NULL, *name;
  int n = 0;
  for (name = strtok_r(text, ",", &save); name != NULL && n < max;
       name = strtok_r(NULL, ",", &save)) {
    if (strcmp(name, "float32") == 0) dtypes[n++] = DLOP_FLOAT32;
    else if (strcmp(name, "float64") == 0) dtypes[n++] = DLOP_FLOAT64;
    else {
      fprintf(stderr, "%s: --dtypes: '%s' is not float32 or float64\n", program, name);
      return 0;
    }
  }
  *count = n;
  return 1;
}

char *bench_flag_value(int argc, char **argv, int *i, const char *program, void (*usage)(FILE *),
                       const char *switch_flag) {
  const char *flag = argv[*i];
  if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
    usage(stdout);
    exit(0);
  }
  if (switch_flag != NULL && strcmp(flag, switch_flag) == 0) return argv[*i];
  if (*i + 1 >= argc) {
    fprintf(stderr, "%s: %s needs a value\n", program, flag);
    return NULL;
  }
  return argv[++*i];
}
