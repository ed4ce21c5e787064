// \file wgmma.cuh
// Warpgroup matrix multiply-accumulate (wgmma.mma_async, sm_90a) and its ordering: the fence, the
// group commit and wait, and the proxy fence between shared-memory writes and wgmma's reads.
//
// One call is one instruction executed by the 128 threads of a warpgroup (four consecutive warps,
// the first a multiple of four): D (64 x N, f32) = A (64 x 16) * B (16 x N) + D, or D = A * B
// when `accumulate` is 0 (the s8 forms: D s32, K 32, the same bytes of a row as K 16 of 16 bits). A
// and B are read from shared memory through descriptors (smem_desc.cuh; the _ss forms), or A from
// registers (the _rs forms); `TransA` / `TransB` 1 read an operand MN-major rather than K-major
// (register A is K-major). Thread t of the warpgroup (warp w = t / 32, lane l, g = l / 4, q = l %
// 4) holds D element (16w + g + 8 ((i >> 1) & 1), 8 (i >> 2) + 2q + (i & 1)) in d[i], and in
// register A a[j] the pair (16w + g + 8 (j & 1), 2q + 8 (j >> 1) and + 1), the first in the low
// half: each warp's 16 rows as mma.m16n8k16 lays them out.
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

// The N / 2 accumulator registers of a 64 x N tile (N a multiple of 16): their operand list
// (the registers of N - 16, then eight more), and their operands under constraint C ("+f" for
// f32 accumulators, "+r" for s32).
#define KINTSUGI_WGMMA_R16 "%0, %1, %2, %3, %4, %5, %6, %7"
#define KINTSUGI_WGMMA_D16_OPERANDS(d, C) \
  C(d[0]), C(d[1]), C(d[2]), C(d[3]), C(d[4]), C(d[5]), C(d[6]), C(d[7])
#define KINTSUGI_WGMMA_D16 "{" KINTSUGI_WGMMA_R16 "}"
#define KINTSUGI_WGMMA_R32 KINTSUGI_WGMMA_R16 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define KINTSUGI_WGMMA_D32_OPERANDS(d, C)                                                      \
  KINTSUGI_WGMMA_D16_OPERANDS(d, C), C(d[8]), C(d[9]), C(d[10]), C(d[11]), C(d[12]), C(d[13]), \
      C(d[14]), C(d[15])
#define KINTSUGI_WGMMA_D32 "{" KINTSUGI_WGMMA_R32 "}"
#define KINTSUGI_WGMMA_R48 KINTSUGI_WGMMA_R32 ", %16, %17, %18, %19, %20, %21, %22, %23"
#define KINTSUGI_WGMMA_D48_OPERANDS(d, C)                                                        \
  KINTSUGI_WGMMA_D32_OPERANDS(d, C), C(d[16]), C(d[17]), C(d[18]), C(d[19]), C(d[20]), C(d[21]), \
      C(d[22]), C(d[23])
#define KINTSUGI_WGMMA_D48 "{" KINTSUGI_WGMMA_R48 "}"
#define KINTSUGI_WGMMA_R64 KINTSUGI_WGMMA_R48 ", %24, %25, %26, %27, %28, %29, %30, %31"
#define KINTSUGI_WGMMA_D64_OPERANDS(d, C)                                                        \
  KINTSUGI_WGMMA_D48_OPERANDS(d, C), C(d[24]), C(d[25]), C(d[26]), C(d[27]), C(d[28]), C(d[29]), \
      C(d[30]), C(d[31])
#define KINTSUGI_WGMMA_D64 "{" KINTSUGI_WGMMA_R64 "}"
#define KINTSUGI_WGMMA_R80 KINTSUGI_WGMMA_R64 ", %32, %33, %34, %35, %36, %37, %38, %39"
#define KINTSUGI_WGMMA_D80_OPERANDS(d, C)                                                        \
  KINTSUGI_WGMMA_D64_OPERANDS(d, C), C(d[32]), C(d[33]), C(d[34]), C(d[35]), C(d[36]), C(d[37]), \
      C(d[38]), C(d[39])
#define KINTSUGI_WGMMA_D80 "{" KINTSUGI_WGMMA_R80 "}"
#define KINTSUGI_WGMMA_R96 KINTSUGI_WGMMA_R80 ", %40, %41, %42, %43, %44, %45, %46, %47"
#define KINTSUGI_WGMMA_D96_OPERANDS(d, C)                                                        \
  KINTSUGI_WGMMA_D80_OPERANDS(d, C), C(d[40]), C(d[41]), C(d[42]), C(d[43]), C(d[44]), C(d[45]), \
      C(d[46]), C(d[47])
