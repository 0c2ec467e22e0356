/* probe_main.c — dlop-probe, the program libdlop runs to load a plugin file in a fresh process
 * before it loads the file into the host (loader/probe_run.c). It loads the file as the host
 * would, through dlop_load_plugin (file and ELF checks, dlopen, the entry symbol called with the
 * host table, validation of the descriptors), with probing off, reads every string and array
 * the descriptors point to (as listings do later), then exits as the host would (the plugin's
 * destructors run). Whatever crashes on the way kills this process, not the host.
 *
 *   dlop-probe [--result-fd N] PLUGIN.so
 *
 * writes "ok\n", or "refused\n" and the load error, to descriptor N (default: stdout) once the
 * load has returned; exit status 0 (loaded), 1 (refused with a load error) or 2 (usage). The
 * parent trusts the line, not the status alone: a plugin may call exit(0) itself. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlop.h"

/* Built with AddressSanitizer (the CI's sanitizer tree): a plugin that crashes must still end
 * this process by its signal, which is what the parent reports; ASan's own SEGV handler would
 * print a report and exit 1 instead. Defaults only: ASAN_OPTIONS still overrides them. */
#if defined(__SANITIZE_ADDRESS__)
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
  return "handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0:handle_abort=0";
}
#endif

static void write_all(int fd, const char *text) {
  size_t length = strlen(text);
  while (length > 0) {
    ssize_t written = write(fd, text, length);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return; /* the parent is gone or the descriptor is bad: nothing to tell */
    text += written;
    length -= (size_t)written;
  }
}

/* What the host reads of a loaded plugin's descriptors later (`dlop list`, dlop.plugins(),
 * compiling a graph) beyond what the loader validated: every string and array they point to.
 * A corrupt pointer among them crashes here rather than in the host. */
static size_t text_length(const char *text) { return text ? strlen(text) : 0; }

static void read_everything(const dlop_plugin *plugin) {
  volatile size_t sum = 0;
  sum += text_length(dlop_plugin_name(plugin)) + text_length(dlop_plugin_version(plugin)) +
         text_length(dlop_plugin_doc(plugin));
  for (int i = 0; i < dlop_plugin_op_count(plugin); i++) {
    const dlop_op_desc *op = dlop_plugin_op(plugin, i);
    sum += text_length(op->name) + text_length(op->doc);
    for (int32_t p = 0; p < op->num_params && op->params != NULL; p++) {
      const dlop_param_decl *param = &op->params[p];
      sum += text_length(param->name) + text_length(param->doc);
      if (param->kind == DLOP_PARAM_STRING) sum += text_length(param->default_value.u.s);
      if (param->kind == DLOP_PARAM_INTS && param->default_value.u.ints != NULL)
        for (int32_t k = 0; k < param->default_value.count; k++)
          sum += (size_t)param->default_value.u.ints[k];
    }
    for (int32_t o = 0; o < op->num_outputs; o++) {
      if (op->inplace_map != NULL) sum += (size_t)op->inplace_map[o];
      if (op->view_map != NULL) sum += (size_t)op->view_map[o];
    }
  }
  (void)sum;
}

static int usage(const char *why) {
  fprintf(stderr,
          "dlop-probe: error: %s\n"
          "usage: dlop-probe [--result-fd N] PLUGIN.so\n"
          "  Loads PLUGIN.so as libdlop would and reports whether that worked; libdlop runs it\n"
          "  before loading a plugin file into its own process (DLOP_PLUGIN_PROBE).\n",
          why);
  return 2;
}

int main(int argc, char **argv) {
  int result_fd = STDOUT_FILENO;
  int next = 1;
  if (argc > 2 && strcmp(argv[1], "--result-fd") == 0) {
    char *end = NULL;
    long value = strtol(argv[2], &end, 10);
    if (end == argv[2] || *end != '\0' || value < 0 || value > 1 << 20)
      return usage("--result-fd takes a file descriptor number");
    result_fd = (int)value;
    next = 3;
  }
  if (argc - next != 1) return usage("expected one plugin file");
  const char *path = argv[next];

  /* This process is the probe: loading here must not start another one. */
  dlop_set_plugin_probe(DLOP_PLUGIN_PROBE_OFF);
  const dlop_plugin *plugin = NULL;
  int status = dlop_load_plugin(path, &plugin);
  if (status == DLOP_OK) {
    read_everything(plugin);
    write_all(result_fd, "ok\n");
    return 0;
  }
  char message[1200];
  snprintf(message, sizeof message, "refused\n%s\n", dlop_last_error());
  write_all(result_fd, message);
  return 1;
}
