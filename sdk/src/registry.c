/* registry.c — the process-wide registry of loaded plugins and their ops: default loading
 * (DLOP_PLUGIN_PATH, then the bundled directory) once per process, explicit loading, in-process
 * plugins (dlop_register_plugin), lookups, and the load errors kept for `dlop list`. One mutex
 * guards it; plugins stay registered for the life of the process, so the op and plugin pointers
 * handed out never dangle. */
#include <limits.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "loader.h"
#include "plugin_probe.h"

typedef struct registry_op {
  const dlop_op_desc *op;
  dlop_plugin *plugin;
} registry_op;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static dlop_plugin **plugins;
static int num_plugins, plugins_capacity;
static registry_op *ops;
static int num_ops, ops_capacity;
static dlop__string_list load_errors;

static int grow(void **array, int *capacity, int needed, size_t element) {
  if (needed <= *capacity) return 0;
  int next = *capacity ? *capacity * 2 : 16;
  while (next < needed) next *= 2;
  void *grown = realloc(*array, (size_t)next * element);
  if (grown == NULL) return -1;
  *array = grown;
  *capacity = next;
  return 0;
}

static const registry_op *find_locked(const char *name) {
  for (int i = 0; i < num_ops; i++)
    if (strcmp(ops[i].op->name, name) == 0) return &ops[i];
  return NULL;
}

/* The loader's warnings are printed as libdlop's own. */
static void warn_from_loader(const char *message) { dlop__warn("%s", message); }
/* What each loader call is given: libdlop's status names and warnings. */
#define LOADER_REPORT {.status_name = dlop_status_name, .warn = warn_from_loader}

/* The bundled plugin directory lies beside libdlop: the loader looks next to the file that
 * holds this function's code. */
static int bundled_plugin_dir(char *buffer, size_t size, int *from_environment) {
  return dlop__bundled_plugin_dir((const void *)&bundled_plugin_dir, buffer, size,
                                  from_environment);
}

static dlop_plugin *find_real_path_locked(const char *path) {
  char *real = dlop__real_path(path);
  if (real == NULL) return NULL; /* the loader reports why */
  dlop_plugin *found = NULL;
  for (int i = 0; i < num_plugins && found == NULL; i++)
    if (plugins[i]->real_path != NULL && strcmp(plugins[i]->real_path, real) == 0)
      found = plugins[i]; /* in-process plugins have no file */
  free(real);
  return found;
}

/* Refuse a plugin name or op names another plugin has, else append the plugin and its ops;
 * a refused plugin is closed. */
static int add_locked(dlop_plugin *plugin, dlop_plugin **out) {
  int status;
  /* Plugin names identify plugins in listings and messages; two files with one name are two
   * builds or copies of one plugin, and which one serves an op would depend on load order. */
  for (int i = 0; i < num_plugins; i++) {
    if (strcmp(plugins[i]->desc.name, plugin->desc.name) == 0) {
      status = dlop__error(DLOP_DUPLICATE,
                           "%s: plugin name '%s' is already taken by %s (loaded first); this "
                           "plugin was not loaded: rename the plugin or remove one of them",
                           plugin->path, plugin->desc.name, plugins[i]->path);
      dlop__plugin_close(plugin);
      return status;
    }
  }
  for (int i = 0; i < plugin->desc.num_ops; i++) {
    const registry_op *clash = find_locked(plugin->ops[i].name);
    if (clash != NULL) {
      status = dlop__error(DLOP_DUPLICATE,
                           "%s: op '%s' is already provided by %s (plugin '%s', loaded first); "
                           "this plugin was not loaded: rename the op or remove one of them",
                           plugin->path, plugin->ops[i].name, clash->plugin->path,
                           clash->plugin->desc.name);
      dlop__plugin_close(plugin);
      return status;
    }
  }
  if (grow((void **)&plugins, &plugins_capacity, num_plugins + 1, sizeof *plugins) != 0 ||
      grow((void **)&ops, &ops_capacity, num_ops + plugin->desc.num_ops, sizeof *ops) != 0) {
    status = dlop__error(DLOP_OUT_OF_MEMORY, "%s: out of memory registering the plugin",
                         plugin->path);
    dlop__plugin_close(plugin);
    return status;
  }
  plugins[num_plugins++] = plugin;
  for (int i = 0; i < plugin->desc.num_ops; i++) {
    ops[num_ops].op = &plugin->ops[i];
    ops[num_ops].plugin = plugin;
    num_ops++;
  }
  *out = plugin;
  return DLOP_OK;
}

