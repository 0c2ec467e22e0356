/* xla_handler.c — the XLA FFI handler behind dlop.jax, in C against the FFI header jaxlib ships
 * (xla/ffi/api/c_api.h): one custom call runs one dlop op on XLA's own buffers (no copies) and,
 * on CUDA, on the stream XLA hands the call. The op and its parameters travel as attributes
 * ("dlop_op" and "param_<name>"); each distinct op, parameters, input types and device is
 * prepared once (dlop_op_call) and kept for the process (xla_call_cache.c). Built into dlop/_xla_ffi.so
 * only where jaxlib's headers were found when dlop was configured. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dlop.h"
#include "xla/ffi/api/c_api.h"
#include "xla_call_cache.h"

#define EXPORT __attribute__((visibility("default")))

/* ---- errors ------------------------------------------------------------------------------- */

static XLA_FFI_Error *make_error(const XLA_FFI_Api *api, XLA_FFI_Error_Code code,
                                 const char *message) {
  XLA_FFI_Error_Create_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
  args.message = message; /* XLA copies it */
  args.errc = code;
  return api->XLA_FFI_Error_Create(&args);
}

static XLA_FFI_Error *errorf(const XLA_FFI_Api *api, XLA_FFI_Error_Code code, const char *format,
                             ...) __attribute__((format(printf, 3, 4)));
static XLA_FFI_Error *errorf(const XLA_FFI_Api *api, XLA_FFI_Error_Code code, const char *format,
                             ...) {
  char message[2048];
  va_list list;
  va_start(list, format);
  vsnprintf(message, sizeof message, format, list);
  va_end(list);
  return make_error(api, code, message);
}

/* A failed dlop call as XLA's error: the status says which kind, dlop_last_error says what. */
static XLA_FFI_Error *dlop_failure(const XLA_FFI_Api *api, int status) {
  XLA_FFI_Error_Code code = XLA_FFI_Error_Code_INTERNAL;
  switch (status) {
    case DLOP_INVALID_ARGUMENT:
    case DLOP_TYPE_ERROR:
    case DLOP_SHAPE_ERROR:
    case DLOP_DEVICE_MISMATCH: code = XLA_FFI_Error_Code_INVALID_ARGUMENT; break;
    case DLOP_NOT_FOUND: code = XLA_FFI_Error_Code_NOT_FOUND; break;
    case DLOP_UNSUPPORTED: code = XLA_FFI_Error_Code_UNIMPLEMENTED; break;
    case DLOP_NO_DEVICE: code = XLA_FFI_Error_Code_UNAVAILABLE; break;
    case DLOP_OUT_OF_MEMORY: code = XLA_FFI_Error_Code_RESOURCE_EXHAUSTED; break;
    default: break;
  }
  return errorf(api, code, "dlop: %s", dlop_last_error());
}

/* ---- the metadata query ----------------------------------------------------------------- */

/* XLA asks a handler for its FFI version and traits by calling it with a metadata extension. */
static XLA_FFI_Error *fill_metadata(const XLA_FFI_CallFrame *frame, XLA_FFI_Handler_Traits traits) {
  XLA_FFI_Metadata_Extension *extension = (XLA_FFI_Metadata_Extension *)frame->extension_start;
  if (extension->extension_base.struct_size < XLA_FFI_Metadata_Extension_STRUCT_SIZE ||
      extension->metadata == NULL ||
      extension->metadata->struct_size < XLA_FFI_Metadata_STRUCT_SIZE)
    return errorf(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                  "dlop: XLA's metadata query is older than the FFI header dlop was built with");
  XLA_FFI_Metadata *metadata = extension->metadata;
  metadata->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
  metadata->api_version.extension_start = NULL;
  metadata->api_version.major_version = XLA_FFI_API_MAJOR;
  metadata->api_version.minor_version = XLA_FFI_API_MINOR;
  metadata->traits = traits;
  /* state_type_id is past the struct's traits-sized part in older XLAs: write it only where
   * the struct has room (stateless: the unknown type id, 0). */
  if (metadata->struct_size >= offsetof(XLA_FFI_Metadata, state_type_id) +
                                   sizeof metadata->state_type_id)
    metadata->state_type_id.type_id = 0;
  return NULL;
}

/* ---- attributes: the op and its parameters ------------------------------------------------ */

