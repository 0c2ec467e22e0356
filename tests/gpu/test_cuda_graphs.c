/* test_cuda_graphs.c — replayed CUDA graphs of compiled functions on cuda:0: a 10-op
 * elementwise function with graphs on gives the same bits as with them off on random data;
 * new input addresses every call; outputs kept across calls are not overwritten by later
 * replays; changing shapes record new graphs; two functions interleaved; 4 threads on one
 * function; a node not declared capture-safe keeps its function out (and explain() names it);
 * views and strided inputs feeding the graph; outputs that are inputs or given twice; no driver
 * allocation once recorded; a caller's stream. explain() counts recordings and launches. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_runner.h"
#include "test_support.h"

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};
static const dlop_device CUDA = {DLOP_DEVICE_CUDA, 0};

static dlop_graph *graph;
static void graph_setup(void) { graph = dlop_test_new_graph(); }
static void graph_teardown(void) { dlop_graph_destroy(graph); }

static dlop_var *apply2(dlop_graph *g, const char *op, dlop_var *a, dlop_var *b) {
  dlop_var *in[2] = {a, b}, *out;
  DLOP_CK_OK(dlop_graph_apply(g, op, in, 2, NULL, 0, &out, 1));
  return out;
}

static dlop_var *apply1(dlop_graph *g, const char *op, dlop_var *a) {
  dlop_var *out;
  DLOP_CK_OK(dlop_graph_apply(g, op, &a, 1, NULL, 0, &out, 1));
  return out;
}

/* The 10-op graph of the benchmark (bench/cuda_graphs.py): x, b of n float32 (n unknown). */
static dlop_var *ten_ops(dlop_graph *g, dlop_var **inputs) {
  DLOP_CK_OK(dlop_graph_input(g, "x", DLOP_FLOAT32, 1, (int64_t[]){DLOP_DIM_UNKNOWN}, &inputs[0]));
  DLOP_CK_OK(dlop_graph_input(g, "b", DLOP_FLOAT32, 1, (int64_t[]){DLOP_DIM_UNKNOWN}, &inputs[1]));
  dlop_var *x = inputs[0], *b = inputs[1];
  dlop_var *t = apply2(g, "mul", x, b);
  t = apply2(g, "add", t, x);
  t = apply1(g, "tanh", t);
  t = apply2(g, "mul", t, b);
  t = apply2(g, "sub", t, x);
  t = apply1(g, "sigmoid", t);
  t = apply2(g, "add", t, b);
  t = apply2(g, "mul", t, x);
  t = apply2(g, "maximum", t, b);
  return apply2(g, "sub", t, b);
}

static dlop_function *compile(dlop_graph *g, dlop_var *const *inputs, int32_t num_inputs,
                              dlop_var *const *outputs, int32_t num_outputs, int cuda_graphs) {
  dlop_function_options options = DLOP_FUNCTION_OPTIONS_INIT;
  options.cuda_graphs = cuda_graphs;
  options.fuse = 0; /* several kernel nodes: fusion would make these functions one kernel */
  dlop_function *function = NULL;
  DLOP_CK_OK(dlop_function_compile_with_options(g, inputs, num_inputs, outputs, num_outputs, CUDA,
                                                &options, &function));
  return function;
}

/* The counts of explain()'s "cuda graphs: replayed (...)" line; 0 when it says not replayed. */
typedef struct graph_counts {
  int replayed;
  unsigned long long recorded, launches, moved;
  char line[512];
} graph_counts;

static graph_counts counts_of(const dlop_function *function) {
  graph_counts c;
  memset(&c, 0, sizeof c);
  char text[8192];
  DLOP_CK_OK(dlop_function_explain(function, text, sizeof text));
  const char *line = strstr(text, "cuda graphs: ");
  ck_assert_msg(line != NULL, "explain() of a CUDA function says nothing of graphs:\n%s", text);
  size_t length = strcspn(line, "\n");
  snprintf(c.line, sizeof c.line, "%.*s", (int)length, line);
  c.replayed = strncmp(line, "cuda graphs: replayed", 21) == 0;
  if (c.replayed)
    ck_assert_msg(sscanf(line,
                         "cuda graphs: replayed (one graph per input signature, recorded on its "
                         "second run; %llu recorded, %llu graph launches, %llu of them with moved "
                         "addresses)",
                         &c.recorded, &c.launches, &c.moved) == 3,
                  "%s", c.line);
  return c;
}