/* Open path unless the same file is loaded already (probed first as the mode says for a file
 * from the bundled directory or not), and add it. */
static int register_locked(const char *path, int bundled, dlop_plugin **out) {
  dlop_plugin *plugin = find_real_path_locked(path);
  if (plugin != NULL) {
    *out = plugin;
    return DLOP_OK;
  }
  dlop__loader_report report = LOADER_REPORT;
  /* The probe's child process runs under the lock too: other loads wait, as for a dlopen. */
  int status =
      dlop__plugin_open(path, dlop__host_api(), dlop__probe_settings_for(bundled), &report, &plugin);
  if (status != DLOP_OK) return dlop__error(status, "%s", report.error);
  return add_locked(plugin, out);
}

/* The fields of dlop_inprocess_plugin this host knows end after descriptor. */
#define INPROCESS_SIZE (offsetof(dlop_inprocess_plugin, descriptor) + sizeof(void *))

int dlop_register_plugin(const dlop_inprocess_plugin *source, const dlop_plugin **plugin) {
  if (plugin != NULL) *plugin = NULL;
  if (source == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_register_plugin: source is NULL: expected a "
                       "dlop_inprocess_plugin");
  if (source->struct_size < INPROCESS_SIZE)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_register_plugin: struct_size is %u, smaller than the %zu bytes of a "
                       "dlop_inprocess_plugin: set it to sizeof(dlop_inprocess_plugin)",
                       source->struct_size, (size_t)INPROCESS_SIZE);
  if (source->reserved != 0)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_register_plugin: reserved is %u: expected 0", source->reserved);
  /* Out of the lock: init may call into libdlop (dlop_find_op) without deadlocking. */
  dlop__loader_report report = LOADER_REPORT;
  dlop_plugin *made = NULL;
  int status = dlop__plugin_from_process(source->origin, source->init, source->descriptor,
                                         dlop__host_api(), &report, &made);
  if (status != DLOP_OK) return dlop__error(status, "%s", report.error);
  pthread_mutex_lock(&registry_lock);
  dlop_plugin *added = NULL;
  status = add_locked(made, &added);
  pthread_mutex_unlock(&registry_lock);
  if (status == DLOP_OK && plugin != NULL) *plugin = added;
  return status;
}

/* Set by hosts that print the recorded errors themselves (the dlop command), so each error
 * is shown once; guarded by registry_lock. */
static int warn_load_errors = 1;

void dlop_set_load_error_warnings(int enabled) {
  pthread_mutex_lock(&registry_lock);
  warn_load_errors = enabled != 0;
  pthread_mutex_unlock(&registry_lock);
}

/* Recorded as "FILE: reason" and, unless the host prints the list itself, printed, so
 * neither a program nor its user misses it. */
static void record_load_error_locked(const char *line) {
  dlop__string_list_push(&load_errors, line);
  if (warn_load_errors) dlop__warn("%s", line);
}

static void load_default_once(void) {
  dlop__string_list files = {0}, errors = {0};
  dlop__loader_report report = LOADER_REPORT;
  dlop__collect_plugin_path(getenv("DLOP_PLUGIN_PATH"), &report, &files, &errors);
  int first_bundled = files.count; /* files from here on come from the bundled directory */
  char bundled[PATH_MAX];
  int from_environment = 0;
  if (bundled_plugin_dir(bundled, sizeof bundled, &from_environment)) {
    /* A build or install without bundled plugins is fine; a directory the user named is not. */
    struct stat info;
    if (from_environment && bundled[0] != '/')
      /* The same rule as for DLOP_PLUGIN_PATH: "." would load whatever *.so lies in the
       * current directory, which changes with where the program is started. */
      dlop__string_list_pushf(&errors,
                              "DLOP_BUNDLED_PLUGINS='%s' is relative and was ignored: use an "
                              "absolute path (plugins are never loaded relative to the current "
                              "directory)",
                              bundled);
    else if (from_environment || stat(bundled, &info) == 0)
      dlop__collect_directory(bundled,
                              from_environment ? "from DLOP_BUNDLED_PLUGINS"
                                               : "the bundled plugin directory",
                              &files, &errors);
  }
  pthread_mutex_lock(&registry_lock);
  for (int i = 0; i < errors.count; i++) record_load_error_locked(errors.items[i]);
  for (int i = 0; i < files.count; i++) {
    dlop_plugin *plugin;
    if (register_locked(files.items[i], i >= first_bundled, &plugin) != DLOP_OK)
      record_load_error_locked(dlop_last_error());
  }
  pthread_mutex_unlock(&registry_lock);
  dlop__string_list_free(&files);
  dlop__string_list_free(&errors);
  dlop__clear_error();
}

