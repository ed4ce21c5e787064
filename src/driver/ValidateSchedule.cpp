// \file ValidateSchedule.cpp
// Translation validation of a schedule (see ValidateSchedule.h).
#include "driver/ValidateSchedule.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <future>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "ir/Interpreter.h"
#include "ir/Visit.h"
#include "runtime/Runner.h"
#include "schedule/Analysis.h"
#include "support/Error.h"
#include "tile/Interpreter.h"
#include "tile/Translate.h"

namespace kintsugi::driver {

namespace {

// The largest scaled size of the dims that are neither the fused axis nor the rows.
constexpr int64_t kSmallDim = 4;
// A partial tile at the end of the axis and of the rows: odd, and not a divisor of any tile.
constexpr int64_t kTail = 3;
// The rows of the instance that every input set runs on (one partial row tile).
constexpr int64_t kFewRows = 5;
// The longest dim of a table looked up at a computed position that validation keeps whole.
constexpr int64_t kTableDim = 1024;
// The offset of the "offset rows" input set: |mean| / std of 1e4 (the layernorm requirement).
constexpr double kOffset = 1e4;
// The scale of the "large magnitudes" input set.
constexpr double kLarge = 4.0;
// Exact against exact: the same real numbers summed in another order.
constexpr double kExactTolerance = 1e-6;
// Rounded against rounded: how many times the original's error a schedule's may be (see
// check_set).
constexpr double kRoundingOrderSlack = 4.0;

// Whether an extent is a dim itself (not a param, whose value the instance keeps).
bool is_dim(const ir::Expr& e) {
  return e->op == ir::Op::Var && e->var_kind == ir::VarKind::Dim;
}

// The dim of the fused axis and of its rows: as the options name them (the schedule's first split),
// else guessed: the extent of an axis that two or more reductions reduce over (a chain the
// auto-scheduler fuses), and the innermost row dim of those reductions (the one with the fewest
// spatial variables: its rows are the chain's rows).
void fused_dims(const ir::LoopProgram& p, const ValidationOptions& o, std::set<std::string>* axis,
                std::set<std::string>* rows) {
  if (!o.axis_dim.empty()) {
    axis->insert(o.axis_dim);
    if (!o.row_dim.empty() && o.row_dim != o.axis_dim) rows->insert(o.row_dim);
    return;
  }
  std::map<std::string, std::vector<const ir::StmtNode*>> reducers;  // axis dim -> blocks
  for (const ir::StmtNode* b : schedule::blocks_under(p.body))
    for (const ir::IterVar& iv : b->iters)
      if (iv.kind != ir::IterKind::Spatial && is_dim(iv.extent))
        reducers[iv.extent->name].push_back(b);
  const ir::StmtNode* narrowest = nullptr;
  auto spatial = [](const ir::StmtNode* b) {
    return std::count_if(b->iters.begin(), b->iters.end(),
                         [](const ir::IterVar& iv) { return iv.kind == ir::IterKind::Spatial; });
  };
  for (const auto& [dim, blocks] : reducers) {
    if (blocks.size() < 2) continue;
    axis->insert(dim);
    for (const ir::StmtNode* b : blocks)
      if (!narrowest || spatial(b) < spatial(narrowest)) narrowest = b;
  }
  if (!narrowest) return;
  for (const ir::IterVar& iv : narrowest->iters)
    if (iv.kind == ir::IterKind::Spatial && is_dim(iv.extent) && !axis->count(iv.extent->name)) {
      rows->clear();
      rows->insert(iv.extent->name);
    }
}

struct InputSet {
  const char* name;
  bool typed;      // the scheduled program also runs rounded to its types
  bool nonfinite;  // the relaxed NaN comparison applies
  std::function<void(std::map<std::string, runtime::Tensor>&, std::mt19937_64&)> adjust;
};

// Applies `f` to every element of every float input.
void each_float(std::map<std::string, runtime::Tensor>& in,
                const std::function<double(double, int64_t, const runtime::Tensor&)>& f) {
  for (auto& [name, t] : in) {
    if (!is_float(t.dtype)) continue;
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, f(t.get(i), i, t));
  }
}

std::vector<InputSet> input_sets() {
  return {
      {"random", true, false, [](auto&, auto&) {}},
      {"offset rows", true, false,
       [](auto& in, auto&) {
         // Every leading row (the first index) shifted by a different large amount: kOffset
         // standard deviations, or as many as the dtype still resolves a deviation of one at.
         each_float(in, [](double v, int64_t i, const runtime::Tensor& t) {
           int64_t row = t.shape.empty() ? 0 : i / std::max<int64_t>(1, t.numel() / t.shape[0]);
           double offset = std::min(kOffset, 0.25 / dtype_epsilon(t.dtype));
           return v + offset * static_cast<double>(1 + row % 3) * (row % 2 ? -1 : 1);
         });
       }},
      {"large magnitudes", false, false,
       [](auto& in, auto&) {
         // Random values scaled up: exponentials of products of inputs span the range of the
         // arithmetic, so that a partial that underflows to 0 meets a repair factor that
         // overflows (a chunk or tile whose local values are far from the whole row's).
         each_float(in, [](double v, int64_t, const runtime::Tensor&) { return kLarge * v; });
       }},
      {"ties", false, false,
       [](auto& in, auto&) {
         each_float(in, [](double v, int64_t, const runtime::Tensor&) {
           return std::clamp(std::round(v), -2.0, 2.0);
         });
       }},
      {"-inf and NaN", false, true,
       [](auto& in, std::mt19937_64& rng) {
         std::uniform_real_distribution<double> u(0.0, 1.0);
         each_float(in, [&](double v, int64_t, const runtime::Tensor&) {
           double r = u(rng);
           if (r < 0.05) return -std::numeric_limits<double>::infinity();
           if (r < 0.06) return std::numeric_limits<double>::quiet_NaN();
           return v;
         });
       }},
  };
}

}  // namespace

