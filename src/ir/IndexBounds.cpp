// \file IndexBounds.cpp
// Interval bounds of every integer operation of a loop program (see IndexBounds.h).
#include "ir/IndexBounds.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "ir/Printer.h"

namespace kintsugi::ir {

namespace {

using I128 = __int128;

struct Range {
  int64_t lo = 0, hi = 0;
};

constexpr Range kFull{INT64_MIN, INT64_MAX};

class Bounds {
 public:
  Bounds(const LoopProgram& p, const runtime::SizeMap& sizes, const runtime::ParamMap& params,
         const std::string& kernel)
      : kernel_(kernel) {
    for (const auto& [name, v] : sizes) globals_[name] = {v, v};
    for (const Param& q : p.params) {
      if (!is_int(q.dtype)) continue;
      auto it = params.find(q.name);
      double v = it != params.end() ? it->second : q.value;
      // Param values are range-checked before any launch; clamp defensively all the same.
      int64_t x = static_cast<int64_t>(round_to_dtype(v, q.dtype));
      globals_[q.name] = {x, x};
    }
    scope_ = globals_;
    index_buffers(p);
  }
  // For divisions_fit_int32: each size anywhere in [value, value + overrun], each integer param
  // anywhere in its type's range.
  Bounds(const LoopProgram& p, const runtime::SizeMap& sizes, int64_t overrun,
         const std::string& kernel)
      : kernel_(kernel) {
    for (const auto& [name, v] : sizes) globals_[name] = {v, v + overrun};
    for (const Param& q : p.params)
      if (q.dtype == DType::I8 || q.dtype == DType::I32)
        globals_[q.name] = q.dtype == DType::I8 ? Range{-128, 127} : Range{INT32_MIN, INT32_MAX};
    scope_ = globals_;
    index_buffers(p);
  }

  // Whether every integer division or modulo by a value other than a literal seen so far had
  // operands that a 32-bit division takes: the dividend in (INT32_MIN, INT32_MAX], the divisor
  // in [INT32_MIN, INT32_MAX].
  bool divisions_fit_int32() const { return divisions_fit_int32_; }

  void stmt(const Stmt& s) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::Seq:
        for (const Stmt& c : s->stmts) stmt(c);
        return;
      case StmtKind::For: {
        Range lo = value(s->min, "the start of loop " + s->var);
        Range ext = value(s->extent, "the extent of loop " + s->var);
        if (ext.hi <= 0) return;  // never runs
        I128 last = static_cast<I128>(lo.hi) + ext.hi - 1;
        if (last > INT64_MAX) overflow(s->extent, "the end of loop " + s->var);
        auto saved = scope_;
        scope_[s->var] = {lo.lo, static_cast<int64_t>(last)};
        stmt(s->body);
        scope_ = saved;
        return;
      }
      case StmtKind::Block: {
        std::map<std::string, Range> inner = globals_;
        for (const IterVar& iv : s->iters) {
          Range b = value(iv.binding, "the binding of " + iv.name + " in block " + s->name);
          Range ext = value(iv.extent, "the extent of " + iv.name + " in block " + s->name);
          // The block runs for values of its domain [0, extent) only.
          Range r{std::max<int64_t>(b.lo, 0), std::min<int64_t>(b.hi, ext.hi - 1)};
          if (r.lo > r.hi) return;  // never runs
          inner[iv.name] = r;
        }
        if (s->predicate) value(s->predicate, "the predicate of block " + s->name);
        auto saved = scope_;
        scope_ = inner;
        bound_accumulator(*s);
        stmt(s->init);
        stmt(s->body);
        const Stmt& st = s->body;
        if (!s->init && st && st->kind == StmtKind::Store && is_int(st->value->type) &&
            writers_[st->buffer].size() == 1) {
          // (A value beyond the buffer's type wraps when it is stored.)
          const Range v = value(st->value, "the value stored to " + st->buffer),
                      t = type_range(stored_as_.at(st->buffer));
          held_[st->buffer] = v.lo >= t.lo && v.hi <= t.hi ? v : t;
        }
        scope_ = saved;
        return;
      }
      case StmtKind::Store:
        for (size_t k = 0; k < s->indices.size(); ++k)
          value(s->indices[k], "index " + std::to_string(k) + " of the store to " + s->buffer);
        value(s->value, "the value stored to " + s->buffer);
        return;
      case StmtKind::If:
        value(s->cond, "a condition");
        stmt(s->then_case);
        stmt(s->else_case);
        return;
      case StmtKind::Allocate:
        stmt(s->body);
        return;
    }
  }

