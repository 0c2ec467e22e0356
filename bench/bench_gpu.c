/* bench_gpu.c — dlop-bench-gpu: effective bandwidth (bytes read + written / time) of the seed
 * CUDA kernels at 2^28 elements against a device-to-device copy of the same bytes measured in
 * the same run, timed with CUDA events (warm-up, then the median of >= 20 reps). Goal: >= 95%
 * of the copy. Without a GPU it prints "SKIP: <why>" and exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_graph.h"
#include "bench_kernel.h"
#include "bench_util.h"
#include "cuda_timer.h"

#define MAX_ITEMS 8
#define MAX_ROWS 64
#define GOAL 0.95

typedef struct options {
  int log2n;
  dlop_dtype dtypes[MAX_ITEMS];
  int num_dtypes;
  char *workloads[MAX_ITEMS];
  int num_workloads;
  int reps, warmup;
  int function_path;
  int device_id;
} options;

/* One row of the final table. */
typedef struct row {
  char label[64];
  dlop_dtype dtype;
  double ms, tbps, ratio;
  int is_copy, checked_ok;
} row;

static row rows[MAX_ROWS];
static int num_rows;
static char error[1024];

/* One timed operation on the stream: a copy, a thunk run, or a function call. */
typedef struct timed_call {
  int kind; /* 0 copy, 1 thunk, 2 function */
  void *stream;
  dlop_stream *dlop_stream;
  /* copy */
  void *destination;
  const void *source;
  size_t bytes;
  /* thunk */
  bench_kernel *kernel;
  const dlop_tensor *inputs, *outputs;
  /* function */
  dlop_function *function;
  dlop_array *const *arrays;
  int32_t num_arrays;
} timed_call;

static int issue(timed_call *t) {
  if (t->kind == 0)
    return cuda_copy_device_to_device(t->destination, t->source, t->bytes, t->stream, error,
                                      sizeof(error));
  if (t->kind == 1) {
    int status = bench_kernel_run(t->kernel, t->inputs, t->outputs, t->stream);
    if (status != DLOP_OK)
      snprintf(error, sizeof(error), "thunk.run: %s: %s", dlop_status_name(status), t->kernel->error);
    return status == DLOP_OK ? 0 : -1;
  } else {
    dlop_array *out = NULL;
    int status = bench_function_call(t->function, t->arrays, t->num_arrays, t->dlop_stream, &out,
                                     error, sizeof(error));
    /* Released at once: the runtime frees it in stream order, which is what a user's loop does. */
    if (out != NULL) dlop_array_release(out);
    return status == DLOP_OK ? 0 : -1;
  }
}

/* Median milliseconds of one call, timed by events around each call after warm-up calls. */
static int time_call(timed_call *t, const options *o, double *median_ms) {
  void *events[2] = {NULL, NULL};
  double *samples = malloc(sizeof(double) * (size_t)o->reps);
  int i, result = -1;
  float ms;
  if (samples == NULL) {
    snprintf(error, sizeof(error), "out of host memory for %d samples", o->reps);
    return -1;
  }
  if (cuda_event_pair_create(events, error, sizeof(error)) != 0) goto done;
  for (i = 0; i < o->warmup; i++)
    if (issue(t) != 0) goto done;
  if (cuda_stream_wait(t->stream, error, sizeof(error)) != 0) goto done;
  for (i = 0; i < o->reps; i++) {
    if (cuda_event_record(events[0], t->stream, error, sizeof(error)) != 0) goto done;
    if (issue(t) != 0) goto done;
    if (cuda_event_record(events[1], t->stream, error, sizeof(error)) != 0) goto done;
    if (cuda_event_elapsed_ms(events[0], events[1], &ms, error, sizeof(error)) != 0) goto done;
    samples[i] = ms;
  }
  *median_ms = bench_median(samples, o->reps);
  result = 0;
done:
  cuda_event_pair_destroy(events);
  free(samples);
  return result;
}

