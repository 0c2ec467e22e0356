/* check_main.c — dlop-check's entry point: reads the options, loads the plugin (in this process
 * only: CUDA is first touched in the forked test processes), builds one Suite per op with a TCase
 * per (device, dtype), runs them in a process per check (--isolation check) or one process per
 * op (--isolation op; both in check_isolate.c) and exits 0 only when everything passed. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dlop/kit/kernel_error.h>

#include "check_elementwise.h"
#include "check_suite.h"
#include "plugin_probe.h"

check_options check_opts;
const dlop_plugin *check_plugin;
char check_load_error[2048];

#define CHECK_MAX_CASES 1024
static check_case cases[CHECK_MAX_CASES];
static int case_count;

const check_case *check_case_at(int index) {
  return index >= 0 && index < case_count ? &cases[index] : NULL;
}

static int add_case(const dlop_op_desc *op, dlop_device device, int dtype) {
  if (case_count == CHECK_MAX_CASES) {
    fprintf(stderr, "dlop check: error: more than %d (op, device, dtype) cases\n", CHECK_MAX_CASES);
    exit(2);
  }
  cases[case_count].op = op;
  cases[case_count].device = device;
  cases[case_count].dtype = dtype;
  return case_count++;
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: dlop check PLUGIN.so [--device cpu|cuda|all] [--op NAME] [--dtype D] [--seed N]\n"
          "                  [--param NAME=VALUE]... [--isolation check|op]\n"
          "       dlop check --elementwise DEFINITION [options as above]\n"
          "  Certifies a plugin file against the dlop ABI contract (docs/compliance.md).\n"
          "  --elementwise  instead of a file, define an op from source in this process (what\n"
          "            dlop.check writes for a dlop.elementwise op) and certify its plugin\n"
          "  --device  devices to check (default all: CUDA checks are skipped with a note when\n"
          "            no GPU is usable; --device cuda then exits 77, or 1 with DLOP_REQUIRE_GPU=1)\n"
          "  --op      check only this op\n"
          "  --dtype   check only this dtype (float32, int64, ...)\n"
          "  --seed    seed of the random inputs (default 1)\n"
          "  --param   check with this parameter value instead of its default (repeatable;\n"
          "            ints as 0,2; bools as true/false); applies to every op declaring NAME\n"
          "  --isolation  check: every check in its own process (Check's fork mode); op: one\n"
          "            process per op running its checks one after another, a new one after a\n"
          "            crash, timeout or failure (which still fail naming the check). Default:\n"
          "            op when CUDA checks run (each process pays CUDA's initialization and the\n"
          "            module load), else check\n");
}

static int parse_dtype(const char *text) {
  for (int d = 0; d < DLOP_DTYPE_COUNT; d++)
    if (strcmp(text, dlop_dtype_name((dlop_dtype)d)) == 0) return d;
  return -2;
}

/* DLOP_CHECK_LARGE_ELEMENTS: a smaller large shape for builds whose every element costs several
 * times more (the sanitizer tree runs 131075: three quarters of the suite's time there went into
 * filling and comparing the buffers of the 2^20 + 3 one). Returns 0, or 2 after saying what
 * was wrong. The report's first line names the size whenever it is not the default. */
static int read_large_elements(void) {
  check_opts.large_elements = CHECK_LARGE_ELEMENTS;
  const char *text = getenv("DLOP_CHECK_LARGE_ELEMENTS");
  if (text == NULL || text[0] == '\0') return 0;
  char *end = NULL;
  long long value = strtoll(text, &end, 10);
  if (end == text || *end != '\0' || value < CHECK_LARGE_ELEMENTS_MIN || value > CHECK_LARGE_ELEMENTS) {
    fprintf(stderr, "dlop check: error: DLOP_CHECK_LARGE_ELEMENTS takes a number of elements from "
            "%d to %d (the default) for the large run shape (got '%s')\n",
            CHECK_LARGE_ELEMENTS_MIN, CHECK_LARGE_ELEMENTS, text);
    return 2;
  }
  check_opts.large_elements = value;
  return 0;
}

