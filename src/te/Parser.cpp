// \file Parser.cpp
// Recursive-descent parser for .te sources: statements (sizes, param, input, output,
// definitions) and expressions with C-like precedence. Produces an unchecked te::Program: names
// are resolved to the right node kinds here (index variable, dim, param, tensor load), typing
// and extent inference happen in Check.cpp.
//
// Invariant: no expression it builds is deeper than ir::kMaxExprDepth or makes the program larger
// than ir::kMaxProgramOps operations, and param values are within their types' ranges; limits
// are enforced as each operation is built, so a pathological source never produces a tree that
// a later recursive pass (or the parser itself) could not handle.
#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <unordered_map>

#include "ir/Limits.h"
#include "support/Files.h"
#include "te/Lexer.h"
#include "te/Program.h"

namespace kintsugi::te {

namespace {

using ir::Expr;
using ir::Op;

const std::set<std::string> kKeywords = {"sizes", "param", "input", "output", "select", "inf",
                                         "nan",   "true",  "false", "f16",    "bf16",   "f32",
                                         "i32",   "i8",    "sum",   "max",    "min",    "prod"};

class Parser {
 public:
  Parser(std::shared_ptr<const SourceFile> file) : file_(file), toks_(lex(file)) {}

  Program parse_program(const std::string& name) {
    Program p;
    p.name = name;
    p.source = file_;
    program_ = &p;
    while (peek().kind != Tok::End) {
      if (accept(Tok::Newline)) continue;
      parse_statement(p);
    }
    return p;
  }

 private:
  std::shared_ptr<const SourceFile> file_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  Program* program_ = nullptr;
  // Index variables visible in the expression being parsed (definition indices, reduction axes).
  std::vector<std::string> index_scope_;

  const Token& peek(size_t ahead = 0) const {
    size_t k = std::min(pos_ + ahead, toks_.size() - 1);
    return toks_[k];
  }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool accept(Tok kind) {
    if (peek().kind != kind) return false;
    next();
    return true;
  }
  const Token& expect(Tok kind, const char* what) {
    if (peek().kind != kind) {
      const Token& t = peek();
      std::string found = t.kind == Tok::Name || t.kind == Tok::Int || t.kind == Tok::Float
                              ? "'" + t.text + "'"
                              : token_description(t.kind);
      user_error_at(t.loc) << "expected " << token_description(kind) << " " << what << ", found "
                           << found;
    }
    return next();
  }
  // Like expect, but a missing closing bracket at the end of the input is reported where the
  // bracket was opened, which is where the fix goes.
  const Token& expect_close(Tok kind, const SourceLoc& open, const char* what) {
    if (peek().kind != kind && (peek().kind == Tok::End || peek().kind == Tok::Newline))
      user_error_at(open) << "this '" << (kind == Tok::RBracket ? "[" : "(")
                          << "' is never closed: expected " << token_description(kind) << " "
                          << what;
    return expect(kind, what);
  }
  void skip_newlines() {
    while (peek().kind == Tok::Newline) next();
  }
  void end_statement() {
    if (peek().kind != Tok::Newline && peek().kind != Tok::End) {
      const Token& t = peek();
      user_error_at(t.loc) << "unexpected "
                           << (t.text.empty() ? token_description(t.kind) : "'" + t.text + "'")
                           << " after the end of the statement";
    }
    accept(Tok::Newline);
  }

  std::string expect_new_name(const char* what) {
    const Token& t = expect(Tok::Name, what);
    if (kKeywords.count(t.text))
      user_error_at(t.loc) << "'" << t.text << "' is a reserved word and cannot name " << what;
    check_unique(t.text, t.loc);
    return t.text;
  }