static void add_row(const char *label, dlop_dtype dtype, double ms, double bytes, double copy_tbps,
                    int is_copy, int checked_ok) {
  row *r;
  double tbps = bytes / (ms * 1e-3) / 1e12;
  printf("dlop-bench op=%s dtype=%s device=cuda n_bytes=%.0f seconds=%.6e tbps=%.4f "
         "ratio_to_copy=%.4f check=%s\n",
         label, dlop_dtype_name(dtype), bytes, ms * 1e-3, tbps,
         copy_tbps > 0 ? tbps / copy_tbps : 1.0, checked_ok ? "ok" : "FAIL");
  fflush(stdout);
  if (num_rows >= MAX_ROWS) return;
  r = &rows[num_rows++];
  snprintf(r->label, sizeof(r->label), "%s", label);
  r->dtype = dtype;
  r->ms = ms;
  r->tbps = tbps;
  r->ratio = copy_tbps > 0 ? tbps / copy_tbps : 1.0;
  r->is_copy = is_copy;
  r->checked_ok = checked_ok;
}

/* Read back out (count elements) after the stream is idle and compare with the reference. */
static int check_result(const char *op, dlop_dtype dtype, const void *host_x, const void *host_b,
                        int64_t b_count, const dlop_array *out, void *host_y, int64_t count,
                        void *stream) {
  int64_t bad, first_bad;
  double worst;
  size_t bytes = (size_t)count * dlop_dtype_size(dtype);
  if (cuda_stream_wait(stream, error, sizeof(error)) != 0) {
    fprintf(stderr, "dlop-bench-gpu: %s %s: %s\n", op, dlop_dtype_name(dtype), error);
    return 0;
  }
  if (dlop_array_to_host(out, host_y, bytes) != DLOP_OK) {
    fprintf(stderr, "dlop-bench-gpu: %s %s: reading the output back: %s\n", op,
            dlop_dtype_name(dtype), dlop_last_error());
    return 0;
  }
  /* exp's reference is slow: check every element for NaN (unwritten), values on a sample. */
  bad = bench_check_output(op, dtype, host_x, host_b, b_count, host_y, count,
                           strcmp(op, "exp") == 0 ? 61 : 1, &worst, &first_bad);
  if (bad > 0) {
    fprintf(stderr,
            "dlop-bench-gpu: %s %s: %lld wrong elements of %lld, first at %lld (tolerance %.1e)\n",
            op, dlop_dtype_name(dtype), (long long)bad, (long long)count, (long long)first_bad,
            bench_tolerance(op, dtype));
    return 0;
  }
  return 1;
}

/* The workloads: name -> op, and whether b is a row broadcast over x viewed as a matrix. */
static const char *workload_op(const char *workload, int *broadcast) {
  *broadcast = 0;
  if (strcmp(workload, "double") == 0 || strcmp(workload, "exp") == 0 ||
      strcmp(workload, "multiply_them") == 0)
    return workload;
  if (strcmp(workload, "multiply_row") == 0) {
    *broadcast = 1;
    return "multiply_them";
  }
  return NULL;
}

