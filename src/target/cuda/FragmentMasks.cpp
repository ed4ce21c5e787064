// \file FragmentMasks.cpp
// The tensor-core writer's index and mask analysis: affine positions, monotone and constant
// values, tile corners and whole-tile tests, the comparisons a loop version folds, how values
// depend on the rows and columns, and the gathers computed once a diagonal.
//
// Invariant established: a test it spells holds over a whole tile only where every element of
// the tile satisfies it; an index it spells is the element's.
#include "target/cuda/FragmentWriter.h"

namespace kintsugi::cuda::fragment {

auto FragmentWriter::affine(int id) -> std::optional<Affine> {
  const Val& v = val(id);
  const TileOp& o = *v.def;
  size_t rank = o.type.shape.size();
  if (is_float(o.type.dtype) || o.type.dtype == DType::Bool) return std::nullopt;
  Affine r{"", std::vector<int64_t>(rank, 0)};
  if (v.kind == Kind::Uniform) {
    // A constant is spelled in place, so that the comparison can move to its loop's top.
    if (o.kind == OpKind::Full) {
      r.uniform = scalar(o.scalar);
      return r;
    }
    if (hoisting_) return std::nullopt;
    r.uniform = v.name;
    return r;
  }
  if (v.kind != Kind::Lazy) return std::nullopt;
  std::optional<Affine> a;
  switch (o.kind) {
    case OpKind::Full:
      r.uniform = scalar(o.scalar);
      return r;
    case OpKind::Arange:
      r.uniform = scalar(o.scalar);
      r.coef[static_cast<size_t>(o.axis)] = 1;
      return r;
    case OpKind::Broadcast:
    case OpKind::Permute:
      if (!(a = affine(o.args[0]))) return std::nullopt;
      r.uniform = a->uniform;
      for (size_t k = 0; k < a->coef.size(); ++k) {
        if (o.kind == OpKind::Broadcast)
          r.coef[static_cast<size_t>(o.dims[k])] = a->coef[k];
        else
          r.coef[k] = a->coef[static_cast<size_t>(o.perm[k])];
      }
      return r;
    case OpKind::Map: {
      if (o.is_call || (o.op != Op::Add && o.op != Op::Sub)) return std::nullopt;
      std::optional<Affine> b;
      if (!(a = affine(o.args[0])) || !(b = affine(o.args[1]))) return std::nullopt;
      int64_t sign = o.op == Op::Add ? 1 : -1;
      r.uniform = "(" + a->uniform + (sign > 0 ? " + " : " - ") + b->uniform + ")";
      for (size_t k = 0; k < rank; ++k)
        r.coef[k] = (a->coef.empty() ? 0 : a->coef[k]) + sign * (b->coef.empty() ? 0 : b->coef[k]);
      return r;
    }
    default:
      return std::nullopt;
  }
}

auto FragmentWriter::define_comparison(const TileOp& o) -> void {
  static const std::map<Op, std::string> kCompare = {
      {Op::Lt, "<"}, {Op::Le, "<="}, {Op::Gt, ">"}, {Op::Ge, ">="}, {Op::Eq, "=="}, {Op::Ne, "!="}};
  if (o.is_call || !kCompare.count(o.op) || comparisons_.count(o.result)) return;
  std::optional<Affine> a = affine(o.args[0]), b;
  if (!a || !(b = affine(o.args[1]))) return;
  size_t rank = o.type.shape.size();
  Comparison c{std::vector<int64_t>(rank, 0), val(o.result).name + "_lim", kCompare.at(o.op),
               o.type.shape};
  for (size_t k = 0; k < rank; ++k)
    c.coef[k] = (a->coef.empty() ? 0 : a->coef[k]) - (b->coef.empty() ? 0 : b->coef[k]);
  line("const int " + c.limit + " = (int)max(-65536LL, min(65536LL, (long long)(" + b->uniform +
       " - " + a->uniform + ")));");
  comparisons_[o.result] = c;
}

auto FragmentWriter::direction(int id, size_t axis) const -> int {
  const TileOp& o = *val(id).def;
  auto join = [](int a, int b) {
    if (a == 2 || b == 2) return 2;
    if (a == kEitherWay || b == kEitherWay) return a == 0 || b == 0 ? kEitherWay : 2;
    return a == 0 ? b : (b == 0 || a == b ? a : 2);
  };
  auto negated = [](int a) { return a == 2 || a == kEitherWay ? a : -a; };
  switch (o.kind) {
    case OpKind::Full:
      return 0;
    case OpKind::Arange:
      return static_cast<size_t>(o.axis) == axis ? 1 : 0;
    case OpKind::Broadcast:
      for (size_t k = 0; k < o.dims.size(); ++k)
        if (static_cast<size_t>(o.dims[k]) == axis) return direction(o.args[0], k);
      return 0;
    case OpKind::Permute:
      return direction(o.args[0], static_cast<size_t>(o.perm[axis]));
    case OpKind::Cast:
      return direction(o.args[0], axis);
    case OpKind::Map:
      break;
    default:
      return 2;
  }
  std::vector<int> d;
  for (int a : o.args) d.push_back(direction(a, axis));
  bool constant = std::all_of(d.begin(), d.end(), [](int x) { return x == 0; });
  if (constant) return 0;
  if (o.is_call || d.size() != 2) return 2;
  std::optional<double> c0 = constant_value(o.args[0]), c1 = constant_value(o.args[1]);
  switch (o.op) {
    case Op::Add:
    case Op::Min:
    case Op::Max:
      return join(d[0], d[1]);
    case Op::Sub:
      return join(d[0], negated(d[1]));
    case Op::Mul:
      if (c1) return *c1 >= 0 ? d[0] : negated(d[0]);
      if (c0) return *c0 >= 0 ? d[1] : negated(d[1]);
      return 2;
    case Op::Div:  // floor division for integers
      if (c1) return *c1 > 0 ? d[0] : 2;
      // By a divisor uniform over the tile: monotone, in the direction of the divisor's sign.
      return d[1] == 0 && d[0] != 2 ? kEitherWay : 2;
    default:
      return 2;
  }
}

auto FragmentWriter::constant_value(int id) const -> std::optional<double> {
  const TileOp& d = *val(id).def;
  if (d.kind == OpKind::Broadcast) return constant_value(d.args[0]);
  return d.kind == OpKind::Full ? constant_expr(d.scalar) : std::nullopt;
}

auto FragmentWriter::constant_expr(const ir::Expr& e) const -> std::optional<double> {
  if (e->op == Op::Var && e->var_kind == ir::VarKind::Dim)
    if (auto sp = p_.specialised.find(ir::to_string(e)); sp != p_.specialised.end())
      return static_cast<double>(sp->second.value);
  std::vector<double> a;
  for (const ir::Expr& x : e->args) {
    std::optional<double> c = constant_expr(x);
    if (!c) return std::nullopt;
    a.push_back(*c);
  }
  switch (e->op) {
    case Op::IntImm:
      return static_cast<double>(e->int_value);
    case Op::FloatImm:
      return e->float_value;
    case Op::Cast:
      return a[0];
    case Op::Neg:
      return -a[0];
    case Op::Add:
      return a[0] + a[1];
    case Op::Sub:
      return a[0] - a[1];
    case Op::Mul:
      return a[0] * a[1];
    case Op::Div:
      return is_float(e->type) && a[1] != 0 ? std::optional<double>(a[0] / a[1]) : std::nullopt;
    case Op::Call:
      if (e->fn == ir::MathFn::Sqrt && a[0] >= 0) return std::sqrt(a[0]);
      if (e->fn == ir::MathFn::Rsqrt && a[0] > 0) return 1.0 / std::sqrt(a[0]);
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

auto FragmentWriter::corner(int id, bool largest, bool either_end) -> std::optional<std::string> {
  const TileOp& o = *val(id).def;
  std::vector<std::string> at;
  int varying = 0;
  bool either_way = false;
  for (size_t k = 0; k < o.type.shape.size(); ++k) {
    int d = direction(id, k);
    if (d == 2) return std::nullopt;
    varying += d != 0;
    either_way |= d == kEitherWay;
    at.push_back(d != 0 && (d != -1) == largest ? std::to_string(o.type.shape[k] - 1) : "0");
  }
  if (either_way && (!either_end || varying > 1)) return std::nullopt;
  return index_code(id, at, /*in_front=*/true);
}

auto FragmentWriter::whole_tile_test(int id, bool nested) -> std::optional<std::string> {
  static const std::map<Op, std::string> kCompare = {
      {Op::Lt, "<"}, {Op::Le, "<="}, {Op::Gt, ">"}, {Op::Ge, ">="}};
  const TileOp& o = *val(id).def;
  nested = nested || compound_condition(id);
  if (nested && (o.kind == OpKind::Broadcast || o.kind == OpKind::Permute))
    return whole_tile_test(o.args[0], true);
  if (o.kind != OpKind::Map || o.is_call) return std::nullopt;
  if (nested && (o.op == Op::And || o.op == Op::Or)) {
    std::optional<std::string> a = whole_tile_test(o.args[0], true),
                               b = whole_tile_test(o.args[1], true);
    if (o.op == Op::And) {
      if (!a || !b) return std::nullopt;
      return "(" + *a + " && " + *b + ")";
    }
    if (!a || !b) return a ? a : b;
    return "(" + *a + " || " + *b + ")";
  }
  if (nested && o.op == Op::Eq) {
    // Positions that move apart along an axis of more than one element (i == j over a tile of
    // several rows) are equal over no whole tile.
    std::optional<Affine> a = affine(o.args[0]), b = a ? affine(o.args[1]) : std::nullopt;
    for (size_t k = 0; b && k < o.type.shape.size(); ++k)
      if (o.type.shape[k] > 1 &&
          (a->coef.empty() ? 0 : a->coef[k]) != (b->coef.empty() ? 0 : b->coef[k]))
        return std::nullopt;
    std::vector<std::string> c;
    for (int side : o.args)
      for (bool largest : {true, false}) {
        std::optional<std::string> e = corner(side, largest, /*either_end=*/true);
        if (!e) return std::nullopt;
        c.push_back(*e);
      }
    return "(" + c[0] + " == " + c[1] + " && " + c[2] + " == " + c[3] + " && " + c[0] +
           " == " + c[2] + ")";
  }
  if (!kCompare.count(o.op)) return std::nullopt;
  bool upper = o.op == Op::Lt || o.op == Op::Le;
  // |x| on the small side of the comparison: x's largest corner below the bound, and its
  // smallest corner above the bound's negation.
  int small = upper ? o.args[0] : o.args[1], bound = upper ? o.args[1] : o.args[0];
  const TileOp& s = *val(small).def;
  if (s.kind == OpKind::Map && s.is_call && s.fn == ir::MathFn::Abs) {
    std::optional<std::string> hi = corner(s.args[0], true), lo = corner(s.args[0], false),
                               w = corner(bound, false);
    if (!hi || !lo || !w) return std::nullopt;
    std::string op = o.op == Op::Lt || o.op == Op::Gt ? "<" : "<=";
    return "(" + *hi + " " + op + " " + *w + " && -(" + *lo + ") " + op + " " + *w + ")";
  }
  std::optional<std::string> a = corner(o.args[0], upper), b = corner(o.args[1], !upper);
  if (!a || !b) return std::nullopt;
  return "(" + *a + " " + kCompare.at(o.op) + " " + *b + ")";
}

auto FragmentWriter::compound_condition(int id) const -> bool {
  const TileOp& o = *val(id).def;
  if (o.kind != OpKind::Map || o.is_call || o.type.dtype != DType::Bool) return false;
  if (o.op == Op::Or || o.op == Op::Eq) return true;
  for (int a : o.args) {
    const TileOp& d = *val(a).def;
    if (d.kind == OpKind::Map && d.is_call && d.fn == ir::MathFn::Abs) return true;
  }
  return false;
}

auto FragmentWriter::index_code(int id, const std::vector<std::string>& ix, bool in_front)
    -> std::optional<std::string> {
  const Val& v = val(id);
  const TileOp& o = *v.def;
  if (in_front) {
    if (v.kind == Kind::Uniform && o.kind != OpKind::Full) return std::nullopt;
  } else {
    if (ix.size() == 1 && (ix[0] == frag_row() || ix[0] == frag_col()))
      if (auto it = slot_values_.find({id, ix[0] == frag_row()}); it != slot_values_.end())
        return it->second;
    if (auto it = diagonal_values_.find(id);
        it != diagonal_values_.end() && ix == std::vector{frag_row(), frag_col()})
      return diagonal_element(it->second, ix);
    if (v.kind == Kind::Uniform) return v.name;
    if (assumed_true_.count(id)) return "true";
    auto cmp = comparisons_.find(id);
    if (cmp != comparisons_.end()) {
      std::string term = "0";
      for (size_t k = 0; k < ix.size(); ++k)
        if (cmp->second.coef[k] != 0)
          term += " + " + std::to_string(cmp->second.coef[k]) + " * " + ix[k];
      return "((" + term + ") " + cmp->second.op + " " + cmp->second.limit + ")";
    }
  }
  switch (o.kind) {
    case OpKind::Full:
      return scalar(o.scalar);
    case OpKind::Arange:
      return "(" + scalar(o.scalar) + " + " + ix[static_cast<size_t>(o.axis)] + ")";
    case OpKind::Broadcast: {
      std::vector<std::string> src;
      for (int d : o.dims) src.push_back(ix[static_cast<size_t>(d)]);
      return index_code(o.args[0], src, in_front);
    }
    case OpKind::Permute: {
      std::vector<std::string> src(ix.size());
      for (size_t k = 0; k < o.perm.size(); ++k) src[static_cast<size_t>(o.perm[k])] = ix[k];
      return index_code(o.args[0], src, in_front);
    }
    case OpKind::Load: {
      if (in_front) return std::nullopt;
      if (val(id).tile >= 0) {  // an element tile: zero-filled past the buffer
        const SmemTile& t = tiles_[static_cast<size_t>(val(id).tile)];
        std::string st = storage(t.dtype);
        return load_value(o.buffer,
                          "((const " + st + "*)(ks_smem + " + std::to_string(t.offset) + " + (" +
                              stage_of(t) + ") * " + std::to_string(t.stage_bytes()) + "))[(" +
                              ix[0] + ") * " + std::to_string(t.pitch / t.element_bytes) + " + " +
                              ix[1] + "]",
                          o.type.dtype);
      }
      if (ix.size() == 1)
        for (bool rows : {false, true})
          if (auto it = slot_loads_.find({id, rows});
              it != slot_loads_.end() && ix[0] == slot_coordinate(rows))
            return it->second + "[ks_s]";
      auto region = lazy_loads_.find(id);
      internal_assert(region != lazy_loads_.end())
          << "fragment codegen: %" << id << " is used before its region is open";
      std::string offset, inside;
      element(region->second, ix, &offset, &inside);
      std::string value =
          "((" + inside + ") ? " +
          load_value(o.buffer, buffer_ids_.at(o.buffer) + "[" + offset + "]", o.type.dtype) +
          " : (" + ctype(o.type.dtype) + ")0)";
      if (!hoist_loads_) return value;
      auto [it, fresh] = hoisted_loads_.try_emplace({id, ix}, "");
      if (fresh) {
        it->second = tmp();
        line(std::string("const ") + ctype(o.type.dtype) + " " + it->second + " = " + value + ";");
      }
      return it->second;
    }
    case OpKind::Reduce: {
      if (in_front) return std::nullopt;
      const SmemVector& w = vectors_[static_cast<size_t>(val(id).vector)];
      return "((const float*)(ks_smem + " + std::to_string(w.offset) + "))[" + ix[0] + "]";
    }
    case OpKind::Gather: {
      if (in_front) return std::nullopt;
      std::vector<std::string> a;
      for (int x : o.args) a.push_back(*index_code(x, ix, false));
      if (!diagonal_checks_)
        return gather_element(o, a, o.type.dtype);  // its index checks go in front of the use
      std::string inside;
      std::string e = gather_element(o, a, o.type.dtype, &inside);
      if (!inside.empty()) {
        const std::string& checks = diagonal_checks_->at(&o);
        if (checks.empty())
          line("if (!(" + inside + ")) ks_fail(ks_err, " + std::to_string(site(o.buffer)) + ");");
        else
          line(checks + "[ks_s] = " + inside + ";");
      }
      return e;
    }
    case OpKind::Cast:
    case OpKind::Map: {
      if (o.kind == OpKind::Cast && !in_front && ix == std::vector{frag_row(), frag_col()})
        if (std::optional<std::string> f = float_of_affine(o)) return *f;
      std::vector<std::string> a;
      for (int x : o.args) {
        std::optional<std::string> e = index_code(x, ix, in_front);
        if (!e) return std::nullopt;
        a.push_back(*e);
      }
      return elementwise(o, a);
    }
    default:
      internal_assert(in_front) << "fragment codegen: %" << id << " is not index-computable";
      return std::nullopt;
  }
}

auto FragmentWriter::float_of_affine(const TileOp& cast) -> std::optional<std::string> {
  if (cast.type.dtype != DType::F32 || cast.type.shape.size() != 2) return std::nullopt;
  // The cast of |x| (a symmetric distance, |i - j|) is |f32(x)|: rounding is symmetric.
  const TileOp* arg = val(cast.args[0]).def;
  bool abs = arg && arg->kind == OpKind::Map && arg->is_call && arg->fn == ir::MathFn::Abs;
  std::optional<Affine> a = affine(abs ? arg->args[0] : cast.args[0]);
  if (!a) return std::nullopt;
  auto term = [](int64_t coef, const std::string& x) {
    return coef == 0 ? std::string() : " + " + std::to_string(coef) + " * " + x;
  };
  std::string col_slot = "((ks_k >> " + std::to_string(2 + log2_mblocks()) + ") * 8 + (ks_k & 1))";
  std::string lane =
      "(" + a->uniform + term(a->coef[0], "ks_row0") + term(a->coef[1], "ks_col0") + ")";
  std::string slot =
      "(0" + term(a->coef[0], "(" + row_slot() + " * 8)") + term(a->coef[1], col_slot) + ")";
  std::string sum = "((float)" + lane + " + (float)" + slot + ")";
  return abs ? "fabsf(" + sum + ")" : sum;
}

auto FragmentWriter::lazy_closure(int id, std::set<int>& out) const -> void {
  const Val& v = val(id);
  if (v.kind != Kind::Lazy || !out.insert(id).second || compound_condition(id)) return;
  for (int a : v.def->args) lazy_closure(a, out);
}

auto FragmentWriter::used_comparisons(const tile::TileBody& b, std::set<int>& out) const -> void {
  for (const tile::TileStmt& st : b) {
    if (st.kind == tile::StmtKind::For) {
      used_comparisons(st.body, out);
      continue;
    }
    // A Lazy value's operands count through the closure of the values that use it.
    if (st.op.result >= 0 && val(st.op.result).kind == Kind::Lazy) continue;
    for (int a : st.op.args) lazy_closure(a, out);
  }
}

auto FragmentWriter::masks(int id) const -> bool {
  bool found = false;
  std::function<void(const tile::TileBody&)> scan = [&](const tile::TileBody& b) {
    for (const tile::TileStmt& st : b) {
      if (found) return;
      if (st.kind == tile::StmtKind::For) {
        scan(st.body);
        continue;
      }
      const TileOp& o = st.op;
      for (size_t a = 0; a < o.args.size() && !found; ++a) {
        if (o.args[a] != id) continue;
        bool last = a + 1 == o.args.size();
        if (o.kind == OpKind::Gather)
          found = last && o.args.size() > o.index_in_bounds.size();
        else if (o.kind == OpKind::Store)
          found = a == 1;
        else if (o.kind == OpKind::Broadcast || o.kind == OpKind::Permute)
          found = masks(o.result);
        else if (o.kind == OpKind::Map && !o.is_call && (o.op == Op::And || o.op == Op::Or))
          found = masks(o.result);
        else if (o.kind == OpKind::Map && !o.is_call && o.op == Op::Select && a == 0)
          found = is_float(o.type.dtype) && (constant_value(o.args[2]).has_value() ||
                                             val(o.args[2]).def->kind == OpKind::Read);
      }
    }
  };
  scan(k_.body);
  return found;
}

auto FragmentWriter::interior_test(const TileOp& o) -> std::optional<std::string> {
  if (o.kind != OpKind::Load || o.result < 0 || val(o.result).tile >= 0) return std::nullopt;
  Kind k = val(o.result).kind;
  if (k != Kind::Frag && k != Kind::Lazy) return std::nullopt;
  std::string test;
  const std::vector<std::string>& ext = buffer_extents_.at(o.buffer);
  for (size_t d = 0; d < o.starts.size(); ++d) {
    if (o.axis_of_dim[d] < 0 || !o.bounds_checked[d]) continue;
    bool loads = false;
    ir::visit(o.starts[d], [&](const ir::Expr& x) {
      loads = loads || x->op == Op::Load;
      return true;
    });
    if (loads) return std::nullopt;
    std::string start = "(" + scalar(o.starts[d]) + ")";
    int64_t last = o.type.shape[static_cast<size_t>(o.axis_of_dim[d])] - 1;
    test += std::string(test.empty() ? "" : " && ") + "(unsigned long long)" + start +
            " < (unsigned long long)" + ext[d] + " && " + start + " + " + std::to_string(last) +
            " < " + ext[d];
  }
  if (test.empty()) return std::nullopt;
  return "(" + test + ")";
}

auto FragmentWriter::nested_loop_value(const tile::TileBody& b, int id) -> bool {
  std::function<bool(const tile::TileBody&)> defines = [&](const tile::TileBody& body) {
    for (const tile::TileStmt& st : body)
      if (st.kind == tile::StmtKind::For ? defines(st.body) : st.op.result == id) return true;
    return false;
  };
  for (const tile::TileStmt& st : b)
    if (st.kind == tile::StmtKind::For && defines(st.body)) return true;
  return false;
}

auto FragmentWriter::steady_value(const ir::Expr& e, const std::string& var)
    -> std::optional<bool> {
  static const std::map<Op, std::pair<bool, bool>> kSteady = {
      // op -> (steady value with var on the left, with var on the right)
      {Op::Gt, {true, false}}, {Op::Ge, {true, false}},  {Op::Lt, {false, true}},
      {Op::Le, {false, true}}, {Op::Eq, {false, false}}, {Op::Ne, {true, true}}};
  auto it = kSteady.find(e->op);
  if (it == kSteady.end() || e->args.size() != 2) return std::nullopt;
  auto is_var = [&](const ir::Expr& x) { return x->op == Op::Var && x->name == var; };
  if (is_var(e->args[0]) && !ir::uses_var(e->args[1], var)) return it->second.first;
  if (is_var(e->args[1]) && !ir::uses_var(e->args[0], var)) return it->second.second;
  return std::nullopt;
}

auto FragmentWriter::known_true(int id) const -> bool {
  if (assumed_true_.count(id)) return true;
  const Val& v = val(id);
  if (v.kind != Kind::Lazy) return false;
  const TileOp& d = *v.def;
  if (d.kind == OpKind::Broadcast || d.kind == OpKind::Permute) return known_true(d.args[0]);
  return d.kind == OpKind::Map && !d.is_call && d.op == Op::And && known_true(d.args[0]) &&
         known_true(d.args[1]);
}

auto FragmentWriter::dependence(int id, const std::vector<int>& axes, std::set<int>* masks) const
    -> Dependence {
  const Val& v = val(id);
  if (v.kind == Kind::Uniform || assumed_true_.count(id)) return {};
  const auto diagonal = [](const Dependence& d) {
    if (d.form != Dependence::Affine) return d;
    if (d.row == 0 && d.col == 0) return Dependence{};
    return Dependence{d.row == -d.col ? Dependence::Diagonal : Dependence::Other};
  };
  if (auto c = comparisons_.find(id); c != comparisons_.end()) {
    Dependence d{Dependence::Affine};
    for (size_t k = 0; k < axes.size(); ++k) (axes[k] == 0 ? d.row : d.col) += c->second.coef[k];
    return diagonal(d);
  }
  const TileOp& o = *v.def;
  switch (o.kind) {
    case OpKind::Full:
      return {};
    case OpKind::Arange: {
      Dependence d{Dependence::Affine};
      (axes[static_cast<size_t>(o.axis)] == 0 ? d.row : d.col) = 1;
      return d;
    }
    case OpKind::Broadcast: {
      std::vector<int> src;
      for (int d : o.dims) src.push_back(axes[static_cast<size_t>(d)]);
      return dependence(o.args[0], src, masks);
    }
    case OpKind::Permute: {
      std::vector<int> src(axes.size());
      for (size_t k = 0; k < o.perm.size(); ++k) src[static_cast<size_t>(o.perm[k])] = axes[k];
      return dependence(o.args[0], src, masks);
    }
    case OpKind::Map:
    case OpKind::Cast:
    case OpKind::Gather: {
      size_t n = o.args.size();
      if (o.kind == OpKind::Gather && n > o.index_in_bounds.size()) masks->insert(o.args[--n]);
      std::vector<Dependence> a;
      for (size_t k = 0; k < n; ++k) {
        a.push_back(dependence(o.args[k], axes, masks));
        if (a.back().form == Dependence::Other) return a.back();
      }
      bool affine = std::all_of(a.begin(), a.end(), [](const Dependence& d) {
        return d.form == Dependence::None || d.form == Dependence::Affine;
      });
      if (o.kind == OpKind::Map && !o.is_call && affine &&
          (o.op == Op::Add || o.op == Op::Sub || o.op == Op::Neg)) {
        int64_t sign = o.op == Op::Add ? 1 : -1;
        Dependence d{Dependence::Affine, o.op == Op::Neg ? -a[0].row : a[0].row,
                     o.op == Op::Neg ? -a[0].col : a[0].col};
        if (o.op != Op::Neg) d.row += sign * a[1].row, d.col += sign * a[1].col;
        return d;
      }
      Dependence d;  // any other function of its arguments
      for (const Dependence& x : a) {
        Dependence f = diagonal(x);
        if (f.form == Dependence::Other) return f;
        if (f.form == Dependence::Diagonal) d = f;
      }
      return d;
    }
    default:
      return Dependence{Dependence::Other};
  }
}

auto FragmentWriter::diagonal_gather(int id, int* mask) const -> bool {
  std::set<int> masks;
  const TileOp& root = *val(id).def;
  if (dependence(id, {0, 1}, &masks).form != Dependence::Diagonal || masks.size() > 1 ||
      (!masks.empty() &&
       (root.args.size() == root.index_in_bounds.size() || root.args.back() != *masks.begin())))
    return false;
  *mask = masks.empty() ? -1 : *masks.begin();
  return true;
}

auto FragmentWriter::checked_gathers(int id, std::set<const TileOp*>* out) const -> void {
  const Val& v = val(id);
  if (v.kind == Kind::Uniform || !v.def) return;
  const TileOp& o = *v.def;
  if (o.kind == OpKind::Gather &&
      !std::all_of(o.index_in_bounds.begin(), o.index_in_bounds.end(), [](bool b) { return b; }))
    out->insert(&o);
  if (o.kind == OpKind::Map || o.kind == OpKind::Cast || o.kind == OpKind::Gather ||
      o.kind == OpKind::Broadcast || o.kind == OpKind::Permute)
    for (int x : o.args) checked_gathers(x, out);
}

}  // namespace kintsugi::cuda::fragment