static dlop_array *random_on_gpu(int64_t n, uint64_t seed) {
  float *data = malloc(sizeof(float) * (size_t)(n + 1));
  dlop_test_fill_random(data, DLOP_FLOAT32, n, seed, -2, 2);
  dlop_array *array = NULL;
  DLOP_CK_OK(dlop_array_from_host(CUDA, DLOP_FLOAT32, 1, &n, data, &array));
  free(data);
  return array;
}

/* Bitwise equal float32 arrays (the same kernels run either way). */
static void check_same(dlop_array *expected, dlop_array *actual, const char *what) {
  ck_assert_int_eq(dlop_array_numel(expected), dlop_array_numel(actual));
  int64_t n = dlop_array_numel(expected);
  float *e = dlop_test_read_back(expected), *a = dlop_test_read_back(actual);
  for (int64_t i = 0; i < n; i++)
    if (memcmp(&e[i], &a[i], sizeof(float)) != 0)
      ck_abort_msg("%s: [%lld] is %.9g with graphs, %.9g node by node", what, (long long)i,
                   (double)a[i], (double)e[i]);
  free(e);
  free(a);
}

/* Calls with fresh inputs at new addresses (the previous ones stay alive, so the pool cannot
 * hand the same blocks back), graphs on against off: the same bits every time; the outputs of
 * all calls are kept and checked again at the end, after every later replay. */
START_TEST(test_replay_matches_node_by_node) {
  enum { CALLS = 8 };
  const int64_t n = 1024;
  dlop_var *in[2];
  dlop_var *y = ten_ops(graph, in);
  dlop_function *on = compile(graph, in, 2, &y, 1, 1), *off = compile(graph, in, 2, &y, 1, 0);
  dlop_array *inputs[CALLS][2], *with[CALLS], *without[CALLS];
  for (int call = 0; call < CALLS; call++) {
    inputs[call][0] = random_on_gpu(n, 100 + call);
    inputs[call][1] = random_on_gpu(n, 200 + call);
    DLOP_CK_OK(dlop_function_run(on, inputs[call], 2, &with[call], 1, NULL));
    DLOP_CK_OK(dlop_function_run(off, inputs[call], 2, &without[call], 1, NULL));
    char what[64];
    snprintf(what, sizeof what, "call %d", call);
    check_same(without[call], with[call], what);
  }
  for (int call = 0; call < CALLS; call++) {
    char what[64];
    snprintf(what, sizeof what, "call %d's output after %d more calls", call, CALLS - 1 - call);
    check_same(without[call], with[call], what);
  }
  graph_counts c = counts_of(on);
  ck_assert_msg(c.replayed && c.recorded == 1 && c.launches == CALLS - 1 && c.moved == CALLS - 2,
                "%s (expected 1 recorded on call 2, %d launches, %d with moved addresses)", c.line,
                CALLS - 1, CALLS - 2);
  graph_counts o = counts_of(off);
  ck_assert_str_eq(o.line, "cuda graphs: not replayed: turned off by the cuda_graphs option");
  for (int call = 0; call < CALLS; call++)
    dlop_test_release_arrays(4, inputs[call][0], inputs[call][1], with[call], without[call]);
  dlop_function_destroy(on);
  dlop_function_destroy(off);
}
END_TEST

/* The same inputs again and the output released before the next call (a Python loop
 * `y = f(x, b)`): the pool hands the same output block back, so no address moves, and no
 * driver allocation is made once recorded. */
