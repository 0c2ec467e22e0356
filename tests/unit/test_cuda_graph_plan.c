/* test_cuda_graph_plan.c — the parts of replayed CUDA graphs that need no GPU: which functions
 * may replay and why not (the option, a node not declared capture-safe, an output that is a
 * view, a single kernel), the compile options' checks, the signature keys of runs, the buffers
 * an input spans, and the scan of captured kernel arguments for the addresses a replay moves.
 * The decisions are asked of CPU functions: they look at the nodes only. The layouts of the
 * driver structs libdlop declares are pinned against the toolkit's cuda.h when it is there. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_graph.h"
#include "function_internal.h"
#include "graph_runner.h"
#include "test_support.h"

static const dlop_device CPU = {DLOP_DEVICE_CPU, 0};

static dlop_graph *graph;
static void graph_setup(void) { graph = dlop_test_new_graph(); }
static void graph_teardown(void) { dlop_graph_destroy(graph); }

/* Compiled unfused: these tests are about functions of several kernel nodes, which fusion
 * would make one (a fused function of one kernel has no graph to gain). */
static dlop_function *compile_unfused(dlop_graph *g, dlop_var *x, dlop_var *y) {
  dlop_function_options options = DLOP_FUNCTION_OPTIONS_INIT;
  dlop_function *function = NULL;
  options.fuse = 0;
  DLOP_CK_OK(dlop_function_compile_with_options(g, &x, 1, &y, 1, CPU, &options, &function));
  return function;
}

static int decide(dlop_function *function, int option, char *reason, size_t size) {
  return dlop__cuda_graphs_decide(function, option, reason, size);
}

START_TEST(test_safe_chain_replays_unless_turned_off) {
  dlop_var *x;
  dlop_var *z = dlop_test_exp_double(graph, DLOP_FLOAT32, 16, &x);
  dlop_function *function = compile_unfused(graph, x, z);
  char reason[384];
  ck_assert_int_eq(decide(function, 1, reason, sizeof reason), 1);
  ck_assert_str_eq(reason, "");
  ck_assert_int_eq(decide(function, 0, reason, sizeof reason), 0);
  ck_assert_str_eq(reason, "turned off by the cuda_graphs option");
  /* a CPU function has no graphs, and explain() says nothing of them */
  ck_assert_ptr_null(function->graphs);
  char text[2048];
  DLOP_CK_OK(dlop_function_explain(function, text, sizeof text));
  ck_assert_msg(strstr(text, "cuda graphs") == NULL, "%s", text);
  dlop_function_destroy(function);
}
END_TEST

/* matmul (blas) is not capture-safe: cuBLAS may allocate its workspace while it runs. */
START_TEST(test_node_not_capture_safe_is_named) {
  const int64_t shape[2] = {4, 4};
  dlop_var *x, *d, *ab[2], *y;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 2, shape, &x));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &x, 1, NULL, 0, &d, 1));
  ab[0] = d;
  ab[1] = x;
  DLOP_CK_OK(dlop_graph_apply(graph, "matmul", ab, 2, NULL, 0, &y, 1));
  DLOP_CK_OK(dlop_graph_apply(graph, "exp", &y, 1, NULL, 0, &y, 1));
  dlop_function *function = compile_unfused(graph, x, y);
  char reason[384];
  ck_assert_int_eq(decide(function, 1, reason, sizeof reason), 0);
  ck_assert_str_eq(reason, "node #1 matmul is not declared safe for capture (its op lacks "
                           "DLOP_OP_CUDA_GRAPH_SAFE)");
  /* the option is named first: nothing else matters when it is off */
  ck_assert_int_eq(decide(function, 0, reason, sizeof reason), 0);
  ck_assert_str_eq(reason, "turned off by the cuda_graphs option");
  dlop_function_destroy(function);
}
END_TEST

START_TEST(test_one_kernel_node_saves_nothing) {
  dlop_var *x;
  dlop_var *y = dlop_test_double_chain(graph, 8, 1, &x);
  dlop_function *function = compile_unfused(graph, x, y);
  char reason[384];
  ck_assert_int_eq(decide(function, 1, reason, sizeof reason), 0);
  ck_assert_str_eq(reason, "1 kernel node: a graph launch would save nothing over its launch");
  dlop_function_destroy(function);
}
END_TEST

