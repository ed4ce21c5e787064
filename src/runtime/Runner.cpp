// \file Runner.cpp
// The `kintsugi run` driver (see Runner.h).
#include "runtime/Runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "driver/Driver.h"
#include "ir/Interpreter.h"
#include "ir/Limits.h"
#include "ir/Printer.h"
#include "ir/Visit.h"
#include "runtime/Npy.h"
#include "runtime/RowSample.h"
#include "support/Files.h"
#include "support/Version.h"
#include "target/cpu/CpuBackend.h"
#include "target/cuda/CudaBackend.h"
#include "target/cuda/Driver.h"

namespace kintsugi::runtime {

SizeMap bind_sizes(const ir::LoopProgram& p, const SizeMap& overrides) {
  for (const auto& [name, value] : overrides) {
    bool known = std::find(p.dims.begin(), p.dims.end(), name) != p.dims.end();
    if (!known) {
      std::string dims;
      for (const auto& d : p.dims) dims += (dims.empty() ? "" : ", ") + d;
      arg_error << "--shape names '" << name << "', which is not a size of " << p.name
                << " (its sizes are: " << (dims.empty() ? "none" : dims) << ")";
    }
    if (value <= 0) arg_error << "--shape " << name << "=" << value << ": sizes must be positive";
  }
  SizeMap sizes;
  for (const auto& d : p.dims) {
    if (auto it = overrides.find(d); it != overrides.end())
      sizes[d] = it->second;
    else if (auto h = p.size_hints.find(d); h != p.size_hints.end())
      sizes[d] = h->second;
    else
      arg_error << "size '" << d << "' has no value: give it with --shape " << d
                << "=N or in a `sizes` line";
  }
  return sizes;
}

namespace {

// The integer input that an index expression reads as its value: a load of it, through casts and
// through clamps (`max(TGT[r], 0)`, `min(max(P[i], 0), N - 1)`), where the clamp's other side
// reads no such input. Null when the index is anything else.
const ir::Buffer* index_tensor_read(const ir::LoopProgram& p, ir::Expr i) {
  while (i->op == ir::Op::Cast) i = i->args[0];
  if (i->op == ir::Op::Min || i->op == ir::Op::Max) {
    const ir::Buffer* a = index_tensor_read(p, i->args[0]);
    const ir::Buffer* b = index_tensor_read(p, i->args[1]);
    return a && b ? nullptr : a ? a : b;
  }
  const ir::Buffer* b = i->op == ir::Op::Load ? p.find_buffer(i->name) : nullptr;
  return b && b->role == ir::BufferRole::Input && !is_float(b->dtype) ? b : nullptr;
}

// The integer inputs read (through casts and clamps) as an index of another buffer's dimension,
// each with the smallest extent it indexes.
std::map<std::string, int64_t> index_tensor_bounds(const ir::LoopProgram& p, const SizeMap& sizes,
                                                   const ParamMap& values) {
  std::map<std::string, int64_t> out;
  ir::visit_exprs(p.body, [&](const ir::Expr& top) {
    ir::visit(top, [&](const ir::Expr& e) {
      if (e->op != ir::Op::Load) return true;
      const ir::Buffer* x = p.find_buffer(e->name);
      for (size_t d = 0; x && d < e->args.size() && d < x->shape.size(); ++d) {
        const ir::Buffer* b = index_tensor_read(p, e->args[d]);
        if (!b) continue;
        int64_t n = ir::eval_int(x->shape[d], sizes, values);
        auto [it, fresh] = out.emplace(b->name, n);
        if (!fresh) it->second = std::min(it->second, n);
      }
      return true;
    });
  });
  return out;
}

}  // namespace

namespace {

// Inputs of at least this many elements are drawn in parallel from a counter-based stream; the
// smaller ones (every schedule validation, the fuzzers, whose replayed seeds depend on their
// values) from one sequential std::mt19937_64.
constexpr int64_t kParallelDrawElements = int64_t{1} << 22;

// splitmix64's finaliser: a bijection of 64-bit words whose outputs pass as independent uniforms
// for consecutive inputs.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Element `i` of a large input, a function of (seed, the input's position, i) only: the values do
// not depend on how the elements are shared among threads. Floats: N(0, 1) by Box-Muller from two
// 53-bit uniforms; integers: uniform in [lo, hi] (the modulo's bias is below 2^-50 for the
// ranges used).
struct CounterDraw {
  uint64_t key;
  bool is_float;
  int64_t lo, hi;
  double operator()(int64_t i) const {
    const uint64_t h1 = mix64(key + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull);
    if (!is_float) return static_cast<double>(lo + static_cast<int64_t>(h1 % (hi - lo + 1)));
    const uint64_t h2 = mix64(h1 ^ 0xd1b54a32d192ed03ull);
    const double u1 = static_cast<double>((h1 >> 11) + 1) * 0x1p-53;  // (0, 1]: log is finite
    const double u2 = static_cast<double>(h2 >> 11) * 0x1p-53;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

void draw_in_parallel(Tensor& t, const CounterDraw& draw) {
  const int64_t n = t.numel();
  const int64_t workers = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 32);
  std::vector<std::thread> threads;
  for (int64_t w = 0; w < workers; ++w)
    threads.emplace_back([&t, &draw, begin = n * w / workers, end = n * (w + 1) / workers] {
      for (int64_t i = begin; i < end; ++i) t.set(i, draw(i));
    });
  for (std::thread& th : threads) th.join();
}

}  // namespace

std::map<std::string, Tensor> random_inputs(const ir::LoopProgram& p, const SizeMap& sizes,
                                            uint64_t seed, const ParamMap& params) {
  const ParamMap values = p.param_values(params);
  std::map<std::string, int64_t> index_bounds = index_tensor_bounds(p, sizes, values);
  std::map<std::string, Tensor> out;
  std::mt19937_64 rng(seed);
  uint64_t position = 0;
  for (const ir::Buffer* b : p.inputs()) {
    Tensor t(b->dtype, ir::eval_shape(b->shape, sizes, values), "input '" + b->name + "'");
    int64_t n = t.numel();
    int64_t lo = b->dtype == DType::I8 ? -128 : -1000, hi = b->dtype == DType::I8 ? 127 : 1000;
    if (auto it = index_bounds.find(b->name); it != index_bounds.end() && it->second > 0) {
      lo = 0;
      hi = std::min(hi, it->second - 1);
    }
    ++position;
    if (n >= kParallelDrawElements) {
      draw_in_parallel(t, CounterDraw{mix64(seed) ^ mix64(position), is_float(b->dtype), lo, hi});
    } else if (is_float(b->dtype)) {
      std::normal_distribution<double> dist(0.0, 1.0);
      for (int64_t i = 0; i < n; ++i) t.set(i, dist(rng));
    } else {
      std::uniform_int_distribution<int64_t> dist(lo, hi);
      for (int64_t i = 0; i < n; ++i) t.set(i, dist(rng));
    }
    out.emplace(b->name, std::move(t));
  }
  return out;
}

double tolerance_for(const ir::LoopProgram& p, DType output) {
  // The coarsest float type anywhere in the computation bounds the achievable accuracy: f16
  // 1e-2, bf16 8e-2, f32 1e-4 (ten epsilons: accumulation over long reductions). An fp8 value
  // is compared with the reference rounded to it, so it may be one unit in the last place off (a
  // rounding boundary crossed by the f32 computation): one epsilon, 0.125 for e4m3 and 0.25 for
  // e5m2 relative to the largest reference value.
  double tol = 0.0;
  auto coarsest = [&](DType t) {
    tol = std::max(tol, (is_fp8(t) ? 1.0 : 10.0) * dtype_epsilon(t));
  };
  coarsest(is_float(output) ? output : DType::F32);
  // (An fp8 output is storage only: it bounds its own accuracy, not that of the other outputs.)
  for (const ir::Buffer& b : p.buffers)
    if (b.role != ir::BufferRole::Input && is_float(b.dtype) &&
        !(b.role == ir::BufferRole::Output && is_fp8(b.dtype)))
      coarsest(b.dtype);
  ir::visit_exprs(p.body, [&](const ir::Expr& e) {
    ir::visit(e, [&](const ir::Expr& n) {
      if (n->op == ir::Op::Cast && is_float(n->type)) coarsest(n->type);
      return true;
    });
  });
  return std::max(tol, 1e-4);
}

bool has_nonfinite(const std::map<std::string, Tensor>& inputs) {
  for (const auto& [name, t] : inputs)
    if (is_float(t.dtype))
      for (int64_t i = 0; i < t.numel(); ++i)
        if (!std::isfinite(t.get(i))) return true;
  return false;
}

OutputCheck compare_output(const std::string& name, const Tensor& out,
                           const std::vector<double>& ref, double tol, bool nonfinite_inputs) {
  OutputCheck c;
  c.name = name;
  c.dtype = out.dtype;
  c.tolerance = tol;
  internal_assert(static_cast<int64_t>(ref.size()) == out.numel())
      << "reference size mismatch for " << name;
  // The reference as the output's type holds it: a value below the type's range is its zero (or
  // subnormal), one beyond it its infinity, as a correct kernel stores them.
  auto as_stored = [&](double r) { return is_float(out.dtype) ? round_to_dtype(r, out.dtype) : r; };
  double scale = 0.0;
  for (double r : ref)
    if (std::isfinite(as_stored(r))) scale = std::max(scale, std::fabs(as_stored(r)));
  for (size_t i = 0; i < ref.size(); ++i) {
    double r = as_stored(ref[i]), a = out.get(static_cast<int64_t>(i));
    if (std::isnan(r) && nonfinite_inputs) continue;
    if (!std::isfinite(r) || !std::isfinite(a)) {
      bool same = (std::isnan(r) && std::isnan(a)) ||
                  (std::isinf(r) && std::isinf(a) && (r > 0) == (a > 0));
      // At the type's overflow boundary, an error within the tolerance decides between its
      // largest finite value and infinity: both sides of the boundary agree there.
      const double top = is_float(out.dtype) ? dtype_max_finite(out.dtype) : 0.0;
      bool boundary = top > 0 && !std::isnan(r) && !std::isnan(a) && (r > 0) == (a > 0) &&
                      std::fabs(ref[i]) >= top * (1.0 - tol) &&
                      std::fabs(ref[i]) <= top * (1.0 + tol) && std::fabs(a) >= top * (1.0 - tol);
      c.special_values_match &= same || boundary;
      continue;
    }
    c.max_abs_err = std::max(c.max_abs_err, std::fabs(a - r));
  }
  c.max_rel_err = scale > 0 ? c.max_abs_err / scale : c.max_abs_err;
  if (is_int(out.dtype))
    c.ok = c.special_values_match && c.max_abs_err <= 1.0;  // rounding ties may flip
  else
    c.ok = c.special_values_match && c.max_rel_err <= tol;
  return c;
}

std::map<std::string, Tensor> read_inputs(const ir::LoopProgram& p, const std::string& dir,
                                          SizeMap& sizes, const SizeMap& overrides,
                                          const ParamMap& params) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) arg_error << "--inputs " << dir << ": no such directory";
  std::map<std::string, Tensor> out;
  std::map<std::string, std::string> bound_by;  // dim -> the file that fixed it
  sizes = overrides;
  for (const auto& [d, v] : overrides) bound_by[d] = "--shape";
  for (const ir::Buffer* b : p.inputs()) {
    std::string path = (fs::path(dir) / (b->name + ".npy")).string();
    if (!fs::exists(fs::symlink_status(path, ec)))
      arg_error << "input '" << b->name << "' (" << dtype_name(b->dtype) << ") needs the file "
                << path << ", which does not exist";
    Tensor t = read_npy(path, b->dtype);
    auto shape_text = [&]() {
      std::string s;
      for (size_t k = 0; k < b->shape.size(); ++k)
        s += (k ? ", " : "") + ir::to_string(b->shape[k]);
      return s;
    };
    if (t.shape.size() != b->shape.size())
      arg_error << path << " has " << t.shape.size() << " dimensions but input '" << b->name
                << "' is " << dtype_name(b->dtype) << "[" << shape_text() << "]";
    for (size_t k = 0; k < b->shape.size(); ++k) {
      const ir::Expr& e = b->shape[k];
      if (e->op != ir::Op::Var) continue;
      auto it = sizes.find(e->name);
      if (it == sizes.end()) {
        if (t.shape[k] <= 0)
          arg_error << path << " has an empty dimension " << k << "; sizes must be positive";
        sizes[e->name] = t.shape[k];
        bound_by[e->name] = path;
      } else if (it->second != t.shape[k]) {
        arg_error << path << " has extent " << t.shape[k] << " in dimension " << k << " ("
                  << e->name << "), but " << e->name << " = " << it->second << " from "
                  << bound_by[e->name];
      }
    }
    out.emplace(b->name, std::move(t));
  }
  // Sizes that no file fixes fall back to --shape and the source; then every shape must match.
  SizeMap all = bind_sizes(p, sizes);
  for (const ir::Buffer* b : p.inputs()) {
    std::vector<int64_t> want = ir::eval_shape(b->shape, all, params);
    const Tensor& t = out.at(b->name);
    if (t.shape != want) {
      std::string got, exp;
      for (size_t k = 0; k < want.size(); ++k) {
        got += (k ? ", " : "") + std::to_string(t.shape[k]);
        exp += (k ? ", " : "") + std::to_string(want[k]);
      }
      arg_error << (fs::path(dir) / (b->name + ".npy")).string() << " has shape [" << got
                << "] but input '" << b->name << "' needs [" << exp
                << "] with the sizes bound so far";
    }
  }
  sizes = all;
  return out;
}