static const char op_attribute[] = "dlop_op";
static const char param_prefix[] = "param_";

static int span_equals(const XLA_FFI_ByteSpan *span, const char *text) {
  size_t n = strlen(text);
  return span->len == n && memcmp(span->ptr, text, n) == 0;
}

/* The op name attribute into name (NUL-terminated). */
static XLA_FFI_Error *read_op_name(const XLA_FFI_CallFrame *frame, char *name, size_t size) {
  const XLA_FFI_Attrs *attrs = &frame->attrs;
  for (int64_t i = 0; i < attrs->size; i++) {
    if (!span_equals(attrs->names[i], op_attribute)) continue;
    const XLA_FFI_ByteSpan *value = (const XLA_FFI_ByteSpan *)attrs->attrs[i];
    if (attrs->types[i] != XLA_FFI_AttrType_STRING || value->len == 0 || value->len >= size)
      break;
    memcpy(name, value->ptr, value->len);
    name[value->len] = '\0';
    return NULL;
  }
  return errorf(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                "dlop: the custom call has no string attribute '%s' naming the op (call dlop ops "
                "through dlop.jax.op)",
                op_attribute);
}

/* One parameter attribute as the op declares it (kind from the declaration): bool as PRED,
 * int as S64, float as F64, string as a string, ints as an S64 array. strings holds copies of
 * string values (NUL-terminated) for the call's lifetime. */
static XLA_FFI_Error *read_param(const XLA_FFI_CallFrame *frame, const dlop_op_desc *op,
                                 int64_t index, dlop_named_param *param, char *strings,
                                 size_t *strings_used, size_t strings_size) {
  const XLA_FFI_Attrs *attrs = &frame->attrs;
  const XLA_FFI_ByteSpan *name = attrs->names[index];
  size_t prefix = sizeof param_prefix - 1;
  const dlop_param_decl *decl = NULL;
  for (int32_t p = 0; p < op->num_params && decl == NULL; p++)
    if (name->len == prefix + strlen(op->params[p].name) &&
        memcmp(name->ptr + prefix, op->params[p].name, name->len - prefix) == 0)
      decl = &op->params[p];
  if (decl == NULL)
    return errorf(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                  "dlop: op '%s' has no parameter '%.*s'", op->name, (int)(name->len - prefix),
                  name->ptr + prefix);
  param->name = decl->name;
  param->value.kind = decl->kind;
  param->value.count = 1;
  XLA_FFI_AttrType type = attrs->types[index];
  const void *value = attrs->attrs[index];
  const XLA_FFI_Scalar *scalar = (const XLA_FFI_Scalar *)value;
  switch (decl->kind) {
    case DLOP_PARAM_BOOL:
      if (type == XLA_FFI_AttrType_SCALAR && scalar->dtype == XLA_FFI_DataType_PRED) {
        param->value.u.i = *(const unsigned char *)scalar->value ? 1 : 0;
        return NULL;
      }
      break;
    case DLOP_PARAM_INT:
      if (type == XLA_FFI_AttrType_SCALAR && scalar->dtype == XLA_FFI_DataType_S64) {
        memcpy(&param->value.u.i, scalar->value, sizeof(int64_t));
        return NULL;
      }
      break;
    case DLOP_PARAM_FLOAT:
      if (type == XLA_FFI_AttrType_SCALAR && scalar->dtype == XLA_FFI_DataType_F64) {
        memcpy(&param->value.u.f, scalar->value, sizeof(double));
        return NULL;
      }
      break;
    case DLOP_PARAM_STRING:
      if (type == XLA_FFI_AttrType_STRING) {
        const XLA_FFI_ByteSpan *text = (const XLA_FFI_ByteSpan *)value;
        if (*strings_used + text->len + 1 > strings_size)
          return errorf(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                        "dlop: op '%s': the string parameters are longer than %zu bytes",
                        op->name, strings_size);
        char *copy = strings + *strings_used;
        memcpy(copy, text->ptr, text->len);
        copy[text->len] = '\0';
        *strings_used += text->len + 1;
        param->value.u.s = copy;
        return NULL;
      }
      break;
    case DLOP_PARAM_INTS:
      if (type == XLA_FFI_AttrType_ARRAY) {
        const XLA_FFI_Array *array = (const XLA_FFI_Array *)value;
        if (array->dtype == XLA_FFI_DataType_S64) {
          param->value.count = (int32_t)array->size;
          param->value.u.ints = (const int64_t *)array->data;
          return NULL;
        }
      }
      break;
    default: break;
  }
  return errorf(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                "dlop: op '%s': parameter '%s' is declared %s but its attribute has another type "
                "(dlop.jax passes bool as bool, int as int64, float as float64, ints as an int64 "
                "array)",
                op->name, decl->name, dlop_param_kind_name(decl->kind));
}