/* All workloads of one dtype. Returns the number of failures. */
static int bench_dtype(const options *o, dlop_device device, dlop_stream *dstream, dlop_dtype dtype) {
  int64_t n = (int64_t)1 << o->log2n, cols = (int64_t)1 << (o->log2n / 2), rows2 = n / cols;
  int64_t shape2[2] = {rows2, cols}, strides2[2] = {cols, 1};
  size_t size = dlop_dtype_size(dtype), bytes = (size_t)n * size;
  void *host_x = malloc(bytes), *host_b = malloc(bytes), *host_y = malloc(bytes);
  void *stream = dlop_stream_handle(dstream);
  dlop_array *x = NULL, *b = NULL, *y = NULL, *x2 = NULL, *y2 = NULL, *row_b = NULL;
  double copy_ms[2], copy_tbps, ms;
  int failures = 0, w, i;
  timed_call t;

  if (host_x == NULL || host_b == NULL || host_y == NULL) {
    fprintf(stderr, "dlop-bench-gpu: %s: out of host memory for 3 x %zu bytes\n",
            dlop_dtype_name(dtype), bytes);
    failures++;
    goto done;
  }
  /* Random data filled on the host and copied: never zeros, which can run faster. */
  bench_fill_uniform(host_x, dtype, n, -5.0, 5.0, 0x9e3779b9u + (uint64_t)dtype);
  bench_fill_uniform(host_b, dtype, n, -2.0, 2.0, 0x7f4a7c15u + (uint64_t)dtype);
  if (dlop_array_from_host(device, dtype, 1, &n, host_x, &x) != DLOP_OK ||
      dlop_array_from_host(device, dtype, 1, &n, host_b, &b) != DLOP_OK ||
      dlop_array_from_host(device, dtype, 1, &cols, host_b, &row_b) != DLOP_OK ||
      dlop_array_empty(device, dtype, 1, &n, &y) != DLOP_OK ||
      dlop_array_view(x, 2, shape2, strides2, 0, &x2) != DLOP_OK ||
      dlop_array_view(y, 2, shape2, strides2, 0, &y2) != DLOP_OK) {
    fprintf(stderr, "dlop-bench-gpu: %s: allocating 3 x %zu bytes on the device: %s\n",
            dlop_dtype_name(dtype), bytes, dlop_last_error());
    failures++;
    goto done;
  }
  if (dlop_array_synchronize(x) != DLOP_OK || dlop_array_synchronize(b) != DLOP_OK ||
      dlop_array_synchronize(row_b) != DLOP_OK) {
    fprintf(stderr, "dlop-bench-gpu: %s: uploading inputs: %s\n", dlop_dtype_name(dtype),
            dlop_last_error());
    failures++;
    goto done;
  }

  /* The ceiling: copy x into y, the bytes double and exp move (n read + n written). */
  memset(&t, 0, sizeof(t));
  t.kind = 0;
  t.stream = stream;
  t.destination = dlop_tensor_base(dlop_array_tensor(y));
  t.source = dlop_tensor_base(dlop_array_tensor(x));
  t.bytes = bytes;
  if (time_call(&t, o, &copy_ms[0]) != 0) {
    fprintf(stderr, "dlop-bench-gpu: %s copy: %s\n", dlop_dtype_name(dtype), error);
    failures++;
    goto done;
  }
  copy_tbps = 2.0 * (double)bytes / (copy_ms[0] * 1e-3) / 1e12;
  add_row("copy", dtype, copy_ms[0], 2.0 * (double)bytes, copy_tbps, 1, 1);

  for (w = 0; w < o->num_workloads; w++) {
    int broadcast, path;
    const char *op = workload_op(o->workloads[w], &broadcast);
    int binary = strcmp(op, "multiply_them") == 0;
    dlop_array *in_arrays[2], *out_array = broadcast ? y2 : y;
    dlop_tensor inputs[2], outputs[1];
    int64_t b_count = broadcast ? cols : n;
    double moved = (double)bytes * 2.0 + (binary ? (double)b_count * (double)size : 0.0);
    char why[512], label[64];
    if (!bench_op_supports(op, DLOP_DEVICE_CUDA, dtype, why, sizeof(why))) {
      fprintf(stderr, "dlop-bench-gpu: %s\n", why);
      failures++;
      continue;
    }
    in_arrays[0] = broadcast ? x2 : x;
    in_arrays[1] = broadcast ? row_b : b;
    for (i = 0; i < (binary ? 2 : 1); i++) inputs[i] = *dlop_array_tensor(in_arrays[i]);
    outputs[0] = *dlop_array_tensor(out_array);

    for (path = 0; path < (o->function_path ? 2 : 1); path++) {
      bench_kernel kernel;
      dlop_function *function = NULL;
      int ok = 0, prepared;
      memset(&t, 0, sizeof(t));
      t.stream = stream;
      t.dlop_stream = dstream;
      snprintf(label, sizeof(label), "%s%s", o->workloads[w], path == 0 ? "" : "/function");
      if (path == 0) {
        prepared = bench_kernel_prepare(&kernel, op, device, inputs, binary ? 2 : 1, outputs, 1,
                                        error, sizeof(error)) == DLOP_OK;
        t.kind = 1;
        t.kernel = &kernel;
        t.inputs = inputs;
        t.outputs = outputs;
      } else {
        prepared = bench_function_prepare(op, device, in_arrays, binary ? 2 : 1, &function, error,
                                          sizeof(error)) == DLOP_OK;
        t.kind = 2;
        t.function = function;
        t.arrays = in_arrays;
        t.num_arrays = binary ? 2 : 1;
      }
      if (!prepared) {
        fprintf(stderr, "dlop-bench-gpu: %s %s: %s\n", label, dlop_dtype_name(dtype), error);
        failures++;
        continue;
      }
      /* First run into a poisoned output (all-ones bytes are NaN), then check every element. */
      if (path == 0) {
        if (cuda_memset_bytes(dlop_tensor_base(&t.outputs[0]), 0xff, bytes, stream, error, sizeof(error)) == 0 &&
            issue(&t) == 0)
          ok = check_result(op, dtype, host_x, host_b, b_count, out_array, host_y, n, stream);
        else
          fprintf(stderr, "dlop-bench-gpu: %s %s: %s\n", label, dlop_dtype_name(dtype), error);
      } else {
        dlop_array *out = NULL;
        if (bench_function_call(function, in_arrays, t.num_arrays, dstream, &out, error,
                                sizeof(error)) == DLOP_OK) {
          ok = check_result(op, dtype, host_x, host_b, b_count, out, host_y, n, stream);
        } else {
          fprintf(stderr, "dlop-bench-gpu: %s %s: %s\n", label, dlop_dtype_name(dtype), error);
        }
        if (out != NULL) dlop_array_release(out);
      }
      if (time_call(&t, o, &ms) == 0) {
        add_row(label, dtype, ms, moved, copy_tbps, 0, ok);
      } else {
        fprintf(stderr, "dlop-bench-gpu: %s %s: %s\n", label, dlop_dtype_name(dtype), error);
        ok = 0;
      }
      if (!ok) failures++;
      if (path == 0) bench_kernel_release(&kernel);
      else dlop_function_destroy(function);
    }
  }

  /* The copy again, after the kernels: the spread between the two is the noise floor. */
  t.kind = 0;
  t.stream = stream;
  t.destination = dlop_tensor_base(dlop_array_tensor(y));
  t.source = dlop_tensor_base(dlop_array_tensor(x));
  t.bytes = bytes;
  if (time_call(&t, o, &copy_ms[1]) == 0)
    add_row("copy(again)", dtype, copy_ms[1], 2.0 * (double)bytes, copy_tbps, 1, 1);

done:
  if (cuda_stream_wait(stream, error, sizeof(error)) != 0)
    fprintf(stderr, "dlop-bench-gpu: %s\n", error);
  if (x2) dlop_array_release(x2);
  if (y2) dlop_array_release(y2);
  if (x) dlop_array_release(x);
  if (b) dlop_array_release(b);
  if (y) dlop_array_release(y);
  if (row_b) dlop_array_release(row_b);
  free(host_x);
  free(host_b);
  free(host_y);
  dlop_memory_release_cached(device);
  return failures;
}

