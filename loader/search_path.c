/* search_path.c — where plugins are looked for: the entries of DLOP_PLUGIN_PATH (directories
 * and files, absolute only, never the current directory implicitly) and the bundled plugin
 * directory, found next to libdlop itself with dladdr (or DLOP_BUNDLED_PLUGINS); where the
 * dlop-probe program lies, next to libdlop too; and the file libdlop itself was loaded from. */
#define _GNU_SOURCE /* dladdr */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "loader_internal.h"

/* The bundled plugin directory relative to libdlop's: defined once, in the top-level
 * CMakeLists.txt (DLOP_PLUGIN_SUBDIR, "dlop/plugins"), which lays out the trees to match. */
#ifndef DLOP_PLUGIN_SUBDIR
#error "DLOP_PLUGIN_SUBDIR must be defined by the build (see the top-level CMakeLists.txt)"
#endif
/* Likewise the dlop-probe program relative to libdlop's directory ("dlop/dlop-probe"). */
#ifndef DLOP_PROBE_PROGRAM_SUBPATH
#error "DLOP_PROBE_PROGRAM_SUBPATH must be defined by the build (see the top-level CMakeLists.txt)"
#endif

int dlop__string_list_push(dlop__string_list *list, const char *text) {
  if (list->count == list->capacity) {
    int capacity = list->capacity ? 2 * list->capacity : 16;
    char **items = realloc(list->items, (size_t)capacity * sizeof *items);
    if (items == NULL) return -1;
    list->items = items;
    list->capacity = capacity;
  }
  char *copy = strdup(text);
  if (copy == NULL) return -1;
  list->items[list->count++] = copy;
  return 0;
}

int dlop__string_list_pushf(dlop__string_list *list, const char *format, ...) {
  char text[2048];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof text, format, args);
  va_end(args);
  return dlop__string_list_push(list, text);
}

void dlop__string_list_free(dlop__string_list *list) {
  for (int i = 0; i < list->count; i++) free(list->items[i]);
  free(list->items);
  list->items = NULL;
  list->count = list->capacity = 0;
}

static int ends_with_so(const char *name) {
  size_t length = strlen(name);
  return length > 3 && strcmp(name + length - 3, ".so") == 0;
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int dlop__collect_directory(const char *directory, const char *origin, dlop__string_list *files,
                            dlop__string_list *errors) {
  DIR *dir = opendir(directory);
  if (dir == NULL) {
    dlop__string_list_pushf(errors, "%s: cannot read the plugin directory (%s): %s", directory,
                            origin, strerror(errno));
    return -1;
  }
  dlop__string_list names = {0};
  struct dirent *entry;
  while ((entry = readdir(dir)) != NULL) {
    /* Hidden files are editor and build leftovers, not plugins someone meant to install. */
    if (entry->d_name[0] != '.' && ends_with_so(entry->d_name))
      dlop__string_list_push(&names, entry->d_name);
  }
  closedir(dir);
  /* Sorted by name so the load order (and which of two duplicate ops wins) is reproducible. */
  if (names.count > 1) qsort(names.items, (size_t)names.count, sizeof *names.items, compare_names);
  size_t length = strlen(directory);
  const char *separator = (length > 0 && directory[length - 1] == '/') ? "" : "/";
  for (int i = 0; i < names.count; i++)
    dlop__string_list_pushf(files, "%s%s%s", directory, separator, names.items[i]);
  dlop__string_list_free(&names);
  return 0;
}

void dlop__collect_plugin_path(const char *value, dlop__loader_report *report,
                               dlop__string_list *files, dlop__string_list *errors) {
  if (value == NULL) return;
  const char *start = value;
  for (;;) {
    const char *end = strchr(start, ':');
    size_t length = end ? (size_t)(end - start) : strlen(start);
    char entry[PATH_MAX];
    /* Empty entries ("a::b", a leading or trailing ':') mean nothing: unlike PATH, they are
     * never the current directory. */
    if (length > 0 && length < sizeof entry) {
      memcpy(entry, start, length);
      entry[length] = '\0';
      struct stat info;
      if (entry[0] != '/') {
        dlop__loader_warn(
            report,
            "DLOP_PLUGIN_PATH entry '%s' is relative and was ignored: use an absolute "
            "path (plugins are never loaded relative to the current directory)",
            entry);
      } else if (stat(entry, &info) != 0) {
        dlop__string_list_pushf(errors, "%s: listed in DLOP_PLUGIN_PATH but cannot be read: %s",
                                entry, strerror(errno));
      } else if (S_ISDIR(info.st_mode)) {
        dlop__collect_directory(entry, "from DLOP_PLUGIN_PATH", files, errors);
      } else {
        dlop__string_list_push(files, entry);
      }
    } else if (length >= sizeof entry) {
      dlop__string_list_pushf(errors, "%.64s...: DLOP_PLUGIN_PATH entry longer than %d bytes",
                              start, PATH_MAX - 1);
    }
    if (end == NULL) break;
    start = end + 1;
  }
}

int dlop__library_path(const void *address, char *buffer, size_t size) {
  if (buffer == NULL || size == 0) return 0;
  buffer[0] = '\0';
  Dl_info info;
  if (dladdr(address, &info) == 0 || info.dli_fname == NULL || info.dli_fname[0] == '\0')
    return 0;
  char library[PATH_MAX];
  /* realpath also folds the "bin/../lib" that an $ORIGIN rpath leaves in the name. */
  if (realpath(info.dli_fname, library) == NULL) {
    if (info.dli_fname[0] != '/') return 0;
    snprintf(library, sizeof library, "%s", info.dli_fname);
  }
  int written = snprintf(buffer, size, "%s", library);
  return written > 0 && (size_t)written < size;
}

/* The directory of the shared object (or program) holding address into buffer. Returns 1, or
 * 0 when it cannot be determined. */
static int library_directory(const void *address, char *buffer, size_t size) {
  char library[PATH_MAX];
  if (!dlop__library_path(address, library, sizeof library)) return 0;
  char *slash = strrchr(library, '/');
  if (slash == NULL) return 0;
  *slash = '\0';
  int written = snprintf(buffer, size, "%s", library);
  return written > 0 && (size_t)written < size;
}

int dlop__bundled_plugin_dir(const void *library_address, char *buffer, size_t size,
                             int *from_environment) {
  const char *override = getenv("DLOP_BUNDLED_PLUGINS");
  if (from_environment) *from_environment = override != NULL;
  if (buffer == NULL || size == 0) return 0;
  buffer[0] = '\0';
  if (override != NULL) {
    snprintf(buffer, size, "%s", override);
    return override[0] != '\0';
  }
  /* Relative to the library holding library_address (libdlop itself), so a build tree and an
   * installed tree both work: <libdir>/libdlop.so next to <libdir>/dlop/plugins/. */
  char directory[PATH_MAX];
  if (!library_directory(library_address, directory, sizeof directory)) return 0;
  int written = snprintf(buffer, size, "%s/%s", directory, DLOP_PLUGIN_SUBDIR);
  return written > 0 && (size_t)written < size;
}

int dlop__probe_program_path(const void *library_address, char *buffer, size_t size) {
  if (buffer == NULL || size == 0) return 0;
  buffer[0] = '\0';
  char directory[PATH_MAX];
  if (!library_directory(library_address, directory, sizeof directory)) return 0;
  int written = snprintf(buffer, size, "%s/%s", directory, DLOP_PROBE_PROGRAM_SUBPATH);
  return written > 0 && (size_t)written < size;
}