namespace {

// How far an output is from its reference: the largest error (`at` the element) and the largest
// finite |reference|; `nonfinite` names the first place where NaN or an infinity differs.
struct Distance {
  std::string nonfinite;
  double worst = 0.0, scale = 0.0;
  size_t at = 0;
  // As first_disagreement compares it: relative to the scale, absolute for integer outputs.
  double error(DType dtype) const {
    if (!nonfinite.empty()) return std::numeric_limits<double>::infinity();
    if (is_int(dtype)) return worst;
    return scale == 0.0 ? (worst == 0.0 ? 0.0 : std::numeric_limits<double>::infinity())
                        : worst / scale;
  }
};

Distance distance(const ir::InterpBuffer& ref, const ir::InterpBuffer& got, bool relaxed) {
  Distance d;
  for (double r : ref.values)
    if (std::isfinite(r)) d.scale = std::max(d.scale, std::fabs(r));
  for (size_t i = 0; i < ref.values.size(); ++i) {
    double r = ref.values[i], g = got.values[i];
    if (std::isnan(r) && relaxed) continue;
    if (!std::isfinite(r) || !std::isfinite(g)) {
      bool same = (std::isnan(r) && std::isnan(g)) ||
                  (std::isinf(r) && std::isinf(g) && (r > 0) == (g > 0));
      if (!same && d.nonfinite.empty()) {
        std::ostringstream m;
        m << "element " << i << " is " << g << " where the reference is " << r;
        d.nonfinite = m.str();
      }
      continue;
    }
    double err = std::fabs(g - r);
    if (err > d.worst) d.worst = err, d.at = i;
  }
  return d;
}

}  // namespace