namespace {
// --save-io DIR: DIR may not exist yet, or be an empty directory; a directory with files in it
// is only written into with --force (its files of the same names are then replaced).
void check_save_io_dir(const RunOptions& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::file_status st = fs::status(o.save_io_dir, ec);
  if (!fs::exists(st)) return;
  if (!fs::is_directory(st))
    arg_error << "--save-io " << o.save_io_dir << ": exists and is not a directory";
  if (o.save_io_force) return;
  fs::directory_iterator it(o.save_io_dir, ec);
  if (ec)
    arg_error << "--save-io " << o.save_io_dir << ": cannot read the directory (" << ec.message()
              << ")";
  if (it != fs::directory_iterator())
    arg_error << "--save-io " << o.save_io_dir
              << ": the directory exists and is not empty; give an empty or new directory, or "
                 "--force to replace the files of the same names in it";
}

void save_io(const ir::LoopProgram& p, const RunOptions& o, const RunReport& r,
             const std::map<std::string, Tensor>& inputs,
             const std::map<std::string, Tensor>& outputs, const ParamMap& params) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(o.save_io_dir, ec);
  if (ec)
    arg_error << "--save-io " << o.save_io_dir << ": cannot create the directory (" << ec.message()
              << ")";
  check_save_io_dir(o);  // again: the directory may have changed during the run
  nlohmann::json m;
  m["program"] = p.name;
  m["commit"] = kCommit;
  m["target"] = r.target;
  m["seed"] = o.seed;
  m["inputs_from"] = o.inputs_dir.empty() ? nlohmann::json("random") : nlohmann::json(o.inputs_dir);
  m["shape"] = r.shape;
  m["params"] = params;
  m["verified"] = r.verified ? nlohmann::json(*r.verified) : nlohmann::json(nullptr);
  auto entry = [&](const std::string& name, const Tensor& t) {
    std::string file = name + ".npy";
    write_npy((fs::path(o.save_io_dir) / file).string(), t);
    nlohmann::json e = {{"name", name},
                        {"dtype", dtype_name(t.dtype)},
                        {"shape", t.shape},
                        {"file", file},
                        {"npy_descr", npy_descr(t.dtype)}};
    if (t.dtype == DType::BF16)
      e["note"] = "bf16 stored as its raw 16-bit patterns (uint16): value = bits << 16 as f32";
    if (is_fp8(t.dtype))
      e["note"] = std::string(dtype_name(t.dtype)) +
                  " stored as its raw 8-bit patterns (uint8), as ml_dtypes' float8_" +
                  (t.dtype == DType::F8E4M3 ? "e4m3fn" : "e5m2") + " encodes it";
    return e;
  };
  m["inputs"] = nlohmann::json::array();
  m["outputs"] = nlohmann::json::array();
  for (const ir::Buffer* b : p.inputs()) m["inputs"].push_back(entry(b->name, inputs.at(b->name)));
  for (const ir::Buffer* b : p.outputs())
    m["outputs"].push_back(entry(b->name, outputs.at(b->name)));
  files::write_file_atomic((fs::path(o.save_io_dir) / "manifest.json").string(), m.dump(2) + "\n",
                           "--save-io");
}
}  // namespace

