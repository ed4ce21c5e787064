// \file target_cpu_test.cpp
// Unit tests of the CPU back end: hand-built loop programs are compiled with the host compiler,
// run, and compared with values computed directly here (exact where the semantics are exact).
// Kernels are compiled once per process and shared between tests to keep the suite fast.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <regex>

#include "ir/Printer.h"
#include "target/cpu/CpuBackend.h"
#include "tile/TileIR.h"

using namespace kintsugi;
using namespace kintsugi::ir;
namespace fs = std::filesystem;
using runtime::Tensor;

namespace {

Expr I(int64_t v) {
  return make_int(v);
}
Expr F(double v) {
  return make_float(v, DType::F32);
}
Expr ix(const std::string& n) {
  return make_var(n, VarKind::Index, DType::Int);
}
Expr dim(const std::string& n) {
  return make_var(n, VarKind::Dim, DType::Int);
}
Expr bin(Op op, Expr a, Expr b) {
  return make_binary(op, std::move(a), std::move(b));
}
IterVar sp(const std::string& n, Expr extent) {
  return {n, std::move(extent), IterKind::Spatial, ix(n)};
}
IterVar rd(const std::string& n, Expr extent) {
  return {n, std::move(extent), IterKind::Reduce, ix(n)};
}
Stmt loop(const std::string& v, Expr extent, Stmt body) {
  return make_for(v, I(0), std::move(extent), ForKind::Serial, std::move(body));
}
Buffer buf(const std::string& n, DType t, std::vector<Expr> shape, BufferRole role) {
  Buffer b;
  b.name = n;
  b.dtype = t;
  b.shape = std::move(shape);
  b.role = role;
  return b;
}
const auto In = BufferRole::Input;
const auto Out = BufferRole::Output;
const auto Tmp = BufferRole::Intermediate;

const std::string& test_cache_dir() {
  static const std::string dir = [] {
    fs::path d = fs::temp_directory_path() / ("kintsugi-cpu-test-" + std::to_string(getpid()) +
                                              "-" + std::to_string(std::random_device{}()));
    fs::create_directories(d);
    return d.string();
  }();
  return dir;
}

struct CleanupEnv : ::testing::Environment {
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(test_cache_dir(), ec);
  }
};
[[maybe_unused]] auto* const cleanup_env = ::testing::AddGlobalTestEnvironment(new CleanupEnv);

cpu::CompileOptions options(const std::string& dir = test_cache_dir()) {
  cpu::CompileOptions o;
  o.cache_dir = dir;
  return o;
}

float fget(const Tensor& t, int64_t i) {
  float f;
  std::memcpy(&f, t.data.data() + 4 * i, 4);
  return f;
}
void fset(Tensor& t, int64_t i, float f) {
  std::memcpy(t.data.data() + 4 * i, &f, 4);
}
uint16_t hget(const Tensor& t, int64_t i) {
  uint16_t h;
  std::memcpy(&h, t.data.data() + 2 * i, 2);
  return h;
}
uint32_t fbits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// --- Programs ---

// Y[i] = sum_j X[i, j], as a block with init.
LoopProgram row_sum() {
  LoopProgram p;
  p.name = "row_sum";
  p.dims = {"M", "N"};
  p.buffers = {buf("X", DType::F32, {dim("M"), dim("N")}, In),
               buf("Y", DType::F32, {dim("M")}, Out)};
  Stmt init = make_store("Y", {ix("i")}, F(0.0));
  Stmt body = make_store("Y", {ix("i")},
                         bin(Op::Add, make_load("Y", DType::F32, {ix("i")}),
                             make_load("X", DType::F32, {ix("i"), ix("j")})));
  p.body = loop(
      "i", dim("M"),
      loop("j", dim("N"), make_block("row", {sp("i", dim("M")), rd("j", dim("N"))}, init, body)));
  return p;
}

// Rounding of stores and of f16 operations; f16 loads; float -> int casts.
LoopProgram conversions() {
  LoopProgram p;
  p.name = "conversions";
  p.dims = {"N"};
  std::vector<Expr> n = {dim("N")};
  p.buffers = {buf("X", DType::F32, n, In),    buf("XH", DType::F16, n, In),
               buf("H", DType::F16, n, Out),   buf("B", DType::BF16, n, Out),
               buf("HH", DType::F16, n, Out),  buf("I8", DType::I8, n, Out),
               buf("I32", DType::I32, n, Out), buf("FH", DType::F32, n, Out),
               buf("BB", DType::BF16, n, Out)};
  Expr x = make_load("X", DType::F32, {ix("i")});
  Expr xh = make_load("XH", DType::F16, {ix("i")});
  Expr h = make_cast(DType::F16, x);
  Expr b = make_cast(DType::BF16, x);
  Stmt body = make_seq({
      make_store("H", {ix("i")}, x),
      make_store("B", {ix("i")}, x),
      make_store("HH", {ix("i")}, bin(Op::Mul, h, h)),  // F16 * F16: rounded after the op
      make_store("I8", {ix("i")}, bin(Op::Mul, x, F(100.0))),
      make_store("I32", {ix("i")}, make_cast(DType::I32, x)),
      make_store("FH", {ix("i")}, bin(Op::Add, make_cast(DType::F32, xh), F(0.1))),
      make_store("BB", {ix("i")}, bin(Op::Add, b, make_float(1.0, DType::BF16))),
  });
  p.body = loop("i", dim("N"), make_block("conv", {sp("i", dim("N"))}, nullptr, body));
  return p;
}

