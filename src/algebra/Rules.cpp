// \file Rules.cpp
// The rule tables, their parser, the pattern matcher and the fixpoint rewriter (see Rules.h).
#include "algebra/Rules.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>

namespace kintsugi::algebra {

namespace {

// clang-format off
const std::vector<RuleText> kSimplify = {
    {"exp-log",      "exp(log(a))",   "a",               "a>0"},
    {"exp-k-log",    "exp(k*log(a))", "a^k",             "a>0"},
    {"log-exp",      "log(exp(a))",   "a",               ""},
    {"log-pow",      "log(a^k)",      "k*log(a)",        "a>0"},
    {"log-mul",      "log(a*b)",      "log(a) + log(b)", "a>0, b>0"},
    {"pow-pow-pos",  "(a^p)^q",       "a^(p*q)",         "a>=0"},
    {"pow-pow-int",  "(a^p)^q",       "a^(p*q)",         "q int"},
    {"pow-pow-even", "(a^p)^q",       "abs(a)^(p*q)",    "p even"},
    {"pow-mul-int",  "(a*b)^k",       "a^k * b^k",       "k int"},
    {"pow-mul-pos",  "(a*b)^k",       "a^k * b^k",       "a>=0, b>=0"},
    {"abs-mul",      "abs(a*b)",      "abs(a) * abs(b)", ""},
    {"abs-pow-int",  "abs(a^k)",      "abs(a)^k",        "k int"},
    {"abs-nonneg",   "abs(a)",        "a",               "a>=0"},
    {"abs-nonpos",   "abs(a)",        "-a",              "a<=0"},
};

const std::vector<RuleText> kExpand = {
    {"mul-add",      "a*(b + c)",     "a*b + a*c",                        ""},
    {"pow-add",      "(a + b)^k",     "a*(a + b)^(k - 1) + b*(a + b)^(k - 1)", "k int, k>=2, k<=6"},
};

const std::vector<RuleText> kDistribute = {
    {"max-mul",      "max(a, b)*c",   "max(a*c, b*c)",   "c>=0"},
    {"min-mul",      "min(a, b)*c",   "min(a*c, b*c)",   "c>=0"},
    {"max-mul-neg",  "max(a, b)*c",   "min(a*c, b*c)",   "c<=0"},
    {"min-mul-neg",  "min(a, b)*c",   "max(a*c, b*c)",   "c<=0"},
    {"max-add",      "max(a, b) + c", "max(a + c, b + c)", ""},
    {"min-add",      "min(a, b) + c", "min(a + c, b + c)", ""},
};
// clang-format on

struct Cond {
  char var;
  std::string op;  // ">", ">=", "<", "<=", "int", "even", "odd"
  double value = 0;
};

struct Rule {
  std::string name;
  Term pattern, replacement;
  std::vector<Cond> conds;
};

struct Compiled {
  std::map<char, int> wild;  // pattern letter -> symbol index
  std::vector<Rule> simplify, expand, distribute;
};

// Recursive-descent parser of the pattern language.
class Parser {
 public:
  Parser(TermContext& cx, const std::map<char, int>& wild, const std::string& s)
      : cx_(cx), wild_(wild), s_(s) {}
  Term parse() {
    Term t = sum();
    skip();
    internal_assert(pos_ == s_.size()) << "trailing text in rule pattern `" << s_ << "`";
    return t;
  }

