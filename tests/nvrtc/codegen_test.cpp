// \file codegen_test.cpp
// The CUDA code generator's output compiles with NVRTC for sm_80 and sm_90a, no GPU needed:
// every example; the norms and decode without spills, the fused prefill kernels with their dots
// on tensor cores (their spills are reported; tests/gpu/run_examples.sh compiles and runs every
// example on a GPU).
#include <gtest/gtest.h>

#include <iostream>

#include "driver/Driver.h"
#include "runtime/Runner.h"
#include "target/cuda/CudaBackend.h"
#include "target/cuda/Nvrtc.h"
#include "te/Lower.h"
#include "te/Program.h"
#include "tile/Translate.h"

using namespace kintsugi;

namespace {

// The example's CUDA source for `arch` at its default sizes, or with `sizes` overriding some of
// them (and split-K chunks of `chunk_tiles` key tiles; 0: chosen, as by default).
cuda::CudaSource cuda_source_of(const std::string& example, const runtime::SizeMap& sizes = {},
                                int64_t chunk_tiles = 0, const std::string& arch = "sm_80") {
  ir::LoopProgram lp = driver::load_file(std::string(KINTSUGI_SOURCE_DIR) + "/examples/" + example);
  runtime::SizeMap hints = lp.size_hints;
  for (const auto& [name, value] : sizes) hints[name] = value;
  driver::ScheduleOptions o;
  o.target = driver::Target::parse("cuda", arch);
  o.sizes = hints;
  o.chunk_tiles = chunk_tiles;
  driver::Scheduled s = driver::schedule_program(lp, o);
  EXPECT_TRUE(s.warnings.empty()) << example << ": " << s.warnings.front();
  return cuda::generate_cuda_source(driver::to_tiles(s, hints, example),
                                    cuda::CudaTarget::parse(arch));
}

const std::vector<std::string> kPrefillExamples = {
    "attention/prefill_global.te",     "attention/prefill_causal.te",
    "attention/prefill_gqa.te",        "attention/prefill_alibi.te",
    "attention/prefill_softcap.te",    "attention/prefill_windowed.te",
    "attention/prefill_causal_bf16.te"};

// The examples' own sizes (head size 0), or the benchmark's at head size `head_size`.
runtime::SizeMap prefill_sizes(int64_t head_size) {
  if (head_size == 0) return {};
  return {{"D", head_size}, {"S", 4096}, {"T", 4096}};
}

}  // namespace

// Head sizes that are not powers of two (48, 96: rows of 6 and 12 16-byte chunks) stage their
// operands in shared memory and run on the tensor cores like the others, prefill and decode.
TEST(CudaCodegen, HeadSizesOtherThanPowersOfTwoUseTheTensorCores) {
  for (int64_t d : {48, 96})
    for (const std::string example : {"attention/prefill_causal.te", "attention/decode_gqa.te"}) {
      runtime::SizeMap sizes = {{"D", d}, {"T", 4096}};
      if (example.find("prefill") != std::string::npos) sizes["S"] = 4096;
      cuda::CudaSource src = cuda_source_of(example, sizes);
      for (const std::string primitive : {"mma_m16n8k16_f16(", "ldmatrix_x4", "cp_async_cg16"})
        EXPECT_NE(src.code.find(primitive), std::string::npos)
            << example << " D=" << d << ": " << primitive;
      cuda::CompiledModule m = cuda::compile_cuda(src.code, example, "sm_90a");
      EXPECT_NE(m.ptx.find("mma.sync.aligned.m16n8k16"), std::string::npos) << example << d;
    }
}

// The norms and every decode variant compile without spills; so does Performer except its
// fused kernel, whose f32 dots run on the element-cyclic layout (its spills are reported).
TEST(CudaCodegen, ExamplesCompileForBothArchitectures) {
  for (const std::string example :
       {"norm/softmax.te", "norm/rmsnorm_quant.te", "norm/layernorm.te", "norm/l2norm.te",
        "attention/decode_causal.te", "attention/decode_alibi.te", "attention/decode_gqa.te",
        "attention/decode_softcap.te", "performer.te"}) {
    for (const std::string arch : {"sm_80", "sm_90a"}) {
      cuda::CudaSource src = cuda_source_of(example, {}, 0, arch);
      ASSERT_FALSE(src.launches.empty()) << example;
      cuda::CompiledModule m = cuda::compile_cuda(src.code, example, arch);
      for (const cuda::KernelLaunch& l : src.launches) {
        const cuda::FunctionResources* f = m.resources.find(l.name);
        ASSERT_NE(f, nullptr) << example << " " << arch << ": no resource report for " << l.name;
        EXPECT_GT(f->registers, 0) << l.name;
        if (example == "performer.te" && f->spill_store_bytes > 0) {
          std::cout << example << " " << arch << ": " << l.name << " spills "
                    << f->spill_store_bytes << " bytes\n";
          continue;
        }
        EXPECT_EQ(f->spill_store_bytes, 0) << example << " " << arch << ": " << l.name << " spills";
      }
    }
  }
}

