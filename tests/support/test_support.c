/* test_support.c — shared helpers for the Check test binaries (see test_support.h).
 * Reference conversions for float16/bfloat16 live here so tests never trust the code under test. */
#include "test_support.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int dlop_test_run_suite(Suite *suite) {
  SRunner *runner = srunner_create(suite);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}

TCase *dlop_test_tcase(Suite *suite, const char *name, double timeout_seconds, SFun setup,
                       SFun teardown) {
  TCase *tcase = tcase_create(name);
  if (timeout_seconds > 0) tcase_set_timeout(tcase, timeout_seconds);
  if (setup || teardown) tcase_add_checked_fixture(tcase, setup, teardown);
  suite_add_tcase(suite, tcase);
  return tcase;
}

void dlop_test_add_tests(TCase *tcase, ...) {
  va_list tests;
  va_start(tests, tcase);
  for (const TTest *test = va_arg(tests, const TTest *); test; test = va_arg(tests, const TTest *))
    tcase_add_test(tcase, test);
  va_end(tests);
}

double dlop_test_scale(void) {
  const char *text = getenv("DLOP_TEST_SCALE");
  if (text == NULL || text[0] == '\0') return 1.0;
  char *end = NULL;
  double scale = strtod(text, &end);
  if (end == text || *end != '\0' || !(scale > 0 && scale <= 1)) {
    fprintf(stderr, "DLOP_TEST_SCALE='%s' is not a share of the cases to run: expected a number "
            "in (0, 1], e.g. 0.25\n", text);
    exit(1);
  }
  return scale;
}

/* The probe runs in a child process: CUDA initialized in the parent is unusable in the
 * children Check forks for each test (CUDA_ERROR_NOT_INITIALIZED there). */
void dlop_test_require_cuda_or_skip(void) {
  int pipe_fds[2];
  char reason[1024] = "could not start the CUDA probe process";
  int usable = 0;
  if (pipe(pipe_fds) == 0) {
    pid_t child = fork();
    if (child == 0) {
      dlop_device cuda = {DLOP_DEVICE_CUDA, 0};
      int ok = dlop_device_check(cuda) == DLOP_OK;
      const char *message = ok ? "" : dlop_last_error();
      ssize_t ignored = write(pipe_fds[1], message, strlen(message));
      (void)ignored;
      _exit(ok ? 0 : 1);
    }
    close(pipe_fds[1]);
    if (child > 0) {
      ssize_t n = read(pipe_fds[0], reason, sizeof reason - 1);
      reason[n > 0 ? n : 0] = '\0';
      int status = 0;
      waitpid(child, &status, 0);
      usable = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!usable && reason[0] == '\0') snprintf(reason, sizeof reason, "the CUDA probe crashed");
    }
    close(pipe_fds[0]);
  }
  if (usable) return;
  const char *require = getenv("DLOP_REQUIRE_GPU");
  if (require && strcmp(require, "1") == 0) {
    fprintf(stderr, "FAIL: DLOP_REQUIRE_GPU=1 but CUDA is not usable: %s\n", reason);
    exit(1);
  }
  printf("SKIP: CUDA tests need a GPU: %s\n", reason);
  exit(77);
}

/* Hand-written, so the GPU tests need no nvcc at run time. */
const char dlop_test_fill_ptx[] =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry dlop_test_fill(.param .u64 out, .param .u32 n, .param .u32 value)\n{\n"
    "  .reg .pred %p<2>;\n  .reg .b32 %r<8>;\n  .reg .b64 %rd<5>;\n"
    "  ld.param.u64 %rd1, [out];\n  ld.param.u32 %r1, [n];\n  ld.param.u32 %r2, [value];\n"
    "  mov.u32 %r3, %ctaid.x;\n  mov.u32 %r4, %ntid.x;\n  mov.u32 %r5, %tid.x;\n"
    "  mad.lo.s32 %r6, %r3, %r4, %r5;\n  setp.ge.u32 %p1, %r6, %r1;\n  @%p1 bra DONE;\n"
    "  cvta.to.global.u64 %rd2, %rd1;\n  mul.wide.u32 %rd3, %r6, 4;\n  add.s64 %rd4, %rd2, %rd3;\n"
    "  st.global.u32 [%rd4], %r2;\nDONE:\n  ret;\n}\n";

void dlop_test_load_bundled_plugins(void) {
  DLOP_CK_OK(dlop_load_default_plugins());
  ck_assert_msg(dlop_load_error_count() == 0, "bundled plugins failed to load: %s",
                dlop_load_error_count() ? dlop_load_error_at(0) : "");
}

void dlop_test_load_default(const char *plugin_path, const char *bundled) {
  setenv("DLOP_PLUGIN_PATH", plugin_path, 1);
  setenv("DLOP_BUNDLED_PLUGINS", bundled, 1);
  DLOP_CK_OK(dlop_load_default_plugins());
}

static char capture_path[] = "/tmp/dlop_test_stderr_XXXXXX";
static int saved_stderr = -1;

void dlop_test_capture_stderr(void) {
  fflush(stderr);
  int fd = mkstemp(capture_path);
  ck_assert_int_ge(fd, 0);
  saved_stderr = dup(2);
  dup2(fd, 2);
  close(fd);
}

const char *dlop_test_captured_stderr(void) {
  static char text[16384];
  fflush(stderr);
  dup2(saved_stderr, 2);
  close(saved_stderr);
  FILE *file = fopen(capture_path, "r");
  ck_assert_ptr_nonnull(file);
  size_t length = fread(text, 1, sizeof text - 1, file);
  text[length] = '\0';
  fclose(file);
  unlink(capture_path);
  return text;
}

void dlop_test_copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  ck_assert_msg(in && out, "copy %s -> %s: %s", from, to, strerror(errno));
  char buffer[65536];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, in)) > 0)
    ck_assert_uint_eq(fwrite(buffer, 1, n, out), n);
  fclose(in);
  fclose(out);
}