START_TEST(test_steady_state_replays_without_updates) {
  const int64_t n = 4096;
  dlop_var *in[2];
  dlop_var *y = ten_ops(graph, in);
  dlop_function *on = compile(graph, in, 2, &y, 1, 1), *off = compile(graph, in, 2, &y, 1, 0);
  dlop_array *inputs[2] = {random_on_gpu(n, 1), random_on_gpu(n, 2)}, *out = NULL, *want = NULL;
  DLOP_CK_OK(dlop_function_run(off, inputs, 2, &want, 1, NULL));
  for (int call = 0; call < 3; call++) {
    DLOP_CK_OK(dlop_function_run(on, inputs, 2, &out, 1, NULL));
    dlop_array_release(out);
  }
  DLOP_CK_OK(dlop_array_synchronize(inputs[0]));
  dlop_memory_stats before = dlop_test_memory_stats(CUDA);
  graph_counts first = counts_of(on);
  for (int call = 0; call < 50; call++) {
    DLOP_CK_OK(dlop_function_run(on, inputs, 2, &out, 1, NULL));
    if (call < 49) dlop_array_release(out);
  }
  check_same(want, out, "the 50th replay");
  dlop_memory_stats after = dlop_test_memory_stats(CUDA);
  ck_assert_msg(after.driver_allocations == before.driver_allocations,
                "50 replays made %llu driver allocations",
                (unsigned long long)(after.driver_allocations - before.driver_allocations));
  graph_counts last = counts_of(on);
  ck_assert_msg(last.launches == first.launches + 50 && last.moved <= first.moved + 2, "%s then %s",
                first.line, last.line);
  dlop_test_release_arrays(4, inputs[0], inputs[1], out, want);
  dlop_function_destroy(on);
  dlop_function_destroy(off);
}
END_TEST

/* Lengths that change and come back: each length seen twice records its own graph, and every
 * result equals node by node's. */
START_TEST(test_changing_shapes_record_again) {
  static const int64_t lengths[] = {1000, 37, 1000, 37, 1000, 0, 0, 0, 4097, 37, 4097, 4097, 1};
  enum { COUNT = sizeof lengths / sizeof lengths[0] };
  dlop_var *in[2];
  dlop_var *y = ten_ops(graph, in);
  dlop_function *on = compile(graph, in, 2, &y, 1, 1), *off = compile(graph, in, 2, &y, 1, 0);
  for (int k = 0; k < COUNT; k++) {
    dlop_array *inputs[2] = {random_on_gpu(lengths[k], 7 * k + 1),
                             random_on_gpu(lengths[k], 7 * k + 2)};
    dlop_array *a = NULL, *b = NULL;
    DLOP_CK_OK(dlop_function_run(on, inputs, 2, &a, 1, NULL));
    DLOP_CK_OK(dlop_function_run(off, inputs, 2, &b, 1, NULL));
    char what[64];
    snprintf(what, sizeof what, "length %lld (call %d)", (long long)lengths[k], k);
    check_same(b, a, what);
    dlop_test_release_arrays(4, inputs[0], inputs[1], a, b);
  }
  graph_counts c = counts_of(on);
  /* 1000, 37, 0 and 4097 come twice or more: four recordings; their later calls replay */
  ck_assert_msg(c.replayed && c.recorded == 4 && c.launches == 4 + 1 + 1 + 1 + 1, "%s", c.line);
  dlop_function_destroy(on);
  dlop_function_destroy(off);
}
END_TEST