// Every prefill example at the benchmark's head size (D = 128; the sequence lengths are run-time
// values of the kernel) compiles for sm_90a without a spill, its K and V tiles copied by TMA
// (one tensor map each, one mbarrier wait a tile).
TEST(CudaCodegen, PrefillAtBenchmarkSizesCompilesWithoutSpills) {
  for (const std::string example :
       {"attention/prefill_global.te", "attention/prefill_causal.te",
        "attention/prefill_causal_bf16.te", "attention/prefill_alibi.te",
        "attention/prefill_gqa.te", "attention/prefill_softcap.te",
        "attention/prefill_windowed.te"}) {
    cuda::CudaSource src =
        cuda_source_of(example, {{"S", 4096}, {"T", 4096}, {"D", 128}}, 0, "sm_90a");
    ASSERT_EQ(src.launches.size(), 1u) << example;
    EXPECT_EQ(src.launches[0].tensor_maps.size(), 2u) << example;
    EXPECT_NE(src.code.find("tma_load_4d("), std::string::npos) << example;
    EXPECT_NE(src.code.find("mbarrier_try_wait_parity("), std::string::npos) << example;
    cuda::CompiledModule m = cuda::compile_cuda(src.code, example, "sm_90a");
    const cuda::FunctionResources* f = m.resources.find(src.launches[0].name);
    ASSERT_NE(f, nullptr) << example;
    EXPECT_EQ(f->spill_store_bytes, 0) << example << " spills";
  }
}

// Performer at its benchmark's sizes (S = T = 4096, D = 128, R = 256) compiles for sm_90a: the key
// side's nests outside the fused kernel (the normaliser over every key and feature, the R x D
// projections and sums over keys) take tiles of at most 16384 elements, their long loops walked in
// chunks. Held whole they were tiles of up to a million elements, and NVRTC ran out of its
// two-minute limit. What the kernels still spill is reported.
TEST(CudaCodegen, PerformerAtBenchmarkSizesCompiles) {
  const runtime::SizeMap sizes = {{"H", 32}, {"S", 4096}, {"T", 4096}, {"D", 128}, {"R", 256}};
  cuda::CudaSource src = cuda_source_of("performer.te", sizes, 0, "sm_90a");
  cuda::CompiledModule m = cuda::compile_cuda(src.code, "performer.te", "sm_90a");
  for (const cuda::KernelLaunch& l : src.launches) {
    const cuda::FunctionResources* f = m.resources.find(l.name);
    ASSERT_NE(f, nullptr) << l.name;
    if (f->spill_store_bytes > 0)
      std::cout << "performer.te at the benchmark's sizes: " << l.name << " spills "
                << f->spill_store_bytes << " bytes\n";
  }
}

// Decode at the benchmark's sizes (head_dim 128, 512 chunks and more, the chunk size chosen as by
// default: grouped decode walks chunks of 4 tiles, on one warp's tensor-core rows): the chunk
// kernels and the combines, which run on 512 threads there, compile without spills.
TEST(CudaCodegen, DecodeAtBenchmarkSizesCompilesWithoutSpills) {
  const std::vector<std::pair<std::string, runtime::SizeMap>> cases = {
      {"attention/decode_gqa.te", {{"HQ", 64}, {"HK", 8}, {"D", 128}, {"T", 32768}}},
      {"attention/decode_gqa.te", {{"HQ", 64}, {"HK", 8}, {"D", 128}, {"T", 131072}}},
      {"attention/decode_gqa.te", {{"HQ", 32}, {"HK", 4}, {"D", 128}, {"T", 32768}}},
      {"attention/decode_softcap.te", {{"HQ", 32}, {"HK", 16}, {"D", 128}, {"T", 32768}}},
      {"attention/decode_causal.te", {{"H", 32}, {"D", 128}, {"T", 131072}}}};
  for (const auto& [example, sizes] : cases) {
    cuda::CudaSource src = cuda_source_of(example, sizes, 0, "sm_90a");
    ASSERT_EQ(src.launches.size(), 2u) << example;
    EXPECT_EQ(src.launches[1].threads, 512) << example;
    cuda::CompiledModule m = cuda::compile_cuda(src.code, example, "sm_90a");
    for (const cuda::KernelLaunch& l : src.launches) {
      const cuda::FunctionResources* f = m.resources.find(l.name);
      ASSERT_NE(f, nullptr) << example << ": no resource report for " << l.name;
      EXPECT_EQ(f->spill_store_bytes, 0) << example << ": " << l.name << " spills";
    }
  }
}

