// \file CpuPrelude.h
// The fixed prelude of every generated CPU translation unit (cpu_prelude()): error state, checked
// index and floor division helpers, exact f16/bf16 conversions (kHalfConversions, which the CUDA
// emulator of the tests shares) and fp8 ones (target/Fp8.h, which the CUDA code shares),
// NaN-propagating min/max, saturating casts.
//
// Invariant established: the conversions float -> f16/bf16 bits are round-to-nearest-even and
// bit-exact with double_to_f16_bits / double_to_bf16_bits for every float input (NaN becomes the
// canonical NaN 0x7e00 / 0x7fc0); helpers never trap (no division by zero, no INT64_MIN / -1).
// Only C headers and GNU builtins are used so that a kernel compiles fast, and nothing has vague
// linkage (no GNU-unique symbols), so dlclose really unloads the object.
#pragma once

#include <string>

#include "target/Fp8.h"

namespace kintsugi::cpu {

// The exact conversions between float and f16 / bf16 bits (ks_f2h, ks_h2f, ks_f2b, ks_b2f, with
// ks_fbits and ks_bitsf), C code for a translation unit that includes math.h, stdint.h and
// string.h; also compiled into the kernels of the CUDA emulator the tests run (tests/emu).
inline constexpr const char* kHalfConversions = R"PRELUDE(static inline uint32_t ks_fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float ks_bitsf(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t ks_f2h(float f) {
  uint32_t x = ks_fbits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return 0x7e00;                  // NaN
  if (ax >= 0x477ff000u) return sign | 0x7c00;          // >= 65520 rounds to inf
  if (ax >= 0x38800000u) {                              // normal f16
    uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u);       // round to nearest even at bit 13
    return sign | (uint16_t)((r - (112u << 23)) >> 13);
  }
  // subnormal f16: multiple of 2^-24 (the scaling is exact, rintf rounds ties to even)
  return sign | (uint16_t)rintf(ks_bitsf(ax) * 16777216.0f);
}
static inline float ks_h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return ks_bitsf(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    float f = (float)m * 5.9604644775390625e-08f;  // 2^-24
    return sign ? -f : f;
  }
  return ks_bitsf(sign | ((e + 112u) << 23) | (m << 13));
}
static inline uint16_t ks_f2b(float f) {
  uint32_t x = ks_fbits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
static inline float ks_b2f(uint16_t b) { return ks_bitsf((uint32_t)b << 16); }
)PRELUDE";

// The prelude around the conversions.
inline constexpr const char* kCpuPreludeHead = R"PRELUDE(
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

// The threads of a kernel's team: KINTSUGI_NUM_THREADS when set to a positive number, else
// OpenMP's default (OMP_NUM_THREADS, else the cores). No static state (a guarded static would
// be initialised concurrently by a team's threads, in an object that is later unloaded).
static inline int ks_threads() {
#ifdef _OPENMP
  const char* e = getenv("KINTSUGI_NUM_THREADS");
  int v = e ? atoi(e) : 0;
  return v > 0 ? v : omp_get_max_threads();
#else
  return 1;
#endif
}

// The bytes of a kernel's inputs and outputs from which its row stores stream past the caches
// (TilePrelude's row helpers): KINTSUGI_STREAM_BYTES when set to a number of bytes, else 96 MiB.
static inline int64_t ks_stream_bytes() {
  const char* e = getenv("KINTSUGI_STREAM_BYTES");
  char* end = nullptr;
  const long long v = e ? strtoll(e, &end, 10) : -1;
  return (e && end != e && *end == 0 && v >= 0) ? (int64_t)v : (int64_t)96 << 20;
}

struct KsErr {
  int failed;
  char* msg;
  int64_t len;
  const char* const* sites;
};

#define KS_FAILED(e) __builtin_expect(__atomic_load_n(&(e)->failed, __ATOMIC_RELAXED) != 0, 0)

// The first failing thread claims the error slot and writes the message; later failures only
// stop their own work. The message is read by the caller after every thread has joined.
__attribute__((noinline, cold)) bool ks_claim(KsErr* e) {
  int expected = 0;
  return __atomic_compare_exchange_n(&e->failed, &expected, 1, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE) &&
         e->msg != nullptr && e->len > 0;
}
__attribute__((noinline, cold)) void ks_fail_site(KsErr* e, const char* prefix, int site) {
  if (ks_claim(e)) snprintf(e->msg, (size_t)e->len, "%s%s", prefix, e->sites[site]);
}

// Failures inside loops are recorded in a local KsLocal (one per function or parallel
// iteration, kept in registers once the helpers are inlined, so that the helpers stay free of
// memory side effects and loop-invariant divisions can be hoisted) and flushed to the shared
// KsErr at the next check point. The first failure in program order is kept.
struct KsLocal {
  int bad, kind, site, dim;  // kind 0: index out of bounds, 1: division by zero
  int64_t idx, n;
};
__attribute__((noinline, cold)) void ks_flush(KsErr* e, KsLocal l) {
  if (!ks_claim(e)) return;
  if (l.kind == 0)
    snprintf(e->msg, (size_t)e->len, "index out of bounds: %s dimension %d index %lld not in [0, %lld)",
             e->sites[l.site], l.dim, (long long)l.idx, (long long)l.n);
  else
    snprintf(e->msg, (size_t)e->len, "division by zero in %s", e->sites[l.site]);
}
#define KS_CHECK(fail)                 \
  if (__builtin_expect(ks_l.bad, 0)) { \
    ks_flush(ks_e, ks_l);              \
    fail                               \
  }

