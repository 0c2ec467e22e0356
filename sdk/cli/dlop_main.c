/* dlop_main.c — the `dlop` command: list the loaded plugins and ops, show one op in full or
 * the installation in use (which libdlop, which plugin directories), print versions, load
 * plugin files explicitly (for plugin authors checking their .so), and run the compliance
 * suite on one (`dlop check`, which runs dlop-check).
 * It reads the registry through the public API only, like any other host. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dlop.h"

static void print_usage(FILE *out) {
  fprintf(out,
          "usage: dlop COMMAND [ARGS]\n"
          "\n"
          "commands:\n"
          "  list                 every plugin (name, version, file) and its ops (devices,\n"
          "                       dtypes per device, parameters); load errors go to stderr\n"
          "                       and make the exit status 1 (the rest is listed)\n"
          "  info OP              one op in full: doc, inputs, outputs, parameters, dtypes per\n"
          "                       device, flags, plugin file\n"
          "  info                 the installation in use: the libdlop file, the bundled plugin\n"
          "                       directory, DLOP_PLUGIN_PATH, the plugin probe program\n"
          "  load [--with-default] FILE...\n"
          "                       load plugin files and report each success or failure (with\n"
          "                       --with-default, after DLOP_PLUGIN_PATH and the bundled plugins,\n"
          "                       so op name clashes with them show up)\n"
          "  check PLUGIN.so [--device cpu|cuda|all] [--op NAME] [--dtype D] [--seed N]\n"
          "                       run the compliance suite (dlop-check) on a plugin file\n"
          "  version              SDK and plugin ABI versions\n"
          "  --help               this text\n"
          "\n"
          "environment:\n"
          "  DLOP_PLUGIN_PATH     colon-separated absolute directories (every *.so in them) and\n"
          "                       files, loaded before the bundled plugins\n"
          "  DLOP_BUNDLED_PLUGINS the bundled plugin directory (absolute) instead of the one\n"
          "                       next to libdlop (empty: no bundled plugins)\n");
}

static void print_abi(unsigned abi) {
  printf("%u.%u", DLOP_ABI_VERSION_MAJOR_OF(abi), DLOP_ABI_VERSION_MINOR_OF(abi));
}

static void print_param_value(const dlop_param_value *value) {
  switch (value->kind) {
    case DLOP_PARAM_BOOL: printf("%s", value->u.i ? "true" : "false"); break;
    case DLOP_PARAM_INT: printf("%lld", (long long)value->u.i); break;
    case DLOP_PARAM_FLOAT: printf("%g", value->u.f); break;
    case DLOP_PARAM_STRING: printf("\"%s\"", value->u.s ? value->u.s : ""); break;
    case DLOP_PARAM_INTS:
      printf("[");
      for (int32_t i = 0; i < value->count; i++)
        printf("%s%lld", i ? ", " : "", (long long)value->u.ints[i]);
      printf("]");
      break;
    default: printf("?"); break;
  }
}

static void print_dtypes(uint32_t mask) {
  if (mask == 0) {
    printf(" (not supported)");
    return;
  }
  for (int dtype = 0; dtype < DLOP_DTYPE_COUNT; dtype++)
    if (mask & DLOP_DTYPE_BIT(dtype)) printf(" %s", dlop_dtype_name((dlop_dtype)dtype));
}

static void print_devices(const dlop_op_desc *op, const char *indent) {
  printf("%scpu: ", indent);
  print_dtypes(dlop_op_dtypes(op, DLOP_DEVICE_CPU));
  printf("\n%scuda:", indent);
  print_dtypes(dlop_op_dtypes(op, DLOP_DEVICE_CUDA));
  printf("\n");
}

static void print_inputs(const dlop_op_desc *op) {
  if (op->num_inputs == DLOP_VARIADIC) printf("any number of inputs");
  else printf("%d input%s", (int)op->num_inputs, op->num_inputs == 1 ? "" : "s");
  printf(" -> %d output%s", (int)op->num_outputs, op->num_outputs == 1 ? "" : "s");
}

static int load_default_plugins(void) {
  /* Each load error is printed once, by print_load_errors, not also as a warning while
   * loading (the library's default for other hosts). */
  dlop_set_load_error_warnings(0);
  int status = dlop_load_default_plugins();
  if (status != DLOP_OK)
    fprintf(stderr, "dlop: error: loading plugins failed: %s\n", dlop_last_error());
  return status;
}