// O[h, t] = K[h / (HQ / HK), t]: a computed index that is bounds-checked.
LoopProgram gqa() {
  LoopProgram p;
  p.name = "gqa";
  p.dims = {"HQ", "HK", "T"};
  p.buffers = {buf("K", DType::F32, {dim("HK"), dim("T")}, In),
               buf("O", DType::F32, {dim("HQ"), dim("T")}, Out)};
  Expr kh = bin(Op::Div, ix("h"), bin(Op::Div, dim("HQ"), dim("HK")));
  Stmt body = make_store("O", {ix("h"), ix("t")}, make_load("K", DType::F32, {kh, ix("t")}));
  p.body = loop("h", dim("HQ"),
                loop("t", dim("T"),
                     make_block("gqa", {sp("h", dim("HQ")), sp("t", dim("T"))}, nullptr, body)));
  return p;
}

// Q = A / B, R = A % B (floor semantics) on i32 data.
LoopProgram int_div() {
  LoopProgram p;
  p.name = "int_div";
  p.dims = {"N"};
  std::vector<Expr> n = {dim("N")};
  p.buffers = {buf("A", DType::I32, n, In), buf("Bd", DType::I32, n, In),
               buf("Q", DType::I32, n, Out), buf("R", DType::I32, n, Out)};
  Expr a = make_load("A", DType::I32, {ix("i")});
  Expr b = make_load("Bd", DType::I32, {ix("i")});
  Stmt body = make_seq({make_store("Q", {ix("i")}, bin(Op::Div, a, b)),
                        make_store("R", {ix("i")}, bin(Op::Mod, a, b))});
  p.body = loop("i", dim("N"), make_block("div", {sp("i", dim("N"))}, nullptr, body));
  return p;
}

// NaN through min/max (elementwise and a max reduction into a rank-0 buffer) and lazy select.
LoopProgram nan_select() {
  LoopProgram p;
  p.name = "nan_select";
  p.dims = {"N"};
  std::vector<Expr> n = {dim("N")};
  p.buffers = {buf("X", DType::F32, n, In),   buf("Y", DType::F32, n, In),
               buf("Z", DType::I32, n, In),   buf("MX", DType::F32, n, Out),
               buf("MN", DType::F32, n, Out), buf("S", DType::F32, n, Out),
               buf("D", DType::I32, n, Out),  buf("RM", DType::F32, {}, Out)};
  Expr x = make_load("X", DType::F32, {ix("i")});
  Expr y = make_load("Y", DType::F32, {ix("i")});
  Expr z = make_load("Z", DType::I32, {ix("i")});
  Expr prev = make_load("X", DType::F32, {bin(Op::Sub, ix("i"), I(1))});
  Stmt body = make_seq({
      make_store("MX", {ix("i")}, bin(Op::Max, x, y)),
      make_store("MN", {ix("i")}, bin(Op::Min, x, y)),
      make_store("S", {ix("i")}, make_select(bin(Op::Gt, ix("i"), I(0)), prev, F(-1.0))),
      make_store("D", {ix("i")}, make_select(bin(Op::Ne, z, I(0)), bin(Op::Div, I(100), z), I(-1))),
  });
  Stmt ew = loop("i", dim("N"), make_block("ew", {sp("i", dim("N"))}, nullptr, body));
  Stmt red = loop("j", dim("N"),
                  make_block("rmax", {rd("j", dim("N"))},
                             make_store("RM", {}, F(-std::numeric_limits<double>::infinity())),
                             make_store("RM", {},
                                        bin(Op::Max, make_load("RM", DType::F32, {}),
                                            make_load("X", DType::F32, {ix("j")})))));
  p.body = make_seq({ew, red});
  return p;
}

