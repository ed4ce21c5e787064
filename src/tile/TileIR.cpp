// \file TileIR.cpp
// The tile IR's printer (`kintsugi lower --print tile`) and verifier (see TileIR.h).
//
// Printed form, one operation a line:
//   %3 = load K[b, h, j0 * 64:+64?, 0:+128] : f16[64, 128]
// A register prints with its type and, when it is scratch of one loop iteration, that loop:
//   reg s : f32[64, 64] in j0
// A region dimension prints as `start:+extent` when a tile axis spans it (`?` marks a tail that
// may run past the buffer) and as its start alone when it is squeezed.
#include "tile/TileIR.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "ir/IndexBounds.h"
#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "ir/Visit.h"
#include "support/Error.h"

namespace kintsugi::tile {

bool is_register(const TileProgram& p, const std::string& name) {
  for (const Kernel& k : p.kernels)
    for (const Register& r : k.registers)
      if (r.name == name) return true;
  bool allocated = false;
  if (p.source.body)
    ir::visit(p.source.body, [&](const ir::Stmt& s) {
      allocated = allocated || (s->kind == ir::StmtKind::Allocate && s->buffer == name);
      return !allocated;
    });
  return allocated;
}

void check_specialised(const std::map<std::string, Specialisation>& specialised,
                       const std::string& kernel, const std::map<std::string, int64_t>& sizes,
                       const std::map<std::string, double>& params) {
  for (const auto& [text, sp] : specialised) {
    int64_t value = ir::eval_int(sp.extent, sizes, params);
    if (value != sp.value)
      arg_error << "kernel " << kernel << " was generated for " << text << " = " << sp.value
                << " (a tile extent), got " << value << "; compile it again for these "
                << (ir::over_sizes(sp.extent) ? "sizes" : "sizes and params");
  }
}

void check_divisible(const std::map<std::string, Divisibility>& divisible,
                     const std::string& kernel, const std::map<std::string, int64_t>& sizes,
                     const std::map<std::string, double>& params) {
  for (const auto& [text, d] : divisible) {
    int64_t value = ir::eval_int(d.extent, sizes, params);
    if (value % d.divisor != 0)
      arg_error << "kernel " << kernel << " was generated for " << text << " divisible by "
                << d.divisor << " (vector loads, or tiles within runs of it), got " << value
                << "; compile it again for these sizes and params";
  }
}

void check_bounded(const std::map<std::string, PartBound>& bounded, const std::string& kernel,
                   const std::map<std::string, int64_t>& sizes,
                   const std::map<std::string, double>& params) {
  for (const auto& [text, b] : bounded) {
    int64_t part = ir::eval_int(b.part, sizes, params),
            whole = ir::eval_int(b.whole, sizes, params);
    if (part > whole)
      arg_error << "kernel " << kernel << ": index out of bounds: " << b.buffer << " dimension "
                << b.dim << " is read up to index " << ir::to_string(b.part)
                << " - 1 = " << part - 1 << ", not in [0, " << whole << ")";
  }
}

namespace {
int64_t largest_extent(const TileBody& body) {
  int64_t n = 1;
  for (const TileStmt& s : body) {
    if (s.kind == StmtKind::For) n = std::max(n, largest_extent(s.body));
    for (int64_t e : s.op.type.shape) n = std::max(n, e);
  }
  return n;
}
}  // namespace

void prove_int32_divisions(TileProgram& p) {
  p.int32_division_overrun = -1;
  for (const std::string& d : p.source.dims)
    if (!p.sizes.count(d)) return;  // a dynamic size: nothing to prove it at
  int64_t overrun = 1;
  for (const Kernel& k : p.kernels) overrun = std::max(overrun, largest_extent(k.body));
  if (ir::divisions_fit_int32(p.source, p.sizes, overrun)) p.int32_division_overrun = overrun;
}

int64_t TileType::elements() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::string to_string(const TileType& t) {
  std::string out = std::string(dtype_name(t.dtype)) + "[";
  for (size_t k = 0; k < t.shape.size(); ++k) out += (k ? ", " : "") + std::to_string(t.shape[k]);
  return out + "]";
}

namespace {

const char* op_name(ir::Op op) {
  switch (op) {
    case ir::Op::Neg:
      return "neg";
    case ir::Op::Not:
      return "not";
    case ir::Op::Add:
      return "add";
    case ir::Op::Sub:
      return "sub";
    case ir::Op::Mul:
      return "mul";
    case ir::Op::Div:
      return "div";
    case ir::Op::Mod:
      return "mod";
    case ir::Op::Lt:
      return "lt";
    case ir::Op::Le:
      return "le";
    case ir::Op::Gt:
      return "gt";
    case ir::Op::Ge:
      return "ge";
    case ir::Op::Eq:
      return "eq";
    case ir::Op::Ne:
      return "ne";
    case ir::Op::And:
      return "and";
    case ir::Op::Or:
      return "or";
    case ir::Op::Min:
      return "min";
    case ir::Op::Max:
      return "max";
    case ir::Op::Select:
      return "select";
    default:
      return "?";
  }
}

std::string ints(const std::vector<int>& v) {
  std::string out = "(";
  for (size_t k = 0; k < v.size(); ++k) out += (k ? ", " : "") + std::to_string(v[k]);
  return out + ")";
}

std::string v(int id) {
  return "%" + std::to_string(id);
}

std::string region(const TileOp& o) {
  std::string out = o.buffer + "[";
  for (size_t d = 0; d < o.starts.size(); ++d) {
    out += (d ? ", " : "") + ir::to_string(o.starts[d]);
    if (o.axis_of_dim[d] >= 0) {
      const std::vector<int64_t>& shape = o.type.shape;
      out += ":+" + std::to_string(shape[static_cast<size_t>(o.axis_of_dim[d])]);
      if (o.bounds_checked[d]) out += "?";
    }
  }
  return out + "]";
}

std::string op_text(const TileOp& o) {
  std::string res = o.result >= 0 ? v(o.result) + " = " : "";
  std::string ty = " : " + to_string(o.type);
  switch (o.kind) {
    case OpKind::Load:
      return res + "load " + region(o) + ty +
             (o.stream_loop.empty() ? "" : "  stream(" + o.stream_loop + ")");
    case OpKind::Store:
      return "store " + region(o) + " = " + v(o.args[0]) +
             (o.args.size() > 1 ? " mask " + v(o.args[1]) : "") + ty;
    case OpKind::Read:
      return res + "read " + o.buffer + ty;
    case OpKind::Write:
      return "write " + o.buffer + " = " + v(o.args[0]) + ty;
    case OpKind::Full:
      return res + "full " + ir::to_string(o.scalar) + ty;
    case OpKind::Arange:
      return res + "arange " + ir::to_string(o.scalar) + " axis " + std::to_string(o.axis) + ty;
    case OpKind::Map: {
      std::string out = res + (o.is_call ? ir::math_fn_name(o.fn) : op_name(o.op));
      for (size_t k = 0; k < o.args.size(); ++k) out += (k ? ", " : " ") + v(o.args[k]);
      return out + ty;
    }
    case OpKind::Cast:
      return res + "cast " + v(o.args[0]) + ty;
    case OpKind::Broadcast:
      return res + "broadcast " + v(o.args[0]) + " dims " + ints(o.dims) + ty;
    case OpKind::Permute:
      return res + "permute " + v(o.args[0]) + " " + ints(o.perm) + ty;
    case OpKind::Dot:
      return res + "dot " + v(o.args[0]) + ", " + v(o.args[1]) + ty;
    case OpKind::Reduce:
      return res + "reduce " + reducer_name(o.reducer) + " " + v(o.args[0]) + " axis " +
             std::to_string(o.axis) + ty;
    case OpKind::Gather: {
      std::string out = res + "gather " + o.buffer + "[";
      for (size_t k = 0; k < o.args.size(); ++k)
        out += (k ? ", " : "") + v(o.args[k]) +
               (k < o.index_in_bounds.size() && o.index_in_bounds[k] ? " in bounds" : "");
      return out + "]" + ty;
    }
  }
  return "?";
}

class Printer {
 public:
  explicit Printer(std::ostringstream& os) : os_(os) {}

