/* inprocess.c — a plugin defined inside this process, with no file: its init function called
 * with the host table as a file's entry symbol is, or its descriptor taken as it is, then the
 * same validation and normalization a file's descriptor gets (validate.c, normalize.c). Its
 * path is "in-process: ORIGIN"; it has no real path and no dlopen handle. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader_internal.h"

/* The prefix of an in-process plugin's path: listings and messages show it where a file's
 * path would be. */
#define INPROCESS_PREFIX "in-process: "
/* Longest origin accepted: it is a label, and it prefixes every message about the plugin. */
#define INPROCESS_ORIGIN_MAX 200

static int check_origin(dlop__loader_report *report, const char *origin) {
  if (origin == NULL || origin[0] == '\0')
    return dlop__loader_error(report, DLOP_INVALID_ARGUMENT,
                              "dlop_register_plugin: origin is %s: expected a short label saying "
                              "who defines the plugin (shown as \"" INPROCESS_PREFIX "ORIGIN\")",
                              origin ? "empty" : "NULL");
  size_t length = strlen(origin);
  if (length > INPROCESS_ORIGIN_MAX)
    return dlop__loader_error(report, DLOP_INVALID_ARGUMENT,
                              "dlop_register_plugin: origin '%.40s...' is %zu bytes long: expected "
                              "at most %d",
                              origin, length, INPROCESS_ORIGIN_MAX);
  for (size_t i = 0; i < length; i++)
    if ((unsigned char)origin[i] < 0x20 || origin[i] == 0x7f)
      return dlop__loader_error(report, DLOP_INVALID_ARGUMENT,
                                "dlop_register_plugin: origin '%.40s' holds control character "
                                "0x%02x at byte %zu: expected one line of text",
                                origin, (unsigned)(unsigned char)origin[i], i);
  return DLOP_OK;
}

int dlop__plugin_from_process(const char *origin, dlop_plugin_init_fn init,
                              const dlop_plugin_desc *descriptor, const dlop_host_api *host,
                              dlop__loader_report *report, dlop_plugin **out) {
  *out = NULL;
  int status = check_origin(report, origin);
  if (status != DLOP_OK) return status;
  if ((init == NULL) == (descriptor == NULL))
    return dlop__loader_error(report, DLOP_INVALID_ARGUMENT,
                              INPROCESS_PREFIX "%s: dlop_register_plugin got %s: expected exactly "
                              "one of init and descriptor",
                              origin, init == NULL ? "neither init nor a descriptor" : "both init and a descriptor");
  dlop_plugin *plugin = calloc(1, sizeof *plugin);
  size_t length = strlen(INPROCESS_PREFIX) + strlen(origin) + 1;
  if (plugin != NULL) plugin->path = malloc(length);
  if (plugin == NULL || plugin->path == NULL) {
    free(plugin);
    return dlop__loader_error(report, DLOP_OUT_OF_MEMORY, INPROCESS_PREFIX "%s: out of memory",
                              origin);
  }
  snprintf(plugin->path, length, INPROCESS_PREFIX "%s", origin);
  const dlop_plugin_desc *desc = descriptor;
  if (init != NULL) status = dlop__call_plugin_init(report, plugin->path, "init", init, host, &desc);
  return dlop__finish_plugin(report, status, desc, plugin, out);
}