namespace {
// Instances with more input and output elements than this are verified on a sample of rows where
// the program allows it (the exact interpreter takes about 3 s for 2^23 elements of softmax).
constexpr int64_t kVerifyWholeUpTo = int64_t{1} << 26;

// Block iterations beyond which the exact interpreter is not asked to verify (it runs about 2e7
// a second: 2^33 is several minutes; attention at 16 heads and 4096 x 4096 would take hours).
constexpr int64_t kInterpretAtMost = int64_t{1} << 33;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t k = 0; k < shape.size(); ++k) out += (k ? ", " : "") + std::to_string(shape[k]);
  return out + "]";
}

// The rows at which the exact interpreter verifies an instance of `shape`: all of them (`size`
// empty), or, beyond kVerifyWholeUpTo input and output elements where the program computes every
// row from its own rows (RowSample.h), `rows` of them along `size`.
struct VerifiedRows {
  std::string size;
  int64_t rows = 0;
};
VerifiedRows verified_rows(const ir::LoopProgram& p, const SizeMap& shape, const ParamMap& params) {
  int64_t elements = 0;
  for (const ir::Buffer& b : p.buffers)
    if (b.role == ir::BufferRole::Input || b.role == ir::BufferRole::Output)
      elements += checked_numel(ir::eval_shape(b.shape, shape, params), "buffer '" + b.name + "'");
  VerifiedRows v;
  if (elements <= kVerifyWholeUpTo) return v;
  v.size = independent_size(p);
  if (v.size.empty()) return v;
  const int64_t extent = shape.at(v.size);
  v.rows = std::min(
      extent, std::clamp(kVerifyWholeUpTo / 2 / (elements / extent), int64_t{64}, int64_t{1024}));
  return v;
}

