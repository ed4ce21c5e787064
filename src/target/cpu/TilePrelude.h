// \file TilePrelude.h
// Helpers the tile code generator's C++ uses on top of the CPU prelude: the implementations of
// single tile operations that the host compiler would not vectorise well on its own.
//   - ks_dot<M, N, K>: C = A x B on row-major f32 tiles, a register-blocked micro-kernel (4 rows
//     x up to 4 vectors of columns held in registers across the K loop, one FMA per element);
//     on integer tiles, exact sums in their type.
//   - ks_expf: exp without branches or errno, so that a loop over a tile vectorises (Cephes-style
//     range reduction and polynomial, about 1 ulp; subnormal results down to 2^-149; exact 0,
//     inf and NaN at the ends); with AVX-512 and GCC, a hand-written vector variant that the
//     vectorised loops call.
//   - ks_sel: a select whose operands are evaluated before it (they read tiles, always in
//     range), so that a loop over a select of loads vectorises without masked loads.
//   - ks_h2f_row, ks_f2h_row, ks_rf16_row: f16 -> f32 and f32 -> f16 of a contiguous row, and
//     f32 rounded to f16 precision (F16C when the host has it); ks_f2i8_row: f32 -> i8;
//     ks_f32_row: a copy. The stores of ks_f2h_row, ks_f2i8_row and ks_f32_row stream past the
//     caches when asked to (non-temporal, aligned; ks_stream_fence orders them).
//   - ks_prefetch: the cache lines of a span of memory, prefetched.
// Nothing here knows which program it serves: each helper is one tile operation.
#pragma once

