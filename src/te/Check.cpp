// \file Check.cpp
// The type checker: resolves tensor references, infers the extent of every index and reduction
// axis from its uses, and types every expression.
//
// Establishes the invariant of te::Program (see Program.h): after check(), every expression node
// has a concrete type, untyped literals have taken the type of their context (f32 when there is
// none), every Axis has an extent, and every load has the rank of the tensor it reads. Before
// anything else it enforces the limits of ir/Limits.h (expression depth and size, rank, number of
// definitions, param ranges) without recursion, for programs built in C++ as for parsed ones.
// Precision is explicit: two float operands of different types are an error, never promoted.
#include <climits>
#include <optional>
#include <sstream>

#include "ir/Limits.h"
#include "ir/Printer.h"
#include "ir/Visit.h"
#include "te/Program.h"

namespace kintsugi::te {

namespace {

using ir::Expr;
using ir::Op;

std::string type_phrase(DType t) {
  if (t == DType::Int) return "an integer (index) value";
  if (t == DType::I8 || t == DType::I32)
    return std::string("an integer ") + dtype_name(t) + " value";
  if (t == DType::Bool) return "a condition";
  return std::string("a ") + dtype_name(t) + " value";
}

// Folds integer expressions made of literals only.
std::optional<int64_t> const_int(const Expr& e) {
  if (e->op == Op::IntImm) return e->int_value;
  if (e->args.size() != 2 || !ir::is_arith(e->op)) {
    if (e->op == Op::Neg)
      if (auto a = const_int(e->args[0])) return -*a;
    return std::nullopt;
  }
  auto a = const_int(e->args[0]), b = const_int(e->args[1]);
  if (!a || !b) return std::nullopt;
  int64_t sum = 0;  // overflow-checked results
  switch (e->op) {
    case Op::Add:
      return __builtin_add_overflow(*a, *b, &sum) ? std::nullopt : std::optional<int64_t>(sum);
    case Op::Sub:
      return __builtin_sub_overflow(*a, *b, &sum) ? std::nullopt : std::optional<int64_t>(sum);
    case Op::Mul:
      return __builtin_mul_overflow(*a, *b, &sum) ? std::nullopt : std::optional<int64_t>(sum);
    case Op::Div:
    case Op::Mod: {
      if (*b == 0 || (*b == -1 && *a == INT64_MIN)) return std::nullopt;  // never fold a trap
      int64_t q = *a / *b, r = *a % *b;
      if (r != 0 && ((r < 0) != (*b < 0))) {
        --q;
        r += *b;
      }
      return e->op == Op::Div ? q : r;
    }
    default:
      return std::nullopt;
  }
}

struct AxisInfo {
  std::string name;
  Expr extent;
  SourceLoc from;         // where the extent was learned
  std::string from_what;  // "dimension 2 of K"
  // Given explicitly (`k: K`): a direct use then reads part of a dimension (the first K columns)
  // or all of it, checked at run time as any index expression is, and does not define the extent.
  bool declared = false;
};

class Checker {
 public:
  explicit Checker(Program& p) : p_(p) {}

  void run() {
    check_limits();
    for (InputDecl& in : p_.inputs) {
      for (Expr& s : in.shape) s = check_shape_expr(s, "input '" + in.name + "'");
    }
    bool any_output = false;
    for (size_t k = 0; k < p_.defs.size(); ++k) {
      current_ = k;
      check_definition(p_.defs[k]);
      any_output |= p_.defs[k].is_output;
    }
    if (!any_output) {
      SourceLoc loc;
      if (p_.source) loc = SourceLoc{p_.source, 1, 1};
      user_error_at(loc)
          << "the program has no output; declare one with `output NAME[i, ...]: f32 = ...`";
    }
  }

 private:
  Program& p_;
  size_t current_ = 0;