std::string first_disagreement(const ir::InterpBuffer& ref, const ir::InterpBuffer& got,
                               DType dtype, double tolerance, bool relaxed) {
  if (ref.values.size() != got.values.size()) return "the sizes differ";
  const Distance d = distance(ref, got, relaxed);
  if (!d.nonfinite.empty()) return d.nonfinite;
  double limit = is_int(dtype) ? 1.0 : tolerance * std::max(d.scale, 1e-300);
  if (d.worst <= limit || (!is_int(dtype) && d.scale == 0.0 && d.worst == 0.0)) return "";
  std::ostringstream m;
  m << "element " << d.at << " is " << got.values[d.at] << " where the reference is "
    << ref.values[d.at] << " (" << (is_int(dtype) ? "abs" : "rel") << " err "
    << (is_int(dtype) ? d.worst : d.worst / d.scale) << ", tolerance "
    << (is_int(dtype) ? 1.0 : tolerance) << ")";
  return m.str();
}

namespace {

std::string sizes_text(const runtime::SizeMap& s) {
  std::string out;
  for (const auto& [k, v] : s) out += (out.empty() ? "" : ", ") + k + "=" + std::to_string(v);
  return out.empty() ? "no sizes" : out;
}

}  // namespace

namespace {

// A dim divided in a shape or an extent (N / G, a scale per group of G columns) stays a multiple
// of the divisor where the given size is one: the program reads in bounds only there. Rounded up
// (a tail that is a whole group), down where that would pass the given size.
void keep_divisible(const ir::LoopProgram& p, const runtime::ParamMap& given_params,
                    runtime::SizeMap& sizes) {
  const runtime::ParamMap params = p.param_values(given_params);
  const runtime::SizeMap given = sizes;
  auto divided = [&](const ir::Expr& e) {
    ir::visit(e, [&](const ir::Expr& x) {
      if (x->op != ir::Op::Div || x->args[0]->op != ir::Op::Var || !sizes.count(x->args[0]->name))
        return true;
      int64_t divisor = 0;
      try {
        divisor = ir::eval_int(x->args[1], given, params);
      } catch (const UserError&) {
        return true;
      }
      int64_t& n = sizes[x->args[0]->name];
      if (divisor <= 1 || n % divisor == 0) return true;
      const int64_t up = (n / divisor + 1) * divisor, down = n / divisor * divisor;
      n = down > 0 && up > given.at(x->args[0]->name) ? down : up;
      return true;
    });
  };
  for (const ir::Buffer& b : p.buffers)
    for (const ir::Expr& e : b.shape) divided(e);
  for (const ir::StmtNode* b : schedule::blocks_under(p.body))
    for (const ir::IterVar& iv : b->iters) divided(iv.extent);
}

// ValidationReport::params: every param of `original` at its value for the run, and the shrunk
// value of each integer param that two or more reductions reduce over (a fused chain's axis) and
// that `scheduled` walks in tiles (no loop runs over it whole, as over a group of G columns held
// as one tile at the param's value): at most an axis that ends in a partial tile, a multiple of
// the power of two (up to 16) that divides its value (a start it offsets stays aligned).
runtime::ParamMap instance_params(const ir::LoopProgram& original, const ir::LoopProgram& scheduled,
                                  const ValidationOptions& o) {
  runtime::ParamMap out = original.param_values(o.params);
  std::map<std::string, int> reducers;
  for (const ir::StmtNode* b : schedule::blocks_under(original.body))
    for (const ir::IterVar& iv : b->iters)
      if (iv.kind != ir::IterKind::Spatial && iv.extent->op == ir::Op::Var &&
          iv.extent->var_kind == ir::VarKind::Param)
        ++reducers[iv.extent->name];
  const int64_t axis = 2 * o.axis_tile * std::max<int64_t>(1, o.chunk_tiles) + o.axis_tile / 2;
  for (const auto& [name, count] : reducers) {
    bool whole = false, used = false;
    ir::visit(scheduled.body, [&](const ir::Stmt& s) {
      if (s->kind == ir::StmtKind::For) {
        whole = whole || (s->extent->op == ir::Op::Var && s->extent->name == name);
        used = used || ir::uses_var(s->extent, name);
      }
      return true;
    });
    const int64_t value = static_cast<int64_t>(std::trunc(out.at(name)));
    if (count < 2 || whole || !used || value <= axis) continue;
    const int64_t align = std::min<int64_t>(16, value & -value);
    out[name] = static_cast<double>((axis + kTail + align - 1) / align * align);
  }
  return out;
}

// The least length of each dim that a shrunk param's axis reads along (a cache of TMAX positions
// read at j < L) where it is at least the param at the run: the shrunk param.
runtime::SizeMap read_along_floors(const ir::LoopProgram& original, const ValidationOptions& o,
                                   const runtime::ParamMap& shrunk) {
  const runtime::ParamMap run = original.param_values(o.params);
  runtime::SizeMap floors;
  for (const ir::Param& q : original.params) {
    const double given = run.at(q.name);
    if (shrunk.at(q.name) == given) continue;
    std::set<std::string> read_along;
    for (const ir::StmtNode* b : schedule::blocks_under(original.body))
      for (const ir::IterVar& iv : b->iters) {
        if (iv.extent->op != ir::Op::Var || iv.extent->name != q.name) continue;
        ir::visit(b->body->value, [&](const ir::Expr& e) {
          const ir::Buffer* buf = e->op == ir::Op::Load ? original.find_buffer(e->name) : nullptr;
          for (size_t k = 0; buf && k < e->args.size(); ++k)
            if (ir::uses_var(e->args[k], iv.name) && is_dim(buf->shape[k]))
              read_along.insert(buf->shape[k]->name);
          return true;
        });
      }
    for (const std::string& d : read_along)
      if (o.sizes.count(d) && static_cast<double>(o.sizes.at(d)) >= given)
        floors[d] = std::max<int64_t>(floors[d], static_cast<int64_t>(shrunk.at(q.name)));
  }
  return floors;
}

// A table's dims looked up at a position computed through floats or by another block (T5's
// log-spaced buckets, trunc(log(|j - i| / 8) / log(16) * 8)) keep their size at the run: the
// position's range is the formula's, not the sizes'. Shrunk, the table was read out of bounds at
// every scale but the run's, where the instance (the head dimension unshrunk too) took a minute
// to interpret. (A position read from an input is drawn in bounds.) Not the fused axis or its
// rows, which keep their own sizes, nor a dim longer than kTableDim: a sequence, not a table,
// where the retries cost less than the whole dim.
void add_lookup_floors(const ir::LoopProgram& original, const ValidationOptions& o,
                       runtime::SizeMap& floors) {
  std::set<std::string> axis, rows;
  fused_dims(original, o, &axis, &rows);
  auto computed = [&](const ir::Expr& index) {
    bool found = false;
    ir::visit(index, [&](const ir::Expr& y) {
      const ir::Buffer* from = y->op == ir::Op::Load ? original.find_buffer(y->name) : nullptr;
      found = found || is_float(y->type) || (from && from->role == ir::BufferRole::Intermediate);
      return !found;
    });
    return found;
  };
  for (const ir::StmtNode* b : schedule::blocks_under(original.body))
    ir::visit_exprs(b->body, [&](const ir::Expr& e) {
      ir::visit(e, [&](const ir::Expr& x) {
        const ir::Buffer* buf = x->op == ir::Op::Load ? original.find_buffer(x->name) : nullptr;
        for (size_t k = 0; buf && k < x->args.size(); ++k) {
          const std::string d = is_dim(buf->shape[k]) ? buf->shape[k]->name : std::string();
          if (o.sizes.count(d) && !axis.count(d) && !rows.count(d) && o.sizes.at(d) <= kTableDim &&
              computed(x->args[k]))
            floors[d] = std::max(floors[d], o.sizes.at(d));
        }
        return true;
      });
    });
}

// Raises the dims of `sizes` to their floors.
void raise_to(const runtime::SizeMap& floors, runtime::SizeMap& sizes) {
  for (const auto& [d, n] : floors)
    if (sizes.count(d)) sizes[d] = std::max(sizes[d], n);
}

}  // namespace

