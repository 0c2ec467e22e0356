/* reduce_cpu.c — the CPU kernel of sum, mean, max and min over a reduce_layout: runs along the
 * innermost reduced dim (pairwise summation for floats), combined in a fixed binary cascade
 * over runs and over fixed chunks of the reduction, so the bits never depend on the thread
 * count; parallel over outputs, or over (output, chunk) pairs when there are few outputs. */
#include <math.h>
#include <stdlib.h>

#include "reduce_plugin.h"

/* Reduced elements per chunk: the unit of work when few outputs share the threads, and a
 * fixed level of the summation tree whichever path runs. */
#define REDUCE_CPU_CHUNK ((int64_t)1 << 15)
/* Outputs per parallel_for grain when splitting over outputs: each output is at least a run. */
#define REDUCE_CPU_OUTPUT_GRAIN 16

typedef union reduce_value {
  float f;
  double d;
  int64_t i;
} reduce_value;

typedef enum acc_class { ACC_FLOAT, ACC_DOUBLE, ACC_INT } acc_class;
enum { RUN_SUM = 0, RUN_MAX = 1, RUN_MIN = 2 };

typedef reduce_value (*reduce_run_fn)(const char *p, int64_t stride, int64_t n);

/* ---- runs along one dim, per dtype ---------------------------------------------------- */

#define LOAD_PLAIN(v) (v)
#define LOAD_HALF(v) dlop_half_to_float(v)
#define LOAD_BF16(v) dlop_bfloat16_to_float(v)

/* Pairwise summation (as NumPy): 8 accumulators below 128 elements, halves above; error
 * O(log n) ulps. A contiguous copy lets gcc vectorize the 8 accumulators as one register. */
#define PAIRWISE(fname, T, A, LOAD, STRIDE)                                                  \
  static A fname(const T *x, int64_t s, int64_t n) {                                       \
    (void)s;                                                                               \
    if (n < 8) {                                                                           \
      A r = (A)0;                                                                          \
      for (int64_t i = 0; i < n; i++) r += LOAD(x[i * STRIDE]);                            \
      return r;                                                                            \
    }                                                                                      \
    if (n <= 128) {                                                                        \
      A a[8];                                                                              \
      int64_t i;                                                                           \
      for (int k = 0; k < 8; k++) a[k] = LOAD(x[k * STRIDE]);                              \
      for (i = 8; i + 8 <= n; i += 8)                                                      \
        for (int k = 0; k < 8; k++) a[k] += LOAD(x[(i + k) * STRIDE]);                     \
      A r = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));             \
      for (; i < n; i++) r += LOAD(x[i * STRIDE]);                                         \
      return r;                                                                            \
    }                                                                                      \
    int64_t half = n / 2;                                                                  \
    half -= half % 8;                                                                      \
    return fname(x, s, half) + fname(x + half * STRIDE, s, n - half);                      \
  }

#define FLOAT_RUNS(name, T, A, FIELD, LOAD)                                                 \
  PAIRWISE(pairwise_unit_##name, T, A, LOAD, 1)                                            \
  PAIRWISE(pairwise_strided_##name, T, A, LOAD, s)                                         \
  static reduce_value sum_##name(const char *p, int64_t s, int64_t n) {                    \
    reduce_value v;                                                                        \
    v.FIELD = s == 1 ? pairwise_unit_##name((const T *)p, 1, n)                            \
                     : pairwise_strided_##name((const T *)p, s, n);                        \
    return v;                                                                              \
  }                                                                                        \
  /* NaN propagates: once r is NaN no comparison replaces it, and a NaN x replaces r. Of    \
   * equal values (-0.0, 0.0) the later wins, as in NumPy 2's float loops. */               \
  static reduce_value max_##name(const char *p, int64_t s, int64_t n) {                    \
    const T *x = (const T *)p;                                                             \
    A r = LOAD(x[0]);                                                                      \
    for (int64_t i = 1; i < n; i++) {                                                      \
      A v = LOAD(x[i * s]);                                                                \
      r = (v >= r || v != v) && r == r ? v : r;                                            \
    }                                                                                      \
    reduce_value out;                                                                      \
    out.FIELD = r;                                                                         \
    return out;                                                                            \
  }                                                                                        \
  static reduce_value min_##name(const char *p, int64_t s, int64_t n) {                    \
    const T *x = (const T *)p;                                                             \
    A r = LOAD(x[0]);                                                                      \
    for (int64_t i = 1; i < n; i++) {                                                      \
      A v = LOAD(x[i * s]);                                                                \
      r = (v <= r || v != v) && r == r ? v : r;                                            \
    }                                                                                      \
    reduce_value out;                                                                      \
    out.FIELD = r;                                                                         \
    return out;                                                                            \
  }

