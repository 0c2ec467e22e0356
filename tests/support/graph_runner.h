/* graph_runner.h — test helpers for the graph and array API: a graph with the bundled plugins
 * loaded, a node with one ints parameter, arrays from and back to host memory, pool statistics;
 * shared by the tests that build functions (test_function, test_views, test_views_cuda). */
#ifndef DLOP_TEST_GRAPH_RUNNER_H
#define DLOP_TEST_GRAPH_RUNNER_H

#include <stdint.h>

#include "dlop.h"

/* A new empty graph, the bundled plugins loaded first (fails the test on any error). */
dlop_graph *dlop_test_new_graph(void);
/* One node of op on x with one ints parameter called name (name NULL: no parameter given);
 * returns dlop_graph_apply's status. */
int dlop_test_apply_ints(dlop_graph *graph, const char *op, dlop_var *x, const char *name,
                         const int64_t *ints, int32_t count, dlop_var **y);
/* A CPU array holding a copy of data (fails the test on any error). */
dlop_array *dlop_test_host_array(dlop_dtype dtype, int32_t ndim, const int64_t *shape,
                                 const void *data);
/* The array's elements copied to new host memory in C order (malloc'd, one spare byte so that
 * an empty array still gets a pointer; free it). */
void *dlop_test_read_back(const dlop_array *array);
/* The memory pool's statistics for device now. */
dlop_memory_stats dlop_test_memory_stats(dlop_device device);

#endif
