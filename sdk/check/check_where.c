/* check_where.c — what the running check is calling in the plugin (make_node, infer_shape,
 * make_thunk, a run, destroy, make_view, dlop_plugin_init) and on which inputs. The runner
 * (check_isolate.c) points the record into memory it shares with the check's process, so a check
 * whose process dies (a crash, an exit, a timeout) is reported with the stage and the shapes like
 * every other failure line: Check's own report of a signal names neither. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "check_suite.h"

static check_where unattached; /* outside the runner (nothing reads it) */
static check_where *where_now = &unattached;
static pthread_t recording_thread;
static int have_recording_thread;

void check_where_attach(check_where *where) {
  where_now = where ? where : &unattached;
  memset(where_now, 0, sizeof *where_now);
  where_now->num_inputs = -1;
  recording_thread = pthread_self();
  have_recording_thread = 1;
}

/* Only the check's own thread records: two_threads_at_once's threads run the same thunk at once
 * (their check says so itself before starting them). */
static int recording(void) {
  return !have_recording_thread || pthread_equal(pthread_self(), recording_thread);
}

void check_where_stage(const char *stage) {
  if (!recording()) return;
  where_now->stage = stage;
  where_now->returned = 0;
}

void check_where_returned(void) {
  if (recording()) where_now->returned = 1;
}

void check_where_sanitizer_died(void) { where_now->sanitizer_died = 1; /* any thread */ }

void check_where_types(const char *stage, const dlop_type *inputs, int32_t num_inputs) {
  if (!recording()) return;
  int32_t n = num_inputs < 0 ? 0 : num_inputs > CHECK_MAX_OPERANDS + 1 ? CHECK_MAX_OPERANDS + 1
                                                                        : num_inputs;
  where_now->stage = stage;
  where_now->returned = 0;
  where_now->num_inputs = n;
  where_now->declared_inputs = num_inputs;
  if (n > 0) memcpy(where_now->inputs, inputs, sizeof(dlop_type) * (size_t)n);
}

void check_where_run(const char *stage, const check_prepared *p) {
  if (!recording()) return;
  dlop_type inputs[CHECK_MAX_OPERANDS];
  for (int32_t i = 0; i < p->num_inputs && i < CHECK_MAX_OPERANDS; i++)
    inputs[i] = check_input_type(p->c->dtype, &p->shape, i, 0);
  check_where_types(stage, inputs, p->num_inputs);
}

/* 1 when every recorded input has input 0's rank and dims. */
static int same_shapes(const check_where *where) {
  for (int32_t i = 1; i < where->num_inputs; i++)
    if (where->inputs[i].ndim != where->inputs[0].ndim ||
        memcmp(where->inputs[i].shape, where->inputs[0].shape,
               sizeof(int64_t) * (size_t)where->inputs[0].ndim) != 0)
      return 0;
  return 1;
}

const char *check_where_shape_text(const check_where *where, char *buffer, size_t size) {
  buffer[0] = '\0';
  if (where->num_inputs <= 0) return buffer;
  char text[DLOP_MAX_NDIM * 22 + 4];
  if (same_shapes(where)) {
    snprintf(buffer, size, "shape %s",
             check_shape_text(where->inputs[0].shape, where->inputs[0].ndim, text, sizeof text));
    return buffer;
  }
  size_t used = (size_t)snprintf(buffer, size, "shapes ");
  for (int32_t i = 0; i < where->num_inputs && used < size; i++)
    used += (size_t)snprintf(buffer + used, size - used, "%s%s", i ? " x " : "",
                             check_shape_text(where->inputs[i].shape, where->inputs[i].ndim,
                                              text, sizeof text));
  return buffer;
}

const char *check_where_inputs_text(const check_where *where, char *buffer, size_t size) {
  size_t used = 0;
  buffer[0] = '\0';
  char text[DLOP_MAX_NDIM * 22 + 4];
  for (int32_t i = 0; i < where->num_inputs && used < size; i++) {
    int dtype = where->inputs[i].dtype;
    used += (size_t)snprintf(buffer + used, size - used, "%s%s %s", i ? " x " : "",
                             dtype >= 0 && dtype < DLOP_DTYPE_COUNT
                                 ? dlop_dtype_name((dlop_dtype)dtype) : "(no dtype)",
                             check_shape_text(where->inputs[i].shape, where->inputs[i].ndim,
                                              text, sizeof text));
  }
  if (where->declared_inputs > where->num_inputs && used < size)
    snprintf(buffer + used, size - used, " and %d more", (int)(where->declared_inputs -
                                                                where->num_inputs));
  return buffer;
}
