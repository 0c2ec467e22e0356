// torch_kernels.cpp — dlop ops as kernels of PyTorch's own dispatcher, in C++: the CPU and CUDA
// kernel of torch.ops.dlop.<name> (reads the tensors, prepares one dlop_op_call per signature,
// allocates outputs through PyTorch's allocator, runs the plugin's thunk on PyTorch's current
// stream) and its autograd kernel (records a node that refuses backward, naming the op).
// Why C++: a kernel written in Python costs PyTorch's dispatcher a trip into the interpreter,
// and an autograd kernel written in Python another, 12 µs together on the H200's host, more
// than torch.exp's whole call. Built against the PyTorch that the build's Python imports
// (dlop/_torch_kernels.so); dlop.torch uses it when that PyTorch is the one loaded, else its
// kernels in Python (dlop/torch.py says which).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/Exceptions.h>
#include <torch/library.h>

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "dlop/op_call.h"
#include "dlop/runtime.h"

#ifdef DLOP_TORCH_CUDA
// PyTorch's current CUstream of a device, from libtorch_cuda's C shim (its header declares it
// only when compiled with CUDA's headers, which this file does not need otherwise).
extern "C" int32_t aoti_torch_get_current_cuda_stream(int32_t device_index, void **ret_stream);
#endif

namespace {

// dlop.torch's raise_status (dlop._C.raise_status): raises dlop's exception class for a status.
PyObject *raise_status_function = nullptr;

// Raise dlop's exception for status (message, or libdlop's last error on this thread when
// empty) through PyTorch's dispatcher up to the Python caller, as python_error carries it.
[[noreturn]] void raise_dlop(int status, const std::string &message) {
  // One GIL scope from setting the error to fetching it: on a thread without a Python thread
  // state, leaving the scope would delete the state the error was set in.
  pybind11::gil_scoped_acquire gil;
  PyObject *result =
      message.empty()
          ? PyObject_CallFunction(raise_status_function, "i", status)
          : PyObject_CallFunction(raise_status_function, "is", status, message.c_str());
  Py_XDECREF(result);  // never a result: raise_status raises
  if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "dlop: raise_status did not raise");
  python_error error;  // PyTorch's Python bindings restore it as the Python exception
  error.persist();
  throw error;
}

dlop_dtype dtype_of(at::ScalarType type) {
  switch (type) {
    case at::kBool: return DLOP_BOOL;
    case at::kChar: return DLOP_INT8;
    case at::kShort: return DLOP_INT16;
    case at::kInt: return DLOP_INT32;
    case at::kLong: return DLOP_INT64;
    case at::kByte: return DLOP_UINT8;
    case at::kHalf: return DLOP_FLOAT16;
    case at::kBFloat16: return DLOP_BFLOAT16;
    case at::kFloat: return DLOP_FLOAT32;
    case at::kDouble: return DLOP_FLOAT64;
    default: return DLOP_DTYPE_INVALID;
  }
}

at::ScalarType scalar_type_of(int32_t dtype) {
  static const at::ScalarType types[DLOP_DTYPE_COUNT] = {
      at::kBool, at::kChar, at::kShort, at::kInt, at::kLong, at::kByte,
      at::kHalf, at::kBFloat16, at::kFloat, at::kDouble};
  return types[dtype];
}

// One dlop stream per CUstream that PyTorch hands us, wrapped once and kept for the process:
// PyTorch's streams live as long as the process (its pool never frees them), and dlop's pool
// reuses blocks per stream, which a wrap per call would defeat.
struct WrappedStreams {
  std::mutex lock;
  std::vector<std::pair<std::pair<int, void *>, dlop_stream *>> streams;

  dlop_stream *get(dlop_device device, void *handle) {
    int status = DLOP_OK;
    {
      std::lock_guard<std::mutex> guard(lock);
      for (auto &entry : streams)
        if (entry.first.first == device.id && entry.first.second == handle) return entry.second;
      dlop_stream *stream = nullptr;
      status = dlop_stream_wrap(device, handle, &stream);
      if (status == DLOP_OK) {
        streams.push_back({{device.id, handle}, stream});
        return stream;
      }
    }
    raise_dlop(status, "");  // outside the lock: raising takes the GIL
  }
};
WrappedStreams wrapped_streams;

