/* test_reduce_cuda_plan.c — the reduce plugin's CUDA kernel choice and work split
 * (plugins/reduce/reduce_cuda_plan.h), on the CPU: which kernel each axis case gets, and that
 * the columns kernel's split (strips, thread groups, parts) gives every (output, element) pair
 * to exactly one thread, keeps its partials inside the workspace and its tree well formed, for
 * first, middle, last and all axes, odd, tiny, empty, transposed, negative-stride and
 * broadcast layouts, with one output per thread and with packs of 2, 4 and 8; which layouts have
 * which packs, and that the plan takes wide packs (in more groups) only to save a second pass. The
 * kernels' arithmetic is checked on a GPU (tests/gpu/test_reduce_cuda.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

/* The plugin's layout code and plan, compiled into this test (the plugin exports neither). */
#include "../../plugins/reduce/reduce_cuda_plan.h"
#include "../../plugins/reduce/reduce_layout.c"

/* an H200: 132 SMs, and the elementwise kit's cap of 128 blocks per SM */
#define SMS 132u
#define MAX_BLOCKS (SMS * 128u)

typedef struct plan_case {
  int32_t ndim;
  int64_t shape[4];
  int64_t strides[4]; /* elements; all zero: C-contiguous */
  uint32_t mask;      /* reduced axes */
} plan_case;

static void layout_of(const plan_case *c, reduce_layout *l) {
  int64_t in_shape[4], in_strides[4], out_shape[4];
  int32_t d, o = 0;
  int given = 0;
  dlop_tensor in, out;
  memset(&in, 0, sizeof in);
  memset(&out, 0, sizeof out);
  for (d = 0; d < c->ndim; d++) given |= c->strides[d] != 0;
  for (d = 0; d < c->ndim; d++) {
    in_shape[d] = c->shape[d];
    in_strides[d] = c->strides[d];
    if (!(c->mask & (1u << d))) out_shape[o++] = c->shape[d];
  }
  in.ndim = c->ndim;
  in.shape = in_shape;
  in.strides = given ? in_strides : NULL;
  out.ndim = o;
  out.shape = out_shape;
  out.strides = NULL;
  char error[160] = "";
  ck_assert_int_eq(reduce_layout_init(l, &in, &out, c->mask, "sum", error, sizeof error), DLOP_OK);
}

/* Every (output, element) pair of a columns plan goes to exactly one thread of one block item;
 * the tree, the partials and the grid are within bounds. (Plain ifs in the loops: a Check
 * assertion that passes still reports to the parent process, far too slow per element.) */
static void check_columns_split(const reduce_layout *l, const reduce_cuda_plan *p,
                                int32_t element_bytes, const char *what) {
  const int64_t packs = l->outputs / p->pack;
  const int64_t tiles = (packs + p->tile_columns - 1) / p->tile_columns;
  const int64_t groups = REDUCE_CUDA_BLOCK / p->tile_columns;
  const int64_t count = l->count > 0 ? l->count : 1;
  unsigned char *seen = calloc((size_t)(l->outputs * count), 1);
  char problem[200] = "";
  ck_assert_ptr_nonnull(seen);
  ck_assert_msg(p->tile_columns >= 1 && p->tile_columns <= REDUCE_CUDA_BLOCK &&
                    (p->tile_columns & (p->tile_columns - 1)) == 0,
                "%s: tile_columns %d is not a power of two in [1, 256]", what, (int)p->tile_columns);
  ck_assert_msg(p->parts >= 1 && (p->parts == 1 || l->outputs * p->parts <= REDUCE_CUDA_MAX_COLUMN_PARTIALS),
                "%s: %lld parts of %lld outputs overflow the workspace", what, (long long)p->parts,
                (long long)l->outputs);
  ck_assert_msg(p->blocks >= 1 && p->blocks <= MAX_BLOCKS, "%s: %u blocks", what, p->blocks);
  ck_assert_msg(p->pack == 1 || (l->outputs % p->pack == 0 && reduce_cuda_columns_packs(l, p->pack) &&
                                  p->pack * element_bytes <= REDUCE_CUDA_COLUMNS_PACK_BYTES),
                "%s: pack %d of %lld outputs", what, (int)p->pack, (long long)l->outputs);
  for (int64_t item = 0; item < tiles * p->parts && !problem[0]; item++)
    for (int32_t t = 0; t < REDUCE_CUDA_BLOCK && !problem[0]; t++) {
      reduce_cuda_column_work w;
      reduce_cuda_column_work_of(l, p->parts, p->tile_columns, p->pack, item, t, &w);
      if (w.step != groups || w.group < 0 || w.group >= groups || w.column != t % p->tile_columns ||
          w.part < 0 || w.part >= p->parts || w.output < 0 || w.output % p->pack != 0) {
        snprintf(problem, sizeof problem, "item %lld thread %d: step %lld group %d column %d part %lld",
                 (long long)item, (int)t, (long long)w.step, (int)w.group, (int)w.column,
                 (long long)w.part);
        break;
      }
      if (w.output >= l->outputs) continue; /* a strip's spare column: combines identities */
      for (int64_t r = w.first; r < w.end && !problem[0]; r += w.step) {
        if (r < 0 || r >= l->count) {
          snprintf(problem, sizeof problem, "row %lld of %lld", (long long)r, (long long)l->count);
          break;
        }
        for (int32_t j = 0; j < p->pack; j++)
          if (seen[(w.output + j) * count + r]++ != 0) {
            snprintf(problem, sizeof problem, "output %lld element %lld summed twice (item %lld thread %d)",
                     (long long)(w.output + j), (long long)r, (long long)item, (int)t);
            break;
          }
      }
    }
  for (int64_t i = 0; i < l->outputs * l->count && !problem[0]; i++)
    if (seen[i] != 1)
      snprintf(problem, sizeof problem, "output %lld element %lld never summed",
               (long long)(i / l->count), (long long)(i % l->count));
  free(seen);
  ck_assert_msg(problem[0] == '\0', "%s: %s", what, problem);
}

