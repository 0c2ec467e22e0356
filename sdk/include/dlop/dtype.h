/* dlop/dtype.h — element types, DLPack's type triple, and the mapping between them.
 * Plain data and static inline helpers: usable by plugins without linking libdlop. */
#ifndef DLOP_DTYPE_H
#define DLOP_DTYPE_H

#include <stddef.h>
#include <stdint.h>

/* Frozen numbering (it appears in dtype masks that plugins declare). Append only. */
typedef enum dlop_dtype {
  DLOP_BOOL = 0,
  DLOP_INT8 = 1,
  DLOP_INT16 = 2,
  DLOP_INT32 = 3,
  DLOP_INT64 = 4,
  DLOP_UINT8 = 5,
  DLOP_FLOAT16 = 6,
  DLOP_BFLOAT16 = 7,
  DLOP_FLOAT32 = 8,
  DLOP_FLOAT64 = 9,
  DLOP_DTYPE_COUNT = 10,
  DLOP_DTYPE_INVALID = -1
} dlop_dtype;

/* A set of dtypes, as declared by an op: bit (1u << dtype). Values outside 0..31 (such as
 * DLOP_DTYPE_INVALID) give 0 instead of an undefined shift; dt is evaluated twice. */
#define DLOP_DTYPE_BIT(dt) ((unsigned)(dt) < 32u ? 1u << (unsigned)(dt) : 0u)
#define DLOP_DTYPES_FLOAT                                                                   \
  (DLOP_DTYPE_BIT(DLOP_FLOAT16) | DLOP_DTYPE_BIT(DLOP_BFLOAT16) | DLOP_DTYPE_BIT(DLOP_FLOAT32) | \
   DLOP_DTYPE_BIT(DLOP_FLOAT64))
#define DLOP_DTYPES_SIGNED_INT                                                              \
  (DLOP_DTYPE_BIT(DLOP_INT8) | DLOP_DTYPE_BIT(DLOP_INT16) | DLOP_DTYPE_BIT(DLOP_INT32) |     \
   DLOP_DTYPE_BIT(DLOP_INT64))
#define DLOP_DTYPES_INT (DLOP_DTYPES_SIGNED_INT | DLOP_DTYPE_BIT(DLOP_UINT8))
#define DLOP_DTYPES_ALL (DLOP_DTYPES_FLOAT | DLOP_DTYPES_INT | DLOP_DTYPE_BIT(DLOP_BOOL))

/* DLPack's type triple, with DLPack's layout and codes. */
typedef enum dlop_dl_type_code {
  DLOP_DL_INT = 0,
  DLOP_DL_UINT = 1,
  DLOP_DL_FLOAT = 2,
  DLOP_DL_BFLOAT = 4,
  DLOP_DL_BOOL = 6
} dlop_dl_type_code;

typedef struct dlop_dl_dtype {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} dlop_dl_dtype;

static inline size_t dlop_dtype_size(dlop_dtype dtype) {
  static const unsigned char sizes[DLOP_DTYPE_COUNT] = {1, 1, 2, 4, 8, 1, 2, 2, 4, 8};
  return ((int)dtype >= 0 && (int)dtype < DLOP_DTYPE_COUNT) ? sizes[dtype] : 0;
}

static inline const char *dlop_dtype_name(dlop_dtype dtype) {
  static const char *const names[DLOP_DTYPE_COUNT] = {
      "bool", "int8", "int16", "int32", "int64", "uint8", "float16", "bfloat16", "float32", "float64"};
  return ((int)dtype >= 0 && (int)dtype < DLOP_DTYPE_COUNT) ? names[dtype] : "invalid";
}

static inline int dlop_dtype_is_float(dlop_dtype dtype) {
  /* The range check first: shifting by an out-of-range dtype is undefined behaviour. */
  return (int)dtype >= 0 && (int)dtype < DLOP_DTYPE_COUNT &&
         (DLOP_DTYPES_FLOAT & (1u << (unsigned)dtype)) != 0;
}

static inline dlop_dl_dtype dlop_dtype_to_dl(dlop_dtype dtype) {
  static const dlop_dl_dtype table[DLOP_DTYPE_COUNT] = {
      {DLOP_DL_BOOL, 8, 1},  {DLOP_DL_INT, 8, 1},    {DLOP_DL_INT, 16, 1},    {DLOP_DL_INT, 32, 1},
      {DLOP_DL_INT, 64, 1},  {DLOP_DL_UINT, 8, 1},   {DLOP_DL_FLOAT, 16, 1},  {DLOP_DL_BFLOAT, 16, 1},
      {DLOP_DL_FLOAT, 32, 1}, {DLOP_DL_FLOAT, 64, 1}};
  dlop_dl_dtype invalid = {255, 0, 0};
  return ((int)dtype >= 0 && (int)dtype < DLOP_DTYPE_COUNT) ? table[dtype] : invalid;
}

/* DLPack triple to dlop dtype; DLOP_DTYPE_INVALID for vector lanes or unknown types. */
static inline dlop_dtype dlop_dtype_from_dl(dlop_dl_dtype dl) {
  int i;
  if (dl.lanes != 1) return DLOP_DTYPE_INVALID;
  for (i = 0; i < DLOP_DTYPE_COUNT; i++) {
    dlop_dl_dtype t = dlop_dtype_to_dl((dlop_dtype)i);
    if (t.code == dl.code && t.bits == dl.bits) return (dlop_dtype)i;
  }
  return DLOP_DTYPE_INVALID;
}

#endif
