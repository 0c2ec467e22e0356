/* bench_cpu.c — dlop-bench-cpu: throughput of the seed kernels (double, multiply_them, exp) on
 * the CPU, float32 and float64, 2^10..2^24 elements. Prints one "dlop-bench key=value ..." line
 * per point (bench/cpu_vs_numpy.py parses them). path=thunk runs the op's thunk on preallocated
 * tensors (kernel throughput); path=function goes through dlop_function_run (per-call cost);
 * path=wrap also wraps each input with dlop_array_wrap and releases it, as the Python front end
 * does per call with a NumPy array. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_graph.h"
#include "bench_kernel.h"
#include "bench_util.h"

#define MAX_ITEMS 16

typedef struct options {
  char *ops[MAX_ITEMS];
  int num_ops;
  dlop_dtype dtypes[MAX_ITEMS];
  int num_dtypes;
  int min_log2, max_log2, step;
  int thunk_path, function_path, wrap_path;
  double target_seconds; /* per point */
  int min_reps;
  int check;
} options;

/* One measured call: either a thunk on fixed tensors or a function call. */
typedef struct call_context {
  bench_kernel *kernel;
  const dlop_tensor *inputs;
  const dlop_tensor *outputs;
  dlop_function *function;
  dlop_array *const *arrays;
  int32_t num_arrays;
  int wrap;                /* wrap arrays' tensors afresh each call (path=wrap) */
  long wrap_calls;         /* wrap: arrays wrapped */
  long deleter_calls;      /* wrap: deleters run, checked against the wraps made */
  char error[1024];
} call_context;

/* Stands in for the Python front end's deleter (a PyBuffer_Release): counts the calls. */
static void count_deleter(void *context) { ((call_context *)context)->deleter_calls++; }

static int call_once(call_context *c) {
  if (c->kernel != NULL) {
    int status = bench_kernel_run(c->kernel, c->inputs, c->outputs, NULL);
    if (status != DLOP_OK)
      snprintf(c->error, sizeof(c->error), "thunk.run: %s: %s", dlop_status_name(status),
               c->kernel->error);
    return status;
  } else if (!c->wrap) {
    dlop_array *out = NULL;
    int status = bench_function_call(c->function, c->arrays, c->num_arrays, NULL, &out, c->error,
                                     sizeof(c->error));
    if (out != NULL) dlop_array_release(out);
    return status;
  } else {
    dlop_array *wrapped[4] = {NULL, NULL, NULL, NULL}, *out = NULL;
    int32_t i;
    int status = DLOP_OK;
    for (i = 0; status == DLOP_OK && i < c->num_arrays; i++) {
      status = dlop_array_wrap(dlop_array_tensor(c->arrays[i]), count_deleter, c, &wrapped[i]);
      if (status != DLOP_OK)
        snprintf(c->error, sizeof(c->error), "dlop_array_wrap: %s: %s", dlop_status_name(status),
                 dlop_last_error());
      else
        c->wrap_calls++;
    }
    if (status == DLOP_OK)
      status = bench_function_call(c->function, wrapped, c->num_arrays, NULL, &out, c->error,
                                   sizeof(c->error));
    if (out != NULL) dlop_array_release(out);
    for (i = 0; i < c->num_arrays; i++) dlop_array_release(wrapped[i]);
    return status;
  }
}

/* Median seconds per call. Calls are grouped in samples of `inner` calls lasting >= 100 us,
 * so that clock reads are negligible even at 2^10 elements; enough samples to fill
 * target_seconds, and at least min_reps of them. */
static int measure(call_context *c, const options *o, double *seconds, int *samples_out,
                   long *inner_out) {
  double start, warm = 0.0, per_call, *samples;
  long inner, warm_calls = 0, k;
  int count, s, status;

  start = bench_now();
  do { /* warm-up: caches, page faults, the thread pool spinning up */
    if ((status = call_once(c)) != DLOP_OK) return status;
    warm_calls++;
    warm = bench_now() - start;
  } while (warm_calls < 3 || (warm < 0.1 * o->target_seconds && warm_calls < 100000));
  /* Calibrate on warm calls only: the first ones pay page faults and would shrink `inner`. */
  for (k = 1;; k *= 2) {
    double t0 = bench_now();
    long j;
    for (j = 0; j < k; j++)
      if ((status = call_once(c)) != DLOP_OK) return status;
    per_call = (bench_now() - t0) / (double)k;
    if (per_call * (double)k >= 1e-3 || k >= (1L << 20)) break;
  }
  inner = (long)(1e-4 / per_call) + 1;
  count = (int)(o->target_seconds / (per_call * (double)inner));
  if (count < o->min_reps) count = o->min_reps;
  if (count > 20000) count = 20000;
  samples = malloc(sizeof(double) * (size_t)count);
  if (samples == NULL) {
    snprintf(c->error, sizeof(c->error), "out of memory for %d samples", count);
    return DLOP_OUT_OF_MEMORY;
  }
  for (s = 0; s < count; s++) {
    double t0 = bench_now();
    for (k = 0; k < inner; k++) {
      if ((status = call_once(c)) != DLOP_OK) {
        free(samples);
        return status;
      }
    }
    samples[s] = (bench_now() - t0) / (double)inner;
  }
  *seconds = bench_median(samples, count);
  *samples_out = count;
  *inner_out = inner;
  free(samples);
  return DLOP_OK;
}