static reduce_cuda_plan plan_packed(const plan_case *c, reduce_layout *l, uint32_t sms,
                                    int32_t element_bytes, int32_t pack_limit) {
  reduce_cuda_plan p;
  layout_of(c, l);
  reduce_cuda_plan_make(&p, l, sms * 128u, sms, element_bytes, pack_limit);
  return p;
}

static reduce_cuda_plan plan_of(const plan_case *c, reduce_layout *l, uint32_t sms) {
  return plan_packed(c, l, sms, 4, 1);
}

/* The axis cases of the benchmark: a first or middle axis goes to the columns kernel, the
 * last axis to rows or block, every axis to block. */
START_TEST(test_kernel_by_axis) {
  reduce_layout l;
  const plan_case first = {2, {8192, 8192}, {0}, 1u};
  reduce_cuda_plan p = plan_of(&first, &l, SMS);
  ck_assert_int_eq(p.kind, REDUCE_CUDA_COLUMNS_KERNEL);
  ck_assert_int_eq(p.tile_columns, 32); /* a warp reads 32 adjacent columns of a row */
  ck_assert_int_eq(p.parts, 4);         /* 256 strips, 4 parts: 1024 blocks for 132 SMs */
  ck_assert_uint_eq(p.blocks, 1024);
  const plan_case last = {2, {8192, 8192}, {0}, 2u};
  ck_assert_int_eq(plan_of(&last, &l, SMS).kind, REDUCE_CUDA_BLOCK_KERNEL);
  const plan_case last_short = {3, {256, 256, 256}, {0}, 4u};
  ck_assert_int_eq(plan_of(&last_short, &l, SMS).kind, REDUCE_CUDA_ROWS_KERNEL);
  const plan_case all = {2, {8192, 8192}, {0}, 3u};
  ck_assert_int_eq(plan_of(&all, &l, SMS).kind, REDUCE_CUDA_BLOCK_KERNEL);
  const plan_case middle = {3, {256, 512, 256}, {0}, 2u};
  p = plan_of(&middle, &l, SMS);
  ck_assert_int_eq(p.kind, REDUCE_CUDA_COLUMNS_KERNEL);
  ck_assert_int_eq(p.tile_columns, 32);
  ck_assert_int_eq(p.parts, 1); /* 65536 outputs in 8-group strips fill the GPU */
  const plan_case first_two = {3, {64, 64, 1000}, {0}, 3u};
  ck_assert_int_eq(plan_of(&first_two, &l, SMS).kind, REDUCE_CUDA_COLUMNS_KERNEL);
  /* a transposed matrix's last axis steps through memory like a first axis */
  const plan_case transposed = {2, {1000, 3000}, {1, 1000}, 2u};
  ck_assert_int_eq(plan_of(&transposed, &l, SMS).kind, REDUCE_CUDA_COLUMNS_KERNEL);
  const plan_case transposed_first = {2, {1000, 3000}, {1, 1000}, 1u};
  ck_assert_int_ne(plan_of(&transposed_first, &l, SMS).kind, REDUCE_CUDA_COLUMNS_KERNEL);
  /* a sum over a size-1 axis is a copy: a thread per output */
  const plan_case copy = {2, {1, 5000}, {0}, 1u};
  p = plan_of(&copy, &l, SMS);
  ck_assert_int_eq(p.kind, REDUCE_CUDA_COLUMNS_KERNEL);
  ck_assert_int_eq(p.tile_columns, 256);
}
END_TEST