  // Tensors, params and dims share one namespace.
  void check_unique(const std::string& name, const SourceLoc& loc) {
    Program& p = *program_;
    SourceLoc prev;
    if (auto* i = p.find_input(name))
      prev = i->loc;
    else if (auto* d = p.find_def(name))
      prev = d->loc;
    else if (auto* q = p.find_param(name))
      prev = q->loc;
    else if (p.has_dim(name))
      prev = p.dim_locs.at(name);
    else
      return;
    std::ostringstream where;
    if (prev.valid()) where << " (first declared at line " << prev.line << ")";
    user_error_at(loc) << "'" << name << "' is already declared" << where.str();
  }

  DType parse_type(const char* what) {
    const Token& t = expect(Tok::Name, what);
    DType d = dtype_from_name(t.text);
    if (d == DType::Bool)
      user_error_at(t.loc) << "a tensor cannot be of type 'bool'; store a mask as i8 (0 or 1, as "
                              "a boolean tensor's bytes are) and test it, select(M[..] != 0, ...)";
    if (d == DType::Unknown)
      user_error_at(t.loc) << "unknown type '" << t.text
                           << "'; expected f16, bf16, f32, f8e4m3, f8e5m2, i32 or i8";
    return d;
  }

  void parse_statement(Program& p) {
    begin_statement();
    const Token& t = peek();
    if (t.kind != Tok::Name)
      user_error_at(t.loc)
          << "expected a statement (sizes, param, input, output or a definition), found "
          << (t.text.empty() ? token_description(t.kind) : "'" + t.text + "'");
    if (t.text == "sizes") return parse_sizes(p);
    if (t.text == "param") return parse_param(p);
    if (t.text == "input") return parse_input(p);
    if (t.text == "output") {
      next();
      return parse_definition(p, true);
    }
    parse_definition(p, false);
  }

  void parse_sizes(Program& p) {
    next();
    do {
      skip_newlines();
      const Token& n = expect(Tok::Name, "naming a size");
      expect(Tok::Assign, "after the size name");
      const Token& v = expect(Tok::Int, "as the size value");
      if (p.size_hints.count(n.text))
        user_error_at(n.loc) << "size '" << n.text << "' is given twice";
      int64_t value = parse_int(v);
      if (value <= 0)
        user_error_at(v.loc) << "size '" << n.text << "' must be positive, got " << value;
      p.size_hints[n.text] = value;
      size_locs_[n.text] = n.loc;
    } while (accept(Tok::Comma));
    end_statement();
  }

  int64_t parse_int(const Token& t) {
    try {
      size_t used = 0;
      long long v = std::stoll(t.text, &used);
      return v;
    } catch (...) {
      user_error_at(t.loc) << "integer '" << t.text << "' is too large";
    }
    return 0;
  }

  void parse_param(Program& p) {
    next();
    ParamDecl d;
    d.loc = peek().loc;
    d.name = expect_new_name("a param");
    expect(Tok::Colon, "before the param type");
    d.dtype = parse_type("as the param type");
    expect(Tok::Assign, "before the param default value (params need a value)");
    bool neg = accept(Tok::Minus);
    const Token& v = next();
    if (v.kind == Tok::Int)
      d.value = static_cast<double>(parse_int(v));
    else if (v.kind == Tok::Float)
      d.value = std::strtod(v.text.c_str(), nullptr);
    else if (v.kind == Tok::Name && v.text == "inf")
      d.value = INFINITY;
    else
      user_error_at(v.loc) << "expected a number as the value of param '" << d.name << "'";
    if (neg) d.value = -d.value;
    if (is_int(d.dtype) && d.value != std::trunc(d.value))
      user_error_at(v.loc) << "param '" << d.name << "' has integer type " << dtype_name(d.dtype)
                           << " but a fractional value";
    if (std::string why = ir::param_value_problem(d.dtype, d.value); !why.empty())
      user_error_at(v.loc) << "param '" << d.name << "' = " << (neg ? "-" : "") << v.text << ": "
                           << why;
    p.params.push_back(d);
    end_statement();
  }

