/* check_tests_body.c — scalar_body_matches_thunk: an op that declares a scalar body (ABI 1.2)
 * promises that the body computes what its own kernels compute, so that a compiled function may
 * run the body inside a fused kernel instead of the op's thunk. For each (device, dtype) the
 * check builds the kernel fusion would generate for the op's node alone (fusion_alone.h: the
 * runtime's own generator, compiler options and cache; one module for every checked dtype of
 * the op on the device, so one compile serves its cases), runs it and the op's thunk on the
 * same inputs (every pair of edge values, then seeded random values) and compares: bit for bit
 * where the body declares DLOP_SCALAR_BODY_EXACT (any NaN meets any NaN), else within the
 * dtype's tolerance. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"
#include "fusion_alone.h"

static const char *const check = "scalar_body_matches_thunk";

/* Random rows after the edge values: in the suite's usual range, then any bit pattern (odd
 * counts, so the vector loops' remainders run too). */
#define BODY_RANDOM_SMALL 1001
#define BODY_RANDOM_BITS 1003

/* The inputs of one dtype's node: a same-shape signature (the lowest rank above 0; an op with a
 * scalar body is elementwise) with every input holding n elements, and its values. */
typedef struct body_inputs {
  check_shape shape;
  int32_t num_inputs;
  int32_t dtypes[CHECK_MAX_OPERANDS];
  int64_t n, edge_rows;
  unsigned char *values[CHECK_MAX_OPERANDS]; /* n elements each, storage bits */
} body_inputs;

/* The same-shape signature make_node accepts for dtype, with input dtypes (a where's bool
 * condition); 0 when it accepts none of rank 1 or more. */
static int pick_signature(const dlop_op_desc *op, int dtype, check_signature *picked) {
  check_signature accepted[CHECK_MAX_SIGNATURES];
  int candidates = 0, best = -1;
  int count = check_signatures(op, dtype, accepted, &candidates, NULL, 0);
  for (int k = 0; k < count; k++) {
    if (strcmp(accepted[k].family, "same shape") != 0 || accepted[k].ndim[0] < 1) continue;
    if (best < 0 || accepted[k].ndim[0] < accepted[best].ndim[0]) best = k;
  }
  if (best < 0) return 0;
  *picked = accepted[best];
  return 1;
}

/* Row r of the edge block: every pair of inputs (i, j) takes every pair of their edge values in
 * a block of its own, the other inputs cycling through theirs; one input alone takes each. */
static int64_t edge_rows(int32_t m, const int *counts) {
  if (m == 1) return counts[0];
  int64_t rows = 0;
  for (int32_t i = 0; i < m; i++)
    for (int32_t j = i + 1; j < m; j++) rows += (int64_t)counts[i] * counts[j];
  return rows;
}

static void edge_row(int32_t m, const int *counts, int64_t r, int *pick) {
  if (m == 1) {
    pick[0] = (int)r;
    return;
  }
  for (int32_t i = 0; i < m; i++)
    for (int32_t j = i + 1; j < m; j++) {
      int64_t block = (int64_t)counts[i] * counts[j];
      if (r >= block) {
        r -= block;
        continue;
      }
      for (int32_t k = 0; k < m; k++) pick[k] = (int)(r % counts[k]);
      pick[i] = (int)(r / counts[j]);
      pick[j] = (int)(r % counts[j]);
      return;
    }
}

/* The inputs' signature, dtypes and size for dtype, without values (0 when make_node takes no
 * same-shape inputs of it). */