#define KINTSUGI_WGMMA_D96 "{" KINTSUGI_WGMMA_R96 "}"
#define KINTSUGI_WGMMA_R112 KINTSUGI_WGMMA_R96 ", %48, %49, %50, %51, %52, %53, %54, %55"
#define KINTSUGI_WGMMA_D112_OPERANDS(d, C)                                                       \
  KINTSUGI_WGMMA_D96_OPERANDS(d, C), C(d[48]), C(d[49]), C(d[50]), C(d[51]), C(d[52]), C(d[53]), \
      C(d[54]), C(d[55])
#define KINTSUGI_WGMMA_D112 "{" KINTSUGI_WGMMA_R112 "}"
#define KINTSUGI_WGMMA_R128 KINTSUGI_WGMMA_R112 ", %56, %57, %58, %59, %60, %61, %62, %63"
#define KINTSUGI_WGMMA_D128_OPERANDS(d, C)                                                        \
  KINTSUGI_WGMMA_D112_OPERANDS(d, C), C(d[56]), C(d[57]), C(d[58]), C(d[59]), C(d[60]), C(d[61]), \
      C(d[62]), C(d[63])
#define KINTSUGI_WGMMA_D128 "{" KINTSUGI_WGMMA_R128 "}"
#define KINTSUGI_WGMMA_R144 KINTSUGI_WGMMA_R128 ", %64, %65, %66, %67, %68, %69, %70, %71"
#define KINTSUGI_WGMMA_D144_OPERANDS(d, C)                                                        \
  KINTSUGI_WGMMA_D128_OPERANDS(d, C), C(d[64]), C(d[65]), C(d[66]), C(d[67]), C(d[68]), C(d[69]), \
      C(d[70]), C(d[71])
#define KINTSUGI_WGMMA_D144 "{" KINTSUGI_WGMMA_R144 "}"
#define KINTSUGI_WGMMA_R160 KINTSUGI_WGMMA_R144 ", %72, %73, %74, %75, %76, %77, %78, %79"
#define KINTSUGI_WGMMA_D160_OPERANDS(d, C)                                                        \
  KINTSUGI_WGMMA_D144_OPERANDS(d, C), C(d[72]), C(d[73]), C(d[74]), C(d[75]), C(d[76]), C(d[77]), \
      C(d[78]), C(d[79])
#define KINTSUGI_WGMMA_D160 "{" KINTSUGI_WGMMA_R160 "}"
#define KINTSUGI_WGMMA_R176 KINTSUGI_WGMMA_R160 ", %80, %81, %82, %83, %84, %85, %86, %87"
#define KINTSUGI_WGMMA_D176_OPERANDS(d, C)                                                        \
  KINTSUGI_WGMMA_D160_OPERANDS(d, C), C(d[80]), C(d[81]), C(d[82]), C(d[83]), C(d[84]), C(d[85]), \
      C(d[86]), C(d[87])
#define KINTSUGI_WGMMA_D176 "{" KINTSUGI_WGMMA_R176 "}"
#define KINTSUGI_WGMMA_R192 KINTSUGI_WGMMA_R176 ", %88, %89, %90, %91, %92, %93, %94, %95"
#define KINTSUGI_WGMMA_D192_OPERANDS(d, C)                                                        \
  KINTSUGI_WGMMA_D176_OPERANDS(d, C), C(d[88]), C(d[89]), C(d[90]), C(d[91]), C(d[92]), C(d[93]), \
      C(d[94]), C(d[95])
#define KINTSUGI_WGMMA_D192 "{" KINTSUGI_WGMMA_R192 "}"
#define KINTSUGI_WGMMA_R208 KINTSUGI_WGMMA_R192 ", %96, %97, %98, %99, %100, %101, %102, %103"
#define KINTSUGI_WGMMA_D208_OPERANDS(d, C)                                               \
  KINTSUGI_WGMMA_D192_OPERANDS(d, C), C(d[96]), C(d[97]), C(d[98]), C(d[99]), C(d[100]), \
      C(d[101]), C(d[102]), C(d[103])
