/* check_suite.h — what the files of dlop-check (the plugin compliance suite) share: the options,
 * the table of (op, device, dtype) cases the Check tests look up by their loop index, node and
 * thunk preparation, guarded tensors on either device, value comparison and failure reports. */
#ifndef DLOP_CHECK_SUITE_H
#define DLOP_CHECK_SUITE_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "dlop.h"

/* ---- options and the case table (check_main.c) ------------------------------------------- */

#define CHECK_MAX_OPERANDS 8 /* inputs or outputs of one op this suite drives */

typedef struct check_options {
  const char *plugin_path;
  int want_cpu, want_cuda;
  const char *op_filter; /* NULL: every op */
  int dtype_filter;      /* a dlop_dtype, or -1 for every declared one */
  uint64_t seed;
} check_options;

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

/* ---- nodes (check_node.c) ---------------------------------------------------------------- */

/* Number of inputs the suite gives the op (2 for variadic ops). */
int32_t check_num_inputs(const dlop_op_desc *op);
/* The op's declared defaults, in declaration order (static storage, op->num_params values). */
const dlop_param_value *check_default_params(const dlop_op_desc *op);
/* Call make_node / infer_shape with struct_size set, the defaults and an error buffer. */
int check_call_make_node(const dlop_op_desc *op, const dlop_type *inputs, int32_t num_inputs,
                         dlop_type *outputs, char *error, size_t error_size);
int check_call_infer_shape(const dlop_op_desc *op, const dlop_type *inputs, int32_t num_inputs,
                           dlop_type *outputs, char *error, size_t error_size);
/* A type of dtype and rank ndim with the given dims, or all unknown when unknown is set. */
dlop_type check_type(int dtype, int32_t ndim, const int64_t *dims, int unknown);

/* The concrete shapes every run-time check walks through (0-d, empty, one element, odd,
 * large >= 2^20 + 3 elements). */
typedef struct check_shape {
  int32_t ndim;
  int64_t dims[4];
} check_shape;
extern const check_shape check_shapes[];
extern const int check_shape_count;
#define CHECK_LARGE_SHAPE_INDEX (check_shape_count - 1)

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

/* make_node, infer_shape (concrete) and make_thunk; any failure fails the test, naming check. */
void check_prepare(const check_case *c, const char *check, const check_shape *shape,
                   int static_unknown, check_prepared *p);
void check_release(check_prepared *p);

/* ---- guarded buffers (check_buffer.c) ----------------------------------------------------- */

#define CHECK_GUARD_BYTES 256
#define CHECK_GUARD_BYTE 0xCD

typedef enum check_layout {
  CHECK_CONTIGUOUS = 0,
  CHECK_EVERY_OTHER = 1, /* strides twice the contiguous ones: gaps between elements */
  CHECK_REVERSED = 2     /* negative strides: element 0 at the highest address */
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
/* Read the whole allocation back into a malloc'ed array of b->bytes (caller frees). */
unsigned char *check_buffer_download(const check_buffer *b, void *stream);
/* The logical elements (C order) of a downloaded image into values (numel elements). */
void check_buffer_extract(const check_buffer *b, const unsigned char *downloaded, void *values);
void check_buffer_free(check_buffer *b);

/* ---- values (check_values.c) -------------------------------------------------------------- */

/* n random elements of dtype (floats in [-2, 2], ints in a small range, bools 0/1). */
void check_random_fill(void *data, int dtype, int64_t n, uint64_t seed);
double check_value(const void *data, int dtype, int64_t i);
/* Poison patterns for one element: run 0 NaN-like/0xAB bytes, run 1 0x5C bytes. */
void check_poison_pattern(int dtype, int run, unsigned char *pattern);
/* Compare n elements within a tolerance fit for the dtype (exact for ints; bitwise when
 * exact is set). Returns the number of mismatches; the first few, with their index, expected
 * and actual values, go into report. */
int64_t check_compare(const void *expected, const void *actual, int dtype, int64_t n, int exact,
                      char *report, size_t report_size);

/* ---- running (check_run.c) --------------------------------------------------------------- */

/* The device's stream for the suite's runs: a non-default CUDA stream (NULL on the CPU). */
void *check_stream(const check_case *c);
/* Run the thunk on input and output buffers with the case's stream and wait for it; returns
 * the thunk's status with its message in error. On CUDA the device's primary context is
 * current during the run, as the host guarantees. */
int check_run(check_prepared *p, check_buffer *inputs, check_buffer *outputs, void *stream,
              char *error, size_t error_size);
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
/* Fail (naming check) when the run failed. */
void check_require_ok(check_prepared *p, const char *check, const check_run_result *r);
void check_run_result_free(check_prepared *p, check_run_result *r);

/* ---- host memory accounting (malloc_counter.c) ------------------------------------------- */

/* Blocks and bytes allocated and not yet freed in this process, through malloc and friends. */
void check_malloc_counts(int64_t *blocks, int64_t *bytes);

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
 * than entry, comma-separated into list. Returns the count, or -1 with why in list. */
int check_elf_extra_exports(const char *path, const char *entry, char *list, size_t size);

/* ---- registration of the tests (check_tests_*.c) ------------------------------------------ */

void check_add_plugin_tests(TCase *tc);
void check_add_op_tests(TCase *tc, int case_index);
void check_add_node_tests(TCase *tc, int case_index);
void check_add_run_tests(TCase *tc, int case_index);
void check_add_cuda_tests(TCase *tc, int case_index);

#endif