// Softmax over rows with intermediates m, e, l and a scale param, fused under one row loop.
LoopProgram softmax() {
  LoopProgram p;
  p.name = "softmax";
  p.dims = {"M", "N"};
  Param scale;
  scale.name = "scale";
  scale.dtype = DType::F32;
  scale.value = 1.0;
  p.params = {scale};
  Expr M = dim("M"), N = dim("N");
  p.buffers = {buf("X", DType::F32, {M, N}, In), buf("m", DType::F32, {M}, Tmp),
               buf("e", DType::F32, {M, N}, Tmp), buf("l", DType::F32, {M}, Tmp),
               buf("O", DType::F32, {M, N}, Out)};
  Expr sx = bin(Op::Mul, make_load("X", DType::F32, {ix("i"), ix("j")}),
                make_var("scale", VarKind::Param, DType::F32));
  auto mi = make_load("m", DType::F32, {ix("i")});
  auto li = make_load("l", DType::F32, {ix("i")});
  auto eij = make_load("e", DType::F32, {ix("i"), ix("j")});
  Stmt bm = make_block("m", {sp("i", M), rd("j", N)},
                       make_store("m", {ix("i")}, F(-std::numeric_limits<double>::infinity())),
                       make_store("m", {ix("i")}, bin(Op::Max, mi, sx)));
  Stmt be = make_block(
      "e", {sp("i", M), sp("j", N)}, nullptr,
      make_store("e", {ix("i"), ix("j")}, make_call(MathFn::Exp, {bin(Op::Sub, sx, mi)})));
  Stmt bl = make_block("l", {sp("i", M), rd("j", N)}, make_store("l", {ix("i")}, F(0.0)),
                       make_store("l", {ix("i")}, bin(Op::Add, li, eij)));
  Stmt bo = make_block("o", {sp("i", M), sp("j", N)}, nullptr,
                       make_store("O", {ix("i"), ix("j")}, bin(Op::Div, eij, li)));
  p.body = loop("i", M,
                make_seq({loop("j", N, bm), loop("j", N, be), loop("j", N, bl), loop("j", N, bo)}));
  return p;
}

// Every math function, int and f16 params, bool and int ops, float mod, a checked store index,
// a fallible If condition, a nested ForKind::Parallel loop and a name that is not a C++
// identifier.
LoopProgram misc() {
  LoopProgram p;
  p.name = "misc";
  p.dims = {"N"};
  Param a{"a", DType::F32, 0.5}, k{"k", DType::I32, 3.0}, hp{"hp", DType::F16, 0.3};
  p.params = {a, k, hp};
  Expr N = dim("N");
  p.buffers = {buf("X", DType::F32, {N}, In),         buf("XI", DType::I32, {N}, In),
               buf("F", DType::F32, {N, I(19)}, Out), buf("S", DType::F32, {N}, Out),
               buf("C", DType::I32, {N}, Out),        buf("P", DType::F32, {N}, Out)};
  Expr x = make_load("X", DType::F32, {ix("i.0")});
  Expr xi = make_load("XI", DType::I32, {ix("i.0")});
  Expr pa = make_var("a", VarKind::Param, DType::F32);
  Expr pk = make_var("k", VarKind::Param, DType::I32);
  Expr ph = make_var("hp", VarKind::Param, DType::F16);
  Expr ax = make_call(MathFn::Abs, {x});
  auto call1 = [](MathFn f, Expr e) { return make_call(f, {std::move(e)}); };
  std::vector<Expr> cols = {
      call1(MathFn::Exp, x),
      call1(MathFn::Exp2, x),
      call1(MathFn::Log, ax),
      call1(MathFn::Log2, ax),
      call1(MathFn::Tanh, x),
      call1(MathFn::Sigmoid, bin(Op::Mul, x, F(30.0))),
      call1(MathFn::Erf, x),
      call1(MathFn::Sqrt, ax),
      call1(MathFn::Rsqrt, ax),
      make_call(MathFn::Pow, {ax, pa}),
      call1(MathFn::Round, bin(Op::Mul, x, F(4.0))),
      make_call(MathFn::Clamp, {x, F(-0.5), pa}),
      bin(Op::Mul, make_cast(DType::F32, pk), x),
      make_cast(DType::F32, ph),
      make_cast(DType::F32, call1(MathFn::Exp, make_cast(DType::F16, x))),
      bin(Op::Mod, x, F(0.75)),
      make_select(
          bin(Op::Or,
              bin(Op::And, bin(Op::Gt, x, F(0.0)), make_unary(Op::Not, bin(Op::Gt, x, F(1.0)))),
              bin(Op::Eq, xi, I(0))),
          F(1.0), F(0.0)),
      make_cast(DType::F32, bin(Op::Add, bin(Op::Add, bin(Op::Div, xi, pk), bin(Op::Mod, xi, I(3))),
                                bin(Op::Add,
                                    bin(Op::Sub, make_call(MathFn::Clamp, {xi, I(-2), I(2)}),
                                        make_call(MathFn::Abs, {xi})),
                                    bin(Op::Add, bin(Op::Min, xi, pk),
                                        bin(Op::Max, xi, make_unary(Op::Neg, pk)))))),
      make_unary(Op::Neg, x),
  };
  std::vector<Stmt> stores;
  for (size_t c = 0; c < cols.size(); ++c)
    stores.push_back(make_store("F", {ix("i.0"), I(static_cast<int64_t>(c))}, cols[c]));
  stores.push_back(make_store("S", {bin(Op::Sub, bin(Op::Sub, N, I(1)), ix("i.0"))}, x));
  stores.push_back(make_if(bin(Op::Gt, bin(Op::Div, xi, pk), I(0)),
                           make_store("C", {ix("i.0")}, I(1)),
                           make_store("C", {ix("i.0")}, make_cast(DType::I32, x))));
  IterVar iv{"i.0", N, IterKind::Spatial, ix("i")};
  Stmt ew = loop("i", N, make_block("misc", {iv}, nullptr, make_seq(stores)));
  Stmt par = loop("r", I(2),
                  make_for("i", I(0), N, ForKind::Parallel,
                           make_block("p",
                                      {{"i", N, IterKind::Spatial, ix("i")},
                                       {"r", I(2), IterKind::Spatial, ix("r")}},
                                      nullptr,
                                      make_store("P", {ix("i")},
                                                 bin(Op::Add, make_load("X", DType::F32, {ix("i")}),
                                                     make_cast(DType::F32, ix("r")))))));
  p.body = make_seq({ew, par});
  return p;
}

