// \file HostStorage.cpp
// Zeroed host memory (see HostStorage.h): small blocks from the C library, cleared; large ones
// mapped anonymously (zero by the operating system's guarantee) and advised into huge pages.
#include "runtime/HostStorage.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

namespace kintsugi::runtime {
namespace {

constexpr size_t kMappedBytes = size_t{2} << 20;  // a huge page: below it the C library's heap
constexpr size_t kPageBytes = 4096;

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

}  // namespace

void* allocate_zeroed(size_t bytes) noexcept {
  if (bytes > SIZE_MAX - kMappedBytes) return nullptr;
  if (bytes < kMappedBytes) {
    size_t n = round_up(bytes == 0 ? 1 : bytes, 64);
    void* p = std::aligned_alloc(64, n);
    if (p) std::memset(p, 0, n);
    return p;
  }
  size_t n = round_up(bytes, kPageBytes);
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
#ifdef MADV_HUGEPAGE
  madvise(p, n, MADV_HUGEPAGE);  // advice only: without huge pages the memory is as good
#endif
  return p;
}

void release_zeroed(void* p, size_t bytes) noexcept {
  if (!p) return;
  if (bytes < kMappedBytes)
    std::free(p);
  else
    munmap(p, round_up(bytes, kPageBytes));
}

}  // namespace kintsugi::runtime
