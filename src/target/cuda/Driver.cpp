// \file Driver.cpp
// dlopen of libcuda.so.1, the entry-point table, device 0's primary context, and the RAII types.
//
// The few driver types and enum values used are declared here (opaque handles as void*, CUresult
// as int, attribute numbers from cuda.h), so no CUDA header is needed to build. Entry points are
// looked up by the versioned names that cuda.h's macros select (cuMemAlloc_v2, ...).
//
// Invariant established: see Driver.h.
#include "target/cuda/Driver.h"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <initializer_list>

namespace kintsugi::cuda {

namespace {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = uint64_t;
using Handle = void*;  // CUcontext, CUmodule, CUfunction, CUevent, CUstream

constexpr CUresult kSuccess = 0;
// CUdevice_attribute values.
constexpr int kAttrMultiprocessorCount = 16;
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;
constexpr int kAttrMaxSharedMemoryPerBlockOptin = 97;
constexpr int kAttrL2CacheSize = 38;
constexpr unsigned kEventDisableTiming = 0x2;    // CU_EVENT_DISABLE_TIMING
constexpr int kCaptureStatusNone = 0;            // CU_STREAM_CAPTURE_STATUS_NONE
constexpr int kMemPoolAttrReleaseThreshold = 4;  // CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
constexpr int kMemAllocationTypePinned = 1;      // CU_MEM_ALLOCATION_TYPE_PINNED
constexpr int kMemLocationTypeDevice = 1;        // CU_MEM_LOCATION_TYPE_DEVICE

// CUmemPoolProps (cuda.h): a pinned pool on one device, every other field zero.
struct MemPoolProps {
  int alloc_type = kMemAllocationTypePinned;
  int handle_types = 0;
  int location_type = kMemLocationTypeDevice;
  int location_id = 0;
  void* win32_security_attributes = nullptr;
  size_t max_size = 0;
  unsigned short usage = 0;
  unsigned char reserved[54] = {};
};
static_assert(sizeof(MemPoolProps) == 88, "CUmemPoolProps is 88 bytes");

// The entry points, resolved once per process.
struct Api {
  std::string failure;  // why the driver is unusable; empty when it is usable
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(Handle*, CUdevice);
  CUresult (*cuCtxSetCurrent)(Handle);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(Handle*, const void*);
  CUresult (*cuModuleUnload)(Handle);
  CUresult (*cuModuleGetFunction)(Handle*, Handle, const char*);
  CUresult (*cuFuncGetAttribute)(int*, int, Handle);
  CUresult (*cuFuncSetAttribute)(Handle, int, int);
  CUresult (*cuLaunchKernel)(Handle, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, Handle, void**, void**);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, Handle);
  CUresult (*cuMemPoolCreate)(Handle*, const MemPoolProps*);
  CUresult (*cuMemPoolSetAttribute)(Handle, int, void*);
  CUresult (*cuMemAllocFromPoolAsync)(CUdeviceptr*, size_t, Handle, Handle);
  CUresult (*cuMemFreeAsync)(CUdeviceptr, Handle);
  CUresult (*cuStreamWaitEvent)(Handle, Handle, unsigned);
  CUresult (*cuStreamIsCapturing)(Handle, int*);
  CUresult (*cuEventCreate)(Handle*, unsigned);
  CUresult (*cuEventRecord)(Handle, Handle);
  CUresult (*cuEventSynchronize)(Handle);
  CUresult (*cuEventElapsedTime)(float*, Handle, Handle);
  CUresult (*cuEventDestroy)(Handle);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  // Optional (CUDA 12 and later): nullptr when the driver has no TMA.
  CUresult (*cuTensorMapEncodeTiled)(void*, int, unsigned, void*, const uint64_t*, const uint64_t*,
                                     const uint32_t*, const uint32_t*, int, int, int, int);
};

// "CUDA_ERROR_X (description)" for a driver result.
std::string describe(const Api& api, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName(result, &name) != kSuccess || !name) name = "unknown CUresult";
  if (api.cuGetErrorString(result, &text) != kSuccess || !text) text = "no description";
  return std::string(name) + " (" + text + ")";
}