int dlop_load_default_plugins(void) {
  int status = pthread_once(&default_once, load_default_once);
  if (status != 0)
    return dlop__error(DLOP_INTERNAL, "loading the default plugins failed: pthread_once "
                       "returned %d", status);
  return DLOP_OK;
}

int dlop_load_plugin(const char *path, const dlop_plugin **plugin) {
  if (plugin != NULL) *plugin = NULL;
  if (path == NULL || path[0] == '\0')
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_load_plugin: the path is %s: expected a "
                       "plugin file", path ? "empty" : "NULL");
  /* "name.so" means ./name.so (the loader makes it absolute), never a search of the system
   * library paths as dlopen would do. */
  pthread_mutex_lock(&registry_lock);
  dlop_plugin *loaded = NULL;
  int status = register_locked(path, 0, &loaded);
  pthread_mutex_unlock(&registry_lock);
  if (status == DLOP_OK && plugin != NULL) *plugin = loaded;
  return status;
}

int dlop_plugin_count(void) {
  pthread_mutex_lock(&registry_lock);
  int count = num_plugins;
  pthread_mutex_unlock(&registry_lock);
  return count;
}

const dlop_plugin *dlop_plugin_at(int index) {
  pthread_mutex_lock(&registry_lock);
  const dlop_plugin *plugin = (index >= 0 && index < num_plugins) ? plugins[index] : NULL;
  pthread_mutex_unlock(&registry_lock);
  if (plugin == NULL)
    dlop__error(DLOP_INVALID_ARGUMENT, "plugin index %d is out of range [0, %d)", index,
                dlop_plugin_count());
  return plugin;
}

const char *dlop_plugin_name(const dlop_plugin *plugin) {
  return plugin ? plugin->desc.name : NULL;
}

const char *dlop_plugin_version(const dlop_plugin *plugin) {
  if (plugin == NULL) return NULL;
  return plugin->desc.version ? plugin->desc.version : "";
}

const char *dlop_plugin_doc(const dlop_plugin *plugin) {
  if (plugin == NULL) return NULL;
  return plugin->desc.doc ? plugin->desc.doc : "";
}

const char *dlop_plugin_path(const dlop_plugin *plugin) { return plugin ? plugin->path : NULL; }

uint32_t dlop_plugin_abi_version(const dlop_plugin *plugin) {
  return plugin ? plugin->desc.abi_version : 0;
}

int dlop_plugin_op_count(const dlop_plugin *plugin) { return plugin ? plugin->desc.num_ops : 0; }

const dlop_op_desc *dlop_plugin_op(const dlop_plugin *plugin, int index) {
  if (plugin == NULL || index < 0 || index >= plugin->desc.num_ops) {
    dlop__error(DLOP_INVALID_ARGUMENT, "op index %d is out of range for plugin %s", index,
                plugin ? plugin->path : "(null)");
    return NULL;
  }
  return &plugin->ops[index];
}

int dlop_op_count(void) {
  pthread_mutex_lock(&registry_lock);
  int count = num_ops;
  pthread_mutex_unlock(&registry_lock);
  return count;
}

