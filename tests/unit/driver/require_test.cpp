// No silent fallbacks (driver/Driver.h): every example fuses, lowers to tiles and puts its f16/bf16
// dots on the tensor cores at its default sizes and at its benchmark sizes (the CUDA paths from the
// generated source, no GPU needed), with no warning; a fallback of a required kind is a user
// error that names the requirement and the reason, and of a kind not required a warning.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "driver/Driver.h"
#include "ir/Stmt.h"
#include "support/Error.h"

using namespace kintsugi;

namespace {

const std::set<driver::Requirement> kAll = {driver::Requirement::Fused, driver::Requirement::Tile,
                                            driver::Requirement::TensorCore};

// The warnings of scheduling `file` and of its code paths for `target` at `sizes` (the program's
// own sizes where absent), with every requirement on.
std::vector<std::string> warnings_of(const std::string& file, const std::string& target,
                                     const runtime::SizeMap& sizes = {}) {
  ir::LoopProgram p = driver::load_file(file);
  runtime::SizeMap at = p.size_hints;
  for (const auto& [d, n] : sizes) at[d] = n;
  driver::ScheduleOptions o;
  o.target = driver::Target::parse(target);
  o.sizes = at;
  o.require = kAll;
  driver::Scheduled s = driver::schedule_program(p, o);
  driver::CodePaths c = driver::code_paths(s, o.target, at);
  std::vector<std::string> out = s.warnings;
  out.insert(out.end(), c.warnings.begin(), c.warnings.end());
  return out;
}

// The sizes of an example's "Benchmark sizes: --shape ..." comment.
runtime::SizeMap benchmark_sizes(const std::string& file) {
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::smatch m;
  runtime::SizeMap out;
  if (!std::regex_search(text, m, std::regex("--shape ([A-Z0-9=,]+[0-9])"))) return out;
  std::string list = m[1];
  const std::regex entry("([A-Z]+)=([0-9]+)");
  for (std::sregex_iterator it(list.begin(), list.end(), entry), end; it != end; ++it)
    out[(*it)[1]] = std::stoll((*it)[2]);
  return out;
}

const std::vector<std::string> kExamples = {"performer.te",
                                            "attention/decode_alibi.te",
                                            "attention/decode_causal.te",
                                            "attention/decode_gqa.te",
                                            "attention/decode_softcap.te",
                                            "attention/prefill_alibi.te",
                                            "attention/prefill_causal.te",
                                            "attention/prefill_causal_bf16.te",
                                            "attention/prefill_global.te",
                                            "attention/prefill_gqa.te",
                                            "attention/prefill_softcap.te",
                                            "attention/prefill_windowed.te",
                                            "norm/l2norm.te",
                                            "norm/layernorm.te",
                                            "norm/rmsnorm_quant.te",
                                            "norm/softmax.te"};

std::string example(const std::string& name) {
  return std::string(KINTSUGI_SOURCE_DIR) + "/examples/" + name;
}

}  // namespace

TEST(Require, EveryExampleMeetsEveryRequirementAtItsDefaultSizes) {
  for (const std::string& e : kExamples)
    for (const std::string target : {"cpu", "cuda"}) {
      std::vector<std::string> w;
      EXPECT_NO_THROW(w = warnings_of(example(e), target)) << e << " on " << target;
      for (const std::string& x : w) ADD_FAILURE() << e << " on " << target << ": " << x;
    }
}

// At the benchmark sizes too (the rows of softmax and rmsnorm_quant walked in tiles).
TEST(Require, EveryExampleMeetsEveryRequirementAtItsBenchmarkSizes) {
  for (const std::string& e : kExamples) {
    runtime::SizeMap sizes = benchmark_sizes(example(e));
    ASSERT_FALSE(sizes.empty()) << e << " has no benchmark sizes";
    for (const std::string target : {"cpu", "cuda"}) {
      std::vector<std::string> w;
      EXPECT_NO_THROW(w = warnings_of(example(e), target, sizes)) << e << " on " << target;
      for (const std::string& x : w) ADD_FAILURE() << e << " on " << target << ": " << x;
    }
  }
}