static int plan_inputs(const check_case *c, int dtype, body_inputs *in) {
  check_signature s;
  unsigned char edges[CHECK_MAX_EDGES * 8];
  int counts[CHECK_MAX_OPERANDS];
  memset(in, 0, sizeof *in);
  if (!pick_signature(c->op, dtype, &s)) return 0;
  in->num_inputs = s.num_inputs;
  for (int32_t i = 0; i < s.num_inputs; i++) {
    in->dtypes[i] = s.mixed ? s.in_dtype[i] : dtype;
    counts[i] = check_edge_values(in->dtypes[i], edges);
  }
  in->edge_rows = edge_rows(s.num_inputs, counts);
  in->n = in->edge_rows + BODY_RANDOM_SMALL + BODY_RANDOM_BITS;
  int64_t values[CHECK_MAX_SYMBOLS] = {in->n, 1, 1, 1}; /* (n), (n, 1), ...: n elements */
  in->shape = check_instantiate(&s, values);
  return 1;
}

/* The values of planned inputs: the edge rows, then the random ones. */
static void fill_inputs(int dtype, body_inputs *in) {
  unsigned char edges[CHECK_MAX_OPERANDS][CHECK_MAX_EDGES * 8];
  int counts[CHECK_MAX_OPERANDS];
  for (int32_t i = 0; i < in->num_inputs; i++) {
    size_t size = dlop_dtype_size((dlop_dtype)in->dtypes[i]);
    counts[i] = check_edge_values(in->dtypes[i], edges[i]);
    in->values[i] = malloc((size_t)in->n * size + 1);
    ck_assert_msg(in->values[i] != NULL, "out of host memory");
  }
  for (int64_t r = 0; r < in->edge_rows; r++) {
    int pick[CHECK_MAX_OPERANDS];
    edge_row(in->num_inputs, counts, r, pick);
    for (int32_t i = 0; i < in->num_inputs; i++) {
      size_t size = dlop_dtype_size((dlop_dtype)in->dtypes[i]);
      memcpy(in->values[i] + (size_t)r * size, edges[i] + (size_t)pick[i] * size, size);
    }
  }
  for (int32_t i = 0; i < in->num_inputs; i++) {
    size_t size = dlop_dtype_size((dlop_dtype)in->dtypes[i]);
    uint64_t seed = check_opts.seed * 7919u + (uint64_t)dtype * 131u + (uint64_t)i;
    check_random_fill(in->values[i] + (size_t)in->edge_rows * size, in->dtypes[i],
                      BODY_RANDOM_SMALL, seed);
    check_random_bits_fill(in->values[i] + (size_t)(in->edge_rows + BODY_RANDOM_SMALL) * size,
                           in->dtypes[i], BODY_RANDOM_BITS, seed);
  }
}

static void free_inputs(body_inputs *in) {
  for (int32_t i = 0; i < in->num_inputs; i++) free(in->values[i]);
}

/* make_node's types for dtype's node (known dims, as check_prepare makes them). */
static int node_types(const check_case *c, int dtype, const body_inputs *in, dlop_type *inputs,
                      dlop_type *outputs) {
  char error[512];
  for (int32_t i = 0; i < in->num_inputs; i++)
    inputs[i] = check_input_type(dtype, &in->shape, i, 0);
  return check_call_make_node(c->op, inputs, in->num_inputs, outputs, error, sizeof error) ==
         DLOP_OK;
}

/* Where a CUDA case's calls into the runtime need the device's primary context. */
static void context(const check_case *c, int push) {
  char error[512];
  if (c->device.type != DLOP_DEVICE_CUDA) return;
  if (!push) {
    check_cuda_pop();
  } else if (check_cuda_push(c->device.id, error, sizeof error) != DLOP_OK) {
    check_fail(c, "suite setup", NULL, 0, "%s", error);
  }
}

/* The kernels of every checked dtype of the op on the case's device in one module (the same
 * module, so the same cache entry, in each of the op's cases); where that module does not
 * compile, this dtype's kernel alone, so the failure is this dtype's. *index: the case's node. */