// Decode with one key (T = 1: one chunk, the combines' loops run once) compiles for both
// architectures without spills; so do chunks of four key tiles
// walked with the rolling update at the benchmark's sizes, the grouped ones on tensor cores
// (their chunk kernel's registers and spills are reported).
TEST(CudaCodegen, DecodeOfOneKeyAndOfChunksOfTilesCompile) {
  for (const std::string example : {"attention/decode_causal.te", "attention/decode_alibi.te",
                                    "attention/decode_gqa.te", "attention/decode_softcap.te"}) {
    for (const std::string arch : {"sm_80", "sm_90a"}) {
      cuda::CudaSource one = cuda_source_of(example, {{"T", 1}}, 0, arch);
      cuda::CompiledModule m = cuda::compile_cuda(one.code, example, arch);
      for (const cuda::KernelLaunch& l : one.launches) {
        const cuda::FunctionResources* f = m.resources.find(l.name);
        ASSERT_NE(f, nullptr) << example << " T=1 " << arch << ": " << l.name;
        EXPECT_EQ(f->spill_store_bytes, 0) << example << " T=1 " << arch << ": " << l.name;
      }
    }
    bool grouped =
        example.find("gqa") != std::string::npos || example.find("softcap") != std::string::npos;
    runtime::SizeMap sizes = {{"D", 128}, {"T", 32768}};
    if (grouped)
      sizes.insert({{"HQ", 32}, {"HK", example.find("gqa") != std::string::npos ? 4 : 16}});
    cuda::CudaSource chunked = cuda_source_of(example, sizes, 4, "sm_90a");
    cuda::CompiledModule m = cuda::compile_cuda(chunked.code, example, "sm_90a");
    if (grouped) {
      EXPECT_NE(m.ptx.find("mma.sync.aligned.m16n8k16"), std::string::npos) << example;
    }
    const cuda::FunctionResources* f = m.resources.find(chunked.launches[0].name);
    ASSERT_NE(f, nullptr) << example;
    std::cout << example << " in chunks of 4 tiles: " << f->registers << " registers, "
              << f->spill_store_bytes << " bytes spilled\n";
  }
}

// Every kernel of every example asks for no more dynamic shared memory than a CTA gets on sm_90,
// at the default sizes and at the odd sizes tests/gpu/run_examples.sh runs, and no more than on
// sm_80 either (loads staged through shared memory give way where they would not fit), except
// Performer's fused kernel at S = T = 1000, whose f32 dots stage their operands (reported).
TEST(CudaCodegen, EveryKernelFitsInSharedMemory) {
  const std::vector<std::pair<std::string, runtime::SizeMap>> cases = {
      {"norm/softmax.te", {{"M", 37}, {"N", 1000}}},
      {"norm/layernorm.te", {{"M", 37}, {"N", 1000}}},
      {"norm/rmsnorm_quant.te", {{"M", 37}, {"N", 1000}}},
      {"norm/l2norm.te", {{"M", 37}, {"N", 1000}}},
      {"attention/decode_causal.te", {{"T", 1000}}},
      {"attention/decode_causal.te", {{"H", 32}, {"D", 128}, {"T", 32768}}},
      {"attention/decode_gqa.te", {{"T", 1000}}},
      {"attention/prefill_causal.te", {{"S", 1000}, {"T", 1000}}},
      {"performer.te", {}},
      {"performer.te", {{"S", 1000}, {"T", 1000}}}};
  for (const auto& [example, sizes] : cases)
    for (const cuda::KernelLaunch& l : cuda_source_of(example, sizes).launches) {
      EXPECT_LE(l.dynamic_shared_bytes, cuda::CudaTarget::parse("sm_90a").max_shared_bytes())
          << example << ": " << l.name;
      if (example == "performer.te" && l.dynamic_shared_bytes > cuda::kMaxSharedBytes)
        std::cout << example << ": " << l.name << " needs " << l.dynamic_shared_bytes
                  << " bytes of shared memory, more than sm_80 gives a CTA\n";
      else
        EXPECT_LE(l.dynamic_shared_bytes, cuda::kMaxSharedBytes) << example << ": " << l.name;
    }
}