Api load() {
  Api api{};
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* error = dlerror();
    api.failure = std::string("cannot load the CUDA driver: ") + (error ? error : "libcuda.so.1");
    return api;
  }
  // The library stays loaded for the life of the process.
  auto resolve = [&](auto& fn, std::initializer_list<const char*> names) {
    for (const char* name : names) {
      if (void* symbol = dlsym(library, name)) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(symbol);
        return true;
      }
    }
    if (api.failure.empty())
      api.failure = std::string("libcuda.so.1 does not export ") + *names.begin() +
                    " (the NVIDIA driver is too old)";
    return false;
  };
  resolve(api.cuInit, {"cuInit"});
  resolve(api.cuDeviceGetCount, {"cuDeviceGetCount"});
  resolve(api.cuDeviceGet, {"cuDeviceGet"});
  resolve(api.cuDeviceGetAttribute, {"cuDeviceGetAttribute"});
  resolve(api.cuDeviceGetName, {"cuDeviceGetName"});
  resolve(api.cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"});
  resolve(api.cuCtxSetCurrent, {"cuCtxSetCurrent"});
  resolve(api.cuCtxSynchronize, {"cuCtxSynchronize"});
  resolve(api.cuModuleLoadData, {"cuModuleLoadData"});
  resolve(api.cuModuleUnload, {"cuModuleUnload"});
  resolve(api.cuModuleGetFunction, {"cuModuleGetFunction"});
  resolve(api.cuFuncGetAttribute, {"cuFuncGetAttribute"});
  resolve(api.cuFuncSetAttribute, {"cuFuncSetAttribute"});
  resolve(api.cuLaunchKernel, {"cuLaunchKernel"});
  resolve(api.cuMemAlloc, {"cuMemAlloc_v2"});
  resolve(api.cuMemFree, {"cuMemFree_v2"});
  resolve(api.cuMemcpyHtoD, {"cuMemcpyHtoD_v2"});
  resolve(api.cuMemcpyDtoH, {"cuMemcpyDtoH_v2"});
  resolve(api.cuMemsetD8, {"cuMemsetD8_v2"});
  resolve(api.cuMemsetD8Async, {"cuMemsetD8Async"});
  resolve(api.cuMemPoolCreate, {"cuMemPoolCreate"});
  resolve(api.cuMemPoolSetAttribute, {"cuMemPoolSetAttribute"});
  resolve(api.cuMemAllocFromPoolAsync, {"cuMemAllocFromPoolAsync"});
  resolve(api.cuMemFreeAsync, {"cuMemFreeAsync"});
  resolve(api.cuStreamWaitEvent, {"cuStreamWaitEvent"});
  resolve(api.cuStreamIsCapturing, {"cuStreamIsCapturing"});
  resolve(api.cuEventCreate, {"cuEventCreate"});
  resolve(api.cuEventRecord, {"cuEventRecord"});
  resolve(api.cuEventSynchronize, {"cuEventSynchronize"});
  resolve(api.cuEventElapsedTime, {"cuEventElapsedTime_v2", "cuEventElapsedTime"});
  resolve(api.cuEventDestroy, {"cuEventDestroy_v2"});
  resolve(api.cuGetErrorName, {"cuGetErrorName"});
  resolve(api.cuGetErrorString, {"cuGetErrorString"});
  if (!api.failure.empty()) return api;
  api.cuTensorMapEncodeTiled = reinterpret_cast<decltype(api.cuTensorMapEncodeTiled)>(
      dlsym(library, "cuTensorMapEncodeTiled"));
  if (CUresult r = api.cuInit(0); r != kSuccess) {
    api.failure = "cuInit failed: " + describe(api, r);
    return api;
  }
  int count = 0;
  if (CUresult r = api.cuDeviceGetCount(&count); r != kSuccess) {
    api.failure = "cuDeviceGetCount failed: " + describe(api, r);
  } else if (count == 0) {
    api.failure = "the CUDA driver reports no device";
  }
  return api;
}

const Api& api() {
  static const Api instance = load();
  return instance;
}

// The loaded driver; RuntimeArgError (the user's environment) when there is none.
const Api& require_driver() {
  const Api& a = api();
  if (!a.failure.empty())
    arg_error << "the CUDA back end needs an NVIDIA GPU and its driver: " << a.failure
              << "; run on a machine with a GPU, or use --target cpu";
  return a;
}

// The results a faulting kernel leaves behind (illegal address or instruction, misaligned
// address, device-side assert, ...): they are reported by whichever call synchronizes next.
bool asynchronous_kernel_error(CUresult r) {
  return r == 700 || r == 702 || r == 710 || (r >= 714 && r <= 719);
}

void check(CUresult result, const std::string& call) {
  if (result == kSuccess) return;
  std::string message = "CUDA driver call " + call + " failed: " + describe(api(), result);
  if (asynchronous_kernel_error(result))
    message +=
        "; a kernel launched earlier may have faulted (launches report their failures at "
        "the next synchronizing call)";
  throw CudaDriverError(message, result);
}

