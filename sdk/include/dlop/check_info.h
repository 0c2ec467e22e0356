/* dlop/check_info.h — what a plugin may tell the compliance suite, `dlop check`, beyond its
 * descriptor: per op, the dtypes whose values the suite must not compare with the others (and
 * why), and a reference function that computes expected outputs. It travels through a second,
 * optional exported symbol, dlop_plugin_check_info, that only `dlop check` looks up: hosts never
 * read it, so it is no part of the ABI a host negotiates (version.h), and a plugin without it
 * loads and certifies as before. Like the ABI, every struct starts with struct_size (the reader
 * uses only the fields it covers) and is only ever appended to. */
#ifndef DLOP_CHECK_INFO_H
#define DLOP_CHECK_INFO_H

#include <stddef.h>
#include <stdint.h>

#include "op.h"
#include "plugin.h"
#include "status.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DLOP_CHECK_INFO_SYMBOL "dlop_plugin_check_info"
/* Version of this header's structs; dlop check passes its own to dlop_plugin_check_info. */
#define DLOP_CHECK_INFO_VERSION 1

/* Arguments of a reference function: one call per run of the values check. Inputs and outputs
 * are C-contiguous float64 host tensors (every value the suite feeds is a small integer, exact
 * in float64); input_dtypes and output_dtypes say which dtypes the run compared with these
 * values had, for an op whose meaning depends on them (integer division rounds). */
typedef struct dlop_check_reference_args {
  uint32_t struct_size;
  uint32_t reserved;
  const struct dlop_op_desc *op;
  const dlop_param_value *params; /* op->num_params values, as the checked node has them */
  int32_t num_params;
  int32_t num_inputs;
  const dlop_tensor *inputs;   /* float64, host, C-contiguous: read */
  const int32_t *input_dtypes; /* dlop_dtype of each input in the run compared */
  int32_t num_outputs;
  int32_t reserved2;
  const dlop_tensor *outputs;   /* float64, host, C-contiguous, infer_shape's shapes: write all */
  const int32_t *output_dtypes; /* dlop_dtype of each output in the run compared (make_node's) */
  char *error;                  /* on failure, a message naming what was wrong */
  size_t error_size;
} dlop_check_reference_args;

/* Computes every output element from the inputs; DLOP_OK, or a status and a message. */
typedef int (*dlop_check_reference_fn)(const dlop_check_reference_args *args);

/* What the suite needs to know about one op's values. */
typedef struct dlop_check_op_info {
  uint32_t struct_size; /* sizeof(dlop_check_op_info) as compiled */
  /* DLOP_DTYPE_BIT mask: dtypes whose results the values check does not compare (on any
   * device), because they mean something else by design: integer division that rounds,
   * bitwise ops, results that saturate. 0: every declared dtype is compared. */
  uint32_t values_excluded;
  const char *op_name;             /* the op this describes (a name in the plugin descriptor) */
  const char *values_excluded_why; /* one line, shown in the suite's note; set when excluding */
  /* NULL: the op's dtypes are compared with each other (float64 the reference where declared).
   * Set: every compared dtype is held to this function instead. */
  dlop_check_reference_fn reference;
} dlop_check_op_info;

typedef struct dlop_check_info {
  uint32_t struct_size; /* sizeof(dlop_check_info) as compiled */
  uint32_t version;     /* DLOP_CHECK_INFO_VERSION the plugin was compiled with */
  const dlop_check_op_info *const *ops; /* num_ops pointers, each with its own struct_size */
  int32_t num_ops;
  int32_t reserved;
} dlop_check_info;

/* The optional second symbol. check_version is the suite's DLOP_CHECK_INFO_VERSION. Set *info
 * to data that lives as long as the plugin is loaded and return DLOP_OK, or a status and a
 * message. Called in the suite's test processes only, never by a host. */
typedef int (*dlop_plugin_check_info_fn)(uint32_t check_version, const dlop_check_info **info,
                                         char *error, size_t error_size);

DLOP_PLUGIN_EXPORT int dlop_plugin_check_info(uint32_t check_version,
                                              const dlop_check_info **info, char *error,
                                              size_t error_size);

/* Defines dlop_plugin_check_info over the addresses of the plugin's dlop_check_op_info
 * structs: DLOP_PLUGIN_CHECK_INFO(&div_check, &shift_check). */
#define DLOP_PLUGIN_CHECK_INFO(...)                                                          \
  static const dlop_check_op_info *const dlop_plugin_check_ops[] = {__VA_ARGS__};            \
  static const dlop_check_info dlop_plugin_check_descriptor = {                              \
      .struct_size = sizeof(dlop_check_info), .version = DLOP_CHECK_INFO_VERSION,             \
      .ops = dlop_plugin_check_ops,                                                           \
      .num_ops = (int32_t)(sizeof(dlop_plugin_check_ops) / sizeof(dlop_plugin_check_ops[0]))}; \
  DLOP_PLUGIN_EXPORT int dlop_plugin_check_info(uint32_t check_version,                      \
                                                const dlop_check_info **info, char *error,    \
                                                size_t error_size) {                          \
    (void)check_version; /* any suite version: it reads what struct_size covers */            \
    (void)error;                                                                              \
    (void)error_size;                                                                         \
    *info = &dlop_plugin_check_descriptor;                                                    \
    return DLOP_OK;                                                                           \
  }

#ifdef __cplusplus
}
#endif

#endif
