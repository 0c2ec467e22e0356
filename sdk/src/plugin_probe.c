/* plugin_probe.c — when plugin files are probed in a child process before they are loaded, and
 * with what: the mode (dlop_set_plugin_probe, else DLOP_PLUGIN_PROBE, else "external": every file
 * but the bundled plugins, which come from the same build as libdlop), the dlop-probe program
 * beside libdlop (or where a program holding the runtime itself says), the time limit
 * (DLOP_PLUGIN_PROBE_TIMEOUT) and the disk cache directory (DLOP_CACHE_DIR, else
 * $XDG_CACHE_HOME/dlop, else ~/.cache/dlop). The environment is read once, at the first load.
 * Figures behind the default: bench/RESULTS.md. */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "plugin_probe.h"

#define DEFAULT_MODE DLOP_PLUGIN_PROBE_EXTERNAL
#define DEFAULT_TIMEOUT_SECONDS 30.0
#define CACHE_SUBDIR "plugin-probe"

static pthread_once_t settings_once = PTHREAD_ONCE_INIT;
static int environment_mode = DEFAULT_MODE;
static int chosen_mode = -1; /* set through the API; -1: none */
static char program[PATH_MAX];
static char program_given[PATH_MAX]; /* dlop__probe_set_program's, or "" */
static char cache_dir[PATH_MAX];
static dlop__probe_settings settings;

static int parse_mode(const char *text) {
  if (strcmp(text, "0") == 0 || strcmp(text, "off") == 0) return DLOP_PLUGIN_PROBE_OFF;
  if (strcmp(text, "1") == 0 || strcmp(text, "all") == 0) return DLOP_PLUGIN_PROBE_ALL;
  if (strcmp(text, "external") == 0) return DLOP_PLUGIN_PROBE_EXTERNAL;
  return -1;
}

static double read_timeout(void) {
  const char *text = getenv("DLOP_PLUGIN_PROBE_TIMEOUT");
  if (text == NULL || text[0] == '\0') return DEFAULT_TIMEOUT_SECONDS;
  char *end = NULL;
  double seconds = strtod(text, &end);
  if (end != text && *end == '\0' && isfinite(seconds) && seconds > 0) return seconds;
  dlop__warn("DLOP_PLUGIN_PROBE_TIMEOUT='%s' is not a positive number of seconds: using %g",
             text, DEFAULT_TIMEOUT_SECONDS);
  return DEFAULT_TIMEOUT_SECONDS;
}

/* <root>/plugin-probe, root from DLOP_CACHE_DIR (empty: no disk cache), else the XDG base
 * directory rules; "" when there is none. Relative values are ignored, as the XDG rules say. */
static void find_cache_dir(void) {
  const char *root = getenv("DLOP_CACHE_DIR");
  const char *suffix = "";
  if (root != NULL) {
    if (root[0] != '\0' && root[0] != '/') {
      dlop__warn("DLOP_CACHE_DIR='%s' is relative and was ignored: use an absolute path (no "
                 "disk cache is used)",
                 root);
      root = "";
    }
  } else if ((root = getenv("XDG_CACHE_HOME")) != NULL && root[0] == '/') {
    suffix = "/dlop";
  } else if ((root = getenv("HOME")) != NULL && root[0] == '/') {
    suffix = "/.cache/dlop";
  } else {
    root = "";
  }
  if (root[0] == '\0') return;
  int written = snprintf(cache_dir, sizeof cache_dir, "%s%s/" CACHE_SUBDIR, root, suffix);
  if (written <= 0 || (size_t)written >= sizeof cache_dir) cache_dir[0] = '\0';
}

static void read_settings(void) {
  const char *text = getenv("DLOP_PLUGIN_PROBE");
  if (text != NULL && text[0] != '\0') {
    int mode = parse_mode(text);
    if (mode < 0)
      dlop__warn("DLOP_PLUGIN_PROBE='%s' is not one of off (or 0), all (or 1), external: "
                 "probing every plugin file but the bundled ones (external, the default)",
                 text);
    else
      environment_mode = mode;
  }
  /* An address inside libdlop: dlop-probe lies beside the library that holds it, unless a
   * program holding the runtime itself said where (dlop__probe_set_program). */
  if (program_given[0] != '\0')
    snprintf(program, sizeof program, "%s", program_given);
  else if (!dlop__probe_program_path((const void *)&read_settings, program, sizeof program))
    program[0] = '\0';
  find_cache_dir();
  settings.program = program;
  settings.timeout_seconds = read_timeout();
  settings.cache_dir = cache_dir;
}

const char *dlop__probe_program(void) {
  pthread_once(&settings_once, read_settings);
  return program;
}

void dlop__probe_set_program(const char *path) {
  snprintf(program_given, sizeof program_given, "%s", path);
}

int dlop_set_plugin_probe(int mode) {
  if (mode != DLOP_PLUGIN_PROBE_OFF && mode != DLOP_PLUGIN_PROBE_ALL &&
      mode != DLOP_PLUGIN_PROBE_EXTERNAL)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_set_plugin_probe: mode %d is not one of DLOP_PLUGIN_PROBE_OFF (0), "
                       "DLOP_PLUGIN_PROBE_ALL (1), DLOP_PLUGIN_PROBE_EXTERNAL (2)",
                       mode);
  __atomic_store_n(&chosen_mode, mode, __ATOMIC_RELEASE);
  return DLOP_OK;
}

int dlop_plugin_probe(void) {
  int mode = __atomic_load_n(&chosen_mode, __ATOMIC_ACQUIRE);
  if (mode >= 0) return mode;
  pthread_once(&settings_once, read_settings);
  return environment_mode;
}

const dlop__probe_settings *dlop__probe_settings_for(int bundled) {
  int mode = dlop_plugin_probe();
  if (mode == DLOP_PLUGIN_PROBE_OFF || (mode == DLOP_PLUGIN_PROBE_EXTERNAL && bundled))
    return NULL;
  pthread_once(&settings_once, read_settings);
  return &settings;
}