 private:
  std::string kernel_;
  bool divisions_fit_int32_ = true;
  std::map<std::string, Range> globals_, scope_;
  std::string where_;
  std::map<std::string, std::set<std::string>> writers_;  // buffer -> the blocks storing to it
  // The values an integer buffer holds: accumulators (bound_accumulator), and maps that one
  // block writes, by the value it stores (loads of other integer buffers are typed as indices,
  // unbounded: an accumulator may live in a wider register than its buffer).
  std::map<std::string, Range> held_;
  std::map<std::string, DType> stored_as_;  // buffer -> its element type

  void index_buffers(const LoopProgram& p) {
    for (const Buffer& b : p.buffers) stored_as_[b.name] = b.dtype;
    count_writers(p.body, "");
  }
  void count_writers(const Stmt& s, const std::string& block) {
    if (!s) return;
    if (s->kind == StmtKind::Store) writers_[s->buffer].insert(block);
    const std::string in = s->kind == StmtKind::Block ? s->name : block;
    for (const Stmt& c : s->stmts) count_writers(c, in);
    for (const Stmt& c : {s->body, s->init, s->then_case, s->else_case}) count_writers(c, in);
  }

  // A reduction into an integer buffer that no other block writes (a count: the sum of a select
  // of 1 and 0): its accumulator starts in the range I of its initial value and takes K steps of
  // a term in T, K the product of the reduction extents, so it lies in I + K [min(T), max(T)]
  // (each bound widened to include 0) for a sum, and in the hull of I and T for a maximum or a
  // minimum; where every one of at least one step runs, a maximum is at least the largest of
  // the lowest start and the lowest term (the identity as a start does not widen it). A sum that
  // carries a select of itself and literals lies in (I joined with the literals) + K [min(T),
  // max(T)]: by induction, each step's carry is the previous value or a literal.
  // Loads of the buffer read that range (kFull otherwise: an accumulator read before
  // it is bounded, a term that is not, an extent beyond 64 bits).
  void bound_accumulator(const StmtNode& b) {
    const Stmt& init = b.init;
    const Stmt& body = b.body;
    if (!init || !body || init->kind != StmtKind::Store || body->kind != StmtKind::Store ||
        init->buffer != body->buffer || !is_int(body->value->type) ||
        writers_[body->buffer].size() != 1)
      return;
    const Expr& v = body->value;
    if (v->op != Op::Add && v->op != Op::Max && v->op != Op::Min) return;
    // The element it stores, read back (an accumulator, not a recurrence across elements).
    auto self = [&](const Expr& x) {
      if (x->op != Op::Load || x->name != body->buffer || x->args.size() != body->indices.size())
        return false;
      for (size_t k = 0; k < x->args.size(); ++k)
        if (!equal(x->args[k], body->indices[k])) return false;
      return true;
    };
    // A sum's carry may also be a select of carries and integer literals (a split-K combine's
    // repair of a count of maxima resets it to 0 where the running maximum moves): the carry is
    // then the element read back or one of the literals, whose range joins the start's.
    std::optional<Range> literals;
    std::function<bool(const Expr&)> carry = [&](const Expr& x) {
      if (self(x)) return true;
      if (x->op == Op::IntImm) {
        literals = Range{std::min(x->int_value, literals ? literals->lo : x->int_value),
                         std::max(x->int_value, literals ? literals->hi : x->int_value)};
        return true;
      }
      return x->op == Op::Select && !uses_load_of(x->args[0], body->buffer) && carry(x->args[1]) &&
             carry(x->args[2]);
    };
    auto carried = [&](const Expr& x) { return v->op == Op::Add ? carry(x) : self(x); };
    const Expr* term =
        carried(v->args[0]) ? &v->args[1] : (carried(v->args[1]) ? &v->args[0] : nullptr);
    if (!term || uses_load_of(*term, body->buffer)) return;
    I128 steps = 1;
    bool every_step_runs = !b.predicate;  // and at least one
    for (const IterVar& iv : b.iters) {
      if (iv.kind == IterKind::Spatial) continue;
      const std::optional<Range> ext = range(iv.extent);
      if (!ext || ext->hi <= 0) return;
      every_step_runs = every_step_runs && ext->lo >= 1;
      steps *= ext->hi;
      if (steps > INT64_MAX) return;
    }
    where_ = "the value stored to " + body->buffer;
    const std::optional<Range> start = range(init->value), t = range(*term);
    if (!start || !t) return;
    I128 lo = std::min(start->lo, literals ? literals->lo : start->lo),
         hi = std::max(start->hi, literals ? literals->hi : start->hi);
    if (v->op == Op::Add) {
      lo += steps * std::min<int64_t>(t->lo, 0);
      hi += steps * std::max<int64_t>(t->hi, 0);
    } else if (every_step_runs) {  // max(start, t1, ..., tk) for k >= 1, or min
      const bool max = v->op == Op::Max;
      lo = max ? std::max(start->lo, t->lo) : std::min(start->lo, t->lo);
      hi = max ? std::max(start->hi, t->hi) : std::min(start->hi, t->hi);
    } else {
      lo = std::min<I128>(lo, t->lo);
      hi = std::max<I128>(hi, t->hi);
    }
    if (lo < INT64_MIN || hi > INT64_MAX) return;
    held_[body->buffer] = {static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
  }
  static bool uses_load_of(const Expr& e, const std::string& buffer) {
    if (e->op == Op::Load && e->name == buffer) return true;
    for (const Expr& a : e->args)
      if (uses_load_of(a, buffer)) return true;
    return false;
  }

  Range value(const Expr& e, const std::string& where) {
    if (!e) return {0, 0};
    where_ = where;
    return range(e).value_or(kFull);
  }

  [[noreturn]] void overflow(const Expr& e, const std::string& where) {
    arg_error << "kernel " << kernel_ << ": the integer expression `" << to_string(e) << "` in "
              << where << " may leave the 64-bit range at these sizes (the compiled kernel "
              << "would wrap), so it is not run";
    __builtin_unreachable();
  }
  Range fit(I128 lo, I128 hi, const Expr& e) {
    if (lo < INT64_MIN || hi > INT64_MAX) overflow(e, where_);
    return {static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
  }
  static Range type_range(DType t) {
    if (t == DType::I8) return Range{-128, 127};
    if (t == DType::I32) return Range{INT32_MIN, INT32_MAX};
    return kFull;
  }
  static Range hull(Range a, Range b) { return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)}; }