// The prepared calls of one op, by signature: device, dtypes, ranks and parameter values.
struct Calls {
  std::shared_mutex lock;
  std::unordered_map<std::string, dlop_op_call *> by_key;
};

void append(std::string &key, const void *bytes, size_t count) {
  key.append(static_cast<const char *>(bytes), count);
}

// The CPU and CUDA kernel of one dlop op (a boxed functor: one kernel serves every schema).
class DeviceKernel final : public c10::OperatorKernel {
 public:
  DeviceKernel(std::string name, int variadic) : name_(std::move(name)), variadic_(variadic) {}

  void operator()(const c10::OperatorHandle &op, c10::DispatchKeySet, torch::jit::Stack *stack) {
    const auto &arguments = op.schema().arguments();
    const size_t num_arguments = arguments.size();
    auto args = torch::jit::last(*stack, num_arguments);

    // the tensors: the leading Tensor arguments, or the one Tensor[] of a variadic op
    std::vector<at::Tensor> tensors;
    size_t first_param = 0;
    if (variadic_) {
      tensors = args[0].toTensorVector();
      first_param = 1;
    } else {
      while (first_param < num_arguments && args[first_param].isTensor())
        tensors.push_back(args[first_param++].toTensor());
    }
    const size_t num_inputs = tensors.size();
    if (num_inputs > 64) raise_dlop(DLOP_INVALID_ARGUMENT, "dlop.torch: op '" + name_ + "': more than 64 inputs");

    dlop_device device = {DLOP_DEVICE_CPU, 0};
    c10::Device torch_device(c10::kCPU);
    if (num_inputs > 0) {
      torch_device = tensors[0].device();
      if (torch_device.is_cuda()) device = {DLOP_DEVICE_CUDA, torch_device.index()};
      else if (!torch_device.is_cpu())
        raise_dlop(DLOP_UNSUPPORTED, "dlop.torch: op '" + name_ + "': tensors on " +
                                         torch_device.str() + "; dlop runs on cpu and cuda");
    }
    std::string key;
    key.reserve(64);
    append(key, &device, sizeof device);
    dlop_type types[64];
    for (size_t i = 0; i < num_inputs; i++) {
      const at::Tensor &t = tensors[i];
      if (t.device() != torch_device)
        raise_dlop(DLOP_DEVICE_MISMATCH, "dlop.torch: op '" + name_ + "': input " +
                                             std::to_string(i) + " is on " + t.device().str() +
                                             " but input 0 is on " + torch_device.str() +
                                             "; put them on one device");
      dlop_dtype dtype = dtype_of(t.scalar_type());
      if (dtype == DLOP_DTYPE_INVALID)
        raise_dlop(DLOP_TYPE_ERROR, "dlop.torch: op '" + name_ + "': input " + std::to_string(i) +
                                        " is " + std::string(c10::toString(t.scalar_type())) +
                                        ", which dlop has no dtype for");
      int64_t ndim = t.dim();
      if (ndim > DLOP_MAX_NDIM)
        raise_dlop(DLOP_INVALID_ARGUMENT, "dlop.torch: op '" + name_ + "': input " +
                                              std::to_string(i) + " has " + std::to_string(ndim) +
                                              " dimensions; dlop allows at most " +
                                              std::to_string(DLOP_MAX_NDIM));
      types[i].dtype = dtype;
      types[i].ndim = static_cast<int32_t>(ndim);
      auto sizes = t.sizes();
      for (int64_t d = 0; d < ndim; d++) types[i].shape[d] = sizes[d];
      int32_t packed[2] = {dtype, static_cast<int32_t>(ndim)};
      append(key, packed, sizeof packed);
    }
    // the parameters, by name, in the schema's order (the schema gives every one a default)
    std::vector<dlop_named_param> params;
    std::vector<std::vector<int64_t>> lists;
    lists.reserve(num_arguments);
    for (size_t a = first_param; a < num_arguments; a++) {
      const c10::IValue &value = args[a];
      dlop_named_param param{};
      param.name = arguments[a].name().c_str();
      param.value.count = 1;
      if (value.isBool()) {
        param.value.kind = DLOP_PARAM_BOOL;
        param.value.u.i = value.toBool();
      } else if (value.isInt()) {
        param.value.kind = DLOP_PARAM_INT;
        param.value.u.i = value.toInt();
      } else if (value.isDouble()) {
        param.value.kind = DLOP_PARAM_FLOAT;
        param.value.u.f = value.toDouble();
      } else if (value.isString()) {
        param.value.kind = DLOP_PARAM_STRING;
        param.value.u.s = value.toStringRef().c_str();
      } else if (value.isIntList()) {
        lists.push_back(value.toIntVector());
        param.value.kind = DLOP_PARAM_INTS;
        param.value.count = static_cast<int32_t>(lists.back().size());
        param.value.u.ints = lists.back().data();
      } else {
        raise_dlop(DLOP_INVALID_ARGUMENT, "dlop.torch: op '" + name_ + "': argument '" +
                                              arguments[a].name() + "' is " + value.tagKind() +
                                              ", which no dlop parameter kind is");
      }
      append(key, &param.value.kind, sizeof param.value.kind);
      if (param.value.kind == DLOP_PARAM_STRING) {
        size_t length = value.toStringRef().size();
        append(key, &length, sizeof length);
        key.append(value.toStringRef());
      } else if (param.value.kind == DLOP_PARAM_INTS) {
        append(key, &param.value.count, sizeof param.value.count);
        append(key, param.value.u.ints, sizeof(int64_t) * lists.back().size());
      } else {
        append(key, &param.value.u, sizeof param.value.u);
      }
      params.push_back(param);
    }
    const dlop_op_call *call = find_or_create(key, types, num_inputs, params, device);

    const int32_t num_outputs = dlop_op_call_num_outputs(call);
    std::vector<dlop_type> output_types(num_outputs);
    int status = dlop_op_call_infer_shapes(call, types, static_cast<int32_t>(num_inputs),
                                           output_types.data(), num_outputs);
    if (status != DLOP_OK) raise_dlop(status, "");
    std::vector<at::Tensor> outputs;
    outputs.reserve(num_outputs);
    auto options = at::TensorOptions().device(torch_device);
    for (int32_t o = 0; o < num_outputs; o++) {
      const dlop_type &type = output_types[o];
      outputs.push_back(at::empty(c10::IntArrayRef(type.shape, type.ndim),
                                  options.dtype(scalar_type_of(type.dtype))));
    }
    std::vector<dlop_tensor> views(num_inputs + num_outputs);
    for (size_t i = 0; i < num_inputs + num_outputs; i++) {
      at::Tensor &t = i < num_inputs ? tensors[i] : outputs[i - num_inputs];
      dlop_tensor &view = views[i];
      view.data = t.numel() == 0 ? nullptr : t.data_ptr();
      view.device = device;
      view.ndim = static_cast<int32_t>(t.dim());
      view.dtype = dlop_dtype_to_dl(dtype_of(t.scalar_type()));
      view.shape = const_cast<int64_t *>(t.sizes().data());
      view.strides = const_cast<int64_t *>(t.strides().data());
      view.byte_offset = 0;
    }
    dlop_stream *stream = nullptr;
    if (device.type == DLOP_DEVICE_CUDA) stream = current_stream(device);
    status = dlop_op_call_run(call, views.data(), static_cast<int32_t>(num_inputs),
                              views.data() + num_inputs, num_outputs, stream);
    if (status != DLOP_OK) raise_dlop(status, "");

    torch::jit::drop(*stack, num_arguments);
    for (auto &out : outputs) stack->emplace_back(std::move(out));
  }

