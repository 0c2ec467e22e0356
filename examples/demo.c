/* demo.c — dlop's main job, end to end: load the bundled plugins, list them, build one graph
 * with the C API (Theano's PyCUDADoubleOp and multiply_them examples, exp, broadcasting),
 * compile it for the CPU and, when a GPU is usable, for CUDA — in float32 and float64 —, run
 * it, show where each node ran, and check every result against plain C. Exit 1 on any error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlop.h"

enum { PAIRS = 100, ROWS = 4, COLS = 5, BROADCAST_ROWS = 3, BROADCAST_COLS = 4 };

/* The graph's inputs in host memory (as double; converted to the run's dtype). */
typedef struct demo_data {
  double x[ROWS * COLS];                              /* PyCUDADoubleOp: a 4x5 matrix of ones */
  double a[PAIRS], b[PAIRS];                          /* multiply_them: 100 random pairs */
  double column[BROADCAST_ROWS], row[BROADCAST_COLS]; /* (3,1) * (1,4) -> (3,4) */
} demo_data;

enum { NUM_INPUTS = 5, NUM_OUTPUTS = 4 };
static const char *const output_names[NUM_OUTPUTS] = {
    "double(x)", "exp(double(x))", "multiply_them(a, b)", "multiply_them(column, row)"};

static int report_failure(const char *what) {
  fprintf(stderr, "dlop-demo: %s failed: %s\n", what, dlop_last_error());
  return 1;
}

/* "float16 float32 ..." for a dtype mask ("none" when empty). */
static const char *dtype_list(uint32_t mask, char *buffer, size_t size) {
  size_t used = 0;
  buffer[0] = '\0';
  for (int d = 0; d < DLOP_DTYPE_COUNT; d++)
    if ((mask & DLOP_DTYPE_BIT(d)) && used < size)
      used += (size_t)snprintf(buffer + used, size - used, "%s%s", used ? " " : "",
                               dlop_dtype_name((dlop_dtype)d));
  if (used == 0) snprintf(buffer, size, "none");
  return buffer;
}

static void print_plugins(void) {
  printf("Loaded plugins (%d):\n", dlop_plugin_count());
  for (int p = 0; p < dlop_plugin_count(); p++) {
    const dlop_plugin *plugin = dlop_plugin_at(p);
    printf("  %s %s  (%s)\n", dlop_plugin_name(plugin), dlop_plugin_version(plugin),
           dlop_plugin_path(plugin));
    for (int o = 0; o < dlop_plugin_op_count(plugin); o++) {
      const dlop_op_desc *op = dlop_plugin_op(plugin, o);
      const char *doc = op->doc ? op->doc : "";
      const char *period = strstr(doc, ". ");
      int doc_length = period ? (int)(period - doc) + 1 : (int)strlen(doc);
      char cpu[160], gpu[160];
      printf("    op %s: %.*s\n", op->name, doc_length, doc);
      printf("       cpu: %s\n       cuda: %s\n",
             dtype_list(dlop_op_dtypes(op, DLOP_DEVICE_CPU), cpu, sizeof cpu),
             dtype_list(dlop_op_dtypes(op, DLOP_DEVICE_CUDA), gpu, sizeof gpu));
    }
  }
  for (int e = 0; e < dlop_load_error_count(); e++)
    printf("  (not loaded) %s\n", dlop_load_error_at(e));
}

/* x (4x5), a and b (100), column (3x1) and row (1x4) -> double(x), exp(double(x)), a*b, column*row
 */
static int build_graph(dlop_graph *graph, dlop_dtype dtype, dlop_var **inputs, dlop_var **outputs) {
  const int64_t x_shape[2] = {ROWS, COLS}, pairs = PAIRS;
  const int64_t column_shape[2] = {BROADCAST_ROWS, 1}, row_shape[2] = {1, BROADCAST_COLS};
  dlop_var *pair[2], *outer[2];
  if (dlop_graph_input(graph, "x", dtype, 2, x_shape, &inputs[0]) != DLOP_OK ||
      dlop_graph_input(graph, "a", dtype, 1, &pairs, &inputs[1]) != DLOP_OK ||
      dlop_graph_input(graph, "b", dtype, 1, &pairs, &inputs[2]) != DLOP_OK ||
      dlop_graph_input(graph, "column", dtype, 2, column_shape, &inputs[3]) != DLOP_OK ||
      dlop_graph_input(graph, "row", dtype, 2, row_shape, &inputs[4]) != DLOP_OK)
    return report_failure("dlop_graph_input");
  if (dlop_graph_apply(graph, "double", &inputs[0], 1, NULL, 0, &outputs[0], 1) != DLOP_OK)
    return report_failure("applying double");
  if (dlop_graph_apply(graph, "exp", &outputs[0], 1, NULL, 0, &outputs[1], 1) != DLOP_OK)
    return report_failure("applying exp");
  pair[0] = inputs[1];
  pair[1] = inputs[2];
  if (dlop_graph_apply(graph, "multiply_them", pair, 2, NULL, 0, &outputs[2], 1) != DLOP_OK)
    return report_failure("applying multiply_them");
  outer[0] = inputs[3];
  outer[1] = inputs[4];
  if (dlop_graph_apply(graph, "multiply_them", outer, 2, NULL, 0, &outputs[3], 1) != DLOP_OK)
    return report_failure("applying multiply_them (broadcasting)");
  return 0;
}