// The fused prefill kernels (tensor-core dots, masks, the running max and repairs) take the
// tensor-core layout (operands staged by cp.async and read by ldmatrix, V with .trans, 128
// threads for the 128-row tile: four warps of two m16 blocks, K double-buffered and V
// single-buffered, two CTAs an SM) and compile for both architectures: without spills at the
// examples' head size 32; at the benchmark's 128 the 255 registers spill a little, which is
// reported, not failed (docs/perf.md: the interior loop version, where the time goes, spills
// least; the 128-row tiles with those spills beat the 64-row ones).
TEST(CudaCodegen, PrefillKernelsCompile) {
  for (const std::string& example : kPrefillExamples) {
    // The dots run on the tensor cores of the inputs' type.
    std::string half = example.find("bf16") != std::string::npos ? "bf16" : "f16";
    for (int64_t head_size : {0, 128}) {
      const runtime::SizeMap sizes = prefill_sizes(head_size);
      cuda::CudaSource src = cuda_source_of(example, sizes);
      for (const std::string& primitive :
           {"mma_m16n8k16_" + half + "(", "pack_" + half + "x2(", std::string("cp_async_cg16"),
            std::string("ldmatrix_x4_trans"), std::string("cp_async_wait_group<2>"),
            std::string("__launch_bounds__(128, ")})
        EXPECT_NE(src.code.find(primitive), std::string::npos) << example << ": " << primitive;
      ASSERT_EQ(src.launches.size(), 1u) << example;
      EXPECT_EQ(src.launches[0].threads, 128) << example;
      for (const std::string arch : {"sm_80", "sm_90a"}) {
        cuda::CompiledModule m = cuda::compile_cuda(src.code, example, arch);
        EXPECT_NE(m.ptx.find("mma.sync.aligned.m16n8k16.row.col.f32." + half + "." + half),
                  std::string::npos)
            << example << arch;
        const cuda::FunctionResources* f = m.resources.find(src.launches[0].name);
        ASSERT_NE(f, nullptr) << example << " " << arch << ": no resource report";
        // At the default sizes (D=32) the rolling update's identity guard (a row whose leading
        // key tiles are all -inf, from a mask or from -inf inputs, restarts from zero partials)
        // costs two selects a tile, and ptxas spills up to 28 bytes for global attention; more
        // than that is a regression.
        if (head_size == 0)
          EXPECT_LE(f->spill_store_bytes, 32) << example << " " << arch << " spills";
        else if (f->spill_store_bytes > 0)
          std::cout << example << " D=128 " << arch << ": spills " << f->spill_store_bytes
                    << " bytes\n";
      }
    }
  }
}

// On sm_90a the prefill kernels run their dots as wgmma (FragmentMma.cpp), on one warpgroup of
// 64-row tiles by 128 keys, and the PTX holds the asynchronous instructions. They compile without
// spills at the examples' head size 32 and at the benchmark's 128, where the whole 64 x 128
// scores, the 64 x 128 output and the packed P (the RS form's A, live until its group completes)
// take the 255 registers: a spill there fails (the streamed tiles' loop-invariant checks are made
// once, in front of the loop; the one in every iteration spilled up to 32 bytes).
TEST(CudaCodegen, PrefillKernelsRunAsWgmmaOnHopper) {
  for (const std::string& example : kPrefillExamples) {
    std::string half = example.find("bf16") != std::string::npos ? "bf16" : "f16";
    for (int64_t head_size : {0, 128}) {
      const runtime::SizeMap sizes = prefill_sizes(head_size);
      cuda::CudaSource src = cuda_source_of(example, sizes, 0, "sm_90a");
      ASSERT_EQ(src.launches.size(), 1u) << example;
      EXPECT_EQ(src.launches[0].not_warpgroup_mma, "") << example;
      EXPECT_EQ(src.code.find("mma_m16n8k16"), std::string::npos) << example;
      EXPECT_NE(src.code.find("_" + half + "_rs<1>("), std::string::npos) << example;
      cuda::CompiledModule m = cuda::compile_cuda(src.code, example, "sm_90a");
      EXPECT_NE(m.ptx.find("wgmma.mma_async.sync.aligned.m64n"), std::string::npos) << example;
      const cuda::FunctionResources* f = m.resources.find(src.launches[0].name);
      ASSERT_NE(f, nullptr) << example;
      EXPECT_EQ(f->spill_store_bytes, 0) << example << " D=" << head_size << " spills";
      std::cout << example << " D=" << head_size << " sm_90a: " << src.launches[0].threads
                << " threads, " << f->registers << " registers, " << f->spill_store_bytes
                << " bytes spilled\n";
    }
  }
}
