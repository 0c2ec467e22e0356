/* graph_runner.h — test helpers for the graph and array API: a graph with the bundled plugins
 * loaded, the small graphs the function tests compile, a node with one ints parameter, arrays
 * from and back to host memory, pool statistics, and one function run on several threads at
 * once; shared by the tests that build functions (test_function, test_run_cache, test_views
 * and their CUDA twins). */
#ifndef DLOP_TEST_GRAPH_RUNNER_H
#define DLOP_TEST_GRAPH_RUNNER_H

#include <stdint.h>

#include "dlop.h"

/* A new empty graph, the bundled plugins loaded first (fails the test on any error). */
dlop_graph *dlop_test_new_graph(void);

/* ---- graphs the function tests share (each fails the test on any error) ---------------- */

/* exp(double(x)) on an input "x" of dtype and length n (DLOP_DIM_UNKNOWN: unknown): writes the
 * input into *x and returns exp's output. */
dlop_var *dlop_test_exp_double(dlop_graph *graph, dlop_dtype dtype, int64_t n, dlop_var **x);
/* dlop_test_exp_double's graph compiled for device, from x to exp's output. */
dlop_function *dlop_test_compile_exp_double(dlop_graph *graph, dlop_dtype dtype, int64_t n,
                                            dlop_device device);
/* multiply_them(a, b) on inputs "a" and "b" of dtype and the given ranks and shapes (NULL: all
 * dims unknown): writes the inputs into inputs[0] and inputs[1] and returns the output. */
dlop_var *dlop_test_multiply_them(dlop_graph *graph, dlop_dtype dtype, int32_t a_ndim,
                                  const int64_t *a_shape, int32_t b_ndim, const int64_t *b_shape,
                                  dlop_var **inputs);
/* double applied count times in a row to an input "x" of float32[n]: writes the input into *x
 * and returns the last output. */
dlop_var *dlop_test_double_chain(dlop_graph *graph, int64_t n, int count, dlop_var **x);
/* The buffer plan of dlop_test_double_chain(graph, n, chain) compiled unfused for device (a fused
 * chain is one kernel and needs no plan: test_fusion.c checks that): a first run gives
 * x * 2^chain exactly; a second run (on CUDA it records the function's CUDA graph, whose
 * intermediates it keeps) gives it again; more_runs runs after those make no driver allocation
 * (every buffer comes from the pool); the pool's peak stays within 2.5 buffers above what was
 * in use before (the input, plus about two intermediates); and the first run makes at most
 * first_allocations driver allocations (negative: not checked). */
void dlop_test_check_chain_plan(dlop_graph *graph, dlop_device device, int64_t n, int chain,
                                int more_runs, int first_allocations);
/* dlop_function_compile with fusion off (options.fuse = 0): every node runs its own
 * kernel, as the tests of the node-by-node runner (buffer plan, in place, explain's node lines)
 * need. */
dlop_function *dlop_test_compile_unfused(dlop_graph *graph, dlop_var *const *inputs,
                                         int32_t num_inputs, dlop_var *const *outputs,
                                         int32_t num_outputs, dlop_device device);
/* The function from inputs to the one output, compiled for device. */
dlop_function *dlop_test_compile(dlop_graph *graph, dlop_var *const *inputs, int32_t num_inputs,
                                 dlop_var *output, dlop_device device);
/* One node of op on x with one ints parameter called name (name NULL: no parameter given);
 * returns dlop_graph_apply's status. */
int dlop_test_apply_ints(dlop_graph *graph, const char *op, dlop_var *x, const char *name,
                         const int64_t *ints, int32_t count, dlop_var **y);
/* A CPU array holding a copy of data (fails the test on any error). */
dlop_array *dlop_test_host_array(dlop_dtype dtype, int32_t ndim, const int64_t *shape,
                                 const void *data);
/* Releases count arrays, given after count. */
void dlop_test_release_arrays(int count, ...);
/* The array's elements copied to new host memory in C order (malloc'd, one spare byte so that
 * an empty array still gets a pointer; free it). */
void *dlop_test_read_back(const dlop_array *array);
/* The memory pool's statistics for device now. */
dlop_memory_stats dlop_test_memory_stats(dlop_device device);

/* ---- one function, several threads ---------------------------------------------------- */

/* What one thread of dlop_test_run_threads is given (index, the shared function, the test's
 * context) and reports (failures, and a message saying what went wrong first). */
typedef struct dlop_test_thread {
  int index;
  dlop_function *function;
  const void *context;
  int failures;
  char message[256];
} dlop_test_thread;

/* Runs body on count threads (at most 8) at once and waits for all of them; then fails the
 * test with "thread <index>: <message>" for the first thread that counted a failure. Bodies
 * never call ck_assert (Check's asserts are not for other threads): they count and describe. */
void dlop_test_run_threads(int count, dlop_function *function, const void *context,
                           void (*body)(dlop_test_thread *thread));

/* The context of dlop_test_exp_double_runs. */
typedef struct dlop_test_repeated_runs {
  dlop_device device; /* where the function runs and its input lives */
  int64_t n;          /* the input's length */
  int runs;
  uint64_t first_seed; /* thread i fills its input from seed first_seed + i */
} dlop_test_repeated_runs;

/* A body for dlop_test_run_threads: runs a float32 exp(double(x)) function on an input of its
 * own (random in [-2, 2]) context->runs times, checking every element of every result against
 * expf(2x) within 1e-5 relative + 1e-6 absolute. */
void dlop_test_exp_double_runs(dlop_test_thread *thread);
/* dlop_test_compile_exp_double(graph, float32, unknown length, runs->device) run by `threads`
 * threads at once, each with dlop_test_exp_double_runs. */
void dlop_test_exp_double_in_threads(dlop_graph *graph, int threads,
                                     const dlop_test_repeated_runs *runs);

#endif
