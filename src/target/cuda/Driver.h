// \file Driver.h
// The CUDA driver API, loaded at run time: libcuda.so.1 is dlopen'ed on first use (never linked),
// so Kintsugi builds, links and runs its tests on machines without a GPU. Device memory, modules,
// kernel launches and event timing are small move-only RAII types.
//
// All work goes to device 0 through its primary context (made current on each calling thread),
// the context that the CUDA runtime (and so PyTorch) uses for device 0 as well, so device pointers
// pass between them. Work goes to the legacy default stream unless a call names a stream (a
// CUstream, e.g. one that PyTorch owns). Launches are asynchronous: a failure inside a kernel is
// reported by the next synchronizing call (download, synchronize, Event::synchronize), whose
// error says so.
//
// Invariant established: no driver function is called unless the driver loaded, every entry point
// resolved and cuInit found a device; every failing driver call throws a CudaDriverError that
// names the call and carries the driver's error name and string (except in destructors, which
// cannot throw and ignore release errors); every handle is released exactly once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ir/DType.h"
#include "support/Error.h"

namespace kintsugi::cuda {

// A driver call failed. An InternalError: on a machine where driver_available() holds, a failing
// call means Kintsugi passed something wrong (a bad launch, a faulting kernel).
class CudaDriverError : public InternalError {
 public:
  CudaDriverError(const std::string& message, int code) : InternalError(message), code_(code) {}
  int code() const { return code_; }  // the CUresult

 private:
  int code_;
};

namespace detail {

// Owns one driver handle: Release runs once, when the owner is destroyed or assigned over; a
// moved-from owner holds T{} (nothing).
template <typename T, void (*Release)(T)>
class Owned {
 public:
  Owned() = default;
  explicit Owned(T value) : value_(value) {}
  ~Owned() { reset(); }
  Owned(Owned&& other) noexcept : value_(std::exchange(other.value_, T{})) {}
  Owned& operator=(Owned&& other) noexcept {
    if (this != &other) {
      reset();
      value_ = std::exchange(other.value_, T{});
    }
    return *this;
  }
  const T& get() const { return value_; }

 private:
  void reset() {
    if (value_ != T{}) Release(std::exchange(value_, T{}));
  }
  T value_{};
};

struct Allocation {
  uint64_t address = 0;  // CUdeviceptr
  size_t size = 0;
  bool operator==(const Allocation&) const = default;
};

// Release functions (errors are ignored: they run in destructors).
void free_allocation(Allocation allocation);
void unload_module(void* module);
void destroy_event(void* event);

}  // namespace detail

// True when libcuda.so.1 loads, exports every entry point used here, cuInit succeeds and a device
// exists. Otherwise false, with the reason in *why when `why` is given. Never throws.
bool driver_available(std::string* why = nullptr);

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;  // compute capability
  int multiprocessors = 0;
  int max_shared_bytes_per_block_optin = 0;
  int l2_bytes = 0;  // the L2 cache

  // The NVRTC target for this device: "sm_<major><minor>", with the suffix "a" (architecture-
  // specific instructions such as wgmma) from compute capability 9.0 on, e.g. "sm_90a".
  std::string arch() const;
};

// Device 0. Throws RuntimeArgError when !driver_available().
const DeviceInfo& device();

// A TMA tensor map (CUtensorMap: 128 opaque bytes; the driver needs 64-byte alignment, CUDA 13's
// cuda.h declares 128), passed to a kernel by value as a __grid_constant__ parameter;
// cp.async.bulk.tensor takes its address.
struct alignas(128) TensorMap {
  unsigned char bytes[128] = {};
};

// The shared-memory swizzle of the boxes a tensor map copies (CUtensorMapSwizzle's values).
enum class TensorMapSwizzle : int { None = 0, B32 = 1, B64 = 2, B128 = 3 };

// A tiled tensor map over a global tensor: element type (f16, bf16, f32, or a 1-byte type copied
// as bytes), its address
// (16-byte aligned), extents innermost first (1 to 5 dimensions), the byte strides of dimensions
// 1 and up (multiples of 16), the box a copy moves (innermost first, 1 to 256 elements each, the
// innermost a multiple of 16 bytes and, swizzled, at most the swizzle's width), and the swizzle.
// Elements of a box outside the tensor are copied as zeros.
struct TensorMapSpec {
  DType element = DType::F16;
  uint64_t address = 0;
  std::vector<uint64_t> dims, strides;
  std::vector<uint32_t> box;
  TensorMapSwizzle swizzle = TensorMapSwizzle::None;
};

// Why TMA cannot address `spec` (the first rule above it breaks), or "" when it can: a caller
// falls back to copies by threads for such a tensor.
std::string tensor_map_unaddressable(const TensorMapSpec& spec);

// The tensor map of `spec` (cuTensorMapEncodeTiled), which must be addressable. Throws
// RuntimeArgError when !driver_available() or the driver has no TMA (before CUDA 12).
TensorMap encode_tensor_map(const TensorMapSpec& spec);

// Waits until all work on the device has finished (cuCtxSynchronize).
void synchronize();

// A CUstream handle: nullptr is the default stream, (CUstream)0x1 (CU_STREAM_LEGACY) names the
// legacy default stream explicitly. The caller keeps any other stream alive while work is queued
// on it.
using StreamHandle = void*;
inline StreamHandle const kLegacyStream = reinterpret_cast<StreamHandle>(0x1);

// Whether work queued on `stream` is being captured into a CUDA graph (cuStreamIsCapturing).
bool stream_capturing(StreamHandle stream);

