/* reduce_cpu.c — the CPU kernel of sum, mean, max and min over a reduce_layout. Each output is
 * reduced in runs along the innermost reduced dim (reduce_cpu_runs.c; pairwise summation for
 * float sums), the runs and fixed chunks of the reduction combined in a fixed binary cascade
 * (reduce_cpu_combine.c), so the bits never depend on the thread count. Two ways through it,
 * with the same arithmetic per output (bit for bit): one output at a time (its reduced
 * elements contiguous or strided), or, when the outputs are contiguous in the input (a
 * reduction over a leading or middle axis), a block of up to REDUCE_CPU_LANE_BYTES of adjacent
 * outputs at once, each row of the block one vector load (lanes). Parallel over outputs or
 * blocks, or over (output or block, chunk) pairs when there are few of them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reduce_cpu.h"

/* ---- the reduction -------------------------------------------------------------------- */

typedef struct reduce_cpu_context {
  const reduce_layout *layout;
  reduce_run_fn run;
  reduce_lanes_fn lanes;
  acc_class cls;
  int run_kind;
  reduce_kind kind;
  dlop_dtype out_dtype;
  size_t in_size, out_size;
  const char *input;
  char *output;
  int64_t chunks;         /* chunks per output */
  int64_t lane_width;     /* lane path: outputs per block (0: one output at a time) */
  int64_t blocks_per_row; /* lane path: blocks along the innermost kept dim */
  int64_t units;          /* outputs, or blocks on the lane path */
  int one_run;            /* each output's reduction is one run (one reduced dim, one chunk) */
  reduce_value *partials; /* units * chunks (* lane_width), on the (unit, chunk) path */
} reduce_cpu_context;

/* The reduced elements [begin, end) of output(s) starting at input pointer base, in runs
 * along the innermost reduced dim. One output (w = 0): the result. Lanes (w outputs): into
 * out[w], with lanes as the scratch cascade (on the caller's stack: nothing is allocated). */
static reduce_value reduce_range(const reduce_cpu_context *c, const char *base, int64_t begin,
                                 int64_t end, int64_t w, reduce_value *out, reduce_lane_combiner *lanes) {
  const reduce_layout *l = c->layout;
  int64_t index[DLOP_MAX_NDIM], rest = begin, remaining = end - begin;
  int32_t last = l->reduced_ndim - 1, d;
  const char *p = base;
  int64_t inner_stride = l->reduced_strides[last];
  reduce_combiner acc;
  union {
    float f[REDUCE_CPU_CASCADE_MAX_LANES];
    double d[REDUCE_CPU_CASCADE_MAX_LANES / 2];
  } run_values;
  reduce_value result = {.i = 0};
  for (d = last; d >= 0; d--) {
    index[d] = rest % l->reduced_shape[d];
    rest /= l->reduced_shape[d];
    p += index[d] * l->reduced_strides[d] * (int64_t)c->in_size;
  }
  /* one run, one push: the cascade's result is the run's (a sum plus 0.0, as finish adds) */
  if (index[last] + remaining <= l->reduced_shape[last]) {
    if (w == 0) {
      result = c->run(p, inner_stride, remaining);
      if (c->run_kind == RUN_SUM && c->cls == ACC_FLOAT) result.f = result.f + 0.0f;
      if (c->run_kind == RUN_SUM && c->cls == ACC_DOUBLE) result.d = result.d + 0.0;
      return result;
    }
    c->lanes(p, inner_stride, remaining, w, &run_values);
    for (int64_t j = 0; j < w; j++) {
      if (c->cls == ACC_FLOAT) out[j].f = c->run_kind == RUN_SUM ? run_values.f[j] + 0.0f : run_values.f[j];
      else if (c->cls == ACC_DOUBLE) out[j].d = c->run_kind == RUN_SUM ? run_values.d[j] + 0.0 : run_values.d[j];
      else out[j].i = ((const int64_t *)(const void *)&run_values)[j];
    }
    return result;
  }
  if (w == 0) {
    reduce_combiner_init(&acc, c->cls, c->run_kind);
  } else {
    reduce_lane_combiner_init(lanes, c->cls, c->run_kind, w);
  }
  while (remaining > 0) {
    int64_t n = l->reduced_shape[last] - index[last];
    if (n > remaining) n = remaining;
    if (w == 0) {
      reduce_combiner_push(&acc, c->run(p, inner_stride, n));
    } else {
      c->lanes(p, inner_stride, n, w, &run_values);
      reduce_lane_combiner_push(lanes, &run_values);
    }
    remaining -= n;
    index[last] += n;
    p += n * inner_stride * (int64_t)c->in_size;
    for (d = last; d > 0 && index[d] == l->reduced_shape[d]; d--) {
      index[d] = 0;
      index[d - 1]++;
      p += (l->reduced_strides[d - 1] - l->reduced_shape[d] * l->reduced_strides[d]) *
           (int64_t)c->in_size;
    }
  }
  if (w == 0) return reduce_combiner_finish(&acc);
  reduce_lane_combiner_finish(lanes, out);
  return result;
}