 private:
  const dlop_op_call *find_or_create(const std::string &key, const dlop_type *types,
                                     size_t num_inputs, const std::vector<dlop_named_param> &params,
                                     dlop_device device) {
    {
      std::shared_lock<std::shared_mutex> read(calls_.lock);
      auto found = calls_.by_key.find(key);
      if (found != calls_.by_key.end()) return found->second;
    }
    // the signature's types carry no sizes: one prepared call serves every shape
    std::vector<dlop_type> unknown(types, types + num_inputs);
    for (dlop_type &type : unknown)
      for (int32_t d = 0; d < type.ndim; d++) type.shape[d] = DLOP_DIM_UNKNOWN;
    dlop_op_call *created = nullptr;
    int status = dlop_op_call_create(name_.c_str(), unknown.data(), static_cast<int32_t>(num_inputs),
                                     params.data(), static_cast<int32_t>(params.size()), device,
                                     &created);
    if (status != DLOP_OK) raise_dlop(status, "");
    std::unique_lock<std::shared_mutex> write(calls_.lock);
    auto inserted = calls_.by_key.emplace(key, created);
    if (!inserted.second) dlop_op_call_destroy(created);  // another thread made it first
    return inserted.first->second;
  }

  static dlop_stream *current_stream(dlop_device device) {
#ifdef DLOP_TORCH_CUDA
    void *handle = nullptr;
    if (aoti_torch_get_current_cuda_stream(device.id, &handle) != 0)
      raise_dlop(DLOP_CUDA_ERROR, "dlop.torch: PyTorch did not give its current CUDA stream");
    // PyTorch's default stream is CUDA's legacy one (the NULL handle), which DLPack numbers 1
    return wrapped_streams.get(device, handle != nullptr ? handle : reinterpret_cast<void *>(1));
#else
    (void)device;
    raise_dlop(DLOP_NO_DEVICE, "dlop.torch: dlop/_torch_kernels.so was built against a PyTorch "
                               "without CUDA; CUDA tensors need dlop.torch's Python kernels");
#endif
  }