/* integer sums wrap in 64 bits (unsigned arithmetic: no undefined overflow) */
#define INT_RUNS(name, T)                                                                   \
  static reduce_value sum_##name(const char *p, int64_t s, int64_t n) {                    \
    const T *x = (const T *)p;                                                             \
    uint64_t r = 0;                                                                        \
    if (s == 1)                                                                            \
      for (int64_t i = 0; i < n; i++) r += (uint64_t)(int64_t)x[i];                        \
    else                                                                                   \
      for (int64_t i = 0; i < n; i++) r += (uint64_t)(int64_t)x[i * s];                    \
    reduce_value v;                                                                        \
    v.i = (int64_t)r;                                                                      \
    return v;                                                                              \
  }                                                                                        \
  static reduce_value max_##name(const char *p, int64_t s, int64_t n) {                    \
    const T *x = (const T *)p;                                                             \
    T r = x[0];                                                                            \
    for (int64_t i = 1; i < n; i++) r = x[i * s] > r ? x[i * s] : r;                       \
    reduce_value v;                                                                        \
    v.i = (int64_t)r;                                                                      \
    return v;                                                                              \
  }                                                                                        \
  static reduce_value min_##name(const char *p, int64_t s, int64_t n) {                    \
    const T *x = (const T *)p;                                                             \
    T r = x[0];                                                                            \
    for (int64_t i = 1; i < n; i++) r = x[i * s] < r ? x[i * s] : r;                       \
    reduce_value v;                                                                        \
    v.i = (int64_t)r;                                                                      \
    return v;                                                                              \
  }

FLOAT_RUNS(float16, uint16_t, float, f, LOAD_HALF)
FLOAT_RUNS(bfloat16, uint16_t, float, f, LOAD_BF16)
FLOAT_RUNS(float32, float, float, f, LOAD_PLAIN)
FLOAT_RUNS(float64, double, double, d, LOAD_PLAIN)
INT_RUNS(int8, int8_t)
INT_RUNS(int16, int16_t)
INT_RUNS(int32, int32_t)
INT_RUNS(int64, int64_t)
INT_RUNS(uint8, uint8_t)

static int runs_for(dlop_dtype dtype, reduce_run_fn runs[3], acc_class *cls) {
#define RUNS_CASE(DT, name, CLS)                                                            \
  case DT:                                                                                 \
    runs[RUN_SUM] = sum_##name;                                                            \
    runs[RUN_MAX] = max_##name;                                                            \
    runs[RUN_MIN] = min_##name;                                                            \
    *cls = CLS;                                                                            \
    return 1;
  switch (dtype) {
    RUNS_CASE(DLOP_FLOAT16, float16, ACC_FLOAT)
    RUNS_CASE(DLOP_BFLOAT16, bfloat16, ACC_FLOAT)
    RUNS_CASE(DLOP_FLOAT32, float32, ACC_FLOAT)
    RUNS_CASE(DLOP_FLOAT64, float64, ACC_DOUBLE)
    RUNS_CASE(DLOP_INT8, int8, ACC_INT)
    RUNS_CASE(DLOP_INT16, int16, ACC_INT)
    RUNS_CASE(DLOP_INT32, int32, ACC_INT)
    RUNS_CASE(DLOP_INT64, int64, ACC_INT)
    RUNS_CASE(DLOP_UINT8, uint8, ACC_INT)
    default: return 0;
  }
#undef RUNS_CASE
}

/* ---- combining partials in a fixed order ---------------------------------------------- */

/* Float sums: a binary cascade (partial k joins its pairwise tree like a binary counter), so
 * n partials cost O(log n) rounding steps and the tree depends only on n. */
typedef struct combiner {
  acc_class cls;
  int run; /* RUN_SUM, RUN_MAX, RUN_MIN */
  int has;
  reduce_value acc;
  uint64_t occupied;
  float fstack[64];
  double dstack[64];
} combiner;

