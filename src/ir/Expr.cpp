// \file Expr.cpp
// Expression factories, names of operators, structural equality, and the destructor of a node.
//
// Invariant: destroying an expression tree uses constant stack space whatever its depth (the
// operands of a dying node are released by one loop per thread, not by nested destructors).
#include "ir/Expr.h"

#include <cmath>
#include <limits>

namespace kintsugi::ir {

namespace {
// Operands whose last owner died inside ~ExprNode, waiting to be released by the loop below.
thread_local std::vector<Expr> t_pending;
thread_local bool t_draining = false;
}  // namespace

ExprNode::~ExprNode() {
  if (args.empty() && axes.empty()) return;
  for (Expr& a : args)
    if (a) t_pending.push_back(std::move(a));
  for (Axis& a : axes)
    if (a.extent) t_pending.push_back(std::move(a.extent));
  if (t_draining) return;  // an outer ~ExprNode on this thread is releasing t_pending
  t_draining = true;
  while (!t_pending.empty()) {
    Expr e = std::move(t_pending.back());
    t_pending.pop_back();
    e.reset();  // may run ~ExprNode, which only appends to t_pending
  }
  t_draining = false;
}

namespace {
Expr node(ExprNode n) {
  return std::make_shared<const ExprNode>(std::move(n));
}
}  // namespace

Expr make_int(int64_t v, SourceLoc loc) {
  ExprNode n;
  n.op = Op::IntImm;
  n.type = DType::Int;
  n.int_value = v;
  n.loc = std::move(loc);
  return node(std::move(n));
}

Expr make_float(double v, DType type, SourceLoc loc) {
  ExprNode n;
  n.op = Op::FloatImm;
  n.type = type;
  n.float_value = v;
  n.loc = std::move(loc);
  return node(std::move(n));
}

Expr make_bool(bool v, SourceLoc loc) {
  ExprNode n;
  n.op = Op::BoolImm;
  n.type = DType::Bool;
  n.int_value = v ? 1 : 0;
  n.loc = std::move(loc);
  return node(std::move(n));
}

Expr make_var(const std::string& name, VarKind kind, DType type, SourceLoc loc) {
  ExprNode n;
  n.op = Op::Var;
  n.type = type;
  n.name = name;
  n.var_kind = kind;
  n.loc = std::move(loc);
  return node(std::move(n));
}

Expr make_load(const std::string& name, DType type, std::vector<Expr> indices, SourceLoc loc) {
  ExprNode n;
  n.op = Op::Load;
  n.type = type;
  n.name = name;
  n.args = std::move(indices);
  n.loc = std::move(loc);
  return node(std::move(n));
}

Expr make_unary(Op op, Expr a, SourceLoc loc) {
  ExprNode n;
  n.op = op;
  n.type = op == Op::Not ? DType::Bool : (a ? a->type : DType::Unknown);
  if (op == Op::Neg && is_int(n.type)) n.type = DType::Int;
  n.args = {std::move(a)};
  n.loc = std::move(loc);
  return node(std::move(n));
}

DType binary_result_type(Op op, DType a, DType b) {
  if (is_comparison(op) || op == Op::And || op == Op::Or) return DType::Bool;
  if (is_int(a) && is_int(b)) return DType::Int;
  if (a == DType::Unknown) return b;
  return a;
}

Expr make_binary(Op op, Expr a, Expr b, SourceLoc loc) {
  ExprNode n;
  n.op = op;
  n.type = binary_result_type(op, a ? a->type : DType::Unknown, b ? b->type : DType::Unknown);
  n.args = {std::move(a), std::move(b)};
  n.loc = std::move(loc);
  return node(std::move(n));
}

Expr make_call(MathFn fn, std::vector<Expr> args, SourceLoc loc) {
  ExprNode n;
  n.op = Op::Call;
  n.fn = fn;
  n.type = DType::Unknown;
  for (const Expr& a : args)
    if (a && a->type != DType::Unknown) {
      n.type = a->type;
      break;
    }
  if (fn == MathFn::Round || fn == MathFn::Abs || fn == MathFn::Clamp) {
    // keep the operand type (Int stays Int)
  } else if (is_int(n.type)) {
    n.type = DType::Unknown;  // the checker rejects math functions on integers
  }
  n.args = std::move(args);
  n.loc = std::move(loc);
  return node(std::move(n));
}

Expr make_cast(DType type, Expr a, SourceLoc loc) {
  ExprNode n;
  n.op = Op::Cast;
  n.type = type;
  n.args = {std::move(a)};
  n.loc = std::move(loc);
  return node(std::move(n));
}

Expr make_select(Expr c, Expr t, Expr f, SourceLoc loc) {
  ExprNode n;
  n.op = Op::Select;
  n.type = binary_result_type(Op::Add, t ? t->type : DType::Unknown, f ? f->type : DType::Unknown);
  n.args = {std::move(c), std::move(t), std::move(f)};
  n.loc = std::move(loc);
  return node(std::move(n));
}

Expr make_reduce(Reducer r, std::vector<Axis> axes, Expr body, SourceLoc loc) {
  ExprNode n;
  n.op = Op::Reduce;
  n.reducer = r;
  n.type = body ? body->type : DType::Unknown;
  n.axes = std::move(axes);
  n.args = {std::move(body)};
  n.loc = std::move(loc);
  return node(std::move(n));
}

Expr with_args(const Expr& e, std::vector<Expr> args) {
  ExprNode n = *e;
  n.args = std::move(args);
  return node(std::move(n));
}

const char* op_symbol(Op op) {
  switch (op) {
    case Op::Neg:
      return "-";
    case Op::Not:
      return "!";
    case Op::Add:
      return "+";
    case Op::Sub:
      return "-";
    case Op::Mul:
      return "*";
    case Op::Div:
      return "/";
    case Op::Mod:
      return "%";
    case Op::Lt:
      return "<";
    case Op::Le:
      return "<=";
    case Op::Gt:
      return ">";
    case Op::Ge:
      return ">=";
    case Op::Eq:
      return "==";
    case Op::Ne:
      return "!=";
    case Op::And:
      return "&&";
    case Op::Or:
      return "||";
    case Op::Min:
      return "min";
    case Op::Max:
      return "max";
    default:
      return "?";
  }
}

namespace {
struct FnInfo {
  const char* name;
  MathFn fn;
  int arity;
};
constexpr FnInfo kFns[] = {
    {"exp", MathFn::Exp, 1},     {"exp2", MathFn::Exp2, 1},   {"log", MathFn::Log, 1},
    {"log2", MathFn::Log2, 1},   {"tanh", MathFn::Tanh, 1},   {"sqrt", MathFn::Sqrt, 1},
    {"rsqrt", MathFn::Rsqrt, 1}, {"abs", MathFn::Abs, 1},     {"pow", MathFn::Pow, 2},
    {"round", MathFn::Round, 1}, {"clamp", MathFn::Clamp, 3}, {"sigmoid", MathFn::Sigmoid, 1},
    {"erf", MathFn::Erf, 1},
};
}  // namespace

const char* math_fn_name(MathFn fn) {
  for (const FnInfo& f : kFns)
    if (f.fn == fn) return f.name;
  return "?";
}

std::vector<const char*> math_fn_names() {
  std::vector<const char*> names;
  for (const FnInfo& f : kFns) names.push_back(f.name);
  return names;
}

bool math_fn_from_name(const std::string& name, MathFn* fn, int* arity) {
  for (const FnInfo& f : kFns)
    if (name == f.name) {
      *fn = f.fn;
      *arity = f.arity;
      return true;
    }
  return false;
}

const char* reducer_name(Reducer r) {
  switch (r) {
    case Reducer::Sum:
      return "sum";
    case Reducer::Max:
      return "max";
    case Reducer::Min:
      return "min";
    case Reducer::Prod:
      return "prod";
  }
  return "?";
}

bool reducer_from_name(const std::string& name, Reducer* r) {
  if (name == "sum")
    *r = Reducer::Sum;
  else if (name == "max")
    *r = Reducer::Max;
  else if (name == "min")
    *r = Reducer::Min;
  else if (name == "prod")
    *r = Reducer::Prod;
  else
    return false;
  return true;
}

double reducer_identity(Reducer r) {
  switch (r) {
    case Reducer::Sum:
      return 0.0;
    case Reducer::Prod:
      return 1.0;
    case Reducer::Max:
      return -std::numeric_limits<double>::infinity();
    case Reducer::Min:
      return std::numeric_limits<double>::infinity();
  }
  return 0.0;
}

Expr reducer_identity_expr(Reducer r, DType t) {
  if (is_float(t)) return make_float(reducer_identity(r), t);
  switch (r) {
    case Reducer::Sum:
      return make_int(0);
    case Reducer::Prod:
      return make_int(1);
    case Reducer::Max:
      return make_int(std::numeric_limits<int32_t>::min());
    case Reducer::Min:
      return make_int(std::numeric_limits<int32_t>::max());
  }
  return nullptr;
}

double reducer_identity(Reducer r, DType t) {
  const Expr e = reducer_identity_expr(r, t);
  return e->op == Op::FloatImm ? e->float_value : static_cast<double>(e->int_value);
}

Expr combine(Reducer r, const Expr& a, const Expr& b) {
  switch (r) {
    case Reducer::Sum:
      return make_binary(Op::Add, a, b);
    case Reducer::Prod:
      return make_binary(Op::Mul, a, b);
    case Reducer::Max:
      return make_binary(Op::Max, a, b);
    case Reducer::Min:
      return make_binary(Op::Min, a, b);
  }
  return nullptr;
}

bool is_comparison(Op op) {
  return op >= Op::Lt && op <= Op::Ne;
}
bool is_arith(Op op) {
  return op >= Op::Add && op <= Op::Mod;
}

bool equal(const Expr& a, const Expr& b) {
  if (a == b) return true;
  if (!a || !b) return false;
  if (a->op != b->op || a->type != b->type || a->args.size() != b->args.size()) return false;
  switch (a->op) {
    case Op::IntImm:
    case Op::BoolImm:
      if (a->int_value != b->int_value) return false;
      break;
    case Op::FloatImm:
      if (!(a->float_value == b->float_value ||
            (std::isnan(a->float_value) && std::isnan(b->float_value))))
        return false;
      break;
    case Op::Var:
      if (a->name != b->name || a->var_kind != b->var_kind) return false;
      break;
    case Op::Load:
      if (a->name != b->name) return false;
      break;
    case Op::Call:
      if (a->fn != b->fn) return false;
      break;
    case Op::Reduce:
      if (a->reducer != b->reducer || a->axes.size() != b->axes.size()) return false;
      for (size_t i = 0; i < a->axes.size(); ++i)
        if (a->axes[i].name != b->axes[i].name || !equal(a->axes[i].extent, b->axes[i].extent))
          return false;
      break;
    default:
      break;
  }
  for (size_t i = 0; i < a->args.size(); ++i)
    if (!equal(a->args[i], b->args[i])) return false;
  return true;
}

}  // namespace kintsugi::ir