runtime::SizeMap shrink_sizes(const ir::LoopProgram& original, const ValidationOptions& o,
                              int64_t scale_exponent, int64_t rows_cap, bool keep_order,
                              AxisEnd end) {
  std::set<std::string> axis, rows;
  fused_dims(original, o, &axis, &rows);
  auto given = [&](const std::string& d) { return o.sizes.count(d) ? o.sizes.at(d) : 1; };
  runtime::SizeMap out;
  int64_t axis_size = 2 * o.axis_tile * std::max<int64_t>(1, o.chunk_tiles) +
                      (end == AxisEnd::PartialTile ? o.axis_tile / 2 + kTail : 1);
  for (const std::string& d : original.dims)
    out[d] = axis.count(d) ? std::min(given(d), axis_size)
                           : std::max<int64_t>(1, given(d) >> scale_exponent);
  for (const std::string& r : rows) {
    out[r] = std::min(given(r), rows_cap);
    if (!keep_order || axis.size() != 1) continue;
    // Rows as many as the axis stay as many (a causal diagonal), more rows than the axis stay
    // more (rows that a bottom-right aligned mask leaves without a key), and fewer stay fewer,
    // the axis one longer than them where they reach it (a table indexed by i + T - S, rotary
    // attention's, is read in bounds only where S <= T).
    const std::string& a = *axis.begin();
    if (given(r) == given(a))
      out[r] = out[a];
    else if (given(r) > given(a))
      out[r] = out[a] + std::min(given(r) - given(a), rows_cap);
    else if (out[r] >= out[a])
      out[a] = std::min(given(a), out[r] + 1);
  }
  keep_divisible(original, o.params, out);
  return out;
}

