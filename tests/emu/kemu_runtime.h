// \file kemu_runtime.h
// The CUDA emulator's runtime as an emulated kernel sees it (kintsugi_emu.h and the emulated
// device headers of include/kintsugi/ call it): the warp collectives, barriers, the instructions
// that act on a CTA's shared state (mma, ldmatrix, cp.async, mbarriers, TMA, wgmma) and the thread
// and block ids. EmulatorRuntime.cpp defines them, once, in the test executables, which export
// them to the kernels' shared objects when those are loaded; so a kernel's unit compiles against
// these declarations alone (a few standard C headers), not the runtime's implementation.
//
// Invariant established: every function here acts on the thread that calls it, which is a fiber
// of the launch in progress (launch), or ends the launch with a report (fail).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>

namespace kemu {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

// What a thread waits at: Runnable (nothing), __syncthreads, a warp collective, a warpgroup's
// wgmma.wait_group, a named barrier, an mbarrier (spinning), or nothing more (exited).
enum class Wait { Runnable, Cta, Warp, Group, Named, Spin, Done };

// One wgmma.mma_async of a warpgroup, as its threads issue it: the shape and operands every thread
// gives alike, and each thread's accumulators and (register A) fragment.
struct WgmmaOp {
  int n = 0;
  // s8: k32 of int8 operands (K-major, from shared memory) into s32 accumulators; otherwise k16
  // of f16 or bf16 into f32.
  bool bf16 = false, s8 = false, trans_a = false, trans_b = false, a_in_registers = false;
  uint64_t desc_a = 0, desc_b = 0;
  uint32_t accumulate = 0;
  void* d[128] = {};  // float, or int32_t for s8
  uint32_t a[128][4] = {};
  unsigned issued = 0;  // threads that issued it
};

// --- the launch (the host side of an emulated kernel, Emulator.cpp)

// Runs `body(context)` on `threads` threads of each of `grid` CTAs, one CTA after another, with
// `smem_bytes` of dynamic shared memory; returns the first failure, or nullptr (the text lives
// until the next launch).
const char* launch(void (*body)(void*), void* context, unsigned grid, unsigned threads,
                   uint32_t smem_bytes);

// --- threads, barriers, warp collectives

// Ends the launch: the scheduler stops at its next turn and reports `message` for this thread.
[[noreturn]] void fail(const char* message);
// Waits at `w` until the scheduler releases the thread.
void block_at(Wait w);
unsigned lane();
// The exchange slot (8 words) of lane `lane_index` of the calling thread's warp.
uint32_t* slot(unsigned lane_index);
// Fails unless the calling lane is in the warp collective's member `mask` (leaving it out is
// undefined behaviour on the GPU); `what` names the collective.
void check_mask(unsigned mask, const char* what);
// Fails unless lane `from`, which a shuffle reads, is in its member `mask`.
void check_shuffle_source(unsigned mask, unsigned from);
// Waits until every lane of `mask` waits at a warp collective with the same mask (a lane of the
// mask that exited, or waits with another mask, leaves the CTA without a barrier that can
// complete, reported as such).
void warp_meet(unsigned mask);

// One warp collective of the lanes of `mask`: every lane writes its operands into its exchange
// slot, the lanes meet, each reads what it needs (`read`), and they meet again before a slot is
// written anew.
template <class Read>
inline void collective(const uint32_t* in, int words, Read read, unsigned mask = 0xffffffffu) {
  std::memcpy(slot(lane()), in, size_t(words) * 4);
  warp_meet(mask);
  read();
  warp_meet(mask);
}

Dim3 thread_index();
Dim3 block_index();
Dim3 block_dim();
unsigned char* dynamic_smem();
// The shared-window address of `p`, which must point into the CTA's dynamic shared memory.
size_t shared_window_offset(const void* p);

// Thread arrival at named barrier `id` counting `count` threads this round; `wait`: the caller
// waits for the round to complete (bar.sync).
void named_barrier(unsigned id, unsigned count, bool wait);
// True in the lowest lane of the warp.
bool elect_one();

// --- instructions on shared state

// mma.m16n8k16.row.col, f16 or bf16 operands, summed in double and rounded to f32 once.
void mma_m16n8k16(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], bool bf16);
// mma.m16n8k32.row.col.s32.s8.s8.s32: the sums are exact in 32 bits (wrapping, no saturation).
void mma_m16n8k32_s8(int32_t (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]);
// ldmatrix of `count` 8x8 matrices (x1, x2, x4) into d[0 .. count - 1], with or without .trans.
void ldmatrix(uint32_t* d, int count, uint32_t row_address, bool trans);

void cp_async(uint32_t smem, const void* gmem, uint32_t bytes, uint32_t src_bytes);
void cp_async_commit();
// Lands the calling thread's oldest committed groups until `keep` are left.
void cp_async_retire(size_t keep);

void mbarrier_init(uint32_t bar, uint32_t arrivals);
void mbarrier_expect_tx(uint32_t bar, uint32_t bytes);
void mbarrier_arrive(uint32_t bar);
// True once the phase of `parity` has completed; a false result lets the other threads run.
bool mbarrier_try_wait_parity(uint32_t bar, uint32_t parity);

void tma_load(uint32_t dst, const void* map, uint32_t bar,
              std::initializer_list<int32_t> coordinates);
void tma_store(const void* map, uint32_t src, std::initializer_list<int32_t> coordinates);
void bulk_commit();
// Performs the calling thread's oldest store groups until `pending` are left.
void bulk_wait(size_t pending);

void fence_proxy_async();
// The calling thread's part of a wgmma: the thread's k-th issue joins the warpgroup's k-th op.
void wgmma_issue(const WgmmaOp& given, void* d, const uint32_t* a);
void wgmma_commit();
// The warpgroup's threads meet; then every committed group but the newest `pending` is computed.
void wgmma_wait(size_t pending);

template <class T>
inline uint32_t bits(T v) {
  static_assert(sizeof(T) == 4, "32-bit values");
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}
template <class T>
inline T from_bits(uint32_t u) {
  T v;
  std::memcpy(&v, &u, 4);
  return v;
}

}  // namespace kemu