static void print_load_errors(void) {
  int count = dlop_load_error_count();
  if (count == 0) return;
  fprintf(stderr, "dlop: %d plugin file%s failed to load:\n", count, count == 1 ? "" : "s");
  for (int i = 0; i < count; i++) fprintf(stderr, "  %s\n", dlop_load_error_at(i));
}

static int command_list(void) {
  if (load_default_plugins() != DLOP_OK) return 1;
  int plugins = dlop_plugin_count();
  if (plugins == 0)
    printf("no plugins are loaded: set DLOP_PLUGIN_PATH to plugin directories or files, or "
           "check the bundled plugin directory (DLOP_BUNDLED_PLUGINS overrides it)\n");
  for (int p = 0; p < plugins; p++) {
    const dlop_plugin *plugin = dlop_plugin_at(p);
    printf("%s%s %s (ABI ", p ? "\n" : "", dlop_plugin_name(plugin), dlop_plugin_version(plugin));
    print_abi(dlop_plugin_abi_version(plugin));
    printf(")\n  file: %s\n", dlop_plugin_path(plugin));
    for (int i = 0; i < dlop_plugin_op_count(plugin); i++) {
      const dlop_op_desc *op = dlop_plugin_op(plugin, i);
      printf("  op %s: ", op->name);
      print_inputs(op);
      printf("\n");
      print_devices(op, "    ");
      printf("    params:");
      if (op->num_params == 0) printf(" none");
      for (int32_t k = 0; k < op->num_params; k++) {
        const dlop_param_decl *param = &op->params[k];
        printf("%s %s (%s, default ", k ? "," : "", param->name, dlop_param_kind_name(param->kind));
        print_param_value(&param->default_value);
        printf(")");
      }
      printf("\n");
    }
  }
  print_load_errors();
  return dlop_load_error_count() > 0 ? 1 : 0; /* scripts can tell that a file was refused */
}

static void print_flags(const dlop_op_desc *op) {
  static const struct {
    uint32_t bit;
    const char *name;
  } known[] = {{DLOP_OP_DETERMINISTIC, "deterministic"},
               {DLOP_OP_CUDA_GRAPH_SAFE, "cuda-graph-safe"},
               {DLOP_OP_NEEDS_CONTIGUOUS_INPUTS, "needs-contiguous-inputs"}};
  int any = 0;
  printf("  flags:");
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (op->flags & known[i].bit) printf("%s %s", any++ ? "," : "", known[i].name);
  printf("%s\n", any ? "" : " none");
}

static void print_io_map(const char *title, const char *verb, const int32_t *map,
                         const dlop_op_desc *op) {
  if (map == NULL) return;
  for (int32_t i = 0; i < op->num_outputs; i++)
    if (map[i] >= 0) printf("  %s: output %d %s input %d\n", title, (int)i, verb, (int)map[i]);
}

/* What the op reports about a device at run time (ABI 1.2 runtime_info; the blas ops name
 * their CPU library), indented under "run time on DEVICE:"; nothing for ops without it. */
static void print_runtime_info(const dlop_op_desc *op, dlop_device_type device, const char *label) {
  char text[4096];
  if (dlop_op_dtypes(op, device) == 0) return;
  int status = dlop_op_runtime_info(op, device, text, sizeof text);
  if (status == DLOP_UNSUPPORTED) return;
  printf("  run time on %s:\n", label);
  if (status != DLOP_OK) {
    printf("    (error: %s)\n", dlop_last_error());
    return;
  }
  for (const char *p = text; *p != '\0';) {
    size_t length = strcspn(p, "\n");
    printf("    %.*s\n", (int)length, p);
    p += length + (p[length] == '\n');
  }
}