// The iterations of the blocks of `s` (each block's enclosing loop extents multiplied), at most
// kInterpretAtMost + 1; -1 when an extent has no value at `sizes`.
int64_t block_iterations(const ir::Stmt& s, const SizeMap& sizes, const ParamMap& params,
                         int64_t outer = 1) {
  if (!s) return 0;
  switch (s->kind) {
    case ir::StmtKind::Seq: {
      int64_t total = 0;
      for (const ir::Stmt& c : s->stmts) {
        const int64_t n = block_iterations(c, sizes, params, outer);
        if (n < 0) return -1;
        total = std::min(total + n, kInterpretAtMost + 1);
      }
      return total;
    }
    case ir::StmtKind::For: {
      int64_t extent = 0;
      try {
        extent = ir::eval_int(s->extent, sizes, params);
      } catch (const UserError&) {
        return -1;
      }
      if (extent <= 0) return 0;
      const int64_t inner =
          outer > (kInterpretAtMost + 1) / extent ? kInterpretAtMost + 1 : outer * extent;
      return block_iterations(s->body, sizes, params, inner);
    }
    case ir::StmtKind::Block:
      return outer;
    case ir::StmtKind::If: {
      const int64_t a = block_iterations(s->then_case, sizes, params, outer);
      const int64_t b = block_iterations(s->else_case, sizes, params, outer);
      return a < 0 || b < 0 ? -1 : std::max(a, b);
    }
    default:
      return block_iterations(s->body, sizes, params, outer);
  }
}
}  // namespace