/* Returns 0, or the exit status of a usage error. */
static int parse_options(int argc, char **argv) {
  check_opts.want_cpu = check_opts.want_cuda = 1;
  check_opts.dtype_filter = -1;
  check_opts.seed = 1;
  check_opts.isolation = -1;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      usage(stdout);
      exit(0);
    }
    if (arg[0] == '-' && arg[1] == '-' && value == NULL) {
      fprintf(stderr, "dlop check: error: %s needs a value\n", arg);
      return 2;
    }
    if (strcmp(arg, "--device") == 0) {
      check_opts.want_cpu = strcmp(value, "cpu") == 0 || strcmp(value, "all") == 0;
      check_opts.want_cuda = strcmp(value, "cuda") == 0 || strcmp(value, "all") == 0;
      if (!check_opts.want_cpu && !check_opts.want_cuda) {
        fprintf(stderr, "dlop check: error: --device takes cpu, cuda or all (got '%s')\n", value);
        return 2;
      }
      i++;
    } else if (strcmp(arg, "--elementwise") == 0) {
      check_opts.elementwise_path = value;
      i++;
    } else if (strcmp(arg, "--op") == 0) {
      check_opts.op_filter = value;
      i++;
    } else if (strcmp(arg, "--dtype") == 0) {
      check_opts.dtype_filter = parse_dtype(value);
      if (check_opts.dtype_filter < 0) {
        fprintf(stderr, "dlop check: error: unknown dtype '%s' (expected bool, int8, int16, "
                        "int32, int64, uint8, float16, bfloat16, float32 or float64)\n", value);
        return 2;
      }
      i++;
    } else if (strcmp(arg, "--seed") == 0) {
      char *end = NULL;
      check_opts.seed = strtoull(value, &end, 10);
      if (end == value || *end != '\0') {
        fprintf(stderr, "dlop check: error: --seed takes a non-negative integer (got '%s')\n", value);
        return 2;
      }
      i++;
    } else if (strcmp(arg, "--isolation") == 0) {
      if (strcmp(value, "check") == 0) {
        check_opts.isolation = CHECK_ISOLATE_CHECK;
      } else if (strcmp(value, "op") == 0) {
        check_opts.isolation = CHECK_ISOLATE_OP;
      } else {
        fprintf(stderr, "dlop check: error: --isolation takes check or op (got '%s')\n", value);
        return 2;
      }
      i++;
    } else if (strcmp(arg, "--param") == 0) {
      const char *equals = strchr(value, '=');
      if (equals == NULL || equals == value) {
        fprintf(stderr, "dlop check: error: --param takes NAME=VALUE (got '%s')\n", value);
        return 2;
      }
      if (check_opts.num_params == 32) {
        fprintf(stderr, "dlop check: error: at most 32 --param options\n");
        return 2;
      }
      check_opts.param_names[check_opts.num_params] = strndup(value, (size_t)(equals - value));
      check_opts.param_values[check_opts.num_params] = equals + 1;
      check_opts.num_params++;
      i++;
    } else if (arg[0] == '-') {
      fprintf(stderr, "dlop check: error: unknown option '%s'\n", arg);
      usage(stderr);
      return 2;
    } else if (check_opts.plugin_path == NULL) {
      check_opts.plugin_path = arg;
    } else {
      fprintf(stderr, "dlop check: error: one plugin file at a time (got '%s' and '%s')\n",
              check_opts.plugin_path, arg);
      return 2;
    }
  }
  if (check_opts.plugin_path != NULL && check_opts.elementwise_path != NULL) {
    fprintf(stderr, "dlop check: error: a plugin file or --elementwise, not both (got '%s' and "
            "--elementwise '%s')\n", check_opts.plugin_path, check_opts.elementwise_path);
    return 2;
  }
  if (check_opts.plugin_path == NULL && check_opts.elementwise_path == NULL) {
    fprintf(stderr, "dlop check: error: which plugin file? (got none)\n");
    usage(stderr);
    return 2;
  }
  return read_large_elements();
}

/* Every --param must name a parameter of a checked op and parse as its kind: a typo would
 * otherwise check the defaults while the author believes otherwise. */
