/* location.c — where this process's dlop lives: the libdlop file, the bundled plugin directory
 * in effect and the dlop-probe program (dlop_location_path), so that every host (`dlop info`,
 * dlop.info()) can say which installation it runs and two installations never disagree
 * silently. The paths come from the same functions the loader and the probe use. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "loader.h"
#include "plugin_probe.h"

static const char *location_name(int location) {
  switch (location) {
    case DLOP_LOCATION_LIBRARY: return "DLOP_LOCATION_LIBRARY";
    case DLOP_LOCATION_BUNDLED_PLUGINS: return "DLOP_LOCATION_BUNDLED_PLUGINS";
    case DLOP_LOCATION_PROBE_PROGRAM: return "DLOP_LOCATION_PROBE_PROGRAM";
    default: return NULL;
  }
}

static int copy_path(const char *path, int location, char *buffer, size_t size) {
  size_t length = strlen(path);
  if (length >= size)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_location_path(%s): the buffer holds %zu bytes, the path needs %zu",
                       location_name(location), size, length + 1);
  memcpy(buffer, path, length + 1);
  return DLOP_OK;
}

int dlop_location_path(int location, char *buffer, size_t size) {
  if (location_name(location) == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_location_path: location %d is not one of DLOP_LOCATION_LIBRARY (0), "
                       "DLOP_LOCATION_BUNDLED_PLUGINS (1), DLOP_LOCATION_PROBE_PROGRAM (2)",
                       location);
  if (buffer == NULL || size == 0)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_location_path(%s): the buffer is %s",
                       location_name(location), buffer == NULL ? "NULL" : "of size 0");
  buffer[0] = '\0';
  char path[PATH_MAX];
  if (location == DLOP_LOCATION_LIBRARY) {
    /* An address inside libdlop names the file it was loaded from (for a program linking the
     * runtime statically, that program). */
    if (!dlop__library_path((const void *)&dlop_location_path, path, sizeof path))
      return dlop__error(DLOP_NOT_FOUND, "dlop_location_path(DLOP_LOCATION_LIBRARY): dladdr "
                         "could not name the file libdlop was loaded from");
    return copy_path(path, location, buffer, size);
  }
  if (location == DLOP_LOCATION_PROBE_PROGRAM) {
    const char *program = dlop__probe_program();
    if (program[0] == '\0')
      return dlop__error(DLOP_NOT_FOUND, "dlop_location_path(DLOP_LOCATION_PROBE_PROGRAM): the "
                         "directory libdlop was loaded from could not be determined, so neither "
                         "could dlop-probe's place beside it");
    return copy_path(program, location, buffer, size);
  }
  /* The bundled plugin directory, by the rule the registry loads it with (registry.c). */
  int from_environment = 0;
  if (!dlop__bundled_plugin_dir((const void *)&dlop_location_path, path, sizeof path,
                                &from_environment))
    return dlop__error(DLOP_NOT_FOUND, "dlop_location_path(DLOP_LOCATION_BUNDLED_PLUGINS): %s",
                       from_environment ? "DLOP_BUNDLED_PLUGINS is set empty: no bundled plugins "
                                          "are loaded"
                                        : "the directory libdlop was loaded from could not be "
                                          "determined");
  if (from_environment && path[0] != '/')
    return dlop__error(DLOP_NOT_FOUND,
                       "dlop_location_path(DLOP_LOCATION_BUNDLED_PLUGINS): DLOP_BUNDLED_PLUGINS="
                       "'%s' is relative and is ignored: no bundled plugins are loaded",
                       path);
  return copy_path(path, location, buffer, size);
}