ParamMap bind_params(const ir::LoopProgram& p, const ParamMap& overrides) {
  ParamMap params;
  for (const ir::Param& q : p.params) params[q.name] = q.value;
  for (const auto& [name, value] : overrides) {
    auto it = params.find(name);
    if (it == params.end())
      arg_error << "--param names '" << name << "', which is not a param of " << p.name;
    const ir::Param* decl = nullptr;
    for (const ir::Param& q : p.params)
      if (q.name == name) decl = &q;
    if (std::string why = ir::param_value_problem(decl->dtype, value); !why.empty())
      arg_error << "--param " << name << "=" << ir::param_value_text(value) << ": " << why
                << " (param '" << name << "' is " << dtype_name(decl->dtype) << ")";
    it->second = value;
  }
  return params;
}

RunReport run_program(const ir::LoopProgram& p, const RunOptions& o) {
  if (!o.reference_dir.empty() && o.inputs_dir.empty())
    arg_error << "--reference " << o.reference_dir
              << " needs --inputs: the reference must be computed from the same inputs";
  driver::Target::parse(o.target, o.arch);
  if (o.schedule != "auto" && o.schedule != "none")
    arg_error << "unknown --schedule '" << o.schedule << "'; use auto or none";
  if (!o.save_io_dir.empty()) check_save_io_dir(o);
  RunReport r;
  r.program = p.name;
  r.target = o.target;
  r.arch = "host";
  const ParamMap params = bind_params(p, o.params);
  std::map<std::string, Tensor> inputs;
  if (!o.inputs_dir.empty()) {
    SizeMap from_files;
    inputs = read_inputs(p, o.inputs_dir, from_files, o.shape, params);
    r.shape = bind_sizes(p, from_files);
  } else {
    r.shape = bind_sizes(p, o.shape);
    inputs = random_inputs(p, r.shape, o.seed, params);
  }
  const bool verify = o.verify || o.bench || !o.reference_dir.empty();
  const VerifiedRows verified = verified_rows(p, r.shape, params);
  if (verify && o.reference_dir.empty()) {
    SizeMap at = r.shape;
    if (!verified.size.empty()) at[verified.size] = verified.rows;
    const int64_t work = block_iterations(p.body, at, params);
    if (work > kInterpretAtMost) {
      std::string sizes;
      for (const auto& [d, v] : r.shape)
        sizes += (sizes.empty() ? "" : ",") + d + "=" + std::to_string(v);
      arg_error << (o.bench ? "--bench" : "--verify") << " at " << sizes
                << ": the exact interpreter would run more than " << kInterpretAtMost
                << " block iterations to verify " << p.name
                << " (several minutes at the least); verify against float64 outputs computed "
                   "elsewhere from the same inputs (run once with --save-io DIR, compute DIR's "
                   "outputs, then --inputs DIR --reference REFDIR; bench/generality_bench.py does "
                   "so with NumPy), or run smaller sizes";
    }
  }

  // The kernel runs the scheduled program; verification always uses the unscheduled one.
  driver::ScheduleOptions so;
  so.target = driver::Target::parse(o.target, o.arch);
  so.schedule = o.schedule;
  for (const std::string& d : o.dynamic)
    if (std::find(p.dims.begin(), p.dims.end(), d) == p.dims.end())
      arg_error << "--dynamic names '" << d << "', which is not a size of " << p.name;
  so.sizes = driver::schedule_sizes(r.shape, o.dynamic);
  so.dynamic = o.dynamic;
  so.params = params;
  so.chunk_tiles = o.chunk_tiles;
  so.row_tile = o.row_tile;
  so.reduce_tile = o.reduce_tile;
  so.whole_row_bytes = o.whole_row_bytes;
  so.validate = o.validate;
  so.require = o.require;
  driver::Scheduled sched = driver::schedule_program(p, so);
  r.schedule = sched.primitives;
  r.schedule_notes = sched.notes;
  r.warnings = sched.warnings;
  r.fusion = sched.fusion;
  if (sched.validation) r.validation_seconds = sched.validation->seconds;
  const ir::LoopProgram& scheduled = sched.program;
  driver::Built built = driver::build_kernel(sched, so.target, so.sizes);
  r.warnings.insert(r.warnings.end(), built.warnings.begin(), built.warnings.end());
  r.kernels = built.kernels;
  if (built.tile_validation) r.validation_seconds += built.tile_validation->seconds;
  std::shared_ptr<cpu::CpuKernel> kernel = built.cpu;
  std::shared_ptr<cuda::CudaKernel> gpu_kernel = built.gpu;
  r.form = built.form;
  r.from_cache = built.from_cache;
  r.compile_seconds = built.compile_seconds;
  if (gpu_kernel) r.arch = so.target.cuda_arch();
  std::map<std::string, Tensor> outputs;
  std::vector<Tensor*> args;
  for (const ir::Buffer& b : scheduled.buffers) {
    if (b.role == ir::BufferRole::Input) args.push_back(&inputs.at(b.name));
    if (b.role == ir::BufferRole::Output) {
      auto [it, _] = outputs.emplace(
          b.name, Tensor::for_output(b.dtype, ir::eval_shape(b.shape, r.shape, params),
                                     "output '" + b.name + "'"));
      // All ones: NaN in every float type, so that verification catches an element the kernel
      // leaves unwritten (a zero-filled output would hide one whose value is 0).
      std::fill(it->second.data.begin(), it->second.data.end(), uint8_t{0xff});
      args.push_back(&it->second);
    }
  }
  // One run; returns its time in milliseconds (device events on the GPU).
  auto launch = [&]() -> double {
    if (gpu_kernel) return gpu_kernel->run(args, r.shape, params);
    auto t0 = std::chrono::steady_clock::now();
    kernel->run(args, r.shape, params);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  launch();

  // A timing is only reported for a kernel verified in the same run: --bench implies --verify.
  if (verify) {
    // The fp64 reference: the exact interpreter, or arrays computed elsewhere from the same
    // inputs (--reference, for sizes the interpreter is too slow for).
    std::map<std::string, std::vector<double>> reference;
    std::map<std::string, Tensor> checked_outputs;  // the sampled rows of the outputs, if sampled
    if (o.reference_dir.empty()) {
      // An instance too large for the exact interpreter is checked on a sample of its rows where
      // the program computes every row from its own rows (RowSample.h).
      const std::string& size = verified.size;
      std::map<std::string, Tensor> sampled_inputs;
      SizeMap at = r.shape;
      if (!size.empty()) {
        std::vector<int64_t> rows = sample_rows(r.shape.at(size), verified.rows, o.seed);
        sampled_inputs = take_rows(p, size, inputs, rows);
        checked_outputs = take_rows(p, size, outputs, rows);
        at[size] = static_cast<int64_t>(rows.size());
        r.sampled_size = size;
        r.sampled_rows = static_cast<int64_t>(rows.size());
      }
      std::map<std::string, const Tensor*> in;
      for (auto& [name, t] : size.empty() ? inputs : sampled_inputs) in[name] = &t;
      ir::InterpResult ref = ir::interpret(p, ir::InterpMode::Exact, in, at, params);
      for (const ir::Buffer* b : p.outputs()) reference[b->name] = ref.outputs.at(b->name).values;
    } else {
      for (const ir::Buffer* b : p.outputs()) {
        std::string path = (std::filesystem::path(o.reference_dir) / (b->name + ".npy")).string();
        std::vector<int64_t> shape;
        reference[b->name] = read_npy_f64(path, &shape);
        if (shape != outputs.at(b->name).shape)
          arg_error << "--reference: " << path << " has shape " << shape_text(shape) << " but "
                    << b->name << " has shape " << shape_text(outputs.at(b->name).shape);
      }
    }
    bool ok = true;
    // Drawn inputs are finite (normal values within every float type's range): only inputs read
    // from files are scanned.
    const bool nonfinite = !o.inputs_dir.empty() && has_nonfinite(inputs);
    for (const ir::Buffer* b : p.outputs()) {
      const Tensor& out = r.sampled_rows ? checked_outputs.at(b->name) : outputs.at(b->name);
      OutputCheck c = compare_output(b->name, out, reference.at(b->name),
                                     tolerance_for(p, b->dtype), nonfinite);
      ok &= c.ok;
      r.max_rel_err = std::max(r.max_rel_err, c.max_rel_err);
      r.checks.push_back(c);
    }
    r.verified = ok;
  }
  if (!o.save_io_dir.empty()) save_io(p, o, r, inputs, outputs, params);
  if (o.bench && r.verified.value_or(false)) {
    using clock = std::chrono::steady_clock;
    for (int w = 0; w < 2; ++w) launch();
    std::vector<double> times;
    auto start = clock::now();
    while (static_cast<int>(times.size()) < o.bench_min_runs ||
           std::chrono::duration<double>(clock::now() - start).count() < o.bench_min_seconds) {
      times.push_back(launch());
      if (times.size() >= 1000) break;
    }
    std::sort(times.begin(), times.end());
    r.time_ms = times[times.size() / 2];
    r.bench_runs = static_cast<int>(times.size());
  }
  return r;
}

}  // namespace kintsugi::runtime
