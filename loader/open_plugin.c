/* open_plugin.c — opens one plugin file: checks it is a regular file (warning when it or its
 * directory is world-writable), validates it as an ELF shared object (elf_check.c), probes it
 * in a child process when asked (probe_cache.c), dlopen (RTLD_NOW | RTLD_LOCAL), finds
 * dlop_plugin_init, calls it with the host table, then validates and normalizes what it
 * returns. Any failure closes the file and leaves "PATH: reason" in the caller's report. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf_check.h"
#include "loader_internal.h"

char *dlop__absolute_path(const char *path) {
  if (path[0] == '/') return strdup(path);
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof cwd) == NULL) return NULL;
  size_t length = strlen(cwd) + 1 + strlen(path) + 1;
  char *absolute = malloc(length);
  if (absolute == NULL) return NULL;
  /* "./x" reads better without the "./" in listings and messages. */
  while (path[0] == '.' && path[1] == '/') path += 2;
  snprintf(absolute, length, "%s/%s", cwd, path);
  return absolute;
}

char *dlop__real_path(const char *path) { return realpath(path, NULL); }

/* A writable-by-anyone file or directory lets any local user swap the code this process runs.
 * Not so for a sticky directory (/tmp, mode 1777): there only a file's owner (or the
 * directory's, or root) may rename or delete it, so others cannot replace the plugin; the
 * file itself being world-writable is still reported. */
static void warn_if_world_writable(dlop__loader_report *report, const char *path, const char *what,
                                   const char *plugin_path) {
  struct stat info;
  if (stat(path, &info) != 0 || (info.st_mode & S_IWOTH) == 0) return;
  if (S_ISDIR(info.st_mode) && (info.st_mode & S_ISVTX) != 0) return;
  dlop__loader_warn(
      report,
      "%s: the plugin %s %s is world-writable (mode %04o): any user on this machine can "
      "replace the code it runs; chmod o-w it",
      plugin_path, what, path, (unsigned)(info.st_mode & 07777));
}

static void warn_about_permissions(dlop__loader_report *report, const char *shown_path,
                                   const char *real_path) {
  warn_if_world_writable(report, real_path, "file", shown_path);
  char *directory = strdup(real_path);
  if (directory == NULL) return;
  char *slash = strrchr(directory, '/');
  if (slash != NULL) {
    if (slash == directory) slash[1] = '\0';
    else slash[0] = '\0';
    warn_if_world_writable(report, directory, "directory", shown_path);
  }
  free(directory);
}

/* File checks before dlopen: exists, regular; sets real_path. */
static int check_file(dlop__loader_report *report, dlop_plugin *plugin) {
  struct stat info;
  if (stat(plugin->path, &info) != 0) {
    int code = errno;
    return dlop__loader_error(report,
                              code == ENOENT || code == ENOTDIR ? DLOP_NOT_FOUND : DLOP_LOAD_ERROR,
                              "%s: cannot open plugin file: %s", plugin->path, strerror(code));
  }
  if (!S_ISREG(info.st_mode))
    return dlop__loader_error(report, DLOP_LOAD_ERROR,
                              "%s: not a regular file (%s): a plugin is a .so file", plugin->path,
                              S_ISDIR(info.st_mode) ? "a directory" : "a special file");
  plugin->real_path = dlop__real_path(plugin->path);
  if (plugin->real_path == NULL)
    return dlop__loader_error(report, DLOP_LOAD_ERROR, "%s: cannot resolve the path: %s",
                              plugin->path, strerror(errno));
  warn_about_permissions(report, plugin->path, plugin->real_path);
  return DLOP_OK;
}

int dlop__call_plugin_init(dlop__loader_report *report, const char *path, const char *init_name,
                           dlop_plugin_init_fn init, const dlop_host_api *host,
                           const dlop_plugin_desc **desc) {
  char error[DLOP__PLUGIN_ERROR_SIZE];
  memset(error, 0, sizeof error);
  *desc = NULL;
  int status = init(host, DLOP_ABI_VERSION, desc, error, sizeof error);
  error[sizeof error - 1] = '\0';
  if (status != DLOP_OK)
    return dlop__loader_error(report, DLOP_PLUGIN_ERROR,
                              "%s: %s failed with %s (%d): %s", path, init_name,
                              report->status_name(status), status,
                              error[0] ? error : "(the plugin wrote no message)");
  return DLOP_OK;
}