static void store(void *data, dlop_dtype dtype, int64_t i, double value) {
  if (dtype == DLOP_FLOAT32)
    ((float *)data)[i] = (float)value;
  else
    ((double *)data)[i] = value;
}

static double load(const void *data, dlop_dtype dtype, int64_t i) {
  return dtype == DLOP_FLOAT32 ? (double)((const float *)data)[i] : ((const double *)data)[i];
}

/* One input array on device, converted from the demo's doubles to dtype. */
static int make_input(dlop_device device, dlop_dtype dtype, const dlop_var *var,
                      const double *values, dlop_array **array) {
  const dlop_type *type = dlop_var_type(var);
  int64_t n = 1;
  for (int d = 0; d < type->ndim; d++) n *= type->shape[d];
  void *host = malloc((size_t)n * dlop_dtype_size(dtype));
  if (host == NULL) return 1;
  for (int64_t i = 0; i < n; i++) store(host, dtype, i, values[i]);
  int status = dlop_array_from_host(device, dtype, type->ndim, type->shape, host, array);
  free(host);
  return status == DLOP_OK ? 0 : report_failure("dlop_array_from_host");
}

/* The expected value of output k at flat index i, computed here in double precision. Inputs
 * are first rounded to dtype, as the run sees them. */
static double reference(const demo_data *data, dlop_dtype dtype, int k, int64_t i) {
#define AS(v) (dtype == DLOP_FLOAT32 ? (double)(float)(v) : (v))
  switch (k) {
    case 0: return 2.0 * AS(data->x[i]);
    case 1: return exp(2.0 * AS(data->x[i]));
    case 2: return AS(data->a[i]) * AS(data->b[i]);
    default: return AS(data->column[i / BROADCAST_COLS]) * AS(data->row[i % BROADCAST_COLS]);
  }
#undef AS
}

/* Compare every element of every output; print a few values and OK / MISMATCH. */
static int check_outputs(const demo_data *data, dlop_dtype dtype, dlop_array **outputs,
                         const char *where) {
  double tolerance = dtype == DLOP_FLOAT32 ? 1e-6 : 1e-14;
  int mismatches = 0;
  for (int k = 0; k < NUM_OUTPUTS; k++) {
    int64_t n = dlop_array_numel(outputs[k]);
    void *host = malloc((size_t)n * dlop_dtype_size(dtype) + 1);
    if (host == NULL ||
        dlop_array_to_host(outputs[k], host, (size_t)n * dlop_dtype_size(dtype)) != DLOP_OK) {
      free(host);
      return report_failure("dlop_array_to_host");
    }
    int64_t bad = 0, first_bad = -1;
    for (int64_t i = 0; i < n; i++) {
      double expected = reference(data, dtype, k, i), actual = load(host, dtype, i);
      if (!(fabs(actual - expected) <= tolerance * (1.0 + fabs(expected)))) {
        if (first_bad < 0) first_bad = i;
        bad++;
      }
    }
    printf("    %-27s = [%.6g, %.6g, %.6g, ...] (%lld values)  %s", output_names[k],
           load(host, dtype, 0), load(host, dtype, 1), load(host, dtype, 2), (long long)n,
           bad ? "MISMATCH" : "OK");
    if (bad)
      printf(": %lld differ, first [%lld] expected %.9g got %.9g", (long long)bad,
             (long long)first_bad, reference(data, dtype, k, first_bad),
             load(host, dtype, first_bad));
    printf("\n");
    if (bad) mismatches++;
    free(host);
  }
  if (mismatches) fprintf(stderr, "dlop-demo: %d output(s) wrong on %s\n", mismatches, where);
  return mismatches ? 1 : 0;
}

static void print_indented(const char *title, const char *text) {
  printf("%s\n", title);
  while (*text) {
    const char *end = strchr(text, '\n');
    int length = end ? (int)(end - text) : (int)strlen(text);
    printf("    %.*s\n", length, text);
    text += length + (end ? 1 : 0);
  }
}

