/* kit_consumer.c — a host program built against the INSTALLED SDK with nothing but
 * `pkg-config --cflags --libs dlop` (tests/kit/run_kit_test.sh): it loads the plugin template
 * given on the command line, runs scale_add through a graph on the CPU (and on CUDA when a GPU
 * is usable) and checks every element against plain C. Exit 0 pass, 1 fail, 77 never. */
#include <dlop.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 3, COLS = 5 };

static int fail(const char *what) {
  fprintf(stderr, "kit_consumer: %s failed: %s\n", what, dlop_last_error());
  return 1;
}

/* z = scale_add(x, y; alpha) with x (ROWS, COLS) and y (COLS,) broadcast along the rows;
 * has_alpha 0 leaves alpha to its declared default (1.0). Writes z into result (as double). */
static int run_scale_add(dlop_device device, dlop_dtype dtype, int has_alpha, double alpha,
                         const double *x, const double *y, double *result) {
  int64_t x_shape[2] = {ROWS, COLS}, y_shape[1] = {COLS};
  dlop_named_param param = {"alpha", {.kind = DLOP_PARAM_FLOAT, .count = 1, .u.f = alpha}};
  dlop_graph *graph = NULL;
  dlop_function *function = NULL;
  dlop_var *inputs[2], *z;
  dlop_array *arrays[2] = {NULL, NULL}, *out = NULL;
  float x32[ROWS * COLS], y32[COLS], z32[ROWS * COLS];
  double z64[ROWS * COLS];
  int failed = 0, i;
  for (i = 0; i < ROWS * COLS; i++) x32[i] = (float)x[i];
  for (i = 0; i < COLS; i++) y32[i] = (float)y[i];
  if (dlop_graph_create(&graph) != DLOP_OK) return fail("dlop_graph_create");
  if (dlop_graph_input(graph, "x", dtype, 2, x_shape, &inputs[0]) != DLOP_OK ||
      dlop_graph_input(graph, "y", dtype, 1, y_shape, &inputs[1]) != DLOP_OK)
    failed = fail("dlop_graph_input");
  if (!failed && dlop_graph_apply(graph, "scale_add", inputs, 2, has_alpha ? &param : NULL,
                                  has_alpha ? 1 : 0, &z, 1) != DLOP_OK)
    failed = fail("dlop_graph_apply(scale_add)");
  if (!failed && (dlop_var_type(z)->ndim != 2 || dlop_var_type(z)->shape[0] != ROWS ||
                  dlop_var_type(z)->shape[1] != COLS)) {
    fprintf(stderr, "kit_consumer: scale_add's output has rank %d, expected (%d, %d)\n",
            (int)dlop_var_type(z)->ndim, ROWS, COLS);
    failed = 1;
  }
  if (!failed && dlop_function_compile(graph, inputs, 2, &z, 1, device, &function) != DLOP_OK)
    failed = fail("dlop_function_compile");
  if (!failed &&
      (dlop_array_from_host(device, dtype, 2, x_shape, dtype == DLOP_FLOAT32 ? (void *)x32 : (void *)x,
                            &arrays[0]) != DLOP_OK ||
       dlop_array_from_host(device, dtype, 1, y_shape, dtype == DLOP_FLOAT32 ? (void *)y32 : (void *)y,
                            &arrays[1]) != DLOP_OK))
    failed = fail("dlop_array_from_host");
  if (!failed && dlop_function_run(function, arrays, 2, &out, 1, NULL) != DLOP_OK)
    failed = fail("dlop_function_run");
  if (!failed && dlop_array_to_host(out, dtype == DLOP_FLOAT32 ? (void *)z32 : (void *)z64,
                                    (size_t)(ROWS * COLS) * dlop_dtype_size(dtype)) != DLOP_OK)
    failed = fail("dlop_array_to_host");
  for (i = 0; !failed && i < ROWS * COLS; i++) result[i] = dtype == DLOP_FLOAT32 ? z32[i] : z64[i];
  if (out) dlop_array_release(out);
  for (i = 0; i < 2; i++)
    if (arrays[i]) dlop_array_release(arrays[i]);
  dlop_function_destroy(function);
  dlop_graph_destroy(graph);
  return failed;
}