static int command_info(const char *name) {
  if (load_default_plugins() != DLOP_OK) return 1;
  const dlop_op_desc *op = dlop_find_op(name);
  if (op == NULL) {
    fprintf(stderr, "dlop: error: %s\n", dlop_last_error());
    print_load_errors();
    return 1;
  }
  const dlop_plugin *plugin = dlop_op_plugin(op);
  printf("op %s\n", op->name);
  printf("  doc: %s\n", op->doc && op->doc[0] ? op->doc : "(none)");
  printf("  signature: ");
  print_inputs(op);
  printf("\n  parameters:%s\n", op->num_params == 0 ? " none" : "");
  for (int32_t k = 0; k < op->num_params; k++) {
    const dlop_param_decl *param = &op->params[k];
    printf("    %s: %s, default ", param->name, dlop_param_kind_name(param->kind));
    print_param_value(&param->default_value);
    if (param->doc && param->doc[0]) printf(" — %s", param->doc);
    printf("\n");
  }
  printf("  dtypes:\n");
  print_devices(op, "    ");
  print_flags(op);
  print_io_map("in-place", "overwrites", op->inplace_map, op);
  print_io_map("view", "is a view of", op->view_map, op); /* ABI 1.1 view ops: no kernel */
  if (op->scalar_body != NULL) /* ABI 1.2 */
    printf("  fusion: declares a scalar body: compiled functions fuse it with its elementwise "
           "neighbours\n");
  if (op->reduce_body != NULL) /* ABI 1.2 */
    printf("  fusion: declares a reduction body: compiled functions compute its input in its "
           "kernel when a fused group produces it\n");
  print_runtime_info(op, DLOP_DEVICE_CPU, "cpu");
  print_runtime_info(op, DLOP_DEVICE_CUDA, "cuda");
  if (plugin != NULL) {
    printf("  plugin: %s %s (ABI ", dlop_plugin_name(plugin), dlop_plugin_version(plugin));
    print_abi(dlop_plugin_abi_version(plugin));
    printf(")\n  file: %s\n", dlop_plugin_path(plugin));
  }
  return 0;
}

/* One location line of `dlop info`: the path, or why there is none. */
static void print_location(const char *label, int location, const char *note) {
  char path[PATH_MAX];
  if (dlop_location_path(location, path, sizeof path) == DLOP_OK)
    printf("  %s: %s%s\n", label, path, note);
  else {
    /* The reason without the function's name ("dlop_location_path(...): "). */
    const char *why = strstr(dlop_last_error(), "): ");
    printf("  %s: none (%s)\n", label, why ? why + 3 : dlop_last_error());
  }
}

/* `dlop info` without an op: which installation this command runs, so that two installations
 * (an SDK prefix, a pip-installed package) never disagree unseen; dlop.info() says the same
 * for Python. */
static int command_info_installation(void) {
  if (load_default_plugins() != DLOP_OK) return 1;
  printf("dlop %s (plugin ABI ", dlop_version_string());
  print_abi(dlop_abi_version());
  printf(")\n");
  if (strcmp(dlop_version_string(), DLOP_VERSION_STRING) != 0)
    printf("  note: this dlop command was built against headers %s\n", DLOP_VERSION_STRING);
  print_location("libdlop", DLOP_LOCATION_LIBRARY, "");
  const char *bundled_override = getenv("DLOP_BUNDLED_PLUGINS");
  char bundled[PATH_MAX];
  const char *note = " (from DLOP_BUNDLED_PLUGINS)";
  if (bundled_override == NULL) {
    struct stat info;
    int exists = dlop_location_path(DLOP_LOCATION_BUNDLED_PLUGINS, bundled, sizeof bundled) ==
                     DLOP_OK && stat(bundled, &info) == 0 && S_ISDIR(info.st_mode);
    note = exists ? " (beside libdlop)" : " (beside libdlop; not there, so none are loaded)";
  }
  print_location("bundled plugins", DLOP_LOCATION_BUNDLED_PLUGINS, note);
  const char *plugin_path = getenv("DLOP_PLUGIN_PATH");
  printf("  DLOP_PLUGIN_PATH: %s\n", plugin_path == NULL ? "(not set)"
                                     : plugin_path[0] == '\0' ? "(empty)" : plugin_path);
  static const char *const modes[] = {"off", "all", "external"};
  int mode = dlop_plugin_probe();
  printf("  plugin probe: %s\n", mode >= 0 && mode <= 2 ? modes[mode] : "?");
  print_location("probe program", DLOP_LOCATION_PROBE_PROGRAM, "");
  int errors = dlop_load_error_count();
  printf("  plugins: %d loaded, %d failed to load (`dlop list` shows them)\n",
         dlop_plugin_count(), errors);
  fflush(stdout); /* the listing before the errors on stderr, when both go to one terminal */
  print_load_errors();
  return errors > 0 ? 1 : 0;
}

static int command_version(void) {
  printf("dlop %s (plugin ABI ", dlop_version_string());
  print_abi(dlop_abi_version());
  printf(")\n");
  if (strcmp(dlop_version_string(), DLOP_VERSION_STRING) != 0)
    printf("note: this dlop command was built against headers %s\n", DLOP_VERSION_STRING);
  return 0;
}

