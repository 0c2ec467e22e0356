/* check_tests_view.c — the checks of view ops (ABI 1.1: a view_map and make_view, no thunk):
 * make_view is driven as the host drives it (a C-contiguous copy when it asks for one) on inputs
 * laid out contiguous, with gaps, reversed and transposed; the view must stay inside the input,
 * show the same elements whatever the layout, be pure, and agree between CPU and CUDA. */
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"

int check_is_view_op(const dlop_op_desc *op) { return op->view_map != NULL; }

/* One make_view answer. */
typedef struct view_answer {
  int status;
  int needs_contiguous;
  int64_t strides[DLOP_MAX_NDIM];
  uint64_t byte_offset;
  char error[1024];
} view_answer;

static void call_make_view(const check_case *c, const dlop_tensor *input, int32_t output_index,
                           const dlop_type *output, view_answer *a) {
  dlop_view_args args;
  memset(a, 0, sizeof *a);
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.op = c->op;
  args.params = check_default_params(c->op);
  args.num_params = c->op->num_params;
  args.output_index = output_index;
  args.input_index = c->op->view_map[output_index];
  args.input = input;
  args.output = output;
  args.output_strides = a->strides;
  args.output_byte_offset = &a->byte_offset;
  int32_t needs = 0;
  args.needs_contiguous = &needs;
  args.error = a->error;
  args.error_size = sizeof a->error;
  dlop_type viewed_type = check_type(dlop_dtype_from_dl(input->dtype), input->ndim, input->shape, 0);
  check_where_types("make_view", &viewed_type, 1);
  a->status = c->op->make_view(&args);
  check_where_returned();
  a->needs_contiguous = needs;
}

static const char *layout_name(check_layout layout) {
  switch (layout) {
    case CHECK_EVERY_OTHER: return "every other element (strides x2)";
    case CHECK_REVERSED: return "reversed (negative strides)";
    case CHECK_TRANSPOSED: return "transposed (column-major)";
    default: return "contiguous";
  }
}

/* Bytes [low, high) from tensor data that n elements with these strides reach. */
static void byte_span(int32_t ndim, const int64_t *shape, const int64_t *strides, int64_t origin,
                      size_t size, int64_t *low, int64_t *high) {
  *low = *high = origin;
  for (int32_t d = 0; d < ndim; d++) {
    int64_t reach = (shape[d] - 1) * strides[d] * (int64_t)size;
    if (reach < 0) *low += reach;
    else *high += reach;
  }
  *high += (int64_t)size;
}

