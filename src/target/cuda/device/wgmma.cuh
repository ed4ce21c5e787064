// \file wgmma.cuh
// Warpgroup matrix multiply-accumulate (wgmma.mma_async, sm_90a) and its ordering: the fence, the
// group commit and wait, and the proxy fence between shared-memory writes and wgmma's reads.
//
// One call is one instruction executed by the 128 threads of a warpgroup (four consecutive warps,
// the first a multiple of four): D (64 x N, f32) = A (64 x 16) * B (16 x N) + D, or D = A * B
// when `accumulate` is 0. A and B are read from shared memory through descriptors (smem_desc.cuh;
// the _ss forms), or A from registers (the _rs forms); `TransA` / `TransB` 1 read an operand
// MN-major rather than K-major (register A is K-major). Thread t of the warpgroup (warp w = t / 32,
// lane l, g = l / 4, q = l % 4) holds D element (16w + g + 8 ((i >> 1) & 1), 8 (i >> 2) + 2q +
// (i & 1)) in d[i], and in register A a[j] the pair (16w + g + 8 (j & 1), 2q + 8 (j >> 1) and + 1),
// the first in the low half: each warp's 16 rows as mma.m16n8k16 lays them out.
//
// The instruction is asynchronous. wgmma_fence orders earlier accesses to d and a before it;
// wgmma_commit_group closes the warpgroup's group of instructions issued since the last commit;
// wgmma_wait_group<N> returns when at most N groups are pending, and only then may d be read or a
// be written again. Shared memory that threads wrote is read by wgmma (the asynchronous proxy)
// only after a fence_proxy_async by the writers (and a barrier between writers and readers).
//
// Invariant established: each function is exactly one instruction (the _ss and _rs forms: one
// instruction and the predicate their `accumulate` sets), ordered with the surrounding memory
// accesses (volatile, memory clobber), nothing else. Which element lives in which register, and
// where an operand lies in shared memory, is the compiler's business.
#pragma once

#include "kintsugi/types.cuh"

namespace kintsugi::device {

// Orders this warpgroup's earlier register accesses before its next wgmma (wgmma.fence).
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

// Closes the group of this warpgroup's wgmma instructions issued since its last commit.
__device__ __forceinline__ void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

// Waits until at most `Pending` of this warpgroup's committed groups are incomplete.
template <int Pending>
__device__ __forceinline__ void wgmma_wait_group() {
  static_assert(Pending >= 0 && Pending <= 8, "wgmma.wait_group takes 0 to 8 pending groups");
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory");
}

// Orders this thread's earlier shared-memory accesses before later accesses by the asynchronous
// proxy (wgmma, TMA), and the other way round (fence.proxy.async.shared::cta).
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// The 16 accumulator registers of a 64 x 32 tile: their operand list and constraints.
#define KINTSUGI_WGMMA_D32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define KINTSUGI_WGMMA_D32_OPERANDS(d)                                                            \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15])

// The 32 accumulator registers of a 64 x 64 tile: their operand list and constraints.
#define KINTSUGI_WGMMA_D64                                                                      \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define KINTSUGI_WGMMA_D64_OPERANDS(d)                                                            \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

// The 64 accumulator registers of a 64 x 128 tile: their operand list and constraints (those
// of the 64 x 64 tile's, then the rest).
#define KINTSUGI_WGMMA_D128                                                                     \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "  \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "  \
  "%56, %57, %58, %59, %60, %61, %62, %63}"
#define KINTSUGI_WGMMA_D128_OPERANDS(d)                                                            \
  KINTSUGI_WGMMA_D64_OPERANDS(d), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), \
      "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),   \
      "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),   \
      "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]),   \
      "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// The 96 accumulator registers of a 64 x 192 tile: their operand list and constraints (those
// of the 64 x 128 tile's, then the rest).
#define KINTSUGI_WGMMA_D192                                                                     \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "  \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "  \
  "%56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, "  \
  "%74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, "  \
  "%92, %93, %94, %95}"
#define KINTSUGI_WGMMA_D192_OPERANDS(d)                                                          \
  KINTSUGI_WGMMA_D128_OPERANDS(d), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]),           \
      "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), \
      "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), \
      "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), \
      "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])

// The 128 accumulator registers of a 64 x 256 tile: their operand list and constraints (those
// of the 64 x 128 tile's, then the rest).
#define KINTSUGI_WGMMA_D256                                                                        \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "    \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "     \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "     \
  "%56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, "     \
  "%74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, "     \
  "%92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, " \
  "%109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, "     \
  "%124, %125, %126, %127}"
#define KINTSUGI_WGMMA_D256_OPERANDS(d)                                                          \
  KINTSUGI_WGMMA_D128_OPERANDS(d), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]),           \
      "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), \
      "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), \
      "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), \
      "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
      "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]),            \
      "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]),        \
      "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]),        \
      "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),        \
      "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]),        \
      "+f"(d[126]), "+f"(d[127])

