// \file Interpreter.cpp
// The reference interpreter (see Interpreter.h). The program is first compiled into a tree of
// closures with variables resolved to frame slots, then run; this keeps the reference fast
// enough to check programs with millions of points.
#include "ir/Interpreter.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <limits>
#include <new>
#include <sstream>

#include "ir/Limits.h"
#include "ir/Printer.h"

namespace kintsugi::ir {

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b, r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}

int64_t floor_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

namespace {

struct Buf {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  std::vector<double> values;
};

struct Frame {
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<Buf> bufs;
};

using IFn = std::function<int64_t(Frame&)>;
using FFn = std::function<double(Frame&)>;
using SFn = std::function<void(Frame&)>;

[[noreturn]] void throw_div_zero(const Expr& e) {
  throw RuntimeArgError("division by zero in `" + to_string(e) + "`");
}

// Integer arithmetic leaves the 64-bit range: the reference never wraps, so that a compiled
// kernel that wraps cannot agree with it by accident.
struct IntOverflow : RuntimeArgError {
  using RuntimeArgError::RuntimeArgError;
};
[[noreturn]] void throw_overflow(const Expr& e) {
  throw IntOverflow("integer overflow in `" + to_string(e) +
                    "`: the value leaves the 64-bit range at these sizes");
}

// a op b on int64 values, or an overflow error naming `e`.
int64_t checked(Op op, int64_t a, int64_t b, const Expr& e) {
  int64_t r = 0;
  bool overflow = op == Op::Add   ? __builtin_add_overflow(a, b, &r)
                  : op == Op::Sub ? __builtin_sub_overflow(a, b, &r)
                                  : __builtin_mul_overflow(a, b, &r);
  if (overflow) throw_overflow(e);
  return r;
}

class Compiler {
 public:
  Compiler(const LoopProgram& p, InterpMode mode, Frame& frame)
      : p_(p), mode_(mode), frame_(frame) {}

  int declare_int(const std::string& name, int64_t value) {
    scope_.push_back({name, static_cast<int>(frame_.ints.size())});
    frame_.ints.push_back(value);
    return scope_.back().second;
  }
  int declare_float(const std::string& name, double value) {
    float_params_[name] = static_cast<int>(frame_.floats.size());
    frame_.floats.push_back(value);
    return float_params_[name];
  }
  void declare_buffer(Buf b) {
    buffer_index_[b.name] = static_cast<int>(frame_.bufs.size());
    frame_.bufs.push_back(std::move(b));
  }
  void freeze_globals() { globals_ = scope_; }