static int64_t numel_of(int32_t ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int32_t d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

/* What a view check needs from one (shape, layout): the node, the viewed input (and its
 * contiguous copy when make_view asked for one) and make_view's final answer per output. */
typedef struct view_run {
  check_prepared p;
  check_buffer in[CHECK_MAX_OPERANDS];
  check_buffer copy[CHECK_MAX_OPERANDS]; /* contiguous copies, where asked for */
  int copied[CHECK_MAX_OPERANDS];
  view_answer answer[CHECK_MAX_OPERANDS];
  int asked[CHECK_MAX_OPERANDS]; /* make_view asked for a contiguous input first */
} view_run;

/* The input make_view finally saw for output o. */
static const check_buffer *viewed(const view_run *v, int32_t o, const dlop_op_desc *op) {
  int32_t i = op->view_map[o];
  return v->copied[i] ? &v->copy[i] : &v->in[i];
}

/* Node, inputs in layout (random values seeded by salt), make_view per output as a host calls
 * it; fails (naming check) on an error status, a missing message, or a request for a contiguous
 * input that comes for a contiguous input or again for the copy. */
static void view_prepare(const check_case *c, const char *check, const check_shape *shape,
                         check_layout layout, uint64_t salt, view_run *v) {
  memset(v, 0, sizeof *v);
  void *stream = check_stream(c); /* uploads on the suite's stream; make_view reads no memory */
  check_prepare_node(c, check, shape, 0, &v->p);
  check_prepared *p = &v->p;
  const char *name = layout_name(layout);
  for (int32_t i = 0; i < p->num_inputs; i++)
    check_input_buffer_init(&v->in[i], p, i, layout, salt, stream);
  for (int32_t o = 0; o < p->num_outputs; o++) {
    int32_t i = c->op->view_map[o];
    if (i < 0 || i >= p->num_inputs)
      check_fail(c, check, NULL, 0, "view_map[%d] is %d, not an input (0..%d)", (int)o, (int)i,
                 (int)p->num_inputs - 1);
    if (p->outputs[o].dtype != v->in[i].dtype)
      check_fail(c, check, shape->dims, shape->ndim, "output %d is a view of input %d (%s) but "
                 "make_node gave it dtype %s (a view has its input's dtype)", (int)o, (int)i,
                 dlop_dtype_name((dlop_dtype)v->in[i].dtype),
                 dlop_dtype_name((dlop_dtype)p->outputs[o].dtype));
    view_answer *a = &v->answer[o];
    call_make_view(c, &v->in[i].tensor, o, &p->concrete_outputs[o], a);
    if (a->status == DLOP_OK && a->needs_contiguous) {
      v->asked[o] = 1;
      if (layout == CHECK_CONTIGUOUS)
        check_fail(c, check, shape->dims, shape->ndim, "make_view for output %d asked for a "
                   "C-contiguous input although its input was C-contiguous already (on a "
                   "C-contiguous input make_view must succeed)", (int)o);
      if (!v->copied[i]) { /* the host's copy: the same logical elements, C-contiguous */
        int32_t ndim;
        const int64_t *dims = check_input_dims(shape, i, &ndim);
        size_t size = v->in[i].element_size;
        void *values = malloc((size_t)v->in[i].numel * size + 1);
        ck_assert_msg(values != NULL, "out of host memory");
        check_buffer_extract(&v->in[i], v->in[i].image, values);
        check_buffer_init(&v->copy[i], c, c->device, v->in[i].dtype, ndim, dims,
                          CHECK_CONTIGUOUS, values, NULL, stream);
        free(values);
        v->copied[i] = 1;
      }
      call_make_view(c, &v->copy[i].tensor, o, &p->concrete_outputs[o], a);
      if (a->status == DLOP_OK && a->needs_contiguous)
        check_fail(c, check, shape->dims, shape->ndim, "make_view for output %d asked for a "
                   "C-contiguous input again when given the host's C-contiguous copy of a %s "
                   "input (on a C-contiguous input make_view must succeed)", (int)o, name);
    }
    if (a->status != DLOP_OK)
      check_fail(c, check, shape->dims, shape->ndim, "make_view for output %d failed on an input "
                 "laid out %s%s: %s: %s", (int)o, name,
                 v->asked[o] ? " (on the host's C-contiguous copy, after asking for it)" : "",
                 dlop_status_name(a->status), a->error[0] ? a->error : "(no message)");
  }
}

static void view_release(view_run *v) {
  for (int32_t i = 0; i < v->p.num_inputs; i++) {
    check_buffer_free(&v->in[i]);
    if (v->copied[i]) check_buffer_free(&v->copy[i]);
  }
}

/* Fails unless every output's view is aligned and reaches only bytes its input's elements span
 * (what the host checks before handing the view out). */
static void view_require_inside(const check_case *c, const char *check, const view_run *v,
                                const char *layout) {
  const check_prepared *p = &v->p;
  for (int32_t o = 0; o < p->num_outputs; o++) {
    const dlop_type *out = &p->concrete_outputs[o];
    const check_buffer *in = viewed(v, o, c->op);
    if (numel_of(out->ndim, out->shape) == 0) continue; /* an empty view reaches nothing */
    int64_t low, high, in_low, in_high;
    byte_span(out->ndim, out->shape, v->answer[o].strides, (int64_t)v->answer[o].byte_offset,
              in->element_size, &low, &high);
    byte_span(in->ndim, in->shape, in->strides, (int64_t)in->tensor.byte_offset,
              in->element_size, &in_low, &in_high);
    char text[DLOP_MAX_NDIM * 22 + 4];
    if ((int64_t)(v->answer[o].byte_offset - in->tensor.byte_offset) % (int64_t)in->element_size)
      check_fail(c, check, p->shape.dims, p->shape.ndim, "make_view gave output %d a byte offset "
                 "of %llu on an input laid out %s (byte offset %llu): not a whole number of %zu-byte "
                 "elements from the input's elements", (int)o,
                 (unsigned long long)v->answer[o].byte_offset, layout,
                 (unsigned long long)in->tensor.byte_offset, in->element_size);
    if (low < in_low || high > in_high)
      check_fail(c, check, p->shape.dims, p->shape.ndim, "make_view's view for output %d (shape "
                 "%s, byte offset %llu) reaches bytes [%lld, %lld) from the input's data pointer, "
                 "but the input (laid out %s) spans only [%lld, %lld): a view must stay inside "
                 "its input's elements", (int)o,
                 check_shape_text(out->shape, out->ndim, text, sizeof text),
                 (unsigned long long)v->answer[o].byte_offset, (long long)low, (long long)high,
                 layout, (long long)in_low, (long long)in_high);
  }
}

/* Output o's logical elements (C order) read through the view from the image of its input. */
static void *view_elements(const view_run *v, int32_t o, const dlop_op_desc *op) {
  const check_prepared *p = &v->p;
  const dlop_type *out = &p->concrete_outputs[o];
  const check_buffer *in = viewed(v, o, op);
  int64_t n = numel_of(out->ndim, out->shape);
  unsigned char *values = malloc((size_t)n * in->element_size + 1);
  ck_assert_msg(values != NULL, "out of host memory");
  for (int64_t k = 0; k < n; k++) {
    int64_t rest = k, offset = (int64_t)v->answer[o].byte_offset;
    for (int32_t d = out->ndim - 1; d >= 0; d--) {
      offset += (rest % out->shape[d]) * v->answer[o].strides[d] * (int64_t)in->element_size;
      rest /= out->shape[d];
    }
    memcpy(values + (size_t)k * in->element_size, in->image + in->data_offset + offset,
           in->element_size);
  }
  return values;
}

/* The shapes a view check walks: every case shape (views of a large input cost nothing). */
static const check_shape *view_shapes(const check_case *c, const char *check, int *count) {
  return check_case_shapes(c, check, count);
}

static const check_layout layouts[] = {CHECK_CONTIGUOUS, CHECK_EVERY_OTHER, CHECK_REVERSED,
                                       CHECK_TRANSPOSED};
#define LAYOUT_COUNT 4

START_TEST(make_view_accepts_any_layout) {
  const check_case *c = check_case_at(_i);
  const char *check = "make_view_accepts_any_layout";
  int count;
  const check_shape *shapes = view_shapes(c, check, &count);
  for (int s = 0; s < count; s++)
    for (int l = 0; l < LAYOUT_COUNT; l++) {
      view_run v;
      view_prepare(c, check, &shapes[s], layouts[l], 100, &v);
      view_release(&v);
    }
}
END_TEST

START_TEST(view_stays_inside_input) {
  const check_case *c = check_case_at(_i);
  const char *check = "view_stays_inside_input";
  int count;
  const check_shape *shapes = view_shapes(c, check, &count);
  for (int s = 0; s < count; s++)
    for (int l = 0; l < LAYOUT_COUNT; l++) {
      view_run v;
      view_prepare(c, check, &shapes[s], layouts[l], 110, &v);
      view_require_inside(c, check, &v, layout_name(layouts[l]));
      view_release(&v);
    }
}
END_TEST

/* The view of a contiguous input is the reference: the views of strided, reversed and
 * transposed inputs holding the same logical elements must show the same elements, bit for bit. */
START_TEST(view_same_elements_any_layout) {
  const check_case *c = check_case_at(_i);
  const char *check = "view_same_elements_any_layout";
  int count;
  const check_shape *shapes = view_shapes(c, check, &count);
  for (int s = 0; s < count; s++) {
    view_run reference;
    view_prepare(c, check, &shapes[s], CHECK_CONTIGUOUS, 120, &reference);
    view_require_inside(c, check, &reference, "contiguous");
    for (int l = 1; l < LAYOUT_COUNT; l++) {
      view_run v;
      view_prepare(c, check, &shapes[s], layouts[l], 120, &v);
      view_require_inside(c, check, &v, layout_name(layouts[l]));
      for (int32_t o = 0; o < v.p.num_outputs; o++) {
        void *expected = view_elements(&reference, o, c->op);
        void *actual = view_elements(&v, o, c->op);
        const dlop_type *out = &v.p.concrete_outputs[o];
        char report[1024], strides[DLOP_MAX_NDIM * 22 + 4], in_strides[DLOP_MAX_NDIM * 22 + 4];
        int64_t bad = check_compare(expected, actual, out->dtype, numel_of(out->ndim, out->shape),
                                    1, report, sizeof report);
        if (bad) {
          const check_buffer *in = viewed(&v, o, c->op);
          check_fail(c, check, v.p.shape.dims, v.p.shape.ndim,
                     "the view (output %d) of an input laid out %s (strides %s) shows other "
                     "elements than the view of the same values laid out contiguous: %lld of "
                     "%lld differ (make_view gave strides %s, byte offset %llu): %s", (int)o,
                     layout_name(layouts[l]),
                     check_shape_text(in->strides, in->ndim, in_strides, sizeof in_strides),
                     (long long)bad, (long long)numel_of(out->ndim, out->shape),
                     check_shape_text(v.answer[o].strides, out->ndim, strides, sizeof strides),
                     (unsigned long long)v.answer[o].byte_offset, report);
        }
        free(expected);
        free(actual);
      }
      view_release(&v);
    }
    view_release(&reference);
  }
}
END_TEST

static int same_answer(const view_answer *a, const view_answer *b, int32_t ndim) {
  return a->status == b->status && a->needs_contiguous == b->needs_contiguous &&
         a->byte_offset == b->byte_offset &&
         memcmp(a->strides, b->strides, sizeof(int64_t) * (size_t)ndim) == 0;
}

static void describe(const view_answer *a, int32_t ndim, char *text, size_t size) {
  char strides[DLOP_MAX_NDIM * 22 + 4];
  snprintf(text, size, "%s, needs_contiguous %d, strides %s, byte offset %llu",
           dlop_status_name(a->status), a->needs_contiguous,
           check_shape_text(a->strides, ndim, strides, sizeof strides),
           (unsigned long long)a->byte_offset);
}

START_TEST(make_view_is_pure) {
  const check_case *c = check_case_at(_i);
  const char *check = "make_view_is_pure";
  int count;
  const check_shape *shapes = view_shapes(c, check, &count);
  for (int s = 0; s < count; s++)
    for (int l = 0; l < LAYOUT_COUNT; l++) {
      view_run v;
      view_prepare(c, check, &shapes[s], layouts[l], 130, &v);
      for (int32_t o = 0; o < v.p.num_outputs; o++) {
        const dlop_type *out = &v.p.concrete_outputs[o];
        const check_buffer *in = viewed(&v, o, c->op);
        dlop_tensor copy = in->tensor;
        int64_t shape_copy[DLOP_MAX_NDIM], strides_copy[DLOP_MAX_NDIM];
        memcpy(shape_copy, in->shape, sizeof shape_copy);
        memcpy(strides_copy, in->strides, sizeof strides_copy);
        view_answer again;
        call_make_view(c, &in->tensor, o, out, &again);
        if (memcmp(&copy, &in->tensor, sizeof copy) != 0 ||
            memcmp(shape_copy, in->shape, sizeof shape_copy) != 0 ||
            memcmp(strides_copy, in->strides, sizeof strides_copy) != 0)
          check_fail(c, check, v.p.shape.dims, v.p.shape.ndim, "make_view changed its input "
                     "tensor's descriptor (shape, strides or offset are the host's: read them)");
        if (!same_answer(&v.answer[o], &again, out->ndim)) {
          char first[256], second[256];
          describe(&v.answer[o], out->ndim, first, sizeof first);
          describe(&again, out->ndim, second, sizeof second);
          check_fail(c, check, v.p.shape.dims, v.p.shape.ndim, "make_view for output %d (input "
                     "laid out %s) answered %s, then %s for the same arguments (no state may "
                     "carry over between calls)", (int)o, layout_name(layouts[l]), first, second);
        }
      }
      view_release(&v);
    }
}
END_TEST

/* CUDA cases: the same layout on the CPU gives the same view (make_view sees only layouts). */
START_TEST(cuda_view_matches_cpu) {
  const check_case *c = check_case_at(_i);
  const char *check = "cuda_view_matches_cpu";
  int count;
  const check_shape *shapes = view_shapes(c, check, &count);
  for (int s = 0; s < count; s++)
    for (int l = 0; l < LAYOUT_COUNT; l++) {
      view_run v;
      view_prepare(c, check, &shapes[s], layouts[l], 140, &v);
      for (int32_t o = 0; o < v.p.num_outputs; o++) {
        const dlop_type *out = &v.p.concrete_outputs[o];
        dlop_tensor cpu = viewed(&v, o, c->op)->tensor;
        cpu.device.type = DLOP_DEVICE_CPU;
        cpu.device.id = 0;
        view_answer there;
        call_make_view(c, &cpu, o, out, &there);
        if (!same_answer(&v.answer[o], &there, out->ndim)) {
          char on_cuda[256], on_cpu[256];
          describe(&v.answer[o], out->ndim, on_cuda, sizeof on_cuda);
          describe(&there, out->ndim, on_cpu, sizeof on_cpu);
          check_fail(c, check, v.p.shape.dims, v.p.shape.ndim, "make_view for output %d (input "
                     "laid out %s) answered %s on cuda:0 but %s for the same layout on the CPU",
                     (int)o, layout_name(layouts[l]), on_cuda, on_cpu);
        }
      }
      view_release(&v);
    }
}
END_TEST

/* The thunk checks do not apply to a view op: one note per check says so. */
START_TEST(thunk_checks_not_applicable) {
  const check_case *c = check_case_at(_i);
  static const char *cpu_checks[] = {
      "every_output_element_written", "nothing_written_outside_outputs", "inputs_untouched",
      "runs_many_times_and_after_other_thunks", "strided_inputs", "two_threads_at_once",
      "deterministic_run_to_run", "rejects_wrong_output_dtype", "no_host_memory_leaked",
      "values_match_reference"};
  static const char *cuda_checks[] = {"cuda_matches_cpu", "cuda_graph_capture",
                                      "device_memory_back_to_baseline"};
  for (size_t k = 0; k < sizeof cpu_checks / sizeof cpu_checks[0]; k++)
    check_note(c, cpu_checks[k], "skipped: a view op (view_map set) runs no thunk; make_view is "
               "checked instead (make_view_accepts_any_layout, view_stays_inside_input, "
               "view_same_elements_any_layout, make_view_is_pure)");
  for (size_t k = 0; c->device.type == DLOP_DEVICE_CUDA && k < 3; k++)
    check_note(c, cuda_checks[k], "skipped: a view op runs no kernel and allocates nothing%s",
               k == 0 ? "; cuda_view_matches_cpu compares its views with the CPU's" : "");
}
END_TEST

void check_add_view_tests(TCase *tc, int index) {
  const check_case *c = check_case_at(index);
  check_add_test(tc, make_view_accepts_any_layout, index);
  check_add_test(tc, view_stays_inside_input, index);
  check_add_test(tc, view_same_elements_any_layout, index);
  check_add_test(tc, make_view_is_pure, index);
  if (c->device.type == DLOP_DEVICE_CUDA)
    check_add_test(tc, cuda_view_matches_cpu, index);
  check_add_test(tc, thunk_checks_not_applicable, index);
}
