/* copy_cpu.c — strided copies on the CPU, split over the thread pool. A copy whose source is
 * contiguous along one dim and whose destination is along another (a transpose: reshaping or
 * making contiguous a transposed array) goes in square tiles, so that both sides touch whole
 * cache lines: element by element along the destination's dim it would read one element of
 * each source line and fetch the line again for the next (a 256^3 float32 transpose took
 * 150-190 ms so, as long as NumPy's copy). Other layouts go row by row along the last dim. */
#include <string.h>

#include "copy_cpu.h"
#include "host_services.h"

/* Tiles of CPU_TILE x CPU_TILE elements, gathered into a local tile along the source's rows
 * and written out along the destination's. Both sides then read or write one contiguous run
 * at a time: walking the tile by either side's rows directly keeps 16-32 lines in flight whose
 * addresses lie a power of two apart for power-of-two shapes, and those share one L1 set (a
 * 256^3 transpose in a harness at 2 threads: 16 ms for float32 so, 9 through the local tile;
 * 16 elements a side came within 15 % of the best of 16, 32, 64 and 128 for every size). */
#define CPU_TILE 16
/* Elements per parallel_for grain: below twice this a copy runs on the calling thread. */
#define CPU_GRAIN_ELEMENTS 32768

int dlop__copy_transpose_dims(const dlop__copy_layout *layout, int32_t *source_dim,
                              int32_t *destination_dim) {
  *source_dim = *destination_dim = -1;
  for (int32_t d = 0; d < layout->ndim; d++) {
    if (layout->shape[d] < DLOP_COPY_TILE_MIN) continue;
    if (layout->source_strides[d] == 1 && *source_dim < 0) *source_dim = d;
    if (layout->destination_strides[d] == 1 && *destination_dim < 0) *destination_dim = d;
  }
  return *source_dim >= 0 && *destination_dim >= 0 && *source_dim != *destination_dim;
}

typedef struct cpu_copy {
  const char *source;
  char *destination;
  size_t element_size;
  const dlop__copy_layout *layout;
  /* the tiled copy: its two dims and the tiles along each */
  int32_t source_dim, destination_dim;
  int64_t source_tiles, destination_tiles;
} cpu_copy;

/* The offsets (in elements) of flat index item over the dims of layout other than skip_a and
 * skip_b (-1: none), the last dim varying fastest. */
static void outer_offsets(const dlop__copy_layout *layout, int64_t item, int32_t skip_a,
                          int32_t skip_b, int64_t *source_offset, int64_t *destination_offset) {
  *source_offset = *destination_offset = 0;
  for (int32_t d = layout->ndim - 1; d >= 0 && item > 0; d--) {
    if (d == skip_a || d == skip_b) continue;
    int64_t index = item % layout->shape[d];
    item /= layout->shape[d];
    *source_offset += index * layout->source_strides[d];
    *destination_offset += index * layout->destination_strides[d];
  }
}

/* One tile: rows a along the source's contiguous dim, b along the destination's. */
#define DLOP__COPY_TILE(type)                                                                  \
  do {                                                                                         \
    const type *s_ = (const type *)(const void *)s;                                            \
    type tile[CPU_TILE][CPU_TILE];                                                             \
    if (rows_a == CPU_TILE && rows_b == CPU_TILE) { /* whole: fixed trip counts, unrolled */   \
      for (int b = 0; b < CPU_TILE; b++)                                                       \
        for (int a = 0; a < CPU_TILE; a++) tile[a][b] = s_[a + b * src_b];                     \
      for (int a = 0; a < CPU_TILE; a++)                                                       \
        memcpy(d + a * dst_a * (int64_t)sizeof(type), tile[a], sizeof tile[a]);                \
    } else {                                                                                   \
      for (int64_t b = 0; b < rows_b; b++)                                                     \
        for (int64_t a = 0; a < rows_a; a++) tile[a][b] = s_[a + b * src_b];                   \
      for (int64_t a = 0; a < rows_a; a++)                                                     \
        memcpy(d + a * dst_a * (int64_t)sizeof(type), tile[a], (size_t)rows_b * sizeof(type)); \
    }                                                                                          \
  } while (0)