/* Compares against alpha * x + y computed here in the dtype (two roundings, as the op promises). */
static int check(const char *label, dlop_dtype dtype, double alpha, const double *x,
                 const double *y, const double *z) {
  int i, mismatches = 0;
  for (i = 0; i < ROWS * COLS; i++) {
    double expected = dtype == DLOP_FLOAT32
                          ? (double)((float)((float)alpha * (float)x[i]) + (float)y[i % COLS])
                          : alpha * x[i] + y[i % COLS];
    if (z[i] != expected && mismatches++ < 5)
      fprintf(stderr, "kit_consumer: %s: z[%d][%d] = %.17g, expected %.17g\n", label, i / COLS,
              i % COLS, z[i], expected);
  }
  if (mismatches) return 1;
  printf("%s: %d elements match alpha * x + y (alpha %g)\n", label, ROWS * COLS, alpha);
  return 0;
}

int main(int argc, char **argv) {
  double x[ROWS * COLS], y[COLS], z[ROWS * COLS], z_cpu[ROWS * COLS];
  dlop_device cpu = {DLOP_DEVICE_CPU, 0}, cuda = {DLOP_DEVICE_CUDA, 0};
  const dlop_plugin *plugin;
  const char *require_gpu = getenv("DLOP_REQUIRE_GPU");
  int failed = 0, i;
  if (argc != 2) {
    fprintf(stderr, "usage: kit_consumer PLUGIN.so (the built plugin template)\n");
    return 1;
  }
  printf("libdlop %s (plugin ABI %u.%u)\n", dlop_version_string(),
         DLOP_ABI_VERSION_MAJOR_OF(dlop_abi_version()), DLOP_ABI_VERSION_MINOR_OF(dlop_abi_version()));
  if (dlop_load_plugin(argv[1], &plugin) != DLOP_OK) return fail("dlop_load_plugin");
  printf("loaded %s %s from %s\n", dlop_plugin_name(plugin), dlop_plugin_version(plugin),
         dlop_plugin_path(plugin));
  for (i = 0; i < ROWS * COLS; i++) x[i] = 0.1 * i - 0.7;
  for (i = 0; i < COLS; i++) y[i] = 1.0 / (i + 3);
  failed |= run_scale_add(cpu, DLOP_FLOAT64, 1, 2.5, x, y, z_cpu) ||
            check("cpu float64", DLOP_FLOAT64, 2.5, x, y, z_cpu);
  failed |= run_scale_add(cpu, DLOP_FLOAT32, 0, 0.0, x, y, z) ||
            check("cpu float32 (default alpha)", DLOP_FLOAT32, 1.0, x, y, z);
  if (dlop_device_check(cuda) != DLOP_OK) {
    if (require_gpu && strcmp(require_gpu, "1") == 0) {
      fprintf(stderr, "kit_consumer: DLOP_REQUIRE_GPU=1 but CUDA is not usable: %s\n", dlop_last_error());
      return 1;
    }
    printf("cuda: skipped, no usable GPU (%s)\n", dlop_last_error());
  } else {
    failed |= run_scale_add(cuda, DLOP_FLOAT64, 1, 2.5, x, y, z) ||
              check("cuda float64", DLOP_FLOAT64, 2.5, x, y, z);
    failed |= run_scale_add(cuda, DLOP_FLOAT32, 0, 0.0, x, y, z) ||
              check("cuda float32 (default alpha)", DLOP_FLOAT32, 1.0, x, y, z);
  }
  printf(failed ? "kit_consumer: FAILED\n" : "kit_consumer: ok\n");
  return failed ? 1 : 0;
}