  SFn stmt(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::Seq: {
        std::vector<SFn> parts;
        for (const Stmt& c : s->stmts) parts.push_back(stmt(c));
        return [parts](Frame& f) {
          for (const SFn& p : parts) p(f);
        };
      }
      case StmtKind::For: {
        IFn lo = int_expr(s->min), ext = int_expr(s->extent);
        int slot = new_slot(s->var);
        SFn body = stmt(s->body);
        scope_.pop_back();
        return [lo, ext, slot, body](Frame& f) {
          int64_t a = lo(f), n = ext(f);
          for (int64_t v = a; v < a + n; ++v) {
            f.ints[slot] = v;
            body(f);
          }
        };
      }
      case StmtKind::Block: {
        std::vector<IFn> bindings;
        for (const IterVar& iv : s->iters) bindings.push_back(int_expr(iv.binding));
        IFn predicate = s->predicate ? int_expr(s->predicate) : IFn();
        // Inside the block only its iteration variables (and dims, params) are visible.
        auto saved = scope_;
        scope_ = globals_;
        std::vector<int> slots;
        std::vector<int> reduce_slots;
        for (const IterVar& iv : s->iters) {
          slots.push_back(new_slot(iv.name));
          if (iv.kind != IterKind::Spatial) reduce_slots.push_back(slots.back());
        }
        SFn init = s->init ? stmt(s->init) : SFn();
        SFn body = stmt(s->body);
        scope_ = saved;
        return [bindings, predicate, slots, reduce_slots, init, body](Frame& f) {
          if (predicate && !predicate(f)) return;
          for (size_t k = 0; k < slots.size(); ++k) f.ints[slots[k]] = bindings[k](f);
          if (init) {
            bool first = true;
            for (int r : reduce_slots) first &= f.ints[r] == 0;
            if (first) init(f);
          }
          body(f);
        };
      }
      case StmtKind::Store: {
        auto it = buffer_index_.find(s->buffer);
        internal_assert(it != buffer_index_.end()) << "store to unknown buffer " << s->buffer;
        int b = it->second;
        auto offset = linear_index(b, s->indices, "writing", s->buffer);
        DType t = frame_.bufs[b].dtype;
        InterpMode mode = mode_;
        bool rounds = mode == InterpMode::Typed || is_int(t);
        if (is_float(s->value->type)) {
          FFn v = float_expr(s->value);
          return [b, offset, v, t, rounds](Frame& f) {
            double x = v(f);
            f.bufs[b].values[offset(f)] = rounds ? round_to_dtype(x, t) : x;
          };
        }
        IFn v = int_expr(s->value);
        return [b, offset, v, t](Frame& f) {
          f.bufs[b].values[offset(f)] = round_to_dtype(static_cast<double>(v(f)), t);
        };
      }
      case StmtKind::If: {
        IFn c = int_expr(s->cond);
        SFn t = stmt(s->then_case);
        SFn e = s->else_case ? stmt(s->else_case) : SFn();
        return [c, t, e](Frame& f) {
          if (c(f))
            t(f);
          else if (e)
            e(f);
        };
      }
      case StmtKind::Allocate: {
        // One storage per buffer is enough for a sequential interpreter; each entry poisons
        // float contents with NaN so that a read of a value from an earlier allocation (a wrong
        // placement) shows up in the results instead of silently reusing stale data.
        auto it = buffer_index_.find(s->buffer);
        internal_assert(it != buffer_index_.end()) << "alloc of unknown buffer " << s->buffer;
        int b = it->second;
        bool poison = is_float(frame_.bufs[b].dtype);
        SFn body = s->body ? stmt(s->body) : SFn();
        return [b, poison, body](Frame& f) {
          if (poison)
            std::fill(f.bufs[b].values.begin(), f.bufs[b].values.end(),
                      std::numeric_limits<double>::quiet_NaN());
          if (body) body(f);
        };
      }
    }
    internal_error << "unknown statement kind";
    return {};
  }

 private:
  const LoopProgram& p_;
  InterpMode mode_;
  Frame& frame_;
  std::vector<std::pair<std::string, int>> scope_, globals_;
  std::map<std::string, int> float_params_;
  std::map<std::string, int> buffer_index_;

  // An integer expression built only of variables, constants, +, - and multiplication by a
  // constant (an index such as jo * 64 + ji), as c + sum of k_i * v_i: one closure instead of
  // one per node. Every product and partial sum is checked, so a value it returns is the exact
  // value of the expression; an intermediate value of the tree out of the 64-bit range is
  // reported when a term or partial sum of the flat form is too.
  struct Affine {
    int64_t constant = 0;
    std::vector<std::pair<int, int64_t>> terms;  // (slot, coefficient)
    int nodes = 0;
  };
  bool collect_affine(const Expr& e, int64_t scale, Affine* out) {
    ++out->nodes;
    int64_t product = 0;
    switch (e->op) {
      case Op::IntImm:
        if (__builtin_mul_overflow(e->int_value, scale, &product) ||
            __builtin_add_overflow(out->constant, product, &out->constant))
          return false;
        return true;
      case Op::Var: {
        if (!is_int(e->type)) return false;
        for (auto it = scope_.rbegin(); it != scope_.rend(); ++it)
          if (it->first == e->name) {
            out->terms.push_back({it->second, scale});
            return true;
          }
        return false;
      }
      case Op::Add:
        return collect_affine(e->args[0], scale, out) && collect_affine(e->args[1], scale, out);
      case Op::Sub:
        return collect_affine(e->args[0], scale, out) && scale != INT64_MIN &&
               collect_affine(e->args[1], -scale, out);
      case Op::Mul:
        for (int k = 0; k < 2; ++k)
          if (e->args[k]->op == Op::IntImm) {
            if (__builtin_mul_overflow(scale, e->args[k]->int_value, &product)) return false;
            return collect_affine(e->args[1 - k], product, out);
          }
        return false;
      default:
        return false;
    }
  }
  IFn affine_expr(const Expr& e) {
    if (e->op != Op::Add && e->op != Op::Sub && e->op != Op::Mul) return {};
    Affine a;
    if (!collect_affine(e, 1, &a) || a.nodes < 3) return {};
    return [a, e](Frame& f) {
      int64_t sum = a.constant, term = 0;
      for (const auto& [slot, k] : a.terms)
        if (__builtin_mul_overflow(f.ints[slot], k, &term) ||
            __builtin_add_overflow(sum, term, &sum))
          throw_overflow(e);
      return sum;
    };
  }