  void body(const TileBody& b, int indent) {
    for (const TileStmt& s : b) {
      std::string pad(static_cast<size_t>(indent) * 2, ' ');
      if (s.kind == StmtKind::For) {
        os_ << pad << "for " << s.var << " in ";
        if (!(s.min->op == ir::Op::IntImm && s.min->int_value == 0))
          os_ << ir::to_string(s.min) << " + ";
        os_ << "range(" << ir::to_string(s.extent) << ")";
        if (s.pipeline_stages > 1) os_ << " pipelined(stages=" << s.pipeline_stages << ")";
        os_ << ":\n";
        body(s.body, indent + 1);
        continue;
      }
      os_ << pad << op_text(s.op) << "\n";
    }
  }

 private:
  std::ostringstream& os_;
};

}  // namespace

std::string to_string(const TileOp& o) {
  return op_text(o);
}

std::string to_string(const TileProgram& p) {
  std::ostringstream os;
  os << "tile program " << p.source.name;
  if (!p.specialised.empty()) {
    os << " (specialised";
    const char* sep = " ";
    for (const auto& [text, sp] : p.specialised) {
      os << sep << text << "=" << sp.value;
      sep = ", ";
    }
    os << ")";
  }
  for (const auto& [text, d] : p.divisible) os << " (" << text << " % " << d.divisor << " == 0)";
  for (const auto& [text, b] : p.bounded) os << " (" << text << ")";
  if (p.int32_division_overrun >= 0) os << " (32-bit divisions)";
  os << "\n";
  Printer printer(os);
  for (const Kernel& k : p.kernels) {
    os << "kernel " << k.name << " grid(";
    for (size_t a = 0; a < k.grid.size(); ++a)
      os << (a ? ", " : "") << k.grid[a].var << ": " << ir::to_string(k.grid[a].extent);
    os << "):\n";
    for (const Register& r : k.registers)
      os << "  reg " << r.name << " : " << to_string(r.type)
         << (r.scope_loop.empty() ? "" : " in " + r.scope_loop) << "\n";
    printer.body(k.body, 1);
  }
  return os.str();
}

// ---------------------------------------------------------------------------------------------
// Verifier

namespace {

class Verifier {
 public:
  Verifier(const TileProgram& p, const Kernel& k)
      : program_(p), kernel_(k), types_(static_cast<size_t>(k.num_values)) {
    for (const Register& r : k.registers) registers_[r.name] = r;
  }

