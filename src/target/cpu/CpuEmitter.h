// \file CpuEmitter.h
// The C++ emitter shared by the CPU back end's two code generators: the loop IR one
// (CpuCodegen.cpp) and the tile IR one (TileCodegen.cpp). It owns the translation unit's
// frame (prelude, entry point, error sites), the set-up of dims, params and buffers, and the
// typed emission of scalar expressions; a generator supplies the statements (emit_program).
// Internal to src/target/cpu.
#pragma once

#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "ir/Printer.h"
#include "ir/Visit.h"
#include "target/cpu/CpuPrelude.h"

namespace kintsugi::cpu {

using namespace ir;

// Which loops of a top-level nest may run as one collapsed parallel loop (CpuCodegen.cpp).
std::vector<const StmtNode*> parallel_chain(const Stmt& top);
// The buffers allocated by Allocate nodes under s.
std::set<std::string> allocated_under(const Stmt& s);

// ---------------------------------------------------------------------------------------------
// Emission.
// ---------------------------------------------------------------------------------------------

enum class CT { Bool, I64, F32 };

inline CT ctype_of(DType t, const std::string& what) {
  switch (t) {
    case DType::Bool:
      return CT::Bool;
    case DType::Int:
    case DType::I8:
    case DType::I32:
      return CT::I64;
    case DType::F16:
    case DType::BF16:
    case DType::F32:
    case DType::F8E4M3:
    case DType::F8E5M2:
      return CT::F32;
    case DType::Unknown:
      break;
  }
  internal_error << "CPU codegen: untyped expression " << what;
  return CT::I64;
}

inline const char* ctype_name(CT c) {
  switch (c) {
    case CT::Bool:
      return "bool";
    case CT::I64:
      return "int64_t";
    case CT::F32:
      return "float";
  }
  return "?";
}

inline const char* storage_type(DType t) {
  switch (t) {
    case DType::F16:
    case DType::BF16:
      return "uint16_t";
    case DType::F32:
      return "float";
    case DType::I32:
      return "int32_t";
    case DType::I8:
      return "int8_t";
    case DType::F8E4M3:
    case DType::F8E5M2:
      return "uint8_t";
    default:
      break;
  }
  internal_error << "CPU codegen: buffer of non-storage type " << dtype_name(t);
  return "?";
}

struct Val {
  std::string code;
  CT ct;
};

inline std::string convert(const Val& v, CT to) {
  if (v.ct == to) return v.code;
  switch (to) {
    case CT::Bool:
      return v.ct == CT::I64 ? "((" + v.code + ") != 0)" : "((" + v.code + ") != 0.0f)";
    case CT::I64:
      return v.ct == CT::Bool ? "((int64_t)(" + v.code + "))" : "ks_f2i(" + v.code + ")";
    case CT::F32:
      return v.ct == CT::Bool ? "((" + v.code + ") ? 1.0f : 0.0f)" : "((float)(" + v.code + "))";
  }
  return v.code;
}

// Whether `code` is one call of `fn` (its argument list closes at the end of the code).
inline bool one_call(const std::string& code, const std::string& fn) {
  if (code.rfind(fn + "(", 0) != 0 || code.back() != ')') return false;
  int depth = 0;
  for (size_t k = fn.size(); k < code.size(); ++k) {
    depth += code[k] == '(' ? 1 : code[k] == ')' ? -1 : 0;
    if (depth == 0) return k + 1 == code.size();
  }
  return false;
}

// Rounds a value already in its C type to what DType t holds.
inline std::string round_to(const std::string& code, DType t) {
  // (An i8 value saturated already, by a cast of a float, is not saturated again.)
  if (t == DType::I8 && (one_call(code, "ks_sat8") || one_call(code, "ks_f2i8"))) return code;
  switch (t) {
    case DType::F16:
      return "ks_rf16(" + code + ")";
    case DType::BF16:
      return "ks_rbf16(" + code + ")";
    case DType::F8E4M3:
      return "ks_r8e4(" + code + ")";
    case DType::F8E5M2:
      return "ks_r8e5(" + code + ")";
    case DType::I8:
      return "ks_sat8(" + code + ")";
    case DType::I32:
      return "ks_sat32(" + code + ")";
    default:
      return code;
  }
}

// Value `v` cast to DType t: converted to t's C type and rounded to what t holds; a float cast to
// i8 saturates in 32 bits (ks_f2i8).
inline std::string cast_value(const Val& v, DType t) {
  if (t == DType::I8 && v.ct == CT::F32) return "ks_f2i8(" + v.code + ")";
  return round_to(convert(v, ctype_of(t, dtype_name(t))), t);
}

// The f32 value of element `raw` of a float buffer of type t (a C expression of its storage).
inline std::string float_of_storage(const std::string& raw, DType t) {
  switch (t) {
    case DType::F16:
      return "ks_h2f(" + raw + ")";
    case DType::BF16:
      return "ks_b2f(" + raw + ")";
    case DType::F8E4M3:
      return "ks_e4m32f(" + raw + ")";
    case DType::F8E5M2:
      return "ks_e5m22f(" + raw + ")";
    default:
      return raw;
  }
}

inline std::string int_literal(int64_t v) {
  if (v == INT64_MIN) return "INT64_MIN";
  std::string s = "INT64_C(" + std::to_string(v) + ")";
  return s;
}

inline std::string float_literal(double v) {  // v is representable as a float
  if (std::isnan(v)) return "__builtin_nanf(\"\")";
  if (std::isinf(v)) return v > 0 ? "__builtin_inff()" : "(-__builtin_inff())";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%af", v);
  return v < 0 || std::signbit(v) ? std::string("(") + buf + ")" : std::string(buf);
}

inline std::string c_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f || c == '?') {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\%03o", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// An injective map from IR names to C++ identifiers with a per-kind prefix.
inline std::string ident(const char* prefix, const std::string& name) {
  bool plain = !name.empty();
  for (unsigned char c : name)
    if (!std::isalnum(c) && c != '_') plain = false;
  if (plain) return std::string(prefix) + "_" + name;
  std::string out = std::string(prefix) + "x_";
  for (unsigned char c : name) {
    if (std::isalnum(c)) {
      out += static_cast<char>(c);
    } else if (c == '_') {
      out += "__";
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "_%02x", c);
      out += buf;
    }
  }
  return out;
}