/* Input and output pointers of output element m. */
static void output_position(const reduce_cpu_context *c, int64_t m, const char **in, char **out) {
  const reduce_layout *l = c->layout;
  int64_t in_offset = 0, out_offset = 0;
  for (int32_t d = l->kept_ndim - 1; d >= 0; d--) {
    int64_t i = m % l->kept_shape[d];
    m /= l->kept_shape[d];
    in_offset += i * l->kept_in_strides[d];
    out_offset += i * l->kept_out_strides[d];
  }
  *in = c->input + in_offset * (int64_t)c->in_size;
  *out = c->output + out_offset * (int64_t)c->out_size;
}

/* Writes a finished accumulator (mean: divided by the count in the accumulator type). */
static inline __attribute__((always_inline)) void store(const reduce_cpu_context *c, reduce_value v, char *out) {
  int64_t count = c->layout->count;
  if (c->kind == REDUCE_MEAN) {
    if (c->cls == ACC_FLOAT) v.f = count > 0 ? v.f / (float)count : (float)NAN;
    else v.d = count > 0 ? v.d / (double)count : NAN;
  }
  switch (c->out_dtype) {
    case DLOP_FLOAT16: *(uint16_t *)out = dlop_float_to_half(v.f); break;
    case DLOP_BFLOAT16: *(uint16_t *)out = dlop_float_to_bfloat16(v.f); break;
    case DLOP_FLOAT32: *(float *)out = v.f; break;
    case DLOP_FLOAT64: *(double *)out = v.d; break;
    case DLOP_INT8: *(int8_t *)out = (int8_t)v.i; break;
    case DLOP_INT16: *(int16_t *)out = (int16_t)v.i; break;
    case DLOP_INT32: *(int32_t *)out = (int32_t)v.i; break;
    case DLOP_INT64: *(int64_t *)out = v.i; break;
    case DLOP_UINT8: *(uint8_t *)out = (uint8_t)v.i; break;
    default: break;
  }
}

/* The reduced elements of chunk k: [first, last). */
static void chunk_bounds(const reduce_cpu_context *c, int64_t k, int64_t *first, int64_t *last) {
  const int64_t count = c->layout->count;
  *first = k * REDUCE_CPU_CHUNK;
  *last = *first + REDUCE_CPU_CHUNK < count ? *first + REDUCE_CPU_CHUNK : count;
}

/* w lane results as the w typed values a lane cascade takes. */
static void lanes_pack(acc_class cls, const reduce_value *v, int64_t w, void *typed) {
  for (int64_t j = 0; j < w; j++) {
    if (cls == ACC_FLOAT) ((float *)typed)[j] = v[j].f;
    else if (cls == ACC_DOUBLE) ((double *)typed)[j] = v[j].d;
    else ((int64_t *)typed)[j] = v[j].i;
  }
}