static int is_multiply(const char *op) { return strcmp(op, "multiply_them") == 0; }

/* The end of one path's point: its result line when status is DLOP_OK (check=ok or FAIL as ok
 * says), what went wrong (error) otherwise. Returns 1 when the point failed either way. */
static int finish_point(int status, int ok, const char *error, const char *op, dlop_dtype dtype,
                        int64_t n, const char *path, int threads, int samples, long inner,
                        double seconds, double max_rel_error) {
  double bytes = (double)n * (double)dlop_dtype_size(dtype) * (is_multiply(op) ? 3.0 : 2.0);
  if (status != DLOP_OK) {
    fprintf(stderr, "dlop-bench-cpu: %s %s n=%lld: %s\n", op, dlop_dtype_name(dtype),
            (long long)n, error);
    return 1;
  }
  printf("dlop-bench op=%s dtype=%s n=%lld path=%s device=cpu threads=%d reps=%d inner=%ld "
         "seconds=%.6e gbps=%.4f elements_per_s=%.6e max_rel_err=%.3e check=%s\n",
         op, dlop_dtype_name(dtype), (long long)n, path, threads, samples, inner, seconds,
         bytes / seconds / 1e9, (double)n / seconds, max_rel_error, ok ? "ok" : "FAIL");
  fflush(stdout);
  return !ok;
}

/* Check out against the reference; report and return 0 when it is wrong. */
static int check_output(const options *o, const char *op, dlop_dtype dtype, const dlop_tensor *x,
                        const dlop_tensor *b, const dlop_tensor *out, int64_t n,
                        double *max_rel_error, const char *path) {
  int64_t first_bad, bad;
  *max_rel_error = 0.0;
  if (!o->check) return 1;
  bad = bench_check_output(op, dtype, dlop_tensor_base(x), b ? dlop_tensor_base(b) : NULL, n,
                           dlop_tensor_base(out), n, 1, max_rel_error, &first_bad);
  if (bad > 0) {
    fprintf(stderr,
            "dlop-bench-cpu: %s %s n=%lld path=%s: %lld wrong elements, first at %lld "
            "(tolerance %.1e relative)\n",
            op, dlop_dtype_name(dtype), (long long)n, path, (long long)bad, (long long)first_bad,
            bench_tolerance(op, dtype));
    return 0;
  }
  return 1;
}