static int call_entry(dlop__loader_report *report, dlop_plugin *plugin, const dlop_host_api *host,
                      const dlop_plugin_desc **desc) {
  dlerror(); /* clear: a NULL symbol is only an error when dlerror says so */
  void *symbol = dlsym(plugin->handle, DLOP_PLUGIN_ENTRY_SYMBOL);
  const char *reason = dlerror();
  if (symbol == NULL)
    return dlop__loader_error(report, DLOP_LOAD_ERROR,
                              "%s: no entry symbol " DLOP_PLUGIN_ENTRY_SYMBOL
                              ": is this a dlop plugin? (%s)",
                              plugin->path, reason ? reason : "the symbol is NULL");
  dlop_plugin_init_fn init;
  memcpy(&init, &symbol, sizeof init); /* object pointer to function pointer, as POSIX allows */
  return dlop__call_plugin_init(report, plugin->path, DLOP_PLUGIN_ENTRY_SYMBOL, init, host, desc);
}

int dlop__plugin_open(const char *path, const dlop_host_api *host,
                      const dlop__probe_settings *probe, dlop__loader_report *report,
                      dlop_plugin **out) {
  if (out != NULL) *out = NULL;
  if (path == NULL || path[0] == '\0')
    return dlop__loader_error(report, DLOP_INVALID_ARGUMENT,
                              "plugin path is %s: expected a file path", path ? "empty" : "NULL");
  if (out == NULL)
    return dlop__loader_error(report, DLOP_INVALID_ARGUMENT, "%s: no place to put the plugin",
                              path);
  dlop_plugin *plugin = calloc(1, sizeof *plugin);
  if (plugin == NULL)
    return dlop__loader_error(report, DLOP_OUT_OF_MEMORY, "%s: out of memory", path);
  plugin->path = dlop__absolute_path(path);
  if (plugin->path == NULL) {
    free(plugin);
    return dlop__loader_error(report, DLOP_LOAD_ERROR, "%s: cannot make the path absolute: %s",
                              path, strerror(errno));
  }
  int status = check_file(report, plugin);
  if (status == DLOP_OK) {
    /* A truncated or corrupt file crashes the dynamic loader (SIGBUS past the end of a mapping,
     * wild relocations): refuse it from what the file says first. */
    char reason[512];
    if (dlop__elf_check(plugin->real_path, reason, sizeof reason) != 0)
      status = dlop__loader_error(report, DLOP_LOAD_ERROR,
                                  "%s: not a valid shared object for this machine: %s",
                                  plugin->path, reason);
  }
  /* What the ELF checks cannot see (a flipped byte in code that runs while loading: an ifunc
   * resolver, a constructor, the entry) crashes the probe's process instead of this one. */
  if (status == DLOP_OK && probe != NULL)
    status = dlop__probe_plugin(probe, plugin->path, plugin->real_path, report);
  if (status == DLOP_OK) {
    /* plugin->path is absolute, so dlopen never searches the system library paths. */
    plugin->handle = dlopen(plugin->path, RTLD_NOW | RTLD_LOCAL);
    if (plugin->handle == NULL) {
      const char *reason = dlerror();
      status = dlop__loader_error(report, DLOP_LOAD_ERROR,
                                  "%s: not a shared object or missing dependency: %s", plugin->path,
                                  reason ? reason : "dlopen failed");
    }
  }
  const dlop_plugin_desc *desc = NULL;
  if (status == DLOP_OK) status = call_entry(report, plugin, host, &desc);
  return dlop__finish_plugin(report, status, desc, plugin, out);
}

void dlop__plugin_close(dlop_plugin *plugin) {
  if (plugin == NULL) return;
  if (plugin->handle != NULL) dlclose(plugin->handle);
  free(plugin->ops);
  free(plugin->op_pointers);
  free(plugin->real_path);
  free(plugin->path);
  free(plugin);
}