 private:
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    skip();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  Term sum() {
    Term t = product();
    for (;;) {
      if (eat('+'))
        t = cx_.add(t, product());
      else if (eat('-'))
        t = cx_.sub(t, product());
      else
        return t;
    }
  }
  Term product() {
    Term t = unary();
    for (;;) {
      if (eat('*'))
        t = cx_.mul(t, unary());
      else if (eat('/'))
        t = cx_.div(t, unary());
      else
        return t;
    }
  }
  Term unary() {
    if (eat('-')) return cx_.neg(unary());
    Term b = atom();
    if (eat('^')) return cx_.pow(b, unary());
    return b;
  }
  Term atom() {
    skip();
    internal_assert(pos_ < s_.size()) << "unexpected end of rule pattern `" << s_ << "`";
    if (eat('(')) {
      Term t = sum();
      internal_assert(eat(')')) << "missing ) in `" << s_ << "`";
      return t;
    }
    char c = s_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      char* end = nullptr;
      double v = std::strtod(s_.c_str() + pos_, &end);
      pos_ = end - s_.c_str();
      return cx_.constant(v);
    }
    size_t start = pos_;
    while (pos_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    std::string id = s_.substr(start, pos_ - start);
    if (id.size() == 1) {
      auto it = wild_.find(id[0]);
      internal_assert(it != wild_.end()) << "unknown pattern variable " << id;
      return cx_.sym(it->second);
    }
    std::vector<Term> args;
    internal_assert(eat('(')) << "expected ( after " << id;
    do args.push_back(sum());
    while (eat(','));
    internal_assert(eat(')')) << "missing ) in `" << s_ << "`";
    if (id == "exp") return cx_.exp(args[0]);
    if (id == "log") return cx_.log(args[0]);
    if (id == "abs") return cx_.abs(args[0]);
    if (id == "sqrt") return cx_.pow(args[0], 0.5);
    if (id == "max") return cx_.max(args);
    if (id == "min") return cx_.min(args);
    internal_error << "unknown function " << id << " in rule pattern";
    return nullptr;
  }

  TermContext& cx_;
  const std::map<char, int>& wild_;
  std::string s_;
  size_t pos_ = 0;
};

std::vector<Cond> parse_conditions(const std::string& text) {
  std::vector<Cond> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    std::string part = text.substr(i, j - i);
    i = j + 1;
    size_t a = part.find_first_not_of(' ');
    if (a == std::string::npos) continue;
    Cond c;
    c.var = part[a];
    std::string rest = part.substr(a + 1);
    size_t b = rest.find_first_not_of(' ');
    rest = rest.substr(b);
    if (rest == "int" || rest == "even" || rest == "odd") {
      c.op = rest;
    } else {
      size_t k = rest.find_first_not_of("<>=");
      c.op = rest.substr(0, k);
      c.value = std::strtod(rest.c_str() + k, nullptr);
    }
    out.push_back(c);
  }
  return out;
}

Compiled& compiled(TermContext& cx) {
  if (!cx.rule_cache) {
    auto c = std::make_shared<Compiled>();
    for (char v : std::string("abcd")) {
      Symbol s;
      s.name = std::string("?") + v;
      s.role = SymRole::Wild;
      c->wild[v] = cx.add_symbol(s);
    }
    for (char v : std::string("kpq")) {
      Symbol s;
      s.name = std::string("?") + v;
      s.role = SymRole::WildConst;
      c->wild[v] = cx.add_symbol(s);
    }
    auto build = [&](const std::vector<RuleText>& table, std::vector<Rule>* out) {
      for (const RuleText& r : table)
        out->push_back({r.name, Parser(cx, c->wild, r.pattern).parse(),
                        Parser(cx, c->wild, r.replacement).parse(), parse_conditions(r.condition)});
    };
    build(kSimplify, &c->simplify);
    build(kExpand, &c->expand);
    build(kDistribute, &c->distribute);
    cx.rule_cache = c;
  }
  return *static_cast<Compiled*>(cx.rule_cache.get());
}

using Bindings = std::map<int, Term>;

bool is_nary(TermKind k) {
  return k == TermKind::Add || k == TermKind::Mul || k == TermKind::Max || k == TermKind::Min;
}

bool match(TermContext& cx, Term p, Term t, Bindings& b) {
  if (p->kind == TermKind::Sym) {
    SymRole role = cx.symbol(p->sym).role;
    if (role == SymRole::Wild || role == SymRole::WildConst) {
      if (role == SymRole::WildConst && t->kind != TermKind::Const) return false;
      auto it = b.find(p->sym);
      if (it != b.end()) return it->second == t;
      b[p->sym] = t;
      return true;
    }
    return p == t;
  }
  if (p->kind != t->kind) return false;
  if (p->kind == TermKind::Const) return p == t;
  if (p->kind == TermKind::Fn && p->sym != t->sym) return false;
  if (is_nary(p->kind) && p->args.size() == 2 && t->args.size() >= 2) {
    for (size_t i = 0; i < t->args.size(); ++i) {
      std::vector<Term> others;
      for (size_t j = 0; j < t->args.size(); ++j)
        if (j != i) others.push_back(t->args[j]);
      Term rest = others.size() == 1 ? others[0] : cx.rebuild(t, others);
      for (int order = 0; order < 2; ++order) {
        Bindings trial = b;
        Term single_p = p->args[order], rest_p = p->args[1 - order];
        if (match(cx, single_p, t->args[i], trial) && match(cx, rest_p, rest, trial)) {
          b = std::move(trial);
          return true;
        }
      }
    }
    return false;
  }
  if (p->args.size() != t->args.size()) return false;
  for (size_t i = 0; i < p->args.size(); ++i)
    if (!match(cx, p->args[i], t->args[i], b)) return false;
  return true;
}

bool holds(TermContext& cx, const Compiled& c, const Cond& cond, const Bindings& b) {
  Term t = b.at(c.wild.at(cond.var));
  if (cond.op == "int" || cond.op == "even" || cond.op == "odd") {
    if (t->kind != TermKind::Const || t->value != std::floor(t->value) || std::isinf(t->value))
      return false;
    if (cond.op == "int") return true;
    bool even = std::fmod(t->value, 2.0) == 0.0;
    return cond.op == "even" ? even : !even;
  }
  if (t->kind == TermKind::Const) {
    double v = t->value;
    if (cond.op == ">") return v > cond.value;
    if (cond.op == ">=") return v >= cond.value;
    if (cond.op == "<") return v < cond.value;
    if (cond.op == "<=") return v <= cond.value;
    return false;
  }
  if (cond.value != 0.0) return false;
  Sign s = cx.sign(t);
  if (cond.op == ">") return s == Sign::Pos;
  if (cond.op == ">=") return is_nonneg(s);
  if (cond.op == "<") return s == Sign::Neg;
  if (cond.op == "<=") return is_nonpos(s);
  return false;
}

class Rewriter {
 public:
  Rewriter(TermContext& cx, std::vector<const std::vector<Rule>*> sets)
      : cx_(cx), c_(compiled(cx)), sets_(std::move(sets)) {}

