// \file FuzzRng.h
// The seeded random choices every fuzzer of tests/fuzz draws from: one generator, so that a seed
// printed in a repro line replays the same program in any of them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace fuzztest {

struct Rng {
  std::mt19937_64 rng;
  explicit Rng(uint64_t seed) : rng(seed) {}
  int pick(int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); }
  bool chance(int percent) { return pick(100) < percent; }
  // A count drawn log-uniformly from [1, max].
  int grow(int max) {
    int bits = 0;
    while ((1 << bits) < max) ++bits;
    int n = 1 << pick(bits + 1);
    n += pick(n);
    return std::max(1, std::min(n, max));
  }
  template <typename T>
  const T& one_of(const std::vector<T>& v) {
    return v[static_cast<size_t>(pick(static_cast<int>(v.size())))];
  }
};

}  // namespace fuzztest