  // The limits of ir/Limits.h, before any recursion over the program's expressions. A parsed
  // program has met the expression limits in the parser already; one built in C++ meets them here.
  void check_limits() {
    for (const ParamDecl& q : p_.params)
      if (std::string why = ir::param_value_problem(q.dtype, q.value); !why.empty())
        user_error_at(q.loc) << "param '" << q.name << "' = " << ir::param_value_text(q.value)
                             << ": " << why;
    auto rank = [&](size_t r, const SourceLoc& loc, const std::string& what) {
      if (r > static_cast<size_t>(ir::kMaxRank))
        user_error_at(loc) << what << " has rank " << r << "; at most " << ir::kMaxRank
                           << " dimensions are supported";
    };
    int ops = 0;
    auto expr = [&](const Expr& root, const SourceLoc& where) {
      std::vector<std::pair<const ir::ExprNode*, int>> stack = {{root.get(), 1}};
      while (!stack.empty()) {
        auto [n, d] = stack.back();
        stack.pop_back();
        if (d > ir::kMaxExprDepth)
          user_error_at(n->loc.valid() ? n->loc : where)
              << "expression more than " << ir::kMaxExprDepth
              << " operations deep; split it into several definitions";
        if (n->op == Op::Reduce) rank(n->axes.size(), n->loc, "reduction");
        if ((!n->args.empty() || !n->axes.empty()) && ++ops > ir::kMaxProgramOps)
          user_error_at(n->loc.valid() ? n->loc : where)
              << "program with more than " << ir::kMaxProgramOps
              << " operations; split it into several programs";
        for (const Expr& a : n->args)
          if (a) stack.push_back({a.get(), d + 1});
        for (const ir::Axis& a : n->axes)
          if (a.extent) stack.push_back({a.extent.get(), d + 1});
      }
    };
    for (const InputDecl& in : p_.inputs) {
      rank(in.shape.size(), in.loc, "input '" + in.name + "'");
      for (const Expr& s : in.shape) expr(s, in.loc);
    }
    if (p_.defs.size() > static_cast<size_t>(ir::kMaxDefinitions))
      user_error_at(p_.defs[ir::kMaxDefinitions].loc)
          << "more than " << ir::kMaxDefinitions
          << " definitions in one program; split it into several programs";
    for (const Definition& d : p_.defs) {
      rank(d.indices.size(), d.loc, "'" + d.name + "'");
      for (const ir::Axis& a : d.indices)
        if (a.extent) expr(a.extent, d.loc);
      if (d.declared_shape) {
        rank(d.declared_shape->size(), d.loc, "the declared shape of '" + d.name + "'");
        for (const Expr& s : *d.declared_shape) expr(s, d.loc);
      }
      if (d.body) expr(d.body, d.loc);
    }
  }
  std::vector<AxisInfo> scope_;

  // --- shapes and extents: integer expressions over dims, params and literals
  Expr check_shape_expr(const Expr& e, const std::string& what) {
    ir::visit(e, [&](const Expr& n) {
      if (n->op == Op::Load)
        user_error_at(n->loc) << "the shape of " << what << " cannot read a tensor";
      if (n->op == Op::Var && n->var_kind == ir::VarKind::Index)
        user_error_at(n->loc) << "the shape of " << what << " cannot use index '" << n->name << "'";
      return true;
    });
    Expr t = type(e);
    if (t->type != DType::Int)
      user_error_at(e->loc) << "the shape of " << what
                            << " must be an integer expression over sizes, got "
                            << type_phrase(t->type);
    if (auto v = const_int(t); v && *v <= 0)
      user_error_at(e->loc) << "the shape of " << what << " has a non-positive extent " << *v;
    return t;
  }

  std::vector<Expr> shape_of(const std::string& name) {
    if (const InputDecl* in = p_.find_input(name)) return in->shape;
    for (size_t k = 0; k < current_; ++k)
      if (p_.defs[k].name == name) {
        std::vector<Expr> s;
        for (const auto& a : p_.defs[k].indices) s.push_back(a.extent);
        return s;
      }
    internal_error << "shape_of unknown tensor " << name;
    return {};
  }

