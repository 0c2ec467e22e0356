/* test_jit_cache.c — the content-addressed cache of run-time compilation (sdk/src/jit_cache.c)
 * with both compilers: SHA-256 against FIPS 180-4's vectors; keys that differ with every part;
 * a memory hit, a disk hit in a fresh process; truncated and altered entries detected, counted,
 * compiled again and replaced; several processes compiling one key at once leaving one good
 * entry; a cache directory that cannot be written, one others may write, an empty and a
 * relative DLOP_CACHE_DIR (memory only, warned about, never an error); the default location;
 * and the public statistics API. NVRTC's cases need the toolkit's NVRTC, as test_jit_nvrtc. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "jit.h"
#include "jit_cache.h"
#include "jit_sha256.h"
#include "jit_test_support.h"
#include "test_support.h"

/* ---- SHA-256 and keys --------------------------------------------------------------------- */

static void expect_digest(const void *data, size_t bytes, const char *hex) {
  uint8_t digest[DLOP__SHA256_BYTES];
  char text[65];
  dlop__sha256_digest(data, bytes, digest);
  dlop__sha256_hex(digest, text);
  ck_assert_str_eq(text, hex);
}

START_TEST(sha256_matches_the_standards_vectors) {
  expect_digest("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  expect_digest("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char *two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  expect_digest(two_blocks, strlen(two_blocks),
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  /* A million 'a's fed in uneven pieces, so that updates straddle the 64-byte blocks. */
  char piece[997];
  memset(piece, 'a', sizeof piece);
  dlop__sha256 hash;
  dlop__sha256_init(&hash);
  size_t left = 1000000;
  for (size_t take = 1; left > 0; take = take * 7 % sizeof piece + 1) {
    size_t now = take < left ? take : left;
    dlop__sha256_update(&hash, piece, now);
    left -= now;
  }
  uint8_t digest[DLOP__SHA256_BYTES];
  char text[65];
  dlop__sha256_final(&hash, digest);
  dlop__sha256_hex(digest, text);
  ck_assert_str_eq(text, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

START_TEST(keys_differ_with_every_part) {
  const char *one[] = {"-DA", "B"};
  const char *joined[] = {"-DAB"};
  dlop__jit_key base, other;
  dlop__jit_key_make("nvrtc", "NVRTC 13.0", "sm_90", one, 2, "source", &base);
  dlop__jit_key_make("nvrtc", "NVRTC 13.0", "sm_90", one, 2, "source", &other);
  ck_assert_str_eq(base.hex, other.hex); /* the same parts, the same key */
  ck_assert_uint_eq(strlen(base.hex), 64);
  dlop__jit_key_make("nvrtc", "NVRTC 13.0", "sm_90", joined, 1, "source", &other);
  ck_assert_str_ne(base.hex, other.hex);
  dlop__jit_key_make("nvrtc", "NVRTC 13.0", "sm_80", one, 2, "source", &other);
  ck_assert_str_ne(base.hex, other.hex);
  dlop__jit_key_make("nvrtc", "NVRTC 12.8", "sm_90", one, 2, "source", &other);
  ck_assert_str_ne(base.hex, other.hex);
  dlop__jit_key_make("c", "NVRTC 13.0", "sm_90", one, 2, "source", &other);
  ck_assert_str_ne(base.hex, other.hex);
  dlop__jit_key_make("nvrtc", "NVRTC 13.0", "sm_90", one, 2, "source ", &other);
  ck_assert_str_ne(base.hex, other.hex);
  dlop__jit_key_make("nvrtc", "NVRTC 13.0", "sm_90", one, 1, "source", &other);
  ck_assert_str_ne(base.hex, other.hex);
  /* Parts do not run into each other: ("ab", "c") is not ("a", "bc"). */
  dlop__jit_key_make("nvrtc", "NVRTC 13.0sm_90", "", one, 2, "source", &other);
  ck_assert_str_ne(base.hex, other.hex);
}
END_TEST

/* ---- what the tests compile --------------------------------------------------------------- */

static const char kernel_source[] =
    "extern \"C\" __global__ void dlop_test_add_one(float *x, unsigned n) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] += 1.0f;\n"
    "}\n";
static const char function_source[] = "int dlop_test_twice(int x) { return 2 * x; }\n";

static int compile_kernel(int32_t arch, const char *const *options, int32_t num_options) {
  void *image = NULL;
  size_t bytes = 0;
  int is_ptx = 0;
  char error[8192] = "";
  int status = dlop__nvrtc_compile(arch, kernel_source, options, num_options, &image, &bytes,
                                   &is_ptx, error, sizeof error);
  if (status != DLOP_OK) fprintf(stderr, "dlop__nvrtc_compile: %s\n", error);
  else if (bytes < 4 || memcmp(image, "\177ELF", 4) != 0) status = DLOP_INTERNAL;
  free(image);
  return status;
}

/* Compile function_source and call it: DLOP_OK when it doubles. */
static int compile_function(const char *const *options, int32_t num_options) {
  dlop__c_module *module = NULL;
  char error[8192] = "";
  int status = dlop__c_compile(function_source, options, num_options, &module, error,
                               sizeof error);
  if (status != DLOP_OK) {
    fprintf(stderr, "dlop__c_compile: %s\n", error);
    return status;
  }
  int (*twice)(int) = (int (*)(int))dlop__c_module_symbol(module, "dlop_test_twice");
  status = twice != NULL && twice(21) == 42 ? DLOP_OK : DLOP_INTERNAL;
  dlop__c_module_release(module);
  return status;
}

/* In a fresh process: the request is served as expected (0), else what differed (1..). */
typedef struct expectation {
  int nvrtc; /* compile the kernel, else the C function */
  uint64_t compiles, disk_hits, corrupt_entries;
} expectation;

static int request_in_child(void *argument) {
  const expectation *expected = argument;
  int status = expected->nvrtc ? compile_kernel(90, NULL, 0) : compile_function(NULL, 0);
  if (status != DLOP_OK) return 1;
  dlop_jit_stats stats = {.struct_size = sizeof stats};
  dlop_jit_stats_get(&stats);
  if (stats.compiles != expected->compiles || stats.disk_hits != expected->disk_hits ||
      stats.corrupt_entries != expected->corrupt_entries) {
    fprintf(stderr, "child: compiles %llu, disk hits %llu, corrupt %llu; expected %llu %llu %llu\n",
            (unsigned long long)stats.compiles, (unsigned long long)stats.disk_hits,
            (unsigned long long)stats.corrupt_entries, (unsigned long long)expected->compiles,
            (unsigned long long)expected->disk_hits,
            (unsigned long long)expected->corrupt_entries);
    return 2;
  }
  return 0;
}

static void expect_in_child(int nvrtc, uint64_t compiles, uint64_t disk_hits, uint64_t corrupt) {
  expectation expected = {nvrtc, compiles, disk_hits, corrupt};
  ck_assert_int_eq(dlop_test_in_child(request_in_child, &expected), 0);
}

/* ---- hits --------------------------------------------------------------------------------- */

START_TEST(second_request_is_a_memory_hit) {
  dlop_test_fresh_cache();
  DLOP_CK_OK(compile_kernel(90, NULL, 0));
  DLOP_CK_OK(compile_kernel(90, NULL, 0));
  dlop_jit_stats stats = dlop_test_jit_stats();
  ck_assert_uint_eq(stats.compiles, 1);
  ck_assert_uint_eq(stats.memory_hits, 1);
  ck_assert_uint_eq(stats.disk_hits, 0);
  ck_assert(stats.compile_seconds > 0);
}
END_TEST

START_TEST(a_fresh_process_gets_a_disk_hit) {
  dlop_test_fresh_cache();
  expect_in_child(1, 1, 0, 0); /* compiles and writes the entry */
  expect_in_child(0, 1, 0, 0);
  DLOP_CK_OK(compile_kernel(90, NULL, 0));
  DLOP_CK_OK(compile_function(NULL, 0));
  dlop_jit_stats stats = dlop_test_jit_stats();
  ck_assert_uint_eq(stats.compiles, 0);
  ck_assert_uint_eq(stats.disk_hits, 2);
  ck_assert(stats.disk_hit_seconds > 0);
  ck_assert_int_eq(dlop_test_cache_files("", 1, NULL, 0), 2);
}
END_TEST

/* ---- damaged entries ---------------------------------------------------------------------- */

static void truncate_to_half(const char *path) {
  struct stat info;
  ck_assert_int_eq(stat(path, &info), 0);
  ck_assert_int_eq(truncate(path, info.st_size / 2), 0);
}

/* Flip one byte at offset (negative: from the end). */
static void flip_byte(const char *path, long offset) {
  int fd = open(path, O_RDWR);
  ck_assert_int_ge(fd, 0);
  off_t at = offset >= 0 ? offset : lseek(fd, 0, SEEK_END) + offset;
  unsigned char byte = 0;
  ck_assert_int_eq(pread(fd, &byte, 1, at), 1);
  byte ^= 0x40;
  ck_assert_int_eq(pwrite(fd, &byte, 1, at), 1);
  close(fd);
}

/* Every request runs in its own child (forked from this process, which compiles nothing, so
 * each starts with empty memory): one writes the entry, one finds it damaged, one uses what
 * replaced it. */
static void damaged_entry_is_replaced(int nvrtc, const char *suffix, void (*damage)(const char *)) {
  dlop_test_fresh_cache();
  expect_in_child(nvrtc, 1, 0, 0);
  char path[256];
  ck_assert_int_eq(dlop_test_cache_files(suffix, 0, path, sizeof path), 1);
  struct stat whole;
  ck_assert_int_eq(stat(path, &whole), 0);
  damage(path);
  dlop_test_capture_stderr();
  expect_in_child(nvrtc, 1, 0, 1); /* detected, counted, compiled */
  const char *printed = dlop_test_captured_stderr();
  ck_assert_msg(printed[0] == '\0', "nothing to warn about: %s", printed);
  /* Replaced by a whole entry, which the next fresh process uses. */
  struct stat replaced;
  ck_assert_int_eq(stat(path, &replaced), 0);
  ck_assert_int_eq(replaced.st_size, whole.st_size);
  ck_assert_int_eq(dlop_test_cache_files("", 1, NULL, 0), 1);
  expect_in_child(nvrtc, 0, 1, 0);
}

static void flip_in_the_middle(const char *path) { flip_byte(path, 200); }
static void flip_in_the_key(const char *path) { flip_byte(path, -50); } /* the trailer's key */
static void flip_the_last_byte(const char *path) { flip_byte(path, -1); }

START_TEST(truncated_cubin_is_detected_and_replaced) {
  damaged_entry_is_replaced(1, ".cubin", truncate_to_half);
}
END_TEST

START_TEST(altered_cubin_is_detected_and_replaced) {
  damaged_entry_is_replaced(1, ".cubin", flip_in_the_middle);
}
END_TEST

START_TEST(altered_trailer_is_detected_and_replaced) {
  damaged_entry_is_replaced(1, ".cubin", flip_in_the_key);
}
END_TEST

START_TEST(truncated_shared_object_is_detected_and_replaced) {
  damaged_entry_is_replaced(0, ".so", truncate_to_half);
}
END_TEST

START_TEST(altered_shared_object_is_detected_and_replaced) {
  damaged_entry_is_replaced(0, ".so", flip_in_the_middle);
}
END_TEST

START_TEST(shared_object_with_a_bad_end_mark_is_replaced) {
  damaged_entry_is_replaced(0, ".so", flip_the_last_byte);
}
END_TEST

/* ---- several processes -------------------------------------------------------------------- */

static int start_fd = -1;

static int compile_when_told(void *argument) {
  const int *nvrtc = argument;
  char go;
  if (read(start_fd, &go, 1) != 1) return 3;
  return (*nvrtc ? compile_kernel(90, NULL, 0) : compile_function(NULL, 0)) == DLOP_OK ? 0 : 1;
}

static void processes_compile_one_key_at_once(int nvrtc, const char *suffix) {
  enum { PROCESSES = 4 };
  dlop_test_fresh_cache();
  int ends[2];
  ck_assert_int_eq(pipe(ends), 0);
  start_fd = ends[0];
  pid_t children[PROCESSES];
  fflush(stderr);
  for (int i = 0; i < PROCESSES; i++) {
    children[i] = fork();
    ck_assert_int_ge(children[i], 0);
    if (children[i] == 0) {
      close(ends[1]);
      _exit(compile_when_told(&nvrtc));
    }
  }
  close(ends[0]);
  /* All start at once: each of them finds no entry and compiles. */
  ck_assert_int_eq(write(ends[1], "gogo", PROCESSES), PROCESSES);
  close(ends[1]);
  for (int i = 0; i < PROCESSES; i++) {
    int status = 0;
    ck_assert_int_eq(waitpid(children[i], &status, 0), children[i]);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "process %d failed (%d)", i,
                  status);
  }
  /* One entry, no temporary file left, and it is good. */
  ck_assert_int_eq(dlop_test_cache_files(suffix, 0, NULL, 0), 1);
  ck_assert_int_eq(dlop_test_cache_files("", 1, NULL, 0), 1);
  expect_in_child(nvrtc, 0, 1, 0);
}

START_TEST(processes_compiling_one_kernel_at_once_leave_one_entry) {
  processes_compile_one_key_at_once(1, ".cubin");
}
END_TEST

START_TEST(processes_compiling_one_function_at_once_leave_one_entry) {
  processes_compile_one_key_at_once(0, ".so");
}
END_TEST

/* ---- keys on disk ------------------------------------------------------------------------- */

START_TEST(entries_differ_with_options_and_architecture) {
  dlop_test_fresh_cache();
  const char *scaled[] = {"-DSCALE=3"};
  DLOP_CK_OK(compile_kernel(90, NULL, 0));
  DLOP_CK_OK(compile_kernel(90, scaled, 1));
  DLOP_CK_OK(compile_kernel(80, NULL, 0));
  DLOP_CK_OK(compile_kernel(80, NULL, 0));
  DLOP_CK_OK(compile_function(NULL, 0));
  DLOP_CK_OK(compile_function(scaled, 1));
  dlop_jit_stats stats = dlop_test_jit_stats();
  ck_assert_uint_eq(stats.compiles, 5);
  ck_assert_uint_eq(stats.memory_hits, 1);
  ck_assert_int_eq(dlop_test_cache_files(".cubin", 0, NULL, 0), 3);
  ck_assert_int_eq(dlop_test_cache_files(".so", 0, NULL, 0), 2);
}
END_TEST

/* ---- where the cache is, and when it is not ----------------------------------------------- */

static int count_of(const char *text, const char *word) {
  int count = 0;
  for (const char *at = text; (at = strstr(at, word)) != NULL; at += strlen(word)) count++;
  return count;
}

START_TEST(unwritable_cache_directory_means_memory_only_with_a_warning) {
  const char *root = dlop_test_fresh_cache();
  /* A file where a directory should be: not writable whoever runs the test (root too). */
  char file[128], below[160];
  snprintf(file, sizeof file, "%s/a-file", root);
  FILE *made = fopen(file, "w");
  ck_assert_ptr_nonnull(made);
  fclose(made);
  snprintf(below, sizeof below, "%s/cache", file);
  setenv("DLOP_CACHE_DIR", below, 1);
  dlop_test_capture_stderr();
  DLOP_CK_OK(compile_kernel(90, NULL, 0));
  DLOP_CK_OK(compile_kernel(90, NULL, 0));
  dlop__c_module *module = NULL;
  char error[4096];
  DLOP_CK_OK(dlop__c_compile(function_source, NULL, 0, &module, error, sizeof error));
  int (*twice)(int) = (int (*)(int))dlop__c_module_symbol(module, "dlop_test_twice");
  ck_assert_int_eq(twice(4), 8);
  const char *printed = dlop_test_captured_stderr();
  ck_assert_msg(strstr(printed, "dlop: warning: run-time compilation cache: cannot create the "
                                "directory ") != NULL &&
                    strstr(printed, "compiled code is kept in this process's memory only") != NULL,
                "%s", printed);
  ck_assert_int_eq(count_of(printed, "run-time compilation cache"), 1); /* warned once */
  dlop_jit_stats stats = dlop_test_jit_stats();
  ck_assert_uint_eq(stats.compiles, 2);
  ck_assert_uint_eq(stats.memory_hits, 1);
  char directory[256] = "x";
  DLOP_CK_OK(dlop_jit_cache_directory(directory, sizeof directory));
  ck_assert_str_eq(directory, "");
  dlop__c_module_release(module);
}
END_TEST

START_TEST(cache_directory_others_may_write_is_not_used) {
  const char *root = dlop_test_fresh_cache();
  char jit[128];
  snprintf(jit, sizeof jit, "%s/jit", root);
  ck_assert_int_eq(mkdir(jit, 0700), 0);
  ck_assert_int_eq(chmod(jit, 0777), 0);
  dlop_test_capture_stderr();
  DLOP_CK_OK(compile_function(NULL, 0));
  const char *printed = dlop_test_captured_stderr();
  ck_assert_msg(strstr(printed, "is writable by group or others (mode 0777") != NULL &&
                    strstr(printed, "so dlop does not run code from it") != NULL,
                "%s", printed);
  ck_assert_int_eq(dlop_test_cache_files("", 1, NULL, 0), 0);
}
END_TEST

START_TEST(empty_cache_dir_means_memory_only_silently) {
  setenv("DLOP_CACHE_DIR", "", 1);
  dlop_test_capture_stderr();
  DLOP_CK_OK(compile_function(NULL, 0));
  DLOP_CK_OK(compile_kernel(90, NULL, 0));
  ck_assert_str_eq(dlop_test_captured_stderr(), "");
  char directory[256] = "x";
  DLOP_CK_OK(dlop_jit_cache_directory(directory, sizeof directory));
  ck_assert_str_eq(directory, "");
}
END_TEST

START_TEST(relative_cache_dir_is_ignored_with_a_warning) {
  setenv("DLOP_CACHE_DIR", "relative/cache", 1);
  dlop_test_capture_stderr();
  DLOP_CK_OK(compile_function(NULL, 0));
  const char *printed = dlop_test_captured_stderr();
  ck_assert_msg(strstr(printed, "DLOP_CACHE_DIR='relative/cache' is relative and was ignored") !=
                    NULL,
                "%s", printed);
}
END_TEST

START_TEST(default_directory_follows_xdg_then_home) {
  const char *root = dlop_test_fresh_cache();
  unsetenv("DLOP_CACHE_DIR");
  char xdg[128], expected[160], directory[256];
  snprintf(xdg, sizeof xdg, "%s/xdg", root);
  setenv("XDG_CACHE_HOME", xdg, 1);
  DLOP_CK_OK(dlop_jit_cache_directory(directory, sizeof directory));
  snprintf(expected, sizeof expected, "%s/dlop/jit", xdg);
  ck_assert_str_eq(directory, expected);
  char tiny[8];
  ck_assert_int_eq(dlop_jit_cache_directory(tiny, sizeof tiny), DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "does not fit in a buffer of 8 bytes"));
}
END_TEST

static int home_directory_in_child(void *argument) {
  const char *home = argument;
  unsetenv("DLOP_CACHE_DIR");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", home, 1);
  char directory[256], expected[256];
  if (dlop_jit_cache_directory(directory, sizeof directory) != DLOP_OK) return 1;
  snprintf(expected, sizeof expected, "%s/.cache/dlop/jit", home);
  if (strcmp(directory, expected) != 0) {
    fprintf(stderr, "got %s, expected %s\n", directory, expected);
    return 2;
  }
  return 0;
}

START_TEST(default_directory_without_xdg_is_under_home) {
  const char *root = dlop_test_fresh_cache();
  char home[128];
  snprintf(home, sizeof home, "%s", root);
  ck_assert_int_eq(dlop_test_in_child(home_directory_in_child, home), 0);
}
END_TEST

/* ---- the public statistics ---------------------------------------------------------------- */

START_TEST(stats_api_checks_and_honours_struct_size) {
  dlop_test_fresh_cache();
  DLOP_CK_OK(compile_function(NULL, 0));
  dlop_jit_stats stats;
  memset(&stats, 0, sizeof stats);
  ck_assert_int_eq(dlop_jit_stats_get(&stats), DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "stats->struct_size is 0: set it to "
                                                  "sizeof(dlop_jit_stats)"));
  ck_assert_int_eq(dlop_jit_stats_get(NULL), DLOP_INVALID_ARGUMENT);
  /* A caller built when the struct ended after compiles gets that much and no more. */
  memset(&stats, 0xab, sizeof stats);
  stats.struct_size = 16;
  DLOP_CK_OK(dlop_jit_stats_get(&stats));
  ck_assert_uint_eq(stats.struct_size, 16);
  ck_assert_uint_eq(stats.compiles, 1);
  ck_assert_uint_eq(stats.compile_errors, 0xababababababababull);
  stats = dlop_test_jit_stats();
  ck_assert_uint_eq(stats.struct_size, sizeof stats);
  ck_assert_uint_eq(stats.compiles, 1);
  ck_assert_uint_eq(stats.compile_errors, 0);
  ck_assert_uint_eq(stats.memory_hits, 0);
}
END_TEST

/* Whether NVRTC loads, asked in a child so that the tests' processes load it themselves. */
static int nvrtc_loads(void) {
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) _exit(dlop__nvrtc_available(NULL, 0) ? 0 : 1);
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(void) {
  Suite *suite = suite_create("jit_cache");
  TCase *keys = dlop_test_tcase(suite, "keys", 0, NULL, NULL);
  dlop_test_add_tests(keys, sha256_matches_the_standards_vectors, keys_differ_with_every_part,
                      NULL);
  TCase *c_entries = dlop_test_tcase(suite, "c_entries", 0, NULL, NULL);
  dlop_test_add_tests(c_entries, truncated_shared_object_is_detected_and_replaced,
                      altered_shared_object_is_detected_and_replaced,
                      shared_object_with_a_bad_end_mark_is_replaced,
                      processes_compiling_one_function_at_once_leave_one_entry,
                      cache_directory_others_may_write_is_not_used,
                      relative_cache_dir_is_ignored_with_a_warning,
                      default_directory_follows_xdg_then_home,
                      default_directory_without_xdg_is_under_home,
                      stats_api_checks_and_honours_struct_size, NULL);
  if (nvrtc_loads() || DLOP_TEST_WITH_CUDA) {
    /* With CUDA built, NVRTC is expected: its absence fails these rather than skipping them. */
    TCase *both = dlop_test_tcase(suite, "nvrtc_and_c", 0, NULL, NULL);
    dlop_test_add_tests(both, second_request_is_a_memory_hit, a_fresh_process_gets_a_disk_hit,
                        truncated_cubin_is_detected_and_replaced,
                        altered_cubin_is_detected_and_replaced,
                        altered_trailer_is_detected_and_replaced,
                        processes_compiling_one_kernel_at_once_leave_one_entry,
                        entries_differ_with_options_and_architecture,
                        unwritable_cache_directory_means_memory_only_with_a_warning,
                        empty_cache_dir_means_memory_only_silently, NULL);
  } else {
    printf("note: a CPU-only build without NVRTC: the cache cases that compile CUDA are left "
           "out\n");
  }
  return dlop_test_run_suite(suite);
}
