// \file ptxas_log_test.cpp
// The ptxas resource report parser on logs captured from NVRTC 13.0 (see PtxasLog.h).
#include <gtest/gtest.h>

#include "target/cuda/PtxasLog.h"

using namespace kintsugi::cuda;

TEST(PtxasLog, EntryAndDeviceFunctionsWithSpills) {
  // NVRTC 13.0, sm_80, --maxrregcount=24, a kernel calling a non-inlined device function.
  const char* log =
      "ptxas info    : Overriding maximum register limit 256 for '_Z3bigPfPKf' with  24 of "
      "maxrregcount option\n"
      "ptxas warning : Registers are spilled to local memory in function '_Z3bigPfPKf', 2296 "
      "bytes spill stores, 2368 bytes spill loads\n"
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function '_Z3bigPfPKf' for 'sm_80'\n"
      "ptxas info    : Function properties for _Z3bigPfPKf\n"
      "ptxas         .     1080 bytes stack frame, 2296 bytes spill stores, 2368 bytes spill "
      "loads\n"
      "ptxas info    : Used 24 registers, used 1 barriers, 1080 bytes cumulative stack size, "
      "1536 bytes smem, 368 bytes cmem[0]\n"
      "ptxas info    : Compile time = 162.952 ms\n"
      "ptxas info    : Function properties for _Z6helperILi16EEfPf\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n";
  PtxasReport r = parse_ptxas_log(log);
  ASSERT_EQ(r.functions.size(), 2u);
  const FunctionResources& k = r.functions[0];
  EXPECT_EQ(k.name, "_Z3bigPfPKf");
  EXPECT_TRUE(k.entry);
  EXPECT_EQ(k.registers, 24);
  EXPECT_EQ(k.barriers, 1);
  EXPECT_EQ(k.stack_frame_bytes, 1080);
  EXPECT_EQ(k.spill_store_bytes, 2296);
  EXPECT_EQ(k.spill_load_bytes, 2368);
  EXPECT_EQ(k.static_shared_bytes, 1536);
  const FunctionResources* helper = r.find("_Z6helperILi16EEfPf");
  ASSERT_NE(helper, nullptr);
  EXPECT_FALSE(helper->entry);
  EXPECT_EQ(helper->registers, -1);
  EXPECT_EQ(helper->spill_store_bytes, 0);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0].rfind("Registers are spilled to local memory", 0), 0u);
  EXPECT_EQ(r.find("missing"), nullptr);
}

TEST(PtxasLog, SeveralEntriesAndTheWgmmaWarning) {
  // NVRTC 13.0, sm_90a: two extern "C" kernels (no cmem on this target), followed by a C7511
  // warning line (not captured here: its wording is the one quoted in the Hopper code-generation
  // reference, the tail written out for the test).
  const char* log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'k2' for 'sm_90a'\n"
      "ptxas info    : Function properties for k2\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 8 registers, used 0 barriers\n"
      "ptxas info    : Compile time = 2.671 ms\n"
      "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
      "ptxas info    : Function properties for k\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 13 registers, used 1 barriers, 1024 bytes smem\n"
      "ptxas warning : (C7511) Potential Performance Loss: wgmma.mma_async instructions are "
      "serialized due to insufficient register resources for the wgmma pipeline in the function "
      "'k'\n";
  PtxasReport r = parse_ptxas_log(log);
  ASSERT_EQ(r.functions.size(), 2u);
  EXPECT_EQ(r.functions[0].name, "k2");
  EXPECT_EQ(r.functions[0].registers, 8);
  EXPECT_EQ(r.functions[0].barriers, 0);
  EXPECT_EQ(r.functions[0].static_shared_bytes, 0);
  EXPECT_EQ(r.functions[1].name, "k");
  EXPECT_EQ(r.functions[1].registers, 13);
  EXPECT_EQ(r.functions[1].barriers, 1);
  EXPECT_EQ(r.functions[1].static_shared_bytes, 1024);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("(C7511)"), std::string::npos);
}

TEST(PtxasLog, FrontEndMessagesAreIgnored) {
  PtxasReport r = parse_ptxas_log(
      "k.cu(3): warning #177-D: variable \"unused\" was declared but never referenced\n"
      "  int unused = 32;\n"
      "      ^\n");
  EXPECT_TRUE(r.functions.empty());
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_TRUE(parse_ptxas_log("").functions.empty());
}