  // The range of an integer (or condition) expression; nullopt for a float one. Integer
  // operations inside float expressions (indices of loads) are checked all the same.
  std::optional<Range> range(const Expr& e) {
    std::vector<std::optional<Range>> a;
    for (size_t k = 0; k < e->args.size(); ++k) {
      if (e->op != Op::Load) {
        a.push_back(range(e->args[k]));
        continue;
      }
      std::string saved = where_;
      where_ = "index " + std::to_string(k) + " of the load from " + e->name;
      a.push_back(range(e->args[k]));
      where_ = saved;
    }
    bool integer = is_int(e->type) || e->type == DType::Bool;
    if (!integer) return std::nullopt;
    auto arg = [&](size_t k) { return a[k].value_or(kFull); };
    if ((e->op == Op::Div || e->op == Op::Mod) && e->args[1]->op != Op::IntImm &&
        (arg(0).lo <= INT32_MIN || arg(0).hi > INT32_MAX || arg(1).lo < INT32_MIN ||
         arg(1).hi > INT32_MAX))
      divisions_fit_int32_ = false;
    switch (e->op) {
      case Op::IntImm:
      case Op::BoolImm:
        return Range{e->int_value, e->int_value};
      case Op::Var: {
        if (auto it = scope_.find(e->name); it != scope_.end()) return it->second;
        return kFull;
      }
      case Op::Load:
        if (auto it = held_.find(e->name); it != held_.end()) return it->second;
        return type_range(e->type);
      case Op::Cast:
        if (e->type == DType::I8 || e->type == DType::I32) {
          // A value inside the type's range is kept (i32 of an i8); others saturate or wrap.
          const Range t = type_range(e->type);
          if (!a.empty() && a[0] && a[0]->lo >= t.lo && a[0]->hi <= t.hi) return *a[0];
          return t;
        }
        return a.empty() ? kFull : arg(0);
      case Op::Neg:
        return fit(-static_cast<I128>(arg(0).hi), -static_cast<I128>(arg(0).lo), e);
      case Op::Add:
        return fit(static_cast<I128>(arg(0).lo) + arg(1).lo,
                   static_cast<I128>(arg(0).hi) + arg(1).hi, e);
      case Op::Sub:
        return fit(static_cast<I128>(arg(0).lo) - arg(1).hi,
                   static_cast<I128>(arg(0).hi) - arg(1).lo, e);
      case Op::Mul: {
        Range x = arg(0), y = arg(1);
        I128 c[4] = {static_cast<I128>(x.lo) * y.lo, static_cast<I128>(x.lo) * y.hi,
                     static_cast<I128>(x.hi) * y.lo, static_cast<I128>(x.hi) * y.hi};
        return fit(*std::min_element(c, c + 4), *std::max_element(c, c + 4), e);
      }
      case Op::Div: {
        Range x = arg(0), y = arg(1);
        I128 m = std::max(-static_cast<I128>(x.lo), static_cast<I128>(x.hi));
        if (y.lo <= 0 && y.hi >= 0) return fit(-m, m, e);  // a zero divisor fails at run time
        // Floor division is monotone in each operand on a divisor range of one sign.
        auto fdiv = [](I128 p, I128 q) {
          I128 d = p / q, r = p % q;
          return (r != 0 && ((r < 0) != (q < 0))) ? d - 1 : d;
        };
        I128 c[4] = {fdiv(x.lo, y.lo), fdiv(x.lo, y.hi), fdiv(x.hi, y.lo), fdiv(x.hi, y.hi)};
        return fit(*std::min_element(c, c + 4), *std::max_element(c, c + 4), e);
      }
      case Op::Mod: {
        Range y = arg(1);
        I128 m = std::max(-static_cast<I128>(y.lo), static_cast<I128>(y.hi));
        if (y.lo > 0) return Range{0, y.hi - 1};
        if (y.hi < 0) return Range{y.lo + 1, 0};
        return fit(-(m - 1), m - 1, e);
      }
      case Op::Min:
        return Range{std::min(arg(0).lo, arg(1).lo), std::min(arg(0).hi, arg(1).hi)};
      case Op::Max:
        return Range{std::max(arg(0).lo, arg(1).lo), std::max(arg(0).hi, arg(1).hi)};
      case Op::Select:
        return hull(arg(1), arg(2));
      case Op::Call:
        if (e->fn == MathFn::Abs) {
          Range x = arg(0);
          I128 lo = x.lo >= 0 ? x.lo : (x.hi <= 0 ? -static_cast<I128>(x.hi) : 0);
          I128 hi = std::max(-static_cast<I128>(x.lo), static_cast<I128>(x.hi));
          return fit(lo, hi, e);
        }
        if (e->fn == MathFn::Clamp)
          return Range{std::min(std::max(arg(0).lo, arg(1).lo), arg(2).lo),
                       std::min(std::max(arg(0).hi, arg(1).hi), arg(2).hi)};
        return kFull;
      default:
        if (e->type == DType::Bool) return Range{0, 1};
        return kFull;
    }
  }
};

}  // namespace