static int check_params_given(void) {
  for (int k = 0; k < check_opts.num_params; k++) {
    int declared = 0;
    for (int i = 0; i < dlop_plugin_op_count(check_plugin); i++) {
      const dlop_op_desc *op = dlop_plugin_op(check_plugin, i);
      if (check_opts.op_filter && strcmp(check_opts.op_filter, op->name) != 0) continue;
      for (int32_t p = 0; p < op->num_params; p++) {
        if (strcmp(op->params[p].name, check_opts.param_names[k]) != 0) continue;
        dlop_param_value value;
        int64_t ints[16];
        char error[512];
        if (check_parse_param(&op->params[p], check_opts.param_values[k], &value, ints, 16,
                              error, sizeof error) != DLOP_OK) {
          fprintf(stderr, "dlop check: error: --param for op %s: %s\n", op->name, error);
          return 2;
        }
        declared = 1;
      }
    }
    if (!declared) {
      fprintf(stderr, "dlop check: error: --param %s: no checked op of %s declares a parameter "
              "named '%s'", check_opts.param_names[k], check_opts.plugin_path,
              check_opts.param_names[k]);
      for (int i = 0; i < dlop_plugin_op_count(check_plugin); i++) {
        const dlop_op_desc *op = dlop_plugin_op(check_plugin, i);
        fprintf(stderr, "%s op %s:", i ? ";" : " (", op->name);
        for (int32_t p = 0; p < op->num_params; p++) fprintf(stderr, " %s", op->params[p].name);
        if (op->num_params == 0) fprintf(stderr, " no parameters");
      }
      fprintf(stderr, "%s\n", dlop_plugin_op_count(check_plugin) ? ")" : "");
      return 2;
    }
  }
  return 0;
}

/* Suites for one op: op-level tests, then a TCase per (device, dtype). */
/* Check keeps the suite and test-case name pointers until srunner_free: copies live here and are
 * freed after it, so the suite itself leaks nothing (it runs under valgrind in ctest). */
#define CHECK_MAX_NAMES 1024
static char *check_names[CHECK_MAX_NAMES];
static int check_name_count;

static const char *kept_name(const char *name) {
  if (check_name_count == CHECK_MAX_NAMES) return "(too many test cases)";
  char *copy = strdup(name);
  if (copy == NULL) return "(out of memory)";
  check_names[check_name_count++] = copy;
  return copy;
}

static void free_names(void) {
  while (check_name_count > 0) free(check_names[--check_name_count]);
}

static Suite *op_suite(const dlop_op_desc *op, int cuda_usable) {
  char name[256];
  snprintf(name, sizeof name, "op %s", op->name);
  const char *suite_name = kept_name(name);
  Suite *suite = suite_create(suite_name);
  dlop_device cpu = {DLOP_DEVICE_CPU, 0}, cuda = {DLOP_DEVICE_CUDA, 0};
  TCase *tc = check_tcase(suite, suite_name, "op", 60);
  char why[512];
  if (!check_op_within_limits(op, why, sizeof why)) {
    check_add_limits_test(tc, add_case(op, cpu, -1));
    return suite;
  }
  check_add_op_tests(tc, add_case(op, cpu, -1));
  for (int device = 0; device < 2; device++) {
    int want = device == 0 ? check_opts.want_cpu : check_opts.want_cuda && cuda_usable;
    if (!want) continue;
    uint32_t mask = dlop_op_dtypes(op, device == 0 ? DLOP_DEVICE_CPU : DLOP_DEVICE_CUDA);
    for (int dtype = 0; dtype < DLOP_DTYPE_COUNT; dtype++) {
      if (!(mask & DLOP_DTYPE_BIT(dtype))) continue;
      if (check_opts.dtype_filter >= 0 && dtype != check_opts.dtype_filter) continue;
      snprintf(name, sizeof name, "%s %s", device == 0 ? "cpu" : "cuda:0",
               dlop_dtype_name((dlop_dtype)dtype));
      tc = check_tcase(suite, suite_name, kept_name(name), 120);
      int index = add_case(op, device == 0 ? cpu : cuda, dtype);
      check_add_node_tests(tc, index);
      if (check_is_view_op(op)) {
        check_add_view_tests(tc, index); /* no thunk: make_view's checks instead */
      } else {
        check_add_run_tests(tc, index);
        check_add_values_tests(tc, index);
        if (op->scalar_body != NULL) check_add_body_tests(tc, index);
        if (device == 1) check_add_cuda_tests(tc, index);
      }
    }
  }
  return suite;
}