static void tiles_body(void *context, int64_t begin, int64_t end) {
  const cpu_copy *c = context;
  const dlop__copy_layout *l = c->layout;
  const int32_t da = c->source_dim, db = c->destination_dim;
  const int64_t esize = (int64_t)c->element_size;
  const int64_t src_b = l->source_strides[db], dst_a = l->destination_strides[da];
  for (int64_t item = begin; item < end; item++) {
    /* item = (outer, tile along a, tile along b), b fastest: consecutive items write
     * consecutive destination tiles */
    int64_t tile_b = item % c->destination_tiles, rest = item / c->destination_tiles;
    int64_t tile_a = rest % c->source_tiles, outer = rest / c->source_tiles;
    int64_t source_offset, destination_offset;
    outer_offsets(l, outer, da, db, &source_offset, &destination_offset);
    int64_t a0 = tile_a * CPU_TILE, b0 = tile_b * CPU_TILE;
    int64_t rows_a = l->shape[da] - a0 < CPU_TILE ? l->shape[da] - a0 : CPU_TILE;
    int64_t rows_b = l->shape[db] - b0 < CPU_TILE ? l->shape[db] - b0 : CPU_TILE;
    source_offset += a0 + b0 * src_b;
    destination_offset += a0 * dst_a + b0;
    const char *s = c->source + source_offset * esize;
    char *d = c->destination + destination_offset * esize;
    switch (c->element_size) {
      case 1: DLOP__COPY_TILE(uint8_t); break;
      case 2: DLOP__COPY_TILE(uint16_t); break;
      case 4: DLOP__COPY_TILE(uint32_t); break;
      case 8: DLOP__COPY_TILE(uint64_t); break;
      default:
        for (int64_t a = 0; a < rows_a; a++)
          for (int64_t b = 0; b < rows_b; b++)
            memcpy(d + (a * dst_a + b) * esize, s + (a + b * src_b) * esize, c->element_size);
    }
  }
}

/* One row along the last dim. */
#define DLOP__COPY_ROW(type)                                                                   \
  do {                                                                                         \
    const type *s_ = (const type *)(const void *)s;                                            \
    type *d_ = (type *)(void *)d;                                                              \
    for (int64_t i = 0; i < inner; i++) d_[i * inner_destination] = s_[i * inner_source];      \
  } while (0)

static void rows_body(void *context, int64_t begin, int64_t end) {
  const cpu_copy *c = context;
  const dlop__copy_layout *l = c->layout;
  const int32_t last = l->ndim - 1;
  const int64_t inner = l->shape[last];
  const int64_t inner_source = l->source_strides[last];
  const int64_t inner_destination = l->destination_strides[last];
  const int64_t esize = (int64_t)c->element_size;
  for (int64_t row = begin; row < end; row++) {
    int64_t source_offset, destination_offset;
    outer_offsets(l, row, last, -1, &source_offset, &destination_offset);
    const char *s = c->source + source_offset * esize;
    char *d = c->destination + destination_offset * esize;
    if (inner_source == 1 && inner_destination == 1) {
      memcpy(d, s, (size_t)(inner * esize));
      continue;
    }
    switch (c->element_size) {
      case 1: DLOP__COPY_ROW(uint8_t); break;
      case 2: DLOP__COPY_ROW(uint16_t); break;
      case 4: DLOP__COPY_ROW(uint32_t); break;
      case 8: DLOP__COPY_ROW(uint64_t); break;
      default:
        for (int64_t i = 0; i < inner; i++)
          memcpy(d + i * inner_destination * esize, s + i * inner_source * esize,
                 c->element_size);
    }
  }
}

void dlop__cpu_strided_copy(const char *source, char *destination, size_t element_size,
                            const dlop__copy_layout *layout) {
  cpu_copy c = {source, destination, element_size, layout, -1, -1, 0, 0};
  if (dlop__copy_transpose_dims(layout, &c.source_dim, &c.destination_dim)) {
    c.source_tiles = (layout->shape[c.source_dim] + CPU_TILE - 1) / CPU_TILE;
    c.destination_tiles = (layout->shape[c.destination_dim] + CPU_TILE - 1) / CPU_TILE;
    int64_t outer = layout->numel / layout->shape[c.source_dim] / layout->shape[c.destination_dim];
    int64_t tiles = outer * c.source_tiles * c.destination_tiles;
    int64_t grain = CPU_GRAIN_ELEMENTS / (CPU_TILE * CPU_TILE);
    /* parallel_for fails only on a NULL body or a negative count */
    (void)dlop__parallel_for(tiles, grain, tiles_body, &c);
    return;
  }
  const int64_t inner = layout->shape[layout->ndim - 1];
  const int64_t rows = layout->numel / inner;
  int64_t grain = CPU_GRAIN_ELEMENTS / inner;
  (void)dlop__parallel_for(rows, grain < 1 ? 1 : grain, rows_body, &c);
}