void check_integer_ranges(const LoopProgram& p, const runtime::SizeMap& sizes,
                          const runtime::ParamMap& params, const std::string& kernel) {
  Bounds(p, sizes, params, kernel).stmt(p.body);
}

bool divisions_fit_int32(const LoopProgram& p, const runtime::SizeMap& sizes, int64_t overrun) {
  Bounds b(p, sizes, overrun, p.name);
  try {
    b.stmt(p.body);
  } catch (const RuntimeArgError&) {
    return false;  // beyond 64 bits somewhere: the launch refuses these sizes anyway
  }
  return b.divisions_fit_int32();
}

void ProvenRanges::check(const LoopProgram& p, const runtime::SizeMap& sizes,
                         const runtime::ParamMap& params, const std::string& kernel,
                         int64_t int32_division_overrun) {
  std::pair<runtime::SizeMap, runtime::ParamMap> at{sizes, params};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (std::find(proven_.begin(), proven_.end(), at) != proven_.end()) return;
  }
  check_integer_ranges(p, sizes, params, kernel);
  if (int32_division_overrun >= 0 && !divisions_fit_int32(p, sizes, int32_division_overrun))
    arg_error << "kernel " << kernel << " was generated for 32-bit integer divisions, which "
              << "these sizes may leave (a divided value beyond 2^31): compile it for these sizes";
  std::lock_guard<std::mutex> lock(mu_);
  if (proven_.size() >= 64) proven_.clear();
  proven_.push_back(std::move(at));
}

}  // namespace kintsugi::ir