// D (64 x N) = A * B + D (accumulate != 0) or A * B, A and B in shared memory: NAME_ss<TransA,
// TransB>(d, desc_a, desc_b, accumulate); A in registers: NAME_rs<TransB>(d, a, desc_b,
// accumulate).
#define KINTSUGI_WGMMA(NAME, N, TYPE, A, B, P, TA, TB, RA0, RA1, RA2, RA3, RB, RP, RTB)         \
  template <int TransA, int TransB>                                                             \
  __device__ __forceinline__ void NAME##_ss(float(&d)[N / 2], u64 desc_a, u64 desc_b,           \
                                            u32 accumulate) {                                   \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " P                                          \
                 ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE          \
                 " " KINTSUGI_WGMMA_D##N ", " A ", " B ", p, 1, 1, " TA ", " TB ";\n}"          \
                 : KINTSUGI_WGMMA_D##N##_OPERANDS(d)                                            \
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(TransA), "n"(TransB)          \
                 : "memory");                                                                   \
  }                                                                                             \
  template <int TransB>                                                                         \
  __device__ __forceinline__ void NAME##_rs(float(&d)[N / 2], const u32(&a)[4], u64 desc_b,     \
                                            u32 accumulate) {                                   \
    asm volatile(                                                                               \
        "{\n.reg .pred p;\nsetp.ne.b32 p, " RP ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N     \
        "k16.f32." TYPE "." TYPE " " KINTSUGI_WGMMA_D##N ", {" RA0 ", " RA1 ", " RA2 ", " RA3   \
                                                         "}, " RB ", p, 1, 1, " RTB ";\n}"      \
        : KINTSUGI_WGMMA_D##N##_OPERANDS(d)                                                     \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate), "n"(TransB) \
        : "memory");                                                                            \
  }

KINTSUGI_WGMMA(wgmma_m64n32k16_f16, 32, "f16", "%16", "%17", "%18", "%19", "%20", "%16", "%17",
               "%18", "%19", "%20", "%21", "%22")
KINTSUGI_WGMMA(wgmma_m64n32k16_bf16, 32, "bf16", "%16", "%17", "%18", "%19", "%20", "%16", "%17",
               "%18", "%19", "%20", "%21", "%22")
KINTSUGI_WGMMA(wgmma_m64n64k16_f16, 64, "f16", "%32", "%33", "%34", "%35", "%36", "%32", "%33",
               "%34", "%35", "%36", "%37", "%38")
KINTSUGI_WGMMA(wgmma_m64n64k16_bf16, 64, "bf16", "%32", "%33", "%34", "%35", "%36", "%32", "%33",
               "%34", "%35", "%36", "%37", "%38")
KINTSUGI_WGMMA(wgmma_m64n128k16_f16, 128, "f16", "%64", "%65", "%66", "%67", "%68", "%64", "%65",
               "%66", "%67", "%68", "%69", "%70")
KINTSUGI_WGMMA(wgmma_m64n128k16_bf16, 128, "bf16", "%64", "%65", "%66", "%67", "%68", "%64", "%65",
               "%66", "%67", "%68", "%69", "%70")
KINTSUGI_WGMMA(wgmma_m64n192k16_f16, 192, "f16", "%96", "%97", "%98", "%99", "%100", "%96", "%97",
               "%98", "%99", "%100", "%101", "%102")
KINTSUGI_WGMMA(wgmma_m64n192k16_bf16, 192, "bf16", "%96", "%97", "%98", "%99", "%100", "%96", "%97",
               "%98", "%99", "%100", "%101", "%102")
KINTSUGI_WGMMA(wgmma_m64n256k16_f16, 256, "f16", "%128", "%129", "%130", "%131", "%132", "%128",
               "%129", "%130", "%131", "%132", "%133", "%134")
KINTSUGI_WGMMA(wgmma_m64n256k16_bf16, 256, "bf16", "%128", "%129", "%130", "%131", "%132", "%128",
               "%129", "%130", "%131", "%132", "%133", "%134")

#undef KINTSUGI_WGMMA
#undef KINTSUGI_WGMMA_D32
#undef KINTSUGI_WGMMA_D32_OPERANDS
#undef KINTSUGI_WGMMA_D64
#undef KINTSUGI_WGMMA_D64_OPERANDS
#undef KINTSUGI_WGMMA_D128
#undef KINTSUGI_WGMMA_D128_OPERANDS
#undef KINTSUGI_WGMMA_D192
#undef KINTSUGI_WGMMA_D192_OPERANDS
#undef KINTSUGI_WGMMA_D256
#undef KINTSUGI_WGMMA_D256_OPERANDS

}  // namespace kintsugi::device