  std::string name_;
  int variadic_;
  Calls calls_;  // never destroyed: the kernel lives as long as PyTorch's registration
};

// The node that backward reaches through a dlop op's output: dlop ops declare no derivatives.
struct NoGradient final : public torch::autograd::Node {
  explicit NoGradient(std::string op) : op_(std::move(op)) {}
  torch::autograd::variable_list apply(torch::autograd::variable_list &&) override {
    TORCH_CHECK(false, "dlop op '", op_, "' has no gradient: dlop ops do not declare derivatives "
                "yet, so backward cannot pass through it (compute this part with PyTorch ops, or "
                "detach its inputs)");
  }
  std::string name() const override { return "DlopNoGradient"; }
  std::string op_;
};

// The autograd kernel: runs the op below autograd; when grad mode is on and an input requires
// grad, the outputs get a NoGradient node, so backward fails naming the op instead of passing
// silently wrong gradients.
class AutogradKernel final : public c10::OperatorKernel {
 public:
  explicit AutogradKernel(std::string name) : name_(std::move(name)) {}

  void operator()(const c10::OperatorHandle &op, c10::DispatchKeySet keys, torch::jit::Stack *stack) {
    const size_t num_arguments = op.schema().arguments().size();
    // forward-mode AD: a dual tensor's tangent would be dropped, a silently wrong derivative
    for (const c10::IValue &value : torch::jit::last(*stack, num_arguments)) {
      bool dual = false;
      if (value.isTensor()) dual = torch::autograd::isFwGradDefined(value.toTensor());
      else if (value.isTensorList())
        for (const at::Tensor &t : value.toTensorVector()) dual = dual || torch::autograd::isFwGradDefined(t);
      TORCH_CHECK(!dual, "dlop op '", name_, "' has no gradient: dlop ops do not declare "
                  "derivatives yet, so forward-mode AD cannot pass through it (its input is a dual "
                  "tensor)");
    }
    std::vector<at::Tensor> needing_grad;
    if (at::GradMode::is_enabled()) {
      for (const c10::IValue &value : torch::jit::last(*stack, num_arguments)) {
        if (value.isTensor()) {
          const at::Tensor &t = value.toTensor();
          if (t.defined() && t.requires_grad()) needing_grad.push_back(t);
        } else if (value.isTensorList()) {
          for (const at::Tensor &t : value.toTensorVector())
            if (t.defined() && t.requires_grad()) needing_grad.push_back(t);
        }
      }
    }
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      op.redispatchBoxed(keys & c10::after_ADInplaceOrView_keyset, stack);
    }
    if (needing_grad.empty()) return;
    auto node = std::shared_ptr<NoGradient>(new NoGradient(name_), torch::autograd::deleteNode);
    node->set_next_edges(torch::autograd::collect_next_edges(needing_grad));
    const size_t num_returns = op.schema().returns().size();
    for (size_t r = stack->size() - num_returns; r < stack->size(); r++) {
      const c10::IValue &value = (*stack)[r];
      if (!value.isTensor()) continue;
      at::Tensor out = value.toTensor();
      if (torch::autograd::isDifferentiableType(out.scalar_type()))
        torch::autograd::set_history(out, node);
    }
  }

 private:
  std::string name_;
};