  void body(const TileBody& b) {
    for (const TileStmt& s : b) {
      if (s.kind == StmtKind::For) {
        internal_assert(s.min && s.extent) << "tile loop '" << s.var << "' without bounds";
        // A read from before the loop of a register the loop writes is stale in later iterations.
        std::set<std::string> written;
        writes_in(s.body, &written);
        for (const auto& [id, reg] : read_of_)
          if (written.count(reg)) stale_.insert(id);
        loops_.push_back(s.var);
        body(s.body);
        loops_.pop_back();
      } else {
        op(s.op);
      }
    }
  }

 private:
  static void writes_in(const TileBody& b, std::set<std::string>* out) {
    for (const TileStmt& s : b) {
      if (s.kind == StmtKind::For)
        writes_in(s.body, out);
      else if (s.op.kind == OpKind::Write)
        out->insert(s.op.buffer);
    }
  }

  const TileType& arg(const TileOp& o, size_t k) {
    internal_assert(k < o.args.size()) << "tile op with too few operands";
    int id = o.args[k];
    internal_assert(!stale_.count(id)) << "tile value %" << id << " of kernel " << kernel_.name
                                       << " is a register read used after a write to it";
    internal_assert(id >= 0 && id < kernel_.num_values && defined_.count(id))
        << "tile value %" << id << " used before it is defined in kernel " << kernel_.name;
    return types_[static_cast<size_t>(id)];
  }

  void define(const TileOp& o) {
    internal_assert(o.result >= 0 && o.result < kernel_.num_values && !defined_.count(o.result))
        << "tile value %" << o.result << " defined twice or out of range";
    defined_.insert(o.result);
    types_[static_cast<size_t>(o.result)] = o.type;
  }

  void same_shape(const TileOp& o, const TileType& a) {
    internal_assert(a.shape == o.type.shape)
        << "tile op operand " << to_string(a) << " does not match result " << to_string(o.type);
  }

  void region(const TileOp& o, size_t rank) {
    internal_assert(o.starts.size() == o.axis_of_dim.size() &&
                    o.starts.size() == o.bounds_checked.size())
        << "malformed region of " << o.buffer;
    std::vector<bool> seen(rank, false);
    for (int a : o.axis_of_dim) {
      if (a < 0) continue;
      internal_assert(static_cast<size_t>(a) < rank && !seen[static_cast<size_t>(a)])
          << "region of " << o.buffer << " maps two dimensions to one tile axis";
      seen[static_cast<size_t>(a)] = true;
    }
    for (bool s : seen) internal_assert(s) << "a tile axis of " << o.buffer << " has no dimension";
  }