// Device 0 with its primary context current on the calling thread.
CUdevice current_device() {
  const Api& a = require_driver();
  static const std::pair<CUdevice, Handle> device_and_context = [&] {
    CUdevice device = 0;
    check(a.cuDeviceGet(&device, 0), "cuDeviceGet");
    Handle context = nullptr;
    check(a.cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
    return std::pair{device, context};
  }();
  thread_local bool current = false;
  if (!current) {
    check(a.cuCtxSetCurrent(device_and_context.second), "cuCtxSetCurrent");
    current = true;
  }
  return device_and_context.first;
}

// The driver with the context current, for every call after initialisation.
const Api& ready() {
  current_device();
  return api();
}

}  // namespace

bool driver_available(std::string* why) {
  const std::string& failure = api().failure;
  if (why) *why = failure;
  return failure.empty();
}

std::string DeviceInfo::arch() const {
  return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor) + (cc_major >= 9 ? "a" : "");
}

std::string tensor_map_unaddressable(const TensorMapSpec& spec) {
  const size_t rank = spec.dims.size();
  const int bytes = dtype_bytes(spec.element);
  const bool typed = spec.element == DType::F16 || spec.element == DType::BF16 ||
                     spec.element == DType::F32 || bytes == 1;
  if (!typed) return std::string("TMA does not copy ") + dtype_name(spec.element) + " elements";
  if (rank < 1 || rank > 5) return "TMA addresses 1 to 5 dimensions, not " + std::to_string(rank);
  if (spec.strides.size() != rank - 1 || spec.box.size() != rank)
    return "a tensor map needs a stride for each dimension after the first and a box extent for "
           "each dimension";
  if (spec.address % 16 != 0) return "the tensor's address is not a multiple of 16 bytes";
  for (size_t d = 0; d < rank; ++d) {
    if (spec.dims[d] == 0 || spec.dims[d] > (uint64_t(1) << 32))
      return "extent " + std::to_string(spec.dims[d]) + " of dimension " + std::to_string(d) +
             " is outside 1 to 2^32";
    if (spec.box[d] == 0 || spec.box[d] > 256)
      return "box extent " + std::to_string(spec.box[d]) + " of dimension " + std::to_string(d) +
             " is outside 1 to 256";
  }
  for (size_t d = 0; d + 1 < rank; ++d)
    if (spec.strides[d] % 16 != 0 || spec.strides[d] >= (uint64_t(1) << 40))
      return "stride " + std::to_string(spec.strides[d]) + " bytes of dimension " +
             std::to_string(d + 1) + " is not a multiple of 16 below 2^40";
  const uint64_t inner = uint64_t(spec.box[0]) * uint64_t(bytes);
  if (inner % 16 != 0)
    return "the box's innermost extent, " + std::to_string(inner) +
           " bytes, is not a multiple of 16";
  const uint64_t width = spec.swizzle == TensorMapSwizzle::B128  ? 128
                         : spec.swizzle == TensorMapSwizzle::B64 ? 64
                         : spec.swizzle == TensorMapSwizzle::B32 ? 32
                                                                 : 0;
  if (width && inner > width)
    return "the box's innermost extent, " + std::to_string(inner) + " bytes, exceeds the " +
           std::to_string(width) + "-byte swizzle";
  return "";
}

TensorMap encode_tensor_map(const TensorMapSpec& spec) {
  const std::string why = tensor_map_unaddressable(spec);
  internal_assert(why.empty()) << "encode_tensor_map: " << why;
  const Api& a = require_driver();
  if (!a.cuTensorMapEncodeTiled)
    arg_error << "the CUDA driver has no cuTensorMapEncodeTiled (TMA needs CUDA 12 or later)";
  // CUtensorMapDataType: UINT8 0, FLOAT16 6, FLOAT32 7, BFLOAT16 9 (1-byte types travel as bytes).
  const int type = spec.element == DType::F16    ? 6
                   : spec.element == DType::F32  ? 7
                   : spec.element == DType::BF16 ? 9
                                                 : 0;
  const std::vector<uint32_t> element_strides(spec.dims.size(), 1);
  TensorMap map;
  // No interleave (0), L2 promotion of 128 bytes (2), out-of-bounds elements zero (0).
  check(a.cuTensorMapEncodeTiled(map.bytes, type, unsigned(spec.dims.size()),
                                 reinterpret_cast<void*>(spec.address), spec.dims.data(),
                                 spec.strides.data(), spec.box.data(), element_strides.data(), 0,
                                 static_cast<int>(spec.swizzle), 2, 0),
        "cuTensorMapEncodeTiled");
  return map;
}