  void parse_input(Program& p) {
    next();
    InputDecl d;
    d.loc = peek().loc;
    d.name = expect_new_name("an input");
    expect(Tok::Colon, "before the input type");
    d.dtype = parse_type("as the input type");
    expect(Tok::LBracket, "to start the input shape (a scalar input is written name: f32[])");
    if (peek().kind != Tok::RBracket) {
      do {
        d.shape.push_back(parse_shape_expr(true));
      } while (accept(Tok::Comma));
    }
    expect(Tok::RBracket, "to close the input shape");
    p.inputs.push_back(d);
    end_statement();
  }

  // A shape entry: an integer expression over dims. New names become dims.
  Expr parse_shape_expr(bool create_dims) {
    shape_mode_ = true;
    create_dims_ = create_dims;
    Expr e = parse_expr();
    shape_mode_ = false;
    create_dims_ = false;
    return e;
  }
  bool shape_mode_ = false;   // parsing a shape: no tensor reads
  bool create_dims_ = false;  // an unknown name in a shape declares a new dim (input shapes)

  void parse_definition(Program& p, bool is_output) {
    Definition d;
    d.is_output = is_output;
    d.loc = peek().loc;
    d.name = expect_new_name(is_output ? "an output" : "a definition");
    index_scope_.clear();
    if (accept(Tok::LBracket)) {
      if (peek().kind != Tok::RBracket) {
        do {
          d.indices.push_back(parse_axis_decl(d.indices));
        } while (accept(Tok::Comma));
      }
      expect(Tok::RBracket, "to close the index list");
    }
    for (const auto& a : d.indices) index_scope_.push_back(a.name);
    if (accept(Tok::Colon)) {
      d.dtype = parse_type("as the tensor type");
      if (accept(Tok::LBracket)) {
        std::vector<Expr> shape;
        if (peek().kind != Tok::RBracket) {
          do {
            shape.push_back(parse_shape_expr(false));
          } while (accept(Tok::Comma));
        }
        expect(Tok::RBracket, "to close the declared shape");
        d.declared_shape = shape;
      }
    } else if (is_output) {
      user_error_at(peek().loc) << "output '" << d.name << "' needs a type: write `output "
                                << d.name << "[...]: f32 = ...`";
    }
    expect(Tok::Assign, "before the definition's expression");
    skip_newlines();
    d.body = parse_expr();
    index_scope_.clear();
    p.defs.push_back(d);
    end_statement();
  }

  // `name` or `name: extent` in an index list or a reduction axis list.
  ir::Axis parse_axis_decl(const std::vector<ir::Axis>& siblings) {
    skip_newlines();
    const Token& t = expect(Tok::Name, "naming an index");
    if (kKeywords.count(t.text))
      user_error_at(t.loc) << "'" << t.text << "' is a reserved word and cannot name an index";
    Program& p = *program_;
    if (p.has_dim(t.text) || p.find_param(t.text) || p.find_input(t.text) || p.find_def(t.text))
      user_error_at(t.loc) << "index '" << t.text
                           << "' has the name of a size, param or tensor; choose another name";
    for (const auto& s : siblings)
      if (s.name == t.text) user_error_at(t.loc) << "index '" << t.text << "' appears twice";
    for (const auto& s : index_scope_)
      if (s == t.text)
        user_error_at(t.loc) << "index '" << t.text
                             << "' is already bound by an enclosing definition or reduction";
    ir::Axis a{t.text, nullptr, t.loc};
    if (accept(Tok::Colon)) {
      shape_mode_ = false;
      a.extent = parse_additive();
    }
    return a;
  }

  // --- expressions, lowest precedence first
  Expr parse_expr() { return parse_or(); }