  int new_slot(const std::string& name) {
    int slot = static_cast<int>(frame_.ints.size());
    frame_.ints.push_back(0);
    scope_.push_back({name, slot});
    return slot;
  }

  int lookup(const std::string& name) {
    for (auto it = scope_.rbegin(); it != scope_.rend(); ++it)
      if (it->first == name) return it->second;
    internal_error << "variable '" << name << "' is not in scope";
    return -1;
  }

  // Rounds a float result to its type in typed mode.
  FFn typed(FFn f, DType t) {
    if (mode_ == InterpMode::Exact || !is_float(t)) return f;
    if (t == DType::F32)
      return [f](Frame& fr) { return static_cast<double>(static_cast<float>(f(fr))); };
    return [f, t](Frame& fr) { return round_to_dtype(f(fr), t); };
  }

  std::function<int64_t(Frame&)> linear_index(int b, const std::vector<Expr>& indices,
                                              const char* verb, const std::string& name) {
    const Buf& buf = frame_.bufs[b];
    internal_assert(buf.shape.size() == indices.size())
        << name << " has rank " << buf.shape.size() << ", accessed with " << indices.size();
    std::vector<IFn> idx;
    for (const Expr& e : indices) idx.push_back(int_expr(e));
    std::string text;
    {
      std::ostringstream o;
      o << name << "[";
      for (size_t k = 0; k < indices.size(); ++k) o << (k ? ", " : "") << to_string(indices[k]);
      o << "]";
      text = o.str();
    }
    std::string what = verb;
    return [b, idx, text, what](Frame& f) -> int64_t {
      const Buf& bb = f.bufs[b];
      int64_t off = 0;
      for (size_t k = 0; k < idx.size(); ++k) {
        int64_t v = 0;
        try {
          v = idx[k](f);
        } catch (const IntOverflow& o) {
          throw RuntimeArgError(std::string(o.what()) + ", in index " + std::to_string(k) + " " +
                                what + " " + text);
        }
        if (v < 0 || v >= bb.shape[k]) {
          std::ostringstream o;
          o << "index out of bounds " << what << " " << text << ": dimension " << k << " is " << v
            << ", outside [0, " << bb.shape[k] << ")";
          throw RuntimeArgError(o.str());
        }
        off += v * bb.strides[k];
      }
      return off;
    };
  }