static dlop__fusion_alone *compile_kernels(const check_case *c, const body_inputs *own,
                                           int32_t *index) {
  dlop_type types[DLOP_DTYPE_COUNT][2][CHECK_MAX_OPERANDS];
  dlop__fusion_alone_node nodes[DLOP_DTYPE_COUNT];
  int32_t count = 0;
  uint32_t declared = dlop_op_dtypes(c->op, c->device.type);
  *index = -1;
  for (int dtype = 0; dtype < DLOP_DTYPE_COUNT; dtype++) {
    if (!(declared & DLOP_DTYPE_BIT(dtype))) continue;
    if (check_opts.dtype_filter >= 0 && dtype != check_opts.dtype_filter) continue;
    body_inputs other;
    const body_inputs *in = own;
    if (dtype != c->dtype) {
      if (!plan_inputs(c, dtype, &other)) continue; /* its own case says why */
      in = &other;
    }
    int ok = node_types(c, dtype, in, types[count][0], types[count][1]);
    if (!ok && dtype == c->dtype)
      check_fail(c, check, own->shape.dims, own->shape.ndim,
                 "make_node refused the same-shape inputs it accepted a moment before");
    if (!ok) continue;
    if (dtype == c->dtype) *index = count;
    nodes[count].inputs = types[count][0];
    nodes[count].outputs = types[count][1];
    count++;
  }
  dlop__fusion_alone *alone = NULL;
  char error[3072];
  const dlop_param_value *params = check_default_params(c->op);
  check_where_types("scalar_body (asked for every checked dtype, to compile their kernels)",
                    nodes[*index].inputs, own->num_inputs);
  context(c, 1);
  int status = dlop__fusion_alone_compile(c->op, params, own->num_inputs, count, nodes,
                                          c->device, &alone, error, sizeof error);
  if (status != DLOP_OK && count > 1) {
    count = 1;
    status = dlop__fusion_alone_compile(c->op, params, own->num_inputs, 1, &nodes[*index],
                                        c->device, &alone, error, sizeof error);
    *index = 0;
  }
  context(c, 0);
  check_where_returned();
  for (char *p = error; *p; p++)
    if (*p == '\n') *p = ' '; /* the compiler's log on the report's one line */
  if (status != DLOP_OK)
    check_fail(c, check, own->shape.dims, own->shape.ndim,
               "the kernel generated from the op's scalar body for these types (as a compiled "
               "function would fuse it) %s %s: %s: %s",
               status == DLOP_INVALID_ARGUMENT ? "did not compile with"
                                               : "could not be built with",
               c->device.type == DLOP_DEVICE_CUDA ? "NVRTC" : "the host's C compiler",
               dlop_status_name(status), error[0] ? error : "(no message)");
  return alone;
}

/* Input buffers holding in's values on the case's device. */
static void upload_inputs(const check_prepared *p, const body_inputs *in, check_buffer *buffers,
                          void *stream) {
  for (int32_t i = 0; i < in->num_inputs; i++) {
    int32_t ndim;
    const int64_t *dims = check_input_dims(&p->shape, i, &ndim);
    check_buffer_init(&buffers[i], p->c, p->c->device, in->dtypes[i], ndim, dims,
                      CHECK_CONTIGUOUS, in->values[i], NULL, stream);
  }
}

/* One run of thunk on fresh copies of the inputs into poisoned outputs; the outputs' logical
 * elements into values (malloc'ed). Fails the test when the run fails. */
