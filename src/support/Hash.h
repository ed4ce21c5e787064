// \file Hash.h
// FNV-1a 64-bit hashing and its fixed-width hex rendering, for cache keys and content checks.
//
// Invariant established: the same bytes give the same hash on every machine and in every process
// (no seed, no pointer values), so hashes can name files in a cache shared between runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace kintsugi {

inline constexpr uint64_t kFnv1aOffset = 1469598103934665603ull;

// Continues hash `h` over `n` bytes at `data`.
inline uint64_t fnv1a(const void* data, size_t n, uint64_t h = kFnv1aOffset) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}
inline uint64_t fnv1a(std::string_view s, uint64_t h = kFnv1aOffset) {
  return fnv1a(s.data(), s.size(), h);
}

// 16 lower-case hex digits.
inline std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace kintsugi