namespace {

// One input set at one instance: "" when the outputs agree; `runs` false when the original itself
// cannot run there (the instance is not valid for the program).
struct SetResult {
  bool runs = true;
  std::string failure;
};

// What is checked against the reference: run in a mode on the instance's inputs.
using Candidate = std::function<ir::InterpResult(
    ir::InterpMode, const std::map<std::string, const runtime::Tensor*>&, const runtime::SizeMap&,
    const runtime::ParamMap&)>;

SetResult check_set(const ir::LoopProgram& original, const Candidate& candidate,
                    const std::string& candidate_name, const runtime::SizeMap& sizes,
                    const runtime::ParamMap& params, const InputSet& set, bool exact_only,
                    uint64_t seed) {
  const bool typed = set.typed && !exact_only;
  SetResult out;
  std::map<std::string, runtime::Tensor> inputs =
      runtime::random_inputs(original, sizes, seed, params);
  std::mt19937_64 rng(seed);
  set.adjust(inputs, rng);
  std::map<std::string, const runtime::Tensor*> in;
  for (auto& [name, t] : inputs) in[name] = &t;
  auto run = [&](const ir::LoopProgram& p, ir::InterpMode mode) {
    return ir::interpret(p, mode, in, sizes, params);
  };
  ir::InterpResult ref, ref_typed, got, got_typed;
  try {
    ref = run(original, ir::InterpMode::Exact);
    if (typed) ref_typed = run(original, ir::InterpMode::Typed);
  } catch (const UserError& e) {
    out.runs = false;
    out.failure = "the reference cannot run at " + sizes_text(sizes) + ": " + e.what();
    return out;
  }
  std::string where =
      "at " + sizes_text(sizes) + ", " + set.name + " inputs (seed " + std::to_string(seed) + "), ";
  try {
    got = candidate(ir::InterpMode::Exact, in, sizes, params);
    if (typed) got_typed = candidate(ir::InterpMode::Typed, in, sizes, params);
  } catch (const UserError& e) {
    out.failure = where + "the " + candidate_name + " fails: " + e.what();
    return out;
  }
  for (const ir::Buffer* b : original.outputs()) {
    const ir::InterpBuffer& r = ref.outputs.at(b->name);
    std::string d =
        first_disagreement(r, got.outputs.at(b->name), b->dtype, kExactTolerance, set.nonfinite);
    if (!d.empty()) {
      out.failure = where + "exact arithmetic, output " + b->name + ": " + d;
      return out;
    }
    if (!typed) continue;
    // In the program's own precision, where the original is accurate the schedule must be, or
    // not much less so: rounded in another order, an output that cancels (a loss of 7.9 from
    // terms of 10^4 with a 2049-element sum) is off by as much as the original is, a few times
    // over, on either side of the tolerance.
    const double tol = runtime::tolerance_for(original, b->dtype);
    const ir::InterpBuffer& original_typed = ref_typed.outputs.at(b->name);
    if (!first_disagreement(r, original_typed, b->dtype, tol, set.nonfinite).empty()) continue;
    const double original_error = distance(r, original_typed, set.nonfinite).error(b->dtype);
    d = first_disagreement(r, got_typed.outputs.at(b->name), b->dtype,
                           std::max(tol, kRoundingOrderSlack * original_error), set.nonfinite);
    if (!d.empty()) {
      out.failure = where + "rounded to the program's types, output " + b->name + ": " + d;
      return out;
    }
  }
  return out;
}

}  // namespace

