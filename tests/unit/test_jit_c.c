/* test_jit_c.c — C compiled at run time by the host's C compiler (dlop__c_compile, sdk/src/
 * host_cc.c): a function compiled, loaded and called (options reach the compiler, <math.h>
 * links), a syntax error's message with the compiler's line numbers, no shell between dlop and
 * the compiler, DLOP_CC naming a missing compiler, modules counted per key and unloaded with
 * their last reference, and bad arguments. */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "jit.h"
#include "jit_test_support.h"
#include "test_support.h"

static const char adder_source[] =
    "#include <math.h>\n"
    "int dlop_test_add(int a, int b) { return a + b + OFFSET; }\n"
    "double dlop_test_hypot(double a, double b) { return sqrt(a * a + b * b); }\n";
static const char *const adder_options[] = {"-DOFFSET=100", "-fno-math-errno"};

/* In a child with DLOP_CC=./mycc: 0 when it compiles and its identity names <here>/./mycc. */
static int compile_with_relative_compiler(void *argument) {
  const char *here = argument;
  char why[2048] = "", error[4096] = "";
  if (!dlop__c_compiler_available(why, sizeof why)) {
    fprintf(stderr, "%s\n", why);
    return 1;
  }
  char expected[128];
  snprintf(expected, sizeof expected, "%s/./mycc\n", here);
  if (strncmp(why, expected, strlen(expected)) != 0) {
    fprintf(stderr, "identity %s, expected it to start with %s\n", why, expected);
    return 2;
  }
  dlop__c_module *module = NULL;
  if (dlop__c_compile(adder_source, adder_options, 2, &module, error, sizeof error) != DLOP_OK) {
    fprintf(stderr, "%s\n", error);
    return 3;
  }
  int (*add)(int, int) = (int (*)(int, int))dlop__c_module_symbol(module, "dlop_test_add");
  int right = add(1, 2) == 103;
  dlop__c_module_release(module);
  return right ? 0 : 4;
}

START_TEST(compiles_loads_and_calls_a_function) {
  dlop_test_fresh_cache();
  char error[4096] = "";
  dlop__c_module *module = NULL;
  DLOP_CK_OK(dlop__c_compile(adder_source, adder_options, 2, &module, error, sizeof error));
  ck_assert_ptr_nonnull(module);
  int (*add)(int, int) = (int (*)(int, int))dlop__c_module_symbol(module, "dlop_test_add");
  double (*hypotenuse)(double, double) =
      (double (*)(double, double))dlop__c_module_symbol(module, "dlop_test_hypot");
  ck_assert_ptr_nonnull(add);
  ck_assert_ptr_nonnull(hypotenuse);
  ck_assert_int_eq(add(2, 3), 105); /* -DOFFSET=100 reached the compiler */
  ck_assert_double_eq_tol(hypotenuse(3.0, 4.0), 5.0, 1e-15);
  ck_assert_ptr_null(dlop__c_module_symbol(module, "no_such_function"));
  /* The entry on disk is a whole shared object, found and not left as a temporary file. */
  ck_assert_int_eq(dlop_test_cache_files(".so", 0, NULL, 0), 1);
  ck_assert_int_eq(dlop_test_cache_files("", 1, NULL, 0), 1);
  dlop__c_module_release(module);
}
END_TEST