/* Measure one (op, dtype, n) on the requested paths. Returns 0 on success, 1 on failure. */
static int bench_point(const options *o, const char *op, dlop_dtype dtype, int64_t n, int threads) {
  dlop_device cpu = {DLOP_DEVICE_CPU, 0};
  dlop_array *arrays[3] = {NULL, NULL, NULL};
  const dlop_tensor *tensors[3];
  dlop_tensor inputs[2], outputs[1];
  int32_t num_inputs = is_multiply(op) ? 2 : 1, i;
  int failed = 0, status, samples, wrap;
  long inner;
  double seconds, max_rel_error;
  char error[1024];
  call_context c;

  for (i = 0; i < num_inputs + 1; i++) {
    status = dlop_array_empty(cpu, dtype, 1, &n, &arrays[i]);
    if (status != DLOP_OK) {
      fprintf(stderr, "dlop-bench-cpu: %s %s n=%lld: allocation: %s\n", op,
              dlop_dtype_name(dtype), (long long)n, dlop_last_error());
      failed = 1;
      goto done;
    }
    tensors[i] = dlop_array_tensor(arrays[i]);
  }
  /* exp on [-5, 5) stays clear of overflow and denormals; never zeros. */
  bench_fill_uniform(dlop_tensor_base(tensors[0]), dtype, n, -5.0, 5.0, 0x5eed0001u + (uint64_t)n);
  if (num_inputs == 2)
    bench_fill_uniform(dlop_tensor_base(tensors[1]), dtype, n, -2.0, 2.0, 0x5eed0002u + (uint64_t)n);
  for (i = 0; i < num_inputs; i++) inputs[i] = *tensors[i];
  outputs[0] = *tensors[num_inputs];

  if (o->thunk_path) {
    bench_kernel kernel;
    status = bench_kernel_prepare(&kernel, op, cpu, inputs, num_inputs, outputs, 1, error,
                                  sizeof(error));
    if (status != DLOP_OK) {
      fprintf(stderr, "dlop-bench-cpu: %s\n", error);
      failed = 1;
    } else {
      memset(c.error, 0, sizeof(c.error));
      c.kernel = &kernel;
      c.inputs = inputs;
      c.outputs = outputs;
      memset(dlop_tensor_base(&outputs[0]), 0xff, (size_t)n * dlop_dtype_size(dtype)); /* NaN */
      status = call_once(&c);
      int ok = 1;
      if (status == DLOP_OK) {
        ok = check_output(o, op, dtype, &inputs[0], num_inputs == 2 ? &inputs[1] : NULL,
                          &outputs[0], n, &max_rel_error, "thunk");
        status = measure(&c, o, &seconds, &samples, &inner);
      }
      if (finish_point(status, ok, c.error, op, dtype, n, "thunk", threads, samples, inner,
                       seconds, max_rel_error))
        failed = 1;
      bench_kernel_release(&kernel);
    }
  }

  for (wrap = 0; wrap < 2; wrap++) {
    const char *path = wrap ? "wrap" : "function";
    if (!(wrap ? o->wrap_path : o->function_path)) continue;
    dlop_function *function = NULL;
    status = bench_function_prepare(op, cpu, arrays, num_inputs, &function, error, sizeof(error));
    if (status != DLOP_OK) {
      fprintf(stderr, "dlop-bench-cpu: %s\n", error);
      failed = 1;
    } else {
      dlop_array *out = NULL;
      memset(c.error, 0, sizeof(c.error));
      c.kernel = NULL;
      c.function = function;
      c.arrays = arrays;
      c.num_arrays = num_inputs;
      c.wrap = wrap;
      c.wrap_calls = c.deleter_calls = 0;
      status = bench_function_call(function, arrays, num_inputs, NULL, &out, c.error,
                                   sizeof(c.error));
      int ok = 1;
      if (status == DLOP_OK) {
        ok = check_output(o, op, dtype, &inputs[0], num_inputs == 2 ? &inputs[1] : NULL,
                          dlop_array_tensor(out), n, &max_rel_error, path);
        dlop_array_release(out);
        status = measure(&c, o, &seconds, &samples, &inner);
        if (status == DLOP_OK && wrap && c.deleter_calls != c.wrap_calls) {
          fprintf(stderr, "dlop-bench-cpu: %s %s n=%lld path=wrap: %ld deleter calls for %ld "
                  "wrapped arrays\n", op, dlop_dtype_name(dtype), (long long)n, c.deleter_calls,
                  c.wrap_calls);
          ok = 0;
        }
      }
      if (finish_point(status, ok, c.error, op, dtype, n, path, threads, samples, inner, seconds,
                       max_rel_error))
        failed = 1;
      dlop_function_destroy(function);
    }
  }

done:
  for (i = 0; i < 3; i++)
    if (arrays[i] != NULL) dlop_array_release(arrays[i]);
  return failed;
}

static void usage(FILE *to) {
  fprintf(to,
          "usage: dlop-bench-cpu [--ops double,multiply_them,exp] [--dtypes float32,float64]\n"
          "                      [--min-log2 10] [--max-log2 24] [--step 2]\n"
          "                      [--paths thunk,function,wrap] [--target-ms 50] [--min-reps 5]\n"
          "                      [--no-check]\n"
          "Prints one line per point: dlop-bench op= dtype= n= path= ... seconds= (median per\n"
          "call) gbps= (bytes read + written / seconds) elements_per_s= check=ok|FAIL.\n");
}

