/* test_abi_layout.c — pins every frozen layout of the ABI (LP64): offsets and sizes of the
 * structs that cross the plugin boundary, DLPack compatibility of the tensor descriptor, frozen
 * enum values, and the host API table libdlop hands out. A failing static_assert here means an
 * ABI break: bump DLOP_ABI_MAJOR or put the field back. */
#include <assert.h>
#include <stddef.h>
#include <string.h>

#include "test_support.h"

#define PIN(type, field, offset) static_assert(offsetof(type, field) == (offset), #type "." #field)
#define SIZE(type, size) static_assert(sizeof(type) == (size), "sizeof " #type)

static_assert(sizeof(void *) == 8 && sizeof(size_t) == 8, "these pins are for LP64 targets");

/* DLPack's DLDevice, DLDataType and DLTensor. */
SIZE(dlop_device, 8);
PIN(dlop_device, type, 0);
PIN(dlop_device, id, 4);
SIZE(dlop_dl_dtype, 4);
PIN(dlop_dl_dtype, code, 0);
PIN(dlop_dl_dtype, bits, 1);
PIN(dlop_dl_dtype, lanes, 2);
SIZE(dlop_tensor, 48);
PIN(dlop_tensor, data, 0);
PIN(dlop_tensor, device, 8);
PIN(dlop_tensor, ndim, 16);
PIN(dlop_tensor, dtype, 20);
PIN(dlop_tensor, shape, 24);
PIN(dlop_tensor, strides, 32);
PIN(dlop_tensor, byte_offset, 40);

SIZE(dlop_type, 8 + 8 * DLOP_MAX_NDIM);
PIN(dlop_type, dtype, 0);
PIN(dlop_type, ndim, 4);
PIN(dlop_type, shape, 8);

SIZE(dlop_param_value, 16);
PIN(dlop_param_value, kind, 0);
PIN(dlop_param_value, count, 4);
PIN(dlop_param_value, u, 8);
SIZE(dlop_param_decl, 40);
PIN(dlop_param_decl, name, 0);
PIN(dlop_param_decl, kind, 8);
PIN(dlop_param_decl, reserved, 12);
PIN(dlop_param_decl, doc, 16);
PIN(dlop_param_decl, default_value, 24);

SIZE(dlop_op_desc, 136);
PIN(dlop_op_desc, struct_size, 0);
PIN(dlop_op_desc, flags, 4);
PIN(dlop_op_desc, name, 8);
PIN(dlop_op_desc, doc, 16);
PIN(dlop_op_desc, num_inputs, 24);
PIN(dlop_op_desc, num_outputs, 28);
PIN(dlop_op_desc, params, 32);
PIN(dlop_op_desc, num_params, 40);
PIN(dlop_op_desc, cpu_dtypes, 44);
PIN(dlop_op_desc, cuda_dtypes, 48);
PIN(dlop_op_desc, reserved, 52);
PIN(dlop_op_desc, inplace_map, 56);
PIN(dlop_op_desc, view_map, 64);
PIN(dlop_op_desc, make_node, 72);
PIN(dlop_op_desc, infer_shape, 80);
PIN(dlop_op_desc, make_thunk, 88);
PIN(dlop_op_desc, op_data, 96);
/* ABI 1.1 appended make_view; 1.0 plugins' descriptors end at op_data (104 bytes). */
PIN(dlop_op_desc, make_view, 104);
/* ABI 1.2 appended scalar_body; 1.1 plugins' descriptors end at make_view (112 bytes). */
PIN(dlop_op_desc, scalar_body, 112);
/* ABI 1.2 then appended reduce_body; descriptors built before it end at scalar_body (120). */
PIN(dlop_op_desc, reduce_body, 120);
/* ABI 1.2 also appended runtime_info after reduce_body; descriptors that end before it read it as NULL. */
PIN(dlop_op_desc, runtime_info, 128);

/* ABI 1.2: the runtime_info stage's arguments. */
SIZE(dlop_runtime_info_args, 48);
PIN(dlop_runtime_info_args, struct_size, 0);
PIN(dlop_runtime_info_args, device_type, 4);
PIN(dlop_runtime_info_args, op, 8);
PIN(dlop_runtime_info_args, text, 16);
PIN(dlop_runtime_info_args, text_size, 24);
PIN(dlop_runtime_info_args, error, 32);
PIN(dlop_runtime_info_args, error_size, 40);