const dlop_op_desc *dlop_op_at(int index) {
  pthread_mutex_lock(&registry_lock);
  const dlop_op_desc *op = (index >= 0 && index < num_ops) ? ops[index].op : NULL;
  int count = num_ops;
  pthread_mutex_unlock(&registry_lock);
  if (op == NULL) dlop__error(DLOP_INVALID_ARGUMENT, "op index %d is out of range [0, %d)", index, count);
  return op;
}

/* The message for an unknown op: what is loaded, or where ops come from when nothing is. */
static void describe_missing_locked(const char *name, char *message, size_t size) {
  size_t used = (size_t)snprintf(message, size, "no op named '%.200s' is loaded; ", name);
  if (num_ops > 0) {
    used += (size_t)snprintf(message + used, size - used, "loaded ops: ");
    for (int i = 0; i < num_ops && used < size; i++) {
      /* Leave room for the tail; a long list ends with "..." rather than a cut name. */
      if (used + strlen(ops[i].op->name) + 80 > size) {
        used += (size_t)snprintf(message + used, size - used, "...");
        break;
      }
      used += (size_t)snprintf(message + used, size - used, "%s%s", i ? ", " : "",
                               ops[i].op->name);
    }
  } else {
    char bundled[PATH_MAX];
    int from_environment = 0;
    int has_bundled = bundled_plugin_dir(bundled, sizeof bundled, &from_environment);
    used += (size_t)snprintf(message + used, size - used,
                             "no ops are loaded at all: call dlop_load_default_plugins() or put "
                             "the plugin's directory in DLOP_PLUGIN_PATH (bundled plugins are "
                             "looked for in %s)",
                             !has_bundled ? "(nowhere: DLOP_BUNDLED_PLUGINS is empty)"
                             : from_environment && bundled[0] != '/'
                                 ? "(nowhere: DLOP_BUNDLED_PLUGINS is relative, so ignored)"
                                 : bundled);
  }
  if (used < size && load_errors.count > 0)
    snprintf(message + used, size - used,
             "; %d plugin file(s) failed to load (dlop_load_error_at, `dlop list`)",
             load_errors.count);
}

const dlop_op_desc *dlop_find_op(const char *name) {
  if (name == NULL) {
    dlop__error(DLOP_INVALID_ARGUMENT, "dlop_find_op: the op name is NULL");
    return NULL;
  }
  pthread_mutex_lock(&registry_lock);
  const registry_op *found = find_locked(name);
  char message[1024];
  if (found == NULL) describe_missing_locked(name, message, sizeof message);
  pthread_mutex_unlock(&registry_lock);
  if (found == NULL) {
    dlop__error(DLOP_NOT_FOUND, "%s", message);
    return NULL;
  }
  return found->op;
}

const dlop_plugin *dlop_op_plugin(const dlop_op_desc *op) {
  pthread_mutex_lock(&registry_lock);
  const dlop_plugin *plugin = NULL;
  for (int i = 0; i < num_ops && plugin == NULL; i++)
    if (ops[i].op == op) plugin = ops[i].plugin;
  pthread_mutex_unlock(&registry_lock);
  if (plugin == NULL)
    dlop__error(DLOP_NOT_FOUND, "the op descriptor %p is not one the registry handed out", (const void *)op);
  return plugin;
}

uint32_t dlop_op_dtypes(const dlop_op_desc *op, dlop_device_type device) {
  if (op == NULL) return 0;
  switch (device) {
    case DLOP_DEVICE_CPU:
      return op->struct_size >= offsetof(dlop_op_desc, cpu_dtypes) + sizeof op->cpu_dtypes
                 ? op->cpu_dtypes
                 : 0;
    case DLOP_DEVICE_CUDA:
      return op->struct_size >= offsetof(dlop_op_desc, cuda_dtypes) + sizeof op->cuda_dtypes
                 ? op->cuda_dtypes
                 : 0;
    default: return 0;
  }
}

int dlop_load_error_count(void) {
  pthread_mutex_lock(&registry_lock);
  int count = load_errors.count;
  pthread_mutex_unlock(&registry_lock);
  return count;
}

const char *dlop_load_error_at(int index) {
  pthread_mutex_lock(&registry_lock);
  const char *line = (index >= 0 && index < load_errors.count) ? load_errors.items[index] : NULL;
  pthread_mutex_unlock(&registry_lock);
  return line;
}