// A tiny program for the cache tests: Y = X + c, with a distinct constant per test.
LoopProgram add_const(double c) {
  LoopProgram p;
  p.name = "add_const";
  p.dims = {"N"};
  p.buffers = {buf("X", DType::F32, {dim("N")}, In), buf("Y", DType::F32, {dim("N")}, Out)};
  p.body = loop("i", dim("N"),
                make_block("add", {sp("i", dim("N"))}, nullptr,
                           make_store("Y", {ix("i")},
                                      bin(Op::Add, make_load("X", DType::F32, {ix("i")}), F(c)))));
  return p;
}

template <LoopProgram (*Make)()>
std::shared_ptr<cpu::CpuKernel> kernel() {
  static std::shared_ptr<cpu::CpuKernel> k = cpu::compile(Make(), options());
  return k;
}

std::string run_error(const cpu::CpuKernel& k, const std::vector<Tensor*>& args,
                      const runtime::SizeMap& sizes) {
  try {
    k.run(args, sizes, {});
  } catch (const RuntimeArgError& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST(TargetCpu, RowSumWithInit) {
  auto k = kernel<row_sum>();
  EXPECT_NE(k->source().find("#pragma omp parallel for collapse(1)"), std::string::npos);
  const int64_t M = 37, N = 53;
  Tensor x(DType::F32, {M, N}), y(DType::F32, {M});
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < M * N; ++i) fset(x, i, u(rng));
  for (int64_t i = 0; i < M; ++i) fset(y, i, 1e30f);  // init must overwrite
  k->run({&x, &y}, {{"M", M}, {"N", N}}, {});
  for (int64_t i = 0; i < M; ++i) {
    float s = 0.0f;
    for (int64_t j = 0; j < N; ++j) s += fget(x, i * N + j);
    EXPECT_EQ(fget(y, i), s) << "row " << i;
  }
  // Empty reduction: init only.
  Tensor x0(DType::F32, {3, 0}), y0(DType::F32, {3});
  fset(y0, 1, 5.0f);
  k->run({&x0, &y0}, {{"M", 3}, {"N", 0}}, {});
  EXPECT_EQ(fget(y0, 1), 5.0f);  // the block never runs, so init does not either
}

TEST(TargetCpu, TileLoadRowsPastTheEndReadZero) {
  // Y = f32(load X[0, 0:+4?, 0:+8]) with X: f16[2, N, 8] and N = 3: the f16 rows of the tile are
  // contiguous, and row 3 lies past the end of X[0] (where X[1] starts): it must read 0.
  tile::TileProgram tp;
  tp.source.name = "tile_tail_rows";
  tp.source.dims = {"N"};
  tp.source.buffers = {buf("X", DType::F16, {I(2), dim("N"), I(8)}, In),
                       buf("Y", DType::F32, {I(4), I(8)}, Out)};
  tile::Kernel k;
  k.name = "tile_tail_rows.0";
  k.grid = {tile::GridAxis{"g", I(1)}};
  tile::TileStmt load, cast, store;
  load.op.kind = tile::OpKind::Load;
  load.op.result = 0;
  load.op.buffer = "X";
  load.op.starts = {I(0), I(0), I(0)};
  load.op.axis_of_dim = {-1, 0, 1};
  load.op.bounds_checked = {false, true, false};
  load.op.type = tile::TileType{DType::F16, {4, 8}};
  cast.op.kind = tile::OpKind::Cast;
  cast.op.result = 1;
  cast.op.args = {0};
  cast.op.type = tile::TileType{DType::F32, {4, 8}};
  store.op.kind = tile::OpKind::Store;
  store.op.buffer = "Y";
  store.op.args = {1};
  store.op.starts = {I(0), I(0)};
  store.op.axis_of_dim = {0, 1};
  store.op.bounds_checked = {false, false};
  store.op.type = tile::TileType{DType::F32, {4, 8}};
  k.body = {load, cast, store};
  k.num_values = 2;
  tp.kernels.push_back(k);
  tile::verify(tp);
  auto kernel = cpu::compile(tp, options());
  Tensor x(DType::F16, {2, 3, 8}), y(DType::F32, {4, 8});
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, 1.0);
  kernel->run({&x, &y}, {{"N", 3}}, {});
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 8; ++c)
      EXPECT_EQ(fget(y, r * 8 + c), r < 3 ? 1.0f : 0.0f) << "row " << r << ", column " << c;
}