  DType element_type(const std::string& name) {
    if (const InputDecl* in = p_.find_input(name)) return in->dtype;
    for (size_t k = 0; k < current_; ++k)
      if (p_.defs[k].name == name) return p_.defs[k].dtype;
    return DType::Unknown;
  }

  void check_tensor_ref(const Expr& load) {
    const std::string& n = load->name;
    if (p_.find_input(n)) return;
    for (size_t k = 0; k < p_.defs.size(); ++k) {
      if (p_.defs[k].name != n) continue;
      if (k < current_) return;
      if (k == current_)
        user_error_at(load->loc) << "'" << n
                                 << "' cannot read itself; use a reduction such as sum[j](...)";
      user_error_at(load->loc) << "'" << n << "' is used before its definition at line "
                               << p_.defs[k].loc.line;
    }
    user_error_at(load->loc) << "unknown tensor '" << n << "'";
  }

  AxisInfo* find_axis(const std::string& name) {
    for (auto it = scope_.rbegin(); it != scope_.rend(); ++it)
      if (it->name == name) return &*it;
    return nullptr;
  }

  void learn_extent(AxisInfo& axis, const Expr& extent, const SourceLoc& loc,
                    const std::string& what) {
    if (!axis.extent) {
      axis.extent = extent;
      axis.from = loc;
      axis.from_what = what;
      return;
    }
    if (ir::equal(axis.extent, extent)) return;
    std::ostringstream prev;
    prev << axis.from_what;
    if (axis.from.valid()) prev << " at line " << axis.from.line << ":" << axis.from.col;
    user_error_at(loc) << "inconsistent extents for index '" << axis.name << "': it indexes "
                       << what << " of extent " << ir::to_string(extent) << ", but ranges over "
                       << ir::to_string(axis.extent) << " (" << prev.str()
                       << "); to read part of a dimension, give the index its extent explicitly (`"
                       << axis.name << ": " << ir::to_string(axis.extent) << "`)";
  }

  // Upper bounds that hold where an expression is evaluated: inside the branch of a select
  // whose condition is `v < E` (or the other branch of `v >= E`), index v stays below E, so a
  // load indexed by plain v along a dimension of extent E is in bounds there whatever v's range,
  // and says nothing about it (rotary embedding's `select(d < D / 2, COS[p, d], ...)` with d over
  // D). Bounds by sizes only.
  struct Guard {
    std::string index;
    Expr below;
  };
  std::vector<Guard> guards_;

  bool guarded_below(const std::string& index, const Expr& extent) const {
    for (const Guard& g : guards_)
      if (g.index == index && ir::equal(g.below, extent)) return true;
    return false;
  }

  // Adds the bounds that `cond` (when `holds`) or its negation (otherwise) puts on indices.
  void learn_guards(const Expr& cond, bool holds) {
    if (cond->op == (holds ? Op::And : Op::Or)) {
      for (const Expr& c : cond->args) learn_guards(c, holds);
      return;
    }
    if (cond->op == Op::Not) return learn_guards(cond->args[0], !holds);
    // v < E and E > v hold; v >= E and E <= v fail.
    Op below = holds ? Op::Lt : Op::Ge, above = holds ? Op::Gt : Op::Le;
    const Expr* v = nullptr;
    const Expr* bound = nullptr;
    if (cond->op == below) {
      v = &cond->args[0];
      bound = &cond->args[1];
    } else if (cond->op == above) {
      v = &cond->args[1];
      bound = &cond->args[0];
    } else {
      return;
    }
    if ((*v)->op != Op::Var || (*v)->var_kind != ir::VarKind::Index) return;
    bool sizes_only = true;
    ir::visit(*bound, [&](const Expr& n) {
      sizes_only &= n->op != Op::Load && (n->op != Op::Var || n->var_kind != ir::VarKind::Index);
      return sizes_only;
    });
    if (!sizes_only) return;
    Expr typed = type(*bound);
    if (typed->type == DType::Int) guards_.push_back({(*v)->name, typed});
  }