static void run(check_prepared *p, const body_inputs *in, const dlop_thunk *thunk,
                const char *stage, const char *wait_stage, const char *what, void **values) {
  check_buffer inputs[CHECK_MAX_OPERANDS], outputs[CHECK_MAX_OPERANDS];
  void *stream = check_stream(p->c);
  char error[1024];
  upload_inputs(p, in, inputs, stream);
  for (int32_t o = 0; o < p->num_outputs; o++) {
    unsigned char poison[8];
    check_poison_pattern(p->outputs[o].dtype, 0, poison);
    check_buffer_init(&outputs[o], p->c, p->c->device, p->outputs[o].dtype,
                      p->concrete_outputs[o].ndim, p->concrete_outputs[o].shape,
                      CHECK_CONTIGUOUS, NULL, poison, stream);
  }
  int status = check_run_thunk(p, thunk, stage, wait_stage, inputs, outputs, stream, error,
                               sizeof error);
  if (status != DLOP_OK)
    check_fail(p->c, check, p->shape.dims, p->shape.ndim, "%s failed: %s: %s", what,
               dlop_status_name(status), error[0] ? error : "(no message)");
  for (int32_t o = 0; o < p->num_outputs; o++) {
    unsigned char *image = check_buffer_download(&outputs[o], stream);
    values[o] = malloc((size_t)outputs[o].numel * outputs[o].element_size + 1);
    ck_assert_msg(image != NULL && values[o] != NULL, "out of host memory");
    check_buffer_extract(&outputs[o], image, values[o]);
    free(image);
    check_buffer_free(&outputs[o]);
  }
  for (int32_t i = 0; i < in->num_inputs; i++) check_buffer_free(&inputs[i]);
}

static int same_element(const void *expected, const void *actual, int dtype, int64_t i,
                        int exact) {
  size_t size = dlop_dtype_size((dlop_dtype)dtype);
  if (memcmp((const char *)expected + (size_t)i * size, (const char *)actual + (size_t)i * size,
             size) == 0)
    return 1;
  if (!dlop_dtype_is_float((dlop_dtype)dtype)) return 0;
  double e = check_value(expected, dtype, i), a = check_value(actual, dtype, i);
  if (isnan(e) && isnan(a)) return 1;
  return !exact && check_close(e, a, dtype);
}

/* "[5] inputs -0 (bits 0x80000000), 1 (bits ...): thunk ..., body ..." for the first few. */
static void compare_output(const check_prepared *p, const body_inputs *in, int32_t o,
                           const void *thunk, const void *body, int exact,
                           const char *compiled) {
  int dtype = p->outputs[o].dtype;
  int64_t n = 1, bad = 0;
  char report[2048], text[2][96];
  size_t used = 0;
  for (int32_t d = 0; d < p->concrete_outputs[o].ndim; d++) n *= p->concrete_outputs[o].shape[d];
  report[0] = '\0';
  for (int64_t k = 0; k < n; k++) {
    if (same_element(thunk, body, dtype, k, exact)) continue;
    if (++bad > 4 || used >= sizeof report) continue;
    used += (size_t)snprintf(report + used, sizeof report - used, "%s[%lld] inputs ",
                             bad > 1 ? "; " : "", (long long)k);
    for (int32_t i = 0; i < in->num_inputs && used < sizeof report; i++)
      used += (size_t)snprintf(report + used, sizeof report - used, "%s%s", i ? ", " : "",
                               check_element_text(in->values[i], in->dtypes[i], k, text[0],
                                                  sizeof text[0]));
    if (used < sizeof report)
      used += (size_t)snprintf(report + used, sizeof report - used, ": thunk %s, body %s",
                               check_element_text(thunk, dtype, k, text[0], sizeof text[0]),
                               check_element_text(body, dtype, k, text[1], sizeof text[1]));
  }
  if (bad == 0) return;
  char rule[256];
  if (exact)
    snprintf(rule, sizeof rule, "bit for bit (the body declares DLOP_SCALAR_BODY_EXACT; any "
             "NaN meets any NaN)");
  else
    snprintf(rule, sizeof rule, "beyond %s's tolerance (%s; the body does not declare "
             "DLOP_SCALAR_BODY_EXACT)", dlop_dtype_name((dlop_dtype)dtype),
             check_tolerance_text(dtype, text[0], sizeof text[0]));
  check_fail(p->c, check, p->shape.dims, p->shape.ndim,
             "the kernel generated from the op's scalar body (%s) disagrees with the op's thunk "
             "%s: %lld of %lld elements of output %d differ: %s (elements 0 to %lld: %s, then "
             "seeded random values); the body must compute "
             "what the thunk computes on every input (docs/abi.md, \"Scalar bodies\")",
             compiled, rule, (long long)bad, (long long)n, (int)o, report,
             (long long)in->edge_rows - 1,
             in->num_inputs == 1 ? "each edge value" : "every pair of the inputs' edge values");
}