/* Two functions alive at once, called in turn on the same inputs and on each other's outputs. */
START_TEST(test_two_functions_interleaved) {
  const int64_t n = 777;
  dlop_var *in[2];
  dlop_var *y = ten_ops(graph, in);
  dlop_graph *other = dlop_test_new_graph();
  dlop_var *x2;
  dlop_var *z = dlop_test_exp_double(other, DLOP_FLOAT32, DLOP_DIM_UNKNOWN, &x2);
  z = apply1(other, "tanh", z);
  dlop_function *f = compile(graph, in, 2, &y, 1, 1), *f_off = compile(graph, in, 2, &y, 1, 0);
  dlop_function *g = compile(other, &x2, 1, &z, 1, 1), *g_off = compile(other, &x2, 1, &z, 1, 0);
  for (int call = 0; call < 6; call++) {
    dlop_array *inputs[2] = {random_on_gpu(n, 31 + call), random_on_gpu(n, 41 + call)};
    dlop_array *fy = NULL, *fy_off = NULL, *gz = NULL, *gz_off = NULL;
    DLOP_CK_OK(dlop_function_run(f, inputs, 2, &fy, 1, NULL));
    DLOP_CK_OK(dlop_function_run(g, &fy, 1, &gz, 1, NULL)); /* g reads f's fresh output */
    DLOP_CK_OK(dlop_function_run(f_off, inputs, 2, &fy_off, 1, NULL));
    DLOP_CK_OK(dlop_function_run(g_off, &fy_off, 1, &gz_off, 1, NULL));
    check_same(fy_off, fy, "f");
    check_same(gz_off, gz, "g of f");
    dlop_test_release_arrays(6, inputs[0], inputs[1], fy, fy_off, gz, gz_off);
  }
  graph_counts cf = counts_of(f), cg = counts_of(g);
  ck_assert_msg(cf.recorded == 1 && cf.launches == 5, "f: %s", cf.line);
  ck_assert_msg(cg.recorded == 1 && cg.launches == 5, "g: %s", cg.line);
  dlop_function_destroy(f);
  dlop_function_destroy(f_off);
  dlop_function_destroy(g);
  dlop_function_destroy(g_off);
  dlop_graph_destroy(other);
}
END_TEST

/* 4 threads on one function, each with its own inputs (and, for two of them, their own
 * stream), checked against node by node's results on the same inputs. */
typedef struct thread_context {
  dlop_function *off;
} thread_context;

static void ten_ops_runs(dlop_test_thread *thread) {
  const thread_context *context = thread->context;
  const int64_t n = 2048 + 16 * thread->index;
  dlop_stream *stream = NULL;
  if (thread->index % 2 == 1 && dlop_stream_create(CUDA, &stream) != DLOP_OK) {
    thread->failures++;
    snprintf(thread->message, sizeof thread->message, "stream: %s", dlop_last_error());
    return;
  }
  for (int run = 0; run < 60 && thread->failures == 0; run++) {
    dlop_array *inputs[2] = {NULL, NULL}, *got = NULL, *want = NULL;
    float *data = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < 2; i++) {
      dlop_test_fill_random(data, DLOP_FLOAT32, n, 1000 * thread->index + 2 * run + i, -2, 2);
      if (dlop_array_from_host(CUDA, DLOP_FLOAT32, 1, &n, data, &inputs[i]) != DLOP_OK)
        thread->failures++;
    }
    free(data);
    if (thread->failures == 0 &&
        (dlop_function_run(thread->function, inputs, 2, &got, 1, stream) != DLOP_OK ||
         dlop_function_run(context->off, inputs, 2, &want, 1, stream) != DLOP_OK)) {
      thread->failures++;
      snprintf(thread->message, sizeof thread->message, "run %d: %s", run, dlop_last_error());
    }
    if (thread->failures == 0) {
      float *a = dlop_test_read_back(got), *b = dlop_test_read_back(want);
      for (int64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
          thread->failures++;
          snprintf(thread->message, sizeof thread->message,
                   "run %d [%lld]: %.9g with graphs, %.9g node by node", run, (long long)i,
                   (double)a[i], (double)b[i]);
          break;
        }
      free(a);
      free(b);
    }
    dlop_test_release_arrays(4, inputs[0], inputs[1], got, want);
  }
  if (stream) dlop_stream_destroy(stream);
}

START_TEST(test_four_threads_one_function) {
  dlop_var *in[2];
  dlop_var *y = ten_ops(graph, in);
  dlop_function *on = compile(graph, in, 2, &y, 1, 1);
  thread_context context = {compile(graph, in, 2, &y, 1, 0)};
  dlop_test_run_threads(4, on, &context, ten_ops_runs);
  graph_counts c = counts_of(on);
  /* one length per thread: four signatures, each recorded once (concurrent second runs of one
   * signature wait for its capture) */
  ck_assert_msg(c.replayed && c.recorded == 4 && c.launches == 4 * 59, "%s", c.line);
  dlop_function_destroy(on);
  dlop_function_destroy(context.off);
}
END_TEST