  // The compiled forms of an expression (ScalarEval compiles with these too).
 public:
  IFn int_expr(const Expr& e) {
    if (IFn f = affine_expr(e)) return f;
    switch (e->op) {
      case Op::IntImm:
      case Op::BoolImm: {
        int64_t v = e->int_value;
        return [v](Frame&) { return v; };
      }
      case Op::Var: {
        int slot = lookup(e->name);
        return [slot](Frame& f) { return f.ints[slot]; };
      }
      case Op::Load: {
        int b = buffer_index_.at(e->name);
        auto off = linear_index(b, e->args, "reading", e->name);
        return [b, off](Frame& f) { return static_cast<int64_t>(f.bufs[b].values[off(f)]); };
      }
      case Op::Neg: {
        IFn a = int_expr(e->args[0]);
        return [a, e](Frame& f) { return checked(Op::Sub, 0, a(f), e); };
      }
      case Op::Not: {
        IFn a = int_expr(e->args[0]);
        return [a](Frame& f) -> int64_t { return !a(f); };
      }
      case Op::And: {
        IFn a = int_expr(e->args[0]), b = int_expr(e->args[1]);
        return [a, b](Frame& f) -> int64_t { return a(f) && b(f); };
      }
      case Op::Or: {
        IFn a = int_expr(e->args[0]), b = int_expr(e->args[1]);
        return [a, b](Frame& f) -> int64_t { return a(f) || b(f); };
      }
      case Op::Lt:
      case Op::Le:
      case Op::Gt:
      case Op::Ge:
      case Op::Eq:
      case Op::Ne:
        return comparison(e);
      case Op::Add:
      case Op::Sub:
      case Op::Mul:
      case Op::Div:
      case Op::Mod:
      case Op::Min:
      case Op::Max: {
        IFn a = int_expr(e->args[0]), b = int_expr(e->args[1]);
        switch (e->op) {
          case Op::Add:
          case Op::Sub:
          case Op::Mul:
            return [a, b, op = e->op, e](Frame& f) { return checked(op, a(f), b(f), e); };
          case Op::Min:
            return [a, b](Frame& f) { return std::min(a(f), b(f)); };
          case Op::Max:
            return [a, b](Frame& f) { return std::max(a(f), b(f)); };
          default: {
            bool div = e->op == Op::Div;
            Expr expr = e;
            return [a, b, div, expr](Frame& f) {
              int64_t x = a(f), y = b(f);
              if (y == 0) throw_div_zero(expr);
              if (y == -1 && x == INT64_MIN)
                throw RuntimeArgError("integer overflow in `" + to_string(expr) + "`");
              return div ? floor_div(x, y) : floor_mod(x, y);
            };
          }
        }
      }
      case Op::Call: {
        std::vector<IFn> args;
        for (const Expr& a : e->args) args.push_back(int_expr(a));
        if (e->fn == MathFn::Abs)
          return [a = args[0], e](Frame& f) {
            int64_t x = a(f);
            return x < 0 ? checked(Op::Sub, 0, x, e) : x;
          };
        if (e->fn == MathFn::Clamp)
          return
              [args](Frame& f) { return std::min(std::max(args[0](f), args[1](f)), args[2](f)); };
        internal_error << "integer call of " << math_fn_name(e->fn);
        return {};
      }
      case Op::Cast: {
        const Expr& a = e->args[0];
        DType t = e->type;
        if (is_float(a->type)) {
          FFn x = float_expr(a);
          return [x, t](Frame& f) { return static_cast<int64_t>(round_to_dtype(x(f), t)); };
        }
        IFn x = int_expr(a);
        if (t == DType::Int) return x;
        return [x, t](Frame& f) {
          return static_cast<int64_t>(round_to_dtype(static_cast<double>(x(f)), t));
        };
      }
      case Op::Select: {
        IFn c = int_expr(e->args[0]), a = int_expr(e->args[1]), b = int_expr(e->args[2]);
        return [c, a, b](Frame& f) { return c(f) ? a(f) : b(f); };
      }
      default:
        break;
    }
    internal_error << "cannot evaluate `" << to_string(e) << "` as an integer";
    return {};
  }

  IFn comparison(const Expr& e) {
    Op op = e->op;
    auto cmp = [op](auto x, auto y) -> int64_t {
      switch (op) {
        case Op::Lt:
          return x < y;
        case Op::Le:
          return x <= y;
        case Op::Gt:
          return x > y;
        case Op::Ge:
          return x >= y;
        case Op::Eq:
          return x == y;
        default:
          return x != y;
      }
    };
    if (is_float(e->args[0]->type)) {
      FFn a = float_expr(e->args[0]), b = float_expr(e->args[1]);
      return [a, b, cmp](Frame& f) { return cmp(a(f), b(f)); };
    }
    IFn a = int_expr(e->args[0]), b = int_expr(e->args[1]);
    return [a, b, cmp](Frame& f) { return cmp(a(f), b(f)); };
  }