  void op(const TileOp& o) {
    switch (o.kind) {
      case OpKind::Load:
        region(o, o.type.shape.size());
        break;
      case OpKind::Store:
        same_shape(o, arg(o, 0));
        if (o.args.size() > 1) {
          same_shape(o, arg(o, 1));
          internal_assert(arg(o, 1).dtype == DType::Bool) << "store mask is not bool";
        }
        region(o, o.type.shape.size());
        return;
      case OpKind::Read:
      case OpKind::Write: {
        auto it = registers_.find(o.buffer);
        internal_assert(it != registers_.end()) << "unknown register " << o.buffer;
        const Register& r = it->second;
        internal_assert(r.type.shape == o.type.shape) << "register " << o.buffer << " shape";
        internal_assert(r.scope_loop.empty() ||
                        std::find(loops_.begin(), loops_.end(), r.scope_loop) != loops_.end())
            << "register " << o.buffer << " of kernel " << kernel_.name
            << " is accessed outside its loop " << r.scope_loop;
        if (o.kind == OpKind::Write) {
          same_shape(o, arg(o, 0));
          for (const auto& [id, reg] : read_of_)
            if (reg == o.buffer) stale_.insert(id);
          return;
        }
        read_of_[o.result] = o.buffer;
        break;
      }
      case OpKind::Full:
        internal_assert(o.scalar != nullptr) << "full without a value";
        break;
      case OpKind::Arange:
        internal_assert(o.axis >= 0 && static_cast<size_t>(o.axis) < o.type.shape.size())
            << "arange axis out of range";
        break;
      case OpKind::Map:
        for (size_t k = 0; k < o.args.size(); ++k)
          if (!arg(o, k).shape.empty()) same_shape(o, arg(o, k));
        break;
      case OpKind::Gather: {
        const ir::Buffer* b = program_.source.find_buffer(o.buffer);
        internal_assert(b &&
                        (o.args.size() == b->shape.size() || o.args.size() == b->shape.size() + 1))
            << "gather of " << o.buffer << " needs an index per dimension";
        internal_assert(o.index_in_bounds.size() == b->shape.size())
            << "gather of " << o.buffer << " says of each index whether it is in bounds";
        for (size_t k = 0; k < o.args.size(); ++k) {
          if (!arg(o, k).shape.empty()) same_shape(o, arg(o, k));
          bool mask = k == b->shape.size();
          internal_assert(mask ? arg(o, k).dtype == DType::Bool
                               : !is_float(arg(o, k).dtype) && arg(o, k).dtype != DType::Bool)
              << "gather " << (mask ? "mask" : "index") << " of " << o.buffer
              << " has the wrong type";
        }
        break;
      }
      case OpKind::Cast:
        same_shape(o, arg(o, 0));
        break;
      case OpKind::Broadcast: {
        const TileType& a = arg(o, 0);
        internal_assert(o.dims.size() == a.shape.size()) << "broadcast dims rank";
        for (size_t k = 0; k < o.dims.size(); ++k) {
          internal_assert(o.dims[k] >= 0 && static_cast<size_t>(o.dims[k]) < o.type.shape.size() &&
                          (k == 0 || o.dims[k] > o.dims[k - 1]) &&
                          o.type.shape[static_cast<size_t>(o.dims[k])] == a.shape[k])
              << "broadcast dims do not embed " << to_string(a) << " in " << to_string(o.type);
        }
        break;
      }
      case OpKind::Permute: {
        const TileType& a = arg(o, 0);
        internal_assert(o.perm.size() == a.shape.size()) << "permute rank";
        for (size_t k = 0; k < o.perm.size(); ++k)
          internal_assert(o.type.shape[k] == a.shape[static_cast<size_t>(o.perm[k])])
              << "permute shape";
        break;
      }
      case OpKind::Dot: {
        const TileType& a = arg(o, 0);
        const TileType& b = arg(o, 1);
        internal_assert(a.shape.size() == 2 && b.shape.size() == 2 && o.type.shape.size() == 2)
            << "dot operands must be rank 2, got " << to_string(a) << " and " << to_string(b);
        internal_assert(a.shape[1] == b.shape[0] && o.type.shape[0] == a.shape[0] &&
                        o.type.shape[1] == b.shape[1])
            << "dot shapes " << to_string(a) << " x " << to_string(b) << " -> "
            << to_string(o.type);
        internal_assert(o.type.dtype == DType::F32 ||
                        (is_int(o.type.dtype) && is_int(a.dtype) && is_int(b.dtype)))
            << "dot accumulates floats in f32, integers in an integer type";
        break;
      }
      case OpKind::Reduce: {
        const TileType& a = arg(o, 0);
        internal_assert(o.axis >= 0 && static_cast<size_t>(o.axis) < a.shape.size() &&
                        a.shape.size() == o.type.shape.size() + 1)
            << "reduce axis";
        break;
      }
    }
    define(o);
  }

  const TileProgram& program_;
  const Kernel& kernel_;
  std::vector<TileType> types_;
  std::set<int> defined_;
  std::map<std::string, Register> registers_;
  std::vector<std::string> loops_;      // variables of the loops around the current operation
  std::map<int, std::string> read_of_;  // value -> the register it was read from
  std::set<int> stale_;                 // reads invalidated by a later write
};

}  // namespace

void verify(const TileProgram& p) {
  for (const Kernel& k : p.kernels) {
    Verifier v(p, k);
    v.body(k.body);
  }
}

}  // namespace kintsugi::tile
