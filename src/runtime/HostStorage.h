// \file HostStorage.h
// The memory behind host tensors: 64-byte aligned and zero when allocated, with blocks of 2 MiB
// and more mapped from the operating system and marked for transparent huge pages.
//
// Why: an output tensor is written whole by the kernel that computes it, so filling it with
// zeros first was a second pass over memory on one thread, and on 4 KiB pages the page faults of
// that pass cost more than the kernel (a 128 MB f32 softmax output through the Python module:
// 515 ms a call against 45 ms of kernel time, docs/perf.md). Mapped pages are zero already, so
// value-initialising an element (std::vector's resize and size constructor) leaves the memory as
// allocated instead of writing it.
//
// An output that a kernel is about to write whole needs no zeros at all: a recently released
// block reused for it is not cleared again (the clearing was a quarter of an f32 softmax call at
// 4096 x 8192 through the Python module, docs/perf.md). Its allocator is made with
// `zeroed = false` (Tensor::for_output).
//
// Invariant: a Storage of n elements that was constructed or grown from empty with a zeroing
// allocator reads as zeros. (A vector shrunk and grown again within its capacity would not:
// Tensor never does that.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace kintsugi::runtime {

// 64-byte aligned memory of `bytes` bytes, zeroed unless `zeroed` is false (then it holds
// whatever it held); nullptr when it is not available.
void* allocate_host(size_t bytes, bool zeroed) noexcept;
// Returns memory from allocate_host(bytes, ...), with the same byte count.
void release_host(void* p, size_t bytes) noexcept;

template <class T>
struct ZeroedAllocator {
  using value_type = T;

  bool zeroed = true;  // false: memory as it comes, for an output a kernel writes whole

  ZeroedAllocator() = default;
  explicit ZeroedAllocator(bool zeroed) noexcept : zeroed(zeroed) {}
  template <class U>
  ZeroedAllocator(const ZeroedAllocator<U>& other) noexcept : zeroed(other.zeroed) {}

  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_alloc();
    void* p = allocate_host(n * sizeof(T), zeroed);
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) noexcept { release_host(p, n * sizeof(T)); }

  // Default-initialises where the vector value-initialises: the memory is zero already.
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }

  // Memory of either kind is released alike: any allocator frees what another allocated.
  template <class U>
  bool operator==(const ZeroedAllocator<U>&) const noexcept {
    return true;
  }
};

using Storage = std::vector<uint8_t, ZeroedAllocator<uint8_t>>;

}  // namespace kintsugi::runtime