#define KINTSUGI_WGMMA_D208 "{" KINTSUGI_WGMMA_R208 "}"
#define KINTSUGI_WGMMA_R224 KINTSUGI_WGMMA_R208 ", %104, %105, %106, %107, %108, %109, %110, %111"
#define KINTSUGI_WGMMA_D224_OPERANDS(d, C)                                                   \
  KINTSUGI_WGMMA_D208_OPERANDS(d, C), C(d[104]), C(d[105]), C(d[106]), C(d[107]), C(d[108]), \
      C(d[109]), C(d[110]), C(d[111])
#define KINTSUGI_WGMMA_D224 "{" KINTSUGI_WGMMA_R224 "}"
#define KINTSUGI_WGMMA_R240 KINTSUGI_WGMMA_R224 ", %112, %113, %114, %115, %116, %117, %118, %119"
#define KINTSUGI_WGMMA_D240_OPERANDS(d, C)                                                   \
  KINTSUGI_WGMMA_D224_OPERANDS(d, C), C(d[112]), C(d[113]), C(d[114]), C(d[115]), C(d[116]), \
      C(d[117]), C(d[118]), C(d[119])
#define KINTSUGI_WGMMA_D240 "{" KINTSUGI_WGMMA_R240 "}"
#define KINTSUGI_WGMMA_R256 KINTSUGI_WGMMA_R240 ", %120, %121, %122, %123, %124, %125, %126, %127"
#define KINTSUGI_WGMMA_D256_OPERANDS(d, C)                                                   \
  KINTSUGI_WGMMA_D240_OPERANDS(d, C), C(d[120]), C(d[121]), C(d[122]), C(d[123]), C(d[124]), \
      C(d[125]), C(d[126]), C(d[127])
#define KINTSUGI_WGMMA_D256 "{" KINTSUGI_WGMMA_R256 "}"

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
                 : KINTSUGI_WGMMA_D##N##_OPERANDS(d, "+f")                                      \
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
        : KINTSUGI_WGMMA_D##N##_OPERANDS(d, "+f")                                               \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate), "n"(TransB) \
        : "memory");                                                                            \
  }

KINTSUGI_WGMMA(wgmma_m64n16k16_f16, 16, "f16", "%8", "%9", "%10", "%11", "%12", "%8", "%9", "%10",
               "%11", "%12", "%13", "%14")
KINTSUGI_WGMMA(wgmma_m64n16k16_bf16, 16, "bf16", "%8", "%9", "%10", "%11", "%12", "%8", "%9", "%10",
               "%11", "%12", "%13", "%14")
KINTSUGI_WGMMA(wgmma_m64n32k16_f16, 32, "f16", "%16", "%17", "%18", "%19", "%20", "%16", "%17",
               "%18", "%19", "%20", "%21", "%22")
KINTSUGI_WGMMA(wgmma_m64n32k16_bf16, 32, "bf16", "%16", "%17", "%18", "%19", "%20", "%16", "%17",
               "%18", "%19", "%20", "%21", "%22")
KINTSUGI_WGMMA(wgmma_m64n48k16_f16, 48, "f16", "%24", "%25", "%26", "%27", "%28", "%24", "%25",
               "%26", "%27", "%28", "%29", "%30")
KINTSUGI_WGMMA(wgmma_m64n48k16_bf16, 48, "bf16", "%24", "%25", "%26", "%27", "%28", "%24", "%25",
               "%26", "%27", "%28", "%29", "%30")
KINTSUGI_WGMMA(wgmma_m64n64k16_f16, 64, "f16", "%32", "%33", "%34", "%35", "%36", "%32", "%33",
               "%34", "%35", "%36", "%37", "%38")
KINTSUGI_WGMMA(wgmma_m64n64k16_bf16, 64, "bf16", "%32", "%33", "%34", "%35", "%36", "%32", "%33",
               "%34", "%35", "%36", "%37", "%38")
KINTSUGI_WGMMA(wgmma_m64n80k16_f16, 80, "f16", "%40", "%41", "%42", "%43", "%44", "%40", "%41",
               "%42", "%43", "%44", "%45", "%46")
KINTSUGI_WGMMA(wgmma_m64n80k16_bf16, 80, "bf16", "%40", "%41", "%42", "%43", "%44", "%40", "%41",
               "%42", "%43", "%44", "%45", "%46")
KINTSUGI_WGMMA(wgmma_m64n96k16_f16, 96, "f16", "%48", "%49", "%50", "%51", "%52", "%48", "%49",
               "%50", "%51", "%52", "%53", "%54")
