// \file Interpreter.cpp
// The tile interpreter (see Interpreter.h): one pass over each kernel's grid, tiles as row-major
// vectors of doubles, scalar expressions and elementwise operations compiled once into
// ir::ScalarEval and evaluated per element.
#include "tile/Interpreter.h"

#include <cmath>
#include <functional>
#include <limits>
#include <sstream>

#include "ir/Printer.h"
#include "ir/Visit.h"
#include "support/Error.h"

namespace kintsugi::tile {

namespace {

struct Tile {
  std::vector<int64_t> shape;
  std::vector<double> v;
};

struct GlobalBuf {
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<double> values;
};

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t k = shape.size(); k-- > 1;) s[k - 1] = s[k] * shape[k];
  return s;
}

int64_t count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

// Calls f(flat, index) for every element of `shape` in row-major order.
template <typename F>
void each_index(const std::vector<int64_t>& shape, F&& f) {
  const int64_t n = count(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    f(flat, idx);
    for (size_t k = shape.size(); k-- > 0;) {
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
    }
  }
}

class Machine {
 public:
  Machine(const TileProgram& p, ir::InterpMode mode, const runtime::SizeMap& sizes,
          const runtime::ParamMap& params)
      : p_(p), mode_(mode), eval_(p.source, mode, params) {
    for (const std::string& d : p.source.dims) {
      auto it = sizes.find(d);
      if (it == sizes.end())
        arg_error << "size '" << d << "' has no value; give it with --shape " << d << "=N";
      eval_.set_int(int_slot(d), it->second);
    }
    for (int k = 0; k < kOperands; ++k) {
      int_operand_[k] = eval_.declare_int("%i" + std::to_string(k));
      float_operand_[k] = eval_.declare_float("%f" + std::to_string(k));
    }
    for (const auto& [name, value] : params) params_[name] = value;
    for (const ir::Param& q : p.source.params)
      if (!params_.count(q.name)) params_[q.name] = q.value;
    sizes_ = sizes;
  }