/* Per-call cost of exp on float32 (launch and bookkeeping; at 230400 elements, Theano's
 * GPU check, also the kernel): 2000 calls back to back, then one wait, on three paths: the
 * thunk alone on the bench's stream; dlop_function_run on the bench's stream, each output
 * released at once; and dlop_function_run on the function's own stream keeping the last output
 * alive, as a Python loop `r = f(x)` does (the result left on the device). One line each. */
static int overhead_point(dlop_device device, dlop_stream *dstream, int64_t n, int path) {
  static const char *paths[3] = {"thunk", "function", "function-own-stream"};
  float *host = malloc(sizeof(float) * (size_t)n);
  dlop_array *x = NULL, *y = NULL, *last = NULL;
  dlop_tensor inputs[1], outputs[1];
  bench_kernel kernel;
  dlop_function *function = NULL;
  timed_call t;
  int i, calls = 2000, prepared = 0, ok = 0;
  double start = 0.0, per_call = 0.0;
  if (host == NULL) return 1;
  bench_fill_uniform(host, DLOP_FLOAT32, n, -5.0, 5.0, 42);
  if (dlop_array_from_host(device, DLOP_FLOAT32, 1, &n, host, &x) != DLOP_OK ||
      dlop_array_empty(device, DLOP_FLOAT32, 1, &n, &y) != DLOP_OK) {
    snprintf(error, sizeof(error), "%s", dlop_last_error());
    goto done;
  }
  inputs[0] = *dlop_array_tensor(x);
  outputs[0] = *dlop_array_tensor(y);
  memset(&t, 0, sizeof(t));
  t.stream = dlop_stream_handle(dstream);
  t.dlop_stream = dstream;
  if (path == 0) {
    if (bench_kernel_prepare(&kernel, "exp", device, inputs, 1, outputs, 1, error,
                             sizeof(error)) != DLOP_OK)
      goto done;
    prepared = 1;
    t.kind = 1;
    t.kernel = &kernel;
    t.inputs = inputs;
    t.outputs = outputs;
  } else {
    if (bench_function_prepare("exp", device, &x, 1, &function, error, sizeof(error)) != DLOP_OK)
      goto done;
    t.kind = 2;
    t.function = function;
    t.arrays = &x;
    t.num_arrays = 1;
  }
  for (int round = 0; round < 2; round++) { /* round 0 warms up: pool, modules, caches */
    int count = round == 0 ? 100 : calls;
    if (round == 1) start = bench_now();
    for (i = 0; i < count; i++) {
      if (path < 2) {
        if (issue(&t) != 0) goto done;
      } else {
        dlop_array *out = NULL;
        if (bench_function_call(function, &x, 1, NULL, &out, error, sizeof(error)) != DLOP_OK)
          goto done;
        dlop_array_release(last); /* the previous result goes when the new one arrives */
        last = out;
      }
    }
    if (path < 2 ? cuda_stream_wait(t.stream, error, sizeof(error)) != 0
                 : dlop_array_synchronize(last) != DLOP_OK) {
      if (path == 2) snprintf(error, sizeof(error), "%s", dlop_last_error());
      goto done;
    }
  }
  per_call = (bench_now() - start) / calls;
  printf("dlop-bench op=exp dtype=float32 n=%lld path=%s device=cuda metric=host_time_per_call "
         "seconds=%.3e\n",
         (long long)n, paths[path], per_call);
  printf("# call cost: exp float32 n=%-7lld %-20s %6.2f us/call\n", (long long)n, paths[path],
         per_call * 1e6);
  ok = 1;
done:
  if (!ok) fprintf(stderr, "dlop-bench-gpu: call cost (%s, n=%lld): %s\n", paths[path],
                   (long long)n, error);
  if (prepared) bench_kernel_release(&kernel);
  dlop_array_release(last);
  if (function) dlop_function_destroy(function);
  dlop_array_release(x);
  dlop_array_release(y);
  free(host);
  return ok ? 0 : 1;
}