KINTSUGI_WGMMA(wgmma_m64n96k16_bf16, 96, "bf16", "%48", "%49", "%50", "%51", "%52", "%48", "%49",
               "%50", "%51", "%52", "%53", "%54")
KINTSUGI_WGMMA(wgmma_m64n112k16_f16, 112, "f16", "%56", "%57", "%58", "%59", "%60", "%56", "%57",
               "%58", "%59", "%60", "%61", "%62")
KINTSUGI_WGMMA(wgmma_m64n112k16_bf16, 112, "bf16", "%56", "%57", "%58", "%59", "%60", "%56", "%57",
               "%58", "%59", "%60", "%61", "%62")
KINTSUGI_WGMMA(wgmma_m64n128k16_f16, 128, "f16", "%64", "%65", "%66", "%67", "%68", "%64", "%65",
               "%66", "%67", "%68", "%69", "%70")
KINTSUGI_WGMMA(wgmma_m64n128k16_bf16, 128, "bf16", "%64", "%65", "%66", "%67", "%68", "%64", "%65",
               "%66", "%67", "%68", "%69", "%70")
KINTSUGI_WGMMA(wgmma_m64n144k16_f16, 144, "f16", "%72", "%73", "%74", "%75", "%76", "%72", "%73",
               "%74", "%75", "%76", "%77", "%78")
KINTSUGI_WGMMA(wgmma_m64n144k16_bf16, 144, "bf16", "%72", "%73", "%74", "%75", "%76", "%72", "%73",
               "%74", "%75", "%76", "%77", "%78")
KINTSUGI_WGMMA(wgmma_m64n160k16_f16, 160, "f16", "%80", "%81", "%82", "%83", "%84", "%80", "%81",
               "%82", "%83", "%84", "%85", "%86")
KINTSUGI_WGMMA(wgmma_m64n160k16_bf16, 160, "bf16", "%80", "%81", "%82", "%83", "%84", "%80", "%81",
               "%82", "%83", "%84", "%85", "%86")
KINTSUGI_WGMMA(wgmma_m64n176k16_f16, 176, "f16", "%88", "%89", "%90", "%91", "%92", "%88", "%89",
               "%90", "%91", "%92", "%93", "%94")
KINTSUGI_WGMMA(wgmma_m64n176k16_bf16, 176, "bf16", "%88", "%89", "%90", "%91", "%92", "%88", "%89",
               "%90", "%91", "%92", "%93", "%94")
KINTSUGI_WGMMA(wgmma_m64n192k16_f16, 192, "f16", "%96", "%97", "%98", "%99", "%100", "%96", "%97",
               "%98", "%99", "%100", "%101", "%102")
KINTSUGI_WGMMA(wgmma_m64n192k16_bf16, 192, "bf16", "%96", "%97", "%98", "%99", "%100", "%96", "%97",
               "%98", "%99", "%100", "%101", "%102")
KINTSUGI_WGMMA(wgmma_m64n208k16_f16, 208, "f16", "%104", "%105", "%106", "%107", "%108", "%104",
               "%105", "%106", "%107", "%108", "%109", "%110")
KINTSUGI_WGMMA(wgmma_m64n208k16_bf16, 208, "bf16", "%104", "%105", "%106", "%107", "%108", "%104",
               "%105", "%106", "%107", "%108", "%109", "%110")
KINTSUGI_WGMMA(wgmma_m64n224k16_f16, 224, "f16", "%112", "%113", "%114", "%115", "%116", "%112",
               "%113", "%114", "%115", "%116", "%117", "%118")
KINTSUGI_WGMMA(wgmma_m64n224k16_bf16, 224, "bf16", "%112", "%113", "%114", "%115", "%116", "%112",
               "%113", "%114", "%115", "%116", "%117", "%118")
KINTSUGI_WGMMA(wgmma_m64n240k16_f16, 240, "f16", "%120", "%121", "%122", "%123", "%124", "%120",
               "%121", "%122", "%123", "%124", "%125", "%126")
KINTSUGI_WGMMA(wgmma_m64n240k16_bf16, 240, "bf16", "%120", "%121", "%122", "%123", "%124", "%120",
               "%121", "%122", "%123", "%124", "%125", "%126")
KINTSUGI_WGMMA(wgmma_m64n256k16_f16, 256, "f16", "%128", "%129", "%130", "%131", "%132", "%128",
               "%129", "%130", "%131", "%132", "%133", "%134")