  Expr parse_or() {
    Expr e = parse_and();
    while (peek().kind == Tok::OrOr) {
      SourceLoc loc = next().loc;
      skip_newlines();
      e = limited(ir::make_binary(Op::Or, e, parse_and(), loc));
    }
    return e;
  }
  Expr parse_and() {
    Expr e = parse_cmp();
    while (peek().kind == Tok::AndAnd) {
      SourceLoc loc = next().loc;
      skip_newlines();
      e = limited(ir::make_binary(Op::And, e, parse_cmp(), loc));
    }
    return e;
  }
  Expr parse_cmp() {
    Expr e = parse_additive();
    Op op;
    switch (peek().kind) {
      case Tok::Lt:
        op = Op::Lt;
        break;
      case Tok::Le:
        op = Op::Le;
        break;
      case Tok::Gt:
        op = Op::Gt;
        break;
      case Tok::Ge:
        op = Op::Ge;
        break;
      case Tok::EqEq:
        op = Op::Eq;
        break;
      case Tok::Ne:
        op = Op::Ne;
        break;
      default:
        return e;
    }
    SourceLoc loc = next().loc;
    skip_newlines();
    e = limited(ir::make_binary(op, e, parse_additive(), loc));
    switch (peek().kind) {
      case Tok::Lt:
      case Tok::Le:
      case Tok::Gt:
      case Tok::Ge:
      case Tok::EqEq:
      case Tok::Ne:
        user_error_at(peek().loc) << "comparisons do not chain; write `a < b && b < c`";
        break;
      default:
        break;
    }
    return e;
  }
  Expr parse_additive() {
    Expr e = parse_multiplicative();
    while (peek().kind == Tok::Plus || peek().kind == Tok::Minus) {
      Op op = peek().kind == Tok::Plus ? Op::Add : Op::Sub;
      SourceLoc loc = next().loc;
      skip_newlines();
      e = limited(ir::make_binary(op, e, parse_multiplicative(), loc));
    }
    return e;
  }
  Expr parse_multiplicative() {
    Expr e = parse_unary();
    while (peek().kind == Tok::Star || peek().kind == Tok::Slash || peek().kind == Tok::Percent) {
      Op op = peek().kind == Tok::Star ? Op::Mul : (peek().kind == Tok::Slash ? Op::Div : Op::Mod);
      SourceLoc loc = next().loc;
      skip_newlines();
      e = limited(ir::make_binary(op, e, parse_unary(), loc));
    }
    return e;
  }
  // Limits on every expression of a statement (definition bodies, input and declared shapes,
  // extents, indices). Every later pass (checker, lowering, simplifier, scheduler, printers,
  // interpreter, code generators) recurses over expressions, so the limits are enforced here,
  // while the tree is built and before any recursion goes deeper: the parser's own recursion
  // (parentheses, calls, brackets, unary operators) stops at kMaxNesting levels, no node is built
  // more than kMaxDepth operations above its leaves, and no more than kMaxOps operations are built
  // in the whole program. A refused tree is therefore never deeper than kMaxDepth + 1.
  static constexpr int kMaxNesting = ir::kMaxExprNesting;
  static constexpr int kMaxDepth = ir::kMaxExprDepth;
  static constexpr int kMaxOps = ir::kMaxProgramOps;
  int nesting_ = 0;
  int ops_ = 0;  // operations built so far in the program
  struct NestingGuard {
    Parser& p;
    NestingGuard(Parser& parser, const SourceLoc& loc) : p(parser) {
      if (++p.nesting_ > kMaxNesting)
        user_error_at(loc) << "expression nested more than " << kMaxNesting
                           << " levels deep; split it into several definitions";
    }
    ~NestingGuard() { --p.nesting_; }
  };

  // Depths of the operations built in the current statement (leaves have depth 1). Operations
  // stay alive until the statement is done, so their addresses are not reused meanwhile.
  std::unordered_map<const ir::ExprNode*, int> depth_;
  int depth_of(const ir::ExprNode* n) const {
    if (n->args.empty() && n->axes.empty()) return 1;
    auto it = depth_.find(n);
    internal_assert(it != depth_.end()) << "operation built outside the parser's limits";
    return it->second;
  }
  void begin_statement() {
    depth_.clear();
    nesting_ = 0;
  }
  // Records a freshly built operation and enforces kMaxDepth and kMaxOps at its location.
  Expr limited(Expr e) {
    int d = 0;
    for (const Expr& a : e->args)
      if (a) d = std::max(d, depth_of(a.get()));
    for (const ir::Axis& a : e->axes)
      if (a.extent) d = std::max(d, depth_of(a.extent.get()));
    ++d;
    if (d > kMaxDepth)
      user_error_at(e->loc) << "expression more than " << kMaxDepth
                            << " operations deep; split it into several definitions";
    if (++ops_ > kMaxOps)
      user_error_at(e->loc) << "program with more than " << kMaxOps
                            << " operations; split it into several programs";
    depth_[e.get()] = d;
    return e;
  }