/* Whether this process runs under valgrind, whose launcher preloads its vgpreload_*.so into the
 * program (and whose test processes are forks of it). */
static int under_valgrind(void) {
  const char *preload = getenv("LD_PRELOAD");
  return preload != NULL && strstr(preload, "vgpreload") != NULL;
}

START_TEST(scalar_body_matches_thunk) {
  const check_case *c = check_case_at(_i);
  char why[1024];
  if (c->device.type == DLOP_DEVICE_CPU && under_valgrind()) {
    /* valgrind emulates no AVX-512, while the host's C compiler builds the kernel for the real
     * CPU (fusion's -march=native): on an AVX-512 machine it would die of SIGILL here */
    check_note(c, check, "skipped, not passed: running under valgrind, which cannot run the "
               "kernel the host's C compiler builds for this CPU (-march=native: AVX-512 "
               "instructions where the CPU has them); run dlop check without valgrind");
    return;
  }
  if (!dlop__fusion_alone_available(c->device, why, sizeof why)) {
    check_note(c, check, "skipped, not passed: the kernel generated from the op's scalar body "
               "cannot be compiled here, so nothing was compared: %s", why);
    return;
  }
  body_inputs in;
  if (!plan_inputs(c, c->dtype, &in))
    check_fail(c, check, NULL, 0, "make_node accepts no inputs of one shape (rank 1 or more) "
               "for %s, but an op that declares a scalar body is elementwise (docs/abi.md)",
               dlop_dtype_name((dlop_dtype)c->dtype));
  fill_inputs(c->dtype, &in);
  int32_t index;
  dlop__fusion_alone *alone = compile_kernels(c, &in, &index);
  dlop_thunk kernel;
  uint32_t flags;
  const char *message;
  int status = dlop__fusion_alone_kernel(alone, index, &kernel, &flags, &message);
  if (status == DLOP_UNSUPPORTED) {
    check_note(c, check, "skipped: scalar_body declines these types (DLOP_UNSUPPORTED: %s), so "
               "such a node runs its own thunk", message);
  } else if (status != DLOP_OK) {
    check_fail(c, check, in.shape.dims, in.shape.ndim, "the host cannot use the scalar body "
               "for these types: %s: %s", dlop_status_name(status), message);
  } else {
    check_prepared p;
    void *by_thunk[CHECK_MAX_OPERANDS], *by_body[CHECK_MAX_OPERANDS];
    check_prepare(c, check, &in.shape, 0, &p);
    run(&p, &in, &p.thunk, "the thunk's run",
        "waiting for the stream after the thunk's run (its kernels)", "the thunk's run",
        by_thunk);
    run(&p, &in, &kernel, "the run of the kernel generated from the scalar body",
        "waiting for the stream after the run of the kernel generated from the scalar body",
        "the run of the kernel generated from the scalar body", by_body);
    check_release(&p);
    const char *compiled = c->device.type == DLOP_DEVICE_CUDA
                               ? "CUDA C, compiled by NVRTC"
                               : "C, compiled by the host's C compiler";
    for (int32_t o = 0; o < p.num_outputs; o++)
      compare_output(&p, &in, o, by_thunk[o], by_body[o], (flags & DLOP_SCALAR_BODY_EXACT) != 0,
                     compiled);
    for (int32_t o = 0; o < p.num_outputs; o++) {
      free(by_thunk[o]);
      free(by_body[o]);
    }
  }
  context(c, 1);
  dlop__fusion_alone_free(alone);
  context(c, 0);
  free_inputs(&in);
}
END_TEST

void check_add_body_tests(TCase *tc, int index) {
  check_add_test(tc, scalar_body_matches_thunk, index);
}