  // Walks e; for loads, learns the extents of plain index variables. Returns e with the extents
  // of nested reduction axes filled in.
  Expr infer(const Expr& e) {
    if (e->op == Op::Load) {
      check_tensor_ref(e);
      std::vector<Expr> shape = shape_of(e->name);
      if (shape.size() != e->args.size())
        user_error_at(e->loc) << "'" << e->name << "' has rank " << shape.size()
                              << " but is indexed with " << e->args.size() << " ind"
                              << (e->args.size() == 1 ? "ex" : "ices");
      std::vector<Expr> args;
      for (size_t k = 0; k < e->args.size(); ++k) {
        const Expr& a = e->args[k];
        if (a->op == Op::Var && a->var_kind == ir::VarKind::Index) {
          AxisInfo* axis = find_axis(a->name);
          if (!axis)
            user_error_at(a->loc.valid() ? a->loc : e->loc)
                << "index '" << a->name
                << "' is not bound here: it is neither an index of the definition nor an "
                << "axis of an enclosing reduction";
          if (!axis->declared && !guarded_below(a->name, shape[k]))
            learn_extent(*axis, shape[k], a->loc,
                         "dimension " + std::to_string(k) + " of '" + e->name + "'");
        }
        args.push_back(infer(a));
      }
      return ir::with_args(e, args);
    }
    if (e->op == Op::Reduce) {
      size_t base = scope_.size();
      for (const ir::Axis& a : e->axes) {
        AxisInfo info{a.name, nullptr, a.loc, "its declaration"};
        if (a.extent) info.extent = check_shape_expr(a.extent, "reduction axis '" + a.name + "'");
        info.declared = a.extent != nullptr;
        scope_.push_back(info);
      }
      Expr body = infer(e->args[0]);
      std::vector<ir::Axis> axes = e->axes;
      for (size_t k = 0; k < axes.size(); ++k) {
        const AxisInfo& info = scope_[base + k];
        if (!info.extent)
          user_error_at(axes[k].loc)
              << "cannot infer the extent of reduction axis '" << axes[k].name
              << "': use it directly as an index of a tensor in the body, or give it "
                 "explicitly as `"
              << ir::reducer_name(e->reducer) << "[" << axes[k].name << ": N](...)`";
        axes[k].extent = info.extent;
      }
      scope_.resize(base);
      return ir::make_reduce(e->reducer, axes, body, e->loc);
    }
    if (e->op == Op::Select) {
      Expr cond = infer(e->args[0]);
      size_t base = guards_.size();
      learn_guards(cond, true);
      Expr then = infer(e->args[1]);
      guards_.resize(base);
      learn_guards(cond, false);
      Expr otherwise = infer(e->args[2]);
      guards_.resize(base);
      return ir::with_args(e, {cond, then, otherwise});
    }
    if (e->op == Op::Var && e->var_kind == ir::VarKind::Index && !find_axis(e->name))
      user_error_at(e->loc) << "index '" << e->name
                            << "' is not bound here: it is neither an index of the "
                            << "definition nor an axis of an enclosing reduction";
    if (e->args.empty()) return e;
    std::vector<Expr> args;
    for (const Expr& a : e->args) args.push_back(infer(a));
    return ir::with_args(e, args);
  }

