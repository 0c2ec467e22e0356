/* check_tests_plugin.c — the plugin-level checks: the loader accepts the file (ABI version,
 * struct sizes, metadata: its own validation, reported with its message), the entry symbol is
 * the only exported symbol, and dlop_plugin_init refuses a host of another ABI major; and the
 * test an op beyond the suite's limits (operands, parameters) gets instead of the others. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "check_suite.h"

START_TEST(loader_accepts_plugin) {
  ck_assert_msg(check_plugin != NULL, "plugin, check loader_accepts_plugin: the loader refused "
                "the file (entry symbol, ABI version, struct sizes, metadata): %s", check_load_error);
  uint32_t abi = dlop_plugin_abi_version(check_plugin);
  ck_assert_msg(DLOP_ABI_VERSION_MAJOR_OF(abi) == DLOP_ABI_MAJOR,
                "plugin, check loader_accepts_plugin: built for ABI %u.%u, this host speaks %u.%u",
                DLOP_ABI_VERSION_MAJOR_OF(abi), DLOP_ABI_VERSION_MINOR_OF(abi),
                (unsigned)DLOP_ABI_MAJOR, (unsigned)DLOP_ABI_MINOR);
  ck_assert_msg(dlop_plugin_op_count(check_plugin) > 0,
                "plugin, check loader_accepts_plugin: the plugin declares no ops");
}
END_TEST

START_TEST(exports_only_entry_symbol) {
  char list[2048];
  /* dlop_plugin_check_info, read by dlop check only, is the one other name a plugin may export */
  static const char *const allowed[] = {DLOP_PLUGIN_ENTRY_SYMBOL, DLOP_CHECK_INFO_SYMBOL, NULL};
  int count = check_elf_extra_exports(check_opts.plugin_path, allowed, list, sizeof list);
  ck_assert_msg(count >= 0, "plugin, check exports_only_entry_symbol: %s", list);
  ck_assert_msg(count == 0,
                "plugin, check exports_only_entry_symbol: %s exports %d symbol%s besides %s: %s "
                "(build with -fvisibility=hidden, as dlop_add_plugin does, and mark only "
                "dlop_plugin_init DLOP_PLUGIN_EXPORT; dlop_plugin_check_info, for dlop check, may "
                "be exported too)", check_opts.plugin_path, count,
                count == 1 ? "" : "s", DLOP_PLUGIN_ENTRY_SYMBOL, list);
}
END_TEST

START_TEST(init_refuses_other_abi_major) {
  ck_assert_msg(check_plugin != NULL, "plugin, check init_refuses_other_abi_major: not loaded "
                "(see loader_accepts_plugin)");
  /* The file is loaded already: dlopen hands back the same handle. */
  void *handle = dlopen(dlop_plugin_path(check_plugin), RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(handle != NULL, "plugin, check init_refuses_other_abi_major: dlopen: %s", dlerror());
  dlop_plugin_init_fn init = (dlop_plugin_init_fn)dlsym(handle, DLOP_PLUGIN_ENTRY_SYMBOL);
  ck_assert_msg(init != NULL, "plugin, check init_refuses_other_abi_major: no %s",
                DLOP_PLUGIN_ENTRY_SYMBOL);
  const dlop_plugin_desc *desc = NULL;
  char error[1024] = "";
  unsigned other = DLOP_MAKE_ABI_VERSION(DLOP_ABI_MAJOR + 1, 0);
  check_where_stage("dlop_plugin_init, called with a host of the next ABI major");
  int status = init(dlop_host_api_table(), other, &desc, error, sizeof error);
  check_where_returned();
  ck_assert_msg(status != DLOP_OK,
                "plugin, check init_refuses_other_abi_major: dlop_plugin_init accepted a host of "
                "ABI %u.0 (expected a non-OK status such as DLOP_ABI_MISMATCH: check the major "
                "first, e.g. with dlop_plugin_abi_compatible)", DLOP_ABI_MAJOR + 1);
  ck_assert_msg(error[0] != '\0',
                "plugin, check init_refuses_other_abi_major: dlop_plugin_init refused a host of "
                "ABI %u.0 with %s but wrote no message (say which ABI it was built for)",
                DLOP_ABI_MAJOR + 1, dlop_status_name(status));
}
END_TEST

/* The optional second symbol (dlop/check_info.h): when the plugin exports it, what it gives must
 * describe the plugin's own ops in a way the values check can use. */
START_TEST(check_info_valid) {
  ck_assert_msg(check_plugin != NULL, "plugin, check check_info_valid: not loaded (see "
                "loader_accepts_plugin)");
  check_info_get();
  ck_assert_msg(check_info_problem()[0] == '\0', "plugin, check check_info_valid: the plugin's "
                "check info (its %s, read by dlop check only) cannot be used: %s",
                DLOP_CHECK_INFO_SYMBOL, check_info_problem());
}
END_TEST

int check_op_within_limits(const dlop_op_desc *op, char *why, size_t size) {
  int32_t inputs = check_num_inputs(op);
  if (inputs <= CHECK_MAX_OPERANDS && op->num_outputs >= 1 &&
      op->num_outputs <= CHECK_MAX_OPERANDS && op->num_params <= CHECK_MAX_PARAMS)
    return 1;
  snprintf(why, size, "the op declares %d input%s, %d output%s and %d parameter%s; this suite "
           "drives ops of at most %d inputs, 1 to %d outputs and %d parameters, so it cannot "
           "certify this op (no other check ran; see 'Other limits' in docs/compliance.md)",
           (int)inputs, inputs == 1 ? "" : "s", (int)op->num_outputs,
           op->num_outputs == 1 ? "" : "s", (int)op->num_params, op->num_params == 1 ? "" : "s",
           CHECK_MAX_OPERANDS, CHECK_MAX_OPERANDS, CHECK_MAX_PARAMS);
  return 0;
}

START_TEST(op_within_suite_limits) {
  const check_case *c = check_case_at(_i);
  char why[512];
  if (!check_op_within_limits(c->op, why, sizeof why))
    check_fail(c, "op_within_suite_limits", NULL, 0, "%s", why);
}
END_TEST

void check_add_limits_test(TCase *tc, int case_index) {
  check_add_test(tc, op_within_suite_limits, case_index);
}

void check_add_plugin_tests(TCase *tc) {
  check_add_test(tc, loader_accepts_plugin, 0);
  /* an in-process plugin has no file to read exports from and no entry point to call */
  if (check_opts.elementwise_path == NULL) {
    check_add_test(tc, exports_only_entry_symbol, 0);
    check_add_test(tc, init_refuses_other_abi_major, 0);
  }
  check_add_test(tc, check_info_valid, 0);
}