TEST(TargetCpu, ArgumentChecks) {
  auto k = kernel<row_sum>();
  Tensor x(DType::F32, {2, 3}), y(DType::F32, {2}), bad(DType::F16, {2, 3}), y3(DType::F32, {3});
  EXPECT_NE(run_error(*k, {&x}, {{"M", 2}, {"N", 3}}).find("expects 2 tensors (input X, output Y)"),
            std::string::npos);
  EXPECT_NE(run_error(*k, {&bad, &y}, {{"M", 2}, {"N", 3}})
                .find("input tensor X has dtype f16, expected f32"),
            std::string::npos);
  EXPECT_NE(run_error(*k, {&x, &y3}, {{"M", 2}, {"N", 3}})
                .find("output tensor Y has shape [3], expected [M] = [2]"),
            std::string::npos);
  EXPECT_NE(run_error(*k, {&x, &y}, {{"M", 2}}).find("no value for size N"), std::string::npos);
  EXPECT_NE(run_error(*k, {&x, &x}, {{"M", 2}, {"N", 3}}).find("Y"), std::string::npos);
}

TEST(TargetCpu, RoundingAndCasts) {
  auto k = kernel<conversions>();
  std::vector<float> vals = {0.0f,
                             -0.0f,
                             1.0f,
                             -2.5f,
                             65504.0f,
                             65519.99f,
                             65520.0f,
                             -65520.0f,
                             1e10f,
                             std::ldexp(1.0f, -24),
                             std::ldexp(1.0f, -25),
                             std::ldexp(1.5f, -25),
                             std::ldexp(1.0f, -14),
                             std::ldexp(1023.5f, -24),
                             1.0f + std::ldexp(1.0f, -11),
                             1.0f + std::ldexp(3.0f, -11),
                             std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity(),
                             std::numeric_limits<float>::quiet_NaN(),
                             -std::numeric_limits<float>::quiet_NaN(),
                             std::numeric_limits<float>::max(),
                             std::numeric_limits<float>::denorm_min(),
                             3e9f,
                             -3e9f,
                             1.27f,
                             -1.29f};
  std::mt19937 rng(7);
  for (int i = 0; i < 60000; ++i) {
    uint32_t bits = rng();
    if (i % 2) bits = (bits & 0x807fffffu) | ((100u + rng() % 60u) << 23);  // near f16 range
    float f;
    std::memcpy(&f, &bits, 4);
    vals.push_back(f);
  }
  const int64_t N = static_cast<int64_t>(vals.size());
  Tensor x(DType::F32, {N}), xh(DType::F16, {N});
  std::vector<Tensor> outs = {Tensor(DType::F16, {N}), Tensor(DType::BF16, {N}),
                              Tensor(DType::F16, {N}), Tensor(DType::I8, {N}),
                              Tensor(DType::I32, {N}), Tensor(DType::F32, {N}),
                              Tensor(DType::BF16, {N})};
  for (int64_t i = 0; i < N; ++i) {
    fset(x, i, vals[i]);
    uint16_t hb = static_cast<uint16_t>(rng());
    std::memcpy(xh.data.data() + 2 * i, &hb, 2);
  }
  std::vector<Tensor*> args = {&x, &xh};
  for (Tensor& t : outs) args.push_back(&t);
  k->run(args, {{"N", N}}, {});
  for (int64_t i = 0; i < N; ++i) {
    double v = vals[i];
    SCOPED_TRACE("value " + format_double(v) + " bits " + std::to_string(fbits(vals[i])));
    ASSERT_EQ(hget(outs[0], i), double_to_f16_bits(v));
    ASSERT_EQ(hget(outs[1], i), double_to_bf16_bits(v));
    double r = round_to_dtype(v, DType::F16);
    ASSERT_EQ(hget(outs[2], i), double_to_f16_bits(r * r));
    float hundred = vals[i] * 100.0f;
    ASSERT_EQ(outs[3].get(i), round_to_dtype(hundred, DType::I8));
    ASSERT_EQ(outs[4].get(i), round_to_dtype(v, DType::I32));
    float fh = static_cast<float>(xh.get(i)) + 0.1f;
    float got = fget(outs[5], i);
    if (std::isnan(fh))
      ASSERT_TRUE(std::isnan(got));
    else
      ASSERT_EQ(fbits(got), fbits(fh));
    double rb = round_to_dtype(v, DType::BF16);
    ASSERT_EQ(hget(outs[6], i), double_to_bf16_bits(rb + 1.0));
  }
}

