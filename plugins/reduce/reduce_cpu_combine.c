/* reduce_cpu_combine.c — the fixed-order cascades of the reduce plugin's CPU kernel: partial
 * results of runs and chunks combined so that the bits depend only on their number, for one
 * output and for the w lanes of a block. */
#include <string.h>

#include "reduce_cpu.h"

void reduce_combiner_init(reduce_combiner *c, acc_class cls, int run) {
  c->cls = cls;
  c->run = run;
  c->has = 0;
  c->acc.i = 0;
  c->occupied = 0;
}

void reduce_combiner_push(reduce_combiner *c, reduce_value v) {
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

reduce_value reduce_combiner_finish(const reduce_combiner *c) {
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

void reduce_lane_combiner_init(reduce_lane_combiner *c, acc_class cls, int run, int64_t w) {
  c->cls = cls;
  c->run = run;
  c->has = 0;
  c->w = w;
  c->occupied = 0;
  memset(&c->acc, 0, sizeof c->acc);
}

/* v: w values, overwritten (it carries the sum up the cascade) */
void reduce_lane_combiner_push(reduce_lane_combiner *c, void *values) {
  const int64_t w = c->w;
  if (c->run == RUN_SUM && c->cls == ACC_INT) {
    const int64_t *v = (const int64_t *)values;
    for (int64_t j = 0; j < w; j++) c->acc.i[j] = (int64_t)((uint64_t)c->acc.i[j] + (uint64_t)v[j]);
    return;
  }
  if (c->run == RUN_SUM) {
    int level = 0;
    while (c->occupied & (1ull << level)) {
      if (c->cls == ACC_FLOAT) {
        float *x = (float *)values;
        for (int64_t j = 0; j < w; j++) x[j] = c->levels[level].f[j] + x[j];
      } else {
        double *x = (double *)values;
        for (int64_t j = 0; j < w; j++) x[j] = c->levels[level].d[j] + x[j];
      }
      c->occupied &= ~(1ull << level);
      level++;
    }
    memcpy(&c->levels[level], values, (size_t)w * (c->cls == ACC_FLOAT ? 4 : 8));
    c->occupied |= 1ull << level;
    return;
  }
  if (!c->has) {
    memcpy(&c->acc, values, (size_t)w * (c->cls == ACC_FLOAT ? 4 : 8));
    c->has = 1;
    return;
  }
  if (c->cls == ACC_INT) {
    const int64_t *v = (const int64_t *)values;
    for (int64_t j = 0; j < w; j++)
      if (c->run == RUN_MAX ? v[j] > c->acc.i[j] : v[j] < c->acc.i[j]) c->acc.i[j] = v[j];
  } else if (c->cls == ACC_FLOAT) {
    const float *v = (const float *)values;
    for (int64_t j = 0; j < w; j++) {
      float a = c->acc.f[j], x = v[j];
      if (a == a && (x != x || (c->run == RUN_MAX ? x >= a : x <= a))) c->acc.f[j] = x;
    }
  } else {
    const double *v = (const double *)values;
    for (int64_t j = 0; j < w; j++) {
      double a = c->acc.d[j], x = v[j];
      if (a == a && (x != x || (c->run == RUN_MAX ? x >= a : x <= a))) c->acc.d[j] = x;
    }
  }
}

/* Writes the w results as reduce_values. */
void reduce_lane_combiner_finish(const reduce_lane_combiner *c, reduce_value *out) {
  const int64_t w = c->w;
  for (int64_t j = 0; j < w; j++) {
    if (c->run != RUN_SUM || c->cls == ACC_INT) {
      if (c->cls == ACC_FLOAT) out[j].f = c->acc.f[j];
      else if (c->cls == ACC_DOUBLE) out[j].d = c->acc.d[j];
      else out[j].i = c->acc.i[j];
    } else if (c->cls == ACC_FLOAT) {
      float s = 0.0f;
      for (int level = 0; level < 64; level++)
        if (c->occupied & (1ull << level)) s = c->levels[level].f[j] + s;
      out[j].f = s;
    } else {
      double s = 0.0;
      for (int level = 0; level < 64; level++)
        if (c->occupied & (1ull << level)) s = c->levels[level].d[j] + s;
      out[j].d = s;
    }
  }
}