/* A unit of work: one output (w = 0), or the block of w outputs starting at output m. */
typedef struct reduce_unit {
  const char *in;
  char *out;
  int64_t w;
} reduce_unit;

static reduce_unit unit_at(const reduce_cpu_context *c, int64_t u) {
  reduce_unit unit = {NULL, NULL, 0};
  int64_t m = u;
  if (c->lane_width > 0) {
    const int64_t inner = c->layout->kept_shape[c->layout->kept_ndim - 1];
    int64_t row = u / c->blocks_per_row, first = (u % c->blocks_per_row) * c->lane_width;
    m = row * inner + first;
    unit.w = inner - first < c->lane_width ? inner - first : c->lane_width;
  }
  output_position(c, m, &unit.in, &unit.out);
  return unit;
}

/* Writes the finished result(s) of a unit. */
static void store_unit(const reduce_cpu_context *c, const reduce_unit *unit, const reduce_value *v) {
  const int64_t out_step =
      c->layout->kept_out_strides[c->layout->kept_ndim - 1] * (int64_t)c->out_size;
  if (unit->w == 0) {
    store(c, v[0], unit->out);
    return;
  }
  for (int64_t j = 0; j < unit->w; j++) store(c, v[j], unit->out + j * out_step);
}

/* The lane block of a reduction that is one run per output (one reduced dim, at most a
 * chunk long): the run is the result (a sum plus 0.0, as a cascade's finish adds), stored. */
static void lanes_one_run(const reduce_cpu_context *c, const reduce_unit *unit) {
  const reduce_layout *l = c->layout;
  const int64_t out_step = l->kept_out_strides[l->kept_ndim - 1] * (int64_t)c->out_size;
  union {
    float f[REDUCE_CPU_MAX_LANES];
    double d[REDUCE_CPU_MAX_LANES / 2];
    int64_t i[REDUCE_CPU_MAX_LANES / 2];
  } values;
  c->lanes(unit->in, l->reduced_strides[0], l->count, unit->w, &values);
  if (out_step == (int64_t)c->out_size && c->kind != REDUCE_MEAN) { /* the usual: no conversion */
    if (c->out_dtype == DLOP_FLOAT32) {
      float *out = (float *)(void *)unit->out;
      for (int64_t j = 0; j < unit->w; j++)
        out[j] = c->run_kind == RUN_SUM ? values.f[j] + 0.0f : values.f[j];
      return;
    }
    if (c->out_dtype == DLOP_FLOAT64) {
      double *out = (double *)(void *)unit->out;
      for (int64_t j = 0; j < unit->w; j++)
        out[j] = c->run_kind == RUN_SUM ? values.d[j] + 0.0 : values.d[j];
      return;
    }
  }
  for (int64_t j = 0; j < unit->w; j++) {
    reduce_value v;
    if (c->cls == ACC_FLOAT) v.f = c->run_kind == RUN_SUM ? values.f[j] + 0.0f : values.f[j];
    else if (c->cls == ACC_DOUBLE) v.d = c->run_kind == RUN_SUM ? values.d[j] + 0.0 : values.d[j];
    else v.i = values.i[j];
    store(c, v, unit->out + j * out_step);
  }
}

/* Any other lane block: its chunks in order, each a range, combined by the cascade. Not
 * inlined: its cascades are 33 KiB of stack, which the one-run path does not need. */
__attribute__((noinline)) static void lanes_cascaded(const reduce_cpu_context *c,
                                                     const reduce_unit *unit,
                                                     reduce_value *result) {
  reduce_lane_combiner scratch, acc;
  reduce_value part[REDUCE_CPU_CASCADE_MAX_LANES];
  uint64_t typed[REDUCE_CPU_CASCADE_MAX_LANES / 2];
  if (c->chunks == 1) {
    reduce_range(c, unit->in, 0, c->layout->count, unit->w, result, &scratch);
    return;
  }
  reduce_lane_combiner_init(&acc, c->cls, c->run_kind, unit->w);
  for (int64_t k = 0; k < c->chunks; k++) {
    int64_t first, last;
    chunk_bounds(c, k, &first, &last);
    reduce_range(c, unit->in, first, last, unit->w, part, &scratch);
    lanes_pack(c->cls, part, unit->w, typed);
    reduce_lane_combiner_push(&acc, typed);
  }
  reduce_lane_combiner_finish(&acc, result);
}

