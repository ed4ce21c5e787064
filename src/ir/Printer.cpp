// \file Printer.cpp
// Text form of the IR (see Printer.h).
#include "ir/Printer.h"

#include <charconv>
#include <cmath>
#include <sstream>

namespace kintsugi::ir {

std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

namespace {

int precedence(const Expr& e) {
  switch (e->op) {
    case Op::Or:
      return 1;
    case Op::And:
      return 2;
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
    case Op::Eq:
    case Op::Ne:
      return 3;
    case Op::Add:
    case Op::Sub:
      return 4;
    case Op::Mul:
    case Op::Div:
    case Op::Mod:
      return 5;
    case Op::Neg:
    case Op::Not:
      return 6;
    case Op::FloatImm:
      return e->float_value < 0 ? 6 : 7;
    case Op::IntImm:
      return e->int_value < 0 ? 6 : 7;
    default:
      return 7;
  }
}

// Prints expressions; `math` drops the ".0" of integral float literals and the casts of f16/bf16
// literals (readable math for repair functions) instead of the text that reads back exactly.
struct ExprPrinter {
  std::ostringstream& out;
  bool math = false;

  void operand(const Expr& e, int min_prec) {
    bool paren = precedence(e) < min_prec;
    if (paren) out << "(";
    expr(e);
    if (paren) out << ")";
  }

  void list(const std::vector<Expr>& args) {
    for (size_t i = 0; i < args.size(); ++i) {
      if (i) out << ", ";
      expr(args[i]);
    }
  }

  void literal(const Expr& e) {
    std::string text = format_double(e->float_value);
    if (math) {
      if (text.size() > 2 && text.compare(text.size() - 2, 2, ".0") == 0)
        text.resize(text.size() - 2);
      out << text;
    } else if (is_float(e->type) && e->type != DType::F32) {
      // f32 is the default of an untyped literal; other float types keep their cast so that the
      // text reads back with the same type.
      out << dtype_name(e->type) << "(" << text << ")";
    } else {
      out << text;
    }
  }

