/* test_probe.c — the plugin probe: a plugin file whose loading crashes, aborts, exits or hangs
 * (the fixtures in tests/fixtures/probe/) is refused with a load error naming the file and what
 * happened, and the host and the other plugins live on; without the probe the same file kills
 * the process. The modes (off, all, external: bundled plugins unprobed), the memory and disk
 * caches (an entry per file identity, reused, replaced when corrupt, none for a crash) and a
 * missing dlop-probe program. */
#include <dirent.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_support.h"

/* Built with AddressSanitizer: loading a crashing plugin unprobed must end the child by its
 * signal (ASan's SEGV handler would exit 1), as it does in any other build. */
#if defined(__SANITIZE_ADDRESS__)
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "handle_segv=0:handle_sigbus=0:handle_abort=0"; }
#endif

#define PROBE_FIXTURE(name) DLOP_TEST_FIXTURE_DIR "/probe/" name ".so"
#define FIXTURE(name) DLOP_TEST_FIXTURE_DIR "/" name ".so"

/* A fresh cache directory for this test (each test runs in its own process). */
static char cache_root[64];
static char cache_entries[128];

static void use_fresh_cache(void) {
  snprintf(cache_root, sizeof cache_root, "/tmp/dlop_test_probe_cache_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(cache_root));
  setenv("DLOP_CACHE_DIR", cache_root, 1);
  snprintf(cache_entries, sizeof cache_entries, "%s/plugin-probe", cache_root);
  unsetenv("DLOP_PLUGIN_PROBE");
  unsetenv("DLOP_PLUGIN_PROBE_TIMEOUT");
}

static int cache_entry_count(void) {
  DIR *dir = opendir(cache_entries);
  if (dir == NULL) return 0;
  int count = 0;
  for (struct dirent *entry; (entry = readdir(dir)) != NULL;) count += entry->d_name[0] != '.';
  closedir(dir);
  return count;
}

/* The one entry's path into path (the test made exactly one). */
static void only_cache_entry(char *path, size_t size) {
  DIR *dir = opendir(cache_entries);
  ck_assert_ptr_nonnull(dir);
  int found = 0;
  for (struct dirent *entry; (entry = readdir(dir)) != NULL;) {
    if (entry->d_name[0] == '.') continue;
    snprintf(path, size, "%s/%s", cache_entries, entry->d_name);
    found++;
  }
  closedir(dir);
  ck_assert_int_eq(found, 1);
}

/* Load path expecting a probe refusal: DLOP_LOAD_ERROR, a message starting with the path and
 * "plugin probe: " and containing what, nothing registered. */
static void expect_refused(const char *path, const char *what) {
  const dlop_plugin *plugin = NULL;
  int status = dlop_load_plugin(path, &plugin);
  const char *message = dlop_last_error();
  ck_assert_msg(status == DLOP_LOAD_ERROR, "%s: expected DLOP_LOAD_ERROR, got %s (%s)", path,
                dlop_status_name(status), message);
  ck_assert_ptr_null(plugin);
  char prefix[512];
  snprintf(prefix, sizeof prefix, "%s: plugin probe: ", path);
  ck_assert_msg(strncmp(message, prefix, strlen(prefix)) == 0, "expected \"%s...\": %s", prefix,
                message);
  ck_assert_msg(strstr(message, what) != NULL, "expected \"%s\" in: %s", what, message);
  ck_assert_int_eq(dlop_plugin_count(), 0);
}

/* Run body in a forked child and return its wait status (for what must not happen in the test's
 * own process: a crash, or a second process's view of the disk cache). */
static int in_child(void (*body)(void)) {
  fflush(stdout);
  fflush(stderr);
  pid_t child = fork();
  ck_assert_int_ge(child, 0);
  if (child == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(child, &status, 0), child);
  return status;
}

/* ---- what the probe refuses ---------------------------------------------------------------- */

START_TEST(crash_in_constructor_is_refused) {
  use_fresh_cache();
  expect_refused(PROBE_FIXTURE("constructor_segfaults"),
                 "loading it in a child process ended with signal 11 (Segmentation fault)");
  /* A crash may have been the machine's doing: never remembered on disk. */
  ck_assert_int_eq(cache_entry_count(), 0);
}
END_TEST

START_TEST(abort_in_entry_is_refused_with_its_output) {
  use_fresh_cache();
  expect_refused(PROBE_FIXTURE("entry_aborts"),
                 "ended with signal 6 (Aborted); its last output: \"fixture entry_aborts: giving "
                 "up\"");
}
END_TEST

START_TEST(exit_in_constructor_is_refused) {
  /* The probe's exit status alone (0) would say "fine": its result line is what counts. */
  use_fresh_cache();
  expect_refused(PROBE_FIXTURE("constructor_exits"),
                 "ended with exit status 0 before the load returned");
}
END_TEST

START_TEST(crash_at_exit_is_refused) {
  use_fresh_cache();
  expect_refused(PROBE_FIXTURE("destructor_segfaults"),
                 "returned, but that process then ended with signal 11 (Segmentation fault) "
                 "while exiting");
}
END_TEST

START_TEST(hang_is_refused_after_the_time_limit) {
  use_fresh_cache();
  setenv("DLOP_PLUGIN_PROBE_TIMEOUT", "1", 1);
  expect_refused(PROBE_FIXTURE("constructor_hangs"),
                 "did not finish within 1 s (the probe was killed");
}
END_TEST

START_TEST(fine_plugin_loads_after_its_probe) {
  use_fresh_cache();
  const dlop_plugin *plugin = NULL;
  DLOP_CK_OK(dlop_load_plugin(PROBE_FIXTURE("fine"), &plugin));
  ck_assert_str_eq(dlop_plugin_name(plugin), "fixture_probe_fine");
  ck_assert_ptr_nonnull(dlop_find_op("fixture_probe_scale"));
  ck_assert_int_eq(cache_entry_count(), 1);
}
END_TEST

START_TEST(load_errors_of_the_file_itself_pass_through) {
  /* The child refuses these with a load error of their own: loading them here is safe, and the
   * error is the loader's usual one, not the probe's. */
  use_fresh_cache();
  const dlop_plugin *plugin = NULL;
  ck_assert_int_eq(dlop_load_plugin(FIXTURE("init_fails"), &plugin), DLOP_PLUGIN_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "license file /nonexistent/fixture.lic is missing"),
                "%s", dlop_last_error());
  ck_assert_ptr_null(strstr(dlop_last_error(), "plugin probe"));
  ck_assert_int_eq(dlop_load_plugin(FIXTURE("no_entry_symbol"), &plugin), DLOP_LOAD_ERROR);
  ck_assert_msg(strstr(dlop_last_error(), "no entry symbol"), "%s", dlop_last_error());
  /* Only files that load are worth an entry on disk. */
  ck_assert_int_eq(cache_entry_count(), 0);
}
END_TEST