ValidationReport validate_schedule(const ir::LoopProgram& original,
                                   const ir::LoopProgram& scheduled, const ValidationOptions& o) {
  auto t0 = std::chrono::steady_clock::now();
  ValidationReport report;
  // The scale of the other dims: the smallest power of two that brings them to kSmallDim; a
  // shrunk instance the original cannot run (an index out of bounds once sizes lose their ratio,
  // a table of buckets looked up by position that needs all of them) is retried less shrunk, down
  // to those dims unshrunk.
  std::set<std::string> axis, rows;
  fused_dims(original, o, &axis, &rows);
  int64_t largest = 1;
  for (const auto& [d, v] : o.sizes)
    if (!axis.count(d) && !rows.count(d)) largest = std::max(largest, v);
  int64_t exponent = 0;
  while ((largest >> exponent) > kSmallDim) ++exponent;
  const std::vector<InputSet> sets = input_sets();
  const runtime::ParamMap params = instance_params(original, scheduled, o);
  runtime::SizeMap floors = read_along_floors(original, o, params);
  add_lookup_floors(original, o, floors);
  for (; exponent >= 0; --exponent) {
    // Two instances: rows over two row tiles (the second partial) with random inputs, and a few
    // rows (one partial row tile) with every input set; both with the whole shrunk axis.
    // The axis ends in a partial tile in the first, in a chunk (or tile) of one element in the
    // second: a chunk whose local values (a sum extrapolated to the whole axis from one element)
    // are far from the global ones.
    runtime::SizeMap tiles =
        shrink_sizes(original, o, exponent, o.row_tile + kTail, true, AxisEnd::PartialTile);
    runtime::SizeMap few =
        shrink_sizes(original, o, exponent, kFewRows, false, AxisEnd::OneElement);
    raise_to(floors, tiles);
    raise_to(floors, few);
    // (The rounded run of the two row tiles is left to the few rows: the same arithmetic.)
    struct Job {
      const runtime::SizeMap* sizes;
      size_t set;
      bool exact_only;
    };
    std::vector<Job> jobs = {{&tiles, 0, few != tiles}};
    for (size_t k = 0; k < sets.size(); ++k)
      if (few != tiles || k > 0) jobs.push_back({&few, k, false});
    // The jobs are independent: one thread each.
    std::vector<std::future<SetResult>> runs;
    Candidate run_scheduled = [&](ir::InterpMode mode, const auto& in, const auto& sizes,
                                  const auto& params) {
      return ir::interpret(scheduled, mode, in, sizes, params);
    };
    for (const Job& j : jobs)
      runs.push_back(std::async(std::launch::async, check_set, std::cref(original),
                                std::cref(run_scheduled), std::string("scheduled program"),
                                std::cref(*j.sizes), std::cref(params), std::cref(sets[j.set]),
                                j.exact_only, o.seed + j.set));
    std::vector<SetResult> results;
    for (auto& r : runs) results.push_back(r.get());
    bool valid_instance =
        std::all_of(results.begin(), results.end(), [](const SetResult& r) { return r.runs; });
    if (!valid_instance) {
      for (const SetResult& r : results)
        if (!r.runs) report.failure = r.failure;
      continue;
    }
    report.ran = true;
    report.shrunk = tiles;
    report.few_rows = few;
    report.row_tiles =
        shrink_sizes(original, o, exponent, o.row_tile + kTail, true, AxisEnd::OneElement);
    raise_to(floors, report.row_tiles);
    report.params = params;
    for (const SetResult& r : results)
      if (!r.failure.empty() && report.ok) {
        report.ok = false;
        report.failure = r.failure;
      }
    if (report.ok) report.failure.clear();
    break;
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

ValidationReport validate_tiles(
    const ir::LoopProgram& scheduled,
    const std::function<tile::TileProgram(const runtime::SizeMap&)>& tiles_at,
    const ValidationReport& schedule_report, const runtime::ParamMap& params, uint64_t seed) {
  auto t0 = std::chrono::steady_clock::now();
  ValidationReport report;
  const runtime::SizeMap* two_tiles = &schedule_report.row_tiles;
  const runtime::SizeMap* few = &schedule_report.few_rows;
  std::map<const runtime::SizeMap*, tile::TileProgram> tiles;
  try {
    for (const runtime::SizeMap* sizes : {two_tiles, few}) tiles[sizes] = tiles_at(*sizes);
  } catch (const tile::NotTileForm& e) {
    report.failure =
        std::string("the program is not in tile form at the validation sizes: ") + e.what();
    return report;
  }
  Candidate run_tiles = [&](ir::InterpMode mode, const auto& in, const auto& sizes,
                            const auto& ps) {
    const runtime::SizeMap* at = sizes == *two_tiles ? two_tiles : few;
    return tile::interpret(tiles.at(at), mode, in, sizes, ps);
  };
  // What translation and the tile passes can break is structure (regions, masks, tails, grid
  // indices, which values are rounded), not the repairs' numerics, which the schedule's
  // validation covered: two row tiles with random values in exact arithmetic, and a few rows
  // with random values (also rounded to the program's types), ties, and -inf and NaN.
  const std::vector<InputSet> sets = input_sets();
  struct Job {
    const runtime::SizeMap* sizes;
    const char* set;
    bool exact_only;
  };
  const runtime::ParamMap& instance =
      schedule_report.params.empty() ? params : schedule_report.params;
  const std::vector<Job> jobs = {{two_tiles, "random", true},
                                 {few, "random", false},
                                 {few, "ties", false},
                                 {few, "-inf and NaN", false}};
  std::vector<std::future<SetResult>> runs;
  for (const Job& j : jobs) {
    size_t k = 0;
    while (std::string(sets[k].name) != j.set) ++k;
    runs.push_back(std::async(std::launch::async, check_set, std::cref(scheduled),
                              std::cref(run_tiles), std::string("tile program"),
                              std::cref(*j.sizes), std::cref(instance), std::cref(sets[k]),
                              j.exact_only, seed + k));
  }
  report.ran = true;
  report.params = instance;
  report.shrunk = *two_tiles;
  report.few_rows = *few;
  report.row_tiles = *two_tiles;
  for (auto& r : runs) {
    SetResult result = r.get();
    if (!result.runs && report.ran && report.ok) {
      report.ran = false;
      report.failure = result.failure;
    } else if (!result.failure.empty() && report.ok && report.ran) {
      report.ok = false;
      report.failure = result.failure;
    }
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace kintsugi::driver
