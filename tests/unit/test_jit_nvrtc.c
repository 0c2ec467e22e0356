/* test_jit_nvrtc.c — CUDA C compiled at run time through NVRTC (sdk/src/nvrtc.c), without a GPU:
 * a cubin for sm_90 (an ELF file for the CUDA machine), PTX of NVRTC's newest architecture for
 * a GPU newer than NVRTC, an error for one older than it knows, a compile error's log with the
 * source's own line numbers, options checked, threads asking for one kernel at once, and a
 * missing libnvrtc (DLOP_NVRTC_LIBRARY=/nonexistent) reported while everything else works. The
 * host table's cuda_compile slot reaches the same compiler. Needs the toolkit's NVRTC, which
 * CI has: in a build with CUDA its absence fails; in a CPU-only build the suite is skipped. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "jit.h"
#include "jit_test_support.h"
#include "test_support.h"

static const char scale_source[] =
    "extern \"C\" __global__ void dlop_test_scale(float *out, const float *in, unsigned n) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) out[i] = in[i] * SCALE;\n"
    "}\n";
static const char *const scale_options[] = {"-DSCALE=2.0f"};

#define EM_CUDA 190

static void compile(int32_t arch, const char *source, void **image, size_t *bytes, int *is_ptx) {
  char error[8192] = "";
  int status = dlop__nvrtc_compile(arch, source, scale_options, 1, image, bytes, is_ptx, error,
                                   sizeof error);
  ck_assert_msg(status == DLOP_OK, "dlop__nvrtc_compile(%d): %s: %s", (int)arch,
                dlop_status_name(status), error);
}

START_TEST(cubin_for_sm_90) {
  dlop_test_fresh_cache();
  void *image = NULL;
  size_t bytes = 0;
  int is_ptx = -1;
  compile(90, scale_source, &image, &bytes, &is_ptx);
  ck_assert_int_eq(is_ptx, 0);
  ck_assert_uint_gt(bytes, 64);
  const unsigned char *elf = image;
  ck_assert_msg(memcmp(elf, "\177ELF", 4) == 0, "not an ELF file: %02x %02x %02x %02x", elf[0],
                elf[1], elf[2], elf[3]);
  ck_assert_int_eq(elf[18] | elf[19] << 8, EM_CUDA); /* e_machine: a CUDA cubin */
  free(image);
  ck_assert_int_eq(dlop_test_cache_files(".cubin", 0, NULL, 0), 1);
}
END_TEST

START_TEST(ptx_for_a_gpu_newer_than_nvrtc) {
  dlop_test_fresh_cache();
  void *image = NULL;
  size_t bytes = 0;
  int is_ptx = -1;
  compile(200, scale_source, &image, &bytes, &is_ptx); /* sm_200: no NVRTC knows it */
  ck_assert_int_eq(is_ptx, 1);
  const char *ptx = image;
  ck_assert_uint_eq(strlen(ptx) + 1, bytes); /* a C string, as cuModuleLoadData reads PTX */
  ck_assert_msg(strstr(ptx, ".entry dlop_test_scale") != NULL, "%.400s", ptx);
  const char *target = strstr(ptx, ".target sm_");
  ck_assert_msg(target != NULL, "%.400s", ptx);
  int newest = atoi(target + strlen(".target sm_"));
  ck_assert_int_ge(newest, 90);
  ck_assert_int_lt(newest, 200);
  free(image);
  /* That newest architecture is one NVRTC makes a cubin for. */
  compile(newest, scale_source, &image, &bytes, &is_ptx);
  ck_assert_int_eq(is_ptx, 0);
  free(image);
  ck_assert_int_eq(dlop_test_cache_files(".ptx", 0, NULL, 0), 1);
  ck_assert_int_eq(dlop_test_cache_files(".cubin", 0, NULL, 0), 1);
}
END_TEST

START_TEST(an_architecture_older_than_nvrtc_knows_is_unsupported) {
  void *image = (void *)1;
  size_t bytes = 1;
  int is_ptx = 1;
  char error[1024] = "";
  int status = dlop__nvrtc_compile(30, scale_source, scale_options, 1, &image, &bytes, &is_ptx,
                                   error, sizeof error);
  ck_assert_int_eq(status, DLOP_UNSUPPORTED);
  ck_assert_ptr_null(image);
  ck_assert_msg(strstr(error, "cannot compile for sm_30: the oldest architecture it knows is sm_") !=
                    NULL,
                "%s", error);
}
END_TEST