static inline bool ks_chk(KsLocal& l, int64_t i, int64_t n, int site, int dim) {
  bool ok = (uint64_t)i < (uint64_t)n;
  if (__builtin_expect(!ok, 0) && !l.bad) {
    l.bad = 1;
    l.kind = 0;
    l.site = site;
    l.dim = dim;
    l.idx = i;
    l.n = n;
  }
  return ok;
}

// Floor division and modulo. The hardware division is executed unconditionally on a divisor
// that cannot trap (0 and -1 are replaced by 1 and fixed up afterwards), so that the host
// compiler may hoist a loop-invariant division out of a loop. ks_fdivc / ks_fmodc take a
// non-zero divisor.
static inline int64_t ks_fdivc(int64_t a, int64_t b) {
  int64_t d = (b == 0 || b == -1) ? 1 : b;
  int64_t q = a / d, r = a - q * d;
  q = (r != 0 && ((r < 0) != (d < 0))) ? q - 1 : q;
  return b == -1 ? (int64_t)(0ull - (uint64_t)a) : (b == 0 ? 0 : q);
}
static inline int64_t ks_fmodc(int64_t a, int64_t b) {
  int64_t d = (b == 0 || b == -1) ? 1 : b;
  int64_t r = a - (a / d) * d;
  r = (r != 0 && ((r < 0) != (d < 0))) ? r + d : r;
  return (b == 0 || b == -1) ? 0 : r;
}
static inline void ks_divzero(KsLocal& l, int site) {
  if (!l.bad) {
    l.bad = 1;
    l.kind = 1;
    l.site = site;
  }
}
static inline int64_t ks_fdiv(KsLocal& l, int64_t a, int64_t b, int site) {
  if (__builtin_expect(b == 0, 0)) ks_divzero(l, site);
  return ks_fdivc(a, b);
}
static inline int64_t ks_fmod(KsLocal& l, int64_t a, int64_t b, int site) {
  if (__builtin_expect(b == 0, 0)) ks_divzero(l, site);
  return ks_fmodc(a, b);
}
static inline float ks_fmodf(float a, float b) {
  float r = fmodf(a, b);
  return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r;
}

static inline int64_t ks_imin(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t ks_imax(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t ks_iabs(int64_t a) { return a < 0 ? (int64_t)(0ull - (uint64_t)a) : a; }
// NaN-propagating: if either operand is NaN the result is NaN.
static inline float ks_fmin(float a, float b) { return (a < b || a != a) ? a : b; }
static inline float ks_fmax(float a, float b) { return (a > b || a != a) ? a : b; }

// Truncation toward zero with saturation; NaN -> 0.
static inline int64_t ks_f2i(float x) {
  if (x != x) return 0;
  if (x >= 9223372036854775808.0f) return INT64_MAX;
  if (x < -9223372036854775808.0f) return INT64_MIN;
  return (int64_t)x;
}
static inline int64_t ks_d2i(double x) {
  if (x != x) return 0;
  if (x >= 9223372036854775808.0) return INT64_MAX;
  if (x < -9223372036854775808.0) return INT64_MIN;
  return (int64_t)x;
}
static inline int64_t ks_sat8(int64_t x) { return x < -128 ? -128 : (x > 127 ? 127 : x); }
// ks_sat8(ks_f2i(x)) in 32 bits: truncation is monotone and the bounds are integers, so clamping
// before it saturates alike; the vectoriser keeps 16 lanes a register instead of 8 of int64.
// Three selects, each with a mask of its own compare: nested conditions had their masks combined
// in general registers, a third slower (a row's quantising store, 0.39 against 0.25 ns an element).
static inline int32_t ks_f2i8(float x) {
  float c = -128.0f > x ? -128.0f : x;
  c = 127.0f < c ? 127.0f : c;
  return x == x ? (int32_t)c : 0;
}
static inline int64_t ks_sat32(int64_t x) {
  return x < INT32_MIN ? (int64_t)INT32_MIN : (x > INT32_MAX ? (int64_t)INT32_MAX : x);
}

)PRELUDE";
inline constexpr const char* kCpuPreludeTail =
    R"PRELUDE(static inline float ks_rf16(float x) { return ks_h2f(ks_f2h(x)); }
static inline float ks_rbf16(float x) { return ks_b2f(ks_f2b(x)); }

// Frees the intermediate buffers on every return path.
struct KsFree {
  void** p;
  int n;
  ~KsFree() {
    for (int i = 0; i < n; ++i) free(p[i]);
  }
};
__attribute__((noinline)) void* ks_alloc(KsErr* e, void** slot, int site, int64_t elem_bytes,
                                          int rank, const int64_t* shape) {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) {
    if (shape[d] < 0) {
      ks_fail_site(e, "negative size for intermediate buffer ", site);
      return nullptr;
    }
    if (shape[d] != 0 && n > ((int64_t)1 << 60) / shape[d]) {
      ks_fail_site(e, "element count overflows for intermediate buffer ", site);
      return nullptr;
    }
    n *= shape[d];
  }
  void* p = malloc((size_t)(n * elem_bytes + 64));
  if (!p) ks_fail_site(e, "out of memory allocating intermediate buffer ", site);
  *slot = p;
  return p;
}

}  // namespace
)PRELUDE";

inline std::string cpu_prelude() {
  return std::string(kCpuPreludeHead) + kHalfConversions +
         "#define KS_FP8_FN static inline\n#define KS_FBITS ks_fbits\n#define KS_BITSF ks_bitsf\n" +
         target::kFp8ToE4m3 + target::kFp8Conversions + kCpuPreludeTail;
}

}  // namespace kintsugi::cpu