TEST(TargetCpu, ComputedIndexIsBoundsChecked) {
  auto k = kernel<gqa>();
  EXPECT_NE(k->source().find("collapse(1)"), std::string::npos);  // t stays serial
  {
    Tensor kt(DType::F32, {2, 3}), o(DType::F32, {8, 3});
    for (int64_t i = 0; i < 6; ++i) fset(kt, i, static_cast<float>(i + 1));
    k->run({&kt, &o}, {{"HQ", 8}, {"HK", 2}, {"T", 3}}, {});
    for (int64_t h = 0; h < 8; ++h)
      for (int64_t t = 0; t < 3; ++t) EXPECT_EQ(fget(o, h * 3 + t), fget(kt, (h / 4) * 3 + t));
  }
  {
    Tensor kt(DType::F32, {4, 3}), o(DType::F32, {6, 3});
    std::string msg = run_error(*k, {&kt, &o}, {{"HQ", 6}, {"HK", 4}, {"T", 3}});
    EXPECT_TRUE(std::regex_search(
        msg,
        std::regex(
            R"(index out of bounds: K\[h / \(HQ / HK\), t\] dimension 0 index [45] not in \[0, 4\))")))
        << msg;
  }
  {
    Tensor kt(DType::F32, {0, 3}), o(DType::F32, {6, 3});
    std::string msg = run_error(*k, {&kt, &o}, {{"HQ", 6}, {"HK", 0}, {"T", 3}});
    EXPECT_NE(msg.find("division by zero in HQ / HK"), std::string::npos) << msg;
  }
}

TEST(TargetCpu, IntegerFloorDivisionAndDivisionByZero) {
  auto k = kernel<int_div>();
  std::vector<int32_t> a = {7, -7, 7, -7, 0, INT32_MIN, 5, -1};
  std::vector<int32_t> b = {2, 2, -2, -2, 5, -1, 1, 3};
  const int64_t N = static_cast<int64_t>(a.size());
  Tensor ta(DType::I32, {N}), tb(DType::I32, {N}), q(DType::I32, {N}), r(DType::I32, {N});
  for (int64_t i = 0; i < N; ++i) {
    ta.set(i, a[i]);
    tb.set(i, b[i]);
  }
  k->run({&ta, &tb, &q, &r}, {{"N", N}}, {});
  for (int64_t i = 0; i < N; ++i) {
    double fq = std::floor(static_cast<double>(a[i]) / b[i]);
    EXPECT_EQ(q.get(i), round_to_dtype(fq, DType::I32)) << a[i] << " / " << b[i];
    EXPECT_EQ(r.get(i), static_cast<double>(a[i]) - fq * b[i]) << a[i] << " % " << b[i];
  }
  tb.set(3, 0);
  std::string msg = run_error(*k, {&ta, &tb, &q, &r}, {{"N", N}});
  EXPECT_NE(msg.find("division by zero in A[i] / Bd[i]"), std::string::npos) << msg;
}

TEST(TargetCpu, NanPropagationAndLazySelect) {
  auto k = kernel<nan_select>();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> xs = {1.0f, nan, 3.0f, -2.0f, 7.0f};
  std::vector<float> ys = {2.0f, 0.0f, nan, -2.0f, 6.0f};
  std::vector<int32_t> zs = {0, 3, -7, 0, 100};
  const int64_t N = 5;
  Tensor x(DType::F32, {N}), y(DType::F32, {N}), z(DType::I32, {N}), mx(DType::F32, {N}),
      mn(DType::F32, {N}), s(DType::F32, {N}), d(DType::I32, {N}), rm(DType::F32, {});
  for (int64_t i = 0; i < N; ++i) {
    fset(x, i, xs[i]);
    fset(y, i, ys[i]);
    z.set(i, zs[i]);
  }
  k->run({&x, &y, &z, &mx, &mn, &s, &d, &rm}, {{"N", N}}, {});
  for (int64_t i = 0; i < N; ++i) {
    bool any_nan = std::isnan(xs[i]) || std::isnan(ys[i]);
    if (any_nan) {
      EXPECT_TRUE(std::isnan(fget(mx, i))) << i;
      EXPECT_TRUE(std::isnan(fget(mn, i))) << i;
    } else {
      EXPECT_EQ(fget(mx, i), std::max(xs[i], ys[i]));
      EXPECT_EQ(fget(mn, i), std::min(xs[i], ys[i]));
    }
    if (i == 0)
      EXPECT_EQ(fget(s, i), -1.0f);  // X[-1] is never evaluated
    else if (std::isnan(xs[i - 1]))
      EXPECT_TRUE(std::isnan(fget(s, i)));
    else
      EXPECT_EQ(fget(s, i), xs[i - 1]);
    double want = zs[i] == 0 ? -1.0 : std::floor(100.0 / zs[i]);
    EXPECT_EQ(d.get(i), want) << i;  // 100 / 0 is never evaluated
  }
  EXPECT_TRUE(std::isnan(fget(rm, 0)));
  // Without NaN the reduction is the plain maximum.
  fset(x, 1, 0.5f);
  k->run({&x, &y, &z, &mx, &mn, &s, &d, &rm}, {{"N", N}}, {});
  EXPECT_EQ(fget(rm, 0), 7.0f);
}