struct BufInfo {
  const Buffer* buf = nullptr;
  std::string id;
  std::vector<std::string> shape;  // C identifiers of the extents
};

struct VarInfo {
  std::string id;
  Expr extent;  // non-null when the variable is known to lie in [0, extent)
};

struct Scope {
  std::map<std::string, VarInfo> vars;
  bool barrier = false;  // a block: nothing outside is visible
};

class Codegen {
 public:
  explicit Codegen(const LoopProgram& p) : p_(p) {}
  virtual ~Codegen() = default;

  std::string run() {
    setup();
    emit_program();
    std::ostringstream src;
    src << "// Generated by Kintsugi's CPU back end for program `" << p_.name << "`.\n";
    src << "// Loop IR:\n";
    std::istringstream ir_text(to_string(p_));
    for (std::string line; std::getline(ir_text, line);) {
      for (char& c : line)
        if (c == '\\') c = '/';  // no line splicing inside the comment
      src << "//   " << line << "\n";
    }
    src << cpu_prelude() << "\n";
    src << "namespace {\n\nconst char* const ks_sites[] = {\n";
    for (const std::string& s : sites_) src << "    " << c_string(s) << ",\n";
    src << "    nullptr};\n\n";
    src << "int ks_body(KsErr* ks_e, void* const* ks_bufs, const int64_t* ks_sizes,\n"
           "            const double* ks_params) {\n";
    src << "  (void)ks_bufs;\n  (void)ks_sizes;\n  (void)ks_params;\n";
    src << head_.str() << body_.str();
    src << "  return 0;\n}\n\n}  // namespace\n\n";
    src << "extern \"C\" __attribute__((visibility(\"default\"))) int kintsugi_entry(\n"
           "    void* const* buffers, const int64_t* sizes, const double* params, char* err,\n"
           "    int64_t err_len) {\n"
           "  KsErr e;\n"
           "  e.failed = 0;\n"
           "  e.msg = err;\n"
           "  e.len = err_len;\n"
           "  e.sites = ks_sites;\n"
           "  if (err && err_len > 0) err[0] = 0;\n"
           "  int rc = ks_body(&e, buffers, sizes, params);\n"
           "  if (rc == 0 && e.failed) rc = 1;\n"
           "  if (rc != 0 && err && err_len > 0 && err[0] == 0)\n"
           "    snprintf(err, (size_t)err_len, \"kernel failed\");\n"
           "  return rc;\n"
           "}\n\n"
           "// Starts the team's threads, so that the first call does not pay for creating them\n"
           "// (nor for each thread's first allocation, which sets up its malloc arena, nor for\n"
           "// what prepares a thread for the kernels); returns the team's size. (The region\n"
           "// counts its threads: the compiler removes an empty region, and a malloc freed at\n"
           "// once.)\n"
           "extern \"C\" __attribute__((visibility(\"default\"))) int kintsugi_start_threads(void) "
           "{\n"
           "  int started = 0;\n"
           "#pragma omp parallel num_threads(ks_threads())\n"
           "  {\n"
           "    void* volatile arena = malloc(64);\n"
           "    free(arena);\n"
           "    "
        << prepare_thread()
        << "\n"
           "#pragma omp atomic\n"
           "    started++;\n"
           "  }\n"
           "  return started;\n"
           "}\n";
    return src.str();
  }