  FFn float_expr(const Expr& e) {
    DType t = e->type;
    switch (e->op) {
      case Op::FloatImm: {
        double v = mode_ == InterpMode::Typed ? round_to_dtype(e->float_value, t) : e->float_value;
        return [v](Frame&) { return v; };
      }
      case Op::Var: {
        auto it = float_params_.find(e->name);
        internal_assert(it != float_params_.end()) << "float variable " << e->name;
        int slot = it->second;
        return [slot](Frame& f) { return f.floats[slot]; };
      }
      case Op::Load: {
        int b = buffer_index_.at(e->name);
        auto off = linear_index(b, e->args, "reading", e->name);
        return [b, off](Frame& f) { return f.bufs[b].values[off(f)]; };
      }
      case Op::Neg: {
        FFn a = float_expr(e->args[0]);
        return [a](Frame& f) { return -a(f); };
      }
      case Op::Add:
      case Op::Sub:
      case Op::Mul:
      case Op::Div:
      case Op::Min:
      case Op::Max: {
        FFn a = float_expr(e->args[0]), b = float_expr(e->args[1]);
        switch (e->op) {
          case Op::Add:
            return typed([a, b](Frame& f) { return a(f) + b(f); }, t);
          case Op::Sub:
            return typed([a, b](Frame& f) { return a(f) - b(f); }, t);
          case Op::Mul:
            return typed([a, b](Frame& f) { return a(f) * b(f); }, t);
          case Op::Div:
            return typed([a, b](Frame& f) { return a(f) / b(f); }, t);
          case Op::Min:
            return [a, b](Frame& f) {
              double x = a(f), y = b(f);
              return std::isnan(x) || std::isnan(y) ? std::numeric_limits<double>::quiet_NaN()
                                                    : std::min(x, y);
            };
          default:
            return [a, b](Frame& f) {
              double x = a(f), y = b(f);
              return std::isnan(x) || std::isnan(y) ? std::numeric_limits<double>::quiet_NaN()
                                                    : std::max(x, y);
            };
        }
      }
      case Op::Call: {
        std::vector<FFn> args;
        for (const Expr& a : e->args) args.push_back(float_expr(a));
        FFn a = args[0];
        switch (e->fn) {
          case MathFn::Exp:
            return typed([a](Frame& f) { return std::exp(a(f)); }, t);
          case MathFn::Exp2:
            return typed([a](Frame& f) { return std::exp2(a(f)); }, t);
          case MathFn::Log:
            return typed([a](Frame& f) { return std::log(a(f)); }, t);
          case MathFn::Log2:
            return typed([a](Frame& f) { return std::log2(a(f)); }, t);
          case MathFn::Tanh:
            return typed([a](Frame& f) { return std::tanh(a(f)); }, t);
          case MathFn::Sigmoid:
            return typed([a](Frame& f) { return 1.0 / (1.0 + std::exp(-a(f))); }, t);
          case MathFn::Erf:
            return typed([a](Frame& f) { return std::erf(a(f)); }, t);
          case MathFn::Sqrt:
            return typed([a](Frame& f) { return std::sqrt(a(f)); }, t);
          case MathFn::Rsqrt:
            return typed([a](Frame& f) { return 1.0 / std::sqrt(a(f)); }, t);
          case MathFn::Abs:
            return [a](Frame& f) { return std::fabs(a(f)); };
          case MathFn::Round:
            return [a](Frame& f) { return std::nearbyint(a(f)); };
          case MathFn::Pow:
            return typed([a, b = args[1]](Frame& f) { return std::pow(a(f), b(f)); }, t);
          case MathFn::Clamp:
            return [args](Frame& f) {
              double x = args[0](f), lo = args[1](f), hi = args[2](f);
              if (std::isnan(x) || std::isnan(lo) || std::isnan(hi))
                return std::numeric_limits<double>::quiet_NaN();
              return std::min(std::max(x, lo), hi);
            };
        }
        break;
      }
      case Op::Cast: {
        const Expr& a = e->args[0];
        FFn x;
        if (is_float(a->type))
          x = float_expr(a);
        else {
          IFn i = int_expr(a);
          x = [i](Frame& f) { return static_cast<double>(i(f)); };
        }
        if (mode_ == InterpMode::Exact) return x;
        return [x, t](Frame& f) { return round_to_dtype(x(f), t); };
      }
      case Op::Select: {
        IFn c = int_expr(e->args[0]);
        FFn a = float_expr(e->args[1]), b = float_expr(e->args[2]);
        return [c, a, b](Frame& f) { return c(f) ? a(f) : b(f); };
      }
      default:
        break;
    }
    internal_error << "cannot evaluate `" << to_string(e) << "` as a float";
    return {};
  }
};

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int k = static_cast<int>(shape.size()) - 2; k >= 0; --k) s[k] = s[k + 1] * shape[k + 1];
  return s;
}

}  // namespace