/* ---- buffers ------------------------------------------------------------------------------ */

static dlop_dtype dtype_of(XLA_FFI_DataType dtype) {
  switch (dtype) {
    case XLA_FFI_DataType_PRED: return DLOP_BOOL;
    case XLA_FFI_DataType_S8: return DLOP_INT8;
    case XLA_FFI_DataType_S16: return DLOP_INT16;
    case XLA_FFI_DataType_S32: return DLOP_INT32;
    case XLA_FFI_DataType_S64: return DLOP_INT64;
    case XLA_FFI_DataType_U8: return DLOP_UINT8;
    case XLA_FFI_DataType_F16: return DLOP_FLOAT16;
    case XLA_FFI_DataType_BF16: return DLOP_BFLOAT16;
    case XLA_FFI_DataType_F32: return DLOP_FLOAT32;
    case XLA_FFI_DataType_F64: return DLOP_FLOAT64;
    default: return DLOP_DTYPE_INVALID;
  }
}

/* XLA buffers are dense and row-major (dlop.jax asks for default layouts): NULL strides. */
static XLA_FFI_Error *read_buffers(const XLA_FFI_CallFrame *frame, const char *op_name,
                                   const char *role, int64_t count, void *const *buffers,
                                   const int *is_buffer, dlop_tensor *tensors,
                                   dlop_device device) {
  for (int64_t i = 0; i < count; i++) {
    const XLA_FFI_Buffer *buffer = (const XLA_FFI_Buffer *)buffers[i];
    if (!is_buffer[i] || buffer->rank > DLOP_MAX_NDIM)
      return errorf(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "dlop: op '%s': %s %lld is not a buffer of at most %d dimensions", op_name,
                    role, (long long)i, DLOP_MAX_NDIM);
    dlop_dtype dtype = dtype_of(buffer->dtype);
    if (dtype == DLOP_DTYPE_INVALID)
      return errorf(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "dlop: op '%s': %s %lld has XLA type %d, which dlop has no dtype for (dlop: "
                    "bool, int8, int16, int32, int64, uint8, float16, bfloat16, float32, float64)",
                    op_name, role, (long long)i, (int)buffer->dtype);
    memset(&tensors[i], 0, sizeof tensors[i]);
    tensors[i].data = buffer->data;
    tensors[i].device = device;
    tensors[i].ndim = (int32_t)buffer->rank;
    tensors[i].dtype = dlop_dtype_to_dl(dtype);
    tensors[i].shape = buffer->dims;
  }
  return NULL;
}

/* ---- devices and streams ------------------------------------------------------------------ */

/* The CUDA device of the call: XLA's device ordinal where the API has it, else the device that
 * owns the first non-empty buffer. */
static XLA_FFI_Error *cuda_device(const XLA_FFI_CallFrame *frame, const dlop_tensor *tensors,
                                  int64_t count, dlop_device *device) {
  const XLA_FFI_Api *api = frame->api;
  device->type = DLOP_DEVICE_CUDA;
  device->id = 0;
  size_t needed = offsetof(XLA_FFI_Api, XLA_FFI_DeviceOrdinal_Get) + sizeof(void *);
  if (api->struct_size >= needed && api->XLA_FFI_DeviceOrdinal_Get != NULL) {
    XLA_FFI_DeviceOrdinal_Get_Args args;
    memset(&args, 0, sizeof args);
    args.struct_size = XLA_FFI_DeviceOrdinal_Get_Args_STRUCT_SIZE;
    args.ctx = frame->ctx;
    XLA_FFI_Error *error = api->XLA_FFI_DeviceOrdinal_Get(&args);
    if (error == NULL) {
      device->id = args.device_ordinal;
      return NULL;
    }
    XLA_FFI_Error_Destroy_Args destroy = {XLA_FFI_Error_Destroy_Args_STRUCT_SIZE, NULL, error};
    api->XLA_FFI_Error_Destroy(&destroy);
  }
  for (int64_t i = 0; i < count; i++) {
    if (tensors[i].data == NULL) continue;
    int status = dlop_cuda_pointer_device(tensors[i].data, &device->id);
    return status == DLOP_OK ? NULL : dlop_failure(api, status);
  }
  return NULL; /* nothing to read or write: any device will do */
}

