/* check_elementwise.h — `dlop-check --elementwise FILE`: an op from source defined inside
 * dlop-check (check_elementwise.c says FILE's format). */
#ifndef DLOP_CHECK_ELEMENTWISE_H
#define DLOP_CHECK_ELEMENTWISE_H

#include <stddef.h>

#include "dlop.h"

/* Read the definition in path, define the op (dlop_define_elementwise) and give its in-process
 * plugin. DLOP_OK, or a status with what was wrong (the file's line, the definer's message). */
int check_define_elementwise(const char *path, const dlop_plugin **plugin, char *error,
                             size_t error_size);

#endif
