/* check_tests_cuda.c — the CUDA-only checks: results agree with the CPU thunk within the
 * dtype's tolerance (the CPU is the reference), a CUDA-graph capture of a run gives the same
 * results when the op declares DLOP_OP_CUDA_GRAPH_SAFE, and device memory goes back to its
 * baseline once the thunk is destroyed. All runs use a non-default stream and are read only
 * after that stream is synchronized. */
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"

START_TEST(cuda_matches_cpu) {
  const check_case *c = check_case_at(_i);
  const char *check = "cuda_matches_cpu";
  if (!(dlop_op_dtypes(c->op, DLOP_DEVICE_CPU) & DLOP_DTYPE_BIT(c->dtype))) {
    check_note(c, check, "skipped: no CPU thunk for this dtype to compare with");
    return;
  }
  check_case cpu = *c;
  cpu.device.type = DLOP_DEVICE_CPU;
  cpu.device.id = 0;
  int count;
  const check_shape *shapes = check_case_shapes(c, check, &count);
  for (int s = 0; s < count; s++) {
    check_prepared pc, pg;
    check_run_result rc, rg;
    check_run_fresh(&cpu, check, &shapes[s], 0, CHECK_CONTIGUOUS, 70, 0, &pc, &rc);
    check_run_fresh(c, check, &shapes[s], s % 2, CHECK_CONTIGUOUS, 70, 1, &pg, &rg);
    check_compare_outputs(c, check, &pg, &rc, &rg, 0, "", "CUDA results (expected: the CPU "
                          "thunk's) disagree beyond the dtype's tolerance");
    check_run_result_free(&pc, &rc);
    check_run_result_free(&pg, &rg);
  }
}
END_TEST

START_TEST(cuda_graph_capture) {
  const check_case *c = check_case_at(_i);
  const char *check = "cuda_graph_capture";
  if (!(c->op->flags & DLOP_OP_CUDA_GRAPH_SAFE)) {
    check_note(c, check, "skipped: the op does not declare DLOP_OP_CUDA_GRAPH_SAFE");
    return;
  }
  int count, picked[3];
  const check_shape *shapes = check_case_shapes(c, check, &count);
  int picks = check_pick_three(shapes, count, picked);
  for (int s = 0; s < picks; s++) {
    check_prepared p;
    check_run_result plain, captured;
    check_prepare(c, check, &shapes[picked[s]], 0, &p);
    check_run_once(&p, CHECK_CONTIGUOUS, 80, 0, &plain);
    check_require_ok(&p, check, &plain);
    /* same inputs, outputs poisoned again, then one run captured and replayed */
    check_run_once(&p, CHECK_CONTIGUOUS, 80, 1, &captured);
    void *stream = check_stream(c);
    for (int32_t o = 0; o < p.num_outputs; o++) {
      unsigned char poison[8];
      check_poison_pattern(p.outputs[o].dtype, 1, poison);
      check_buffer_free(&captured.out[o]);
      check_buffer_init(&captured.out[o], c, c->device, p.outputs[o].dtype,
                        p.concrete_outputs[o].ndim, p.concrete_outputs[o].shape,
                        CHECK_CONTIGUOUS, NULL, poison, stream);
    }
    /* No cached blocks: an allocation inside the captured run must reach the driver, which
     * global capture mode refuses, instead of being served silently from the pool. */
    if (dlop_memory_release_cached(c->device) != DLOP_OK)
      check_fail(c, check, NULL, 0, "dlop_memory_release_cached failed: %s", dlop_last_error());
    dlop_memory_stats before = {sizeof before, 0, 0, 0, 0, 0, 0}, after = before;
    dlop_memory_stats_get(c->device, &before);
    char error[1024];
    int status = check_cuda_graph_run(&p, captured.in, captured.out, stream, error, sizeof error);
    if (status != DLOP_OK)
      check_fail(c, check, p.shape.dims, p.shape.ndim, "the op declares DLOP_OP_CUDA_GRAPH_SAFE "
                 "but capturing a run into a CUDA graph failed: %s", error);
    dlop_memory_stats_get(c->device, &after);
    if (after.driver_allocations != before.driver_allocations)
      check_fail(c, check, p.shape.dims, p.shape.ndim, "the op declares DLOP_OP_CUDA_GRAPH_SAFE "
                 "but its run allocated memory while captured (%llu driver allocations): a graph "
                 "replays the allocation's address, not the allocation; allocate in make_thunk "
                 "or ask for a workspace", (unsigned long long)(after.driver_allocations -
                                                                  before.driver_allocations));
    for (int32_t o = 0; o < p.num_outputs; o++) {
      unsigned char *bytes = check_buffer_download(&captured.out[o], stream);
      check_buffer_extract(&captured.out[o], bytes, captured.values[o]);
      free(bytes);
    }
    check_release(&p);
    check_compare_outputs(c, check, &p, &plain, &captured,
                          (c->op->flags & DLOP_OP_DETERMINISTIC) != 0, "",
                          "the replayed CUDA graph's results differ from an uncaptured run's "
                          "(work outside the given stream, or state read at capture time?)");
    check_run_result_free(&p, &plain);
    check_run_result_free(&p, &captured);
  }
}
END_TEST

START_TEST(device_memory_back_to_baseline) {
  const check_case *c = check_case_at(_i);
  const char *check = "device_memory_back_to_baseline";
  const check_shape shape = check_sized_shape(c, check, 4099);
  check_prepared p;
  check_run_result r;
  /* buffers first, so only what make_thunk, the run and destroy do is measured */
  check_run_fresh(c, check, &shape, 1, CHECK_CONTIGUOUS, 90, 0, &p, &r);
  dlop_memory_stats before = {sizeof before, 0, 0, 0, 0, 0, 0}, after = before;
  if (dlop_memory_stats_get(c->device, &before) != DLOP_OK)
    check_fail(c, check, NULL, 0, "dlop_memory_stats_get failed: %s", dlop_last_error());
  check_prepare(c, check, &shape, 1, &p);
  char error[1024];
  int status = check_run(&p, r.in, r.out, check_stream(c), error, sizeof error);
  check_release(&p);
  if (status != DLOP_OK)
    check_fail(c, check, shape.dims, shape.ndim, "the run failed: %s: %s",
               dlop_status_name(status), error[0] ? error : "(no message)");
  if (dlop_memory_stats_get(c->device, &after) != DLOP_OK)
    check_fail(c, check, NULL, 0, "dlop_memory_stats_get failed: %s", dlop_last_error());
  if (after.bytes_in_use != before.bytes_in_use)
    check_fail(c, check, shape.dims, shape.ndim,
               "device memory in use went from %llu to %llu bytes over make_thunk, a run and "
               "destroy; free with host->memory_free in destroy what make_thunk allocated",
               (unsigned long long)before.bytes_in_use, (unsigned long long)after.bytes_in_use);
  check_run_result_free(&p, &r);
}
END_TEST

void check_add_cuda_tests(TCase *tc, int index) {
  check_add_test(tc, cuda_matches_cpu, index);
  check_add_test(tc, cuda_graph_capture, index);
  check_add_test(tc, device_memory_back_to_baseline, index);
}