/* Few outputs and long columns: narrow strips, many groups, many parts; many outputs and short
 * columns: a thread per output. */
START_TEST(test_columns_shape_of_split) {
  reduce_layout l;
  const plan_case narrow = {2, {1 << 20, 3}, {0}, 1u};
  reduce_cuda_plan p = plan_of(&narrow, &l, SMS);
  ck_assert_int_eq(p.kind, REDUCE_CUDA_COLUMNS_KERNEL);
  ck_assert_int_eq(p.tile_columns, 4);
  ck_assert_int_gt(p.parts, 1);
  const plan_case many_short = {3, {4096, 3, 1024}, {0}, 2u};
  p = plan_of(&many_short, &l, SMS);
  ck_assert_int_eq(p.kind, REDUCE_CUDA_COLUMNS_KERNEL);
  ck_assert_int_eq(p.tile_columns, 256); /* 4M outputs fill the GPU one thread each */
  ck_assert_int_eq(p.parts, 1);
  const plan_case few_short = {3, {64, 3, 1024}, {0}, 2u};
  p = plan_of(&few_short, &l, SMS);
  ck_assert_int_eq(p.kind, REDUCE_CUDA_COLUMNS_KERNEL);
  ck_assert_int_eq(p.tile_columns, 256); /* 3 rows are under REDUCE_CUDA_COLUMNS_MIN_ROWS: not split */
  ck_assert_int_eq(p.parts, 1);
}
END_TEST

/* Exhaustive coverage of the split over layouts of every kind, on a large GPU and on one SM
 * (where the grid-stride loop over items and a single strip matter). A loop test: each layout
 * runs in its own process with its own timeout, since the largest take seconds each. */
static const plan_case split_cases[] = {
    {2, {4096, 300}, {0}, 1u},           /* first axis, parts > 1 */
    {2, {1000, 8192}, {0}, 1u},          /* first axis, wide */
    {2, {100003, 2}, {0}, 1u},           /* two columns, long */
    {2, {7, 33}, {0}, 1u},               /* odd and tiny */
    {2, {1, 77}, {0}, 1u},               /* one row: a copy */
    {2, {0, 77}, {0}, 1u},               /* empty reduction */
    {3, {5, 1001, 37}, {0}, 2u},         /* middle axis, odd */
    {3, {300, 3, 4}, {0}, 2u},           /* middle axis, short */
    {3, {9, 4099, 3}, {0}, 2u},          /* middle axis, narrow */
    {3, {40, 60, 50}, {0}, 3u},          /* first two axes */
    {3, {17, 23, 64}, {0}, 5u},          /* axes 0 and 2 */
    {2, {40, 50}, {-100, 2}, 1u},        /* negative and gapped strides */
    {2, {64, 1000}, {0, 1}, 1u},         /* a sum over a broadcast axis (stride 0) */
    {2, {1000, 64}, {1, 0}, 1u},         /* broadcast outputs (stride 0) */
    {2, {700, 300}, {1, 700}, 2u},       /* transposed last axis */
    {4, {3, 70, 5, 40}, {0}, 5u},        /* two reduced dims that do not merge */
    {3, {256, 1024, 256}, {0}, 1u},      /* the benchmark's first axis: pairs */
    {3, {256, 1024, 256}, {0}, 2u},      /* its middle axis: pairs over two kept dims */
    {3, {6, 50, 4}, {200, 4, 1}, 2u},    /* middle axis, two kept dims, even strides: pairs */
    {2, {1000, 2048}, {0}, 1u},          /* first axis, wide: pairs in parts */
    {3, {10, 77, 12}, {0}, 2u},          /* middle axis, kept dim of 12 (packs of 4 at most) */
    {3, {6, 50, 8}, {400, 8, 1}, 2u},    /* middle axis, strides of 8 (packs of 8 allowed) */
    {3, {64, 256, 68}, {0}, 2u},         /* 16-bit packs of 4 in one pass */
    {3, {64, 256, 64}, {0}, 2u},         /* the benchmark's middle axis at 2^20 */
};
#define SPLIT_CASES ((int)(sizeof split_cases / sizeof split_cases[0]))