START_TEST(syntax_error_gives_the_compilers_message_and_line) {
  dlop_test_fresh_cache();
  static const char broken[] = "int fine(void) { return 1; }\n"
                               "\n"
                               "int broken(void) { return 2 }\n";
  dlop_jit_stats before = dlop_test_jit_stats();
  char error[4096] = "";
  dlop__c_module *module = (dlop__c_module *)1;
  int status = dlop__c_compile(broken, NULL, 0, &module, error, sizeof error);
  ck_assert_int_eq(status, DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_null(module);
  ck_assert_msg(strstr(error, "failed on the source (exit status 1)") != NULL, "%s", error);
  /* The source's own line number, under the name the compiler was given. */
  ck_assert_msg(strstr(error, "dlop_jit.c:3:") != NULL, "expected dlop_jit.c:3: in: %s", error);
  ck_assert_msg(strstr(error, "error") != NULL, "%s", error);
  ck_assert_msg(strncmp(dlop_last_error(), error, 200) == 0, "last error: %s",
                dlop_last_error());
  dlop_jit_stats after = dlop_test_jit_stats();
  ck_assert_uint_eq(after.compiles, before.compiles + 1);
  ck_assert_uint_eq(after.compile_errors, before.compile_errors + 1);
  /* Nothing of a failed compilation is left in the cache. */
  ck_assert_int_eq(dlop_test_cache_files("", 1, NULL, 0), 0);
}
END_TEST

START_TEST(no_shell_between_dlop_and_the_compiler) {
  dlop_test_fresh_cache();
  char marker[128];
  snprintf(marker, sizeof marker, "/tmp/dlop_test_jit_injected_%ld", (long)getpid());
  unlink(marker);
  /* A shell would run the command substitution and split at the spaces and the semicolon. */
  char option[512];
  snprintf(option, sizeof option, "-DTEXT=\"a b; $(touch %s) `touch %s`\"", marker, marker);
  const char *options[] = {option};
  static const char source[] = "const char *dlop_test_text(void) { return TEXT; }\n";
  char error[4096] = "";
  dlop__c_module *module = NULL;
  DLOP_CK_OK(dlop__c_compile(source, options, 1, &module, error, sizeof error));
  const char *(*text)(void) = (const char *(*)(void))dlop__c_module_symbol(module, "dlop_test_text");
  ck_assert_ptr_nonnull(text);
  char expected[512];
  snprintf(expected, sizeof expected, "a b; $(touch %s) `touch %s`", marker, marker);
  ck_assert_str_eq(text(), expected);
  ck_assert_int_ne(access(marker, F_OK), 0);
  dlop__c_module_release(module);
}
END_TEST

START_TEST(missing_compiler_is_not_found) {
  dlop_test_fresh_cache();
  setenv("DLOP_CC", "/nonexistent/cc", 1);
  char why[1024] = "";
  ck_assert_int_eq(dlop__c_compiler_available(why, sizeof why), 0);
  ck_assert_msg(strstr(why, "DLOP_CC=/nonexistent/cc") != NULL, "%s", why);
  char error[4096] = "";
  dlop__c_module *module = NULL;
  int status = dlop__c_compile(adder_source, adder_options, 2, &module, error, sizeof error);
  ck_assert_int_eq(status, DLOP_NOT_FOUND);
  ck_assert_ptr_null(module);
  ck_assert_msg(strstr(error, "the C compiler DLOP_CC=/nonexistent/cc cannot be run (No such file "
                              "or directory)") != NULL,
                "%s", error);
}
END_TEST

START_TEST(compiler_missing_from_path_is_not_found) {
  dlop_test_fresh_cache();
  setenv("DLOP_CC", "dlop-no-such-compiler", 1);
  char error[4096] = "";
  dlop__c_module *module = NULL;
  int status = dlop__c_compile(adder_source, adder_options, 2, &module, error, sizeof error);
  ck_assert_int_eq(status, DLOP_NOT_FOUND);
  ck_assert_msg(strstr(error, "DLOP_CC=dlop-no-such-compiler was not found on PATH") != NULL,
                "%s", error);
}
END_TEST

START_TEST(a_compiler_named_with_arguments_is_explained) {
  setenv("DLOP_CC", "gcc -m64", 1);
  char why[1024] = "";
  ck_assert_int_eq(dlop__c_compiler_available(why, sizeof why), 0);
  ck_assert_msg(strstr(why, "DLOP_CC names one program, without arguments") != NULL, "%s", why);
}
END_TEST

START_TEST(compiler_identity_names_its_path_and_version) {
  unsetenv("DLOP_CC");
  char why[2048] = "";
  ck_assert_int_eq(dlop__c_compiler_available(why, sizeof why), 1);
  /* cc found on PATH: its path, then the first line of --version. */
  ck_assert_msg(why[0] == '/' && strstr(why, "/cc\n") != NULL, "%s", why);
}
END_TEST

START_TEST(a_relative_compiler_path_still_names_the_compiler) {
  /* The compiler runs in a work directory of its own: ./mycc must mean this directory's. */
  char here[64];
  snprintf(here, sizeof here, "/tmp/dlop_test_jit_cc_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(here));
  char link[128];
  snprintf(link, sizeof link, "%s/mycc", here);
  char cc[PATH_MAX] = "";
  ck_assert_ptr_nonnull(getenv("PATH"));
  char *directories = strdup(getenv("PATH"));
  for (char *dir = strtok(directories, ":"); dir != NULL && cc[0] == '\0'; dir = strtok(NULL, ":")) {
    snprintf(cc, sizeof cc, "%s/cc", dir);
    if (access(cc, X_OK) != 0) cc[0] = '\0';
  }
  free(directories);
  ck_assert_msg(cc[0] != '\0', "no cc on PATH=%s", getenv("PATH"));
  ck_assert_int_eq(symlink(cc, link), 0);
  ck_assert_int_eq(chdir(here), 0);
  setenv("DLOP_CC", "./mycc", 1);
  dlop_test_fresh_cache();
  ck_assert_int_eq(compile_with_relative_compiler(here), 0);
  unlink(link);
  rmdir(here);
}
END_TEST

START_TEST(native_code_compiles_and_runs) {
  dlop_test_fresh_cache();
  const char *options[] = {"-DOFFSET=1", "-march=native"};
  char error[4096] = "";
  dlop__c_module *module = NULL;
  DLOP_CK_OK(dlop__c_compile(adder_source, options, 2, &module, error, sizeof error));
  int (*add)(int, int) = (int (*)(int, int))dlop__c_module_symbol(module, "dlop_test_add");
  ck_assert_int_eq(add(1, 1), 3);
  dlop__c_module_release(module);
}
END_TEST

START_TEST(modules_are_counted_per_key_and_unloaded_with_the_last) {
  dlop_test_fresh_cache();
  char error[4096] = "";
  dlop__c_module *first = NULL, *second = NULL, *third = NULL;
  dlop_jit_stats before = dlop_test_jit_stats();
  DLOP_CK_OK(dlop__c_compile(adder_source, adder_options, 2, &first, error, sizeof error));
  DLOP_CK_OK(dlop__c_compile(adder_source, adder_options, 2, &second, error, sizeof error));
  ck_assert_ptr_eq(first, second);
  dlop_jit_stats after = dlop_test_jit_stats();
  ck_assert_uint_eq(after.compiles, before.compiles + 1);
  ck_assert_uint_eq(after.memory_hits, before.memory_hits + 1);
  dlop__c_module_release(first);
  int (*add)(int, int) = (int (*)(int, int))dlop__c_module_symbol(second, "dlop_test_add");
  ck_assert_int_eq(add(1, 1), 102); /* still loaded: one reference left */
  dlop__c_module_release(second);
  /* Unloaded: the next request loads the entry from disk again, without compiling. */
  DLOP_CK_OK(dlop__c_compile(adder_source, adder_options, 2, &third, error, sizeof error));
  dlop_jit_stats last = dlop_test_jit_stats();
  ck_assert_uint_eq(last.compiles, after.compiles);
  ck_assert_uint_eq(last.disk_hits, after.disk_hits + 1);
  add = (int (*)(int, int))dlop__c_module_symbol(third, "dlop_test_add");
  ck_assert_int_eq(add(1, 2), 103);
  dlop__c_module_release(third);
}
END_TEST

START_TEST(memory_only_builds_outside_the_cache_and_leaves_nothing) {
  setenv("DLOP_CACHE_DIR", "", 1);
  char work[64];
  snprintf(work, sizeof work, "/tmp/dlop_test_jit_tmp_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(work));
  setenv("TMPDIR", work, 1);
  char error[4096] = "";
  dlop__c_module *module = NULL;
  DLOP_CK_OK(dlop__c_compile(adder_source, adder_options, 2, &module, error, sizeof error));
  int (*add)(int, int) = (int (*)(int, int))dlop__c_module_symbol(module, "dlop_test_add");
  ck_assert_int_eq(add(20, 22), 142);
  /* The private work directory is gone; the loaded object lives on in memory. */
  ck_assert_int_eq(rmdir(work), 0);
  dlop__c_module_release(module);
}
END_TEST

START_TEST(a_program_that_is_no_compiler_is_not_found) {
  setenv("DLOP_CC", "/bin/false", 1);
  char error[4096] = "";
  dlop__c_module *module = NULL;
  ck_assert_int_eq(dlop__c_compile(adder_source, adder_options, 2, &module, error, sizeof error),
                   DLOP_NOT_FOUND);
  ck_assert_msg(strstr(error, "the C compiler DLOP_CC=/bin/false (/bin/false) did not answer "
                              "--version (exit status 1") != NULL,
                "%s", error);
}
END_TEST

START_TEST(compiles_with_sigchld_ignored) {
  /* A host that ignores SIGCHLD has its children reaped by the kernel: no exit status. */
  signal(SIGCHLD, SIG_IGN);
  dlop_test_fresh_cache();
  char error[4096] = "";
  dlop__c_module *module = NULL;
  DLOP_CK_OK(dlop__c_compile(adder_source, adder_options, 2, &module, error, sizeof error));
  int (*add)(int, int) = (int (*)(int, int))dlop__c_module_symbol(module, "dlop_test_add");
  ck_assert_int_eq(add(0, 0), 100);
  dlop__c_module_release(module);
  ck_assert_int_eq(dlop__c_compile("int broken(void) { return }\n", NULL, 0, &module, error,
                                   sizeof error),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_msg(strstr(error, "an unknown exit status") != NULL &&
                    strstr(error, "dlop_jit.c:1:") != NULL,
                "%s", error);
}
END_TEST

typedef struct thread_request {
  dlop__c_module *module;
  int status;
} thread_request;

static pthread_barrier_t start_together;

static void *compile_in_thread(void *argument) {
  thread_request *request = argument;
  char error[4096];
  pthread_barrier_wait(&start_together);
  request->status = dlop__c_compile(adder_source, adder_options, 2, &request->module, error,
                                    sizeof error);
  return NULL;
}

START_TEST(threads_asking_at_once_share_one_module) {
  dlop_test_fresh_cache();
  enum { THREADS = 4 };
  pthread_t threads[THREADS];
  thread_request requests[THREADS];
  memset(requests, 0, sizeof requests);
  pthread_barrier_init(&start_together, NULL, THREADS);
  for (int i = 0; i < THREADS; i++)
    ck_assert_int_eq(pthread_create(&threads[i], NULL, compile_in_thread, &requests[i]), 0);
  for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
  dlop_jit_stats stats = dlop_test_jit_stats();
  ck_assert_uint_eq(stats.compiles, 1);
  ck_assert_uint_eq(stats.memory_hits, THREADS - 1);
  for (int i = 0; i < THREADS; i++) {
    ck_assert_int_eq(requests[i].status, DLOP_OK);
    ck_assert_ptr_eq(requests[i].module, requests[0].module);
  }
  /* One reference each: the module stays loaded until the last is dropped. */
  int (*add)(int, int) = (int (*)(int, int))dlop__c_module_symbol(requests[0].module, "dlop_test_add");
  for (int i = 0; i < THREADS - 1; i++) dlop__c_module_release(requests[i].module);
  ck_assert_int_eq(add(1, 1), 102);
  dlop__c_module_release(requests[THREADS - 1].module);
  pthread_barrier_destroy(&start_together);
}
END_TEST

START_TEST(bad_arguments_are_named) {
  char error[512] = "";
  dlop__c_module *module = NULL;
  ck_assert_int_eq(dlop__c_compile(NULL, NULL, 0, &module, error, sizeof error),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_str_eq(error, "dlop__c_compile: source is NULL");
  ck_assert_int_eq(dlop__c_compile("int x;", NULL, 1, &module, error, sizeof error),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_str_eq(error, "dlop__c_compile: 1 options given but options is NULL");
  const char *options[] = {"-O3", NULL};
  ck_assert_int_eq(dlop__c_compile("int x;", options, 2, &module, error, sizeof error),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_str_eq(error, "dlop__c_compile: option 1 is NULL");
  ck_assert_int_eq(dlop__c_compile("int x;", NULL, 0, NULL, error, sizeof error),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_null(dlop__c_module_symbol(NULL, "x"));
  dlop__c_module_release(NULL); /* harmless */
}
END_TEST

int main(void) {
  Suite *suite = suite_create("jit_c");
  TCase *compile = dlop_test_tcase(suite, "compile", 0, NULL, NULL);
  dlop_test_add_tests(compile, compiles_loads_and_calls_a_function,
                      syntax_error_gives_the_compilers_message_and_line,
                      no_shell_between_dlop_and_the_compiler,
                      modules_are_counted_per_key_and_unloaded_with_the_last,
                      memory_only_builds_outside_the_cache_and_leaves_nothing,
                      compiles_with_sigchld_ignored, threads_asking_at_once_share_one_module, NULL);
  TCase *compiler = dlop_test_tcase(suite, "compiler", 0, NULL, NULL);
  dlop_test_add_tests(compiler, missing_compiler_is_not_found,
                      compiler_missing_from_path_is_not_found,
                      a_compiler_named_with_arguments_is_explained,
                      compiler_identity_names_its_path_and_version,
                      a_relative_compiler_path_still_names_the_compiler, native_code_compiles_and_runs,
                      a_program_that_is_no_compiler_is_not_found, bad_arguments_are_named, NULL);
  return dlop_test_run_suite(suite);
}
