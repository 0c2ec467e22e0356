/* explain.c — a readable listing of a compiled function: its inputs, one line per node in run
 * order ("#0 double(x: float32[5]) -> float32[5] on cpu", '?' for unknown dims, and
 * "(in place of input 0)" where the buffer plan reuses an input's array, "(view of input 0)"
 * for view nodes, which run no kernel), each fused node's members below it (which of their
 * outputs keep a buffer, which live only in the kernel; a reduction group's reduction last),
 * why a reduction was not fused with the group computing its input, its outputs, what fusion
 * did, and on CUDA whether runs replay CUDA graphs ("cuda graphs: replayed (...)" or "... not
 * replayed: why").
 * It answers "where did each node run?", which Theano's graphs could not. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "function_internal.h"
#include "fusion.h"

typedef struct text_buffer {
  char *data;
  size_t size;
  size_t needed; /* bytes the whole text needs, NUL excluded */
} text_buffer;

static void append(text_buffer *text, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static void append(text_buffer *text, const char *format, ...) {
  va_list args;
  int n;
  size_t room = text->needed < text->size ? text->size - text->needed : 0;
  va_start(args, format);
  n = vsnprintf(room ? text->data + text->needed : NULL, room, format, args);
  va_end(args);
  if (n > 0) text->needed += (size_t)n;
}

static void append_slot(text_buffer *text, const dlop_function *function, int32_t slot,
                        int with_name) {
  char type[96];
  dlop__type_format(&function->slot_types[slot], type, sizeof type);
  if (with_name)
    append(text, "%s: %s", function->slot_names[slot], type);
  else
    append(text, "%s", type);
}

static void append_slot_list(text_buffer *text, const dlop_function *function, const int32_t *slots,
                             int32_t count, int with_name) {
  int32_t i;
  for (i = 0; i < count; i++) {
    if (i > 0) append(text, ", ");
    append_slot(text, function, slots[i], with_name);
  }
}

/* " (in place of input 0)" for each output the buffer plan lets overwrite an input; when the
 * static shapes cannot prove the sizes equal, the run decides, and the text says so. */
static void append_inplace(text_buffer *text, const dlop__function_node *node) {
  int32_t o;
  for (o = 0; node->inplace_input != NULL && o < node->num_outputs; o++) {
    if (node->inplace_input[o] < 0) continue;
    append(text, " (");
    if (node->num_outputs != 1) append(text, "output %d ", (int)o);
    append(text, "in place of input %d%s)", (int)node->inplace_input[o],
           node->inplace_certain[o] ? "" : " when the run's shapes match");
  }
}

/* " (view of input 0)" for a view node (ABI 1.1): it runs no kernel and allocates nothing, its
 * output shares the input's memory. */
static void append_view(text_buffer *text, const dlop__function_node *node) {
  int32_t o;
  for (o = 0; node->is_view && o < node->num_outputs; o++) {
    append(text, " (");
    if (node->num_outputs != 1) append(text, "output %d ", (int)o);
    append(text, "view of input %d)", (int)node->op->view_map[o]);
  }
}

/* A fused node's group: one line per member, its inputs by name and its outputs with where they
 * live: "(output N)" of the fused node (a buffer, read after the group), or "(in the kernel)"
 * (no buffer: only the kernel's registers hold it). One-element constants are in the code. */
/* "every axis", "the last axis", "the last 2 axes" of a reduction group. */
static void append_axes(text_buffer *text, const dlop__fusion_reduction *reduction) {
  int32_t reduced = 0, ndim = reduction->node.input_types[0].ndim;
  for (uint32_t bits = reduction->axes; bits; bits &= bits - 1) reduced++;
  if (reduced == ndim)
    append(text, "every axis");
  else if (reduced == 1)
    append(text, "the last axis");
  else
    append(text, "the last %d axes", (int)reduced);
}

/* One member's line: its inputs by name and its outputs with where they live. */
static void append_member(text_buffer *text, const dlop_function *function,
                          const dlop__fusion_group *group, const dlop__fusion_member *member) {
  const dlop__function_node *node = &member->node;
  append(text, "    %s(", node->op->name);
  for (int32_t j = 0; j < node->num_inputs; j++) {
    if (j > 0) append(text, ", ");
    append_slot(text, function, node->input_slots[j], 1);
    if (member->sources[j].kind == DLOP__FUSION_FROM_LITERAL) append(text, " (in the code)");
  }
  append(text, ") -> ");
  for (int32_t j = 0; j < node->num_outputs; j++) {
    int32_t output = -1;
    if (j > 0) append(text, ", ");
    append_slot(text, function, node->output_slots[j], 1);
    for (int32_t o = 0; o < group->num_outputs; o++)
      if (group->output_values[o] == member->values[j]) output = o;
    if (output >= 0)
      append(text, " (output %d)", (int)output);
    else
      append(text, " (in the kernel)");
  }
}

/* A row group: its nodes in schedule order, each reduction with the phase it runs in. */
static void append_row_group(text_buffer *text, const dlop_function *function,
                             const dlop__fusion_group *group) {
  const dlop__fusion_row *row = group->row;
  append(text,
         " (row group %d: %d nodes in one kernel, dlop_fused_g%d; %d reduction%s over the last "
         "axis, each row of the inputs read once",
         (int)group->number, (int)(group->num_members + row->num_reductions), (int)group->number,
         (int)row->num_reductions, row->num_reductions == 1 ? "" : "s");
  if (group->target == DLOP__FUSION_TARGET_CUDA)
    append(text, ", kept in registers for rows of up to %d elements", DLOP__FUSION_ROW_LIMIT);
  append(text, ")\n");
  for (int32_t i = 0; i < row->num_steps; i++) {
    int32_t step = row->steps[i];
    if (step >= 0) {
      append_member(text, function, group, &group->members[step]);
    } else {
      const dlop__fusion_row_reduction *r = &row->reductions[-1 - step];
      int32_t output = -1;
      for (int32_t o = 0; o < group->num_outputs; o++)
        if (group->output_values[o] == r->value) output = o;
      append(text, "    %s(", r->body.node.op->name);
      append_slot(text, function, r->body.node.input_slots[0], 1);
      append(text, ") -> ");
      append_slot(text, function, r->body.node.output_slots[0], 1);
      if (output >= 0)
        append(text, " (output %d", (int)output);
      else
        append(text, " (in the kernel");
      append(text, ", phase %d of the row)", (int)(-step));
    }
    append(text, "%s", i + 1 < row->num_steps ? "\n" : "");
  }
}

static void append_group(text_buffer *text, const dlop_function *function,
                         const dlop__fusion_group *group) {
  const dlop__fusion_reduction *reduction = group->reduction;
  if (group->row != NULL) {
    append_row_group(text, function, group);
    return;
  }
  append(text, " (group %d: %d nodes in one kernel, dlop_fused_g%d", (int)group->number,
         (int)group->num_members + (reduction != NULL), (int)group->number);
  if (reduction != NULL) {
    append(text, "; %s over ", reduction->node.op->name);
    append_axes(text, reduction);
    append(text, " of values computed in the kernel");
  }
  append(text, ")\n");
  for (int32_t m = 0; m < group->num_members; m++) {
    append_member(text, function, group, &group->members[m]);
    append(text, "%s", m + 1 < group->num_members || reduction != NULL ? "\n" : "");
  }
  if (reduction != NULL) {
    append(text, "    %s(", reduction->node.op->name);
    append_slot(text, function, reduction->node.input_slots[0], 1);
    append(text, ") -> ");
    append_slot(text, function, reduction->node.output_slots[0], 1);
    append(text, " (output 0)");
  }
}

int dlop_function_explain(const dlop_function *function, char *buffer, size_t size) {
  text_buffer text = {buffer, size, 0};
  char device[32];
  int32_t i;
  if (function == NULL || (buffer == NULL && size > 0))
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_function_explain: %s is NULL",
                       function == NULL ? "function" : "buffer");
  if (buffer != NULL && size > 0) buffer[0] = '\0';
  dlop_device_format(function->device, device, sizeof device);
  append(&text, "function on %s: %d node%s", device, (int)function->num_nodes,
         function->num_nodes == 1 ? "" : "s");
  if (function->fused_nodes > 0)
    append(&text, " (%d of the graph's nodes run in fused kernels)", (int)function->fused_nodes);
  append(&text, "\ninputs: ");
  for (i = 0; i < function->num_inputs; i++) {
    if (i > 0) append(&text, ", ");
    append_slot(&text, function, i, 1);
  }
  append(&text, "\n");
  if (function->num_constants > 0) {
    append(&text, "constants: ");
    for (i = 0; i < function->num_constants; i++) {
      if (i > 0) append(&text, ", ");
      append_slot(&text, function, function->num_inputs + i, 1);
    }
    append(&text, "\n");
  }
  for (i = 0; i < function->num_nodes; i++) {
    const dlop__function_node *node = &function->nodes[i];
    append(&text, "#%d %s(", (int)i, node->op->name);
    append_slot_list(&text, function, node->input_slots, node->num_inputs, 1);
    append(&text, ") -> ");
    if (node->num_outputs != 1) append(&text, "(");
    append_slot_list(&text, function, node->output_slots, node->num_outputs, 0);
    if (node->num_outputs != 1) append(&text, ")");
    append(&text, " on %s", device);
    append_inplace(&text, node);
    append_view(&text, node);
    if (node->fusion_note) append(&text, " (%s)", node->fusion_note);
    if (node->fused) append_group(&text, function, node->fused);
    append(&text, "\n");
  }
  append(&text, "outputs: ");
  append_slot_list(&text, function, function->output_slots, function->num_outputs, 1);
  append(&text, "\n");
  if (function->fusion_note) append(&text, "fusion: %s\n", function->fusion_note);
  if (function->graphs != NULL) {
    char line[640];
    dlop__cuda_graphs_describe(function->graphs, line, sizeof line);
    append(&text, "%s\n", line);
  }
  if (text.needed + 1 > size)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_function_explain: the listing needs %zu bytes, the buffer has %zu "
                       "(the text was cut)",
                       text.needed + 1, size);
  return DLOP_OK;
}
