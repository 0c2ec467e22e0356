/* check_suite.h — what the files of dlop-check (the plugin compliance suite) share: the options,
 * the table of (op, device, dtype) cases the Check tests look up by their loop index, node and
 * thunk preparation, guarded tensors on either device, value comparison and failure reports. */
#ifndef DLOP_CHECK_SUITE_H
#define DLOP_CHECK_SUITE_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "dlop.h"
#include "dlop/check_info.h"

/* ---- options and the case table (check_main.c) ------------------------------------------- */

#define CHECK_MAX_OPERANDS 8 /* inputs or outputs of one op this suite drives */
#define CHECK_MAX_PARAMS 64  /* parameters of one op (check_default_params' storage) */

typedef struct check_options {
  const char *plugin_path; /* the file, or an in-process plugin's "in-process: ORIGIN" */
  /* --elementwise FILE: the op is defined from source in this process (check_elementwise.c),
   * and the checks of a plugin file (its exports, its entry point) do not apply */
  const char *elementwise_path;
  int want_cpu, want_cuda;
  const char *op_filter; /* NULL: every op */
  int dtype_filter;      /* a dlop_dtype, or -1 for every declared one */
  uint64_t seed;
  int num_params; /* --param name=value, in command-line order */
  const char *param_names[32];
  const char *param_values[32];
  int isolation; /* CHECK_ISOLATE_CHECK or _OP; -1: op when CUDA checks run, else check */
  int64_t large_elements; /* the large shape's size: CHECK_LARGE_ELEMENTS, or from the environment */
} check_options;

/* The large run shape's element count (2^20 + 3: past 2^20, with an odd tail) and the smallest
 * DLOP_CHECK_LARGE_ELEMENTS may make it (2^17 + 3: still four of the bundled CPU kernels'
 * 32768-element thread chunks and an odd tail, and the size of two_threads_at_once's runs). */
#define CHECK_LARGE_ELEMENTS 1048579
#define CHECK_LARGE_ELEMENTS_MIN 131075

enum { CHECK_ISOLATE_CHECK = 0, CHECK_ISOLATE_OP = 1 };

extern check_options check_opts;
extern const dlop_plugin *check_plugin;      /* NULL when the loader refused the file */
extern char check_load_error[2048];          /* the loader's message when it did */

/* One Check test case runs one op on one device with one dtype (dtype -1: op-level tests). */
typedef struct check_case {
  const dlop_op_desc *op;
  dlop_device device;
  int dtype;
} check_case;

const check_case *check_case_at(int index);

/* ---- failure reports (check_report.c) ---------------------------------------------------- */

/* Fail the current test with "op OP, check CHECK, DEVICE DTYPE, shape (..): message". shape may
 * be NULL (no shape involved). Never returns (Check's child exits). */
void check_fail(const check_case *c, const char *check, const int64_t *shape, int32_t ndim,
                const char *format, ...) __attribute__((format(printf, 5, 6), noreturn));