  void check_definition(Definition& d) {
    scope_.clear();
    for (ir::Axis& a : d.indices) {
      AxisInfo info{a.name, nullptr, a.loc, "its declaration"};
      if (a.extent) info.extent = check_shape_expr(a.extent, "index '" + a.name + "'");
      info.declared = a.extent != nullptr;
      scope_.push_back(info);
    }
    Expr body = infer(d.body);
    for (size_t k = 0; k < d.indices.size(); ++k) {
      if (!scope_[k].extent)
        user_error_at(d.indices[k].loc)
            << "cannot infer the extent of index '" << d.indices[k].name << "' of '" << d.name
            << "': use it directly as an index of a tensor on the right-hand side, or "
               "give it explicitly as `"
            << d.indices[k].name << ": N`";
      d.indices[k].extent = scope_[k].extent;
    }
    body = type(body);
    if (body->type == DType::Unknown)
      body = coerce(body, !d.is_output && is_float(d.dtype) ? d.dtype : DType::F32);
    if (body->type == DType::Bool)
      user_error_at(d.body->loc) << "'" << d.name
                                 << "' would hold conditions; tensors hold numbers: write "
                                 << "select(cond, 1.0, 0.0)";
    DType value_type = body->type == DType::Int ? DType::I32 : body->type;
    if (d.is_output) {
      if (is_float(d.dtype) != is_float(value_type))
        user_error_at(d.body->loc)
            << "output '" << d.name << "' is declared " << dtype_name(d.dtype)
            << " but its expression gives " << type_phrase(body->type)
            << (is_float(d.dtype) ? "; cast it with f32(...)"
                                  : "; convert it with i8(round(...)) or i32(...)");
      if (d.declared_shape) {
        const auto& decl = *d.declared_shape;
        bool same = decl.size() == d.indices.size();
        std::vector<Expr> typed;
        for (const Expr& s : decl) typed.push_back(check_shape_expr(s, "output '" + d.name + "'"));
        for (size_t k = 0; same && k < decl.size(); ++k)
          same = ir::equal(typed[k], d.indices[k].extent);
        if (!same) {
          std::ostringstream got;
          for (size_t k = 0; k < d.indices.size(); ++k)
            got << (k ? ", " : "") << ir::to_string(d.indices[k].extent);
          user_error_at(d.loc) << "output '" << d.name << "' is declared with shape ["
                               << shape_text(typed) << "] but its indices range over [" << got.str()
                               << "]";
        }
        d.declared_shape = typed;
      }
    } else {
      // A type written on a definition (`t: f16 = ...`) documents it and is checked.
      if (d.dtype != DType::Unknown && d.dtype != value_type)
        user_error_at(d.body->loc) << "'" << d.name << "' is declared " << dtype_name(d.dtype)
                                   << " but its expression gives " << type_phrase(body->type)
                                   << "; cast it or change the declaration";
      d.dtype = value_type;
    }
    d.body = body;
  }

  static std::string shape_text(const std::vector<Expr>& s) {
    std::string out;
    for (size_t k = 0; k < s.size(); ++k) out += (k ? ", " : "") + ir::to_string(s[k]);
    return out;
  }

  // --- typing
  static bool is_untyped(const Expr& e) { return e->type == DType::Unknown; }
  static bool is_int_literal(const Expr& e) { return e->op == Op::IntImm; }

  // Gives an untyped float expression (or an integer literal) the float type t.
  Expr coerce(const Expr& e, DType t) {
    if (e->type == t) return e;
    if (e->op == Op::IntImm && is_float(t))
      return ir::make_float(static_cast<double>(e->int_value), t, e->loc);
    if (!is_untyped(e)) return e;
    if (e->op == Op::FloatImm) return ir::make_float(e->float_value, t, e->loc);
    std::vector<Expr> args;
    for (const Expr& a : e->args) args.push_back(a->type == DType::Bool ? a : coerce(a, t));
    ir::ExprNode n = *e;
    n.args = args;
    n.type = (ir::is_comparison(e->op) || e->op == Op::And || e->op == Op::Or) ? DType::Bool : t;
    return std::make_shared<const ir::ExprNode>(std::move(n));
  }