/* ABI 1.2: the scalar_body stage's arguments. */
SIZE(dlop_scalar_body_args, 128);
PIN(dlop_scalar_body_args, struct_size, 0);
PIN(dlop_scalar_body_args, reserved, 4);
PIN(dlop_scalar_body_args, op, 8);
PIN(dlop_scalar_body_args, params, 16);
PIN(dlop_scalar_body_args, num_params, 24);
PIN(dlop_scalar_body_args, num_inputs, 28);
PIN(dlop_scalar_body_args, inputs, 32);
PIN(dlop_scalar_body_args, outputs, 40);
PIN(dlop_scalar_body_args, num_outputs, 48);
PIN(dlop_scalar_body_args, flags, 52);
PIN(dlop_scalar_body_args, code, 56);
PIN(dlop_scalar_body_args, code_buffer, 64);
PIN(dlop_scalar_body_args, code_buffer_size, 72);
PIN(dlop_scalar_body_args, prelude, 80);
PIN(dlop_scalar_body_args, prelude_name, 88);
PIN(dlop_scalar_body_args, input_compute_dtypes, 96);
PIN(dlop_scalar_body_args, output_compute_dtypes, 104);
PIN(dlop_scalar_body_args, error, 112);
PIN(dlop_scalar_body_args, error_size, 120);

/* ABI 1.2: the reduce_body stage's arguments. */
SIZE(dlop_reduce_body_args, 136);
PIN(dlop_reduce_body_args, struct_size, 0);
PIN(dlop_reduce_body_args, reserved, 4);
PIN(dlop_reduce_body_args, op, 8);
PIN(dlop_reduce_body_args, params, 16);
PIN(dlop_reduce_body_args, num_params, 24);
PIN(dlop_reduce_body_args, reserved2, 28);
PIN(dlop_reduce_body_args, input, 32);
PIN(dlop_reduce_body_args, output, 40);
PIN(dlop_reduce_body_args, axes, 48);
PIN(dlop_reduce_body_args, keepdims, 52);
PIN(dlop_reduce_body_args, accumulator_dtype, 56);
PIN(dlop_reduce_body_args, output_compute_dtype, 60);
PIN(dlop_reduce_body_args, identity, 64);
PIN(dlop_reduce_body_args, combine, 72);
PIN(dlop_reduce_body_args, finalize, 80);
PIN(dlop_reduce_body_args, code_buffer, 88);
PIN(dlop_reduce_body_args, code_buffer_size, 96);
PIN(dlop_reduce_body_args, prelude, 104);
PIN(dlop_reduce_body_args, prelude_name, 112);
PIN(dlop_reduce_body_args, error, 120);
PIN(dlop_reduce_body_args, error_size, 128);

/* ABI 1.1: the make_view stage's arguments. */
SIZE(dlop_view_args, 104);
PIN(dlop_view_args, struct_size, 0);
PIN(dlop_view_args, reserved, 4);
PIN(dlop_view_args, op, 8);
PIN(dlop_view_args, params, 16);
PIN(dlop_view_args, num_params, 24);
PIN(dlop_view_args, output_index, 28);
PIN(dlop_view_args, input_index, 32);
PIN(dlop_view_args, reserved2, 36);
PIN(dlop_view_args, input, 40);
PIN(dlop_view_args, output, 48);
PIN(dlop_view_args, output_strides, 56);
PIN(dlop_view_args, output_byte_offset, 64);
PIN(dlop_view_args, needs_contiguous, 72);
PIN(dlop_view_args, reserved3, 80);
PIN(dlop_view_args, error, 88);
PIN(dlop_view_args, error_size, 96);

SIZE(dlop_node_args, 72);
PIN(dlop_node_args, struct_size, 0);
PIN(dlop_node_args, reserved, 4);
PIN(dlop_node_args, op, 8);
PIN(dlop_node_args, params, 16);
PIN(dlop_node_args, num_params, 24);
PIN(dlop_node_args, num_inputs, 28);
PIN(dlop_node_args, inputs, 32);
PIN(dlop_node_args, outputs, 40);
PIN(dlop_node_args, num_outputs, 48);
PIN(dlop_node_args, reserved2, 52);
PIN(dlop_node_args, error, 56);
PIN(dlop_node_args, error_size, 64);

SIZE(dlop_run_args, 72);
PIN(dlop_run_args, struct_size, 0);
PIN(dlop_run_args, reserved, 4);
PIN(dlop_run_args, inputs, 8);
PIN(dlop_run_args, num_inputs, 16);
PIN(dlop_run_args, num_outputs, 20);
PIN(dlop_run_args, outputs, 24);
PIN(dlop_run_args, stream, 32);
PIN(dlop_run_args, workspace, 40);
PIN(dlop_run_args, workspace_bytes, 48);
PIN(dlop_run_args, error, 56);
PIN(dlop_run_args, error_size, 64);

SIZE(dlop_thunk, 40);
PIN(dlop_thunk, struct_size, 0);
PIN(dlop_thunk, reserved, 4);
PIN(dlop_thunk, state, 8);
PIN(dlop_thunk, run, 16);
PIN(dlop_thunk, destroy, 24);
PIN(dlop_thunk, workspace_bytes, 32);