/* transpose(exp(double(x))) as the output: a view of an intermediate. */
START_TEST(test_view_output_stays_out) {
  const int64_t shape[2] = {3, 5};
  const int64_t axes[2] = {1, 0};
  dlop_var *x, *v;
  DLOP_CK_OK(dlop_graph_input(graph, "x", DLOP_FLOAT32, 2, shape, &x));
  DLOP_CK_OK(dlop_graph_apply(graph, "double", &x, 1, NULL, 0, &v, 1));
  DLOP_CK_OK(dlop_graph_apply(graph, "exp", &v, 1, NULL, 0, &v, 1));
  DLOP_CK_OK(dlop_test_apply_ints(graph, "transpose", v, "axes", axes, 2, &v));
  dlop_function *function = compile_unfused(graph, x, v);
  char reason[384];
  ck_assert_int_eq(decide(function, 1, reason, sizeof reason), 0);
  ck_assert_msg(strstr(reason, "output 0 (") == reason &&
                    strstr(reason, ") is a view made by node #2 transpose") != NULL,
                "%s", reason);
  dlop_function_destroy(function);

  /* a view inside the function, not an output, is fine: exp(transpose(double(x))) */
  dlop_graph *inner = dlop_test_new_graph();
  DLOP_CK_OK(dlop_graph_input(inner, "x", DLOP_FLOAT32, 2, shape, &x));
  DLOP_CK_OK(dlop_graph_apply(inner, "double", &x, 1, NULL, 0, &v, 1));
  DLOP_CK_OK(dlop_test_apply_ints(inner, "transpose", v, "axes", axes, 2, &v));
  DLOP_CK_OK(dlop_graph_apply(inner, "exp", &v, 1, NULL, 0, &v, 1));
  function = compile_unfused(inner, x, v);
  ck_assert_int_eq(decide(function, 1, reason, sizeof reason), 1);
  dlop_function_destroy(function);
  dlop_graph_destroy(inner);
}
END_TEST