/* A unit's result(s): its chunks in order, each a range, combined by the cascade. */
static void reduce_unit_all(const reduce_cpu_context *c, const reduce_unit *unit,
                            reduce_value *result) {
  const int64_t count = c->layout->count;
  if (count <= 0) { /* an empty sum (mean: NaN, which store makes of it) */
    for (int64_t j = 0; j < (unit->w ? unit->w : 1); j++) result[j].i = 0;
    return;
  }
  if (unit->w > 0) { /* (lanes_one_run stores its results itself) */
    lanes_cascaded(c, unit, result);
    return;
  }
  if (c->chunks == 1) {
    result[0] = reduce_range(c, unit->in, 0, count, 0, NULL, NULL);
    return;
  }
  reduce_combiner acc;
  reduce_combiner_init(&acc, c->cls, c->run_kind);
  for (int64_t k = 0; k < c->chunks; k++) {
    int64_t first, last;
    chunk_bounds(c, k, &first, &last);
    reduce_combiner_push(&acc, reduce_range(c, unit->in, first, last, 0, NULL, NULL));
  }
  result[0] = reduce_combiner_finish(&acc);
}

/* Outputs [begin, end) one at a time, walked with a cursor over the kept dims (a division per
 * output would cost as much as reducing a short row). */
static void outputs_body(const reduce_cpu_context *c, int64_t begin, int64_t end) {
  const reduce_layout *l = c->layout;
  const int32_t last = l->kept_ndim - 1;
  const int64_t in_size = (int64_t)c->in_size, out_size = (int64_t)c->out_size;
  int64_t index[DLOP_MAX_NDIM], m = begin;
  reduce_unit unit = {NULL, NULL, 0};
  for (int32_t d = last; d >= 0; d--) {
    index[d] = m % l->kept_shape[d];
    m /= l->kept_shape[d];
  }
  output_position(c, begin, &unit.in, &unit.out);
  for (int64_t u = begin; u < end; u++) {
    reduce_value v;
    if (c->one_run) { /* the run is the result (a sum plus 0.0, as a cascade's finish adds) */
      v = c->run(unit.in, l->reduced_strides[0], l->count);
      if (c->run_kind == RUN_SUM && c->cls == ACC_FLOAT) v.f = v.f + 0.0f;
      if (c->run_kind == RUN_SUM && c->cls == ACC_DOUBLE) v.d = v.d + 0.0;
    } else {
      reduce_unit_all(c, &unit, &v);
    }
    store(c, v, unit.out);
    unit.in += l->kept_in_strides[last] * in_size;
    unit.out += l->kept_out_strides[last] * out_size;
    index[last]++;
    for (int32_t d = last; d > 0 && index[d] == l->kept_shape[d]; d--) {
      index[d] = 0;
      index[d - 1]++;
      unit.in += (l->kept_in_strides[d - 1] - l->kept_shape[d] * l->kept_in_strides[d]) * in_size;
      unit.out += (l->kept_out_strides[d - 1] - l->kept_shape[d] * l->kept_out_strides[d]) * out_size;
    }
  }
}

static void units_body(void *context, int64_t begin, int64_t end) {
  const reduce_cpu_context *c = (const reduce_cpu_context *)context;
  reduce_value result[REDUCE_CPU_CASCADE_MAX_LANES];
  if (c->lane_width == 0) {
    outputs_body(c, begin, end);
    return;
  }
  for (int64_t u = begin; u < end; u++) {
    reduce_unit unit = unit_at(c, u);
    if (c->one_run) {
      lanes_one_run(c, &unit);
      continue;
    }
    reduce_unit_all(c, &unit, result);
    store_unit(c, &unit, result);
  }
}

