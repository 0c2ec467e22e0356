/* copy_cpu.h — the strided copy on the CPU (copy_cpu.c), and the choice of a transposing copy's
 * tile dims that the CPU and the CUDA copy share. Internal to libdlop. */
#ifndef DLOP_COPY_CPU_H
#define DLOP_COPY_CPU_H

#include <stddef.h>

#include "copy_layout.h"

/* The dims of a tiled copy: source_dim with source stride 1 and destination_dim with
 * destination stride 1, different, each at least DLOP_COPY_TILE_MIN long. 0 when the layout
 * has no such pair (a plain loop then reads and writes consecutive elements, or the copy is
 * too thin for tiles). */
int dlop__copy_transpose_dims(const dlop__copy_layout *layout, int32_t *source_dim,
                              int32_t *destination_dim);

/* Copy layout->numel elements of element_size bytes from source to destination (the bases
 * the layout's strides count from), on the thread pool when the copy is large enough. */
void dlop__cpu_strided_copy(const char *source, char *destination, size_t element_size,
                            const dlop__copy_layout *layout);

#endif