SIZE(dlop_thunk_args, 88);
PIN(dlop_thunk_args, struct_size, 0);
PIN(dlop_thunk_args, reserved, 4);
PIN(dlop_thunk_args, op, 8);
PIN(dlop_thunk_args, params, 16);
PIN(dlop_thunk_args, num_params, 24);
PIN(dlop_thunk_args, num_inputs, 28);
PIN(dlop_thunk_args, inputs, 32);
PIN(dlop_thunk_args, outputs, 40);
PIN(dlop_thunk_args, num_outputs, 48);
PIN(dlop_thunk_args, device, 52);
PIN(dlop_thunk_args, thunk, 64);
PIN(dlop_thunk_args, error, 72);
PIN(dlop_thunk_args, error_size, 80);

/* In-process plugins and ops from source: struct_size structs, appended only. */
SIZE(dlop_inprocess_plugin, 32);
PIN(dlop_inprocess_plugin, struct_size, 0);
PIN(dlop_inprocess_plugin, reserved, 4);
PIN(dlop_inprocess_plugin, origin, 8);
PIN(dlop_inprocess_plugin, init, 16);
PIN(dlop_inprocess_plugin, descriptor, 24);
SIZE(dlop_elementwise_source, 72);
PIN(dlop_elementwise_source, struct_size, 0);
PIN(dlop_elementwise_source, dtypes, 4);
PIN(dlop_elementwise_source, name, 8);
PIN(dlop_elementwise_source, doc, 16);
PIN(dlop_elementwise_source, body, 24);
PIN(dlop_elementwise_source, inputs, 32);
PIN(dlop_elementwise_source, outputs, 40);
PIN(dlop_elementwise_source, params, 48);
PIN(dlop_elementwise_source, num_inputs, 56);
PIN(dlop_elementwise_source, num_outputs, 60);
PIN(dlop_elementwise_source, num_params, 64);
PIN(dlop_elementwise_source, reserved, 68);

SIZE(dlop_host_api, 136);
PIN(dlop_host_api, struct_size, 0);
PIN(dlop_host_api, abi_version, 4);
PIN(dlop_host_api, log, 8);
PIN(dlop_host_api, memory_alloc, 16);
PIN(dlop_host_api, memory_free, 24);
PIN(dlop_host_api, parallel_for, 32);
PIN(dlop_host_api, cpu_threads, 40);
PIN(dlop_host_api, cuda_module_load, 48);
PIN(dlop_host_api, cuda_module_unload, 56);
PIN(dlop_host_api, cuda_module_function, 64);
PIN(dlop_host_api, cuda_launch, 72);
PIN(dlop_host_api, cuda_device_attribute, 80);
PIN(dlop_host_api, cuda_memcpy_async, 88);
PIN(dlop_host_api, cuda_memset_async, 96);
PIN(dlop_host_api, cuda_stream_synchronize, 104);
PIN(dlop_host_api, cublas_handle, 112);
PIN(dlop_host_api, cublas_symbol, 120);
PIN(dlop_host_api, cuda_compile, 128); /* ABI 1.2 */

SIZE(dlop_plugin_desc, 48);
PIN(dlop_plugin_desc, struct_size, 0);
PIN(dlop_plugin_desc, abi_version, 4);
PIN(dlop_plugin_desc, name, 8);
PIN(dlop_plugin_desc, version, 16);
PIN(dlop_plugin_desc, doc, 24);
PIN(dlop_plugin_desc, ops, 32);
PIN(dlop_plugin_desc, num_ops, 40);
PIN(dlop_plugin_desc, reserved, 44);

SIZE(dlop_memory_stats, 48);
PIN(dlop_memory_stats, struct_size, 0);
PIN(dlop_memory_stats, reserved, 4);
PIN(dlop_memory_stats, bytes_in_use, 8);
PIN(dlop_memory_stats, bytes_cached, 16);
PIN(dlop_memory_stats, peak_bytes_in_use, 24);
PIN(dlop_memory_stats, driver_allocations, 32);
PIN(dlop_memory_stats, driver_frees, 40);

/* The compile options (graph.h): fields are appended, each read only when struct_size covers it. */
SIZE(dlop_function_options, 12);
PIN(dlop_function_options, struct_size, 0);
PIN(dlop_function_options, cuda_graphs, 4);
PIN(dlop_function_options, fuse, 8);

/* Frozen enum values (they appear in plugin binaries and dtype masks). */
static_assert(DLOP_BOOL == 0 && DLOP_INT8 == 1 && DLOP_INT16 == 2 && DLOP_INT32 == 3 &&
                  DLOP_INT64 == 4 && DLOP_UINT8 == 5 && DLOP_FLOAT16 == 6 &&
                  DLOP_BFLOAT16 == 7 && DLOP_FLOAT32 == 8 && DLOP_FLOAT64 == 9,
              "dtype numbering");