int64_t eval_int(const Expr& e, const runtime::SizeMap& sizes, const runtime::ParamMap& params) {
  switch (e->op) {
    case Op::IntImm:
      return e->int_value;
    case Op::Var: {
      if (auto it = sizes.find(e->name); it != sizes.end()) return it->second;
      if (auto it = params.find(e->name); it != params.end())
        return static_cast<int64_t>(it->second);
      arg_error << "size '" << e->name << "' has no value; give it with --shape " << e->name
                << "=N";
      return 0;
    }
    case Op::Neg:
      return checked(Op::Sub, 0, eval_int(e->args[0], sizes, params), e);
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
      return checked(e->op, eval_int(e->args[0], sizes, params),
                     eval_int(e->args[1], sizes, params), e);
    case Op::Div:
    case Op::Mod: {
      int64_t a = eval_int(e->args[0], sizes, params), b = eval_int(e->args[1], sizes, params);
      if (b == 0) throw_div_zero(e);
      if (b == -1 && a == INT64_MIN)
        throw RuntimeArgError("integer overflow in `" + to_string(e) + "`");
      return e->op == Op::Div ? floor_div(a, b) : floor_mod(a, b);
    }
    case Op::Min:
      return std::min(eval_int(e->args[0], sizes, params), eval_int(e->args[1], sizes, params));
    case Op::Max:
      return std::max(eval_int(e->args[0], sizes, params), eval_int(e->args[1], sizes, params));
    default:
      break;
  }
  internal_error << "cannot evaluate shape expression `" << to_string(e) << "`";
  return 0;
}

std::vector<int64_t> eval_shape(const std::vector<Expr>& shape, const runtime::SizeMap& sizes,
                                const runtime::ParamMap& params) {
  std::vector<int64_t> out;
  for (const Expr& e : shape) out.push_back(eval_int(e, sizes, params));
  return out;
}

namespace {

// Declares the program's params in `c` with their values (or the overrides), checked against
// their types.
void declare_params(Compiler& c, const LoopProgram& p, InterpMode mode,
                    const runtime::ParamMap& param_overrides, runtime::ParamMap* params) {
  for (const Param& q : p.params) {
    auto it = param_overrides.find(q.name);
    (*params)[q.name] = it != param_overrides.end() ? it->second : q.value;
  }
  for (const Param& q : p.params) {
    double v = (*params)[q.name];
    // Integer params truncate; a value outside the type's range has no meaning in a kernel.
    if (std::string why = param_value_problem(q.dtype, is_int(q.dtype) ? std::trunc(v) : v);
        !why.empty())
      arg_error << "param " << q.name << " = " << param_value_text(v) << ": " << why;
    if (is_int(q.dtype))
      c.declare_int(q.name, static_cast<int64_t>(v));
    else
      c.declare_float(q.name, mode == InterpMode::Typed ? round_to_dtype(v, q.dtype) : v);
  }
}

}  // namespace