  void allocate(const std::map<std::string, const runtime::Tensor*>& inputs) {
    for (const ir::Buffer& b : p_.source.buffers) {
      if (is_register(p_, b.name)) continue;
      GlobalBuf g{b.dtype, ir::eval_shape(b.shape, sizes_, params_), {}};
      int64_t n = count(g.shape);
      if (b.role == ir::BufferRole::Input) {
        auto it = inputs.find(b.name);
        if (it == inputs.end()) arg_error << "missing input '" << b.name << "'";
        const runtime::Tensor& t = *it->second;
        if (t.shape != g.shape || t.dtype != b.dtype)
          arg_error << "input '" << b.name << "' has the wrong shape or dtype";
        g.values.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) g.values[static_cast<size_t>(i)] = t.get(i);
      } else {
        g.values.assign(static_cast<size_t>(n), std::numeric_limits<double>::quiet_NaN());
      }
      bufs_[b.name] = std::move(g);
    }
  }

  void run_kernel(const Kernel& k) {
    kernel_ = &k;
    std::vector<int64_t> extents;
    std::vector<int> slots;
    for (const GridAxis& g : k.grid) {
      extents.push_back(int_value(g.extent));
      slots.push_back(int_slot(g.var));
    }
    each_index(extents, [&](int64_t, const std::vector<int64_t>& at) {
      for (size_t d = 0; d < slots.size(); ++d) eval_.set_int(slots[d], at[d]);
      values_.assign(static_cast<size_t>(k.num_values), Tile{});
      registers_.clear();
      for (const Register& r : k.registers)
        registers_[r.name] =
            Tile{r.type.shape, std::vector<double>(static_cast<size_t>(r.type.elements()), 0.0)};
      body(k.body);
    });
  }

  ir::InterpResult outputs() {
    ir::InterpResult r;
    for (const ir::Buffer* b : p_.source.outputs()) {
      GlobalBuf& g = bufs_.at(b->name);
      r.outputs[b->name] = ir::InterpBuffer{g.shape, std::move(g.values)};
    }
    return r;
  }

 private:
  static constexpr int kOperands = 3;

  int int_slot(const std::string& name) {
    auto it = int_slots_.find(name);
    if (it != int_slots_.end()) return it->second;
    return int_slots_[name] = eval_.declare_int(name);
  }

  [[noreturn]] void fail(const std::string& what) {
    throw RuntimeArgError("tile program, kernel '" + (kernel_ ? kernel_->name : "") + "': " + what);
  }

  // The flat offset of the element of `g` whose index along dimension d is index(d); an index
  // outside the buffer is an error that `what` (the access) starts.
  template <typename Index>
  int64_t element_offset(const GlobalBuf& g, const std::string& what, Index&& index) {
    int64_t off = 0;
    for (size_t d = 0; d < g.shape.size(); ++d) {
      int64_t i = index(d);
      if (i < 0 || i >= g.shape[d])
        fail(what + ": dimension " + std::to_string(d) + " index " + std::to_string(i) +
             " is outside [0, " + std::to_string(g.shape[d]) + ")");
      off = off * g.shape[d] + i;
    }
    return off;
  }

  // A scalar expression compiled with each load of a buffer (a loop bound narrowed by a mask
  // that reads LEN[b]) replaced by a variable that value_of sets first.
  struct Scalar {
    int handle = -1;
    struct LoadSlot {
      ir::Expr load;
      int slot;
      bool is_float;
    };
    std::vector<LoadSlot> loads;
  };

  const Scalar& compiled(const ir::Expr& e) {
    auto it = scalars_.find(e.get());
    if (it != scalars_.end()) return it->second;
    Scalar sc;
    ir::Expr body = ir::mutate(e, [&](const ir::Expr& n) -> ir::Expr {
      if (n->op != ir::Op::Load) return n;
      std::string name = "%load" + std::to_string(next_load_++);
      bool f = is_float(n->type);
      sc.loads.push_back({n, f ? eval_.declare_float(name) : eval_.declare_int(name), f});
      return ir::make_var(name, ir::VarKind::Index, n->type);
    });
    sc.handle = eval_.compile(body);
    return scalars_[e.get()] = std::move(sc);
  }

  double value_of(const ir::Expr& e) {
    const Scalar& sc = compiled(e);
    for (const Scalar::LoadSlot& l : sc.loads) {
      auto b = bufs_.find(l.load->name);
      internal_assert(b != bufs_.end()) << "tile interpreter: scalar load of " << l.load->name;
      const GlobalBuf& g = b->second;
      int64_t off = element_offset(g, "scalar load of " + l.load->name,
                                   [&](size_t d) { return int_value(l.load->args[d]); });
      double v = g.values[static_cast<size_t>(off)];
      if (l.is_float)
        eval_.set_float(l.slot, v);
      else
        eval_.set_int(l.slot, static_cast<int64_t>(v));
    }
    return eval_.eval(sc.handle);
  }
  int64_t int_value(const ir::Expr& e) { return static_cast<int64_t>(value_of(e)); }

  // The elementwise expression of `o` over operand variables of the given types, typed `result`.
  int elementwise(const TileOp& o, const std::vector<DType>& operand_types, DType result,
                  const std::function<ir::Expr(const std::vector<ir::Expr>&)>& build) {
    auto it = elementwise_.find(&o);
    if (it != elementwise_.end()) return it->second;
    std::vector<ir::Expr> vars;
    for (size_t k = 0; k < operand_types.size(); ++k) {
      DType t = operand_types[k];
      vars.push_back(
          ir::make_var((is_float(t) ? "%f" : "%i") + std::to_string(k), ir::VarKind::Index, t));
    }
    ir::Expr e = build(vars);
    if (e->type != result) {
      auto retyped = std::make_shared<ir::ExprNode>(*e);
      retyped->type = result;
      e = retyped;
    }
    return elementwise_[&o] = eval_.compile(e);
  }

  void set_operand(size_t k, DType t, double v) {
    if (is_float(t))
      eval_.set_float(float_operand_[k], v);
    else
      eval_.set_int(int_operand_[k], static_cast<int64_t>(v));
  }

  void body(const TileBody& b) {
    for (const TileStmt& s : b) {
      if (s.kind == StmtKind::Op) {
        op(s.op);
        continue;
      }
      int slot = int_slot(s.var);
      int64_t lo = int_value(s.min), n = int_value(s.extent);
      for (int64_t v = lo; v < lo + n; ++v) {
        eval_.set_int(slot, v);
        body(s.body);
      }
    }
  }

  const Tile& arg(const TileOp& o, size_t k) { return values_[static_cast<size_t>(o.args[k])]; }
  DType arg_type(const TileOp& o, size_t k) {
    return arg_types_.at(kernel_)[static_cast<size_t>(o.args[k])];
  }

  // The buffer element a region touches at tile index `idx`: its flat offset, or -1 where a
  // bounds-checked dimension runs past the extent (a tail).
  int64_t region_offset(const TileOp& o, const GlobalBuf& g, const std::vector<int64_t>& starts,
                        const std::vector<int64_t>& idx, const char* verb) {
    int64_t off = 0, stride = 1;
    for (size_t d = g.shape.size(); d-- > 0;) {
      int axis = o.axis_of_dim[d];
      int64_t i = starts[d] + (axis >= 0 ? idx[static_cast<size_t>(axis)] : 0);
      if (i < 0 || i >= g.shape[d]) {
        if (axis >= 0 && o.bounds_checked[d]) return -1;
        std::ostringstream m;
        m << verb << " " << o.buffer << ": dimension " << d << " index " << i << " is outside [0, "
          << g.shape[d] << ")" << (axis >= 0 ? " and not bounds-checked" : "");
        fail(m.str());
      }
      off += i * stride;
      stride *= g.shape[d];
    }
    return off;
  }

  std::vector<int64_t> starts_of(const TileOp& o) {
    std::vector<int64_t> s;
    for (const ir::Expr& e : o.starts) s.push_back(int_value(e));
    return s;
  }

  GlobalBuf& global(const TileOp& o) {
    auto it = bufs_.find(o.buffer);
    internal_assert(it != bufs_.end()) << "tile interpreter: no buffer " << o.buffer;
    return it->second;
  }

  double stored(double x, DType t) const {
    bool rounds = mode_ == ir::InterpMode::Typed || is_int(t);
    return rounds ? round_to_dtype(x, t) : x;
  }

  void op(const TileOp& o) {
    Tile out{o.type.shape, {}};
    const int64_t n = count(out.shape);
    auto element = [](const Tile& t, int64_t i) { return t.v[t.v.size() == 1 ? 0 : i]; };
    switch (o.kind) {
      case OpKind::Load: {
        GlobalBuf& g = global(o);
        std::vector<int64_t> starts = starts_of(o);
        out.v.resize(static_cast<size_t>(n));
        each_index(out.shape, [&](int64_t flat, const std::vector<int64_t>& idx) {
          int64_t off = region_offset(o, g, starts, idx, "load of");
          out.v[flat] = off < 0 ? 0.0 : g.values[off];
        });
        break;
      }
      case OpKind::Store: {
        GlobalBuf& g = global(o);
        std::vector<int64_t> starts = starts_of(o);
        const Tile& value = arg(o, 0);
        const Tile* mask = o.args.size() > 1 ? &arg(o, 1) : nullptr;
        each_index(o.type.shape, [&](int64_t flat, const std::vector<int64_t>& idx) {
          if (mask && element(*mask, flat) == 0.0) return;
          int64_t off = region_offset(o, g, starts, idx, "store to");
          if (off >= 0) g.values[off] = stored(element(value, flat), g.dtype);
        });
        return;
      }
      case OpKind::Read:
        out = registers_.at(o.buffer);
        break;
      case OpKind::Write:
        registers_.at(o.buffer).v = arg(o, 0).v;
        return;
      case OpKind::Full:
        out.v.assign(static_cast<size_t>(n), value_of(o.scalar));
        break;
      case OpKind::Arange: {
        int64_t start = int_value(o.scalar);
        out.v.resize(static_cast<size_t>(n));
        each_index(out.shape, [&](int64_t flat, const std::vector<int64_t>& idx) {
          out.v[flat] = static_cast<double>(start + idx[static_cast<size_t>(o.axis)]);
        });
        break;
      }
      case OpKind::Map:
      case OpKind::Cast: {
        std::vector<DType> types;
        for (size_t k = 0; k < o.args.size(); ++k) types.push_back(arg_type(o, k));
        int h = elementwise(o, types, o.type.dtype, [&](const std::vector<ir::Expr>& a) {
          if (o.kind == OpKind::Cast) return ir::make_cast(o.type.dtype, a[0]);
          if (o.is_call) return ir::make_call(o.fn, a);
          if (a.size() == 1) return ir::make_unary(o.op, a[0]);
          if (o.op == ir::Op::Select) return ir::make_select(a[0], a[1], a[2]);
          return ir::make_binary(o.op, a[0], a[1]);
        });
        out.v.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
          for (size_t k = 0; k < o.args.size(); ++k)
            set_operand(k, types[k], element(arg(o, k), i));
          out.v[i] = eval_.eval(h);
        }
        break;
      }
      case OpKind::Broadcast:
      case OpKind::Permute: {
        // Axis k of the operand is result axis from[k]: the broadcast's dims, or the inverse of
        // the permutation.
        const Tile& a = arg(o, 0);
        std::vector<size_t> from(a.shape.size());
        for (size_t k = 0; k < from.size(); ++k) {
          if (o.kind == OpKind::Broadcast)
            from[k] = static_cast<size_t>(o.dims[k]);
          else
            from[static_cast<size_t>(o.perm[k])] = k;
        }
        std::vector<int64_t> a_strides = strides_of(a.shape);
        out.v.resize(static_cast<size_t>(n));
        each_index(out.shape, [&](int64_t flat, const std::vector<int64_t>& idx) {
          int64_t src = 0;
          for (size_t k = 0; k < from.size(); ++k) src += idx[from[k]] * a_strides[k];
          out.v[flat] = a.v[src];
        });
        break;
      }
      case OpKind::Dot: {
        const Tile& a = arg(o, 0);
        const Tile& b = arg(o, 1);
        const int64_t M = a.shape[0], K = a.shape[1], N = b.shape[1];
        out.v.assign(static_cast<size_t>(n), 0.0);
        // Integer products are summed exactly (doubles hold the sums of int8 products), floats
        // in f32 when typed, as the tensor cores accumulate.
        const bool typed = mode_ == ir::InterpMode::Typed && is_float(o.type.dtype);
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double acc = 0.0;
            float acc32 = 0.0f;
            for (int64_t k = 0; k < K; ++k) {
              double term = a.v[i * K + k] * b.v[k * N + j];
              if (typed)
                acc32 = static_cast<float>(acc32 + static_cast<float>(term));
              else
                acc += term;
            }
            out.v[i * N + j] = typed ? acc32 : acc;
          }
        break;
      }
      case OpKind::Reduce: {
        const Tile& a = arg(o, 0);
        DType t = o.type.dtype;
        int h = elementwise(o, {t, arg_type(o, 0)}, t, [&](const std::vector<ir::Expr>& v) {
          return ir::combine(o.reducer, v[0], v[1]);
        });
        const int64_t inner =
            count(std::vector<int64_t>(a.shape.begin() + o.axis + 1, a.shape.end()));
        const int64_t len = a.shape[static_cast<size_t>(o.axis)];
        out.v.assign(static_cast<size_t>(n), ir::reducer_identity(o.reducer, t));
        for (int64_t r = 0; r < n; ++r) {
          int64_t outer = r / inner, in = r % inner;
          double acc = out.v[r];
          for (int64_t k = 0; k < len; ++k) {
            set_operand(0, t, acc);
            set_operand(1, arg_type(o, 0), a.v[(outer * len + k) * inner + in]);
            acc = eval_.eval(h);
          }
          out.v[r] = acc;
        }
        break;
      }
      case OpKind::Gather: {
        const GlobalBuf& g = global(o);
        const size_t rank = g.shape.size();
        const Tile* mask = o.args.size() > rank ? &arg(o, rank) : nullptr;
        out.v.assign(static_cast<size_t>(n), 0.0);
        for (int64_t i = 0; i < n; ++i) {
          if (mask && element(*mask, i) == 0.0) continue;
          int64_t off = element_offset(g, "gather of " + o.buffer, [&](size_t d) {
            return static_cast<int64_t>(element(arg(o, d), i));
          });
          out.v[i] = g.values[off];
        }
        break;
      }
    }
    values_[static_cast<size_t>(o.result)] = std::move(out);
  }

 public:
  // The dtype of every value of every kernel (operands' types for the elementwise compiles).
  void record_types() {
    for (const Kernel& k : p_.kernels) {
      std::vector<DType>& types = arg_types_[&k];
      types.assign(static_cast<size_t>(k.num_values), DType::F32);
      std::function<void(const TileBody&)> walk = [&](const TileBody& b) {
        for (const TileStmt& s : b) {
          if (s.kind == StmtKind::For)
            walk(s.body);
          else if (s.op.result >= 0)
            types[static_cast<size_t>(s.op.result)] = s.op.type.dtype;
        }
      };
      walk(k.body);
    }
  }

 private:
  const TileProgram& p_;
  ir::InterpMode mode_;
  ir::ScalarEval eval_;
  runtime::SizeMap sizes_;
  runtime::ParamMap params_;
  std::map<std::string, int> int_slots_;
  int int_operand_[kOperands] = {}, float_operand_[kOperands] = {};
  std::map<const ir::ExprNode*, Scalar> scalars_;
  int next_load_ = 0;
  std::map<const TileOp*, int> elementwise_;
  std::map<const Kernel*, std::vector<DType>> arg_types_;
  std::map<std::string, GlobalBuf> bufs_;
  const Kernel* kernel_ = nullptr;
  std::vector<Tile> values_;
  std::map<std::string, Tile> registers_;
};

}  // namespace

ir::InterpResult interpret(const TileProgram& program, ir::InterpMode mode,
                           const std::map<std::string, const runtime::Tensor*>& inputs,
                           const runtime::SizeMap& sizes, const runtime::ParamMap& params) {
  const runtime::ParamMap every = program.source.param_values(params);
  for (const Kernel& k : program.kernels) {
    check_specialised(program.specialised, k.name, sizes, every);
    check_divisible(program.divisible, k.name, sizes, every);
    check_bounded(program.bounded, k.name, sizes, every);
  }
  Machine m(program, mode, sizes, params);
  m.record_types();
  m.allocate(inputs);
  for (const Kernel& k : program.kernels) m.run_kernel(k);
  return m.outputs();
}

}  // namespace kintsugi::tile