static_assert(DLOP_DEVICE_CPU == 1 && DLOP_DEVICE_CUDA == 2, "DLPack device codes");
static_assert(DLOP_DL_INT == 0 && DLOP_DL_UINT == 1 && DLOP_DL_FLOAT == 2 && DLOP_DL_BFLOAT == 4 &&
                  DLOP_DL_BOOL == 6,
              "DLPack type codes");
static_assert(DLOP_PARAM_BOOL == 1 && DLOP_PARAM_INT == 2 && DLOP_PARAM_FLOAT == 3 &&
                  DLOP_PARAM_STRING == 4 && DLOP_PARAM_INTS == 5,
              "param kinds");
static_assert(DLOP_OP_DETERMINISTIC == 1 && DLOP_OP_CUDA_GRAPH_SAFE == 2 &&
                  DLOP_OP_NEEDS_CONTIGUOUS_INPUTS == 4,
              "op flags");
static_assert(DLOP_LOG_DEBUG == 0 && DLOP_LOG_INFO == 1 && DLOP_LOG_WARNING == 2 &&
                  DLOP_LOG_ERROR == 3,
              "log levels");
static_assert(DLOP_OK == 0 && DLOP_INVALID_ARGUMENT == -1 && DLOP_OUT_OF_MEMORY == -4 &&
                  DLOP_NO_DEVICE == -5 && DLOP_CUDA_ERROR == -12 && DLOP_INTERNAL == -16,
              "status values");
static_assert(DLOP_ABI_VERSION == ((DLOP_ABI_MAJOR << 16) | DLOP_ABI_MINOR), "ABI version packing");

START_TEST(test_host_table_is_complete) {
  const dlop_host_api *host = dlop_host_api_table();
  ck_assert_ptr_nonnull(host);
  ck_assert_uint_eq(host->struct_size, sizeof(dlop_host_api));
  ck_assert_uint_eq(host->abi_version, DLOP_ABI_VERSION);
  ck_assert_uint_eq(dlop_abi_version(), DLOP_ABI_VERSION);
  /* Every slot of this ABI version is filled. */
  const void *const *slots = (const void *const *)((const char *)host + offsetof(dlop_host_api, log));
  size_t count = (sizeof(dlop_host_api) - offsetof(dlop_host_api, log)) / sizeof(void *);
  ck_assert_uint_eq(count, 16);
  for (size_t i = 0; i < count; i++) ck_assert_msg(slots[i] != NULL, "host API slot %zu is NULL", i);
  ck_assert(DLOP_HOST_HAS(host, cublas_symbol));
  ck_assert(DLOP_HOST_HAS(host, cuda_compile));
}
END_TEST

START_TEST(test_host_has_honours_struct_size) {
  /* A host from an older minor: its table ends before the CUDA slots. */
  dlop_host_api old = *dlop_host_api_table();
  old.struct_size = (uint32_t)offsetof(dlop_host_api, cuda_module_load);
  ck_assert(DLOP_HOST_HAS(&old, cpu_threads));
  ck_assert(!DLOP_HOST_HAS(&old, cuda_module_load));
  ck_assert(!DLOP_HOST_HAS(&old, cublas_symbol));
  old.struct_size = sizeof old;
  old.log = NULL;
  ck_assert(!DLOP_HOST_HAS(&old, log));
  ck_assert(!DLOP_HOST_HAS((const dlop_host_api *)NULL, log));
}
END_TEST

START_TEST(test_tensor_helpers_follow_dlpack_rules) {
  int64_t shape[3] = {2, 3, 4}, strides[3] = {12, 4, 1};
  float data[24];
  dlop_tensor t = {data, {DLOP_DEVICE_CPU, 0}, 3, {DLOP_DL_FLOAT, 32, 1}, shape, strides, 8};
  ck_assert_int_eq(dlop_tensor_dtype(&t), DLOP_FLOAT32);
  ck_assert_int_eq(dlop_tensor_numel(&t), 24);
  ck_assert(dlop_tensor_is_contiguous(&t));
  ck_assert_ptr_eq(dlop_tensor_base(&t), (char *)data + 8);
  strides[2] = 2;
  ck_assert(!dlop_tensor_is_contiguous(&t));
  t.strides = NULL;
  ck_assert(dlop_tensor_is_contiguous(&t));
  t.dtype.lanes = 4;
  ck_assert_int_eq(dlop_tensor_dtype(&t), DLOP_DTYPE_INVALID);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("abi_layout");
  TCase *tc = tcase_create("abi_layout");
  tcase_add_test(tc, test_host_table_is_complete);
  tcase_add_test(tc, test_host_has_honours_struct_size);
  tcase_add_test(tc, test_tensor_helpers_follow_dlpack_rules);
  suite_add_tcase(suite, tc);
  return dlop_test_run_suite(suite);
}