const DeviceInfo& device() {
  static const DeviceInfo info = [] {
    CUdevice d = current_device();
    const Api& a = api();
    DeviceInfo i;
    i.ordinal = 0;
    char name[256] = {0};
    check(a.cuDeviceGetName(name, sizeof(name) - 1, d), "cuDeviceGetName");
    i.name = name;
    auto attribute = [&](int attr, const char* what) {
      int value = 0;
      check(a.cuDeviceGetAttribute(&value, attr, d),
            std::string("cuDeviceGetAttribute(") + what + ")");
      return value;
    };
    i.cc_major = attribute(kAttrComputeCapabilityMajor, "compute capability major");
    i.cc_minor = attribute(kAttrComputeCapabilityMinor, "compute capability minor");
    i.multiprocessors = attribute(kAttrMultiprocessorCount, "multiprocessor count");
    i.max_shared_bytes_per_block_optin =
        attribute(kAttrMaxSharedMemoryPerBlockOptin, "max shared memory per block opt-in");
    i.l2_bytes = attribute(kAttrL2CacheSize, "L2 cache size");
    return i;
  }();
  return info;
}

void synchronize() {
  check(ready().cuCtxSynchronize(), "cuCtxSynchronize");
}

bool stream_capturing(StreamHandle stream) {
  int status = kCaptureStatusNone;
  check(ready().cuStreamIsCapturing(stream, &status), "cuStreamIsCapturing");
  return status != kCaptureStatusNone;
}

void order_after(StreamHandle later, StreamHandle earlier) {
  if (later == earlier) return;
  Event done(/*timing=*/false);
  done.record(earlier);
  done.block(later);
}

namespace {
// Runs a release call with the context current; errors are dropped (destructors cannot throw).
template <typename Call>
void release(Call call) noexcept {
  try {
    call(ready());
  } catch (...) {
  }
}
}  // namespace

namespace detail {

void free_allocation(Allocation allocation) {
  release([&](const Api& a) { a.cuMemFree(allocation.address); });
}

void unload_module(void* module) {
  release([&](const Api& a) { a.cuModuleUnload(module); });
}

void destroy_event(void* event) {
  release([&](const Api& a) { a.cuEventDestroy(event); });
}

}  // namespace detail

DeviceBuffer::DeviceBuffer(size_t bytes) {
  if (bytes == 0) return;
  CUdeviceptr address = 0;
  check(ready().cuMemAlloc(&address, bytes), "cuMemAlloc_v2(" + std::to_string(bytes) + " bytes)");
  allocation_ = decltype(allocation_)(detail::Allocation{address, bytes});
}

namespace {
void check_range(const DeviceBuffer& buffer, size_t bytes, size_t offset, const char* what) {
  if (offset > buffer.size() || bytes > buffer.size() - offset)
    arg_error << what << " of " << bytes << " bytes at offset " << offset
              << " does not fit a device buffer of " << buffer.size() << " bytes";
}
}  // namespace

void DeviceBuffer::upload(const void* host, size_t bytes, size_t offset) {
  check_range(*this, bytes, offset, "upload");
  if (bytes == 0) return;
  check(ready().cuMemcpyHtoD(address() + offset, host, bytes), "cuMemcpyHtoD_v2");
}

void DeviceBuffer::download(void* host, size_t bytes, size_t offset) const {
  check_range(*this, bytes, offset, "download");
  if (bytes == 0) return;
  check(ready().cuMemcpyDtoH(host, address() + offset, bytes), "cuMemcpyDtoH_v2");
}

void DeviceBuffer::fill(uint8_t value, StreamHandle stream) {
  if (size() == 0) return;
  if (stream)
    check(ready().cuMemsetD8Async(address(), value, size(), stream), "cuMemsetD8Async");
  else
    check(ready().cuMemsetD8(address(), value, size()), "cuMemsetD8_v2");
}

namespace {
// Kintsugi's pool of stream-ordered memory on device 0. Its release threshold is unbounded: memory
// freed to it stays mapped for the next allocation instead of going back to the driver at every
// synchronisation (the default pool's threshold is 0).
Handle stream_pool() {
  static Handle pool = [] {
    const Api& a = ready();
    MemPoolProps props;
    props.location_id = device().ordinal;
    Handle p = nullptr;
    check(a.cuMemPoolCreate(&p, &props), "cuMemPoolCreate");
    uint64_t threshold = UINT64_MAX;
    check(a.cuMemPoolSetAttribute(p, kMemPoolAttrReleaseThreshold, &threshold),
          "cuMemPoolSetAttribute(release threshold)");
    return p;
  }();
  return pool;
}
}  // namespace