START_TEST(crashing_plugins_never_stop_the_others) {
  use_fresh_cache();
  dlop_set_load_error_warnings(0);
  dlop_test_load_default(FIXTURE("good") ":" PROBE_FIXTURE("constructor_segfaults") ":"
                         PROBE_FIXTURE("entry_aborts") ":" PROBE_FIXTURE("fine") ":"
                         PROBE_FIXTURE("constructor_exits"),
                         "");
  ck_assert_int_eq(dlop_plugin_count(), 2);
  ck_assert_ptr_nonnull(dlop_find_op("fixture_scale"));
  ck_assert_ptr_nonnull(dlop_find_op("fixture_probe_scale"));
  static const char *const refused[] = {"constructor_segfaults", "entry_aborts",
                                        "constructor_exits"};
  ck_assert_int_eq(dlop_load_error_count(), 3);
  for (int i = 0; i < 3; i++) {
    char prefix[512];
    snprintf(prefix, sizeof prefix, "%s/probe/%s.so: plugin probe: ", DLOP_TEST_FIXTURE_DIR,
             refused[i]);
    ck_assert_msg(strncmp(dlop_load_error_at(i), prefix, strlen(prefix)) == 0,
                  "load error %d: expected \"%s...\", got %s", i, prefix, dlop_load_error_at(i));
  }
}
END_TEST

static void load_crashing_plugin_unprobed(void) {
  dlop_set_plugin_probe(DLOP_PLUGIN_PROBE_OFF);
  const dlop_plugin *plugin = NULL;
  dlop_load_plugin(PROBE_FIXTURE("constructor_segfaults"), &plugin);
}

START_TEST(without_the_probe_the_same_file_kills_the_host) {
  int status = in_child(load_crashing_plugin_unprobed);
  ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV,
                "loading constructor_segfaults.so unprobed: expected SIGSEGV, got status 0x%x",
                (unsigned)status);
}
END_TEST

/* ---- remembering ------------------------------------------------------------------------- */

START_TEST(refusal_is_remembered_in_this_process) {
  use_fresh_cache();
  expect_refused(PROBE_FIXTURE("entry_aborts"), "signal 6 (Aborted)");
  char first[1024];
  snprintf(first, sizeof first, "%s", dlop_last_error());
  expect_refused(PROBE_FIXTURE("entry_aborts"), "signal 6 (Aborted)");
  ck_assert_str_eq(dlop_last_error(), first);
}
END_TEST

static void load_fine(void) {
  const dlop_plugin *plugin = NULL;
  if (dlop_load_plugin(PROBE_FIXTURE("fine"), &plugin) != DLOP_OK) _exit(1);
}