/* matmul is not capture-safe: its function runs node by node, explain() names the node, and
 * results stay right call after call. */
START_TEST(test_unsafe_node_keeps_function_out) {
  const int64_t shape[2] = {16, 16};
  dlop_var *x, *d, *m;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 2, shape, &x));
  d = apply1(graph, "double", x);
  m = apply2(graph, "matmul", d, x);
  m = apply1(graph, "tanh", m);
  dlop_function *on = compile(graph, &x, 1, &m, 1, 1);
  dlop_function *cpu = NULL;
  DLOP_CK_OK(dlop_function_compile(graph, &x, 1, &m, 1, CPU, &cpu));
  graph_counts c = counts_of(on);
  ck_assert_str_eq(c.line, "cuda graphs: not replayed: node #1 matmul is not declared safe for "
                           "capture (its op lacks DLOP_OP_CUDA_GRAPH_SAFE)");
  float data[256];
  for (int call = 0; call < 4; call++) {
    dlop_test_fill_random(data, DLOP_FLOAT32, 256, 90 + call, -1, 1);
    dlop_array *host = NULL, *device = NULL, *want = NULL, *got = NULL;
    DLOP_CK_OK(dlop_array_from_host(CPU, DLOP_FLOAT32, 2, shape, data, &host));
    DLOP_CK_OK(dlop_array_from_host(CUDA, DLOP_FLOAT32, 2, shape, data, &device));
    DLOP_CK_OK(dlop_function_run(cpu, &host, 1, &want, 1, NULL));
    DLOP_CK_OK(dlop_function_run(on, &device, 1, &got, 1, NULL));
    float *e = dlop_test_read_back(want), *a = dlop_test_read_back(got);
    char report[256];
    int64_t bad = dlop_test_compare(e, a, DLOP_FLOAT32, 256, 1e-4, 1e-4, report, sizeof report);
    ck_assert_msg(bad == 0, "call %d: %s", call, report);
    free(e);
    free(a);
    dlop_test_release_arrays(4, host, device, want, got);
  }
  dlop_function_destroy(on);
  dlop_function_destroy(cpu);
}
END_TEST

/* Strided and offset views as inputs (a kernel's arguments hold their strides and their
 * shifted addresses), a view inside the function, an output that is an input, one output given
 * twice. */