  // The common type of numeric operands a and b (coercing literals), or an error at `loc`.
  DType unify(Expr& a, Expr& b, const SourceLoc& loc, const char* what) {
    for (const Expr* x : {&a, &b})
      if ((*x)->type == DType::Bool)
        user_error_at((*x)->loc.valid() ? (*x)->loc : loc)
            << "a condition cannot be an operand of " << what << "; use select(cond, 1.0, 0.0)";
    bool fa = is_float(a->type) || is_untyped(a), fb = is_float(b->type) || is_untyped(b);
    if (!fa && !fb) return DType::Int;
    if (fa && fb) {
      if (is_untyped(a) && is_untyped(b)) return DType::Unknown;
      if (is_untyped(a)) a = coerce(a, b->type);
      if (is_untyped(b)) b = coerce(b, a->type);
      if (a->type != b->type)
        user_error_at(loc) << "operands of " << what << " have different types "
                           << dtype_name(a->type) << " and " << dtype_name(b->type)
                           << "; precision is explicit: insert a cast such as "
                           << dtype_name(DType::F32) << "(...)";
      return a->type;
    }
    // One float side, one integer side: only an integer literal may join a float.
    Expr& i = fa ? b : a;
    Expr& f = fa ? a : b;
    if (is_int_literal(i)) {
      DType t = is_untyped(f) ? DType::Unknown : f->type;
      if (t != DType::Unknown)
        i = coerce(i, t);
      else
        i = ir::make_float(static_cast<double>(i->int_value), DType::Unknown, i->loc);
      return t;
    }
    user_error_at(loc) << "cannot combine " << type_phrase(i->type) << " with "
                       << (is_untyped(f) ? std::string("a float value") : type_phrase(f->type))
                       << " in " << what << "; convert the integer with "
                       << (is_untyped(f) ? "f32" : dtype_name(f->type)) << "(...)";
    return DType::Unknown;
  }

  Expr retype(const Expr& e, std::vector<Expr> args, DType t) {
    ir::ExprNode n = *e;
    n.args = std::move(args);
    n.type = t;
    return std::make_shared<const ir::ExprNode>(std::move(n));
  }