static int bench_overhead(const options *o, dlop_device device, dlop_stream *dstream) {
  static const int64_t sizes[2] = {1024, 230400};
  int failures = 0;
  (void)o;
  printf("# call cost: host time per call, 2000 calls back to back then one wait; goal for "
         "function-own-stream at n=230400: <= 4.5 us\n");
  for (int s = 0; s < 2; s++)
    for (int path = 0; path < 3; path++) failures += overhead_point(device, dstream, sizes[s], path);
  return failures;
}

static void usage(FILE *to) {
  fprintf(to,
          "usage: dlop-bench-gpu [--log2 28] [--dtypes float32,float64]\n"
          "                      [--workloads double,exp,multiply_them,multiply_row]\n"
          "                      [--reps 50] [--warmup 5] [--device N] [--no-function]\n"
          "multiply_row: x viewed as a (2^(log2 - log2/2), 2^(log2/2)) matrix times one row\n"
          "of 2^(log2/2) elements, broadcast (2^14 x 2^14 by 2^14 at the default size).\n"
          "Prints one line per kernel (dlop-bench op= ... tbps= ratio_to_copy=) and a table.\n");
}

static int parse_options(int argc, char **argv, options *o) {
  static char default_workloads[] = "double,exp,multiply_them,multiply_row";
  int i, j, broadcast;
  memset(o, 0, sizeof(*o));
  o->log2n = 28;
  o->dtypes[0] = DLOP_FLOAT32;
  o->dtypes[1] = DLOP_FLOAT64;
  o->num_dtypes = 2;
  o->num_workloads = bench_split_list(default_workloads, o->workloads, MAX_ITEMS);
  o->reps = 50;
  o->warmup = 5;
  o->function_path = 1;
  for (i = 1; i < argc; i++) {
    const char *flag = argv[i];
    char *value = bench_flag_value(argc, argv, &i, "dlop-bench-gpu", usage, "--no-function");
    if (value == NULL) return 0;
    if (strcmp(flag, "--no-function") == 0) {
      o->function_path = 0;
    } else if (strcmp(flag, "--log2") == 0) {
      o->log2n = atoi(value);
    } else if (strcmp(flag, "--dtypes") == 0) {
      if (!bench_parse_dtypes(value, o->dtypes, MAX_ITEMS, &o->num_dtypes, "dlop-bench-gpu"))
        return 0;
    } else if (strcmp(flag, "--workloads") == 0) {
      o->num_workloads = bench_split_list(value, o->workloads, MAX_ITEMS);
      for (j = 0; j < o->num_workloads; j++)
        if (workload_op(o->workloads[j], &broadcast) == NULL) {
          fprintf(stderr, "dlop-bench-gpu: unknown workload '%s'\n", o->workloads[j]);
          return 0;
        }
    } else if (strcmp(flag, "--reps") == 0) {
      o->reps = atoi(value);
    } else if (strcmp(flag, "--warmup") == 0) {
      o->warmup = atoi(value);
    } else if (strcmp(flag, "--device") == 0) {
      o->device_id = atoi(value);
    } else {
      fprintf(stderr, "dlop-bench-gpu: unknown flag %s\n", flag);
      return 0;
    }
  }
  if (o->log2n < 2 || o->log2n > 34 || o->reps < 20 || o->warmup < 1 || o->device_id < 0 ||
      o->num_dtypes == 0 || o->num_workloads == 0) {
    fprintf(stderr,
            "dlop-bench-gpu: bad options (log2 %d, reps %d, warmup %d, device %d): want "
            "2 <= log2 <= 34, reps >= 20, warmup >= 1, device >= 0\n",
            o->log2n, o->reps, o->warmup, o->device_id);
    return 0;
  }
  return 1;
}