static int parse_options(int argc, char **argv, options *o) {
  static char default_ops[] = "double,multiply_them,exp";
  char *items[MAX_ITEMS];
  int i, j, count;
  memset(o, 0, sizeof(*o));
  o->num_ops = bench_split_list(default_ops, o->ops, MAX_ITEMS);
  o->dtypes[0] = DLOP_FLOAT32;
  o->dtypes[1] = DLOP_FLOAT64;
  o->num_dtypes = 2;
  o->min_log2 = 10;
  o->max_log2 = 24;
  o->step = 2;
  o->thunk_path = o->function_path = 1; /* wrap on request: it adds little at large sizes */
  o->wrap_path = 0;
  o->target_seconds = 0.05;
  o->min_reps = 5;
  o->check = 1;
  for (i = 1; i < argc; i++) {
    const char *flag = argv[i];
    char *value = bench_flag_value(argc, argv, &i, "dlop-bench-cpu", usage, "--no-check");
    if (value == NULL) return 0;
    if (strcmp(flag, "--no-check") == 0) {
      o->check = 0;
    } else if (strcmp(flag, "--ops") == 0) {
      o->num_ops = bench_split_list(value, o->ops, MAX_ITEMS);
    } else if (strcmp(flag, "--dtypes") == 0) {
      if (!bench_parse_dtypes(value, o->dtypes, MAX_ITEMS, &o->num_dtypes, "dlop-bench-cpu"))
        return 0;
    } else if (strcmp(flag, "--paths") == 0) {
      count = bench_split_list(value, items, MAX_ITEMS);
      o->thunk_path = o->function_path = o->wrap_path = 0;
      for (j = 0; j < count; j++) {
        if (strcmp(items[j], "thunk") == 0) o->thunk_path = 1;
        else if (strcmp(items[j], "function") == 0) o->function_path = 1;
        else if (strcmp(items[j], "wrap") == 0) o->wrap_path = 1;
        else {
          fprintf(stderr, "dlop-bench-cpu: --paths: '%s' is not thunk, function or wrap\n",
                  items[j]);
          return 0;
        }
      }
    } else if (strcmp(flag, "--min-log2") == 0) {
      o->min_log2 = atoi(value);
    } else if (strcmp(flag, "--max-log2") == 0) {
      o->max_log2 = atoi(value);
    } else if (strcmp(flag, "--step") == 0) {
      o->step = atoi(value);
    } else if (strcmp(flag, "--target-ms") == 0) {
      o->target_seconds = atof(value) / 1000.0;
    } else if (strcmp(flag, "--min-reps") == 0) {
      o->min_reps = atoi(value);
    } else {
      fprintf(stderr, "dlop-bench-cpu: unknown flag %s\n", flag);
      return 0;
    }
  }
  if (o->min_log2 < 0 || o->max_log2 > 40 || o->min_log2 > o->max_log2 || o->step < 1 ||
      o->min_reps < 1 || !(o->target_seconds > 0.0) || o->num_ops == 0 || o->num_dtypes == 0) {
    fprintf(stderr,
            "dlop-bench-cpu: bad sizes or counts (min-log2 %d, max-log2 %d, step %d, min-reps "
            "%d, target %.3f s): want 0 <= min <= max <= 40, step >= 1, reps >= 1, target > 0\n",
            o->min_log2, o->max_log2, o->step, o->min_reps, o->target_seconds);
    return 0;
  }
  return 1;
}

int main(int argc, char **argv) {
  options o;
  const dlop_host_api *host;
  char cpu_name[256] = "";
  dlop_device cpu = {DLOP_DEVICE_CPU, 0};
  int threads = 1, failures = 0, a, b, log2n;

  if (!parse_options(argc, argv, &o)) {
    usage(stderr);
    return 2;
  }
  if (dlop_load_default_plugins() != DLOP_OK) {
    fprintf(stderr, "dlop-bench-cpu: loading plugins: %s\n", dlop_last_error());
    return 1;
  }
  host = dlop_host_api_table();
  if (DLOP_HOST_HAS(host, cpu_threads)) threads = host->cpu_threads();
  dlop_device_description(cpu, cpu_name, sizeof(cpu_name));
  printf("# dlop-bench-cpu: libdlop %s, cpu '%s', %d thread(s) in the host parallel-for\n",
         dlop_version_string(), cpu_name, threads);
  for (a = 0; a < o.num_ops; a++) {
    for (b = 0; b < o.num_dtypes; b++) {
      char why[512];
      if (!bench_op_supports(o.ops[a], DLOP_DEVICE_CPU, o.dtypes[b], why, sizeof(why))) {
        fprintf(stderr, "dlop-bench-cpu: %s\n", why);
        failures++;
        continue;
      }
      for (log2n = o.min_log2; log2n <= o.max_log2; log2n += o.step)
        failures += bench_point(&o, o.ops[a], o.dtypes[b], (int64_t)1 << log2n, threads);
    }
  }
  if (failures > 0) fprintf(stderr, "dlop-bench-cpu: %d point(s) failed\n", failures);
  return failures > 0 ? 1 : 0;
}