static void combiner_init(combiner *c, acc_class cls, int run) {
  c->cls = cls;
  c->run = run;
  c->has = 0;
  c->acc.i = 0;
  c->occupied = 0;
}

static void combiner_push(combiner *c, reduce_value v) {
  if (c->run == RUN_SUM) {
    int level = 0;
    if (c->cls == ACC_INT) {
      c->acc.i = (int64_t)((uint64_t)c->acc.i + (uint64_t)v.i);
      return;
    }
    if (c->cls == ACC_FLOAT) {
      float x = v.f;
      while (c->occupied & (1ull << level)) {
        x = c->fstack[level] + x;
        c->occupied &= ~(1ull << level);
        level++;
      }
      c->fstack[level] = x;
    } else {
      double x = v.d;
      while (c->occupied & (1ull << level)) {
        x = c->dstack[level] + x;
        c->occupied &= ~(1ull << level);
        level++;
      }
      c->dstack[level] = x;
    }
    c->occupied |= 1ull << level;
    return;
  }
  if (!c->has) {
    c->acc = v;
    c->has = 1;
    return;
  }
  if (c->cls == ACC_INT) {
    if (c->run == RUN_MAX ? v.i > c->acc.i : v.i < c->acc.i) c->acc = v;
  } else if (c->cls == ACC_FLOAT) {
    /* Between equal values (-0.0, 0.0) the later one wins, as in NumPy 2's float loops. */
    float a = c->acc.f, x = v.f;
    if (a == a && (x != x || (c->run == RUN_MAX ? x >= a : x <= a))) c->acc = v;
  } else {
    double a = c->acc.d, x = v.d;
    if (a == a && (x != x || (c->run == RUN_MAX ? x >= a : x <= a))) c->acc = v;
  }
}

static reduce_value combiner_finish(const combiner *c) {
  reduce_value r = c->acc;
  if (c->run != RUN_SUM || c->cls == ACC_INT) return r;
  if (c->cls == ACC_FLOAT) {
    float s = 0.0f;
    for (int level = 0; level < 64; level++)
      if (c->occupied & (1ull << level)) s = c->fstack[level] + s;
    r.f = s;
  } else {
    double s = 0.0;
    for (int level = 0; level < 64; level++)
      if (c->occupied & (1ull << level)) s = c->dstack[level] + s;
    r.d = s;
  }
  return r;
}

/* ---- the reduction -------------------------------------------------------------------- */

typedef struct reduce_cpu_context {
  const reduce_layout *layout;
  reduce_run_fn run;
  acc_class cls;
  int run_kind;
  reduce_kind kind;
  dlop_dtype out_dtype;
  size_t in_size, out_size;
  const char *input;
  char *output;
  int64_t chunks;           /* chunks per output */
  reduce_value *partials;   /* outputs * chunks, on the (output, chunk) path */
} reduce_cpu_context;

/* Reduces elements [begin, end) of the reduction starting at input pointer base: runs along
 * the innermost reduced dim pushed into one combiner. */