START_TEST(disk_entry_is_reused_by_the_next_process) {
  use_fresh_cache();
  ck_assert_int_eq(in_child(load_fine), 0);
  char entry[512];
  only_cache_entry(entry, sizeof entry);
  struct stat before, after;
  ck_assert_int_eq(stat(entry, &before), 0);
  /* Another process finds the entry and probes no more: a probe would write a new entry file
   * (renamed into place, so another inode). */
  ck_assert_int_eq(in_child(load_fine), 0);
  ck_assert_int_eq(stat(entry, &after), 0);
  ck_assert_int_eq(cache_entry_count(), 1);
  ck_assert_msg(before.st_ino == after.st_ino, "the entry was rewritten: the file was probed again");
}
END_TEST

START_TEST(corrupt_disk_entry_is_replaced) {
  use_fresh_cache();
  ck_assert_int_eq(in_child(load_fine), 0);
  char entry[512], text[8192];
  only_cache_entry(entry, sizeof entry);
  FILE *file = fopen(entry, "r");
  ck_assert_ptr_nonnull(file);
  size_t length = fread(text, 1, sizeof text - 1, file);
  fclose(file);
  text[length] = '\0';
  ck_assert_msg(strstr(text, "result ok\n") != NULL, "%s", text);
  /* Cut in the middle, as a writer that died would leave it without the rename. */
  ck_assert_int_eq(truncate(entry, (off_t)(length / 2)), 0);
  ck_assert_int_eq(in_child(load_fine), 0);
  file = fopen(entry, "r");
  ck_assert_ptr_nonnull(file);
  char again[8192];
  size_t again_length = fread(again, 1, sizeof again - 1, file);
  fclose(file);
  again[again_length] = '\0';
  ck_assert_str_eq(again, text);
}
END_TEST

static char changing_copy[128];

static void load_changing_copy(void) {
  const dlop_plugin *plugin = NULL;
  int status = dlop_load_plugin(changing_copy, &plugin);
  if (status == DLOP_OK) _exit(10);
  if (strstr(dlop_last_error(), "plugin probe: loading it in a child process ended with signal 11") == NULL) {
    fprintf(stderr, "unexpected error: %s\n", dlop_last_error());
    _exit(11);
  }
  _exit(12);
}

START_TEST(changed_file_is_probed_again) {
  use_fresh_cache();
  char dir[] = "/tmp/dlop_test_probe_file_XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(changing_copy, sizeof changing_copy, "%s/plugin.so", dir);
  dlop_test_copy_file(PROBE_FIXTURE("fine"), changing_copy);
  int status = in_child(load_changing_copy);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 10, "the fine copy: status 0x%x",
                (unsigned)status);
  ck_assert_int_eq(cache_entry_count(), 1);
  /* The same path, now the crashing file: its identity changed, so the entry for the fine file
   * does not apply and the next process probes it afresh (reusing the entry would crash it). */
  dlop_test_copy_file(PROBE_FIXTURE("constructor_segfaults"), changing_copy);
  status = in_child(load_changing_copy);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 12,
                "the changed file: expected it refused by its probe, got status 0x%x",
                (unsigned)status);
  unlink(changing_copy);
  rmdir(dir);
}
END_TEST

/* ---- modes ------------------------------------------------------------------------------- */

/* good.so on DLOP_PLUGIN_PATH and a copy of fine.so as the only bundled plugin: how many cache
 * entries a default load leaves says which of the two were probed. */
static int entries_after_default_load(void) {
  char bundled[] = "/tmp/dlop_test_probe_bundled_XXXXXX", copy[128];
  ck_assert_ptr_nonnull(mkdtemp(bundled));
  snprintf(copy, sizeof copy, "%s/fine.so", bundled);
  dlop_test_copy_file(PROBE_FIXTURE("fine"), copy);
  dlop_test_load_default(FIXTURE("good"), bundled);
  ck_assert_int_eq(dlop_load_error_count(), 0);
  ck_assert_int_eq(dlop_plugin_count(), 2);
  return cache_entry_count();
}

START_TEST(default_mode_probes_all_but_the_bundled_plugins) {
  use_fresh_cache();
  ck_assert_int_eq(dlop_plugin_probe(), DLOP_PLUGIN_PROBE_EXTERNAL);
  ck_assert_int_eq(entries_after_default_load(), 1);
}
END_TEST

START_TEST(mode_all_probes_the_bundled_plugins_too) {
  use_fresh_cache();
  setenv("DLOP_PLUGIN_PROBE", "all", 1);
  ck_assert_int_eq(dlop_plugin_probe(), DLOP_PLUGIN_PROBE_ALL);
  ck_assert_int_eq(entries_after_default_load(), 2);
}
END_TEST