struct ScalarEval::Impl {
  Frame frame;
  Compiler compiler;
  std::vector<IFn> ints;  // by handle; empty where the expression is a float one
  std::vector<FFn> floats;
  Impl(const LoopProgram& p, InterpMode mode) : compiler(p, mode, frame) {}
};

ScalarEval::ScalarEval(const LoopProgram& program, InterpMode mode, const runtime::ParamMap& params)
    : impl_(std::make_unique<Impl>(program, mode)) {
  runtime::ParamMap values;
  declare_params(impl_->compiler, program, mode, params, &values);
}

ScalarEval::~ScalarEval() = default;

int ScalarEval::declare_int(const std::string& name) {
  return impl_->compiler.declare_int(name, 0);
}

int ScalarEval::declare_float(const std::string& name) {
  return impl_->compiler.declare_float(name, 0.0);
}

void ScalarEval::set_int(int slot, int64_t value) {
  impl_->frame.ints[slot] = value;
}

void ScalarEval::set_float(int slot, double value) {
  impl_->frame.floats[slot] = value;
}

int ScalarEval::compile(const Expr& e) {
  if (is_float(e->type)) {
    impl_->floats.push_back(impl_->compiler.float_expr(e));
    impl_->ints.emplace_back();
  } else {
    impl_->ints.push_back(impl_->compiler.int_expr(e));
    impl_->floats.emplace_back();
  }
  return static_cast<int>(impl_->ints.size()) - 1;
}

double ScalarEval::eval(int handle) {
  if (const IFn& f = impl_->ints[handle]) return static_cast<double>(f(impl_->frame));
  return impl_->floats[handle](impl_->frame);
}

InterpResult interpret(const LoopProgram& p, InterpMode mode,
                       const std::map<std::string, const runtime::Tensor*>& inputs,
                       const runtime::SizeMap& sizes, const runtime::ParamMap& param_overrides) {
  Frame frame;
  Compiler c(p, mode, frame);
  for (const std::string& d : p.dims) {
    auto it = sizes.find(d);
    if (it == sizes.end())
      arg_error << "size '" << d << "' has no value; give it with --shape " << d << "=N";
    c.declare_int(d, it->second);
  }
  runtime::ParamMap params;
  declare_params(c, p, mode, param_overrides, &params);
  c.freeze_globals();
  for (const Buffer& b : p.buffers) {
    Buf buf{b.name, b.dtype, eval_shape(b.shape, sizes, params), {}, {}};
    buf.strides = strides_of(buf.shape);
    // The reference holds every element as a double.
    std::string what = "buffer '" + b.name + "'";
    int64_t n = runtime::checked_bytes(buf.shape, sizeof(double), what) /
                static_cast<int64_t>(sizeof(double));
    auto allocate = [&](double fill) {
      try {
        buf.values.assign(static_cast<size_t>(n), fill);
      } catch (const std::bad_alloc&) {
        arg_error << "the reference interpreter cannot allocate " << what << " of shape "
                  << runtime::shape_string(buf.shape) << ": " << n * sizeof(double)
                  << " bytes of memory are not available";
      }
    };
    if (b.role == BufferRole::Input) {
      auto it = inputs.find(b.name);
      if (it == inputs.end()) arg_error << "missing input '" << b.name << "'";
      const runtime::Tensor& t = *it->second;
      if (t.shape != buf.shape || t.dtype != b.dtype)
        arg_error << "input '" << b.name << "' has the wrong shape or dtype";
      allocate(0.0);
      for (int64_t i = 0; i < n; ++i) buf.values[i] = t.get(i);
    } else {
      // Never-written elements read as NaN, so a schedule that reads before writing shows up.
      allocate(std::numeric_limits<double>::quiet_NaN());
    }
    c.declare_buffer(std::move(buf));
  }
  auto run = c.stmt(p.body);
  run(frame);
  InterpResult result;
  for (Buf& b : frame.bufs) {
    const Buffer* decl = p.find_buffer(b.name);
    if (decl->role == BufferRole::Output)
      result.outputs[b.name] = InterpBuffer{b.shape, std::move(b.values)};
  }
  return result;
}

}  // namespace kintsugi::ir