static reduce_value reduce_range(const reduce_cpu_context *c, const char *base, int64_t begin,
                                 int64_t end) {
  const reduce_layout *l = c->layout;
  int64_t index[DLOP_MAX_NDIM], rest = begin, remaining = end - begin;
  int32_t last = l->reduced_ndim - 1, d;
  const char *p = base;
  int64_t inner_stride = l->reduced_strides[last];
  combiner acc;
  combiner_init(&acc, c->cls, c->run_kind);
  for (d = last; d >= 0; d--) {
    index[d] = rest % l->reduced_shape[d];
    rest /= l->reduced_shape[d];
    p += index[d] * l->reduced_strides[d] * (int64_t)c->in_size;
  }
  while (remaining > 0) {
    int64_t n = l->reduced_shape[last] - index[last];
    if (n > remaining) n = remaining;
    combiner_push(&acc, c->run(p, inner_stride, n));
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
  return combiner_finish(&acc);
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
static void store(const reduce_cpu_context *c, reduce_value v, char *out) {
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

/* One output: its chunks in order, each a range, combined by the cascade. */
static reduce_value reduce_output(const reduce_cpu_context *c, const char *in) {
  const int64_t count = c->layout->count;
  combiner acc;
  if (c->chunks == 1) return reduce_range(c, in, 0, count);
  combiner_init(&acc, c->cls, c->run_kind);
  for (int64_t k = 0; k < c->chunks; k++) {
    int64_t begin = k * REDUCE_CPU_CHUNK;
    int64_t end = begin + REDUCE_CPU_CHUNK < count ? begin + REDUCE_CPU_CHUNK : count;
    combiner_push(&acc, reduce_range(c, in, begin, end));
  }
  return combiner_finish(&acc);
}

static void outputs_body(void *context, int64_t begin, int64_t end) {
  const reduce_cpu_context *c = (const reduce_cpu_context *)context;
  for (int64_t m = begin; m < end; m++) {
    const char *in;
    char *out;
    output_position(c, m, &in, &out);
    store(c, c->layout->count > 0 ? reduce_output(c, in) : (reduce_value){.i = 0}, out);
  }
}

/* (output, chunk) items: item j is chunk j % chunks of output j / chunks. */
static void chunks_body(void *context, int64_t begin, int64_t end) {
  const reduce_cpu_context *c = (const reduce_cpu_context *)context;
  const int64_t count = c->layout->count;
  for (int64_t j = begin; j < end; j++) {
    int64_t m = j / c->chunks, k = j % c->chunks;
    int64_t first = k * REDUCE_CPU_CHUNK;
    int64_t last = first + REDUCE_CPU_CHUNK < count ? first + REDUCE_CPU_CHUNK : count;
    const char *in;
    char *out;
    output_position(c, m, &in, &out);
    c->partials[j] = reduce_range(c, in, first, last);
  }
}

int reduce_cpu_run(const reduce_op_info *info, dlop_dtype dtype, const reduce_layout *layout,
                   const void *input, void *output, char *error, size_t error_size) {
  const dlop_host_api *host = reduce_host();
  reduce_run_fn runs[3];
  reduce_cpu_context c;
  int status = DLOP_OK;
  int32_t threads = DLOP_HOST_HAS(host, cpu_threads) ? host->cpu_threads() : 1;
  memset(&c, 0, sizeof c);
  if (!runs_for(dtype, runs, &c.cls)) {
    dlop_set_error(error, error_size, "%s: no CPU kernel for dtype %s", info->name,
                   dlop_dtype_name(dtype));
    return DLOP_UNSUPPORTED;
  }
  c.layout = layout;
  c.kind = info->kind;
  c.run_kind = info->kind == REDUCE_MAX ? RUN_MAX : info->kind == REDUCE_MIN ? RUN_MIN : RUN_SUM;
  c.run = runs[c.run_kind];
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
  /* Few outputs and long reductions: split the reductions too. The partials are combined in
   * chunk order, exactly as reduce_output does, so both paths give the same bits. */
  if (threads > 1 && c.chunks > 1 && layout->outputs < 4 * (int64_t)threads &&
      DLOP_HOST_HAS(host, parallel_for)) {
    int64_t items = layout->outputs * c.chunks;
    c.partials = (reduce_value *)malloc(sizeof(reduce_value) * (size_t)items);
    if (c.partials == NULL) {
      dlop_set_error(error, error_size, "%s: out of memory for %lld partial results", info->name,
                     (long long)items);
      return DLOP_OUT_OF_MEMORY;
    }
    status = host->parallel_for(items, 1, chunks_body, &c);
    if (status == DLOP_OK) {
      for (int64_t m = 0; m < layout->outputs; m++) {
        combiner acc;
        const char *in;
        char *out;
        combiner_init(&acc, c.cls, c.run_kind);
        for (int64_t k = 0; k < c.chunks; k++) combiner_push(&acc, c.partials[m * c.chunks + k]);
        output_position(&c, m, &in, &out);
        store(&c, combiner_finish(&acc), out);
      }
    }
    free(c.partials);
  } else if (threads > 1 && DLOP_HOST_HAS(host, parallel_for) &&
             layout->outputs * (layout->count > 0 ? layout->count : 1) > REDUCE_CPU_CHUNK) {
    int64_t grain = REDUCE_CPU_CHUNK / (layout->count > 0 ? layout->count : 1);
    if (grain < REDUCE_CPU_OUTPUT_GRAIN) grain = REDUCE_CPU_OUTPUT_GRAIN;
    status = host->parallel_for(layout->outputs, grain, outputs_body, &c);
  } else {
    outputs_body(&c, 0, layout->outputs);
  }
  if (status != DLOP_OK)
    dlop_set_error(error, error_size, "%s: the host's parallel_for failed with status %d",
                   info->name, status);
  return status;
}