 protected:
  // The statements of ks_body after setup (the loop IR by default).
  virtual void emit_program() { emit_top(p_.body); }
  // What each thread of the team runs once when the kernel is loaded (after emit_program).
  virtual std::string prepare_thread() const { return ""; }
  // Whether intermediate `b` needs memory (the code reads or writes it there).
  virtual bool in_memory(const Buffer&) const { return true; }

  const LoopProgram& p_;
  std::ostringstream head_, body_;
  std::ostringstream* out_ = &head_;
  int indent_ = 1;
  std::vector<std::string> sites_;
  std::map<std::string, int> site_index_;
  std::map<std::string, BufInfo> bufs_;
  std::map<std::string, std::string> dims_;
  std::map<std::string, std::pair<std::string, CT>> params_;
  std::vector<Scope> scopes_;
  bool fallible_ = false;
  std::string fail_ = "return 1;";
  bool in_parallel_ = false;
  int tmp_ = 0;
  std::set<std::string> scoped_;  // buffers allocated by Allocate nodes, not at kernel entry

  void line(const std::string& s) { *out_ << std::string(indent_ * 2, ' ') << s << "\n"; }
  std::string tmp() { return "ks_t" + std::to_string(tmp_++); }
  int site(const std::string& text) {
    auto it = site_index_.find(text);
    if (it != site_index_.end()) return it->second;
    int id = static_cast<int>(sites_.size());
    sites_.push_back(text);
    site_index_[text] = id;
    return id;
  }
  void check_failed() {
    if (fallible_) line("KS_CHECK(" + fail_ + ")");
    fallible_ = false;
  }
  // Failure handling: helpers record the first error in the local `ks_l` and return a safe value
  // (a checked load yields 0, a checked store is skipped, a division by zero yields 0), so no
  // statement needs an immediate exit. `ks_l` is flushed to the shared KsErr (and the function
  // or parallel iteration left) at the top of each iteration of every loop that contains a
  // loop, after every top-level statement and at the end of each parallel iteration; innermost
  // loops hold no check and can vectorise.

  // Dims, params, buffer shapes and pointers, intermediate allocations.
  void setup() {
    line("KsLocal ks_l = {};");
    for (size_t i = 0; i < p_.dims.size(); ++i) {
      std::string id = ident("d", p_.dims[i]);
      internal_assert(!dims_.count(p_.dims[i])) << "duplicate dim " << p_.dims[i];
      dims_[p_.dims[i]] = id;
      line("const int64_t " + id + " = ks_sizes[" + std::to_string(i) + "];");
    }
    for (size_t i = 0; i < p_.params.size(); ++i) {
      const Param& prm = p_.params[i];
      std::string id = ident("p", prm.name);
      std::string src = "ks_params[" + std::to_string(i) + "]";
      CT ct = ctype_of(prm.dtype, "param " + prm.name);
      std::string init;
      if (ct == CT::F32)
        init = round_to("(float)" + src, prm.dtype);
      else if (ct == CT::I64)
        init = round_to("ks_d2i(" + src + ")", prm.dtype);
      else
        init = "(" + src + " != 0.0)";
      params_[prm.name] = {id, ct};
      line(std::string("const ") + ctype_name(ct) + " " + id + " = " + init + ";");
    }
    for (size_t k = 0; k < p_.buffers.size(); ++k) {
      const Buffer& b = p_.buffers[k];
      internal_assert(!bufs_.count(b.name)) << "duplicate buffer " << b.name;
      BufInfo info;
      info.buf = &b;
      info.id = ident("b", b.name);
      for (size_t d = 0; d < b.shape.size(); ++d) {
        std::string id = "ks_sh" + std::to_string(k) + "_" + std::to_string(d);
        Val v = expr(b.shape[d]);
        line("const int64_t " + id + " = " + convert(v, CT::I64) + ";");
        info.shape.push_back(id);
      }
      bufs_[b.name] = info;
    }
    check_failed();
    scoped_ = allocated_under(p_.body);
    int arg = 0, n_inter = 0;
    for (const Buffer& b : p_.buffers)
      n_inter += b.role == BufferRole::Intermediate && !scoped_.count(b.name) && in_memory(b);
    if (n_inter) {
      line("void* ks_mem[" + std::to_string(n_inter) + "] = {};");
      line("KsFree ks_free{ks_mem, " + std::to_string(n_inter) + "};");
    }
    int inter = 0;
    for (const Buffer& b : p_.buffers) {
      const BufInfo& info = bufs_[b.name];
      std::string ty = storage_type(b.dtype);
      if (b.role != BufferRole::Intermediate) {
        line(ty + "* __restrict__ " + info.id + " = (" + ty + "*)ks_bufs[" + std::to_string(arg++) +
             "];");
        continue;
      }
      if (scoped_.count(b.name)) continue;  // allocated where its Allocate node is
      if (!in_memory(b)) {
        line(ty + "* __restrict__ " + info.id + " = nullptr;  // never loaded or stored");
        continue;
      }
      std::string shape = "ks_shape_" + std::to_string(inter);
      std::string dims;
      for (size_t d = 0; d < info.shape.size(); ++d) dims += (d ? ", " : "") + info.shape[d];
      line("const int64_t " + shape + "[] = {" + (dims.empty() ? "1" : dims) + "};");
      line(ty + "* __restrict__ " + info.id + " = (" + ty + "*)ks_alloc(ks_e, &ks_mem[" +
           std::to_string(inter) + "], " + std::to_string(site(b.name)) + ", " +
           std::to_string(dtype_bytes(b.dtype)) + ", " + std::to_string(info.shape.size()) + ", " +
           shape + ");");
      line("if (!" + info.id + ") return 1;");
      ++inter;
    }
    out_ = &body_;
  }

