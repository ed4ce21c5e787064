// \file HostStorage.cpp
// Host memory (see HostStorage.h): small blocks from the C library, cleared; large ones mapped
// anonymously (zero by the operating system's guarantee) and advised into huge pages, or a
// recently released block of the same size, cleared. Memory for an output written whole is not
// cleared.
#include "runtime/HostStorage.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace kintsugi::runtime {
namespace {

constexpr size_t kMappedBytes = size_t{2} << 20;  // a huge page: below it the C library's heap
constexpr size_t kPageBytes = 4096;

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

// Mapped blocks released recently, kept for reuse: a new block's page faults cost more than
// clearing a kept one (8 MB: 3.6 ms of faults against 0.4 ms of memset on a virtual machine), and
// a caller that allocates an output a call sees the same sizes again. At most kKeptBlocks blocks
// and kKeptBytes bytes; the oldest goes first.
constexpr size_t kKeptBlocks = 8;
constexpr size_t kKeptBytes = size_t{1} << 30;

struct Kept {
  std::mutex mutex;
  std::vector<std::pair<void*, size_t>> blocks;  // oldest first, with their mapped sizes
  size_t bytes = 0;
};

Kept& kept() {
  static Kept* k = new Kept;  // never destroyed: blocks may be released during exit
  return *k;
}

void* take_kept(size_t n) {
  Kept& k = kept();
  std::lock_guard<std::mutex> lock(k.mutex);
  for (auto it = k.blocks.begin(); it != k.blocks.end(); ++it) {
    if (it->second != n) continue;
    void* p = it->first;
    k.bytes -= n;
    k.blocks.erase(it);
    return p;
  }
  return nullptr;
}

// Keeps block `p` of `n` mapped bytes; returns a block to unmap (the oldest one, or `p` itself)
// or {nullptr, 0}.
std::pair<void*, size_t> keep(void* p, size_t n) {
  Kept& k = kept();
  std::lock_guard<std::mutex> lock(k.mutex);
  if (n > kKeptBytes) return {p, n};
  k.blocks.emplace_back(p, n);
  k.bytes += n;
  if (k.blocks.size() <= kKeptBlocks && k.bytes <= kKeptBytes) return {nullptr, 0};
  std::pair<void*, size_t> oldest = k.blocks.front();
  k.blocks.erase(k.blocks.begin());
  k.bytes -= oldest.second;
  return oldest;
}

}  // namespace

void* allocate_host(size_t bytes, bool zeroed) noexcept {
  if (bytes > SIZE_MAX - kMappedBytes) return nullptr;
  if (bytes < kMappedBytes) {
    size_t n = round_up(bytes == 0 ? 1 : bytes, 64);
    void* p = std::aligned_alloc(64, n);
    if (p && zeroed) std::memset(p, 0, n);
    return p;
  }
  // Mapped with a huge page of slack and trimmed to a 2 MiB boundary, so that every 2 MiB of the
  // block can be one huge page (one fault, not 512).
  size_t n = round_up(bytes, kPageBytes);
  if (void* reused = take_kept(n)) {
    if (zeroed) std::memset(reused, 0, n);
    return reused;
  }
  void* raw =
      mmap(nullptr, n + kMappedBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  auto* base = static_cast<char*>(raw);
  char* p = reinterpret_cast<char*>(round_up(reinterpret_cast<uintptr_t>(base), kMappedBytes));
  if (p > base) munmap(base, static_cast<size_t>(p - base));
  size_t tail = kMappedBytes - static_cast<size_t>(p - base);
  if (tail > 0) munmap(p + n, tail);
#ifdef MADV_HUGEPAGE
  madvise(p, n, MADV_HUGEPAGE);  // advice only: without huge pages the memory is as good
#endif
  return p;
}

void release_host(void* p, size_t bytes) noexcept {
  if (!p) return;
  if (bytes < kMappedBytes) {
    std::free(p);
    return;
  }
  auto [unmapped, n] = keep(p, round_up(bytes, kPageBytes));
  if (unmapped) munmap(unmapped, n);
}

}  // namespace kintsugi::runtime