static int command_load(int count, char **files) {
  int with_default = count > 0 && strcmp(files[0], "--with-default") == 0;
  if (with_default) {
    files++;
    count--;
    if (load_default_plugins() != DLOP_OK) return 1;
  }
  if (count == 0) {
    fprintf(stderr, "dlop: error: `dlop load` needs at least one plugin file\n");
    return 2;
  }
  int failures = 0;
  for (int i = 0; i < count; i++) {
    const dlop_plugin *plugin = NULL;
    if (dlop_load_plugin(files[i], &plugin) != DLOP_OK) {
      fprintf(stderr, "error: %s\n", dlop_last_error());
      failures++;
      continue;
    }
    printf("ok: %s: plugin %s %s (ABI ", dlop_plugin_path(plugin), dlop_plugin_name(plugin),
           dlop_plugin_version(plugin));
    print_abi(dlop_plugin_abi_version(plugin));
    int ops = dlop_plugin_op_count(plugin);
    printf("), %d op%s", ops, ops == 1 ? "" : "s");
    for (int k = 0; k < ops; k++) printf("%s%s", k ? ", " : ": ", dlop_plugin_op(plugin, k)->name);
    printf("\n");
  }
  if (failures > 0) fprintf(stderr, "dlop: %d of %d plugin files failed to load\n", failures, count);
  return failures > 0 ? 1 : 0;
}

#ifndef DLOP_CHECK_RELATIVE_PATH
#define DLOP_CHECK_RELATIVE_PATH "../libexec/dlop/dlop-check"
#define DLOP_CHECK_BUILT 0
#endif

/* `dlop check ...` runs the compliance suite, dlop-check, which lives at the same place
 * relative to this program in the build and install trees; its exit status is ours. */
static int command_check(int count, char **arguments) {
  char self[PATH_MAX], program[PATH_MAX + 64];
  ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
  if (length <= 0) {
    fprintf(stderr, "dlop: error: cannot find where the dlop program lives (/proc/self/exe)\n");
    return 1;
  }
  self[length] = '\0';
  char *slash = strrchr(self, '/');
  if (slash) *slash = '\0';
  snprintf(program, sizeof program, "%s/%s", self, DLOP_CHECK_RELATIVE_PATH);
  if (access(program, X_OK) != 0) {
    fprintf(stderr, "dlop: error: the compliance suite dlop-check is missing (looked for %s)%s\n",
            program,
            DLOP_CHECK_BUILT ? "; reinstall dlop"
                             : ": this dlop was built without Check (the C unit-test framework); "
                               "install check and libsubunit-dev, or set DLOP_CHECK_ROOT, and "
                               "rebuild");
    return 1;
  }
  char *argv[260];
  if (count > 256) count = 256;
  argv[0] = program;
  for (int i = 0; i < count; i++) argv[i + 1] = arguments[i];
  argv[count + 1] = NULL;
  fflush(stdout);
  execv(program, argv);
  fprintf(stderr, "dlop: error: cannot run %s: %s\n", program, strerror(errno));
  return 1;
}

/* "dlop list takes no arguments (got 'extra')": says what the command wanted and what it got,
 * rather than calling a known command unknown. Exit status 2, as for any usage error. */
static int wrong_arguments(const char *rule, int count, char **arguments) {
  fprintf(stderr, "dlop: error: dlop %s (got ", rule);
  if (count == 0) fprintf(stderr, "none");
  for (int i = 0; i < count; i++) fprintf(stderr, "%s'%s'", i ? " " : "", arguments[i]);
  fprintf(stderr, ")\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const char *command = argv[1];
  if (strcmp(command, "--help") == 0 || strcmp(command, "-h") == 0 ||
      strcmp(command, "help") == 0) {
    print_usage(stdout);
    return 0;
  }
  if (strcmp(command, "list") == 0) {
    if (argc > 2) return wrong_arguments("list takes no arguments", argc - 2, argv + 2);
    return command_list();
  }
  if (strcmp(command, "info") == 0) {
    if (argc > 3)
      return wrong_arguments("info takes one op name (`dlop list` shows them), or none for the "
                             "installation", argc - 2, argv + 2);
    return argc == 3 ? command_info(argv[2]) : command_info_installation();
  }
  if (strcmp(command, "version") == 0 || strcmp(command, "--version") == 0) {
    if (argc > 2) return wrong_arguments("version takes no arguments", argc - 2, argv + 2);
    return command_version();
  }
  if (strcmp(command, "load") == 0) return command_load(argc - 2, argv + 2);
  if (strcmp(command, "check") == 0) return command_check(argc - 2, argv + 2);
  fprintf(stderr, "dlop: error: unknown command '%s'\n\n", command);
  print_usage(stderr);
  return 2;
}
