/* test_interop_cuda.c — the interop API on a GPU: a stream marker is pending while work before
 * it runs and complete after dlop_stream_marker_wait; dlop_stream_wait_foreign and
 * dlop_array_wait_on_stream make the other stream wait on the GPU (proved with markers);
 * dlop_array_record_write makes a stream the array's pending writer (and refuses another
 * device's); and
 * dlop_cuda_pointer_device names the GPU that owns a pointer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

static const dlop_device cuda0 = {DLOP_DEVICE_CUDA, 0};
enum { N = 1 << 26, LONG_RUNS = 200 };

typedef struct fixture {
  dlop_graph *graph;
  dlop_function *exp;
  dlop_array *input;
} fixture;

/* exp over N float32 on cuda:0: about 0.13 ms a run on an H200, so LONG_RUNS runs keep the GPU
 * busy for tens of milliseconds while the host enqueues them in about one. */
static void setup(fixture *f) {
  dlop_test_load_bundled_plugins();
  int64_t shape[1] = {N};
  dlop_var *x, *y;
  DLOP_CK_OK(dlop_graph_create(&f->graph));
  DLOP_CK_OK(dlop_graph_input(f->graph, "x", DLOP_FLOAT32, 1, shape, &x));
  DLOP_CK_OK(dlop_graph_apply(f->graph, "exp", &x, 1, NULL, 0, &y, 1));
  DLOP_CK_OK(dlop_function_compile(f->graph, &x, 1, &y, 1, cuda0, &f->exp));
  DLOP_CK_OK(dlop_array_empty(cuda0, DLOP_FLOAT32, 1, shape, &f->input));
  float *host = malloc(sizeof(float) * N);
  ck_assert_ptr_nonnull(host);
  for (int64_t i = 0; i < N; i++) host[i] = (float)(i % 7) * 0.25f;
  dlop_array *upload = NULL;
  DLOP_CK_OK(dlop_array_from_host(cuda0, DLOP_FLOAT32, 1, shape, host, &upload));
  dlop_array_release(f->input);
  f->input = upload;
  DLOP_CK_OK(dlop_array_synchronize(f->input));
  free(host);
}

static void teardown(fixture *f) {
  dlop_array_release(f->input);
  dlop_function_destroy(f->exp);
  dlop_graph_destroy(f->graph);
}

/* Enqueue LONG_RUNS runs on stream; returns the last output (the caller releases it). */
static dlop_array *keep_busy(fixture *f, dlop_stream *stream) {
  dlop_array *out = NULL;
  for (int r = 0; r < LONG_RUNS; r++) {
    if (out) dlop_array_release(out);
    DLOP_CK_OK(dlop_function_run(f->exp, &f->input, 1, &out, 1, stream));
  }
  return out;
}

static void check_exp_values(dlop_array *out) {
  float *host = malloc(sizeof(float) * N);
  ck_assert_ptr_nonnull(host);
  DLOP_CK_OK(dlop_array_to_host(out, host, sizeof(float) * N));
  for (int64_t i = 0; i < N; i += 4099) {
    float want = expf((float)(i % 7) * 0.25f);
    ck_assert_msg(fabsf(host[i] - want) <= 1e-6f * want, "exp at %lld: %g, expected %g",
                  (long long)i, host[i], want);
  }
  free(host);
}

START_TEST(test_marker_pending_then_complete) {
  fixture f;
  setup(&f);
  dlop_stream *stream = NULL;
  DLOP_CK_OK(dlop_stream_create(cuda0, &stream));
  dlop_array *out = keep_busy(&f, stream);
  dlop_stream_marker *marker = NULL;
  DLOP_CK_OK(dlop_stream_marker_record(stream, &marker));
  ck_assert_int_eq(dlop_stream_marker_device(marker).type, DLOP_DEVICE_CUDA);
  int done = -1;
  DLOP_CK_OK(dlop_stream_marker_query(marker, &done));
  ck_assert_msg(done == 0, "a marker after %d long runs was already complete", LONG_RUNS);
  DLOP_CK_OK(dlop_stream_marker_wait(marker));
  DLOP_CK_OK(dlop_stream_marker_query(marker, &done));
  ck_assert_int_eq(done, 1);
  dlop_stream_marker_destroy(marker);
  check_exp_values(out);
  dlop_array_release(out);
  dlop_stream_destroy(stream);
  teardown(&f);
}
END_TEST

/* After `waiter` was made to wait for `busy` (one of the two calls under test), a marker on the
 * waiter completes only after the busy stream's earlier work: once it has passed, a marker that
 * was recorded on the busy stream before the wait must be complete too. */