  Term run(Term t) {
    auto m = memo_.find(t);
    if (m != memo_.end()) return m->second;
    Term node = t;
    if (!t->args.empty()) {
      std::vector<Term> args;
      bool changed = false;
      for (Term a : t->args) {
        args.push_back(run(a));
        changed |= args.back() != a;
      }
      if (changed) node = cx_.rebuild(t, std::move(args));
    }
    if (node != t)
      node = run(node);  // the rebuilt node may be memoised or rewrite further
    else
      node = apply(node);
    memo_[t] = node;
    return node;
  }

 private:
  Term apply(Term node) {
    if (budget_ <= 0) return node;
    for (const auto* set : sets_)
      for (const Rule& r : *set) {
        Bindings b;
        if (!match(cx_, r.pattern, node, b)) continue;
        bool ok = true;
        for (const Cond& cond : r.conds) ok = ok && holds(cx_, c_, cond, b);
        if (!ok) continue;
        std::unordered_map<int, Term> subst(b.begin(), b.end());
        Term out = cx_.substitute(r.replacement, subst);
        if (out == node) continue;
        --budget_;
        return run(out);
      }
    return node;
  }

  TermContext& cx_;
  const Compiled& c_;
  std::vector<const std::vector<Rule>*> sets_;
  std::unordered_map<Term, Term> memo_;
  int budget_ = 20000;
};

}  // namespace

const std::vector<RuleText>& rule_table(RuleSetKind kind) {
  switch (kind) {
    case RuleSetKind::Simplify:
      return kSimplify;
    case RuleSetKind::Expand:
      return kExpand;
    case RuleSetKind::Distribute:
      return kDistribute;
  }
  return kSimplify;
}

Term simplify(TermContext& cx, Term t) {
  Compiled& c = compiled(cx);
  return Rewriter(cx, {&c.simplify}).run(t);
}

Term expand(TermContext& cx, Term t) {
  Compiled& c = compiled(cx);
  return Rewriter(cx, {&c.simplify, &c.expand}).run(t);
}

Term distribute(TermContext& cx, Term t) {
  Compiled& c = compiled(cx);
  return Rewriter(cx, {&c.simplify, &c.distribute}).run(t);
}

}  // namespace kintsugi::algebra