START_TEST(test_views_and_repeated_outputs) {
  const int64_t shape[2] = {64, 48};
  const int64_t axes[2] = {1, 0};
  dlop_var *a, *b, *v, *w;
  DLOP_CK_OK(dlop_graph_input(graph, "a", DLOP_FLOAT32, 2, shape, &a));
  DLOP_CK_OK(dlop_graph_input(graph, "b", DLOP_FLOAT32, 2, (int64_t[]){48, 64}, &b));
  DLOP_CK_OK(dlop_test_apply_ints(graph, "transpose", a, "axes", axes, 2, &v));
  v = apply2(graph, "mul", v, b);
  w = apply1(graph, "exp", v);
  w = apply2(graph, "add", w, b);
  dlop_var *outs[4] = {w, v, w, b};
  dlop_function *on = compile(graph, (dlop_var *[]){a, b}, 2, outs, 4, 1);
  dlop_function *off = compile(graph, (dlop_var *[]){a, b}, 2, outs, 4, 0);
  for (int call = 0; call < 5; call++) {
    /* a: rows of a bigger matrix, from row call on (a new offset and alignment each call
     * after the first two); b: every other column of a 48 x 128 matrix */
    dlop_array *big_a = random_on_gpu(80 * 48, 300 + call), *big_b = random_on_gpu(48 * 128, 400);
    dlop_array *flat_a = NULL, *flat_b = NULL, *va = NULL, *vb = NULL;
    int64_t big_a_shape[2] = {80, 48}, big_b_shape[2] = {48, 128};
    DLOP_CK_OK(dlop_array_view(big_a, 2, big_a_shape, NULL, 0, &flat_a));
    DLOP_CK_OK(dlop_array_view(big_b, 2, big_b_shape, NULL, 0, &flat_b));
    int row = call < 2 ? 0 : call;
    DLOP_CK_OK(dlop_array_view(flat_a, 2, shape, (int64_t[]){48, 1},
                               (uint64_t)row * 48 * sizeof(float), &va));
    DLOP_CK_OK(dlop_array_view(flat_b, 2, (int64_t[]){48, 64}, (int64_t[]){128, 2}, 0, &vb));
    dlop_array *inputs[2] = {va, vb}, *got[4], *want[4];
    DLOP_CK_OK(dlop_function_run(on, inputs, 2, got, 4, NULL));
    DLOP_CK_OK(dlop_function_run(off, inputs, 2, want, 4, NULL));
    check_same(want[0], got[0], "w");
    check_same(want[1], got[1], "v");
    ck_assert_ptr_eq(got[0], got[2]); /* one output given twice is one array */
    ck_assert_ptr_eq(got[3], vb);     /* an input handed back as an output */
    for (int o = 0; o < 4; o++) {
      dlop_array_release(got[o]);
      dlop_array_release(want[o]);
    }
    dlop_test_release_arrays(6, big_a, big_b, flat_a, flat_b, va, vb);
  }
  graph_counts c = counts_of(on);
  /* rows 0 (calls 0, 1) and 4 (768 bytes on: the same address mod 256) share a signature,
   * recorded on call 1 and replayed on call 4 at the moved address; rows 2 and 3 (384 and 576
   * bytes on) are other signatures, seen once each */
  ck_assert_msg(c.replayed && c.recorded == 1 && c.launches == 2 && c.moved == 1, "%s", c.line);
  dlop_function_destroy(on);
  dlop_function_destroy(off);
}
END_TEST

/* A run on a caller's stream, the function destroyed at once: destroy waits for the replay,
 * and the result read afterwards is complete. */
START_TEST(test_caller_stream_and_destroy) {
  const int64_t n = (int64_t)1 << 20;
  dlop_var *in[2];
  dlop_var *y = ten_ops(graph, in);
  dlop_function *off = compile(graph, in, 2, &y, 1, 0);
  dlop_function *on = compile(graph, in, 2, &y, 1, 1);
  dlop_stream *stream = NULL;
  DLOP_CK_OK(dlop_stream_create(CUDA, &stream));
  dlop_array *inputs[2] = {random_on_gpu(n, 5), random_on_gpu(n, 6)}, *want = NULL, *got = NULL;
  DLOP_CK_OK(dlop_function_run(off, inputs, 2, &want, 1, NULL));
  for (int call = 0; call < 3; call++) {
    dlop_array_release(got);
    got = NULL;
    DLOP_CK_OK(dlop_function_run(on, inputs, 2, &got, 1, stream));
  }
  graph_counts c = counts_of(on);
  ck_assert_msg(c.launches == 2, "%s", c.line);
  dlop_function_destroy(on);
  check_same(want, got, "after destroy");
  dlop_test_release_arrays(4, inputs[0], inputs[1], want, got);
  dlop_stream_destroy(stream);
  dlop_function_destroy(off);
}
END_TEST

int main(void) {
  dlop_test_require_cuda_or_skip();
  Suite *suite = suite_create("cuda_graphs");
  TCase *replay = dlop_test_tcase(suite, "replay", 300, graph_setup, graph_teardown);
  dlop_test_add_tests(replay, test_replay_matches_node_by_node,
                      test_steady_state_replays_without_updates, test_changing_shapes_record_again,
                      test_two_functions_interleaved, test_four_threads_one_function,
                      test_unsafe_node_keeps_function_out, test_views_and_repeated_outputs,
                      test_caller_stream_and_destroy, NULL);
  return dlop_test_run_suite(suite);
}
