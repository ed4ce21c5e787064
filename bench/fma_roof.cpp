// \file fma_roof.cpp
// Measures this machine's fp32 FMA roof (FLOP/s), so that CPU results can be stated as a
// fraction of it: every thread (one per core, OpenMP) runs independent chains of vector FMAs
// on registers only, enough chains to hide the FMA latency. Built with the same -O3
// -march=native flags as the generated kernels. Prints one JSON object.
#include <omp.h>

#include <chrono>
#include <cstdio>

namespace {

typedef float vf __attribute__((vector_size(64)));  // 16 floats: one AVX-512 register

constexpr int kChains = 16;  // independent accumulators (latency 4 x 2 ports x 2 for slack)
constexpr long kIters = 20'000'000;

// kChains * 16 lanes * 2 FLOP per iteration.
__attribute__((noinline)) float run(float seed) {
  vf acc[kChains];
  vf a, b;
  for (int l = 0; l < 16; ++l) {
    a[l] = 1.0f + seed * 1e-7f;
    b[l] = 1e-7f;
  }
  for (int c = 0; c < kChains; ++c) acc[c] = a * (float)c;
  for (long i = 0; i < kIters; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * a + b;
    __asm__ volatile("" : "+v"(a));  // keep the loop from being folded
  }
  float s = 0;
  for (int c = 0; c < kChains; ++c) s += acc[c][0];
  return s;
}

}  // namespace

int main() {
  int threads = omp_get_max_threads();
  double best = 0;
  float sink = 0;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel reduction(+ : sink)
    sink += run(static_cast<float>(omp_get_thread_num()));
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double flops = 2.0 * 16 * kChains * static_cast<double>(kIters) * threads;
    if (flops / s > best) best = flops / s;
  }
  std::printf("{\"threads\": %d, \"fp32_fma_gflops\": %.1f, \"checksum\": %g}\n", threads,
              best / 1e9, static_cast<double>(sink));
  return 0;
}