namespace kintsugi::cpu {

inline constexpr const char* kTilePrelude = R"PRELUDE(
#include <immintrin.h>

namespace {


#if defined(__AVX512F__)
typedef __m512 ks_vf;
enum { KS_W = 16 };
static inline ks_vf ks_vload(const float* p) { return _mm512_loadu_ps(p); }
static inline void ks_vstore(float* p, ks_vf v) { _mm512_storeu_ps(p, v); }
static inline ks_vf ks_vset1(float x) { return _mm512_set1_ps(x); }
static inline ks_vf ks_vfma(ks_vf a, ks_vf b, ks_vf c) { return _mm512_fmadd_ps(a, b, c); }
static inline ks_vf ks_vzero() { return _mm512_setzero_ps(); }
#elif defined(__AVX2__) && defined(__FMA__)
typedef __m256 ks_vf;
enum { KS_W = 8 };
static inline ks_vf ks_vload(const float* p) { return _mm256_loadu_ps(p); }
static inline void ks_vstore(float* p, ks_vf v) { _mm256_storeu_ps(p, v); }
static inline ks_vf ks_vset1(float x) { return _mm256_set1_ps(x); }
static inline ks_vf ks_vfma(ks_vf a, ks_vf b, ks_vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline ks_vf ks_vzero() { return _mm256_setzero_ps(); }
#else
typedef float ks_vf;
enum { KS_W = 1 };
static inline ks_vf ks_vload(const float* p) { return *p; }
static inline void ks_vstore(float* p, ks_vf v) { *p = v; }
static inline ks_vf ks_vset1(float x) { return x; }
static inline ks_vf ks_vfma(ks_vf a, ks_vf b, ks_vf c) { return fmaf(a, b, c); }
static inline ks_vf ks_vzero() { return 0.0f; }
#endif

template <int M, int N, int K>
static inline void ks_dot(const float* __restrict A, const float* __restrict B,
                          float* __restrict C) {
  constexpr int R = 4;
  constexpr int NB = (N % (4 * KS_W) == 0) ? 4 : ((N % (2 * KS_W) == 0) ? 2 : 1);
  if constexpr (M % R == 0 && N % KS_W == 0) {
    for (int m = 0; m < M; m += R) {
      for (int n = 0; n < N; n += NB * KS_W) {
        ks_vf acc[R][NB];
        for (int r = 0; r < R; ++r)
          for (int q = 0; q < NB; ++q) acc[r][q] = ks_vzero();
        for (int k = 0; k < K; ++k) {
          ks_vf b[NB];
          for (int q = 0; q < NB; ++q) b[q] = ks_vload(B + k * N + n + q * KS_W);
          for (int r = 0; r < R; ++r) {
            ks_vf a = ks_vset1(A[(m + r) * K + k]);
            for (int q = 0; q < NB; ++q) acc[r][q] = ks_vfma(a, b[q], acc[r][q]);
          }
        }
        for (int r = 0; r < R; ++r)
          for (int q = 0; q < NB; ++q) ks_vstore(C + (m + r) * N + n + q * KS_W, acc[r][q]);
      }
    }
  } else {
    for (int m = 0; m < M; ++m) {
      for (int n = 0; n < N; ++n) C[m * N + n] = 0.0f;
      for (int k = 0; k < K; ++k) {
        float a = A[m * K + k];
        for (int n = 0; n < N; ++n) C[m * N + n] = fmaf(a, B[k * N + n], C[m * N + n]);
      }
    }
  }
}

// An integer dot: exact sums in the tiles' integer type.
template <int M, int N, int K, class T>
static inline void ks_dot(const T* __restrict A, const T* __restrict B, T* __restrict C) {
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) C[m * N + n] = 0;
    for (int k = 0; k < K; ++k) {
      T a = A[m * K + k];
      for (int n = 0; n < N; ++n) C[m * N + n] += a * B[k * N + n];
    }
  }
}

template <class T, class U>
static inline auto ks_sel(bool c, T x, U y) {
  return c ? x : y;
}

static inline float ks_expf_one(float x) {
  // Down to exp(-104) (below 2^-150, which rounds to 0): k lies in [-150, 128], so 2^k is
  // applied as 2^(k / 2) times 2^(k - k / 2), both normal: y 2^(k / 2) is exact and the second
  // product rounds once, a subnormal result or 2^128 (x up to log(FLT_MAX) = 88.72, a finite
  // result) included. Two multiplies without selects: 18% faster than choosing the split by
  // range (softmax f32 4096 x 8192 on the CPU), with the same results.
  float xc = x < -104.0f ? -104.0f : (x > 88.75f ? 88.75f : x);
  float k = __builtin_rintf(xc * 1.44269504088896341f);
  float r = fmaf(k, -0.693359375f, xc);
  r = fmaf(k, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = fmaf(p, r, 1.3981999507e-3f);
  p = fmaf(p, r, 8.3334519073e-3f);
  p = fmaf(p, r, 4.1665795894e-2f);
  p = fmaf(p, r, 1.6666665459e-1f);
  p = fmaf(p, r, 5.0000001201e-1f);
  float y = fmaf(p * r, r, r) + 1.0f;
  const int32_t k1 = (int32_t)k / 2, k2 = (int32_t)k - k1;  // each in [-75, 64]
  y *= ks_bitsf((uint32_t)(k1 + 127) << 23);
  y *= ks_bitsf((uint32_t)(k2 + 127) << 23);
  // The clamps give the ends without selects: x below -104 gives about 0.49 2^-149, which rounds
  // to 0, and x above 88.75 overflows to inf (the same result as selects at -103.98 and 88.75 for
  // every f32 input, checked exhaustively; 40 % less time an element).
  return x != x ? x : y;
}

#if defined(__AVX512F__) && defined(_OPENMP) && defined(__GNUC__) && !defined(__clang__)
// The same exponential on 16 lanes, for loops the host compiler vectorises: ks_expf is declared
// with a vector variant of 16 lanes (OpenMP's declare simd), so a vectorised loop calls
// _ZGVeN16v_ks_expf, written here with AVX-512: the clamps as a max and a min, 2^k applied by
// vscalefps (one rounding, subnormal results and inf included) instead of the two products of
// integer-built powers. The same bits as ks_expf_one for every f32 input (checked
// exhaustively), NaN included; half the time an element in the cache (softmax's exp pass: 0.29
// -> 0.15 ns on 2 Zen 5 cores). The scalar symbol is ks_expf_one under the name ks_expf.
extern "C" {
#pragma omp declare simd simdlen(16) notinbranch
__attribute__((const, nothrow)) float ks_expf(float x);
__attribute__((used, visibility("hidden"))) __m512 _ZGVeN16v_ks_expf(__m512 x) {
  const __m512 xc =
      _mm512_min_ps(_mm512_set1_ps(88.75f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(k, _mm512_set1_ps(-0.693359375f), xc);
  r = _mm512_fmadd_ps(k, _mm512_set1_ps(2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  return _mm512_mask_mov_ps(_mm512_scalef_ps(y, k), _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}
__attribute__((used, visibility("hidden"))) float ks_expf_scalar(float x) { return ks_expf_one(x); }
}
__asm__(".globl ks_expf\n.hidden ks_expf\n.set ks_expf, ks_expf_scalar");
#else
static inline float ks_expf(float x) { return ks_expf_one(x); }
#endif

static inline void ks_h2f_row(float* __restrict d, const uint16_t* __restrict s, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(s + i))));
#endif
#if defined(__F16C__) && defined(__AVX__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(s + i))));
#endif
  for (; i < n; ++i) d[i] = ks_h2f(s[i]);
}

// Prefetches the cache lines of [address, address + bytes) into the core's caches (never
// faults: an address past a buffer's end is harmless).
static inline void ks_prefetch(uintptr_t address, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch((const void*)(address + b), 0, 2);
}

// Stores of a row that stream past the caches (non-temporal, in whole aligned vectors): where a
// kernel's data outgrows the caches, a cached store first reads the line it writes and later
// evicts it, a third more memory traffic than the copy of the same bytes (layer norm 4096 x 8192
// f16 on 2 cores: 7.7 -> 5.4 ms). Each row helper below converts the unaligned head and the tail
// with ordinary stores and, when `stream` is set, the aligned body with streaming ones; the
// kernel fences its streamed stores before it returns (ks_stream_fence).
// The elements before the first `align`-byte boundary at or after `d` (at most n).
static inline int64_t ks_stream_head(const void* d, int64_t align, int64_t elem, int64_t n) {
  const int64_t head = (int64_t)((0 - (uintptr_t)d) & (uintptr_t)(align - 1)) / elem;
  return head < n ? head : n;
}
static inline void ks_stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

// Converts a contiguous row of f32 to f16 bits: round to nearest even, like ks_f2h (a NaN stays
// a NaN, with the sign and payload bits the hardware keeps).
static inline void ks_f2h_row(uint16_t* __restrict d, const float* __restrict s, int64_t n,
                              bool stream = false) {
  int64_t i = 0;
#if defined(__AVX512F__)
  if (stream) {
    for (const int64_t head = ks_stream_head(d, 32, 2, n); i < head; ++i) d[i] = ks_f2h(s[i]);
    for (; i + 16 <= n; i += 16)
      _mm256_stream_si256((__m256i*)(d + i),
                          _mm512_cvtps_ph(_mm512_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i*)(d + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
#endif
#if defined(__F16C__) && defined(__AVX__)
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i*)(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
#endif
  (void)stream;
  for (; i < n; ++i) d[i] = ks_f2h(s[i]);
}

// Casts a contiguous row of f32 to i8 like ks_f2i8: NaN to 0, saturated to [-128, 127],
// truncated (a clamp, a masked conversion and a saturating narrowing, 16 lanes a step).
static inline void ks_f2i8_row(int8_t* __restrict d, const float* __restrict s, int64_t n,
                               bool stream = false) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 lo = _mm512_set1_ps(-128.0f), hi = _mm512_set1_ps(127.0f);
  auto step = [&](int64_t at) {
    const __m512 x = _mm512_loadu_ps(s + at);
    const __mmask16 number = _mm512_cmp_ps_mask(x, x, _CMP_ORD_Q);
    const __m512 c = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
    return _mm512_cvtsepi32_epi8(_mm512_maskz_cvttps_epi32(number, c));
  };
  if (stream) {
    for (const int64_t head = ks_stream_head(d, 16, 1, n); i < head; ++i)
      d[i] = (int8_t)ks_f2i8(s[i]);
    for (; i + 16 <= n; i += 16) _mm_stream_si128((__m128i*)(d + i), step(i));
  }
  for (; i + 16 <= n; i += 16) _mm_storeu_si128((__m128i*)(d + i), step(i));
#endif
  (void)stream;
  for (; i < n; ++i) d[i] = (int8_t)ks_f2i8(s[i]);
}

// Copies a contiguous row of f32 (a row of an f32 output, computed into a chunk on the stack
// so that it can stream).
static inline void ks_f32_row(float* __restrict d, const float* __restrict s, int64_t n,
                              bool stream = false) {
  int64_t i = 0;
#if defined(__AVX512F__)
  if (stream) {
    for (const int64_t head = ks_stream_head(d, 64, 4, n); i < head; ++i) d[i] = s[i];
    for (; i + 16 <= n; i += 16) _mm512_stream_ps(d + i, _mm512_loadu_ps(s + i));
  }
#endif
  (void)stream;
  for (; i < n; ++i) d[i] = s[i];
}

// Rounds a contiguous row of f32 to f16 precision (round to nearest even, like ks_rf16).
static inline void ks_rf16_row(float* __restrict d, const float* __restrict s, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__) && defined(__AVX__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(s + i),
                                                             _MM_FROUND_TO_NEAREST_INT)));
#endif
  for (; i < n; ++i) d[i] = ks_rf16(s[i]);
}

// The calling thread's workspace of tiles: kept across calls, grown to the largest size asked
// for, its pages written once when it is allocated. (Allocated and freed by every call, a
// workspace above malloc's mmap threshold was mapped, and its pages faulted in, by the first call
// of a process: 0.2-0.3 ms on a virtual machine whose page faults cost about 10 us.)
struct KsWorkspace {
  char* p = nullptr;
  size_t size = 0;
  ~KsWorkspace() { free(p); }
};
static char* ks_workspace(size_t bytes) {
  static thread_local KsWorkspace ws;
  if (ws.size < bytes) {
    free(ws.p);
    const size_t rounded = (bytes + 63) / 64 * 64;
    ws.p = (char*)aligned_alloc(64, rounded);
    ws.size = ws.p ? rounded : 0;
    if (ws.p) memset(ws.p, 0, rounded);
  }
  return ws.p;
}

}  // namespace
)PRELUDE";

}  // namespace kintsugi::cpu