TEST(TargetCpu, FusedSoftmaxWithIntermediatesAndParam) {
  auto k = kernel<softmax>();
  EXPECT_NE(k->source().find("collapse(1)"), std::string::npos);
  const int64_t M = 9, N = 130;
  Tensor x(DType::F32, {M, N}), o(DType::F32, {M, N});
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  for (int64_t i = 0; i < M * N; ++i) fset(x, i, u(rng));
  const float scale = 0.75f;
  k->run({&x, &o}, {{"M", M}, {"N", N}}, {{"scale", scale}});
  for (int64_t i = 0; i < M; ++i) {
    float m = -INFINITY, l = 0.0f;
    for (int64_t j = 0; j < N; ++j) m = std::max(m, fget(x, i * N + j) * scale);
    for (int64_t j = 0; j < N; ++j) l += std::exp(fget(x, i * N + j) * scale - m);
    for (int64_t j = 0; j < N; ++j) {
      float want = std::exp(fget(x, i * N + j) * scale - m) / l;
      EXPECT_NEAR(fget(o, i * N + j), want, 1e-6f * want + 1e-12f);
    }
  }
}

TEST(TargetCpu, MathParamsAndControlFlow) {
  auto k = kernel<misc>();
  std::vector<float> xs = {0.3f, -1.7f, 2.5f, 0.0f, -0.125f, 1.0f, 0.625f, -3.0f, 7.25f};
  std::vector<int32_t> xis = {0, 7, -7, 9, -1, 2, 3, -9, 100};
  const int64_t N = static_cast<int64_t>(xs.size());
  Tensor x(DType::F32, {N}), xi(DType::I32, {N}), f(DType::F32, {N, 19}), s(DType::F32, {N}),
      c(DType::I32, {N}), pout(DType::F32, {N});
  for (int64_t i = 0; i < N; ++i) {
    fset(x, i, xs[i]);
    xi.set(i, xis[i]);
  }
  const float a = 0.25f;
  const int64_t kk = 2;
  k->run({&x, &xi, &f, &s, &c, &pout}, {{"N", N}}, {{"a", a}, {"k", 2.9}});
  auto floordiv = [](int64_t p, int64_t q) {
    return static_cast<int64_t>(std::floor(static_cast<double>(p) / q));
  };
  for (int64_t i = 0; i < N; ++i) {
    float v = xs[i], av = std::fabs(v);
    int64_t w = xis[i];
    float fm = std::fmod(v, 0.75f);
    if (fm != 0.0f && ((fm < 0.0f) != (0.75f < 0.0f))) fm += 0.75f;
    std::vector<float> want = {
        std::exp(v),
        std::exp2(v),
        std::log(av),
        std::log2(av),
        std::tanh(v),
        1.0f / (1.0f + std::exp(-(v * 30.0f))),  // 0 and 1 at the ends of the float range
        std::erf(v),
        std::sqrt(av),
        1.0f / std::sqrt(av),
        std::pow(av, a),
        std::nearbyint(v * 4.0f),
        std::min(std::max(v, -0.5f), a),
        static_cast<float>(kk) * v,
        static_cast<float>(round_to_dtype(0.3, DType::F16)),
        static_cast<float>(round_to_dtype(
            std::exp(static_cast<float>(round_to_dtype(v, DType::F16))), DType::F16)),
        fm,
        ((v > 0 && !(v > 1)) || w == 0) ? 1.0f : 0.0f,
        static_cast<float>(floordiv(w, kk) + (w - floordiv(w, 3) * 3) +
                           std::min<int64_t>(std::max<int64_t>(w, -2), 2) - std::abs(w) +
                           std::min<int64_t>(w, kk) + std::max<int64_t>(w, -kk)),
        -v,
    };
    for (size_t col = 0; col < want.size(); ++col) {
      float got = fget(f, i * 19 + static_cast<int64_t>(col));
      if (std::isnan(want[col]))
        EXPECT_TRUE(std::isnan(got)) << i << " col " << col;
      else if (std::isinf(want[col]))
        EXPECT_EQ(got, want[col]) << i << " col " << col;
      else
        EXPECT_NEAR(got, want[col], 2e-7f * std::fabs(want[col])) << i << " col " << col;
    }
    EXPECT_EQ(fget(s, N - 1 - i), v);
    EXPECT_EQ(c.get(i), floordiv(w, kk) > 0 ? 1.0 : round_to_dtype(v, DType::I32)) << i;
    EXPECT_EQ(fget(pout, i), v + 1.0f);
  }
  EXPECT_NE(k->source().find("vx_i_2e0"), std::string::npos);
  // The int param is a divisor: zero makes the kernel fail cleanly.
  std::string msg = run_error(*k, {&x, &xi, &f, &s, &c, &pout}, {{"N", N}});
  EXPECT_EQ(msg, "<no error>");
  try {
    k->run({&x, &xi, &f, &s, &c, &pout}, {{"N", N}}, {{"k", 0.0}});
    ADD_FAILURE() << "no error";
  } catch (const RuntimeArgError& e) {
    EXPECT_NE(std::string(e.what()).find("division by zero in XI[i.0] / k"), std::string::npos)
        << e.what();
  }
}