  Expr parse_unary() {
    NestingGuard guard(*this, peek().loc);
    if (peek().kind == Tok::Minus) {
      SourceLoc loc = next().loc;
      Expr a = parse_unary();
      // Fold negative literals so that `-inf` and `-1.5` stay literals.
      if (a->op == Op::FloatImm) return ir::make_float(-a->float_value, a->type, loc);
      if (a->op == Op::IntImm) return ir::make_int(-a->int_value, loc);
      return limited(ir::make_unary(Op::Neg, a, loc));
    }
    if (peek().kind == Tok::Bang) {
      SourceLoc loc = next().loc;
      return limited(ir::make_unary(Op::Not, parse_unary(), loc));
    }
    return parse_primary();
  }

  std::vector<Expr> parse_call_args() {
    std::vector<Expr> args;
    SourceLoc open = expect(Tok::LParen, "to start the argument list").loc;
    if (peek().kind != Tok::RParen) {
      do {
        args.push_back(parse_expr());
      } while (accept(Tok::Comma));
    }
    expect_close(Tok::RParen, open, "to close the argument list");
    return args;
  }

  void check_arity(const Token& t, const std::vector<Expr>& args, size_t n) {
    if (args.size() != n)
      user_error_at(t.loc) << "'" << t.text << "' takes " << n << " argument" << (n == 1 ? "" : "s")
                           << ", got " << args.size();
  }

  Expr parse_primary() {
    const Token& t = next();
    switch (t.kind) {
      case Tok::Int:
        return ir::make_int(parse_int(t), t.loc);
      case Tok::Float:
        return ir::make_float(std::strtod(t.text.c_str(), nullptr), DType::Unknown, t.loc);
      case Tok::LParen: {
        skip_newlines();
        Expr e = parse_expr();
        expect_close(Tok::RParen, t.loc, "to close the parenthesis");
        return e;
      }
      case Tok::Name:
        return parse_name(t);
      default: {
        std::string found =
            t.kind == Tok::Newline ? "the end of the line" : token_description(t.kind);
        user_error_at(t.loc) << "expected an expression, found " << found;
      }
    }
    return nullptr;
  }

  // The common activations, spelled as the language writes them (docs/language.md): relu(x) is
  // max(x, 0) (NaN stays NaN), silu(x) is x * sigmoid(x), gelu(x) the erf form
  // x * (1 + erf(x * rsqrt(2.0))) / 2. Null when `t` names none of them.
  static constexpr const char* kActivations[] = {"relu", "silu", "gelu"};
  Expr parse_activation(const Token& t) {
    const std::string& n = t.text;
    if (std::find(std::begin(kActivations), std::end(kActivations), n) == std::end(kActivations))
      return nullptr;
    auto args = parse_call_args();
    check_arity(t, args, 1);
    const Expr& x = args[0];
    auto lit = [&](double v) { return ir::make_float(v, DType::Unknown, t.loc); };
    auto bin = [&](Op op, Expr a, Expr b) { return limited(ir::make_binary(op, a, b, t.loc)); };
    if (n == "relu") return bin(Op::Max, x, lit(0));
    if (n == "silu")
      return bin(Op::Mul, x, limited(ir::make_call(ir::MathFn::Sigmoid, {x}, t.loc)));
    Expr scaled = bin(Op::Mul, x, limited(ir::make_call(ir::MathFn::Rsqrt, {lit(2)}, t.loc)));
    Expr erf = limited(ir::make_call(ir::MathFn::Erf, {scaled}, t.loc));
    return bin(Op::Div, bin(Op::Mul, x, bin(Op::Add, lit(1), erf)), lit(2));
  }