static void print_table(const options *o, const char *gpu_name) {
  int i;
  printf("\nGPU: %s, n = 2^%d elements, median of %d reps after %d warm-up, CUDA events\n",
         gpu_name, o->log2n, o->reps, o->warmup);
  printf("%-8s %-24s %10s %8s %8s  %s\n", "dtype", "kernel", "ms", "TB/s", "vs copy",
         "goal >= 95% of copy");
  for (i = 0; i < num_rows; i++) {
    const row *r = &rows[i];
    const char *verdict = r->is_copy ? "(reference)" : !r->checked_ok ? "WRONG RESULT"
                                                      : r->ratio >= GOAL ? "yes"
                                                                         : "NO";
    printf("%-8s %-24s %10.4f %8.3f %7.1f%%  %s\n", dlop_dtype_name(r->dtype), r->label, r->ms,
           r->tbps, 100.0 * r->ratio, verdict);
  }
  printf("(bytes counted: each input read once + the output written once; /function rows go "
         "through dlop_function_run, output allocated from the pool on every call)\n");
}

int main(int argc, char **argv) {
  options o;
  dlop_device device = {DLOP_DEVICE_CUDA, 0};
  dlop_stream *stream = NULL;
  char gpu_name[256] = "unknown GPU";
  size_t free_bytes = 0, total_bytes = 0;
  int count = 0, failures = 0, d;

  if (!parse_options(argc, argv, &o)) {
    usage(stderr);
    return 2;
  }
  device.id = o.device_id;
  /* dlop_device_check says what is missing: the driver, a GPU, or this ordinal. */
  if (dlop_device_check(device) != DLOP_OK) {
    const char *why = dlop_last_error();
    dlop_cuda_device_count(&count);
    printf("SKIP: cuda:%d is not usable (%d CUDA device(s) found): %s\n", o.device_id, count,
           why[0] ? why : "no reason given");
    return 0;
  }
  if (cuda_timer_init(o.device_id, error, sizeof(error)) != 0) {
    printf("SKIP: %s\n", error);
    return 0;
  }
  if (dlop_load_default_plugins() != DLOP_OK) {
    fprintf(stderr, "dlop-bench-gpu: loading plugins: %s\n", dlop_last_error());
    return 1;
  }
  if (dlop_stream_create(device, &stream) != DLOP_OK) {
    fprintf(stderr, "dlop-bench-gpu: creating a stream on cuda:%d: %s\n", o.device_id,
            dlop_last_error());
    return 1;
  }
  dlop_device_description(device, gpu_name, sizeof(gpu_name));
  if (cuda_memory_info(&free_bytes, &total_bytes, error, sizeof(error)) == 0)
    printf("# dlop-bench-gpu: libdlop %s on cuda:%d '%s', %.1f of %.1f GiB free\n",
           dlop_version_string(), o.device_id, gpu_name, free_bytes / 1073741824.0,
           total_bytes / 1073741824.0);
  for (d = 0; d < o.num_dtypes; d++) failures += bench_dtype(&o, device, stream, o.dtypes[d]);
  failures += bench_overhead(&o, device, stream);
  print_table(&o, gpu_name);
  dlop_stream_destroy(stream);
  cuda_timer_shutdown();
  if (failures > 0) fprintf(stderr, "dlop-bench-gpu: %d failure(s)\n", failures);
  return failures > 0 ? 1 : 0;
}