/* (unit, chunk) items: item j is chunk j % chunks of unit j / chunks; its result(s) go to
 * partials[j * lanes], lanes being the block width (1 for single outputs). */
static void chunks_body(void *context, int64_t begin, int64_t end) {
  const reduce_cpu_context *c = (const reduce_cpu_context *)context;
  const int64_t lanes = c->lane_width > 0 ? c->lane_width : 1;
  reduce_lane_combiner scratch;
  for (int64_t j = begin; j < end; j++) {
    int64_t first, last;
    reduce_unit unit = unit_at(c, j / c->chunks);
    chunk_bounds(c, j % c->chunks, &first, &last);
    if (unit.w == 0)
      c->partials[j] = reduce_range(c, unit.in, first, last, 0, NULL, NULL);
    else
      reduce_range(c, unit.in, first, last, unit.w, &c->partials[j * lanes], &scratch);
  }
}

/* Combines the chunks' partials of every unit, in chunk order, exactly as reduce_unit_all. */
static void finish_chunks(const reduce_cpu_context *c) {
  const int64_t lanes = c->lane_width > 0 ? c->lane_width : 1;
  for (int64_t u = 0; u < c->units; u++) {
    reduce_unit unit = unit_at(c, u);
    reduce_value result[REDUCE_CPU_CASCADE_MAX_LANES];
    if (unit.w == 0) {
      reduce_combiner acc;
      reduce_combiner_init(&acc, c->cls, c->run_kind);
      for (int64_t k = 0; k < c->chunks; k++) reduce_combiner_push(&acc, c->partials[u * c->chunks + k]);
      result[0] = reduce_combiner_finish(&acc);
    } else {
      reduce_lane_combiner acc;
      uint64_t typed[REDUCE_CPU_CASCADE_MAX_LANES / 2];
      reduce_lane_combiner_init(&acc, c->cls, c->run_kind, unit.w);
      for (int64_t k = 0; k < c->chunks; k++) {
        lanes_pack(c->cls, &c->partials[(u * c->chunks + k) * lanes], unit.w, typed);
        reduce_lane_combiner_push(&acc, typed);
      }
      reduce_lane_combiner_finish(&acc, result);
    }
    store_unit(c, &unit, result);
  }
}

/* The lane path serves outputs that lie side by side in the input (unit stride along the
 * innermost kept dim, at least REDUCE_CPU_MIN_LANES of them) while the reduction steps over
 * other dims: sums and extremes over a leading or middle axis. */
static int64_t lane_width_for(const reduce_layout *l, acc_class cls, int one_run) {
  const int32_t last = l->kept_ndim - 1;
  if (l->kept_in_strides[last] != 1 || l->kept_shape[last] < REDUCE_CPU_MIN_LANES) return 0;
  if (l->reduced_strides[l->reduced_ndim - 1] == 1 || l->count <= 0) return 0;
  int64_t bytes = !one_run ? REDUCE_CPU_CASCADE_LANE_BYTES
                  : l->count <= REDUCE_CPU_WIDE_ROWS ? REDUCE_CPU_LANE_BYTES
                                                     : REDUCE_CPU_LONG_LANE_BYTES;
  return bytes / (cls == ACC_FLOAT ? 4 : 8);
}