START_TEST(compile_error_gives_the_log_with_the_sources_line) {
  dlop_test_fresh_cache();
  static const char broken[] =
      "extern \"C\" __global__ void fine(float *out) { out[0] = 1.0f; }\n"
      "\n"
      "extern \"C\" __global__ void broken(float *out) { out[0] = 2.0f }\n";
  dlop_jit_stats before = dlop_test_jit_stats();
  void *image = NULL;
  size_t bytes = 0;
  int is_ptx = 0;
  char error[8192] = "";
  int status = dlop__nvrtc_compile(90, broken, NULL, 0, &image, &bytes, &is_ptx, error,
                                   sizeof error);
  ck_assert_int_eq(status, DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_null(image);
  ck_assert_msg(strstr(error, "could not compile the CUDA source for sm_90 "
                              "(NVRTC_ERROR_COMPILATION); its log:\n") != NULL,
                "%s", error);
  ck_assert_msg(strstr(error, "dlop_jit.cu(3): error") != NULL, "line 3 expected in: %s", error);
  ck_assert_msg(strstr(error, "dlop_jit.cu(1)") == NULL, "%s", error);
  dlop_jit_stats after = dlop_test_jit_stats();
  ck_assert_uint_eq(after.compiles, before.compiles + 1);
  ck_assert_uint_eq(after.compile_errors, before.compile_errors + 1);
  ck_assert_int_eq(dlop_test_cache_files("", 1, NULL, 0), 0);
}
END_TEST

START_TEST(options_are_checked) {
  void *image = NULL;
  size_t bytes = 0;
  int is_ptx = 0;
  char error[4096] = "";
  const char *architecture[] = {"-DN=1", "--gpu-architecture=sm_80"};
  ck_assert_int_eq(dlop__nvrtc_compile(90, scale_source, architecture, 2, &image, &bytes, &is_ptx,
                                       error, sizeof error),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_str_eq(error, "dlop__nvrtc_compile: option 1 (\"--gpu-architecture=sm_80\") names the "
                          "architecture, which the host chooses (sm_90 here): leave it out");
  const char *unknown[] = {"-DSCALE=1.0f", "--no-such-nvrtc-option"};
  ck_assert_int_eq(dlop__nvrtc_compile(90, scale_source, unknown, 2, &image, &bytes, &is_ptx,
                                       error, sizeof error),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_msg(strstr(error, "NVRTC_ERROR_INVALID_OPTION") != NULL, "%s", error);
  ck_assert_int_eq(dlop__nvrtc_compile(90, NULL, NULL, 0, &image, &bytes, &is_ptx, error,
                                       sizeof error),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_str_eq(error, "dlop__nvrtc_compile: source is NULL");
  ck_assert_int_eq(dlop__nvrtc_compile(9, scale_source, NULL, 0, &image, &bytes, &is_ptx, error,
                                       sizeof error),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_str_eq(error, "dlop__nvrtc_compile: architecture 9 is not major * 10 + minor (90 "
                          "for sm_90)");
  ck_assert_int_eq(dlop__nvrtc_compile(90, scale_source, NULL, 0, NULL, &bytes, &is_ptx, error,
                                       sizeof error),
                   DLOP_INVALID_ARGUMENT);
}
END_TEST

typedef struct thread_request {
  void *image;
  size_t bytes;
  int status;
} thread_request;

static pthread_barrier_t start_together;

static void *compile_in_thread(void *argument) {
  thread_request *request = argument;
  int is_ptx = 0;
  char error[4096];
  pthread_barrier_wait(&start_together);
  request->status = dlop__nvrtc_compile(90, scale_source, scale_options, 1, &request->image,
                                        &request->bytes, &is_ptx, error, sizeof error);
  return NULL;
}

START_TEST(threads_asking_at_once_share_one_compilation) {
  dlop_test_fresh_cache();
  enum { THREADS = 4 };
  pthread_t threads[THREADS];
  thread_request requests[THREADS];
  memset(requests, 0, sizeof requests);
  pthread_barrier_init(&start_together, NULL, THREADS);
  dlop_jit_stats before = dlop_test_jit_stats();
  for (int i = 0; i < THREADS; i++)
    ck_assert_int_eq(pthread_create(&threads[i], NULL, compile_in_thread, &requests[i]), 0);
  for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
  dlop_jit_stats after = dlop_test_jit_stats();
  ck_assert_uint_eq(after.compiles, before.compiles + 1);
  ck_assert_uint_eq(after.memory_hits, before.memory_hits + THREADS - 1);
  for (int i = 0; i < THREADS; i++) {
    ck_assert_int_eq(requests[i].status, DLOP_OK);
    ck_assert_uint_eq(requests[i].bytes, requests[0].bytes);
    ck_assert_int_eq(memcmp(requests[i].image, requests[0].image, requests[0].bytes), 0);
  }
  for (int i = 0; i < THREADS; i++) free(requests[i].image);
  pthread_barrier_destroy(&start_together);
}
END_TEST

START_TEST(missing_nvrtc_is_not_found_and_the_rest_works) {
  dlop_test_fresh_cache();
  setenv("DLOP_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so", 1);
  char why[2048] = "";
  ck_assert_int_eq(dlop__nvrtc_available(why, sizeof why), 0);
  void *image = NULL;
  size_t bytes = 0;
  int is_ptx = 0;
  char error[2048] = "";
  int status = dlop__nvrtc_compile(90, scale_source, scale_options, 1, &image, &bytes, &is_ptx,
                                   error, sizeof error);
  ck_assert_int_eq(status, DLOP_NOT_FOUND);
  ck_assert_str_eq(error, why);
  ck_assert_msg(strstr(error, "NVRTC (the CUDA run-time compiler) could not be loaded from "
                              "DLOP_NVRTC_LIBRARY=/nonexistent/libnvrtc.so (") != NULL,
                "%s", error);
  ck_assert_str_eq(dlop_last_error(), error);
  /* The C compiler and the rest of libdlop do not depend on NVRTC. */
  dlop__c_module *module = NULL;
  DLOP_CK_OK(dlop__c_compile("int dlop_test_one(void) { return 1; }\n", NULL, 0, &module, error,
                             sizeof error));
  dlop__c_module_release(module);
  dlop_array *array = NULL;
  int64_t shape[1] = {3};
  float data[3] = {1, 2, 3};
  DLOP_CK_OK(dlop_array_from_host((dlop_device){DLOP_DEVICE_CPU, 0}, DLOP_FLOAT32, 1, shape, data,
                                  &array));
  dlop_array_release(array);
}
END_TEST

START_TEST(host_table_slot_compiles_for_the_device) {
  const dlop_host_api *host = dlop_host_api_table();
  ck_assert(DLOP_HOST_HAS(host, cuda_compile));
  int count = 0;
  DLOP_CK_OK(dlop_cuda_device_count(&count));
  void *module = (void *)1;
  char error[4096] = "";
  int status = host->cuda_compile(0, scale_source, scale_options, 1, &module, error, sizeof error);
  if (count == 0) {
    /* No GPU here: the device is what is missing, and the message says so. */
    ck_assert_int_eq(status, DLOP_NO_DEVICE);
    ck_assert_ptr_null(module);
    ck_assert_msg(strncmp(error, "cuda_compile on cuda:0: ", 24) == 0, "%s", error);
  } else {
    ck_assert_msg(status == DLOP_OK, "%s", error);
    ck_assert_ptr_nonnull(module);
    DLOP_CK_OK(host->cuda_module_unload(module));
  }
  ck_assert_int_eq(host->cuda_compile(0, scale_source, NULL, 0, NULL, error, sizeof error),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_str_eq(error, "cuda_compile: module is NULL");
}
END_TEST

/* Whether NVRTC loads, asked in a child so that the tests' processes load it themselves. */
static int nvrtc_loads(char *why, size_t size) {
  int ends[2];
  if (pipe(ends) != 0) return 0;
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    char text[2048] = "";
    int available = dlop__nvrtc_available(text, sizeof text);
    ssize_t written = write(ends[1], text, strlen(text));
    _exit(available && written >= 0 ? 0 : 1);
  }
  close(ends[1]);
  ssize_t length = read(ends[0], why, size - 1);
  why[length > 0 ? length : 0] = '\0';
  close(ends[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(void) {
  char why[2048];
  if (!nvrtc_loads(why, sizeof why) && !DLOP_TEST_WITH_CUDA) {
    printf("SKIP: a CPU-only build, and NVRTC cannot be loaded: %s\n", why);
    return 77;
  }
  Suite *suite = suite_create("jit_nvrtc");
  TCase *compile_case = dlop_test_tcase(suite, "compile", 0, NULL, NULL);
  dlop_test_add_tests(compile_case, cubin_for_sm_90, ptx_for_a_gpu_newer_than_nvrtc,
                      an_architecture_older_than_nvrtc_knows_is_unsupported,
                      compile_error_gives_the_log_with_the_sources_line, options_are_checked,
                      threads_asking_at_once_share_one_compilation, NULL);
  TCase *loading = dlop_test_tcase(suite, "loading", 0, NULL, NULL);
  dlop_test_add_tests(loading, missing_nvrtc_is_not_found_and_the_rest_works,
                      host_table_slot_compiles_for_the_device, NULL);
  return dlop_test_run_suite(suite);
}
