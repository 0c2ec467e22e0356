/* reduce_cpu.h — what the files of the reduce plugin's CPU kernel share: an accumulator
 * value, the run functions of a dtype (reduce_cpu_runs.c: along one dim, for one output or a
 * block of adjacent ones), and the fixed-order cascades that combine runs and chunks
 * (reduce_cpu_combine.c). reduce_cpu.c drives them over a reduce_layout. */
#ifndef DLOP_REDUCE_CPU_H
#define DLOP_REDUCE_CPU_H

#include "reduce_plugin.h"

/* Reduced elements per chunk: the unit of work when few outputs share the threads, and a
 * fixed level of the summation tree whichever path runs. */
#define REDUCE_CPU_CHUNK ((int64_t)1 << 15)
/* Outputs per parallel_for grain when splitting over outputs: each output is at least a run. */
#define REDUCE_CPU_OUTPUT_GRAIN 16
/* Bytes of one row of a lane block: 512 floats or 256 doubles, so that each row read is half
 * a page in a row (narrower blocks ran up to 2x slower on reductions over a leading axis: the
 * hardware prefetcher needs the run) while the 8 rows of accumulators (16 KiB, on the stack)
 * leave half of a 32 KiB L1 cache to the input streaming through. Reductions of more than
 * 1024 rows that are still one run take 1 KiB rows (the pairwise recursion keeps a row per
 * level on the stack), and blocks whose outputs need a cascade (several runs or chunks) 256
 * bytes, so that their cascades (64 levels of a row each) stay small too. */
#define REDUCE_CPU_LANE_BYTES 2048
#define REDUCE_CPU_MAX_LANES (REDUCE_CPU_LANE_BYTES / 4)
#define REDUCE_CPU_WIDE_ROWS 1024
#define REDUCE_CPU_LONG_LANE_BYTES 1024
#define REDUCE_CPU_CASCADE_LANE_BYTES 256
#define REDUCE_CPU_CASCADE_MAX_LANES (REDUCE_CPU_CASCADE_LANE_BYTES / 4)
/* The lane path needs at least this many adjacent outputs; fewer go one at a time. */
#define REDUCE_CPU_MIN_LANES 4

typedef union reduce_value {
  float f;
  double d;
  int64_t i;
} reduce_value;

typedef enum acc_class { ACC_FLOAT, ACC_DOUBLE, ACC_INT } acc_class;
enum { RUN_SUM = 0, RUN_MAX = 1, RUN_MIN = 2 };

/* One output's run: n elements from p, stride s (in elements). */
typedef reduce_value (*reduce_run_fn)(const char *p, int64_t stride, int64_t n);
/* The runs of w adjacent outputs at once: row i of the block is the w elements at
 * p + i * stride (in elements); out gets w accumulators (float, double or int64). */
typedef void (*reduce_lanes_fn)(const char *p, int64_t stride, int64_t n, int64_t w, void *out);

/* The runs of dtype: runs[RUN_SUM, RUN_MAX, RUN_MIN] for one output, lanes[...] for a block,
 * and the accumulator class; 0 for a dtype without CPU kernels. */
int reduce_cpu_runs_for(dlop_dtype dtype, reduce_run_fn runs[3], reduce_lanes_fn lanes[3],
                        acc_class *cls);

/* ---- combining partials in a fixed order ---------------------------------------------- */

/* Float sums: a binary cascade (partial k joins its pairwise tree like a binary counter), so
 * n partials cost O(log n) rounding steps and the tree depends only on n. max and min: the
 * in-order rule of reduce_cpu_runs.c's FLOAT_EXTREME over the partials. The lane cascade does the same for each
 * of w lanes (levels[level][j]). */
typedef struct reduce_combiner {
  acc_class cls;
  int run; /* RUN_SUM, RUN_MAX, RUN_MIN */
  int has;
  reduce_value acc;
  uint64_t occupied;
  float fstack[64];
  double dstack[64];
} reduce_combiner;

void reduce_combiner_init(reduce_combiner *c, acc_class cls, int run);
void reduce_combiner_push(reduce_combiner *c, reduce_value v);
reduce_value reduce_combiner_finish(const reduce_combiner *c);

/* Lane values are w floats, doubles or int64s; a lane cascade holds up to 64 levels of them
 * (levels are as deep as log2 of the pushes: at most 63). */
typedef struct reduce_lane_combiner {
  acc_class cls;
  int run;
  int has;
  int64_t w;
  uint64_t occupied;
  union {
    float f[REDUCE_CPU_CASCADE_MAX_LANES];
    double d[REDUCE_CPU_CASCADE_MAX_LANES / 2];
    int64_t i[REDUCE_CPU_CASCADE_MAX_LANES / 2];
  } acc, levels[64];
} reduce_lane_combiner;

void reduce_lane_combiner_init(reduce_lane_combiner *c, acc_class cls, int run, int64_t w);
/* values: w typed values, overwritten (they carry the sum up the cascade) */
void reduce_lane_combiner_push(reduce_lane_combiner *c, void *values);
/* Writes the w results as reduce_values. */
void reduce_lane_combiner_finish(const reduce_lane_combiner *c, reduce_value *out);

#endif