// Orders the work queued on `later` from now on after the work queued on `earlier` so far (an
// event recorded on `earlier` that `later` waits for); nothing when they are the same stream.
void order_after(StreamHandle later, StreamHandle earlier);

// Stream-ordered device memory (cuMemAllocFromPoolAsync from Kintsugi's own pool): usable by the
// work queued on `stream` after the allocation, and on other streams after share_with(). The
// destructor frees it on `stream` (cuMemFreeAsync) after the work queued so far there and on every
// stream it was shared with, so the memory is never reused under a kernel that still reads it.
// No allocation call synchronises. Allocating on a stream that captures a CUDA graph is refused
// (RuntimeArgError): the graph would own memory this object frees. Move-only.
class StreamBuffer {
 public:
  StreamBuffer() = default;
  StreamBuffer(size_t bytes, StreamHandle stream);
  ~StreamBuffer() { reset(); }
  StreamBuffer(StreamBuffer&& o) noexcept { take(o); }
  StreamBuffer& operator=(StreamBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      take(o);
    }
    return *this;
  }
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;

  uint64_t address() const { return address_; }
  size_t size() const { return size_; }
  StreamHandle stream() const { return stream_; }
  // Orders `stream` after the work queued on this buffer's stream so far (so that it sees what
  // that work writes), and the free after the work `stream` will have queued by then.
  void share_with(StreamHandle stream);
  // Wait for the work queued on the buffer's stream, then copy from or to host memory.
  void download(void* host, size_t bytes) const;
  void upload(const void* host, size_t bytes);

 private:
  void reset() noexcept;  // frees (as the destructor)
  void take(StreamBuffer& o) noexcept {
    address_ = std::exchange(o.address_, 0);
    stream_ = o.stream_;
    size_ = std::exchange(o.size_, 0);
    users_ = std::move(o.users_);
  }
  uint64_t address_ = 0;  // CUdeviceptr
  StreamHandle stream_ = nullptr;
  size_t size_ = 0;
  std::vector<StreamHandle> users_;  // other streams it was shared with
};

// A device allocation (cuMemAlloc); size 0 allocates nothing. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);

  // The CUdeviceptr that a pointer parameter takes.
  uint64_t address() const { return allocation_.get().address; }
  size_t size() const { return allocation_.get().size; }

  // Copies between host memory and bytes [offset, offset + bytes) of the buffer (synchronous).
  // A range outside the buffer throws RuntimeArgError.
  void upload(const void* host, size_t bytes, size_t offset = 0);
  void download(void* host, size_t bytes, size_t offset = 0) const;
  // Sets every byte to `value`: cuMemsetD8 on the default stream, or cuMemsetD8Async ordered on
  // `stream`.
  void fill(uint8_t value, StreamHandle stream = nullptr);

 private:
  detail::Owned<detail::Allocation, detail::free_allocation> allocation_;
};

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct LaunchConfig {
  Dim3 grid, block;
  unsigned dynamic_shared_bytes = 0;
  StreamHandle stream = nullptr;  // the stream the launch is queued on
};

// The attributes cuFuncGetAttribute reports (values are CUfunction_attribute's).
enum class FunctionAttribute : int {
  MaxThreadsPerBlock = 0,
  SharedSizeBytes = 1,  // static shared memory
  LocalSizeBytes = 3,   // per thread
  NumRegs = 4,
  MaxDynamicSharedSizeBytes = 8,
};

// A kernel of a loaded Module; valid while that Module lives.
class Function {
 public:
  const std::string& name() const { return name_; }
  int attribute(FunctionAttribute attribute) const;
  // Allows launches with up to `bytes` of dynamic shared memory (needed above 48 KiB).
  void set_max_dynamic_shared_bytes(int bytes);

  // Launches on config.stream; params[i] points to the value of kernel parameter i.
  void launch_with_params(const LaunchConfig& config, void** params) const;

  // Launches with `args` as the kernel's parameters, in order: each must have exactly the
  // parameter's type and size (a pointer parameter takes a DeviceBuffer::address()).
  template <typename... Args>
  void launch(const LaunchConfig& config, const Args&... args) const {
    static_assert((std::is_trivially_copyable_v<Args> && ...),
                  "kernel arguments are copied bytewise");
    void* params[] = {const_cast<void*>(static_cast<const void*>(&args))..., nullptr};
    launch_with_params(config, params);
  }

 private:
  friend class Module;
  Function(void* handle, std::string name) : handle_(handle), name_(std::move(name)) {}
  void* handle_;
  std::string name_;
};

// A cubin loaded into the context (cuModuleLoadData). Move-only.
class Module {
 public:
  explicit Module(const std::string& cubin);

  // The kernel named `name` (the mangled name unless it is declared extern "C"); a missing name
  // throws CudaDriverError.
  Function function(const std::string& name) const;

 private:
  detail::Owned<void*, detail::unload_module> handle_;
};

// An event: timing by default; `timing` false makes a cheaper one that only orders work. Move-only.
class Event {
 public:
  explicit Event(bool timing = true);

  // Records the event on `stream` (the default stream unless given).
  void record(StreamHandle stream = nullptr);
  void synchronize() const;
  // Makes the work queued on `stream` from now on wait for the last record (cuStreamWaitEvent).
  void block(StreamHandle stream) const;
  // Milliseconds between two recorded events; waits for `end` first.
  static float elapsed_ms(const Event& start, const Event& end);

 private:
  detail::Owned<void*, detail::destroy_event> handle_;
};

}  // namespace kintsugi::cuda