/* Build, compile for device, run, explain and check: the whole story for one dtype. */
static int run_on(const demo_data *data, dlop_dtype dtype, dlop_device device) {
  char where[32], listing[2048];
  dlop_graph *graph = NULL;
  dlop_function *function = NULL;
  dlop_var *inputs[NUM_INPUTS], *outputs[NUM_OUTPUTS];
  dlop_array *arrays[NUM_INPUTS] = {0}, *results[NUM_OUTPUTS] = {0};
  const double *values[NUM_INPUTS] = {data->x, data->a, data->b, data->column, data->row};
  int failed = 0;
  dlop_device_format(device, where, sizeof where);
  printf("\n== %s on %s ==\n", dlop_dtype_name(dtype), where);
  if (dlop_graph_create(&graph) != DLOP_OK) return report_failure("dlop_graph_create");
  failed = build_graph(graph, dtype, inputs, outputs);
  if (!failed && dlop_function_compile(graph, inputs, NUM_INPUTS, outputs, NUM_OUTPUTS, device,
                                       &function) != DLOP_OK)
    failed = report_failure("dlop_function_compile");
  for (int i = 0; !failed && i < NUM_INPUTS; i++)
    failed = make_input(device, dtype, inputs[i], values[i], &arrays[i]);
  if (!failed) {
    printf("  inputs: x = 4x5 ones, a[0..2] = [%.4f, %.4f, %.4f], b[0..2] = [%.4f, %.4f, %.4f]\n",
           data->a[0], data->a[1], data->a[2], data->b[0], data->b[1], data->b[2]);
    if (dlop_function_run(function, arrays, NUM_INPUTS, results, NUM_OUTPUTS, NULL) != DLOP_OK)
      failed = report_failure("dlop_function_run");
  }
  if (!failed) {
    if (dlop_function_explain(function, listing, sizeof listing) != DLOP_OK)
      failed = report_failure("dlop_function_explain");
    else
      print_indented("  explain():", listing);
  }
  if (!failed) {
    printf("  results:\n");
    failed = check_outputs(data, dtype, results, where);
  }
  for (int k = 0; k < NUM_OUTPUTS; k++) dlop_array_release(results[k]);
  for (int i = 0; i < NUM_INPUTS; i++) dlop_array_release(arrays[i]);
  dlop_function_destroy(function);
  dlop_graph_destroy(graph);
  return failed;
}

static void fill_data(demo_data *data) {
  uint64_t state = 20240601u;
  for (int i = 0; i < ROWS * COLS; i++) data->x[i] = 1.0;
  for (int i = 0; i < PAIRS; i++) {
    /* a small LCG: reproducible "random" pairs in [-1, 1), like numpy.random.randn-ish data */
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    data->a[i] = (double)(state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    data->b[i] = (double)(state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
  }
  for (int i = 0; i < BROADCAST_ROWS; i++) data->column[i] = 1.0 + i;
  for (int j = 0; j < BROADCAST_COLS; j++) data->row[j] = 0.5 * (j + 1);
}

int main(void) {
  static const dlop_dtype dtypes[] = {DLOP_FLOAT32, DLOP_FLOAT64};
  dlop_device cpu = {DLOP_DEVICE_CPU, 0}, cuda = {DLOP_DEVICE_CUDA, 0};
  demo_data data;
  int failures = 0;
  printf("dlop %s (ABI %u.%u)\n", dlop_version_string(), dlop_abi_version() >> 16,
         dlop_abi_version() & 0xffffu);
  if (dlop_load_default_plugins() != DLOP_OK) return report_failure("loading the plugins");
  print_plugins();
  if (dlop_find_op("double") == NULL || dlop_find_op("multiply_them") == NULL ||
      dlop_find_op("exp") == NULL) {
    fprintf(stderr, "dlop-demo: the bundled plugins double, multiply_them and exp are needed\n");
    return 1;
  }
  fill_data(&data);
  for (size_t t = 0; t < sizeof dtypes / sizeof dtypes[0]; t++)
    failures += run_on(&data, dtypes[t], cpu);
  if (dlop_device_check(cuda) != DLOP_OK) {
    /* Theano would have run these on the CPU instead; we say so and run nothing in their place */
    printf("\nCUDA: skipped — %s\n", dlop_last_error());
  } else {
    char name[256] = "";
    dlop_device_description(cuda, name, sizeof name);
    printf("\nCUDA device 0: %s\n", name);
    /* float64 too: Theano's floatX problem, where float64 silently stayed on the CPU */
    for (size_t t = 0; t < sizeof dtypes / sizeof dtypes[0]; t++)
      failures += run_on(&data, dtypes[t], cuda);
  }
  printf("\n%s\n", failures ? "dlop-demo: FAILED" : "dlop-demo: all results OK");
  return failures ? 1 : 0;
}
