/* graph_runner.c — graph, array and pool helpers for the tests (see graph_runner.h). Errors
 * fail the current Check test with dlop_last_error(). */
#include "graph_runner.h"

#include <stdlib.h>
#include <string.h>

#include "test_support.h"

dlop_graph *dlop_test_new_graph(void) {
  dlop_graph *graph = NULL;
  dlop_test_load_bundled_plugins();
  DLOP_CK_OK(dlop_graph_create(&graph));
  return graph;
}

int dlop_test_apply_ints(dlop_graph *graph, const char *op, dlop_var *x, const char *name,
                         const int64_t *ints, int32_t count, dlop_var **y) {
  dlop_named_param param = {name, {DLOP_PARAM_INTS, count, {.ints = ints}}};
  return dlop_graph_apply(graph, op, &x, 1, name ? &param : NULL, name ? 1 : 0, y, 1);
}

dlop_array *dlop_test_host_array(dlop_dtype dtype, int32_t ndim, const int64_t *shape,
                                 const void *data) {
  dlop_array *array = NULL;
  DLOP_CK_OK(dlop_array_from_host((dlop_device){DLOP_DEVICE_CPU, 0}, dtype, ndim, shape, data,
                                  &array));
  return array;
}

void *dlop_test_read_back(const dlop_array *array) {
  size_t bytes = (size_t)dlop_array_numel(array) * dlop_dtype_size(dlop_array_dtype(array));
  void *data = malloc(bytes + 1);
  ck_assert_ptr_nonnull(data);
  DLOP_CK_OK(dlop_array_to_host(array, data, bytes));
  return data;
}

dlop_memory_stats dlop_test_memory_stats(dlop_device device) {
  dlop_memory_stats stats;
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  DLOP_CK_OK(dlop_memory_stats_get(device, &stats));
  return stats;
}