START_TEST(test_columns_split_covers_each_element_once) {
  const size_t i = (size_t)_i;
  /* (element bytes, pack limit) as the thunk asks: integers, float64, float32, 16-bit floats */
  static const int32_t packing[][2] = {{4, 1}, {8, 2}, {4, 4}, {2, 8}, {2, 2}};
  for (uint32_t sms = 1; sms <= SMS; sms += SMS - 1)
    for (size_t k = 0; k < sizeof packing / sizeof packing[0]; k++) {
      reduce_layout l;
      char what[96];
      reduce_cuda_plan p = plan_packed(&split_cases[i], &l, sms, packing[k][0], packing[k][1]);
      snprintf(what, sizeof what, "case %zu on %u SMs, %d-byte elements, pack %d", i, sms,
               (int)packing[k][0], (int)p.pack);
      if (p.kind != REDUCE_CUDA_COLUMNS_KERNEL) continue;
      check_columns_split(&l, &p, packing[k][0], what);
      /* every pack the layout allows, in 8 and in 32 groups, whatever the plan would pick */
      for (int32_t pack = 1; pack <= 8; pack *= 2)
        for (int64_t groups = 8; groups <= 32; groups *= 4) {
          if (pack * packing[k][0] > REDUCE_CUDA_COLUMNS_PACK_BYTES || !reduce_cuda_columns_packs(&l, pack))
            continue;
          reduce_cuda_plan forced;
          reduce_cuda_plan_columns_as(&forced, &l, sms * 128u, sms, pack, groups);
          snprintf(what, sizeof what, "case %zu on %u SMs, %d-byte elements, pack %d in %d groups",
                   i, sms, (int)packing[k][0], (int)pack, (int)groups);
          check_columns_split(&l, &forced, packing[k][0], what);
        }
    }
}
END_TEST

/* Packs of P outputs per thread exactly where the P neighbours lie side by side in every row
 * and every pack starts at a multiple of P elements: a contiguous innermost kept dim that P
 * divides, other strides that P divides; the widest such pack of at most 16 bytes within the
 * thunk's limit; never where the thunk allows one output. pack16 is for 16-bit elements
 * (limit 8), pack32 for float32 (limit 4), pack64 for float64 (limit 2). */
START_TEST(test_columns_packs) {
  static const struct { plan_case c; int32_t pack16, pack32, pack64; } cases[] = {
      {{2, {8192, 8192}, {0}, 1u}, 8, 4, 2},          /* first axis */
      {{3, {256, 1024, 256}, {0}, 2u}, 8, 4, 2},      /* middle axis */
      {{2, {7, 33}, {0}, 1u}, 1, 1, 1},               /* odd row: a pack would straddle it */
      {{3, {5, 1001, 37}, {0}, 2u}, 1, 1, 1},         /* odd innermost kept dim */
      {{3, {5, 1001, 38}, {38 * 1001 + 1, 38, 1}, 2u}, 1, 1, 1}, /* odd outer kept stride */
      {{3, {10, 77, 12}, {0}, 2u}, 4, 4, 2},          /* kept dim of 12: 4 divides it, 8 not */
      {{3, {10, 77, 12}, {77 * 12 + 2, 12, 1}, 2u}, 2, 2, 2}, /* outer kept stride 926: pairs */
      {{2, {40, 50}, {-100, 2}, 1u}, 1, 1, 1},        /* kept stride 2: not neighbours */
      {{2, {40, 50}, {-101, 1}, 1u}, 1, 1, 1},        /* odd reduced stride */
      {{2, {40, 50}, {-100, 1}, 1u}, 2, 2, 2},        /* reduced stride -100, 50 columns: pairs */
      {{2, {40, 64}, {-96, 1}, 1u}, 8, 4, 2},         /* reduced stride -96: packs of 8 */
      {{2, {1000, 64}, {1, 0}, 1u}, 1, 1, 1},         /* broadcast outputs */
      {{2, {700, 300}, {1, 700}, 2u}, 4, 4, 2},       /* transposed last axis: 700 = 4 * 175 */
      {{2, {701, 300}, {1, 701}, 2u}, 1, 1, 1},       /* the same, odd */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    reduce_layout l;
    const int32_t expected[3] = {cases[i].pack16, cases[i].pack32, cases[i].pack64};
    const int32_t bytes[3] = {2, 4, 8};
    for (int k = 0; k < 3; k++) {
      reduce_cuda_plan p = plan_packed(&cases[i].c, &l, SMS, bytes[k], 16 / bytes[k]);
      const int32_t pack = reduce_cuda_columns_pack(&l, bytes[k], 16 / bytes[k]);
      ck_assert_msg(p.kind == REDUCE_CUDA_COLUMNS_KERNEL, "case %zu: kind %d", i, p.kind);
      ck_assert_msg(pack == expected[k], "case %zu, %d-byte elements: pack %d, expected %d", i,
                    (int)bytes[k], (int)pack, (int)expected[k]);
      /* the plan takes pairs, or the widest pack where that saves a second pass */
      ck_assert_msg(p.pack == (expected[k] < 2 ? expected[k] : 2) || p.pack == expected[k],
                    "case %zu: the plan's pack %d", i, (int)p.pack);
      ck_assert_int_eq(reduce_cuda_columns_pack(&l, bytes[k], 1), 1);
      ck_assert_int_eq(plan_packed(&cases[i].c, &l, SMS, bytes[k], 1).pack, 1);
    }
  }
}
END_TEST