START_TEST(mode_off_probes_nothing) {
  use_fresh_cache();
  setenv("DLOP_PLUGIN_PROBE", "0", 1);
  ck_assert_int_eq(dlop_plugin_probe(), DLOP_PLUGIN_PROBE_OFF);
  ck_assert_int_eq(entries_after_default_load(), 0);
}
END_TEST

START_TEST(mode_set_through_the_api) {
  use_fresh_cache();
  setenv("DLOP_PLUGIN_PROBE", "off", 1);
  DLOP_CK_OK(dlop_set_plugin_probe(DLOP_PLUGIN_PROBE_ALL));
  ck_assert_int_eq(dlop_plugin_probe(), DLOP_PLUGIN_PROBE_ALL);
  ck_assert_int_eq(dlop_set_plugin_probe(7), DLOP_INVALID_ARGUMENT);
  ck_assert_msg(strstr(dlop_last_error(), "mode 7 is not one of DLOP_PLUGIN_PROBE_OFF (0)"),
                "%s", dlop_last_error());
  ck_assert_int_eq(dlop_plugin_probe(), DLOP_PLUGIN_PROBE_ALL);
  ck_assert_int_eq(entries_after_default_load(), 2);
}
END_TEST

START_TEST(unknown_mode_in_the_environment_warns_and_probes) {
  use_fresh_cache();
  setenv("DLOP_PLUGIN_PROBE", "sometimes", 1);
  dlop_test_capture_stderr();
  int mode = dlop_plugin_probe();
  const char *warnings = dlop_test_captured_stderr();
  ck_assert_int_eq(mode, DLOP_PLUGIN_PROBE_EXTERNAL);
  ck_assert_msg(strstr(warnings, "DLOP_PLUGIN_PROBE='sometimes' is not one of off (or 0), all "
                                 "(or 1), external"),
                "%s", warnings);
}
END_TEST

/* ---- a missing probe program ------------------------------------------------------------- */

/* A second libdlop, copied alone into an empty directory and dlopen'ed: it looks for
 * dlop-probe beside itself, finds nothing, and says so for each file it would probe. */
START_TEST(missing_probe_program_is_a_load_error) {
  use_fresh_cache();
  char dir[] = "/tmp/dlop_test_probe_lone_XXXXXX", copy[128];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(copy, sizeof copy, "%s/libdlop.so.0", dir);
  dlop_test_copy_file(DLOP_TEST_LIBDLOP, copy);
  void *lone = dlopen(copy, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(lone != NULL, "%s", dlerror());
  int (*load)(const char *, const dlop_plugin **) =
      (int (*)(const char *, const dlop_plugin **))dlsym(lone, "dlop_load_plugin");
  const char *(*last_error)(void) = (const char *(*)(void))dlsym(lone, "dlop_last_error");
  ck_assert_ptr_nonnull(load);
  ck_assert_ptr_nonnull(last_error);
  const dlop_plugin *plugin = NULL;
  ck_assert_int_eq(load(FIXTURE("good"), &plugin), DLOP_LOAD_ERROR);
  char expected[512];
  snprintf(expected, sizeof expected,
           "%s: plugin probe: the probe program %s/dlop/dlop-probe is missing (No such file or "
           "directory): reinstall dlop, or set DLOP_PLUGIN_PROBE=off",
           FIXTURE("good"), dir);
  ck_assert_msg(strncmp(last_error(), expected, strlen(expected)) == 0, "expected \"%s...\": %s",
                expected, last_error());
  unlink(copy);
  rmdir(dir);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("probe");
  TCase *refused = dlop_test_tcase(suite, "refused", 0, NULL, NULL);
  dlop_test_add_tests(refused,
                      crash_in_constructor_is_refused,
                      abort_in_entry_is_refused_with_its_output,
                      exit_in_constructor_is_refused,
                      crash_at_exit_is_refused,
                      hang_is_refused_after_the_time_limit,
                      fine_plugin_loads_after_its_probe,
                      load_errors_of_the_file_itself_pass_through,
                      crashing_plugins_never_stop_the_others,
                      without_the_probe_the_same_file_kills_the_host,
                      NULL);
  TCase *remembered = dlop_test_tcase(suite, "remembered", 0, NULL, NULL);
  dlop_test_add_tests(remembered,
                      refusal_is_remembered_in_this_process,
                      disk_entry_is_reused_by_the_next_process,
                      corrupt_disk_entry_is_replaced,
                      changed_file_is_probed_again,
                      NULL);
  TCase *modes = dlop_test_tcase(suite, "modes", 0, NULL, NULL);
  dlop_test_add_tests(modes,
                      default_mode_probes_all_but_the_bundled_plugins,
                      mode_all_probes_the_bundled_plugins_too,
                      mode_off_probes_nothing,
                      mode_set_through_the_api,
                      unknown_mode_in_the_environment_warns_and_probes,
                      missing_probe_program_is_a_load_error,
                      NULL);
  return dlop_test_run_suite(suite);
}