/* dlop-check holds the runtime itself (dlop_internal), which looks for the dlop-probe program
 * beside the file holding it: here, beside dlop-check. The probe lies in <libdir>/dlop instead,
 * at one of these paths from dlop-check's directory (the install tree's, the build tree's:
 * sdk/check/CMakeLists.txt), so dlop-check says which. Where neither exists the runtime's
 * guess stays and its message says where it looked. */
static void find_probe_program(void) {
  static const char *const relative[] = {DLOP_CHECK_PROBE_INSTALLED, DLOP_CHECK_PROBE_BUILT};
  char self[PATH_MAX], path[PATH_MAX + 256];
  ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
  if (length <= 0) return;
  self[length] = '\0';
  char *slash = strrchr(self, '/');
  if (slash == NULL) return;
  *slash = '\0';
  for (size_t k = 0; k < sizeof relative / sizeof relative[0]; k++) {
    snprintf(path, sizeof path, "%s/%s", self, relative[k]);
    if (access(path, X_OK) == 0) {
      dlop__probe_set_program(path);
      return;
    }
  }
}

int main(int argc, char **argv) {
  int status = parse_options(argc, argv);
  if (status != 0) return status;
  find_probe_program();

  if (check_opts.elementwise_path != NULL) {
    /* The op is defined here, in this process, before any check process is forked: each
     * inherits the registered in-process plugin. A definition that fails is a usage error. */
    char error[4096];
    if (check_define_elementwise(check_opts.elementwise_path, &check_plugin, error,
                                 sizeof error) != DLOP_OK) {
      fprintf(stderr, "dlop check: error: --elementwise %s: %s\n", check_opts.elementwise_path,
              error);
      return 2;
    }
    check_opts.plugin_path = dlop_plugin_path(check_plugin);
  } else if (dlop_load_plugin(check_opts.plugin_path, &check_plugin) != DLOP_OK) {
    /* Only this file: DLOP_PLUGIN_PATH and the bundled plugins are not loaded. */
    snprintf(check_load_error, sizeof check_load_error, "%s", dlop_last_error());
    check_plugin = NULL;
  }

  if (check_plugin != NULL && (status = check_params_given()) != 0) return status;

  char reason[512] = "";
  int cuda_usable = 0, declares_cuda = 0;
  if (check_plugin != NULL)
    for (int i = 0; i < dlop_plugin_op_count(check_plugin); i++)
      declares_cuda |= dlop_op_dtypes(dlop_plugin_op(check_plugin, i), DLOP_DEVICE_CUDA) != 0;
  if (check_opts.want_cuda && declares_cuda) {
    cuda_usable = check_cuda_probe(reason, sizeof reason);
    if (!cuda_usable) {
      const char *require = getenv("DLOP_REQUIRE_GPU");
      int required = require != NULL && strcmp(require, "1") == 0;
      if (required) {
        fprintf(stderr, "FAIL: DLOP_REQUIRE_GPU=1 but CUDA is not usable: %s\n", reason);
        return 1;
      }
      if (!check_opts.want_cpu) {
        printf("SKIP: CUDA checks need a usable GPU: %s\n", reason);
        return 77;
      }
      printf("note: CUDA checks skipped (no usable GPU: %s); CPU checks only\n", reason);
    }
  } else if (check_opts.want_cuda && !check_opts.want_cpu && check_plugin != NULL) {
    printf("note: no op of this plugin declares CUDA dtypes: nothing to run on CUDA\n");
  }

  printf("dlop check: %s", check_opts.plugin_path);
  if (check_plugin != NULL)
    printf(" (plugin %s %s, ABI %u.%u)", dlop_plugin_name(check_plugin),
           dlop_plugin_version(check_plugin),
           DLOP_ABI_VERSION_MAJOR_OF(dlop_plugin_abi_version(check_plugin)),
           DLOP_ABI_VERSION_MINOR_OF(dlop_plugin_abi_version(check_plugin)));
  printf(", devices: %s%s%s, seed %llu", check_opts.want_cpu ? "cpu" : "",
         check_opts.want_cpu && check_opts.want_cuda && cuda_usable ? "+" : "",
         check_opts.want_cuda && cuda_usable ? "cuda:0" : "",
         (unsigned long long)check_opts.seed);
  if (check_opts.large_elements != CHECK_LARGE_ELEMENTS)
    printf(", large shape %lld elements (DLOP_CHECK_LARGE_ELEMENTS; default %d)",
           (long long)check_opts.large_elements, CHECK_LARGE_ELEMENTS);
  printf("\n");
  fflush(stdout);

  Suite *plugin_suite = suite_create("plugin");
  TCase *loading = check_tcase(plugin_suite, "plugin", "loading", 60);
  check_add_plugin_tests(loading);
  /* The runner owns the suites (srunner_free frees them); the tests run in check_isolate.c. */
  SRunner *runner = srunner_create(plugin_suite);

  int matched = 0;
  if (check_plugin != NULL) {
    for (int i = 0; i < dlop_plugin_op_count(check_plugin); i++) {
      const dlop_op_desc *op = dlop_plugin_op(check_plugin, i);
      if (check_opts.op_filter && strcmp(check_opts.op_filter, op->name) != 0) continue;
      matched++;
      srunner_add_suite(runner, op_suite(op, cuda_usable));
    }
    if (check_opts.op_filter && matched == 0) {
      fprintf(stderr, "dlop check: error: %s has no op named '%s'; its ops:", check_opts.plugin_path,
              check_opts.op_filter);
      for (int i = 0; i < dlop_plugin_op_count(check_plugin); i++)
        fprintf(stderr, " %s", dlop_plugin_op(check_plugin, i)->name);
      fprintf(stderr, "\n");
      srunner_free(runner);
      check_registry_free();
      free_names();
      return 2;
    }
  }

  /* --dtype that no checked op declares on a checked device would pass with the op-level
   * checks alone, while the author believes that dtype was checked. */
  if (check_plugin != NULL && check_opts.dtype_filter >= 0) {
    int declared = 0;
    for (int i = 0; i < dlop_plugin_op_count(check_plugin); i++) {
      const dlop_op_desc *op = dlop_plugin_op(check_plugin, i);
      if (check_opts.op_filter && strcmp(check_opts.op_filter, op->name) != 0) continue;
      uint32_t mask = (check_opts.want_cpu ? dlop_op_dtypes(op, DLOP_DEVICE_CPU) : 0) |
                      (check_opts.want_cuda ? dlop_op_dtypes(op, DLOP_DEVICE_CUDA) : 0);
      declared |= (mask & DLOP_DTYPE_BIT(check_opts.dtype_filter)) != 0;
    }
    if (!declared) {
      fprintf(stderr, "dlop check: error: --dtype %s: no checked op of %s declares it on the "
              "checked device(s) (", dlop_dtype_name((dlop_dtype)check_opts.dtype_filter),
              check_opts.plugin_path);
      for (int i = 0, first = 1; i < dlop_plugin_op_count(check_plugin); i++) {
        const dlop_op_desc *op = dlop_plugin_op(check_plugin, i);
        if (check_opts.op_filter && strcmp(check_opts.op_filter, op->name) != 0) continue;
        char cpu[256], cuda[256];
        dlop_format_dtypes(dlop_op_dtypes(op, DLOP_DEVICE_CPU), cpu, sizeof cpu);
        dlop_format_dtypes(dlop_op_dtypes(op, DLOP_DEVICE_CUDA), cuda, sizeof cuda);
        fprintf(stderr, "%sop %s: cpu {%s}, cuda {%s}", first ? "" : "; ", op->name, cpu, cuda);
        first = 0;
      }
      fprintf(stderr, ")\n");
      srunner_free(runner);
      check_registry_free();
      free_names();
      return 2;
    }
  }

  int isolation = check_opts.isolation;
  if (isolation < 0)
    isolation = check_opts.want_cuda && cuda_usable ? CHECK_ISOLATE_OP : CHECK_ISOLATE_CHECK;
  /* Both modes run in processes of dlop-check's own (check_isolate.c), whatever CK_FORK says:
   * a crashing plugin must fail its test, not the suite, and the report must say where. */
  int failed = check_run_isolated(isolation == CHECK_ISOLATE_OP);
  srunner_free(runner);
  check_registry_free();
  free_names();
  if (failed == 0 && check_opts.want_cuda && declares_cuda && !cuda_usable)
    printf("dlop check: passed on the CPU; CUDA was not checked (%s)\n", reason);
  return failed == 0 ? 0 : 1;
}