int reduce_cpu_run(const reduce_op_info *info, dlop_dtype dtype, const reduce_layout *layout,
                   const void *input, void *output, char *error, size_t error_size) {
  const dlop_host_api *host = reduce_host();
  reduce_run_fn runs[3];
  reduce_lanes_fn lanes[3];
  reduce_cpu_context c;
  int status = DLOP_OK;
  int32_t threads = DLOP_HOST_HAS(host, cpu_threads) ? host->cpu_threads() : 1;
  int64_t per_unit, work, count = layout->count > 0 ? layout->count : 1;
  memset(&c, 0, sizeof c);
  if (!reduce_cpu_runs_for(dtype, runs, lanes, &c.cls)) {
    dlop_set_error(error, error_size, "%s: no CPU kernel for dtype %s", info->name,
                   dlop_dtype_name(dtype));
    return DLOP_UNSUPPORTED;
  }
  c.layout = layout;
  c.kind = info->kind;
  c.run_kind = info->kind == REDUCE_MAX ? RUN_MAX : info->kind == REDUCE_MIN ? RUN_MIN : RUN_SUM;
  c.run = runs[c.run_kind];
  c.lanes = lanes[c.run_kind];
  c.out_dtype = reduce_output_dtype(info->kind, dtype);
  c.in_size = dlop_dtype_size(dtype);
  c.out_size = dlop_dtype_size(c.out_dtype);
  c.input = (const char *)input;
  c.output = (char *)output;
  /* rounded up without count + REDUCE_CPU_CHUNK - 1, which a zero-stride view of 2^63-1
   * elements would take past int64 */
  c.chunks = layout->count > 0
                 ? layout->count / REDUCE_CPU_CHUNK + (layout->count % REDUCE_CPU_CHUNK != 0)
                 : 1;
  if (layout->outputs <= 0) return DLOP_OK;
  c.one_run = layout->reduced_ndim == 1 && layout->count > 0 && layout->count <= REDUCE_CPU_CHUNK;
  c.lane_width = lane_width_for(layout, c.cls, c.one_run);
  if (c.lane_width > 0) {
    const int64_t inner = layout->kept_shape[layout->kept_ndim - 1];
    c.blocks_per_row = (inner + c.lane_width - 1) / c.lane_width;
    c.units = layout->outputs / inner * c.blocks_per_row;
    /* the work sizes below saturate: a zero-stride view may count 2^63-1 elements */
    if (dlop_mul_overflow(count, c.lane_width, &per_unit)) per_unit = INT64_MAX;
  } else {
    c.units = layout->outputs;
    per_unit = count;
  }
  if (dlop_mul_overflow(c.units, per_unit, &work)) work = INT64_MAX;
  /* Few units and long reductions: split the reductions too. The partials are combined in
   * chunk order, exactly as reduce_unit_all does, so both paths give the same bits. */
  if (threads > 1 && c.chunks > 1 && c.units < 4 * (int64_t)threads &&
      DLOP_HOST_HAS(host, parallel_for)) {
    int64_t items = c.units * c.chunks, lanes_per_item = c.lane_width > 0 ? c.lane_width : 1;
    int64_t values = 0; /* fewer than 4 * threads units: no overflow of items */
    if (!dlop_mul_overflow(items, lanes_per_item, &values) &&
        values <= (int64_t)(SIZE_MAX / sizeof(reduce_value)))
      c.partials = (reduce_value *)malloc(sizeof(reduce_value) * (size_t)values);
    if (c.partials == NULL) {
      dlop_set_error(error, error_size, "%s: out of memory for %lld x %lld partial results",
                     info->name, (long long)items, (long long)lanes_per_item);
      return DLOP_OUT_OF_MEMORY;
    }
    status = host->parallel_for(items, 1, chunks_body, &c);
    if (status == DLOP_OK) finish_chunks(&c);
    free(c.partials);
  } else if (threads > 1 && DLOP_HOST_HAS(host, parallel_for) && work > REDUCE_CPU_CHUNK) {
    int64_t grain = REDUCE_CPU_CHUNK / per_unit;
    if (grain < REDUCE_CPU_OUTPUT_GRAIN && c.lane_width == 0) grain = REDUCE_CPU_OUTPUT_GRAIN;
    if (grain < 1) grain = 1;
    status = host->parallel_for(c.units, grain, units_body, &c);
  } else {
    units_body(&c, 0, c.units);
  }
  if (status != DLOP_OK)
    dlop_set_error(error, error_size, "%s: the host's parallel_for failed with status %d",
                   info->name, status);
  return status;
}