  void expr(const Expr& e) {
    if (!e) {
      out << "<null>";
      return;
    }
    switch (e->op) {
      case Op::IntImm:
        out << e->int_value;
        break;
      case Op::FloatImm:
        literal(e);
        break;
      case Op::BoolImm:
        out << (e->int_value ? "true" : "false");
        break;
      case Op::Var:
        out << e->name;
        break;
      case Op::Load:
        out << e->name << "[";
        list(e->args);
        out << "]";
        break;
      case Op::Neg:
      case Op::Not:
        out << op_symbol(e->op);
        operand(e->args[0], 6);
        break;
      case Op::Min:
      case Op::Max:
        out << op_symbol(e->op) << "(";
        list(e->args);
        out << ")";
        break;
      case Op::Call:
        out << math_fn_name(e->fn) << "(";
        list(e->args);
        out << ")";
        break;
      case Op::Cast:
        out << dtype_name(e->type) << "(";
        expr(e->args[0]);
        out << ")";
        break;
      case Op::Select:
        out << "select(";
        list(e->args);
        out << ")";
        break;
      case Op::Reduce:
        out << reducer_name(e->reducer) << "[";
        for (size_t i = 0; i < e->axes.size(); ++i) {
          out << (i ? ", " : "") << e->axes[i].name;
          if (e->axes[i].extent) out << ": " << to_string(e->axes[i].extent);
        }
        out << "](";
        expr(e->args[0]);
        out << ")";
        break;
      default: {
        // Binary operators are left-associative: the right operand needs parentheses at equal
        // precedence. Comparisons do not chain in .te: a comparison operand of a comparison
        // needs parentheses.
        int p = precedence(e);
        operand(e->args[0], is_comparison(e->op) ? p + 1 : p);
        out << " " << op_symbol(e->op) << " ";
        operand(e->args[1], p + 1);
        break;
      }
    }
  }
};

void print_list(std::ostringstream& out, const std::vector<Expr>& args) {
  ExprPrinter{out}.list(args);
}

const char* iter_kind_name(IterKind k) {
  switch (k) {
    case IterKind::Spatial:
      return "spatial";
    case IterKind::Reduce:
      return "reduce";
    case IterKind::Scan:
      return "scan";
  }
  return "?";
}

// `p` (may be null) supplies the type, shape and scope printed for Allocate.
void print_stmt(std::ostringstream& out, const Stmt& s, int indent, const LoopProgram* p) {
  std::string pad(indent * 2, ' ');
  switch (s->kind) {
    case StmtKind::Seq:
      for (const Stmt& c : s->stmts) print_stmt(out, c, indent, p);
      break;
    case StmtKind::For:
      out << pad << (s->for_kind == ForKind::Parallel ? "parallel for " : "for ") << s->var
          << " in ";
      if (!(s->min->op == Op::IntImm && s->min->int_value == 0)) out << to_string(s->min) << " + ";
      out << "range(" << to_string(s->extent) << ")";
      if (!s->annotation.empty()) out << " bind(" << s->annotation << ")";
      out << ":\n";
      print_stmt(out, s->body, indent + 1, p);
      break;
    case StmtKind::Block:
      out << pad << "block " << s->name << "(";
      for (size_t i = 0; i < s->iters.size(); ++i) {
        const IterVar& iv = s->iters[i];
        out << (i ? ", " : "") << iter_kind_name(iv.kind) << " " << iv.name << ":"
            << to_string(iv.extent);
        bool identity = iv.binding && iv.binding->op == Op::Var && iv.binding->name == iv.name;
        if (!identity) out << " = " << to_string(iv.binding);
      }
      out << ")";
      if (s->predicate) out << " where " << to_string(s->predicate);
      out << ":\n";
      if (s->init) {
        out << pad << "  init:\n";
        print_stmt(out, s->init, indent + 2, p);
      }
      print_stmt(out, s->body, indent + 1, p);
      break;
    case StmtKind::Store:
      out << pad << s->buffer << "[";
      print_list(out, s->indices);
      out << "] = " << to_string(s->value) << "\n";
      break;
    case StmtKind::If:
      out << pad << "if " << to_string(s->cond) << ":\n";
      print_stmt(out, s->then_case, indent + 1, p);
      if (s->else_case) {
        out << pad << "else:\n";
        print_stmt(out, s->else_case, indent + 1, p);
      }
      break;
    case StmtKind::Allocate: {
      out << pad << "alloc " << s->buffer;
      if (const Buffer* b = p ? p->find_buffer(s->buffer) : nullptr) {
        out << ": " << dtype_name(b->dtype) << "[";
        print_list(out, b->shape);
        out << "] " << b->scope;
      }
      out << ":\n";
      if (s->body) print_stmt(out, s->body, indent + 1, p);
      break;
    }
  }
}

const char* role_name(BufferRole r) {
  switch (r) {
    case BufferRole::Input:
      return "input";
    case BufferRole::Output:
      return "output";
    case BufferRole::Intermediate:
      return "buffer";
  }
  return "?";
}

}  // namespace

std::string to_string(const Expr& e, ExprStyle style) {
  std::ostringstream out;
  ExprPrinter{out, style == ExprStyle::Math}.expr(e);
  return out.str();
}

std::string to_string(const Stmt& s, int indent) {
  std::ostringstream out;
  print_stmt(out, s, indent, nullptr);
  return out.str();
}

std::string to_string(const LoopProgram& p) {
  std::ostringstream out;
  out << "program " << p.name << "\n";
  if (!p.dims.empty()) {
    out << "  sizes ";
    for (size_t i = 0; i < p.dims.size(); ++i) out << (i ? ", " : "") << p.dims[i];
    out << "\n";
  }
  for (const Param& prm : p.params)
    out << "  param " << prm.name << ": " << dtype_name(prm.dtype) << " = "
        << format_double(prm.value) << "\n";
  for (const Buffer& b : p.buffers) {
    out << "  " << role_name(b.role) << " " << b.name << ": " << dtype_name(b.dtype) << "[";
    print_list(out, b.shape);
    out << "]";
    if (b.role == BufferRole::Intermediate) out << " " << b.scope;
    out << "\n";
  }
  out << "body:\n";
  if (p.body) print_stmt(out, p.body, 1, &p);
  return out.str();
}

std::string shape_to_string(const std::vector<Expr>& shape) {
  std::string out = "[";
  for (size_t k = 0; k < shape.size(); ++k) out += (k ? ", " : "") + to_string(shape[k]);
  return out + "]";
}

}  // namespace kintsugi::ir