TEST(TargetCpu, ParallelAnalysis) {
  // A loop whose variable drives a reduce iteration variable is never parallel.
  LoopProgram p = row_sum();
  p.body = loop("j", dim("N"),
                loop("i", dim("M"),
                     make_block("row", {sp("i", dim("M")), rd("j", dim("N"))},
                                make_store("Y", {ix("i")}, F(0.0)),
                                make_store("Y", {ix("i")},
                                           bin(Op::Add, make_load("Y", DType::F32, {ix("i")}),
                                               make_load("X", DType::F32, {ix("i"), ix("j")}))))));
  std::string src = cpu::generate_source(p);
  EXPECT_EQ(src.find("#pragma omp parallel for"), std::string::npos);
  EXPECT_EQ(src, cpu::generate_source(p));  // deterministic
  // An explicitly parallel loop is parallel wherever it is.
  LoopProgram q = add_const(1.0);
  q.body = make_for("i", I(0), dim("N"), ForKind::Parallel, q.body->body);
  EXPECT_NE(cpu::generate_source(q).find("#pragma omp parallel for collapse(1)"),
            std::string::npos);
  // An unknown variable is an internal error, not bad C++.
  LoopProgram r = add_const(1.0);
  r.body =
      loop("i", dim("N"),
           make_block("add", {sp("k", dim("N"))}, nullptr, make_store("Y", {ix("i")}, F(1.0))));
  EXPECT_THROW(cpu::generate_source(r), InternalError);
}

TEST(TargetCpu, DiskCacheHitAndCorruption) {
  std::string dir = test_cache_dir() + "/cache-test";
  LoopProgram p = add_const(2.5);
  auto check = [&](const cpu::CpuKernel& k) {
    Tensor x(DType::F32, {4}), y(DType::F32, {4});
    for (int64_t i = 0; i < 4; ++i) fset(x, i, static_cast<float>(i));
    k.run({&x, &y}, {{"N", 4}}, {});
    for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(fget(y, i), static_cast<float>(i) + 2.5f);
  };
  std::string so;
  {
    auto k1 = cpu::compile(p, options(dir));
    EXPECT_FALSE(k1->from_cache());
    check(*k1);
    auto k2 = cpu::compile(p, options(dir));
    EXPECT_TRUE(k2->from_cache());
    EXPECT_EQ(k2->cache_key(), k1->cache_key());
    check(*k2);
    so = k1->library_path();
  }
  ASSERT_TRUE(fs::exists(so));
  // Truncated object: rebuilt, not trusted.
  fs::resize_file(so, fs::file_size(so) / 2);
  {
    auto k = cpu::compile(p, options(dir));
    EXPECT_FALSE(k->from_cache());
    check(*k);
  }
  // Same size, flipped bytes: rebuilt.
  {
    std::fstream f(so, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(so) / 3));
    f.write("\xde\xad\xbe\xef", 4);
  }
  {
    auto k = cpu::compile(p, options(dir));
    EXPECT_FALSE(k->from_cache());
    check(*k);
    auto again = cpu::compile(p, options(dir));
    EXPECT_TRUE(again->from_cache());
  }
}

TEST(TargetCpu, CompilerProbeIsKeptInTheCache) {
  // The flags the host compiler was found to take are stored beside the kernels, so that a later
  // process reads them instead of compiling the probe program again.
  std::string dir = test_cache_dir() + "/toolchain-test";
  std::error_code ec;
  fs::remove_all(dir, ec);
  auto k = cpu::compile(add_const(1.5), options(dir));
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("toolchain-", 0) == 0) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].extension(), ".meta");
  EXPECT_EQ(entries[1].extension(), ".txt");
  std::ifstream in(entries[1]);
  std::vector<std::string> flags;
  for (std::string f; std::getline(in, f);) flags.push_back(f);
  EXPECT_NE(std::find(flags.begin(), flags.end(), "-O3"), flags.end());
  EXPECT_NE(std::find(flags.begin(), flags.end(), "-shared"), flags.end());
}