static void check_waited(dlop_stream_marker *before, dlop_stream *waiter) {
  int done = -1;
  DLOP_CK_OK(dlop_stream_marker_query(before, &done));
  ck_assert_msg(done == 0, "the busy stream finished before the test could check the wait");
  dlop_stream_marker *after = NULL;
  DLOP_CK_OK(dlop_stream_marker_record(waiter, &after));
  DLOP_CK_OK(dlop_stream_marker_wait(after));
  DLOP_CK_OK(dlop_stream_marker_query(before, &done));
  ck_assert_msg(done == 1, "the waiting stream ran ahead of the work it was made to wait for");
  dlop_stream_marker_destroy(after);
}

/* A wait test's fixture and two streams: busy, kept busy by LONG_RUNS runs (the last output in
 * out) with the marker `before` recorded after them, and other, the stream the test makes wait. */
typedef struct busy_and_other {
  fixture f;
  dlop_stream *busy, *other;
  dlop_array *out;
  dlop_stream_marker *before;
} busy_and_other;

static void start_busy(busy_and_other *s) {
  setup(&s->f);
  DLOP_CK_OK(dlop_stream_create(cuda0, &s->busy));
  DLOP_CK_OK(dlop_stream_create(cuda0, &s->other));
  s->out = keep_busy(&s->f, s->busy);
  s->before = NULL;
  DLOP_CK_OK(dlop_stream_marker_record(s->busy, &s->before));
}

static void end_busy(busy_and_other *s) {
  dlop_stream_marker_destroy(s->before);
  dlop_array_release(s->out);
  dlop_stream_destroy(s->busy);
  dlop_stream_destroy(s->other);
  teardown(&s->f);
}

START_TEST(test_stream_wait_foreign_orders_on_the_gpu) {
  busy_and_other s;
  start_busy(&s);
  /* busy's CUstream stands for another library's stream */
  DLOP_CK_OK(dlop_stream_wait_foreign(s.other, dlop_stream_handle(s.busy)));
  check_waited(s.before, s.other);
  end_busy(&s);
}
END_TEST

START_TEST(test_array_wait_on_stream_orders_on_the_gpu) {
  busy_and_other s;
  start_busy(&s);
  /* other's CUstream stands for the stream a DLPack consumer passes */
  DLOP_CK_OK(dlop_array_wait_on_stream(s.out, dlop_stream_handle(s.other)));
  check_waited(s.before, s.other);
  check_exp_values(s.out);
  end_busy(&s);
}
END_TEST

START_TEST(test_pointer_device) {
  int64_t shape[1] = {16};
  dlop_array *array = NULL;
  DLOP_CK_OK(dlop_array_empty(cuda0, DLOP_FLOAT32, 1, shape, &array));
  int32_t id = -7;
  DLOP_CK_OK(dlop_cuda_pointer_device(dlop_array_tensor(array)->data, &id));
  ck_assert_int_eq(id, 0);
  int on_the_host = 0;
  ck_assert_int_eq(dlop_cuda_pointer_device(&on_the_host, &id), DLOP_INVALID_ARGUMENT);
  ck_assert_int_eq(id, -1);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "is not CUDA device memory"));
  dlop_array_release(array);
}
END_TEST

START_TEST(test_array_record_write) {
  int64_t shape[1] = {16};
  dlop_array *array = NULL;
  dlop_stream *stream = NULL, *cpu_stream = NULL;
  DLOP_CK_OK(dlop_array_empty(cuda0, DLOP_FLOAT32, 1, shape, &array));
  DLOP_CK_OK(dlop_stream_create(cuda0, &stream));
  DLOP_CK_OK(dlop_array_record_write(array, stream));
  ck_assert_ptr_eq(dlop_array_stream(array), stream);
  DLOP_CK_OK(dlop_stream_create((dlop_device){DLOP_DEVICE_CPU, 0}, &cpu_stream));
  ck_assert_int_eq(dlop_array_record_write(array, cpu_stream), DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(dlop_last_error(), "expected a stream of the array's device"));
  ck_assert_ptr_eq(dlop_array_stream(array), stream);
  dlop_stream_destroy(stream); /* the array keeps its own reference */
  DLOP_CK_OK(dlop_array_synchronize(array));
  ck_assert_ptr_null(dlop_array_stream(array));
  dlop_stream_destroy(cpu_stream);
  dlop_array_release(array);
}
END_TEST

int main(void) {
  dlop_test_require_cuda_or_skip();
  Suite *suite = suite_create("interop_cuda");
  TCase *tc = dlop_test_tcase(suite, "cuda", 120, NULL, NULL);
  dlop_test_add_tests(tc,
                      test_marker_pending_then_complete,
                      test_stream_wait_foreign_orders_on_the_gpu,
                      test_array_wait_on_stream_orders_on_the_gpu,
                      test_pointer_device,
                      test_array_record_write,
                      NULL);
  return dlop_test_run_suite(suite);
}