// A loop program with a conditional statement, which has no tile form (no .te program the front
// end lowers reaches scalar code today): the CPU runs scalar loop code with a warning, the CUDA
// target has no code for it; --require tile makes both errors.
TEST(Require, ScalarLoopCodeIsATileShortfall) {
  using namespace ir;
  LoopProgram p;
  p.name = "branchy";
  p.dims = {"N"};
  Expr N = make_var("N", VarKind::Dim, DType::Int), i = make_var("i", VarKind::Index, DType::Int);
  for (auto [name, role] : {std::pair{"X", BufferRole::Input}, {"Y", BufferRole::Output}}) {
    Buffer b;
    b.name = name;
    b.dtype = DType::F32;
    b.shape = {N};
    b.role = role;
    p.buffers.push_back(b);
  }
  Expr x = make_load("X", DType::F32, {i});
  Stmt body = make_if(make_binary(Op::Gt, x, make_float(0.0, DType::F32)), make_store("Y", {i}, x),
                      make_store("Y", {i}, make_float(0.0, DType::F32)));
  p.body = make_for("i", make_int(0), N, ForKind::Serial,
                    make_block("relu", {{"i", N, IterKind::Spatial, i}}, nullptr, body));
  driver::Scheduled s;
  s.program = p;
  s.schedule = "auto";
  for (const std::string target : {"cpu", "cuda"}) {
    s.require = {};
    driver::CodePaths c = driver::code_paths(s, driver::Target::parse(target), {{"N", 10}});
    EXPECT_EQ(c.form, "loop");
    ASSERT_EQ(c.shortfalls.size(), 1u);
    EXPECT_EQ(c.shortfalls[0].requirement, driver::Requirement::Tile);
    ASSERT_EQ(c.warnings.size(), 1u);
    EXPECT_NE(c.warnings[0].find("program 'branchy' is not in tile form: "), std::string::npos)
        << c.warnings[0];
    ASSERT_EQ(c.kernels.size(), 1u);
    EXPECT_EQ(c.kernels[0].path, "scalar");
    s.require = {driver::Requirement::Tile};
    try {
      driver::code_paths(s, driver::Target::parse(target), {{"N", 10}});
      ADD_FAILURE() << target << ": no error";
    } catch (const UserError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--require tile does not hold: ", 0), 0u) << e.what();
    }
  }
}

TEST(Require, AFallbackIsAWarningOrTheErrorOfItsRequirement) {
  const std::string src = std::string(KINTSUGI_SOURCE_DIR) + "/tests/error/require_fused.te";
  ir::LoopProgram p = driver::load_file(src);
  driver::ScheduleOptions o;
  o.sizes = p.size_hints;
  o.whole_row_bytes = 0;  // streamed: a row this short is otherwise computed whole
  driver::Scheduled s = driver::schedule_program(p, o);
  ASSERT_EQ(s.shortfalls.size(), 1u);
  EXPECT_EQ(s.shortfalls[0].requirement, driver::Requirement::Fused);
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_EQ(s.warnings[0], s.shortfalls[0].text);
  EXPECT_EQ(s.warnings[0].rfind("fusion abandoned: ", 0), 0u) << s.warnings[0];
  ASSERT_EQ(s.fusion.size(), 2u);
  EXPECT_EQ(s.fusion[1].name, "l");
  EXPECT_EQ(s.fusion[1].producers, std::vector<std::string>{"m"});
  EXPECT_EQ(s.fusion[1].update, "none");
  // Another kind required: still a warning.
  o.require = {driver::Requirement::Tile, driver::Requirement::TensorCore};
  EXPECT_NO_THROW(driver::schedule_program(p, o));
  o.require = {driver::Requirement::Fused};
  o.require_who = "require";
  try {
    driver::schedule_program(p, o);
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("require fused does not hold: fusion abandoned: ", 0), 0u)
        << e.what();
  }
}

TEST(Require, NamesParse) {
  EXPECT_EQ(
      driver::parse_requirements({"tensor-core", "fused"}, "--require"),
      (std::set<driver::Requirement>{driver::Requirement::Fused, driver::Requirement::TensorCore}));
  EXPECT_THROW(driver::parse_requirements({"tiles"}, "--require"), UserError);
  for (driver::Requirement r : kAll)
    EXPECT_EQ(driver::parse_requirements({driver::requirement_name(r)}, "x"),
              std::set<driver::Requirement>{r});
}