/* Pairs in up to 8 groups; the widest pack in as many groups as span a 128-byte line (up to 32)
 * only where that turns two passes into one: the benchmark's middle axis at 2^20 (two passes in pairs) runs in one, its first axis at
 * 2^26 (one pass in pairs) and 8192 columns (parts either way) keep pairs. */
START_TEST(test_columns_wide_packs_only_for_one_pass) {
  reduce_layout l;
  const plan_case middle = {3, {64, 256, 64}, {0}, 2u};
  reduce_cuda_plan p = plan_packed(&middle, &l, SMS, 4, 1);
  ck_assert_int_gt(p.parts, 1); /* one output per thread: two passes */
  p = plan_packed(&middle, &l, SMS, 4, 4);
  ck_assert_int_eq(p.pack, 4);
  ck_assert_int_eq(p.tile_columns, 16); /* 16 groups of 16 packs: 256 bytes of each row */
  ck_assert_int_eq(p.parts, 1);
  p = plan_packed(&middle, &l, SMS, 2, 8);
  ck_assert_int_eq(p.pack, 8);
  ck_assert_int_eq(p.parts, 1);
  p = plan_packed(&middle, &l, SMS, 8, 2);
  ck_assert_int_eq(p.pack, 2);
  ck_assert_int_eq(p.parts, 1);
  const plan_case first = {3, {256, 1024, 256}, {0}, 1u};
  p = plan_packed(&first, &l, SMS, 2, 8);
  ck_assert_int_eq(p.pack, 2);
  ck_assert_int_eq(p.parts, 1);
  const plan_case square = {2, {8192, 8192}, {0}, 1u};
  for (int32_t bytes = 2; bytes <= 8; bytes *= 2) {
    p = plan_packed(&square, &l, SMS, bytes, 16 / bytes);
    ck_assert_int_eq(p.pack, 2);
    ck_assert_int_eq(p.tile_columns, 32);
    ck_assert_int_eq(p.parts, 4);
    ck_assert_uint_eq(p.blocks, 512);
  }
}
END_TEST

/* Each case above that should reach the columns kernel does (so the coverage test ran it). */
START_TEST(test_columns_cases_reach_columns) {
  static const plan_case cases[] = {
      {2, {4096, 300}, {0}, 1u}, {2, {7, 33}, {0}, 1u}, {3, {5, 1001, 37}, {0}, 2u},
      {3, {300, 3, 4}, {0}, 2u}, {2, {40, 50}, {-100, 2}, 1u}, {2, {1000, 64}, {1, 0}, 1u},
      {4, {3, 70, 5, 40}, {0}, 5u}, {2, {0, 77}, {0}, 1u},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    reduce_layout l;
    ck_assert_msg(plan_of(&cases[i], &l, SMS).kind == REDUCE_CUDA_COLUMNS_KERNEL, "case %zu", i);
  }
}
END_TEST

int main(void) {
  Suite *suite = suite_create("reduce_cuda_plan");
  TCase *tc = dlop_test_tcase(suite, "plan", 60, NULL, NULL);
  dlop_test_add_tests(tc,
                      test_kernel_by_axis,
                      test_columns_shape_of_split,
                      test_columns_cases_reach_columns,
                      test_columns_packs,
                      test_columns_wide_packs_only_for_one_pass,
                      NULL);
  tcase_add_loop_test(tc, test_columns_split_covers_each_element_once, 0, SPLIT_CASES);
  return dlop_test_run_suite(suite);
}