KINTSUGI_WGMMA(wgmma_m64n256k16_bf16, 256, "bf16", "%128", "%129", "%130", "%131", "%132", "%128",
               "%129", "%130", "%131", "%132", "%133", "%134")

#undef KINTSUGI_WGMMA

// D (64 x N, s32) = A (64 x 32) * B (32 x N) + D (accumulate != 0) or A * B, s8 operands both
// K-major in shared memory (the integer forms take no transposes): NAME(d, desc_a, desc_b,
// accumulate). A, B and P name the descriptor and predicate operands after D's.
#define KINTSUGI_WGMMA_S8(NAME, N, A, B, P)                                                        \
  __device__ __forceinline__ void NAME(int(&d)[N / 2], u64 desc_a, u64 desc_b, u32 accumulate) {   \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " P                                             \
                 ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N "k32.s32.s8.s8 " KINTSUGI_WGMMA_D##N \
                 ", " A ", " B ", p;\n}"                                                           \
                 : KINTSUGI_WGMMA_D##N##_OPERANDS(d, "+r")                                         \
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate)                                       \
                 : "memory");                                                                      \
  }

KINTSUGI_WGMMA_S8(wgmma_m64n32k32_s8, 32, "%16", "%17", "%18")
KINTSUGI_WGMMA_S8(wgmma_m64n64k32_s8, 64, "%32", "%33", "%34")
KINTSUGI_WGMMA_S8(wgmma_m64n128k32_s8, 128, "%64", "%65", "%66")
KINTSUGI_WGMMA_S8(wgmma_m64n192k32_s8, 192, "%96", "%97", "%98")
KINTSUGI_WGMMA_S8(wgmma_m64n256k32_s8, 256, "%128", "%129", "%130")

#undef KINTSUGI_WGMMA_S8
#undef KINTSUGI_WGMMA_R16
#undef KINTSUGI_WGMMA_D16
#undef KINTSUGI_WGMMA_D16_OPERANDS
#undef KINTSUGI_WGMMA_R32
#undef KINTSUGI_WGMMA_D32
#undef KINTSUGI_WGMMA_D32_OPERANDS
#undef KINTSUGI_WGMMA_R48
#undef KINTSUGI_WGMMA_D48
#undef KINTSUGI_WGMMA_D48_OPERANDS
#undef KINTSUGI_WGMMA_R64
#undef KINTSUGI_WGMMA_D64
#undef KINTSUGI_WGMMA_D64_OPERANDS
#undef KINTSUGI_WGMMA_R80
#undef KINTSUGI_WGMMA_D80
#undef KINTSUGI_WGMMA_D80_OPERANDS
#undef KINTSUGI_WGMMA_R96
#undef KINTSUGI_WGMMA_D96
#undef KINTSUGI_WGMMA_D96_OPERANDS
#undef KINTSUGI_WGMMA_R112
#undef KINTSUGI_WGMMA_D112
#undef KINTSUGI_WGMMA_D112_OPERANDS
#undef KINTSUGI_WGMMA_R128
#undef KINTSUGI_WGMMA_D128
#undef KINTSUGI_WGMMA_D128_OPERANDS
#undef KINTSUGI_WGMMA_R144
#undef KINTSUGI_WGMMA_D144
#undef KINTSUGI_WGMMA_D144_OPERANDS
#undef KINTSUGI_WGMMA_R160
#undef KINTSUGI_WGMMA_D160
#undef KINTSUGI_WGMMA_D160_OPERANDS
#undef KINTSUGI_WGMMA_R176
#undef KINTSUGI_WGMMA_D176
#undef KINTSUGI_WGMMA_D176_OPERANDS
#undef KINTSUGI_WGMMA_R192
#undef KINTSUGI_WGMMA_D192
#undef KINTSUGI_WGMMA_D192_OPERANDS
#undef KINTSUGI_WGMMA_R208
#undef KINTSUGI_WGMMA_D208
#undef KINTSUGI_WGMMA_D208_OPERANDS
#undef KINTSUGI_WGMMA_R224
#undef KINTSUGI_WGMMA_D224
#undef KINTSUGI_WGMMA_D224_OPERANDS
#undef KINTSUGI_WGMMA_R240
#undef KINTSUGI_WGMMA_D240
#undef KINTSUGI_WGMMA_D240_OPERANDS
#undef KINTSUGI_WGMMA_R256
#undef KINTSUGI_WGMMA_D256
#undef KINTSUGI_WGMMA_D256_OPERANDS

}  // namespace kintsugi::device