  Expr parse_name(const Token& t) {
    const std::string& n = t.text;
    if (n == "inf") return ir::make_float(INFINITY, DType::Unknown, t.loc);
    if (n == "nan") return ir::make_float(NAN, DType::Unknown, t.loc);
    if (n == "true" || n == "false") return ir::make_bool(n == "true", t.loc);
    ir::Reducer reducer;
    if (ir::reducer_from_name(n, &reducer) && peek().kind == Tok::LBracket)
      return parse_reduce(t, reducer);
    if (peek().kind == Tok::LParen) {
      DType cast = dtype_from_name(n);
      if (cast != DType::Unknown && cast != DType::Bool) {
        auto args = parse_call_args();
        check_arity(t, args, 1);
        return limited(ir::make_cast(cast, args[0], t.loc));
      }
      if (n == "select") {
        auto args = parse_call_args();
        check_arity(t, args, 3);
        return limited(ir::make_select(args[0], args[1], args[2], t.loc));
      }
      if (n == "min" || n == "max") {
        auto args = parse_call_args();
        check_arity(t, args, 2);
        return limited(ir::make_binary(n == "min" ? Op::Min : Op::Max, args[0], args[1], t.loc));
      }
      ir::MathFn fn;
      int arity = 0;
      if (ir::math_fn_from_name(n, &fn, &arity)) {
        auto args = parse_call_args();
        check_arity(t, args, static_cast<size_t>(arity));
        return limited(ir::make_call(fn, args, t.loc));
      }
      if (Expr a = parse_activation(t)) return a;
      if (n == "sum" || n == "prod")
        user_error_at(t.loc) << "a reduction needs its axes first: write `" << n << "[j](...)`";
      std::string known;
      for (const char* f : ir::math_fn_names()) known += std::string(f) + ", ";
      for (const char* f : kActivations) known += std::string(f) + ", ";
      user_error_at(t.loc) << "unknown function '" << n << "'; known: " << known
                           << "min, max, select and the casts f16, bf16, f32, f8e4m3, f8e5m2, "
                              "i32, i8";
    }
    if (peek().kind == Tok::LBracket) {
      if (shape_mode_) user_error_at(t.loc) << "a shape cannot read a tensor";
      SourceLoc open = next().loc;
      std::vector<Expr> idx;
      if (peek().kind != Tok::RBracket) {
        do {
          skip_newlines();
          idx.push_back(parse_expr());
        } while (accept(Tok::Comma));
      }
      expect_close(Tok::RBracket, open, "to close the index list");
      return limited(ir::make_load(n, DType::Unknown, idx, t.loc));
    }
    // A plain name: an index variable, a dim, a param or a scalar tensor.
    for (const auto& s : index_scope_)
      if (s == n) return ir::make_var(n, ir::VarKind::Index, DType::Int, t.loc);
    Program& p = *program_;
    if (const ParamDecl* q = p.find_param(n))
      return ir::make_var(n, ir::VarKind::Param, is_int(q->dtype) ? DType::Int : q->dtype, t.loc);
    if (p.has_dim(n)) return ir::make_var(n, ir::VarKind::Dim, DType::Int, t.loc);
    if (shape_mode_ && create_dims_) {
      if (kKeywords.count(n))
        user_error_at(t.loc) << "'" << n << "' is a reserved word and cannot name a size";
      if (p.find_input(n) || p.find_def(n))
        user_error_at(t.loc) << "'" << n << "' is a tensor, not a size";
      p.dims.push_back(n);
      p.dim_locs[n] = t.loc;
      return ir::make_var(n, ir::VarKind::Dim, DType::Int, t.loc);
    }
    if (p.find_input(n) || p.find_def(n)) return ir::make_load(n, DType::Unknown, {}, t.loc);
    if (kKeywords.count(n)) user_error_at(t.loc) << "'" << n << "' cannot be used here";
    if (p.size_hints.count(n))
      user_error_at(t.loc) << "unknown name '" << n
                           << "': `sizes` gives it a value, but no input's shape names it, so it "
                              "is not a dimension; name it in an input's shape (input X: f32["
                           << n << ", ...]) to use it";
    user_error_at(t.loc) << "unknown name '" << n << "'" << suggest(n);
    return nullptr;
  }