// PyTorch's registrations, kept for the process: destroying a torch::Library removes its
// kernels, and at exit that would run after the interpreter (and PyTorch) have gone.
std::mutex libraries_lock;
std::vector<torch::Library *> libraries;

}  // namespace

// The C entry points dlop.torch calls through ctypes. Each returns 0, or -1 with a message in
// error (size bytes).
extern "C" __attribute__((visibility("default"))) int dlop_torch_kernels_init(
    PyObject *raise_status, char *error, size_t size) {
  pybind11::gil_scoped_acquire gil;
  Py_XINCREF(raise_status);
  Py_XDECREF(raise_status_function);
  raise_status_function = raise_status;
  (void)error;
  (void)size;
  return 0;
}

// Register the C++ CPU, CUDA and autograd kernels of torch.ops.dlop.<name>, whose schema
// dlop.torch defined (variadic: its inputs are one Tensor[]).
extern "C" __attribute__((visibility("default"))) int dlop_torch_kernels_register(
    const char *name, int variadic, char *error, size_t size) {
  try {
    std::lock_guard<std::mutex> guard(libraries_lock);
    auto *library = new torch::Library(torch::Library::IMPL, "dlop", std::nullopt, __FILE__,
                                       __LINE__);
    libraries.push_back(library);
    library->impl(name, torch::dispatch(c10::DispatchKey::CPU,
                                        torch::CppFunction::makeFromBoxedFunctor(
                                            std::make_unique<DeviceKernel>(name, variadic))));
    library->impl(name, torch::dispatch(c10::DispatchKey::CUDA,
                                        torch::CppFunction::makeFromBoxedFunctor(
                                            std::make_unique<DeviceKernel>(name, variadic))));
    library->impl(name, torch::dispatch(c10::DispatchKey::Autograd,
                                        torch::CppFunction::makeFromBoxedFunctor(
                                            std::make_unique<AutogradKernel>(name))));
    return 0;
  } catch (const std::exception &e) {
    snprintf(error, size, "%s", e.what());
    return -1;
  }
}

// The PyTorch version this library was built against ("2.11.0"), for dlop.torch to compare
// with the one loaded.
extern "C" __attribute__((visibility("default"))) const char *dlop_torch_kernels_built_for(void) {
  return DLOP_TORCH_VERSION;
}

// The CPython ABI it was built for (sysconfig's SOABI, "cpython-312-x86_64-linux-gnu").
extern "C" __attribute__((visibility("default"))) const char *dlop_torch_kernels_built_for_python(void) {
  return DLOP_TORCH_PYTHON_SOABI;
}