uint64_t dlop_test_random_bits(uint64_t *state) {
  /* splitmix64: small, reproducible, good enough for test data */
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double dlop_test_random_unit(uint64_t *state) { return (double)(dlop_test_random_bits(state) >> 11) * 0x1p-53; }

void dlop_test_fill_random(void *data, dlop_dtype dtype, int64_t n, uint64_t seed, double low,
                           double high) {
  uint64_t state = seed;
  for (int64_t i = 0; i < n; i++) {
    double u = dlop_test_random_unit(&state);
    double v = low + (high - low) * u;
    if (!dlop_dtype_is_float(dtype)) v = floor(v + 0.5);
    if (dtype == DLOP_BOOL) v = v >= 0.5 * (low + high) ? 1 : 0;
    dlop_test_set(data, dtype, i, v);
  }
}

int dlop_test_integer_range(dlop_dtype dtype, double *low, double *high) {
  switch (dtype) {
    case DLOP_INT8: *low = -128; *high = 127; return 1;
    case DLOP_UINT8: *low = 0; *high = 255; return 1;
    case DLOP_INT16: *low = -32768; *high = 32767; return 1;
    case DLOP_INT32: *low = -2147483648.0; *high = 2147483647.0; return 1;
    case DLOP_INT64: *low = -9.0e18; *high = 9.0e18; return 1;
    default: return 0;
  }
}

/* A float's bits and back (memcpy: the only way C allows). */
static float float_of_bits(uint32_t bits) {
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static uint32_t bits_of_float(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  return bits;
}

float dlop_test_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else { /* subnormal: value = mantissa * 2^-24 */
      float f = (float)mantissa * 5.9604644775390625e-8f;
      return sign ? -f : f;
    }
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  return float_of_bits(bits);
}

uint16_t dlop_test_float_to_half(float f) {
  uint32_t sign = (bits_of_float(f) >> 16) & 0x8000u;
  float a = fabsf(f);
  if (isnan(f)) return (uint16_t)(sign | 0x7e00u);
  if (a >= 65520.0f) return (uint16_t)(sign | 0x7c00u); /* rounds to infinity */
  if (a < 6.103515625e-05f) { /* subnormal or zero: multiples of 2^-24, round to nearest even */
    float scaled = a * 16777216.0f;
    return (uint16_t)(sign | (uint16_t)nearbyintf(scaled));
  }
  uint32_t bits = bits_of_float(a);
  uint32_t exponent = (bits >> 23) - 112, mantissa = bits & 0x7fffffu;
  uint32_t half = (exponent << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) half++;
  return (uint16_t)(sign | half);
}

float dlop_test_bfloat16_to_float(uint16_t b) { return float_of_bits((uint32_t)b << 16); }

uint16_t dlop_test_float_to_bfloat16(float f) {
  uint32_t bits = bits_of_float(f);
  if (isnan(f)) return (uint16_t)((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

int64_t dlop_test_int_cast_ends(double *v, dlop_dtype from) {
  static const double ends[] = {-128.0, 127.0, -32768.0, 32767.0, 0.0, 255.0, -2147483648.0,
                                2147483647.0, -0x1p63, 0x1p63};
  static const double offsets[] = {0.0, 0.5, -0.5, 0.9, -0.9};
  const int f32 = from == DLOP_FLOAT32;
  const double big = f32 ? FLT_MAX : DBL_MAX;
  int64_t n = 0;
  for (size_t e = 0; e < sizeof ends / sizeof ends[0]; e++)
    for (int step = -1; step <= 1; step++)
      for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++) {
        double x = ends[e] + step + offsets[o];
        if (f32) x = (float)x;
        v[n++] = x;
        if (o == 0) {
          v[n++] = f32 ? nextafterf((float)x, INFINITY) : nextafter(x, INFINITY);
          v[n++] = f32 ? nextafterf((float)x, -INFINITY) : nextafter(x, -INFINITY);
        }
      }
  /* and where int64's CPU kernel changes method (2^51) or doubles stop holding halves (2^52),
   * with ties that round to even one way and truncate the other */
  const double specials[] = {2147483647.5, -2147483648.9, NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, big, -big,
                             0x1p51 - 0.5, -0x1p51 + 0.5, 0x1p51, -0x1p51, 0x1p51 + 0.5, -0x1p51 - 0.5,
                             0x1p52 - 0.5, -0x1p52 + 0.5, 0x1p52 + 1, 2.5, -2.5, 3.5, -0.5, 0.5};
  for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++)
    v[n++] = f32 ? (double)(float)specials[k] : specials[k];
  return n;
}

double dlop_test_get(const void *data, dlop_dtype dtype, int64_t i) {
  switch (dtype) {
    case DLOP_BOOL: return ((const uint8_t *)data)[i] != 0;
    case DLOP_INT8: return ((const int8_t *)data)[i];
    case DLOP_INT16: return ((const int16_t *)data)[i];
    case DLOP_INT32: return ((const int32_t *)data)[i];
    case DLOP_INT64: return (double)((const int64_t *)data)[i];
    case DLOP_UINT8: return ((const uint8_t *)data)[i];
    case DLOP_FLOAT16: return dlop_test_half_to_float(((const uint16_t *)data)[i]);
    case DLOP_BFLOAT16: return dlop_test_bfloat16_to_float(((const uint16_t *)data)[i]);
    case DLOP_FLOAT32: return ((const float *)data)[i];
    case DLOP_FLOAT64: return ((const double *)data)[i];
    default: return NAN;
  }
}

void dlop_test_set(void *data, dlop_dtype dtype, int64_t i, double v) {
  switch (dtype) {
    case DLOP_BOOL: ((uint8_t *)data)[i] = v != 0; break;
    case DLOP_INT8: ((int8_t *)data)[i] = (int8_t)v; break;
    case DLOP_INT16: ((int16_t *)data)[i] = (int16_t)v; break;
    case DLOP_INT32: ((int32_t *)data)[i] = (int32_t)v; break;
    case DLOP_INT64: ((int64_t *)data)[i] = (int64_t)v; break;
    case DLOP_UINT8: ((uint8_t *)data)[i] = (uint8_t)v; break;
    case DLOP_FLOAT16: ((uint16_t *)data)[i] = dlop_test_float_to_half((float)v); break;
    case DLOP_BFLOAT16: ((uint16_t *)data)[i] = dlop_test_float_to_bfloat16((float)v); break;
    case DLOP_FLOAT32: ((float *)data)[i] = (float)v; break;
    case DLOP_FLOAT64: ((double *)data)[i] = v; break;
    default: break;
  }
}

double dlop_test_tolerance(dlop_dtype dtype) {
  switch (dtype) {
    case DLOP_FLOAT16: return 2e-3;
    case DLOP_BFLOAT16: return 1.6e-2;
    case DLOP_FLOAT32: return 2e-6;
    case DLOP_FLOAT64: return 1e-13;
    default: return 0.0;
  }
}

int64_t dlop_test_compare(const void *expected, const void *actual, dlop_dtype dtype, int64_t n,
                          double atol, double rtol, char *report, size_t report_size) {
  int64_t mismatches = 0;
  size_t used = 0;
  if (report_size) report[0] = '\0';
  for (int64_t i = 0; i < n; i++) {
    double e = dlop_test_get(expected, dtype, i), a = dlop_test_get(actual, dtype, i);
    int ok = (isnan(e) && isnan(a)) || (e == a) || fabs(a - e) <= atol + rtol * fabs(e);
    if (ok) continue;
    if (mismatches < 5 && used < report_size) {
      int w = snprintf(report + used, report_size - used, "%s[%lld] expected %.9g, got %.9g",
                       mismatches ? "; " : "", (long long)i, e, a);
      if (w > 0) used += (size_t)w;
    }
    mismatches++;
  }
  return mismatches;
}

int64_t dlop_test_compare_bits(const void *expected, const void *actual, dlop_dtype dtype,
                               int64_t n, char *report, size_t report_size) {
  const size_t size = dlop_dtype_size(dtype);
  const int is_float = (DLOP_DTYPES_FLOAT & DLOP_DTYPE_BIT(dtype)) != 0;
  int64_t mismatches = 0;
  size_t used = 0;
  if (report_size) report[0] = '\0';
  for (int64_t i = 0; i < n; i++) {
    const unsigned char *e = (const unsigned char *)expected + (size_t)i * size;
    const unsigned char *a = (const unsigned char *)actual + (size_t)i * size;
    if (memcmp(e, a, size) == 0) continue;
    double ev = dlop_test_get(expected, dtype, i), av = dlop_test_get(actual, dtype, i);
    if (is_float && isnan(ev) && isnan(av)) continue;
    if (mismatches < 5 && used < report_size) {
      uint64_t eb = 0, ab = 0;
      memcpy(&eb, e, size);
      memcpy(&ab, a, size);
      int w = snprintf(report + used, report_size - used,
                       "%s[%lld] expected %.17g (0x%llx), got %.17g (0x%llx)", mismatches ? "; " : "",
                       (long long)i, ev, (unsigned long long)eb, av, (unsigned long long)ab);
      if (w > 0) used += (size_t)w;
    }
    mismatches++;
  }
  return mismatches;
}