  // "did you mean" for a name that differs from a known one by case, or (for longer names) by
  // one substituted character.
  std::string suggest(const std::string& n) {
    Program& p = *program_;
    std::vector<std::string> known(index_scope_.begin(), index_scope_.end());
    for (const auto& d : p.dims) known.push_back(d);
    for (const auto& q : p.params) known.push_back(q.name);
    for (const auto& i : p.inputs) known.push_back(i.name);
    for (const auto& d : p.defs) known.push_back(d.name);
    for (const auto& k : known) {
      if (k.size() != n.size()) continue;
      int case_diff = 0, diff = 0;
      for (size_t c = 0; c < k.size(); ++c) {
        case_diff += std::tolower(k[c]) != std::tolower(n[c]);
        diff += k[c] != n[c];
      }
      if (case_diff == 0 || (n.size() >= 3 && diff == 1)) return "; did you mean '" + k + "'?";
    }
    return "";
  }

  Expr parse_reduce(const Token& t, ir::Reducer reducer) {
    expect(Tok::LBracket, "to start the reduction axes");
    std::vector<ir::Axis> axes;
    do {
      axes.push_back(parse_axis_decl(axes));
    } while (accept(Tok::Comma));
    expect(Tok::RBracket, "to close the reduction axes");
    for (const auto& a : axes) index_scope_.push_back(a.name);
    expect(Tok::LParen, "before the reduction body");
    skip_newlines();
    Expr body = parse_expr();
    skip_newlines();
    expect(Tok::RParen, "to close the reduction body");
    index_scope_.resize(index_scope_.size() - axes.size());
    return limited(ir::make_reduce(reducer, axes, body, t.loc));
  }

  std::map<std::string, SourceLoc> size_locs_;

 public:
  void validate_sizes(const Program& p) {
    for (const auto& [name, loc] : size_locs_)
      if (!p.has_dim(name))
        user_error_at(loc) << "size '" << name << "' is not a dimension of any input";
  }
};

}  // namespace

const InputDecl* Program::find_input(const std::string& n) const {
  for (const auto& i : inputs)
    if (i.name == n) return &i;
  return nullptr;
}
const Definition* Program::find_def(const std::string& n) const {
  for (const auto& d : defs)
    if (d.name == n) return &d;
  return nullptr;
}
const ParamDecl* Program::find_param(const std::string& n) const {
  for (const auto& q : params)
    if (q.name == n) return &q;
  return nullptr;
}
bool Program::has_dim(const std::string& n) const {
  for (const auto& d : dims)
    if (d == n) return true;
  return false;
}

Program parse(const std::string& file_name, const std::string& text) {
  auto file = std::make_shared<const SourceFile>(SourceFile{file_name, text});
  std::string stem = file_name;
  if (auto slash = stem.find_last_of('/'); slash != std::string::npos)
    stem = stem.substr(slash + 1);
  if (auto dot = stem.find_last_of('.'); dot != std::string::npos && dot > 0)
    stem = stem.substr(0, dot);
  Parser parser(file);
  Program p = parser.parse_program(stem.empty() ? "program" : stem);
  parser.validate_sizes(p);
  return p;
}

Program parse_file(const std::string& path) {
  return parse(path, files::read_regular_file(path, "a .te source", files::kMaxSourceBytes));
}

}  // namespace kintsugi::te
