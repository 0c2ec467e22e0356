/* test_support.h — helpers shared by the Check test binaries: building and running a suite in
 * fork mode, skipping GPU tests cleanly, random data, dtype conversion and tolerant comparison. */
#ifndef DLOP_TEST_SUPPORT_H
#define DLOP_TEST_SUPPORT_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "dlop.h"

/* Run the suite (fork mode unless CK_FORK=no) and return the process exit status. */
int dlop_test_run_suite(Suite *suite);

/* A new TCase called name, added to suite: each of its tests gets timeout_seconds (0: Check's
 * default, CK_DEFAULT_TIMEOUT) and, when setup or teardown is not NULL, that checked fixture
 * around it (run in the test's own process). */
TCase *dlop_test_tcase(Suite *suite, const char *name, double timeout_seconds, SFun setup,
                       SFun teardown);
/* Adds the tests given after tcase, up to a NULL, to tcase (tcase_add_test for each). */
void dlop_test_add_tests(TCase *tcase, ...);

/* DLOP_TEST_SCALE: the share (0, 1] of its repeated cases a test runs (default 1; the sanitizer
 * tree sets 0.25, cmake/DlopSanitize.cmake). A value that is not such a share prints what was
 * expected and exits 1. */
double dlop_test_scale(void);

/* In GPU test binaries, before running: returns when CUDA device 0 is usable. Otherwise prints
 * "SKIP: <what is missing>" and exits 77 (ctest's skip), or exits 1 when DLOP_REQUIRE_GPU=1. */
void dlop_test_require_cuda_or_skip(void);

/* PTX of dlop_test_fill(u64 out, u32 n, u32 value): out[i] = value (32-bit words) for i < n,
 * for the GPU tests that load a module through the host API. */
extern const char dlop_test_fill_ptx[];

/* Load the bundled plugins (and fail the test with dlop_last_error if any failed). */
void dlop_test_load_bundled_plugins(void);

/* Sets DLOP_PLUGIN_PATH to plugin_path and DLOP_BUNDLED_PLUGINS to bundled, then loads the
 * default plugins (dlop_load_default_plugins must return DLOP_OK; load errors are the
 * caller's to check). */
void dlop_test_load_default(const char *plugin_path, const char *bundled);

/* stderr into a temporary file until dlop_test_captured_stderr() puts it back and returns what
 * was written (up to 16 KiB; each test runs in its own process, so one capture at a time). */
void dlop_test_capture_stderr(void);
const char *dlop_test_captured_stderr(void);

/* A byte-for-byte copy of the file from at to (fails the test on any error). */
void dlop_test_copy_file(const char *from, const char *to);

/* The next of a reproducible stream of random 64-bit words (splitmix64 over *state), and a
 * double in [0, 1) from its top 53 bits. */
uint64_t dlop_test_random_bits(uint64_t *state);
double dlop_test_random_unit(uint64_t *state);
/* Fill n elements of dtype with reproducible random values in [low, high] (integers rounded;
 * bool as 0/1). */
void dlop_test_fill_random(void *data, dlop_dtype dtype, int64_t n, uint64_t seed, double low,
                           double high);
/* For the integer dtypes (int8, uint8, int16, int32, int64): writes [low, high] of the values
 * test data may take (the dtype's whole range, int64's within +-9e18) and returns 1; 0 for the
 * others (bool and the float dtypes), which it leaves alone. */
int dlop_test_integer_range(dlop_dtype dtype, double *low, double *high);
/* Values of a float dtype (float32 or float64) at and next to the ends of every integer
 * target: each end, one below and above it, and for each of those the neighbouring floats and
 * the values 0.5 and 0.9 away (rounded to the source dtype: near 2^31 in float32 several are
 * the same float); 2147483647.5 and -2147483648.9; NaN, the infinities, zeros, the largest
 * finite values; values at and next to +-2^51 and 2^52 and small halves (+-0.5, +-2.5, 3.5).
 * Returns the count (at most 256). */
int64_t dlop_test_int_cast_ends(double *v, dlop_dtype from);
/* Element i of data as a double, and back (rounding to nearest even for float16/bfloat16). */
double dlop_test_get(const void *data, dlop_dtype dtype, int64_t i);
void dlop_test_set(void *data, dlop_dtype dtype, int64_t i, double value);
float dlop_test_half_to_float(uint16_t h);
uint16_t dlop_test_float_to_half(float f);
float dlop_test_bfloat16_to_float(uint16_t b);
uint16_t dlop_test_float_to_bfloat16(float f);

/* Relative tolerance fit for a dtype's rounding (0 for integer types). */
double dlop_test_tolerance(dlop_dtype dtype);
/* Compare n elements: |a - e| <= atol + rtol * |e| (NaN equals NaN). Returns the number of
 * mismatches and writes the first few ("[i] expected E, got A") into report. */
int64_t dlop_test_compare(const void *expected, const void *actual, dlop_dtype dtype, int64_t n,
                          double atol, double rtol, char *report, size_t report_size);

/* Compare n elements bit for bit, except that a NaN equals any NaN (payloads may differ);
 * returns the mismatches and writes the first few, values and bits, into report. */
int64_t dlop_test_compare_bits(const void *expected, const void *actual, dlop_dtype dtype,
                               int64_t n, char *report, size_t report_size);

/* Fail the current test with dlop_last_error() when status is not DLOP_OK. */
#define DLOP_CK_OK(expr)                                                                   \
  do {                                                                                     \
    int dlop_ck_status_ = (expr);                                                          \
    ck_assert_msg(dlop_ck_status_ == DLOP_OK, "%s failed: %s (%s)", #expr,                 \
                  dlop_status_name(dlop_ck_status_), dlop_last_error());                  \
  } while (0)

/* ck_assert_msg for loops over many elements or cases: Check records the location of every
 * passing ck_assert (in fork mode a write to the parent process), which made loops of a million
 * cases cost seconds of CPU, three times that under the sanitizers. This calls Check only when
 * cond fails, with the same message. */
#define DLOP_CK_EACH(cond, ...)                                                            \
  do {                                                                                     \
    if (!(cond)) ck_abort_msg(__VA_ARGS__);                                                \
  } while (0)

#endif