static XLA_FFI_Error *xla_stream(const XLA_FFI_CallFrame *frame, void **stream) {
  XLA_FFI_Stream_Get_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = XLA_FFI_Stream_Get_Args_STRUCT_SIZE;
  args.ctx = frame->ctx;
  XLA_FFI_Error *error = frame->api->XLA_FFI_Stream_Get(&args);
  if (error != NULL) return error;
  *stream = args.stream;
  return NULL;
}

/* ---- the call ------------------------------------------------------------------------------ */
/* One function for XLA's initialize and execute stages (and its metadata query): both read the
 * frame and find or prepare the call; only execute runs it. */

#define MAX_TENSORS 64
#define MAX_PARAMS 32
#define STRING_BYTES 4096

static XLA_FFI_Error *execute(XLA_FFI_CallFrame *frame, int cuda, XLA_FFI_Handler_Traits traits) {
  if (frame->struct_size < XLA_FFI_CallFrame_STRUCT_SIZE)
    return make_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "dlop: XLA's call frame is older than the FFI header dlop was built with");
  if (frame->extension_start != NULL && frame->extension_start->type == XLA_FFI_Extension_Metadata)
    return fill_metadata(frame, traits);
  /* Initialize (before the first execution, outside any command-buffer capture) prepares the
   * call: make_thunk may load CUDA modules, which a capture must not see. Execute runs it. */
  int initialize = frame->stage == XLA_FFI_ExecutionStage_INITIALIZE;
  if (!initialize && frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
  const XLA_FFI_Api *api = frame->api;

  char op_name[256];
  XLA_FFI_Error *error = read_op_name(frame, op_name, sizeof op_name);
  if (error != NULL) return error;
  int64_t num_inputs = frame->args.size, num_outputs = frame->rets.size;
  if (num_inputs + num_outputs > MAX_TENSORS)
    return errorf(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                  "dlop: op '%s': %lld inputs and outputs, more than the %d one call takes",
                  op_name, (long long)(num_inputs + num_outputs), MAX_TENSORS);
  dlop_tensor tensors[MAX_TENSORS];
  int is_buffer[MAX_TENSORS];
  dlop_device device = {DLOP_DEVICE_CPU, 0};
  for (int64_t i = 0; i < num_inputs; i++) is_buffer[i] = frame->args.types[i] == XLA_FFI_ArgType_BUFFER;
  for (int64_t i = 0; i < num_outputs; i++)
    is_buffer[num_inputs + i] = frame->rets.types[i] == XLA_FFI_RetType_BUFFER;
  error = read_buffers(frame, op_name, "input", num_inputs, frame->args.args, is_buffer, tensors,
                       device);
  if (error == NULL)
    error = read_buffers(frame, op_name, "output", num_outputs, frame->rets.rets,
                         is_buffer + num_inputs, tensors + num_inputs, device);
  if (error == NULL && cuda) error = cuda_device(frame, tensors, num_inputs + num_outputs, &device);
  if (error != NULL) return error;
  for (int64_t i = 0; i < num_inputs + num_outputs; i++) tensors[i].device = device;

  /* the prepared call for this op, parameters, input types and device */
  dlop__xla_call_key key;
  dlop__xla_call_key_init(&key, op_name, device);
  for (int64_t i = 0; i < frame->attrs.size; i++) {
    const XLA_FFI_ByteSpan *name = frame->attrs.names[i];
    if (name->len >= sizeof param_prefix - 1 &&
        memcmp(name->ptr, param_prefix, sizeof param_prefix - 1) == 0)
      dlop__xla_call_key_add_attribute(&key, name->ptr, name->len, (int)frame->attrs.types[i],
                                       frame->attrs.attrs[i]);
  }
  for (int64_t i = 0; i < num_inputs; i++) dlop__xla_call_key_add_tensor(&key, &tensors[i]);
  const dlop_op_call *call = dlop__xla_call_find(&key);
  if (call == NULL) {
    if (key.overflow) {
      return errorf(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "dlop: op '%s': its parameters are too large to key a prepared call "
                    "(at most %d bytes of parameter values)",
                    op_name, DLOP__XLA_CALL_KEY_BYTES);
    }
    dlop_load_default_plugins();
    const dlop_op_desc *op = dlop_find_op(op_name);
    if (op == NULL)
      return errorf(api, XLA_FFI_Error_Code_NOT_FOUND,
                    "dlop: no loaded op is named '%s' (load its plugin with dlop.load_plugin)",
                    op_name);
    dlop_named_param params[MAX_PARAMS];
    char strings[STRING_BYTES];
    size_t strings_used = 0;
    int32_t num_params = 0;
    for (int64_t i = 0; error == NULL && i < frame->attrs.size; i++) {
      const XLA_FFI_ByteSpan *name = frame->attrs.names[i];
      if (name->len < sizeof param_prefix - 1 ||
          memcmp(name->ptr, param_prefix, sizeof param_prefix - 1) != 0)
        continue;
      if (num_params == MAX_PARAMS)
        error = errorf(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                       "dlop: op '%s': more than %d parameters", op_name, MAX_PARAMS);
      else
        error = read_param(frame, op, i, &params[num_params++], strings, &strings_used,
                           sizeof strings);
    }
    dlop_type types[MAX_TENSORS];
    for (int64_t i = 0; error == NULL && i < num_inputs; i++) {
      memset(&types[i], 0, sizeof types[i]);
      types[i].dtype = (int32_t)dlop_tensor_dtype(&tensors[i]);
      types[i].ndim = tensors[i].ndim;
      memcpy(types[i].shape, tensors[i].shape, sizeof(int64_t) * (size_t)tensors[i].ndim);
    }
    dlop_op_call *created = NULL;
    int status = DLOP_OK;
    if (error == NULL) {
      status = dlop_op_call_create(op_name, types, (int32_t)num_inputs, params, num_params, device,
                                   &created);
      if (status != DLOP_OK) error = dlop_failure(api, status);
    }
    if (error == NULL && (traits & XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE) &&
        dlop_op_call_workspace_bytes(created) > 0) {
      dlop_op_call_destroy(created);
      created = NULL;
      error = errorf(api, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                     "dlop: op '%s' needs a workspace on CUDA, which cannot be allocated inside "
                     "XLA's command buffers; it must be called through the target without the "
                     "command-buffer trait (dlop.jax picks it for non-elementwise ops)",
                     op_name);
    }
    if (error != NULL) return error;
    call = dlop__xla_call_insert(&key, created); /* takes the call */
    if (call == NULL)
      return errorf(api, XLA_FFI_Error_Code_RESOURCE_EXHAUSTED,
                    "dlop: out of host memory keeping the prepared call of op '%s'", op_name);
  }

  if (initialize) return NULL;
  dlop_stream *stream = NULL;
  int status = DLOP_OK;
  if (cuda) {
    void *handle = NULL;
    error = xla_stream(frame, &handle);
    if (error != NULL) return error;
    status = dlop_stream_wrap(device, handle, &stream);
    if (status != DLOP_OK) return dlop_failure(api, status);
  }
  status = dlop_op_call_run(call, tensors, (int32_t)num_inputs, tensors + num_inputs,
                            (int32_t)num_outputs, stream);
  dlop_stream_destroy(stream);
  return status == DLOP_OK ? NULL : dlop_failure(api, status);
}

EXPORT XLA_FFI_Error *dlop_xla_call_cpu(XLA_FFI_CallFrame *frame) { return execute(frame, 0, 0); }

EXPORT XLA_FFI_Error *dlop_xla_call_cuda(XLA_FFI_CallFrame *frame) { return execute(frame, 1, 0); }

/* For elementwise ops declared DLOP_OP_CUDA_GRAPH_SAFE: XLA may record the call into a command
 * buffer (a CUDA graph) and replay it; such a call allocates nothing and launches the same
 * kernels every time. */
EXPORT XLA_FFI_Error *dlop_xla_call_cuda_graph_safe(XLA_FFI_CallFrame *frame) {
  return execute(frame, 1, XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE);
}

/* The FFI version this handler was built against: (major << 16) | minor, for dlop.jax's
 * messages. */
EXPORT int dlop_xla_ffi_version(void) { return (XLA_FFI_API_MAJOR << 16) | XLA_FFI_API_MINOR; }