StreamBuffer::StreamBuffer(size_t bytes, StreamHandle stream) : stream_(stream), size_(bytes) {
  if (bytes == 0) return;
  if (stream_capturing(stream))
    arg_error << "a device allocation of " << bytes
              << " bytes was asked for on a stream that is capturing a CUDA graph; pass the "
                 "outputs (out=) to calls that are captured";
  check(ready().cuMemAllocFromPoolAsync(&address_, bytes, stream_pool(), stream),
        "cuMemAllocFromPoolAsync(" + std::to_string(bytes) + " bytes)");
}

void StreamBuffer::reset() noexcept {
  if (address_ == 0) return;
  release([&](const Api& a) {
    for (StreamHandle user : users_) order_after(stream_, user);
    a.cuMemFreeAsync(address_, stream_);
  });
  address_ = 0;
  size_ = 0;
  users_.clear();
}

void StreamBuffer::share_with(StreamHandle stream) {
  if (address_ == 0 || stream == stream_) return;
  order_after(stream, stream_);
  if (std::find(users_.begin(), users_.end(), stream) == users_.end()) users_.push_back(stream);
}

namespace {
// Waits on the host for the work queued on `stream` so far.
void wait_for(StreamHandle stream) {
  Event queued(/*timing=*/false);
  queued.record(stream);
  queued.synchronize();
}
}  // namespace

void StreamBuffer::download(void* host, size_t bytes) const {
  if (bytes > size_)
    arg_error << "download of " << bytes << " bytes does not fit a device buffer of " << size_
              << " bytes";
  if (bytes == 0) return;
  wait_for(stream_);
  check(ready().cuMemcpyDtoH(host, address_, bytes), "cuMemcpyDtoH_v2");
}

void StreamBuffer::upload(const void* host, size_t bytes) {
  if (bytes > size_)
    arg_error << "upload of " << bytes << " bytes does not fit a device buffer of " << size_
              << " bytes";
  if (bytes == 0) return;
  wait_for(stream_);
  check(ready().cuMemcpyHtoD(address_, host, bytes), "cuMemcpyHtoD_v2");
}

int Function::attribute(FunctionAttribute attribute) const {
  int value = 0;
  check(ready().cuFuncGetAttribute(&value, static_cast<int>(attribute), handle_),
        "cuFuncGetAttribute(" + name_ + ")");
  return value;
}

void Function::set_max_dynamic_shared_bytes(int bytes) {
  check(ready().cuFuncSetAttribute(
            handle_, static_cast<int>(FunctionAttribute::MaxDynamicSharedSizeBytes), bytes),
        "cuFuncSetAttribute(" + name_ + ", max dynamic shared memory " + std::to_string(bytes) +
            " bytes)");
}

void Function::launch_with_params(const LaunchConfig& c, void** params) const {
  CUresult r = ready().cuLaunchKernel(handle_, c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y,
                                      c.block.z, c.dynamic_shared_bytes, c.stream, params, nullptr);
  if (r != kSuccess) check(r, "cuLaunchKernel(" + name_ + ")");  // the name only on failure
}

Module::Module(const std::string& cubin) {
  Handle module = nullptr;
  check(ready().cuModuleLoadData(&module, cubin.data()), "cuModuleLoadData");
  handle_ = decltype(handle_)(module);
}

Function Module::function(const std::string& name) const {
  Handle function = nullptr;
  check(ready().cuModuleGetFunction(&function, handle_.get(), name.c_str()),
        "cuModuleGetFunction(" + name + ")");
  return Function(function, name);
}

Event::Event(bool timing) {
  Handle event = nullptr;
  check(ready().cuEventCreate(&event, timing ? 0u : kEventDisableTiming), "cuEventCreate");
  handle_ = decltype(handle_)(event);
}

void Event::block(StreamHandle stream) const {
  check(ready().cuStreamWaitEvent(stream, handle_.get(), 0), "cuStreamWaitEvent");
}

void Event::record(StreamHandle stream) {
  check(ready().cuEventRecord(handle_.get(), stream), "cuEventRecord");
}

void Event::synchronize() const {
  check(ready().cuEventSynchronize(handle_.get()), "cuEventSynchronize");
}

float Event::elapsed_ms(const Event& start, const Event& end) {
  end.synchronize();
  float ms = 0.0f;
  check(ready().cuEventElapsedTime(&ms, start.handle_.get(), end.handle_.get()),
        "cuEventElapsedTime");
  return ms;
}

}  // namespace kintsugi::cuda