/* Print a note on stdout (a check that does not apply, and why). */
void check_note(const check_case *c, const char *check, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
const char *check_shape_text(const int64_t *shape, int32_t ndim, char *buffer, size_t size);
const char *check_device_text(dlop_device device);
struct check_shape;
/* The shapes failure lines name from now on when they name input 0's (per-input shapes are
 * printed as "shapes (5, 3) x (3, 7)"). */
void check_report_shapes(const struct check_shape *shape);

/* ---- nodes (check_node.c) ---------------------------------------------------------------- */

/* Number of inputs the suite gives the op (2 for variadic ops). */
int32_t check_num_inputs(const dlop_op_desc *op);
/* The op's parameters in declaration order: the declared defaults, with the --param values
 * given for this op's names (static storage, op->num_params values). */
const dlop_param_value *check_default_params(const dlop_op_desc *op);
/* Parse text as a value of decl's kind (bool: true/false/1/0; int; float; string; ints:
 * comma-separated integers, at most max_ints, stored in ints). DLOP_OK, or a message in error. */
int check_parse_param(const dlop_param_decl *decl, const char *text, dlop_param_value *value,
                      int64_t *ints, int max_ints, char *error, size_t error_size);
/* Call make_node / infer_shape with struct_size set, the defaults and an error buffer. */
int check_call_make_node(const dlop_op_desc *op, const dlop_type *inputs, int32_t num_inputs,
                         dlop_type *outputs, char *error, size_t error_size);
int check_call_infer_shape(const dlop_op_desc *op, const dlop_type *inputs, int32_t num_inputs,
                           dlop_type *outputs, char *error, size_t error_size);
/* A type of dtype and rank ndim with the given dims, or all unknown when unknown is set. */
dlop_type check_type(int dtype, int32_t ndim, const int64_t *dims, int unknown);

/* Concrete input shapes for one run. Input 0's shape is in ndim/dims (what failure lines name);
 * per_input set: every input has its own shape in in_ndim/in_dims (a matmul's (m, k) x (k, n)),
 * else every input has input 0's. no_unknown: make_node refuses these ranks with unknown dims,
 * so thunks for them are made with known dims only. */
typedef struct check_shape {
  int32_t ndim;
  int64_t dims[4];
  int32_t per_input;
  int32_t num_inputs; /* with per_input: how many inputs in_ndim/in_dims describe */
  int32_t no_unknown;
  int32_t in_ndim[CHECK_MAX_OPERANDS];
  int64_t in_dims[CHECK_MAX_OPERANDS][4];
  /* mixed set: input i has dtype in_dtype[i] (a where's bool condition) instead of the case's */
  int32_t mixed;
  int32_t in_dtype[CHECK_MAX_OPERANDS];
} check_shape;

/* Input i's rank and dims in shape. */
const int64_t *check_input_dims(const check_shape *shape, int32_t i, int32_t *ndim);
/* Input i's dtype: the shape's own for mixed-dtype signatures, else dtype (the case's). */
int check_input_dtype(int dtype, const check_shape *shape, int32_t i);
/* Input i's type: check_input_dtype, the shape's rank, its dims or all DLOP_DIM_UNKNOWN. */
dlop_type check_input_type(int dtype, const check_shape *shape, int32_t i, int unknown);
int64_t check_input_numel(const check_shape *shape, int32_t i);

/* ---- input signatures (check_signature.c) -------------------------------------------------- */

/* A candidate signature: per input a rank and per dim a symbol (dims with one symbol are equal
 * in every instance) or CHECK_DIM_ONE (a literal 1: a broadcast dim). */
#define CHECK_DIM_ONE (-1)
#define CHECK_MAX_SYMBOLS 4
typedef struct check_signature {
  const char *family; /* "same shape", "broadcast", "matmul" */
  int32_t num_inputs;
  int32_t ndim[CHECK_MAX_OPERANDS];
  int8_t dims[CHECK_MAX_OPERANDS][4];
  int32_t num_symbols;
  int32_t no_unknown; /* make_node accepts it with known dims only */
  /* mixed set: input i has dtype in_dtype[i]; else every input has the case's dtype */
  int32_t mixed;
  int32_t in_dtype[CHECK_MAX_OPERANDS];
} check_signature;

#define CHECK_MAX_SIGNATURES 32
/* The candidates make_node accepts for op and dtype (known dims; no_unknown set when it
 * refuses them with unknown dims). When it accepts none with every input of dtype, each
 * candidate is tried again with one input of another dtype (bool first, then the op's declared
 * ones): a where's (bool, T, T). Returns the count; refusals go into report (may be NULL). */
int check_signatures(const dlop_op_desc *op, int dtype, check_signature *accepted,
                     int *candidates, char *report, size_t report_size);
/* One signature's concrete shapes with symbol values. */
check_shape check_instantiate(const check_signature *s, const int64_t *values);
const char *check_signature_text(const check_signature *s, char *buffer, size_t size);
/* The concrete shapes every run-time check of case c walks through, derived from the accepted
 * signatures (0-sized, one element, odd, and last a large one of >= 2^20 + 3 elements). Fails
 * the test (naming check) when make_node accepts no candidate for the case's dtype. */
const check_shape *check_case_shapes(const check_case *c, const char *check, int *count);
/* A shape of the case's preferred signature (rank 1 when accepted) whose largest operand has
 * about target elements: its first symbol scaled, the others small and odd. */
check_shape check_sized_shape(const check_case *c, const char *check, int64_t target);
/* 1 when an input of shape is empty and make_node or infer_shape refuses it (known dims) with
 * a message: a reduction without identity (max of nothing) has no answer there, so such shapes
 * are left out of the case's shapes, not failed. */
int check_refuses_empty(const check_case *c, const check_shape *shape);
/* Indices (into check_case_shapes) of up to max shapes whose inputs all have 2+ elements. */
int check_nontrivial_shapes(const check_shape *shapes, int count, int *indices, int max);
/* The first, middle and last (the large one) of those: three indices, fewer if there are not. */
int check_pick_three(const check_shape *shapes, int count, int *indices);

/* ---- thunks (check_thunk.c) -------------------------------------------------------------- */

/* A node made for a concrete shape (every input gets it), its thunk on c's device, the
 * outputs' concrete shapes and the workspace. static_unknown: make_node saw unknown dims. */
typedef struct check_prepared {
  const check_case *c;
  check_shape shape;
  int32_t num_inputs, num_outputs;
  dlop_type inputs[CHECK_MAX_OPERANDS];  /* static (as make_node saw them) */
  dlop_type outputs[CHECK_MAX_OPERANDS]; /* make_node's answer */
  dlop_type concrete_outputs[CHECK_MAX_OPERANDS];
  dlop_thunk thunk;
  int have_thunk;
  void *workspace;
} check_prepared;

/* make_node and infer_shape (concrete) only: what a view op gets (it has no thunk). */
void check_prepare_node(const check_case *c, const char *check, const check_shape *shape,
                        int static_unknown, check_prepared *p);
/* make_node, infer_shape (concrete) and make_thunk; any failure fails the test, naming check. */
void check_prepare(const check_case *c, const char *check, const check_shape *shape,
                   int static_unknown, check_prepared *p);
void check_release(check_prepared *p);

/* ---- where a check is (check_where.c) ---------------------------------------------------- */

/* What the running check is calling in the plugin (stage: a string literal such as "the
 * thunk's run") and the inputs' types. The runner points it into memory shared with the check's
 * process (check_where_attach in the child), so a check whose process dies (crash, exit,
 * timeout) is reported with the stage and the shapes like any failure line. Only the thread
 * that runs the check records (two_threads_at_once's threads do not). */
typedef struct check_where {
  const char *stage;       /* NULL: nothing recorded yet */
  int32_t returned;        /* the stage's call returned (dlop-check's own code runs) */
  int32_t sanitizer_died;  /* a sanitizer reported an error and ended the process (its exit 1) */
  int32_t num_inputs;      /* types recorded in inputs; -1 before any */
  int32_t declared_inputs; /* inputs of the call (more than recorded when beyond the array) */
  dlop_type inputs[CHECK_MAX_OPERANDS + 1]; /* +1: make_node_rejects_wrong_arity's extra one */
} check_where;

void check_where_attach(check_where *where);
void check_where_stage(const char *stage); /* keeps the inputs recorded last */
/* The plugin's call returned: what follows is dlop-check's own code (until the next stage). */
void check_where_returned(void);
/* A sanitizer is ending the process after its report (check_sanitizer.c's death callback). */
void check_where_sanitizer_died(void);
void check_where_types(const char *stage, const dlop_type *inputs, int32_t num_inputs);
/* The concrete input types of p's shape (a run, make_thunk, destroy). */
void check_where_run(const char *stage, const check_prepared *p);
/* "shape (7)" or "shapes (5, 3) x (3, 7)"; "" when no inputs were recorded. */
const char *check_where_shape_text(const check_where *where, char *buffer, size_t size);
/* "float32 (5, 3) x float32 (3, 7)". */
const char *check_where_inputs_text(const check_where *where, char *buffer, size_t size);

/* ---- guarded buffers (check_buffer.c) ----------------------------------------------------- */

#define CHECK_GUARD_BYTES 256
#define CHECK_GUARD_BYTE 0xCD

typedef enum check_layout {
  CHECK_CONTIGUOUS = 0,
  CHECK_EVERY_OTHER = 1, /* strides twice the contiguous ones: gaps between elements */
  CHECK_REVERSED = 2,    /* negative strides: element 0 at the highest address */
  CHECK_TRANSPOSED = 3   /* column-major (the transpose of a C-contiguous buffer) */
} check_layout;

/* A tensor on a device inside an allocation with guard bytes before and after, and the image
 * of the whole allocation the suite wrote (guards, elements, gaps). */
typedef struct check_buffer {
  dlop_device device;
  int dtype;
  int32_t ndim;
  int64_t shape[DLOP_MAX_NDIM];
  int64_t strides[DLOP_MAX_NDIM];
  int64_t numel;
  size_t element_size;
  size_t bytes;       /* whole allocation, guards included */
  size_t data_offset; /* where the tensor's span starts (after the front guard) */
  unsigned char *image;
  void *memory;
  dlop_tensor tensor;
} check_buffer;

/* Allocate and upload: values (numel logical elements, C order) laid out as layout; NULL
 * values means fill every element with the poison pattern poison (element-sized bytes). */
void check_buffer_init(check_buffer *b, const check_case *c, dlop_device device, int dtype,
                       int32_t ndim, const int64_t *shape, check_layout layout,
                       const void *values, const unsigned char *poison, void *stream);
/* Copy bytes between host memory and memory on device: memcpy on the CPU; on CUDA an
 * asynchronous copy on stream, then a wait for the stream. DLOP_OK, or the failing status with
 * dlop_last_error() saying why (never fails the test itself: a suite thread may call it). */
int check_copy_bytes(dlop_device device, void *destination, const void *source, size_t bytes,
                     void *stream);
/* The logical element (C order) whose bytes hold byte `byte` of b's allocation, or -1 for a
 * guard byte or a gap between elements. */
int64_t check_buffer_element_at(const check_buffer *b, size_t byte);
/* Where logical element i's bytes start in b's allocation (and its images). */
size_t check_buffer_element_at_index(const check_buffer *b, int64_t i);
/* Logical element i's multi-index in b's shape: "[1, 2]" ("[]" for a 0-d tensor). */
const char *check_index_text(const check_buffer *b, int64_t i, char *buffer, size_t size);
/* Read the whole allocation back into a malloc'ed array of b->bytes (caller frees). */
unsigned char *check_buffer_download(const check_buffer *b, void *stream);
/* The logical elements (C order) of a downloaded image into values (numel elements). */
void check_buffer_extract(const check_buffer *b, const unsigned char *downloaded, void *values);
void check_buffer_free(check_buffer *b);

/* ---- values (check_values.c) -------------------------------------------------------------- */

/* n random elements of dtype (floats in [-2, 2], ints in a small range, bools 0/1). */
void check_random_fill(void *data, int dtype, int64_t n, uint64_t seed);
double check_value(const void *data, int dtype, int64_t i);
/* Element i of data (dtype) set to v (rounded to nearest for floats; integers in range). */
void check_store_value(void *data, int dtype, int64_t i, double v);
/* Poison patterns for one element: run 0 NaN-like/0xAB bytes, run 1 0x5C bytes. */
void check_poison_pattern(int dtype, int run, unsigned char *pattern);
/* Compare n elements within a tolerance fit for the dtype (exact for ints; bitwise when
 * exact is set). Returns the number of mismatches; the first few, with their index, expected
 * and actual values, go into report. */
int64_t check_compare(const void *expected, const void *actual, int dtype, int64_t n, int exact,
                      char *report, size_t report_size);
/* 1 when actual is within float dtype's tolerance of expected (check_compare's rule for one
 * element: NaN meets NaN, infinities and signed zeros as ==, finite values within the
 * dtype's relative and absolute terms). */
int check_close(double expected, double actual, int dtype);
/* "|expected - actual| <= 1e-05 + 1e-05 |expected|": the tolerance check_close applies. */
const char *check_tolerance_text(int dtype, char *buffer, size_t size);
/* Compare n actual elements of dtype with reference values as dtype holds them: floats rounded
 * to dtype, then within the tolerance of tolerance_dtype (the narrowest float dtype involved;
 * NaN meets NaN; infinities must match); integers exactly, modulo 2^bits (integer results
 * wrap, as NumPy's do; a reference value that is not a finite integer matches nothing); bool
 * as nonzero. Returns the mismatches; the first few go into report, the first one's index into
 * *first (-1 when none). */
int64_t check_compare_reference(const double *reference, const void *actual, int dtype,
                                int tolerance_dtype, int64_t n, char *report, size_t report_size,
                                int64_t *first);
/* "within float16's tolerance (|e - a| <= 0.002 + 0.002 |e|)", "exactly, modulo 2^32", ... */
const char *check_reference_rule(int dtype, int tolerance_dtype, char *buffer, size_t size);

/* ---- edge values (check_edges.c) ---------------------------------------------------------- */

#define CHECK_MAX_EDGES 32 /* elements check_edge_values writes at most */
/* The edge values of dtype as storage bits into out: floats NaN, -NaN, a NaN with a payload,
 * +-inf, +-0, +-1, 0.5, 2, -2.5, the smallest subnormal (both signs), the largest subnormal,
 * the smallest normal (both signs) and the largest finite values (both signs); signed integers
 * 0, +-1, +-2, +-100, min, min + 1, max, max - 1; uint8 0, 1, 2, 100, 127, 128, 254, 255; bool
 * 0 and 1. Returns how many. */
int check_edge_values(int dtype, void *out);
/* n elements of dtype from random bits over the dtype's whole range (any float bit pattern,
 * NaNs and subnormals included; bool 0 or 1), reproducible from seed. */
void check_random_bits_fill(void *data, int dtype, int64_t n, uint64_t seed);
/* Element i of data exactly: an integer as itself ("-128"), a float with its bits
 * ("-0 (bits 0x8000)"). */
const char *check_element_text(const void *data, int dtype, int64_t i, char *buffer,
                               size_t size);

/* ---- running (check_run.c) --------------------------------------------------------------- */

/* The device's stream for the suite's runs: a non-default CUDA stream (NULL on the CPU). */
void *check_stream(const check_case *c);
/* The tensors a run's arguments point to (they must outlive the run). */
typedef struct check_run_tensors {
  dlop_tensor in[CHECK_MAX_OPERANDS], out[CHECK_MAX_OPERANDS];
} check_run_tensors;
/* The run arguments of one call of p's thunk on these buffers (error emptied first). */
void check_run_args_fill(const check_prepared *p, const check_buffer *inputs,
                         const check_buffer *outputs, void *stream, check_run_tensors *tensors,
                         char *error, size_t error_size, dlop_run_args *args);
/* Run the thunk on input and output buffers with the case's stream and wait for it; returns
 * the thunk's status with its message in error. On CUDA the device's primary context is
 * current during the run, as the host guarantees. */
int check_run(check_prepared *p, check_buffer *inputs, check_buffer *outputs, void *stream,
              char *error, size_t error_size);
/* check_run with another thunk of p's node (no workspace unless it is p's own), its run and
 * the wait for its stream recorded as stage and wait_stage (check_where.c): the kernel
 * generated from a scalar body runs this way. */
int check_run_thunk(check_prepared *p, const dlop_thunk *thunk, const char *stage,
                    const char *wait_stage, check_buffer *inputs, check_buffer *outputs,
                    void *stream, char *error, size_t error_size);
/* Input i of p's shape on the case's device, laid out as layout, holding the random values
 * salt selects (the same values for the same salt and input, whatever the layout). */
void check_input_buffer_init(check_buffer *b, const check_prepared *p, int32_t i,
                             check_layout layout, uint64_t salt, void *stream);
/* Everything a "results" check needs: random inputs (seeded by salt) in layout, poisoned
 * outputs (poison run 0 or 1), one run, and the downloaded outputs' logical values. */
typedef struct check_run_result {
  int status;
  char error[1024];
  unsigned char *inputs_before[CHECK_MAX_OPERANDS]; /* images of the input allocations */
  unsigned char *inputs_after[CHECK_MAX_OPERANDS];
  unsigned char *outputs_after[CHECK_MAX_OPERANDS]; /* whole output allocations */
  void *values[CHECK_MAX_OPERANDS];                 /* logical output elements */
  check_buffer in[CHECK_MAX_OPERANDS], out[CHECK_MAX_OPERANDS];
} check_run_result;
void check_run_once(check_prepared *p, check_layout layout, uint64_t salt, int poison_run,
                    check_run_result *r);
/* check_run_once on contiguous inputs holding values[i] (numel doubles per input, C order,
 * each converted to its input's dtype) instead of random ones. */
void check_run_values(check_prepared *p, double *const *values, int poison_run,
                      check_run_result *r);
/* A fresh node and thunk for shape (check_prepare), one run (check_run_once), then the thunk
 * destroyed; fails the test when the run failed. p keeps the node's types for the results. */
void check_run_fresh(const check_case *c, const char *check, const check_shape *shape,
                     int static_unknown, check_layout layout, uint64_t salt, int poison_run,
                     check_prepared *p, check_run_result *r);
/* Fail (naming check) when the run failed. */
void check_require_ok(check_prepared *p, const char *check, const check_run_result *r);
/* Fail (naming check) when an output of actual differs from expected's, bit for bit when exact,
 * else beyond the dtype's tolerance: "<what>: N of M elements of output K differ<how>: <the
 * first mismatches>" (how: "" or words such as " bit for bit"). */
void check_compare_outputs(const check_case *c, const char *check, const check_prepared *p,
                           const check_run_result *expected, const check_run_result *actual,
                           int exact, const char *how, const char *what);
void check_run_result_free(check_prepared *p, check_run_result *r);

/* ---- host memory accounting (malloc_counter.c) and sanitizers (check_sanitizer.c) -------- */

/* Built with a sanitizer that brings its own allocator (ASan, TSan, MSan): dlop-check then
 * defines no malloc of its own and ends its check processes without the exit-time leak report. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DLOP_CHECK_SANITIZER_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define DLOP_CHECK_SANITIZER_ALLOCATOR 1
#endif
#endif

/* Blocks and bytes allocated and not yet freed in this process, through malloc and friends. */
void check_malloc_counts(int64_t *blocks, int64_t *bytes);
/* Ends a check process with status: exit(); built with a sanitizer's allocator, _exit() after
 * flushing stdio, so its exit-time leak report changes no verdict (the suite's own leak check
 * gives it, in every build). */
void check_process_exit(int status) __attribute__((noreturn));

/* ---- CUDA (check_cuda.c) ------------------------------------------------------------------ */

/* 1 when CUDA device 0 can be used; otherwise 0 and why in reason. Forks to probe, so the
 * calling process never initializes CUDA (its Check children could not use it). */
int check_cuda_probe(char *reason, size_t size);
/* Make device's primary context current on this thread (push) and put the old one back. */
int check_cuda_push(int32_t device_id, char *error, size_t error_size);
void check_cuda_pop(void);
/* Capture one run of the thunk on stream into a CUDA graph, launch the graph and wait.
 * Returns DLOP_OK, or a status with what failed (the capture, instantiation or launch). */
int check_cuda_graph_run(check_prepared *p, check_buffer *inputs, check_buffer *outputs,
                         void *stream, char *error, size_t error_size);

/* ---- ELF (elf_exports.c) ------------------------------------------------------------------ */

/* The names of defined, visible global/weak functions and objects in path's .dynsym other
 * than those of allowed (NULL-terminated), comma-separated into list. Returns the count, or -1
 * with why in list. */
int check_elf_extra_exports(const char *path, const char *const *allowed, char *list,
                            size_t size);

/* ---- the plugin's check info (check_info.c) ----------------------------------------------- */

/* The plugin's dlop_check_info (its optional dlop_plugin_check_info, dlop/check_info.h), asked
 * for once per test process; NULL when it exports none or when the info cannot be used
 * (check_info_problem says why). */
const dlop_check_info *check_info_get(void);
/* "" or why the plugin's check info cannot be used (check_info_valid fails with it). */
const char *check_info_problem(void);
/* op's entry (a zero-filled full-size copy) and 1; 0 when the info does not describe op. */
int check_info_for_op(const dlop_op_desc *op, dlop_check_op_info *entry);

/* ---- the registry of tests (check_registry.c) and per-op isolation (check_isolate.c) ------- */

/* One registered Check test: suite, test case, its timeout (seconds, before Check's
 * CK_TIMEOUT_MULTIPLIER), the test and its loop index (the case index; 0 for plugin tests). */
typedef struct check_slot {
  const char *suite, *tcase;
  int timeout;
  const TTest *test;
  int index;
} check_slot;

/* A test case of suite (named suite_name) with a timeout, remembered for check_add_test. */
TCase *check_tcase(Suite *suite, const char *suite_name, const char *name, int timeout);
/* Add test with loop index index to tc (made by check_tcase) and to the registry. */
void check_add_test(TCase *tc, const TTest *test, int index);
/* Every registered test in Check's run order (suites, their test cases, their tests). */
const check_slot *check_slots(int *count);
void check_registry_free(void);

/* Runs every registered test in child processes: one per test (--isolation check) or one per
 * suite (op) running its tests one after another in Check's no-fork mode (--isolation op). A
 * test that crashes, exits or exceeds its timeout fails naming itself, the stage and the shape
 * (check_where.c); with one process per op the rest of the op goes on in a new process, as does
 * everything after any failed test. Prints the report as Check's CK_NORMAL does. Returns the
 * number of failed or errored tests. */
int check_run_isolated(int one_process_per_op);

/* ---- registration of the tests (check_tests_*.c) ------------------------------------------ */

void check_add_plugin_tests(TCase *tc);
/* 1 when the suite can drive op (inputs, outputs and parameters within its limits); else 0
 * and why in why. An op beyond them gets only op_within_suite_limits, which fails saying so:
 * every other check would index the suite's fixed-size arrays past their end. */
int check_op_within_limits(const dlop_op_desc *op, char *why, size_t size);
void check_add_limits_test(TCase *tc, int case_index);
void check_add_op_tests(TCase *tc, int case_index);
void check_add_node_tests(TCase *tc, int case_index);
void check_add_run_tests(TCase *tc, int case_index);
void check_add_cuda_tests(TCase *tc, int case_index);
/* values_match_reference (check_tests_values.c): results against a reference dtype or the
 * plugin's reference function, on inputs every compared dtype holds exactly. */
void check_add_values_tests(TCase *tc, int case_index);
/* scalar_body_matches_thunk (check_tests_body.c), for ops that declare a scalar body: the
 * kernel fusion generates from the body agrees with the op's own thunk. */
void check_add_body_tests(TCase *tc, int case_index);
/* View ops (ABI 1.1: a view_map, make_view, maybe no make_thunk; check_tests_view.c). */
int check_is_view_op(const dlop_op_desc *op);
/* make_view's checks on every layout, instead of the thunk checks (noted as not applicable). */
void check_add_view_tests(TCase *tc, int case_index);

#endif