  const VarInfo* lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->vars.find(name);
      if (f != it->vars.end()) return &f->second;
      if (it->barrier) break;
    }
    return nullptr;
  }

  const BufInfo& buffer(const std::string& name, size_t rank) {
    auto it = bufs_.find(name);
    internal_assert(it != bufs_.end()) << "CPU codegen: unknown buffer " << name;
    internal_assert(it->second.shape.size() == rank)
        << "CPU codegen: buffer " << name << " has rank " << it->second.shape.size()
        << " but is accessed with " << rank << " indices";
    return it->second;
  }

  bool proven_in_bounds(const Expr& ix, const Expr& extent) const {
    if (ix->op == Op::IntImm)
      return extent->op == Op::IntImm && ix->int_value >= 0 && ix->int_value < extent->int_value;
    if (ix->op != Op::Var || ix->var_kind != VarKind::Index) return false;
    const VarInfo* v = lookup(ix->name);
    return v && v->extent && equal(v->extent, extent);
  }

  // The element access `id[linear]` of buffer b at indices whose C++ code is `ix`, and the
  // bounds check (empty when every index is proven in range).
  std::pair<std::string, std::string> access(const BufInfo& b, const std::vector<Expr>& indices,
                                             const std::vector<std::string>& ix,
                                             const std::string& text) {
    std::string lin, cond;
    for (size_t d = 0; d < indices.size(); ++d) {
      lin = d == 0 ? ix[d] : "(" + lin + ") * " + b.shape[d] + " + " + ix[d];
      if (!proven_in_bounds(indices[d], b.buf->shape[d])) {
        cond += std::string(cond.empty() ? "" : " && ") + "ks_chk(ks_l, " + ix[d] + ", " +
                b.shape[d] + ", " + std::to_string(site(text)) + ", " + std::to_string(d) + ")";
      }
    }
    if (indices.empty()) lin = "0";
    return {b.id + "[" + lin + "]", cond};
  }

  Val load(const Expr& e) {
    const BufInfo& b = buffer(e->name, e->args.size());
    std::vector<std::string> ix;
    for (const Expr& a : e->args) ix.push_back(convert(expr(a), CT::I64));
    auto [acc, cond] = access(b, e->args, ix, to_string(e));
    if (!cond.empty()) fallible_ = true;
    DType t = b.buf->dtype;
    Val v;
    if (is_float(t))
      v = {float_of_storage(acc, t), CT::F32};
    else
      v = {"((int64_t)" + acc + ")", CT::I64};
    if (!cond.empty())
      v.code =
          "((" + cond + ") ? " + v.code + " : " + (v.ct == CT::F32 ? "0.0f" : "INT64_C(0)") + ")";
    if (e->type != t && e->type != DType::Unknown) {
      CT want = ctype_of(e->type, to_string(e));
      v = {round_to(convert(v, want), e->type), want};
    }
    return v;
  }

  // Result of an operation computed in C type `c`, converted and rounded to the node's type.
  Val finish(const Expr& e, const std::string& code, CT c) {
    CT want = ctype_of(e->type, to_string(e));
    return {round_to(convert({code, c}, want), e->type), want};
  }

  Val expr(const Expr& e) {
    internal_assert(e) << "CPU codegen: null expression";
    switch (e->op) {
      case Op::IntImm:
        return {int_literal(e->int_value), CT::I64};
      case Op::BoolImm:
        return {e->int_value ? "true" : "false", CT::Bool};
      case Op::FloatImm: {
        DType t = is_float(e->type) ? e->type : DType::F32;
        return {float_literal(round_to_dtype(e->float_value, t)), CT::F32};
      }
      case Op::Var: {
        if (e->var_kind == VarKind::Dim) {
          auto it = dims_.find(e->name);
          internal_assert(it != dims_.end()) << "CPU codegen: unknown dim " << e->name;
          return {it->second, CT::I64};
        }
        if (e->var_kind == VarKind::Param) {
          auto it = params_.find(e->name);
          internal_assert(it != params_.end()) << "CPU codegen: unknown param " << e->name;
          return {it->second.first, it->second.second};
        }
        const VarInfo* v = lookup(e->name);
        internal_assert(v) << "CPU codegen: variable " << e->name << " is not visible here";
        return {v->id, CT::I64};
      }
      case Op::Load:
        return load(e);
      case Op::Neg: {
        Val a = expr(e->args[0]);
        CT c = a.ct == CT::F32 ? CT::F32 : CT::I64;
        return finish(e, "(-" + convert(a, c) + ")", c);
      }
      case Op::Not:
        return {"(!" + convert(expr(e->args[0]), CT::Bool) + ")", CT::Bool};
      case Op::Add:
      case Op::Sub:
      case Op::Mul:
      case Op::Div:
      case Op::Mod:
      case Op::Min:
      case Op::Max:
      case Op::Lt:
      case Op::Le:
      case Op::Gt:
      case Op::Ge:
      case Op::Eq:
      case Op::Ne:
        return binary(e);
      case Op::And:
      case Op::Or: {
        std::string a = convert(expr(e->args[0]), CT::Bool);
        std::string b = convert(expr(e->args[1]), CT::Bool);
        return {"(" + a + (e->op == Op::And ? " && " : " || ") + b + ")", CT::Bool};
      }
      case Op::Call:
        return call(e);
      case Op::Cast: {
        Val a = expr(e->args[0]);
        return {cast_value(a, e->type), ctype_of(e->type, to_string(e))};
      }
      case Op::Select: {
        std::string c = convert(expr(e->args[0]), CT::Bool);
        CT want = ctype_of(e->type, to_string(e));
        std::string t = convert(expr(e->args[1]), want);
        std::string f = convert(expr(e->args[2]), want);
        return {round_to("(" + c + " ? " + t + " : " + f + ")", e->type), want};
      }
      case Op::Reduce:
        break;
    }
    internal_error << "CPU codegen: unexpected expression " << to_string(e) << " in loop IR";
    return {"", CT::I64};
  }

  Val binary(const Expr& e) {
    Val a = expr(e->args[0]), b = expr(e->args[1]);
    bool fl = a.ct == CT::F32 || b.ct == CT::F32 || (!is_comparison(e->op) && is_float(e->type));
    CT c = fl ? CT::F32 : CT::I64;
    std::string x = convert(a, c), y = convert(b, c);
    if (is_comparison(e->op)) return {"(" + x + " " + op_symbol(e->op) + " " + y + ")", CT::Bool};
    std::string code;
    switch (e->op) {
      case Op::Add:
      case Op::Sub:
      case Op::Mul:
        code = "(" + x + " " + op_symbol(e->op) + " " + y + ")";
        break;
      case Op::Div:
      case Op::Mod: {
        bool div = e->op == Op::Div;
        if (fl) {
          code = div ? "(" + x + " / " + y + ")" : "ks_fmodf(" + x + ", " + y + ")";
        } else if (e->args[1]->op == Op::IntImm && e->args[1]->int_value != 0) {
          code = std::string(div ? "ks_fdivc(" : "ks_fmodc(") + x + ", " + y + ")";
        } else {
          fallible_ = true;
          code = std::string(div ? "ks_fdiv(ks_l, " : "ks_fmod(ks_l, ") + x + ", " + y + ", " +
                 std::to_string(site(to_string(e))) + ")";
        }
        break;
      }
      case Op::Min:
        code = std::string(fl ? "ks_fmin(" : "ks_imin(") + x + ", " + y + ")";
        break;
      case Op::Max:
        code = std::string(fl ? "ks_fmax(" : "ks_imax(") + x + ", " + y + ")";
        break;
      default:
        internal_error << "CPU codegen: bad binary op in " << to_string(e);
    }
    return finish(e, code, c);
  }

  Val call(const Expr& e) {
    std::vector<Val> args;
    bool fl = is_float(e->type);
    for (const Expr& a : e->args) {
      args.push_back(expr(a));
      fl = fl || args.back().ct == CT::F32;
    }
    CT c = fl ? CT::F32 : CT::I64;
    std::vector<std::string> x;
    for (const Val& v : args) x.push_back(convert(v, c));
    size_t want_args = e->fn == MathFn::Pow ? 2 : (e->fn == MathFn::Clamp ? 3 : 1);
    internal_assert(x.size() == want_args)
        << "CPU codegen: " << math_fn_name(e->fn) << " with " << x.size() << " arguments";
    if (!fl) {
      switch (e->fn) {
        case MathFn::Abs:
          return finish(e, "ks_iabs(" + x[0] + ")", c);
        case MathFn::Round:
          return finish(e, x[0], c);
        case MathFn::Clamp:
          return finish(e, "ks_imin(ks_imax(" + x[0] + ", " + x[1] + "), " + x[2] + ")", c);
        default:
          internal_error << "CPU codegen: " << math_fn_name(e->fn) << " of an integer in "
                         << to_string(e);
      }
    }
    std::string code;
    switch (e->fn) {
      case MathFn::Exp:
        code = "expf(" + x[0] + ")";
        break;
      case MathFn::Exp2:
        code = "exp2f(" + x[0] + ")";
        break;
      case MathFn::Log:
        code = "logf(" + x[0] + ")";
        break;
      case MathFn::Log2:
        code = "log2f(" + x[0] + ")";
        break;
      case MathFn::Tanh:
        code = "tanhf(" + x[0] + ")";
        break;
      case MathFn::Sigmoid:
        code = "(1.0f / (1.0f + expf(-" + x[0] + ")))";
        break;
      case MathFn::Erf:
        code = "erff(" + x[0] + ")";
        break;
      case MathFn::Sqrt:
        code = "sqrtf(" + x[0] + ")";
        break;
      case MathFn::Rsqrt:
        code = "(1.0f / sqrtf(" + x[0] + "))";
        break;
      case MathFn::Abs:
        code = "fabsf(" + x[0] + ")";
        break;
      case MathFn::Pow:
        code = "powf(" + x[0] + ", " + x[1] + ")";
        break;
      case MathFn::Round:
        code = "rintf(" + x[0] + ")";
        break;
      case MathFn::Clamp:
        code = "ks_fmin(ks_fmax(" + x[0] + ", " + x[1] + "), " + x[2] + ")";
        break;
    }
    return finish(e, code, c);
  }

  std::string store_value(const Val& v, DType t) {
    switch (t) {
      case DType::F32:
        return convert(v, CT::F32);
      case DType::F16:
        return "ks_f2h(" + convert(v, CT::F32) + ")";
      case DType::BF16:
        return "ks_f2b(" + convert(v, CT::F32) + ")";
      case DType::F8E4M3:
        return "ks_f2e4m3(" + convert(v, CT::F32) + ")";
      case DType::F8E5M2:
        return "ks_f2e5m2(" + convert(v, CT::F32) + ")";
      case DType::I32:
        return "(int32_t)ks_sat32(" + convert(v, CT::I64) + ")";
      case DType::I8:
        return "(int8_t)" + cast_value(v, DType::I8);
      default:
        break;
    }
    internal_error << "CPU codegen: store to buffer of type " << dtype_name(t);
    return "";
  }

  // Top level: each loop nest gets the parallel analysis.
  void emit_top(const Stmt& s) {
    if (!s) return;
    if (s->kind == StmtKind::Seq) {
      for (const Stmt& c : s->stmts) emit_top(c);
      return;
    }
    if (s->kind == StmtKind::Allocate) {
      allocate(s, [&] { emit_top(s->body); });
      return;
    }
    std::vector<const StmtNode*> chain;
    if (s->kind == StmtKind::For) chain = parallel_chain(s);
    if (!chain.empty())
      emit_parallel(chain);
    else
      stmt(s);
    line("KS_CHECK(return 1;)");
  }

  static bool contains_loop(const Stmt& s) {
    bool found = false;
    visit(s, [&](const Stmt& n) {
      found = found || n->kind == StmtKind::For;
      return !found;
    });
    return found;
  }

  // A collapsed parallel loop over `chain`. Each iteration has its own KsLocal, flushed at its
  // end; an iteration starting after a failure does nothing (OpenMP forbids leaving the loop).
  // Inside, failures never exit early: the helpers' safe values keep every access in bounds.
  // When the chain reaches the innermost loop and has more than one loop, the innermost loop
  // stays serial inside the iteration so that it can vectorise.
  void emit_parallel(std::vector<const StmtNode*> chain) {
    if (chain.size() > 1 && !contains_loop(chain.back()->body)) chain.pop_back();
    line("{");
    ++indent_;
    std::vector<std::pair<std::string, std::string>> bounds;
    for (const StmtNode* f : chain) {
      std::string lo = tmp(), hi = tmp();
      line("const int64_t " + lo + " = " + convert(expr(f->min), CT::I64) + ";");
      line("const int64_t " + hi + " = " + lo + " + " + convert(expr(f->extent), CT::I64) + ";");
      bounds.push_back({lo, hi});
    }
    line("#pragma omp parallel for collapse(" + std::to_string(chain.size()) +
         ") schedule(static) num_threads(ks_threads())");
    Scope scope;
    for (size_t i = 0; i < chain.size(); ++i) {
      const StmtNode* f = chain[i];
      std::string id = ident("v", f->var);
      line("for (int64_t " + id + " = " + bounds[i].first + "; " + id + " < " + bounds[i].second +
           "; ++" + id + ")" + (i + 1 == chain.size() ? " {" : ""));
      bool zero_min = f->min->op == Op::IntImm && f->min->int_value == 0;
      scope.vars[f->var] = {id, zero_min ? f->extent : nullptr};
    }
    ++indent_;
    line("if (KS_FAILED(ks_e)) continue;");
    line("KsLocal ks_l = {};");
    bool saved_par = in_parallel_;
    in_parallel_ = true;
    scopes_.push_back(scope);
    stmt(chain.back()->body);
    scopes_.pop_back();
    in_parallel_ = saved_par;
    line("if (__builtin_expect(ks_l.bad, 0)) ks_flush(ks_e, ks_l);");
    --indent_;
    line("}");
    line("if (KS_FAILED(ks_e)) " + fail_);
    --indent_;
    line("}");
  }

  void stmt(const Stmt& s) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::Seq:
        for (const Stmt& c : s->stmts) stmt(c);
        return;
      case StmtKind::For: {
        if (s->for_kind == ForKind::Parallel && !in_parallel_) {
          emit_parallel({s.get()});
          return;
        }
        std::string lo = tmp(), hi = tmp(), id = ident("v", s->var);
        line("{");
        ++indent_;
        line("const int64_t " + lo + " = " + convert(expr(s->min), CT::I64) + ";");
        line("const int64_t " + hi + " = " + lo + " + " + convert(expr(s->extent), CT::I64) + ";");
        line("for (int64_t " + id + " = " + lo + "; " + id + " < " + hi + "; ++" + id + ") {");
        ++indent_;
        if (!in_parallel_ && contains_loop(s->body)) line("KS_CHECK(" + fail_ + ")");
        Scope scope;
        bool zero_min = s->min->op == Op::IntImm && s->min->int_value == 0;
        scope.vars[s->var] = {id, zero_min ? s->extent : nullptr};
        scopes_.push_back(scope);
        stmt(s->body);
        scopes_.pop_back();
        --indent_;
        line("}");
        --indent_;
        line("}");
        return;
      }
      case StmtKind::Block:
        return block(s);
      case StmtKind::Store: {
        const BufInfo& b = buffer(s->buffer, s->indices.size());
        std::string text = s->buffer + "[";
        for (size_t i = 0; i < s->indices.size(); ++i)
          text += (i ? ", " : "") + to_string(s->indices[i]);
        text += "]";
        std::vector<std::string> ix;
        for (const Expr& i : s->indices) {
          Val v = expr(i);
          if (i->op == Op::Var || i->op == Op::IntImm) {
            ix.push_back(convert(v, CT::I64));
          } else {
            ix.push_back(tmp());
            line("const int64_t " + ix.back() + " = " + convert(v, CT::I64) + ";");
          }
        }
        auto [acc, cond] = access(b, s->indices, ix, text);
        Val v = expr(s->value);
        if (cond.empty())
          line(acc + " = " + store_value(v, b.buf->dtype) + ";");
        else
          line("if (" + cond + ") " + acc + " = " + store_value(v, b.buf->dtype) + ";");
        return;
      }
      case StmtKind::If: {
        std::string c = convert(expr(s->cond), CT::Bool);
        line("if (" + c + ") {");
        ++indent_;
        stmt(s->then_case);
        --indent_;
        if (s->else_case) {
          line("} else {");
          ++indent_;
          stmt(s->else_case);
          --indent_;
        }
        line("}");
        return;
      }
      case StmtKind::Allocate:
        return allocate(s, [&] { stmt(s->body); });
    }
  }

  // An Allocate: the buffer is declared in a C++ scope around the body, so that each execution
  // (each iteration of a parallel loop, in each thread) has its own storage. A constant shape
  // of at most 64 KiB lives on the stack; anything else is malloc'd on entry and freed on every
  // exit of the scope (a failed allocation records the error and skips the body).
  template <typename Body>
  void allocate(const Stmt& s, Body emit_body) {
    const BufInfo& info = bufs_.at(s->buffer);
    const Buffer& b = *info.buf;
    std::string ty = storage_type(b.dtype);
    int64_t n = 1;
    bool constant = true;
    for (const Expr& e : b.shape) {
      if (e->op != Op::IntImm || e->int_value < 0 || e->int_value > (int64_t(1) << 20)) {
        constant = false;
        break;
      }
      n *= e->int_value;
      if (n > (int64_t(1) << 20)) constant = false;
    }
    bool stack = constant && n * dtype_bytes(b.dtype) <= 64 * 1024;
    line("{  // alloc " + s->buffer);
    ++indent_;
    if (stack) {
      std::string arr = tmp();
      line("alignas(64) " + ty + " " + arr + "[" + std::to_string(n > 0 ? n : 1) + "];");
      line(ty + "* __restrict__ " + info.id + " = " + arr + ";");
      emit_body();
    } else {
      std::string mem = tmp(), fr = tmp(), shape = tmp();
      std::string dims;
      for (size_t d = 0; d < info.shape.size(); ++d) dims += (d ? ", " : "") + info.shape[d];
      line("void* " + mem + " = nullptr;");
      line("KsFree " + fr + "{&" + mem + ", 1};");
      line("const int64_t " + shape + "[] = {" + (dims.empty() ? "1" : dims) + "};");
      line(ty + "* __restrict__ " + info.id + " = (" + ty + "*)ks_alloc(ks_e, &" + mem + ", " +
           std::to_string(site(b.name)) + ", " + std::to_string(dtype_bytes(b.dtype)) + ", " +
           std::to_string(info.shape.size()) + ", " + shape + ");");
      line("if (" + info.id + ") {");
      ++indent_;
      emit_body();
      --indent_;
      line("}");
    }
    --indent_;
    line("}");
  }

  void block(const Stmt& s) {
    line("{  // block " + s->name);
    ++indent_;
    if (s->predicate) {
      line("if (" + convert(expr(s->predicate), CT::Bool) + ") {");
      ++indent_;
    }
    std::vector<std::string> temps;
    for (const IterVar& iv : s->iters) {
      internal_assert(iv.binding) << "CPU codegen: iteration variable " << iv.name << " of block "
                                  << s->name << " has no binding";
      std::string t = tmp();
      line("const int64_t " + t + " = " + convert(expr(iv.binding), CT::I64) + ";");
      temps.push_back(t);
    }
    Scope scope;
    scope.barrier = true;
    line("{");
    ++indent_;
    std::string init_cond;
    for (size_t i = 0; i < s->iters.size(); ++i) {
      const IterVar& iv = s->iters[i];
      std::string id = ident("v", iv.name);
      line("const int64_t " + id + " = " + temps[i] + ";");
      scope.vars[iv.name] = {id, iv.extent};
      if (iv.kind != IterKind::Spatial)
        init_cond += std::string(init_cond.empty() ? "" : " && ") + id + " == 0";
    }
    scopes_.push_back(scope);
    if (s->init) {
      if (init_cond.empty()) {
        stmt(s->init);
      } else {
        line("if (" + init_cond + ") {");
        ++indent_;
        stmt(s->init);
        --indent_;
        line("}");
      }
    }
    stmt(s->body);
    scopes_.pop_back();
    --indent_;
    line("}");
    if (s->predicate) {
      --indent_;
      line("}");
    }
    --indent_;
    line("}");
  }
};

}  // namespace kintsugi::cpu
