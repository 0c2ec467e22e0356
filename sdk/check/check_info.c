/* check_info.c — the plugin's optional check info (dlop/check_info.h: dtypes the values check
 * leaves out, reference functions), looked up with dlsym in the test processes only (plugin code
 * never runs in dlop-check's own process), checked once per process, and searched per op. */
#define _GNU_SOURCE /* RTLD_NOLOAD */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <dlop/check_info.h>
#include <dlop/kit/kernel_error.h>

#include "check_suite.h"

static int looked_up;
static const dlop_check_info *info;
static dlop_check_info info_copy; /* zero-filled beyond the plugin's struct_size */
static char problem[1024];        /* why the info cannot be used ("" when it can) */

/* The first fields of each struct, which every version has. */
#define INFO_MIN_SIZE (offsetof(dlop_check_info, num_ops) + sizeof(int32_t))
#define OP_INFO_MIN_SIZE (offsetof(dlop_check_op_info, reference) + sizeof(dlop_check_reference_fn))

static dlop_check_op_info op_copy(const dlop_check_op_info *entry) {
  dlop_check_op_info copy;
  memset(&copy, 0, sizeof copy);
  memcpy(&copy, entry, entry->struct_size < sizeof copy ? entry->struct_size : sizeof copy);
  return copy;
}

static const dlop_op_desc *plugin_op_named(const char *name) {
  for (int i = 0; check_plugin && i < dlop_plugin_op_count(check_plugin); i++)
    if (strcmp(dlop_plugin_op(check_plugin, i)->name, name) == 0) return dlop_plugin_op(check_plugin, i);
  return NULL;
}

/* Everything the suite relies on: sizes, a name of the plugin's ops (once), known dtype bits
 * the op declares, a reason for each exclusion. */
static void validate(void) {
  if (info->struct_size < INFO_MIN_SIZE) {
    snprintf(problem, sizeof problem, "dlop_check_info.struct_size is %u, less than the %zu "
             "bytes of its first version", (unsigned)info->struct_size, (size_t)INFO_MIN_SIZE);
    return;
  }
  memset(&info_copy, 0, sizeof info_copy);
  memcpy(&info_copy, info, info->struct_size < sizeof info_copy ? info->struct_size : sizeof info_copy);
  if (info_copy.num_ops < 0 || (info_copy.num_ops > 0 && info_copy.ops == NULL)) {
    snprintf(problem, sizeof problem, "dlop_check_info lists %d ops at %p", (int)info_copy.num_ops,
             (const void *)info_copy.ops);
    return;
  }
  for (int32_t k = 0; k < info_copy.num_ops; k++) {
    const dlop_check_op_info *entry = info_copy.ops[k];
    if (entry == NULL || entry->struct_size < OP_INFO_MIN_SIZE) {
      snprintf(problem, sizeof problem, "ops[%d] of dlop_check_info is %s", (int)k,
               entry ? "shorter than the first version of dlop_check_op_info (struct_size)"
                     : "NULL");
      return;
    }
    dlop_check_op_info e = op_copy(entry);
    const dlop_op_desc *op = e.op_name ? plugin_op_named(e.op_name) : NULL;
    if (op == NULL) {
      snprintf(problem, sizeof problem, "ops[%d] of dlop_check_info names op '%s', which the "
               "plugin does not declare", (int)k, e.op_name ? e.op_name : "(NULL)");
      return;
    }
    for (int32_t j = 0; j < k; j++)
      if (strcmp(op_copy(info_copy.ops[j]).op_name, e.op_name) == 0) {
        snprintf(problem, sizeof problem, "dlop_check_info describes op %s twice (ops[%d] and "
                 "ops[%d])", e.op_name, (int)j, (int)k);
        return;
      }
    uint32_t declared = dlop_op_dtypes(op, DLOP_DEVICE_CPU) | dlop_op_dtypes(op, DLOP_DEVICE_CUDA);
    if (e.values_excluded & ~declared) {
      char extra[256], text[256];
      dlop_format_dtypes(e.values_excluded & ~declared, extra, sizeof extra);
      dlop_format_dtypes(declared, text, sizeof text);
      snprintf(problem, sizeof problem, "op %s's check info excludes dtypes it does not declare "
               "from the values check: %s (it declares %s)", e.op_name, extra, text);
      return;
    }
    if (e.values_excluded && (e.values_excluded_why == NULL || e.values_excluded_why[0] == '\0')) {
      snprintf(problem, sizeof problem, "op %s's check info excludes dtypes from the values "
               "check but says not why (values_excluded_why is empty)", e.op_name);
      return;
    }
  }
}

const dlop_check_info *check_info_get(void) {
  if (looked_up) return problem[0] ? NULL : info;
  looked_up = 1;
  if (check_plugin == NULL) return NULL;
  void *handle = dlopen(dlop_plugin_path(check_plugin), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (handle == NULL) return NULL;
  dlop_plugin_check_info_fn get =
      (dlop_plugin_check_info_fn)dlsym(handle, DLOP_CHECK_INFO_SYMBOL);
  dlclose(handle); /* the loader's reference keeps the file loaded */
  if (get == NULL) return NULL;
  char error[512] = "";
  check_where_stage(DLOP_CHECK_INFO_SYMBOL);
  int status = get(DLOP_CHECK_INFO_VERSION, &info, error, sizeof error);
  check_where_returned();
  if (status != DLOP_OK)
    snprintf(problem, sizeof problem, "%s failed: %s: %s", DLOP_CHECK_INFO_SYMBOL,
             dlop_status_name(status), error[0] ? error : "(no message)");
  else if (info == NULL)
    snprintf(problem, sizeof problem, "%s returned DLOP_OK without a dlop_check_info",
             DLOP_CHECK_INFO_SYMBOL);
  else
    validate();
  return problem[0] ? NULL : info;
}

const char *check_info_problem(void) {
  check_info_get();
  return problem;
}

int check_info_for_op(const dlop_op_desc *op, dlop_check_op_info *entry) {
  memset(entry, 0, sizeof *entry);
  if (check_info_get() == NULL) return 0;
  for (int32_t k = 0; k < info_copy.num_ops; k++) {
    dlop_check_op_info e = op_copy(info_copy.ops[k]);
    if (strcmp(e.op_name, op->name) == 0) {
      *entry = e;
      return 1;
    }
  }
  return 0;
}