  Expr type(const Expr& e) {
    switch (e->op) {
      case Op::IntImm:
      case Op::BoolImm:
      case Op::FloatImm:
      case Op::Var:
        return e;
      case Op::Load: {
        std::vector<Expr> args;
        for (size_t k = 0; k < e->args.size(); ++k) {
          Expr a = type(e->args[k]);
          if (a->type != DType::Int && !is_int(a->type))
            user_error_at(a->loc.valid() ? a->loc : e->loc)
                << "index " << k << " of '" << e->name << "' must be an integer expression, got "
                << (is_untyped(a) ? "a float value" : type_phrase(a->type));
          args.push_back(a);
        }
        return retype(e, args, element_type(e->name));
      }
      case Op::Neg: {
        Expr a = type(e->args[0]);
        if (a->type == DType::Bool) user_error_at(e->loc) << "cannot negate a condition; use '!'";
        return retype(e, {a}, is_int(a->type) ? DType::Int : a->type);
      }
      case Op::Not: {
        Expr a = type(e->args[0]);
        if (a->type != DType::Bool)
          user_error_at(e->loc) << "'!' needs a condition, got " << type_phrase(a->type);
        return retype(e, {a}, DType::Bool);
      }
      case Op::And:
      case Op::Or: {
        Expr a = type(e->args[0]), b = type(e->args[1]);
        for (const Expr& x : {a, b})
          if (x->type != DType::Bool)
            user_error_at(x->loc.valid() ? x->loc : e->loc)
                << "'" << ir::op_symbol(e->op) << "' needs conditions on both sides, got "
                << type_phrase(x->type);
        return retype(e, {a, b}, DType::Bool);
      }
      case Op::Add:
      case Op::Sub:
      case Op::Mul:
      case Op::Div:
      case Op::Mod:
      case Op::Min:
      case Op::Max: {
        Expr a = type(e->args[0]), b = type(e->args[1]);
        std::string what = std::string("'") + ir::op_symbol(e->op) + "'";
        DType t = unify(a, b, e->loc, what.c_str());
        if (e->op == Op::Mod && t != DType::Int)
          user_error_at(e->loc) << "'%' applies to integers only";
        if ((e->op == Op::Div || e->op == Op::Mod) && t == DType::Int) {
          if (auto v = const_int(b); v && *v == 0)
            user_error_at(b->loc.valid() ? b->loc : e->loc) << "division of an index by zero";
        }
        return retype(e, {a, b}, t);
      }
      case Op::Lt:
      case Op::Le:
      case Op::Gt:
      case Op::Ge:
      case Op::Eq:
      case Op::Ne: {
        Expr a = type(e->args[0]), b = type(e->args[1]);
        if ((e->op == Op::Eq || e->op == Op::Ne) && a->type == DType::Bool &&
            b->type == DType::Bool)
          return retype(e, {a, b}, DType::Bool);
        std::string what = std::string("'") + ir::op_symbol(e->op) + "'";
        DType t = unify(a, b, e->loc, what.c_str());
        if (t == DType::Unknown) {
          a = coerce(a, DType::F32);
          b = coerce(b, DType::F32);
        }
        return retype(e, {a, b}, DType::Bool);
      }
      case Op::Call: {
        std::vector<Expr> args;
        for (const Expr& a : e->args) args.push_back(type(a));
        const char* name = ir::math_fn_name(e->fn);
        bool int_ok = e->fn == ir::MathFn::Abs || e->fn == ir::MathFn::Clamp;
        // Unify all arguments pairwise with the first.
        DType t = args[0]->type;
        for (size_t k = 1; k < args.size(); ++k) {
          std::string what = std::string("'") + name + "'";
          t = unify(args[0], args[k], e->loc, what.c_str());
        }
        if (args.size() == 1) {
          if (t == DType::Bool)
            user_error_at(e->loc) << "'" << name << "' needs a number, got a condition";
        }
        for (size_t k = 1; k < args.size(); ++k)
          if (args[k]->type != args[0]->type) {
            std::string what = std::string("'") + name + "'";
            t = unify(args[0], args[k], e->loc, what.c_str());
          }
        if (is_int(t) && !int_ok) {
          if (args.size() == 1 && is_int_literal(args[0])) {
            args[0] = coerce(args[0], DType::F32);
            t = DType::F32;
          } else {
            user_error_at(e->loc) << "'" << name << "' needs a float argument, got "
                                  << type_phrase(t) << "; convert it with f32(...)";
          }
        }
        return retype(e, args, is_int(t) ? DType::Int : t);
      }
      case Op::Cast: {
        Expr a = type(e->args[0]);
        if (is_untyped(a) || a->op == Op::IntImm) {
          if (is_float(e->type)) return coerce(a, e->type);
          a = coerce(a, DType::F32);
        }
        if (a->type == e->type) return a;  // a cast to the operand's own type is the identity
        return retype(e, {a}, e->type);
      }
      case Op::Select: {
        Expr c = type(e->args[0]), a = type(e->args[1]), b = type(e->args[2]);
        if (c->type != DType::Bool)
          user_error_at(c->loc.valid() ? c->loc : e->loc)
              << "the first argument of select must be a condition, got " << type_phrase(c->type);
        DType t;
        if (a->type == DType::Bool && b->type == DType::Bool)
          t = DType::Bool;
        else
          t = unify(a, b, e->loc, "select");
        return retype(e, {c, a, b}, t);
      }
      case Op::Reduce: {
        Expr body = type(e->args[0]);
        if (body->type == DType::Bool)
          user_error_at(e->loc) << "cannot " << ir::reducer_name(e->reducer)
                                << " conditions; use select(cond, 1.0, 0.0)";
        if (is_untyped(body)) body = coerce(body, DType::F32);
        return retype(e, {body}, is_int(body->type) ? DType::Int : body->type);
      }
    }
    internal_error << "unhandled op in type()";
    return e;
  }
};

}  // namespace

void check(Program& program) {
  Checker(program).run();
}

}  // namespace kintsugi::te