START_TEST(test_options_are_checked) {
  dlop_var *x;
  dlop_var *y = dlop_test_exp_double(graph, DLOP_FLOAT32, 8, &x);
  dlop_function *function = NULL;
  dlop_function_options options;
  dlop_function_options_init(&options);
  ck_assert_uint_eq(options.struct_size, sizeof options);
  ck_assert_int_eq(options.cuda_graphs, 1);
  options.cuda_graphs = 2;
  ck_assert_int_eq(dlop_function_compile_with_options(graph, &x, 1, &y, 1, CPU, &options, &function),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_ptr_null(function);
  ck_assert_str_eq(dlop_last_error(),
                   "dlop_function_compile_with_options: options.cuda_graphs is 2 (expected 0 or 1)");
  options.cuda_graphs = 0;
  options.struct_size = 4;
  ck_assert_int_eq(dlop_function_compile_with_options(graph, &x, 1, &y, 1, CPU, &options, &function),
                   DLOP_INVALID_ARGUMENT);
  ck_assert_msg(strstr(dlop_last_error(), "options.struct_size is 4, too small") != NULL, "%s",
                dlop_last_error());
  /* NULL options and the initializer both compile, and the function runs */
  DLOP_CK_OK(dlop_function_compile_with_options(graph, &x, 1, &y, 1, CPU, NULL, &function));
  dlop_function_destroy(function);
  dlop_function_options off = DLOP_FUNCTION_OPTIONS_INIT;
  off.cuda_graphs = 0;
  DLOP_CK_OK(dlop_function_compile_with_options(graph, &x, 1, &y, 1, CPU, &off, &function));
  const int64_t n = 8;
  float data[8] = {0, 1, 2, 3, -1, -2, 0.5f, 4};
  dlop_array *input = NULL, *output = NULL;
  DLOP_CK_OK(dlop_array_from_host(CPU, DLOP_FLOAT32, 1, &n, data, &input));
  DLOP_CK_OK(dlop_function_run(function, &input, 1, &output, 1, NULL));
  const float *got = dlop_tensor_base(dlop_array_tensor(output));
  for (int i = 0; i < 8; i++)
    ck_assert_msg(got[i] > 0 && fabsf(got[i] - expf(2 * data[i])) <= 1e-5f * expf(2 * data[i]),
                  "[%d] = %g", i, (double)got[i]);
  dlop_test_release_arrays(2, output, input);
  dlop_function_destroy(function);
}
END_TEST

/* Keys: shapes, strides and the address mod 256 of each input; never the address itself. */
START_TEST(test_signature_keys) {
  dlop_var *x;
  dlop_var *y = dlop_test_exp_double(graph, DLOP_FLOAT32, DLOP_DIM_UNKNOWN, &x);
  dlop_function *function = compile_unfused(graph, x, y);
  ck_assert_int_eq(dlop__cuda_graphs_key_length(function), 3);
  int64_t n8 = 8, n9 = 9, n16 = 16;
  float zeros[16] = {0};
  dlop_array *a = NULL, *b = NULL, *c = NULL, *big = NULL, *shifted = NULL, *strided = NULL;
  DLOP_CK_OK(dlop_array_from_host(CPU, DLOP_FLOAT32, 1, &n8, zeros, &a));
  DLOP_CK_OK(dlop_array_from_host(CPU, DLOP_FLOAT32, 1, &n8, zeros, &b));
  DLOP_CK_OK(dlop_array_from_host(CPU, DLOP_FLOAT32, 1, &n9, zeros, &c));
  DLOP_CK_OK(dlop_array_from_host(CPU, DLOP_FLOAT32, 1, &n16, zeros, &big));
  const int64_t one = 1, two = 2;
  DLOP_CK_OK(dlop_array_view(big, 1, &n8, &one, 4, &shifted));  /* element 1 on: address + 4 */
  DLOP_CK_OK(dlop_array_view(big, 1, &n8, &two, 0, &strided)); /* every other element */
  int64_t ka[3], kb[3], kc[3], kshifted[3], kstrided[3];
  dlop__cuda_graphs_key(function, &a, ka);
  dlop__cuda_graphs_key(function, &b, kb);
  dlop__cuda_graphs_key(function, &c, kc);
  dlop__cuda_graphs_key(function, &shifted, kshifted);
  dlop__cuda_graphs_key(function, &strided, kstrided);
  ck_assert(dlop_array_tensor(a)->data != dlop_array_tensor(b)->data);
  /* two arrays of one shape: the same key but for where their addresses fall mod 256 */
  ck_assert_int_eq(ka[0], kb[0]);
  ck_assert_int_eq(ka[1], kb[1]);
  ck_assert_int_eq(ka[2], (int64_t)((uintptr_t)dlop_array_tensor(a)->data % 256));
  ck_assert_int_eq(kb[2], (int64_t)((uintptr_t)dlop_array_tensor(b)->data % 256));
  ck_assert_int_eq(ka[0], 8);
  ck_assert_int_eq(ka[1], 1);
  ck_assert_int_eq(kc[0], 9);
  ck_assert_int_eq(kshifted[0], 8);
  ck_assert_int_eq(kshifted[1], 1);
  ck_assert_int_eq(kshifted[2], (int64_t)(((uintptr_t)dlop_array_tensor(big)->data + 4) % 256));
  ck_assert_int_ne(kshifted[2], kstrided[2]);
  ck_assert_int_eq(kstrided[1], 2);
  dlop_test_release_arrays(6, a, b, c, big, shifted, strided);
  dlop_function_destroy(function);
}
END_TEST

START_TEST(test_buffers_and_overlap) {
  int64_t shape[2] = {3, 4}, strides[2] = {4, 1};
  float data[12];
  dlop_tensor t = {data, {DLOP_DEVICE_CPU, 0}, 2, {2, 32, 1}, shape, strides, 0};
  dlop__graph_buffer whole = dlop__graph_buffer_of(&t);
  ck_assert_uint_eq(whole.first, (uintptr_t)data);
  ck_assert_uint_eq(whole.low, (uintptr_t)data);
  ck_assert_uint_eq(whole.high, (uintptr_t)(data + 12));
  /* a reversed row order: element 0 is the last row; the span still covers all rows */
  int64_t reversed[2] = {-4, 1};
  dlop_tensor r = {data, {DLOP_DEVICE_CPU, 0}, 2, {2, 32, 1}, shape, reversed, 8 * sizeof(float)};
  dlop__graph_buffer back = dlop__graph_buffer_of(&r);
  ck_assert_uint_eq(back.first, (uintptr_t)(data + 8));
  ck_assert_uint_eq(back.low, (uintptr_t)data);
  ck_assert_uint_eq(back.high, (uintptr_t)(data + 12));
  /* columns 1..2 of the first row and columns 2..3: they share element 2 */
  int64_t two = 2, unit = 1;
  dlop_tensor left = {data, {DLOP_DEVICE_CPU, 0}, 1, {2, 32, 1}, &two, &unit, 1 * sizeof(float)};
  dlop_tensor right = {data, {DLOP_DEVICE_CPU, 0}, 1, {2, 32, 1}, &two, &unit, 2 * sizeof(float)};
  dlop_tensor far = {data, {DLOP_DEVICE_CPU, 0}, 1, {2, 32, 1}, &two, &unit, 6 * sizeof(float)};
  dlop__graph_buffer set[3] = {dlop__graph_buffer_of(&left), dlop__graph_buffer_of(&right),
                               dlop__graph_buffer_of(&far)};
  ck_assert_int_eq(dlop__graph_buffers_overlap(set, 3), 1);
  ck_assert_int_eq(dlop__graph_buffers_overlap(set + 1, 2), 0);
  /* an empty tensor spans nothing and overlaps nothing */
  int64_t zero = 0;
  dlop_tensor empty = {data + 2, {DLOP_DEVICE_CPU, 0}, 1, {2, 32, 1}, &zero, &unit, 0};
  dlop__graph_buffer with_empty[2] = {dlop__graph_buffer_of(&right), dlop__graph_buffer_of(&empty)};
  ck_assert_uint_eq(with_empty[1].low, with_empty[1].high);
  ck_assert_int_eq(dlop__graph_buffers_overlap(with_empty, 2), 0);
}
END_TEST

/* Arguments as a kernel's: (int32 n, pad, pointer x, pointer y + 16 bytes, a struct of two
 * int32 whose halves put together look like an address, double) — only whole words of one
 * argument at 8-byte offsets that point inside a buffer are patched. */
START_TEST(test_patches_follow_addresses) {
  unsigned char bytes[48];
  memset(bytes, 0, sizeof bytes);
  dlop__graph_buffer buffers[2] = {{0x7f0000001000u, 0x7f0000001000u, 0x7f0000002000u},
                                   {0x7f0000010000u, 0x7f0000010000u, 0x7f0000010400u}};
  int32_t n = 1000;
  uint64_t x = 0x7f0000001000u, y = 0x7f0000010010u;
  uint32_t halves[2] = {0x00001800u, 0x7f00u}; /* 0x7f0000001800 as one word: in buffer 0 */
  double scale = 2.5;
  memcpy(bytes + 0, &n, 4);
  memcpy(bytes + 8, &x, 8);
  memcpy(bytes + 16, &y, 8);
  memcpy(bytes + 24, halves, 8);
  memcpy(bytes + 32, &scale, 8);
  const size_t params[6][2] = {{0, 4}, {8, 8}, {16, 8}, {24, 4}, {28, 4}, {32, 8}};
  dlop__graph_patch *patches = NULL;
  int32_t count = 0;
  DLOP_CK_OK(dlop__graph_find_patches(bytes, params, 6, buffers, 2, &patches, &count));
  ck_assert_int_eq(count, 2);
  ck_assert_uint_eq(patches[0].offset, 8);
  ck_assert_int_eq(patches[0].buffer, 0);
  ck_assert_uint_eq(patches[1].offset, 16);
  ck_assert_int_eq(patches[1].buffer, 1);
  /* the new run's buffers: the first moved down, the second up */
  uint64_t moved[2] = {0x7e0000000000u, 0x7f0000100000u};
  dlop__graph_apply_patches(bytes, patches, count, buffers, moved);
  uint64_t got;
  memcpy(&got, bytes + 8, 8);
  ck_assert_uint_eq(got, 0x7e0000000000u);
  memcpy(&got, bytes + 16, 8);
  ck_assert_uint_eq(got, 0x7f0000100010u); /* keeps its offset into the buffer */
  int32_t n_after;
  memcpy(&n_after, bytes, 4);
  ck_assert_int_eq(n_after, 1000);
  double scale_after;
  memcpy(&scale_after, bytes + 32, 8);
  ck_assert(scale_after == 2.5);
  /* applied again from the captured values, not from the last ones */
  uint64_t back[2] = {buffers[0].first, buffers[1].first};
  dlop__graph_apply_patches(bytes, patches, count, buffers, back);
  memcpy(&got, bytes + 16, 8);
  ck_assert_uint_eq(got, y);
  /* one 8-byte argument holding the pair as a struct is one word, and it is an address */
  const size_t as_struct[1][2] = {{24, 8}};
  DLOP_CK_OK(dlop__graph_find_patches(bytes, as_struct, 1, buffers, 2, &patches, &count));
  ck_assert_int_eq(count, 3);
  ck_assert_uint_eq(patches[2].offset, 24);
  free(patches);
}
END_TEST

#if DLOP_TEST_HAVE_CUDA_H
/* cuda_graph_layout.c, compiled with the toolkit's cuda.h: cuda.h's sizes and offsets. */
extern const size_t dlop_test_cuda_h_layout[];
extern const size_t dlop_test_cuda_h_layout_count;
#endif

START_TEST(test_driver_struct_layouts) {
#if DLOP_TEST_HAVE_CUDA_H
  const size_t ours[] = {
      sizeof(dlop__cuda_kernel_node_params),
      offsetof(dlop__cuda_kernel_node_params, func),
      offsetof(dlop__cuda_kernel_node_params, grid_x),
      offsetof(dlop__cuda_kernel_node_params, block_x),
      offsetof(dlop__cuda_kernel_node_params, shared_bytes),
      offsetof(dlop__cuda_kernel_node_params, kernel_params),
      offsetof(dlop__cuda_kernel_node_params, extra),
      offsetof(dlop__cuda_kernel_node_params, kernel),
      offsetof(dlop__cuda_kernel_node_params, context),
      sizeof(dlop__cuda_memcpy3d),
      offsetof(dlop__cuda_memcpy3d, src_x_bytes),
      offsetof(dlop__cuda_memcpy3d, src_memory_type),
      offsetof(dlop__cuda_memcpy3d, src_device),
      offsetof(dlop__cuda_memcpy3d, src_pitch),
      offsetof(dlop__cuda_memcpy3d, dst_x_bytes),
      offsetof(dlop__cuda_memcpy3d, dst_memory_type),
      offsetof(dlop__cuda_memcpy3d, dst_device),
      offsetof(dlop__cuda_memcpy3d, width_bytes),
      offsetof(dlop__cuda_memcpy3d, depth),
      sizeof(dlop__cuda_memset_node_params),
      offsetof(dlop__cuda_memset_node_params, dst),
      offsetof(dlop__cuda_memset_node_params, value),
      offsetof(dlop__cuda_memset_node_params, element_size),
      offsetof(dlop__cuda_memset_node_params, width),
      offsetof(dlop__cuda_memset_node_params, height),
      DLOP_CUDA_ERROR_INVALID_VALUE,
      DLOP_CU_STREAM_CAPTURE_MODE_RELAXED,
      DLOP_CU_GRAPH_NODE_TYPE_KERNEL,
      DLOP_CU_GRAPH_NODE_TYPE_MEMCPY,
      DLOP_CU_GRAPH_NODE_TYPE_MEMSET,
      DLOP_CU_GRAPH_NODE_TYPE_EMPTY,
      DLOP_CU_MEMORYTYPE_HOST,
      DLOP_CU_MEMORYTYPE_DEVICE,
      DLOP_CU_MEMORYTYPE_UNIFIED,
  };
  ck_assert_uint_eq(sizeof ours / sizeof ours[0], dlop_test_cuda_h_layout_count);
  for (size_t i = 0; i < dlop_test_cuda_h_layout_count; i++)
    ck_assert_msg(ours[i] == dlop_test_cuda_h_layout[i],
                  "entry %zu: libdlop's declaration gives %zu, cuda.h %zu", i, ours[i],
                  dlop_test_cuda_h_layout[i]);
#else
  /* no toolkit here: nothing to compare with (CI and the development machines have one) */
  ck_assert_int_eq(DLOP_TEST_WITH_CUDA, 0);
#endif
}
END_TEST

int main(void) {
  Suite *suite = suite_create("cuda_graph_plan");
  TCase *decisions = dlop_test_tcase(suite, "decisions", 60, graph_setup, graph_teardown);
  dlop_test_add_tests(decisions, test_safe_chain_replays_unless_turned_off,
                      test_node_not_capture_safe_is_named, test_one_kernel_node_saves_nothing,
                      test_view_output_stays_out, test_options_are_checked, NULL);
  TCase *keys = dlop_test_tcase(suite, "keys", 60, graph_setup, graph_teardown);
  dlop_test_add_tests(keys, test_signature_keys, test_buffers_and_overlap,
                      test_patches_follow_addresses, test_driver_struct_layouts, NULL);
  return dlop_test_run_suite(suite);
}
