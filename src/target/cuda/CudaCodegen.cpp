// \file CudaCodegen.cpp
// Tile IR -> CUDA C++ (generate_cuda_source in CudaBackend.h): each kernel goes to the
// tensor-core writer (FragmentCodegen.cpp) when it takes it, else to the element-cyclic writer
// below, which is correct for every tile kernel.
//
// Layout: an instance of a kernel's grid runs on N threads (threads_for: 128, more for wide
// tiles; 8 to 32 lanes of a warp, several instances a CTA, for short rows: instances_per_cta_for).
// An array-valued
// tile of E elements (row-major order) is cut into chunks of W consecutive elements, W the chunk
// width of its shape (chunk_width: 8, 4 or 2 when that divides the innermost extent and leaves
// every thread a chunk, else 1), and the chunks are dealt out cyclically: entry k * W + w of
// thread t holds element (t + k * N) * W + w. Tiles of one shape share the layout, so elementwise
// operations need no communication; consecutive threads touch consecutive chunks of the innermost
// axis (coalesced), and a load whose rows are aligned runs of the buffer's innermost dimension
// reads a chunk with one vector load. Scalar-shaped values are plain variables every thread holds.
// Reductions reduce within a thread and a warp first where the layout keeps what they combine there
// (reduce_scalar, reduce_innermost, reduce_leading); otherwise, and for broadcast, permute and dot,
// operands are staged in shared memory between two barriers. A barrier after every store makes the
// stored elements visible to the loads that follow. Loops are uniform across a grid instance's
// threads (their bounds depend only on grid variables, sizes and params; an instance is a CTA, or
// lanes of a warp whose barrier and shuffles name those lanes), so barriers and shuffles inside
// them are safe.
//
// Invariant established: the generated kernels compute what the tile IR means (TileIR.h): loads
// past a buffer's extent read 0, stores write only inside the buffer and where the mask holds, a
// squeezed index out of range or an integer division by zero records an error site instead of
// touching memory; registers start zeroed.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "ir/Visit.h"
#include "target/cuda/Fragments.h"
#include "target/cuda/KernelWriter.h"
#include "tile/passes/Walk.h"

namespace kintsugi::cuda {

namespace {

using ir::Expr;
using ir::Op;
using tile::OpKind;
using tile::TileOp;

int64_t elements_of(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

// The chunk width of a tile shape's layout over `threads` threads (see the file comment), at
// most `widest`.
int64_t chunk_width(const std::vector<int64_t>& shape, int threads, int64_t widest) {
  if (shape.empty()) return 1;
  for (int64_t w : {8, 4, 2})
    if (w <= widest && shape.back() % w == 0 && elements_of(shape) / w >= threads) return w;
  return 1;
}

// The widest chunk of each tile shape's layout in a kernel: 16 bytes of the widest element loaded
// or stored in that shape (8 f16, 4 f32), so that the chunks of consecutive threads are
// consecutive 16-byte pieces of a row and a warp's access is one contiguous run. (A chunk of 8
// f32 is two pieces 32 bytes apart from the next thread's: on the H200 an f32 softmax row held
// whole moved 4x its DRAM traffic through L2, which ran at 80 % of its throughput against 25 %
// for DRAM.) Shapes no load or store has keep chunks of up to 8.
std::map<std::vector<int64_t>, int64_t> widest_chunks(const tile::TileProgram& p,
                                                      const tile::Kernel& k) {
  std::map<std::vector<int64_t>, int> bytes;
  tile::for_each_op(k.body, [&](const TileOp& o) {
    if (o.kind != OpKind::Load && o.kind != OpKind::Store) return;
    if (const ir::Buffer* b = p.source.find_buffer(o.buffer))
      bytes[o.type.shape] = std::max(bytes[o.type.shape], dtype_bytes(b->dtype));
  });
  std::map<std::vector<int64_t>, int64_t> out;
  for (const auto& [shape, b] : bytes) out[shape] = std::clamp<int64_t>(16 / b, 1, 8);
  return out;
}

// Threads per CTA: kThreads, and for a kernel whose instances walk a loop of tiles (a split-K
// combine, a row of a norm) twice that, up to kMaxThreads, while every thread still holds at least
// kMinPerThread elements of the kernel's largest tile. Such an instance is a serial chain of loads
// and barriers, and few instances run at once (a combine has one per block of output columns):
// more warps per instance hide its latencies, and each thread holds fewer registers. A kernel of
// one tile per instance (a decode chunk) keeps kThreads: its grid gives the parallelism, and
// more, smaller CTAs keep more loads in flight per SM.
constexpr int kMaxThreads = 512;
constexpr int64_t kMinPerThread = 4;
// The elements of a kernel's largest tile (a register or an operation's value).
int64_t largest_tile(const tile::Kernel& k) {
  int64_t largest = 0;
  for (const tile::Register& r : k.registers)
    largest = std::max(largest, elements_of(r.type.shape));
  tile::for_each_op(
      k.body, [&](const TileOp& o) { largest = std::max(largest, elements_of(o.type.shape)); });
  return largest;
}
int threads_for(const tile::Kernel& k) {
  bool walks = false;
  for (const tile::TileStmt& s : k.body) walks |= s.kind == tile::StmtKind::For;
  const int64_t largest = largest_tile(k);
  int t = kThreads;
  while (walks && t < kMaxThreads && largest >= 2 * t * kMinPerThread) t *= 2;
  return t;
}

// The lanes of a grid instance of a short kernel (instances_per_cta_for): the fewest, 8 to 32,
// that leave each at most kMaxPerLane elements of the largest tile, where the grid has at least
// kFillingInstances instances at the sizes the kernels were generated for; 32 otherwise.
// What an instance costs besides its elements (its grid position, bounds and tail checks, the
// folds of its lanes, its scales) is the same for every lane, so fewer lanes with more elements
// each do less of it for the same bytes: block quantisation's groups of 128 bf16 columns, a warp
// each (four elements a lane), issued 450 instructions a group and ran at 17 % of the H100's DRAM
// bandwidth (Nsight Compute, docs/perf.md); on 8 lanes a lane loads two 16-byte vectors, and a
// warp holds four groups. A grid of fewer instances than fill the GPU's warps (a split-K
// combine, one instance a row of a decode step) keeps a warp an instance: fewer lanes would only
// leave it fewer warps to hide its latencies with.
constexpr int64_t kMaxPerLane = 16;
constexpr int64_t kFillingInstances = 132 * 64;  // an H100's SMs times the warps each holds
int lanes_per_instance(const tile::TileProgram& p, const tile::Kernel& k) {
  int64_t instances = 1;
  try {
    for (const tile::GridAxis& axis : k.grid)
      instances *= ir::eval_int(axis.extent, p.sizes, p.params);
  } catch (const UserError&) {
    return 32;  // a dynamic size
  }
  if (instances < kFillingInstances) return 32;
  int lanes = 8;
  while (lanes < 32 && largest_tile(k) > lanes * kMaxPerLane) lanes *= 2;
  return lanes;
}

// Grid instances per CTA: a kernel without a dot whose largest tile leaves a thread of kThreads
// fewer than kMinPerThread elements (a row of 128 f16: one each) runs an instance on a few lanes
// of a warp (lanes_per_instance) and kThreads / lanes instances a CTA. A CTA per such row spends
// more on its launch, barriers and latency than on its bytes (the rotated keys of a 16-head,
// 4096-key attention, 65,536 rows of 128 f16: about 0.05 ms on the H200, where moving their bytes
// takes about 0.01), and an instance on part of a warp synchronises by __syncwarp over its lanes
// alone, so its loops need not be uniform across the CTA, nor across the warp: a walk over a
// group of a param's extent in chunks (the amax of 128 columns of a row) runs on its own lanes.
int instances_per_cta_for(const tile::TileProgram& p, const tile::Kernel& k) {
  bool dot = false;
  tile::for_each_op(k.body, [&](const TileOp& o) { dot |= o.kind == OpKind::Dot; });
  return !dot && largest_tile(k) < kThreads * kMinPerThread ? kThreads / lanes_per_instance(p, k)
                                                            : 1;
}

class CyclicWriter : public KernelWriter {
 public:
  CyclicWriter(const tile::TileProgram& p, const tile::Kernel& k, std::vector<std::string>& sites,
               bool stage_loads)
      : KernelWriter(p, sites),
        instances_(instances_per_cta_for(p, k)),
        threads_(instances_ > 1 ? kThreads / instances_ : threads_for(k)),
        widest_(widest_chunks(p, k)),
        planned_(!stage_loads) {
    if (instances_ > 1) smem_ = "ks_smem_g";
    tile::for_each_op(k.body,
                      [&](const TileOp& o) { has_dot_ = has_dot_ || o.kind == OpKind::Dot; });
  }

 private:
  // A tail mask's limit (tail_mask).
  struct TailLimit {
    std::string left;  // the variable holding the elements left before the mask's bound
    size_t axis;       // the axis the mask's arange runs along
  };
  struct Value {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    int threads = kThreads;  // the kernel's threads per instance
    int64_t widest = 8;      // the widest chunk of the shape's layout (widest_chunks)
    bool exact_f16 = false;  // every element is an f16 value (a dot may run on f16 tensor cores)
    int64_t elements() const { return elements_of(shape); }
    bool scalar() const { return shape.empty(); }
    int64_t width() const { return chunk_width(shape, threads, widest); }
    int64_t chunks_per_thread() const { return (elements() / width() + threads - 1) / threads; }
    int64_t per_thread() const { return chunks_per_thread() * width(); }
    // Every entry of every thread holds an element (no thread runs past the end).
    bool full() const { return elements() % (threads * width()) == 0; }
    // Whether the current element (ks_e) is one: a condition, or "" when it always is.
    std::string holds(const std::string& e = "ks_e") const {
      return full() ? "" : e + " < " + std::to_string(elements()) + "u";
    }
  };

  // --- kernels
  int threads() const override { return threads_; }
  int instances_per_cta() const override { return instances_; }
  // An instance of kMaxThreads threads that walks its row in strips asks for two CTAs an SM (at
  // most 64 registers a thread): its strips and kept slots are sized to let two share an SM's
  // shared memory, and one CTA of 512 threads an SM leaves too few warps to hide the strips'
  // barriers and latencies. Without the bound ptxas gave layer norm's strip kernel 76 registers:
  // one CTA an SM, the same time as before its instructions were cut by a third. A kernel with
  // dots keeps more tiles live (Performer's output kernel at its own sizes: 128 registers and 108
  // bytes spilled a thread, 1864 under the bound), so it is not bounded.
  int min_blocks() const override { return threads_ == kMaxThreads && !has_dot_ ? 2 : 1; }
  // Synchronises the threads of the instance: its CTA, or its lanes of a warp.
  void barrier() { line(instances_ == 1 ? "__syncthreads();" : "__syncwarp(" + lanes() + ");"); }
  // The member mask of the instance's lanes in warp collectives (KernelWriter::write declares
  // ks_lanes for an instance on part of a warp).
  std::string lanes() const { return threads_ < 32 ? "ks_lanes" : "0xffffffffu"; }
  // A value named `name` of type `t` in this kernel's layout of its shape.
  Value laid_out(const std::string& name, const tile::TileType& t) const {
    auto it = widest_.find(t.shape);
    return Value{name, t.dtype, t.shape, threads_, it == widest_.end() ? 8 : it->second};
  }

  void declare_register(const tile::Register& r) override {
    Value v = laid_out(ident("r", r.name), r.type);
    registers_[r.name] = v;
    if (v.scalar())
      line(std::string(ctype(v.dtype)) + " " + v.name + " = 0;");
    else
      line(std::string(ctype(v.dtype)) + " " + v.name + "[" + std::to_string(v.per_thread()) +
           "] = {};");
  }

  void body(const tile::TileBody& b) override {
    if (!planned_) {
      planned_ = true;
      issue_staged_loads(b);
    }
    for (const tile::TileStmt& s : b) {
      if (s.kind == tile::StmtKind::Op) {
        op(s.op);
        continue;
      }
      bool streams = !staged_streams(s).empty();
      if (streams) declare_kept(s);
      if (streams && !prefetched_.count(&s)) issue_streams(s, s.min, Iteration::First);
      // A loop without barriers (a split-K combine: scalar loads and register updates) is
      // unrolled by four, so that the loads of four iterations are in flight together.
      std::string lo, hi;
      std::string var = open_loop(s, &lo, &hi, needs_barrier(s.body) ? "" : "#pragma unroll 4");
      if (streams) {
        stream_vars_[&s] = var;
        line("const int ks_slot_" + var + " = (int)((" + var + " - " + lo + ") & 1);");
        if (reads_kept(s) || keeps(s))
          line("const long long ks_q_" + var + " = " + var + " - " + lo + ";");
        line("if (" + var + " + 1 < " + hi + ") {");
        ++indent_;
        ir::Expr next = ir::make_binary(
            ir::Op::Add, ir::make_var(s.var, ir::VarKind::Index, DType::Int), ir::make_int(1));
        issue_streams(s, next, Iteration::Next);
        --indent_;
        line("} else {");
        line("  cp_async_commit();  // an empty group: every iteration commits one");
        line("}");
        line("cp_async_wait_group<1>();  // this iteration's tiles have arrived");
      }
      body(s.body);
      close_loop();
    }
  }

  // Whether the code of a body synchronises the CTA (stores, and the operations that stage an
  // array through shared memory).
  bool needs_barrier(const tile::TileBody& b) const {
    for (const tile::TileStmt& s : b) {
      if (s.kind == tile::StmtKind::For) {
        if (needs_barrier(s.body)) return true;
        continue;
      }
      const TileOp& o = s.op;
      switch (o.kind) {
        case OpKind::Store:
        case OpKind::Reduce:
        case OpKind::Dot:
          return true;
        case OpKind::Broadcast:  // of an array (a scalar broadcasts in registers)
          if (!o.dims.empty()) return true;
          break;
        case OpKind::Permute:
          if (!o.type.shape.empty()) return true;
          break;
        default:
          break;
      }
    }
    return false;
  }
  const Value& val(int id) const { return values_[static_cast<size_t>(id)]; }

  // Operand `id` at the current element (entry ks_i) of an op of the same shape. A tail mask is
  // its comparison, computed where it is used: as an array of 16 flags live across a block
  // reduction, ptxas packed it into the bits of a register and unpacked it at each use.
  std::string at(int id) const {
    const Value& v = val(id);
    if (v.scalar()) return v.name;
    auto mask = tail_limits_.find(id);
    if (mask != tail_limits_.end() && !open_.empty() && !open_.back().chunks &&
        open_.back().shape == v.shape)
      return below_limit(v.shape, mask->second, "ks_e");
    return v.name + "[ks_i]";
  }

  // Tail mask `limit` of a value of `shape` at its element `e`.
  static std::string below_limit(const std::vector<int64_t>& shape, const TailLimit& limit,
                                 const std::string& e) {
    return "((int)" + index_along(shape, limit.axis, e) + " < " + limit.left + ")";
  }

  // The index along axis `d` of element ks_e of a value of `shape`. ks_e is below the value's
  // elements wherever it is read (a full layout's threads cover them exactly; another's guard
  // tests it), so the outermost index needs no remainder.
  static std::string index_along(const std::vector<int64_t>& shape, size_t d,
                                 const std::string& e = "ks_e") {
    int64_t stride = 1;
    for (size_t k = d + 1; k < shape.size(); ++k) stride *= shape[k];
    std::string quotient = "(" + e + " / " + std::to_string(stride) + "u)";
    if (d == 0) return quotient;
    return "(" + quotient + " % " + std::to_string(shape[d]) + "u)";
  }

  // Opens the loop over the elements of a value this thread holds: ks_i is the entry, ks_e the
  // element index; returns the element's multi-index. With `chunks`, the loop runs over chunks
  // only: ks_i and ks_e are those of the chunk's first element.
  std::vector<std::string> open_elements(const Value& v, bool chunks = false) {
    std::string w = std::to_string(v.width()), T = std::to_string(threads_);
    bool per_element = v.width() > 1 && !chunks;
    line("#pragma unroll");
    line("for (int ks_k = 0; ks_k < " + std::to_string(v.chunks_per_thread()) + "; ++ks_k) {");
    ++indent_;
    if (per_element) {
      line("#pragma unroll");
      line("for (int ks_w = 0; ks_w < " + w + "; ++ks_w) {");
      ++indent_;
    }
    // Element indices are unsigned, so that the divisions and remainders of the multi-index by
    // powers of two fold with the unrolled ks_k and ks_w.
    if (v.width() == 1) {
      line("const int ks_i = ks_k;");
      line("const unsigned ks_e = (unsigned)ks_tid + ks_k * " + T + "u;");
    } else {
      std::string w_term = per_element ? " + ks_w" : "";
      line("const int ks_i = ks_k * " + w + w_term + ";");
      line("const unsigned ks_e = ((unsigned)ks_tid + ks_k * " + T + "u) * " + w + "u" + w_term +
           ";");
    }
    line(v.full() ? "{" : "if (" + v.holds() + ") {");
    ++indent_;
    open_.push_back({per_element ? 3 : 2, v.shape, chunks});
    std::vector<std::string> ix(v.shape.size());
    for (size_t d = 0; d < v.shape.size(); ++d) ix[d] = index_along(v.shape, d);
    return ix;
  }
  void close_elements() {
    for (int d = open_.back().depth; d > 0; --d) {
      --indent_;
      line("}");
    }
    open_.pop_back();
  }

  Value& define(const TileOp& o) {
    if (values_.size() <= static_cast<size_t>(o.result))
      values_.resize(static_cast<size_t>(o.result) + 1);
    Value& v = values_[static_cast<size_t>(o.result)];
    v = laid_out("t" + std::to_string(o.result), o.type);
    v.exact_f16 = holds_values_of(DType::F16, o, [&](int id) { return val(id).exact_f16; });
    return v;
  }

  // C = A x B on tensor cores: A [M, K] and B [K, N] staged in shared memory as f16 (exact: both
  // hold f16 values), mma.sync m16n8k16 per 16 x 8 block of C (warps take blocks round-robin),
  // A fragments by ldmatrix.x4, B fragments by ldmatrix.x2.trans from row-major B, C through
  // shared memory back to the element-cyclic layout.
  void mma_dot(const Value& a, const Value& b, const Value& v) {
    int64_t M = a.shape[0], K = a.shape[1], N = b.shape[1];
    int64_t ob = (M * K * 2 + 15) / 16 * 16, oc = ob + (K * N * 2 + 15) / 16 * 16;
    smem_bytes_ = std::max(smem_bytes_, scratch_ + oc + M * N * 4);
    barrier();
    line("{");
    ++indent_;
    line("u16* ks_sa = (u16*)(" + smem_ + " + " + std::to_string(scratch_) + ");");
    line("u16* ks_sb = (u16*)(" + smem_ + " + " + std::to_string(scratch_ + ob) + ");");
    line("float* ks_sc = (float*)(" + smem_ + " + " + std::to_string(scratch_ + oc) + ");");
    open_elements(a);
    line("ks_sa[ks_e] = f32_to_f16(" + a.name + "[ks_i]);");
    close_elements();
    open_elements(b);
    line("ks_sb[ks_e] = f32_to_f16(" + b.name + "[ks_i]);");
    close_elements();
    barrier();
    line("const int ks_lane = ks_tid & 31;");
    std::string nb = std::to_string(N / 8), Ks = std::to_string(K), Ns = std::to_string(N);
    line("for (int ks_b = ks_tid >> 5; ks_b < " + std::to_string((M / 16) * (N / 8)) +
         "; ks_b += " + std::to_string(threads_ / 32) + ") {");
    ++indent_;
    line("const int ks_m0 = (ks_b / " + nb + ") * 16, ks_n0 = (ks_b % " + nb + ") * 8;");
    line("float ks_acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};");
    line("for (int ks_k0 = 0; ks_k0 < " + Ks + "; ks_k0 += 16) {");
    ++indent_;
    line("u32 ks_a[4], ks_bf[2];");
    line("ldmatrix_x4(ks_a, smem_addr(ks_sa + (ks_m0 + (ks_lane & 15)) * " + Ks +
         " + ks_k0 + (ks_lane >> 4) * 8));");
    line("ldmatrix_x2_trans(ks_bf, smem_addr(ks_sb + (ks_k0 + (ks_lane & 15)) * " + Ns +
         " + ks_n0));");
    line("mma_m16n8k16_f16(ks_acc, ks_a, ks_bf);");
    --indent_;
    line("}");
    line("const int ks_r = ks_m0 + (ks_lane >> 2), ks_c = ks_n0 + 2 * (ks_lane & 3);");
    line("ks_sc[ks_r * " + Ns + " + ks_c] = ks_acc[0];");
    line("ks_sc[ks_r * " + Ns + " + ks_c + 1] = ks_acc[1];");
    line("ks_sc[(ks_r + 8) * " + Ns + " + ks_c] = ks_acc[2];");
    line("ks_sc[(ks_r + 8) * " + Ns + " + ks_c + 1] = ks_acc[3];");
    --indent_;
    line("}");
    barrier();
    open_elements(v);
    line(v.name + "[ks_i] = ks_sc[ks_e];");
    close_elements();
    --indent_;
    line("}");
  }
  void declare(const Value& v) {
    line(std::string(ctype(v.dtype)) + " " + v.name + "[" + std::to_string(v.per_thread()) + "];");
  }

  // Stages an array value in shared memory at byte `offset`; returns the smem pointer name.
  std::string stage(int id, int64_t offset) {
    const Value& v = val(id);
    std::string ptr = tmp();
    line(std::string(ctype(v.dtype)) + "* " + ptr + " = (" + ctype(v.dtype) + "*)(" + smem_ +
         " + " + std::to_string(scratch_ + offset) + ");");
    if (v.scalar()) return ptr;
    open_elements(v);
    line(ptr + "[ks_e] = " + v.name + "[ks_i];");
    close_elements();
    smem_bytes_ = std::max(smem_bytes_, scratch_ + offset + v.elements() * element_bytes(v.dtype));
    return ptr;
  }

  void region(const TileOp& o, bool is_store) {
    Region reg = open_region(o);
    Value shape_of = laid_out("", o.type);
    const std::string& buf = buffer_ids_.at(o.buffer);
    std::string offset, inside;
    if (is_store) {
      if (o.type.shape.empty()) {
        element(reg, {}, &offset, &inside);
        std::string cond = inside + (o.args.size() > 1 ? " && " + at(o.args[1]) : "");
        line("if (ks_tid == 0 && " + cond + ") " + buf + "[" + offset +
             "] = " + store_value(o.buffer, at(o.args[0])) + ";");
        return;
      }
      if (!vector_type(o).empty()) {
        store_chunks(o, reg, shape_of);
        return;
      }
      std::vector<std::string> ix = open_elements(shape_of);
      element(reg, ix, &offset, &inside);
      std::string cond = inside + (o.args.size() > 1 ? " && " + at(o.args[1]) : "");
      line("if (" + cond + ") " + buf + "[" + offset +
           "] = " + store_value(o.buffer, at(o.args[0])) + ";");
      close_elements();
      return;
    }
    Value& v = values_[static_cast<size_t>(o.result)];
    std::string zero = is_float(v.dtype) ? "0.0f" : "0";
    if (v.scalar()) {
      element(reg, {}, &offset, &inside);
      line(std::string(ctype(v.dtype)) + " " + v.name + " = (" + inside + ") ? " +
           load_value(o.buffer, buf + "[" + offset + "]", v.dtype) + " : " + zero + ";");
      return;
    }
    declare(v);
    if (std::string vt = vector_type(o); !vt.empty()) {
      // A chunk is `width` consecutive aligned buffer elements, all inside or none: one load.
      std::vector<std::string> ix = open_elements(v, true);
      element(reg, ix, &offset, &inside);
      std::string w = std::to_string(v.width());
      line("if (" + inside + ") {");
      ++indent_;
      load_chunk(o, v, buf + " + " + offset);
      --indent_;
      line("} else {");
      line("  #pragma unroll");
      line("  for (int ks_c = 0; ks_c < " + w + "; ++ks_c) " + v.name + "[ks_i + ks_c] = " + zero +
           ";");
      line("}");
      close_elements();
      return;
    }
    std::vector<std::string> ix = open_elements(v);
    element(reg, ix, &offset, &inside);
    line(v.name + "[ks_i] = (" + inside + ") ? " +
         load_value(o.buffer, buf + "[" + offset + "]", v.dtype) + " : " + zero + ";");
    close_elements();
  }

  // Store `o` of a tile whose chunks are aligned runs of the buffer (vector_type): a chunk the
  // mask keeps whole is written by vector stores, one the mask cuts element by element; a chunk
  // outside the buffer not at all (its first element decides, see innermost_chunks).
  void store_chunks(const TileOp& o, const Region& reg, const Value& shape_of) {
    const std::string& buf = buffer_ids_.at(o.buffer);
    std::string vt = vector_type(o), w = std::to_string(shape_of.width());
    // Element ks_c + k of the chunk of value `id`.
    auto element_of = [&](int id, int k = 0) {
      const Value& e = val(id);
      const std::string c = k ? "ks_c + " + std::to_string(k) : "ks_c";
      if (e.scalar()) return e.name;
      if (auto mask = tail_limits_.find(id); mask != tail_limits_.end())
        return below_limit(e.shape, mask->second, "(ks_e + " + c + ")");
      return e.name + "[ks_i + " + c + "]";
    };
    std::string offset, inside;
    std::vector<std::string> ix = open_elements(shape_of, true);
    element(reg, ix, &offset, &inside);
    line("if (" + inside + ") {");
    ++indent_;
    std::string whole = "true";
    if (o.args.size() > 1) {
      line("bool ks_whole = true;");
      line("#pragma unroll");
      line("for (int ks_c = 0; ks_c < " + w + "; ++ks_c) ks_whole = ks_whole && " +
           element_of(o.args[1]) + ";");
      whole = "ks_whole";
    }
    line("if (" + whole + ") {");
    ++indent_;
    line(storage(buffer_dtype(o.buffer)) + " ks_raw[" + w + "];");
    line("#pragma unroll");
    if (buffer_dtype(o.buffer) == DType::F8E4M3 && shape_of.width() % 2 == 0)
      // e4m3 codes converted a pair at a time (one instruction where the target has it)
      line("for (int ks_c = 0; ks_c < " + w + "; ks_c += 2) ((u16*)ks_raw)[ks_c / 2] = " +
           "ks_f2e4m3x2(" + element_of(o.args[0]) + ", " + element_of(o.args[0], 1) + ");");
    else
      line("for (int ks_c = 0; ks_c < " + w +
           "; ++ks_c) ks_raw[ks_c] = " + store_value(o.buffer, element_of(o.args[0])) + ";");
    for (int64_t k = 0; k < std::max<int64_t>(1, chunk_bytes(o) / 16); ++k)
      line("((" + vt + "*)(" + buf + " + " + offset + "))[" + std::to_string(k) + "] = ((const " +
           vt + "*)ks_raw)[" + std::to_string(k) + "];");
    --indent_;
    if (o.args.size() > 1) {
      line("} else {");
      line("  #pragma unroll");
      line("  for (int ks_c = 0; ks_c < " + w + "; ++ks_c)");
      line("    if (" + element_of(o.args[1]) + ") " + buf + "[" + offset +
           " + ks_c] = " + store_value(o.buffer, element_of(o.args[0])) + ";");
    }
    line("}");
    --indent_;
    line("}");
    close_elements();
  }

  // The current chunk of v (entries ks_i...) from the buffer elements of load `o` at `src`, by
  // vector loads.
  void load_chunk(const TileOp& o, const Value& v, const std::string& src) {
    std::string vt = vector_type(o), w = std::to_string(v.width());
    int64_t pieces = std::max<int64_t>(1, chunk_bytes(o) / 16);
    line(storage(buffer_dtype(o.buffer)) + " ks_raw[" + w + "];");
    for (int64_t k = 0; k < pieces; ++k)
      line("((" + vt + "*)ks_raw)[" + std::to_string(k) + "] = ((const " + vt + "*)(" + src +
           "))[" + std::to_string(k) + "];");
    line("#pragma unroll");
    line("for (int ks_c = 0; ks_c < " + w + "; ++ks_c) " + v.name +
         "[ks_i + ks_c] = " + load_value(o.buffer, "ks_raw[ks_c]", v.dtype) + ";");
  }

  // The vector type that loads a chunk of load `o`'s value (in 16-byte pieces if longer), or ""
  // when its chunks are not aligned runs of the buffer (see innermost_chunks) or a chunk is
  // shorter than 4 bytes.
  std::string vector_type(const TileOp& o) const {
    DType bt = buffer_dtype(o.buffer);
    int64_t w = laid_out("", o.type).width();
    if (w == 1 || bt == DType::Bool || bt == DType::Int || !innermost_chunks(o, w)) return "";
    switch (std::min<int64_t>(16, chunk_bytes(o))) {
      case 16:
        return "uint4";
      case 8:
        return "uint2";
      case 4:
        return "unsigned int";
      default:
        return "";
    }
  }

  // --- loads staged through shared memory
  // A load of a tile of a read-only buffer in aligned 16-byte chunks is staged: copied by
  // cp.async into a shared-memory slot of its own ahead of its use, so that its bytes are in
  // flight while the kernel computes. Each thread copies the chunks it holds in the layout and
  // reads back only those, so waiting for its own copies is enough: no barrier.
  //   - The kernel's top-level loads are all issued at its start, one commit group each (a
  //     decode chunk's K and V tiles: V arrives while the scores are computed).
  //   - The stream loads of a pipelined loop (pipeline_stages 2) have two slots each: the first
  //     iteration's tiles are issued before the loop, and each iteration issues the next one's
  //     into the other slot before it waits for its own (a split-K combine's partials). (A ring
  //     of four slots, three iterations ahead, measured no faster on the H200: docs/perf.md.)
  //   - A row kept: when later loops of the kernel walk the same tiles of a buffer as an earlier
  //     one (a norm's output pass after its statistics pass), the earlier loop's copies go to
  //     R slots of their own (R from the iterations at the sizes the program was generated for,
  //     within kMaxStagedBytes), and the later loops read the first `keep` iterations from them
  //     instead of memory: keep = R when the loop has at most R iterations, else R - 2, and
  //     slots R - 2 and R - 1 are the ring of the iterations past keep in every such loop. The
  //     slots of a tile hold the same chunks of every thread in all these loops (one tile shape,
  //     one layout), so a thread reads only what it copied itself.
  // The slots come first in shared memory; the scratch space of the other operations follows.

  struct Staged {
    int64_t offset = 0;                    // byte offset of the slot (of the first of a loop's)
    int64_t bytes = 0;                     // of one slot
    int group = 0;                         // top-level loads: commit group, in issue order
    const tile::TileStmt* loop = nullptr;  // stream loads: their pipelined loop
    int64_t kept = 0;                      // a row kept: its R slots (0: a ring of two)
    bool reads_kept = false;               // a later loop's load of a row kept: copies past keep
    int owner = -1;                        // a row kept: the result of the first loop's load
  };
  // (Rows kept within 144 KiB, one CTA an SM, and 112 KiB measured slower on the H200 than
  // within these 96 KiB, two CTAs an SM: docs/perf.md.)
  static constexpr int64_t kMaxStagedBytes = 96 * 1024;
  // The smallest slot of a row kept: a strip of a streamed row. A split-K combine's partials (a
  // few bytes an iteration) are read by each pass from L2 with the first tiles of every pass in
  // flight from the kernel's start, which keeping them would give up.
  static constexpr int64_t kMinKeptSlotBytes = 4096;

  bool stageable(const TileOp& o, const std::set<std::string>& written) const {
    return o.kind == OpKind::Load && !written.count(o.buffer) && !o.type.shape.empty() &&
           ((!vector_type(o).empty() && chunk_bytes(o) % 16 == 0) || copied_by_element(o));
  }
  // A load whose chunks are not aligned runs of its buffer (a strided gather: a split-K
  // combine's scalar partials along the chunk axis) is staged element by element, 4 bytes each.
  bool copied_by_element(const TileOp& o) const {
    return vector_type(o).empty() && buffer_dtype(o.buffer) == DType::F32;
  }

  // A top-level loop whose stream loads may be staged: pipelined, and with a barrier in its body
  // (which orders this iteration's reads of a slot before the copies the next iteration issues
  // into it).
  bool staging_loop(const tile::TileStmt& s) const {
    return s.kind == tile::StmtKind::For && s.pipeline_stages >= 2 && needs_barrier(s.body);
  }

  // The loads of rows kept (see above): stream load -> the same tiles loaded by a stream load of
  // an earlier top-level loop over the same iterations (its owner).
  std::map<int, int> kept_rows(const tile::TileBody& b, const std::set<std::string>& written) {
    std::map<int, int> owner;
    std::vector<std::pair<const tile::TileStmt*, const TileOp*>> seen;
    for (const tile::TileStmt& s : b) {
      if (!staging_loop(s)) continue;
      const ir::Expr var = ir::make_var(s.var, ir::VarKind::Index, DType::Int);
      for (const tile::TileStmt& c : s.body) {
        const TileOp& o = c.op;
        if (c.kind != tile::StmtKind::Op || o.stream_loop != s.var || !stageable(o, written) ||
            slot_bytes(o) < kMinKeptSlotBytes)
          continue;
        for (const auto& [first, f] : seen) {
          if (f->buffer != o.buffer || f->type.shape != o.type.shape ||
              f->type.dtype != o.type.dtype || !ir::equal(first->min, s.min) ||
              !ir::equal(first->extent, s.extent) || f->starts.size() != o.starts.size())
            continue;
          bool same = true;
          for (size_t d = 0; d < o.starts.size(); ++d)
            same =
                same && ir::equal(ir::substitute(f->starts[d], {{first->var, var}}), o.starts[d]);
          if (!same) continue;
          owner[o.result] = owner.count(f->result) ? owner.at(f->result) : f->result;
          break;
        }
        seen.push_back({&s, &o});
      }
    }
    return owner;
  }

  // Assigns slots to the stageable loads of `b` within kMaxStagedBytes: the rows kept first (a
  // weight vector's tiles come from L2, a row's from memory; a row whose R would be below 2 is not
  // kept), then its top-level loads and the rings of the other stream loads of its pipelined
  // loops in program order; then issues the top-level loads.
  void issue_staged_loads(const tile::TileBody& b) {
    std::set<std::string> written = tile::written_in(b);
    std::map<int, int> owner = kept_rows(b, written);
    std::set<int> owners;
    for (const auto& [reader, first] : owner) owners.insert(first);
    // The stageable loads in program order, each with its pipelined loop (none: top level).
    std::vector<std::pair<const tile::TileStmt*, const TileOp*>> loads;
    std::function<void(const tile::TileBody&, bool)> find = [&](const tile::TileBody& body,
                                                                bool top_level) {
      for (const tile::TileStmt& s : body) {
        if (s.kind == tile::StmtKind::For) {
          find(s.body, false);
          if (!staging_loop(s)) continue;
          for (const tile::TileStmt& c : s.body)
            if (c.kind == tile::StmtKind::Op && c.op.stream_loop == s.var &&
                stageable(c.op, written))
              loads.push_back({&s, &c.op});
        } else if (top_level && stageable(s.op, written)) {
          loads.push_back({nullptr, &s.op});
        }
      }
    };
    find(b, true);
    int64_t bytes = 0;
    for (const auto& [s, o] : loads) {
      if (!owners.count(o->result)) continue;
      int64_t size = slot_bytes(*o), iterations = 0;
      try {
        iterations = ir::eval_int(s->extent, p_.sizes);
      } catch (const UserError&) {
        iterations = 0;  // a dynamic size: no row kept
      }
      int64_t r = std::min(iterations, (kMaxStagedBytes - bytes) / size);
      if (r < 2) continue;
      staged_[o->result] = Staged{bytes, size, 0, s, r, false, o->result};
      bytes += r * size;
    }
    std::vector<const TileOp*> top;
    for (const auto& [s, o] : loads) {
      if (staged_.count(o->result)) continue;
      auto first = owner.count(o->result) ? staged_.find(owner.at(o->result)) : staged_.end();
      if (first != staged_.end() && first->second.kept) {  // a later loop's: the owner's slots
        Staged st = first->second;
        st.loop = s, st.reads_kept = true, st.owner = first->first;
        staged_[o->result] = st;
        continue;
      }
      int64_t size = slot_bytes(*o), slots = s ? 2 : 1;
      if (bytes + slots * size > kMaxStagedBytes) continue;
      staged_[o->result] = Staged{bytes, size, s ? 0 : static_cast<int>(top.size()), s};
      if (!s) top.push_back(o);
      bytes += slots * size;
    }
    scratch_ = (bytes + 127) / 128 * 128;
    smem_bytes_ = std::max(smem_bytes_, scratch_);
    for (const TileOp* o : top) {
      issue_copy(*o, std::to_string(staged_.at(o->result).offset));
      line("cp_async_commit();");
    }
    groups_ = static_cast<int>(top.size());
    // The first iteration's tiles of every top-level pipelined loop follow, so that the loops'
    // first loads (a combine's maximum, sum and output passes) are in flight together. A loop's
    // first wait then also waits for the groups issued before its own: never too early. (Not the
    // loops of a row kept, as measured: the first issues its first tile right before it, and the
    // later ones' ring slots are the first one's until it ends.)
    for (const tile::TileStmt& s : b)
      if (s.kind == tile::StmtKind::For && !staged_streams(s).empty() && !reads_kept(s) &&
          !keeps(s)) {
        issue_streams(s, s.min, Iteration::First);
        prefetched_.insert(&s);
        ++groups_;
      }
  }

  bool reads_kept(const tile::TileStmt& s) const {
    for (const TileOp* o : staged_streams(s))
      if (staged_.at(o->result).reads_kept) return true;
    return false;
  }

  // Declares, before loop `s`, how many of its iterations read the slots of each row kept that it
  // loads (keep, see above), once per loop.
  void declare_kept(const tile::TileStmt& s) {
    for (const TileOp* o : staged_streams(s)) {
      const Staged& st = staged_.at(o->result);
      if (!st.kept || keep_.count({&s, st.owner})) continue;
      std::string keep = tmp(), r = std::to_string(st.kept) + "LL";
      line("const long long " + keep + " = " + scalar(s.extent) + " <= " + r + " ? " + r + " : " +
           std::to_string(st.kept - 2) + "LL;  // iterations read from the row kept");
      keep_[{&s, st.owner}] = keep;
    }
  }

  // The iterations of a pipelined loop whose slots the code names: the first (before the loop),
  // the current one and the next (inside it).
  enum class Iteration { First, Current, Next };
  // The iteration number of `it` in loop `s` (an expression).
  std::string iteration(const tile::TileStmt& s, Iteration it) const {
    if (it == Iteration::First) return "0";
    std::string q = "ks_q_" + stream_vars_.at(&s);
    return it == Iteration::Next ? q + " + 1" : q;
  }
  // The byte offset (an expression) of the slot of staged stream load `st` of loop `s` at
  // iteration `it`.
  std::string slot_at(const tile::TileStmt& s, const Staged& st, Iteration it) const {
    std::string off = std::to_string(st.offset), size = std::to_string(st.bytes);
    if (!st.kept) {
      if (it == Iteration::First) return off + " + 0 * " + size;
      std::string slot = "ks_slot_" + stream_vars_.at(&s);
      return off + " + " + (it == Iteration::Next ? "(1 - " + slot + ")" : slot) + " * " + size;
    }
    const std::string& keep = keep_.at({&s, st.owner});
    std::string q = iteration(s, it);
    return off + " + ((" + q + ") < " + keep + " ? (" + q + ") : " + keep + " + (((" + q + ") - " +
           keep + ") & 1)) * " + size;
  }

  // Whether loop `s` copies a row kept for later loops.
  bool keeps(const tile::TileStmt& s) const {
    for (const TileOp* o : staged_streams(s)) {
      const Staged& st = staged_.at(o->result);
      if (st.kept && !st.reads_kept) return true;
    }
    return false;
  }

  // Bytes of a load's slot, rounded up to 16 so that every slot starts 16-byte aligned.
  int64_t slot_bytes(const TileOp& o) const {
    int64_t bytes = o.type.elements() * (chunk_bytes(o) / laid_out("", o.type).width());
    return (bytes + 15) / 16 * 16;
  }

  // The cp.async copies of this thread's chunks of load `o` into the slot at byte offset `slot`
  // (an expression).
  void issue_copy(const TileOp& o, const std::string& slot) {
    line("// issue " + o.buffer);
    line("{");
    ++indent_;
    Region reg = open_region(o);
    Value shape_of = laid_out("", o.type);
    bool by_element = copied_by_element(o);
    std::vector<std::string> ix = open_elements(shape_of, !by_element);
    std::string offset, inside;
    element(reg, ix, &offset, &inside);
    const std::string& buf = buffer_ids_.at(o.buffer);
    if (by_element) {
      line("const bool ks_in = " + inside + ";");
      line("cp_async_ca<4>(smem_addr(" + smem_ + " + " + slot +
           ") + ks_e * 4u, ks_in ? (const void*)(" + buf + " + " + offset + ") : (const void*)" +
           buf + ", ks_in ? 4u : 0u);");
      close_elements();
      --indent_;
      line("}");
      return;
    }
    int64_t cb = chunk_bytes(o), eb = cb / shape_of.width();
    line("const u32 ks_dst = smem_addr(" + smem_ + " + " + slot + ") + ks_e * " +
         std::to_string(eb) + "u;");
    line("const bool ks_in = " + inside + ";");
    for (int64_t k = 0; k < cb / 16; ++k)
      line("cp_async_cg16(ks_dst + " + std::to_string(16 * k) + "u, ks_in ? (const void*)(" + buf +
           " + " + offset + " + " + std::to_string(k * 16 / eb) + ") : (const void*)" + buf +
           ", ks_in ? 16u : 0u);");
    close_elements();
    --indent_;
    line("}");
  }

  // The stream loads staged for pipelined loop `s`, in program order.
  std::vector<const TileOp*> staged_streams(const tile::TileStmt& s) const {
    std::vector<const TileOp*> out;
    for (const tile::TileStmt& c : s.body)
      if (c.kind == tile::StmtKind::Op && staged_.count(c.op.result) &&
          staged_.at(c.op.result).loop == &s)
        out.push_back(&c.op);
    return out;
  }

  // Issues the stream loads of loop `s` for iteration `it`, where its variable is `at`, as one
  // group. A later loop's load of a row kept copies only past the iterations read from the row
  // (keep).
  void issue_streams(const tile::TileStmt& s, const ir::Expr& at, Iteration it) {
    for (const TileOp* o : staged_streams(s)) {
      TileOp shifted = *o;
      for (ir::Expr& e : shifted.starts) e = ir::substitute(e, {{s.var, at}});
      const Staged& st = staged_.at(o->result);
      if (st.reads_kept) {
        line("if (" + iteration(s, it) + " >= " + keep_.at({&s, st.owner}) + ") {");
        ++indent_;
      }
      issue_copy(shifted, slot_at(s, st, it));
      if (st.reads_kept) {
        --indent_;
        line("}");
      }
    }
    line("cp_async_commit();");
  }

  // Bytes of one chunk of load `o`'s buffer elements.
  int64_t chunk_bytes(const TileOp& o) const {
    return laid_out("", o.type).width() * dtype_bytes(buffer_dtype(o.buffer));
  }

  // The value of a staged load: this thread's chunks, read back from its slot once its group
  // has arrived.
  void read_staged(const TileOp& o, const Value& v) {
    const Staged& st = staged_.at(o.result);
    std::string slot = std::to_string(st.offset);
    if (st.loop)
      slot = st.kept ? "(" + slot_at(*st.loop, st, Iteration::Current) + ")"
                     : slot_at(*st.loop, st, Iteration::Current);
    else
      line("cp_async_wait_group<" + std::to_string(groups_ - 1 - st.group) + ">();");
    declare(v);
    std::string sty = storage(buffer_dtype(o.buffer));
    if (copied_by_element(o)) {
      open_elements(v);
      line(v.name + "[ks_i] = " +
           load_value(o.buffer, "((const " + sty + "*)(" + smem_ + " + " + slot + "))[ks_e]",
                      v.dtype) +
           ";");
      close_elements();
      return;
    }
    open_elements(v, true);
    load_chunk(o, v, "(const " + sty + "*)(" + smem_ + " + " + slot + ") + ks_e");
    close_elements();
  }

  // --- reductions that combine within a thread and a warp first

  std::string fold(const TileOp& o, const std::string& acc, const std::string& x) const {
    DType t = o.type.dtype;
    return round_to(combine(o.reducer, t, acc, x), t);
  }
  // acc combined with acc of the lanes whose index differs in bit `from`, then from / 2, ... 1.
  void shuffle_fold(const TileOp& o, const std::string& acc, int64_t from) {
    for (int64_t off = from; off >= 1; off /= 2)
      line(acc + " = " +
           fold(o, acc,
                "__shfl_xor_sync(" + lanes() + ", " + acc + ", " + std::to_string(off) + ")") +
           ";");
  }
  std::string smem_array(const Value& v, int64_t elements) {
    std::string ptr = tmp();
    line(std::string(ctype(v.dtype)) + "* " + ptr + " = (" + ctype(v.dtype) + "*)(" + smem_ +
         " + " + std::to_string(scratch_) + ");");
    smem_bytes_ = std::max(smem_bytes_, scratch_ + elements * element_bytes(v.dtype));
    return ptr;
  }

  // Every element to one scalar: each thread folds its elements, each warp its lanes by
  // shuffles, and every thread the warps' results from shared memory.
  void reduce_scalar(const TileOp& o, const Value& a, const Value& v) {
    const std::string ty = ctype(v.dtype);
    std::string identity = scalar(ir::reducer_identity_expr(o.reducer, v.dtype));
    line(ty + " " + v.name + " = " + identity + ";");
    line("{");
    ++indent_;
    std::string acc = tmp();
    line(ty + " " + acc + " = " + identity + ";");
    open_elements(a);
    line(acc + " = " + fold(o, acc, a.name + "[ks_i]") + ";");
    close_elements();
    shuffle_fold(o, acc, std::min(16, threads_ / 2));
    const int64_t warps = threads_ / 32;
    if (warps > 1) {
      barrier();
      std::string part = smem_array(v, warps);
      line("if ((ks_tid & 31) == 0) " + part + "[ks_tid >> 5] = " + acc + ";");
      barrier();
      // Each lane takes one warp's result (lane l warp l mod warps, so that every group of
      // `warps` lanes holds them all) and the group folds them by shuffles: a thread adding every
      // warp's result cost a load and an add per warp.
      line(acc + " = " + part + "[ks_tid & " + std::to_string(warps - 1) + "];");
      shuffle_fold(o, acc, warps / 2);
    }
    line(v.name + " = " + acc + ";");
    --indent_;
    line("}");
  }

  // Along the innermost axis of C elements, when a row is `group` = C / W whole chunks of
  // consecutive lanes (group a power of two up to 32): each thread folds its chunk, the group its
  // lanes by shuffles, and the group's first lane hands the row's result over in shared memory.
  bool reduce_innermost(const TileOp& o, const Value& a, const Value& v) {
    int64_t C = a.shape.back(), group = C / a.width();
    if (static_cast<size_t>(o.axis) + 1 != a.shape.size() || group > std::min(32, threads_) ||
        (group & (group - 1)) != 0)
      return false;
    declare(v);
    const std::string ty = ctype(v.dtype), w = std::to_string(a.width());
    std::string identity = scalar(ir::reducer_identity_expr(o.reducer, v.dtype));
    barrier();
    std::string rows = smem_array(v, a.elements() / C);
    line("#pragma unroll");
    line("for (int ks_k = 0; ks_k < " + std::to_string(a.chunks_per_thread()) + "; ++ks_k) {");
    ++indent_;
    line("const unsigned ks_e = ((unsigned)ks_tid + ks_k * " + std::to_string(threads_) + "u) * " +
         w + "u;");
    std::string acc = tmp();
    line(ty + " " + acc + " = " + identity + ";");
    line(a.full() ? "{" : "if (" + a.holds() + ") {");
    line("  #pragma unroll");
    line("  for (int ks_c = 0; ks_c < " + w + "; ++ks_c) " + acc + " = " +
         fold(o, acc, a.name + "[ks_k * " + w + " + ks_c]") + ";");
    line("}");
    shuffle_fold(o, acc, group / 2);
    line("if (" + (a.full() ? "" : a.holds() + " && ") + "(ks_tid & " + std::to_string(group - 1) +
         ") == 0) " + rows + "[ks_e / " + std::to_string(C) + "u] = " + acc + ";");
    --indent_;
    line("}");
    barrier();
    open_elements(v);
    line(v.name + "[ks_i] = " + rows + "[ks_e];");
    close_elements();
    return true;
  }

  // Along the leading axis, when the rest of the shape (`rest` elements) divides the threads_ * W
  // elements one pass of the threads covers: every chunk of a thread then holds the same output
  // elements, so the thread folds its chunks, and each output element folds the threads_ * W /
  // rest partial results of the threads that hold it, from shared memory.
  bool reduce_leading(const TileOp& o, const Value& a, const Value& v) {
    int64_t W = a.width(), rest = a.elements() / a.shape[0];
    if (o.axis != 0 || (threads_ * W) % rest != 0) return false;
    declare(v);
    const std::string ty = ctype(v.dtype), w = std::to_string(W);
    std::string identity = scalar(ir::reducer_identity_expr(o.reducer, v.dtype));
    barrier();
    std::string part = smem_array(v, threads_ * W);
    line("#pragma unroll");
    line("for (int ks_c = 0; ks_c < " + w + "; ++ks_c) {");
    ++indent_;
    std::string acc = tmp();
    line(ty + " " + acc + " = " + identity + ";");
    line("#pragma unroll");
    line("for (int ks_k = 0; ks_k < " + std::to_string(a.chunks_per_thread()) + "; ++ks_k)");
    std::string e =
        "((unsigned)ks_tid + ks_k * " + std::to_string(threads_) + "u) * " + w + "u + ks_c";
    line("  " + (a.full() ? "" : "if (" + a.holds(e) + ") ") + acc + " = " +
         fold(o, acc, a.name + "[ks_k * " + w + " + ks_c]") + ";");
    line(part + "[ks_tid * " + w + " + ks_c] = " + acc + ";");
    --indent_;
    line("}");
    barrier();
    open_elements(v);
    acc = tmp();
    line(ty + " " + acc + " = " + identity + ";");
    line("#pragma unroll");
    line("for (int ks_g = 0; ks_g < " + std::to_string(threads_ * W / rest) + "; ++ks_g) " + acc +
         " = " + fold(o, acc, part + "[ks_e + ks_g * " + std::to_string(rest) + "]") + ";");
    line(v.name + "[ks_i] = " + acc + ";");
    close_elements();
    return true;
  }

  // A tail mask `lt(arange(start), E)`: the elements left before E, clamped to the axis once
  // (in 32 bits), each element's index against that. Computed from its arange instead, an element
  // cost a 64-bit add and a 64-bit comparison.
  bool tail_mask(const TileOp& o, const Value& v) {
    if (o.kind != OpKind::Map || o.is_call || o.op != Op::Lt || v.scalar()) return false;
    auto index = aranges_.find(o.args[0]);
    const Value& extent = val(o.args[1]);
    if (index == aranges_.end() || !extent.scalar() || extent.dtype != DType::Int ||
        val(o.args[0]).shape != v.shape)
      return false;
    const TileOp& arange = *index->second;
    const size_t axis = static_cast<size_t>(arange.axis);
    std::string left = tmp();
    line("const int " + left + " = (int)max(min(" + extent.name + " - (" + scalar(arange.scalar) +
         "), " + std::to_string(v.shape[axis]) + "LL), 0LL);");
    declare(v);
    std::vector<std::string> ix = open_elements(v);
    line(v.name + "[ks_i] = (int)" + ix[axis] + " < " + left + ";");
    close_elements();
    tail_limits_[o.result] = {left, axis};
    return true;
  }

  std::string map_code(const TileOp& o, const std::vector<std::string>& a) {
    if (o.is_call) return call(o.fn, a, is_float(o.type.dtype));
    // A tile divided by a value every thread holds: one reciprocal and a multiply an element (1.5
    // ulp), as the tensor-core writer does. An IEEE division an element (a correction sequence
    // with a slow-path branch) made f32 softmax 4096 x 8192 take 0.159 ms rather than 0.074.
    if (o.op == Op::Div && o.type.dtype == DType::F32 && !o.type.shape.empty() &&
        val(o.args[1]).scalar())
      return "(" + a[0] + " * (1.0f / " + a[1] + "))";
    bool fl = false;
    for (int id : o.args) fl = fl || is_float(val(id).dtype);
    return spell(o.op, a, fl);
  }

  void op(const TileOp& o) {
    if (o.kind == OpKind::Store) {
      line("{  // store " + o.buffer);
      ++indent_;
      region(o, true);
      --indent_;
      line("}");
      // Later loads of the buffer may read elements other threads stored.
      barrier();
      return;
    }
    if (o.kind == OpKind::Write) {
      const Value& r = registers_.at(o.buffer);
      if (r.scalar()) {
        line(r.name + " = " + at(o.args[0]) + ";");
        return;
      }
      line("#pragma unroll");
      line("for (int ks_i = 0; ks_i < " + std::to_string(r.per_thread()) + "; ++ks_i) " + r.name +
           "[ks_i] = " + at(o.args[0]) + ";");
      return;
    }
    Value& v = define(o);
    const std::string ty = ctype(v.dtype);
    switch (o.kind) {
      case OpKind::Read: {
        const Value& r = registers_.at(o.buffer);
        if (v.scalar()) {
          line("const " + ty + " " + v.name + " = " + r.name + ";");
          return;
        }
        declare(v);
        line("#pragma unroll");
        line("for (int ks_i = 0; ks_i < " + std::to_string(v.per_thread()) + "; ++ks_i) " + v.name +
             "[ks_i] = " + r.name + "[ks_i];");
        return;
      }
      case OpKind::Full:
        line("const " + ty + " " + v.name + " = " + scalar(o.scalar) + ";");
        if (v.scalar()) note_full(v.name, o.scalar);
        return;
      case OpKind::Arange: {
        aranges_[o.result] = &o;
        declare(v);
        std::string start = scalar(o.scalar);
        std::vector<std::string> ix = open_elements(v);
        line(v.name + "[ks_i] = " + start + " + " + ix[static_cast<size_t>(o.axis)] + ";");
        close_elements();
        return;
      }
      case OpKind::Map:
      case OpKind::Cast: {
        if (tail_mask(o, v)) return;
        // The operands are spelled inside the element walk (a tail mask is its comparison there).
        auto code = [&] {
          std::vector<std::string> a;
          for (int id : o.args) a.push_back(at(id));
          return o.kind == OpKind::Map ? round_to(map_code(o, a), v.dtype)
                                       : cast_to(a[0], val(o.args[0]).dtype, v.dtype);
        };
        if (v.scalar()) {
          line("const " + ty + " " + v.name + " = " + code() + ";");
          return;
        }
        declare(v);
        open_elements(v);
        line(v.name + "[ks_i] = " + code() + ";");
        close_elements();
        return;
      }
      case OpKind::Broadcast:
      case OpKind::Permute: {
        const Value& a = val(o.args[0]);
        declare(v);
        if (a.scalar()) {
          line("#pragma unroll");
          line("for (int ks_i = 0; ks_i < " + std::to_string(v.per_thread()) + "; ++ks_i) " +
               v.name + "[ks_i] = " + a.name + ";");
          return;
        }
        barrier();
        std::string s = stage(o.args[0], 0);
        barrier();
        std::vector<std::string> ix = open_elements(v);
        std::vector<std::string> src(a.shape.size());
        for (size_t k = 0; k < a.shape.size(); ++k)
          if (o.kind == OpKind::Broadcast) src[k] = ix[static_cast<size_t>(o.dims[k])];
        if (o.kind == OpKind::Permute)
          for (size_t k = 0; k < o.perm.size(); ++k) src[static_cast<size_t>(o.perm[k])] = ix[k];
        line(v.name + "[ks_i] = " + s + "[" + target::spell_linear_index(src, a.shape) + "];");
        close_elements();
        return;
      }
      case OpKind::Reduce: {
        const Value& a = val(o.args[0]);
        size_t ax = static_cast<size_t>(o.axis);
        if (v.dtype != DType::Bool) {  // (shuffles move 32- and 64-bit values)
          if (v.scalar()) {
            reduce_scalar(o, a, v);
            return;
          }
          if (reduce_innermost(o, a, v) || reduce_leading(o, a, v)) return;
        }
        barrier();
        std::string s = stage(o.args[0], 0);
        barrier();
        std::string identity = scalar(ir::reducer_identity_expr(o.reducer, v.dtype));
        auto reduce_into = [&](const std::string& target, const std::vector<std::string>& out_ix) {
          std::string acc = tmp();
          line(ty + " " + acc + " = " + identity + ";");
          std::vector<std::string> src;
          size_t j = 0;
          for (size_t d = 0; d < a.shape.size(); ++d) src.push_back(d == ax ? "ks_r" : out_ix[j++]);
          line("for (int ks_r = 0; ks_r < " + std::to_string(a.shape[ax]) + "; ++ks_r) " + acc +
               " = " +
               round_to(combine(o.reducer, v.dtype, acc,
                                s + "[" + target::spell_linear_index(src, a.shape) + "]"),
                        v.dtype) +
               ";");
          line(target + " = " + acc + ";");
        };
        if (v.scalar()) {
          line(ty + " " + v.name + ";");
          line("{");
          ++indent_;
          reduce_into(v.name, {});
          --indent_;
          line("}");
          return;
        }
        declare(v);
        std::vector<std::string> ix = open_elements(v);
        reduce_into(v.name + "[ks_i]", ix);
        close_elements();
        return;
      }
      case OpKind::Dot: {
        const Value& a = val(o.args[0]);
        const Value& b = val(o.args[1]);
        declare(v);
        if (v.dtype == DType::F32 && a.exact_f16 && b.exact_f16 && a.shape[0] % 16 == 0 &&
            a.shape[1] % 16 == 0 && b.shape[1] % 8 == 0) {
          mma_dot(a, b, v);
          return;
        }
        barrier();
        std::string sa = stage(o.args[0], 0);
        std::string sb = stage(o.args[1], (a.elements() * element_bytes(a.dtype) + 15) / 16 * 16);
        barrier();
        std::vector<std::string> ix = open_elements(v);
        std::string acc = tmp();
        int64_t K = a.shape[1], N = b.shape[1];
        std::string x = sa + "[" + ix[0] + " * " + std::to_string(K) + " + ks_r]",
                    y = sb + "[ks_r * " + std::to_string(N) + " + " + ix[1] + "]";
        // Floats fused multiply-added in f32; integers summed exactly in their type.
        const bool integer = is_int(v.dtype);
        line(std::string(ctype(v.dtype)) + " " + acc + (integer ? " = 0;" : " = 0.0f;"));
        line("for (int ks_r = 0; ks_r < " + std::to_string(K) + "; ++ks_r) " + acc +
             (integer ? " += " + x + " * " + y + ";"
                      : " = fmaf(" + x + ", " + y + ", " + acc + ");"));
        line(v.name + "[ks_i] = " + acc + ";");
        close_elements();
        return;
      }
      case OpKind::Gather: {
        std::vector<std::string> a;
        for (int id : o.args) a.push_back(at(id));
        if (v.scalar()) {
          line(ty + " " + v.name + ";");
          line("{  // gather " + o.buffer);
          ++indent_;
          line(v.name + " = " + gather_element(o, a, v.dtype) + ";");
          --indent_;
          line("}");
          return;
        }
        declare(v);
        line("// gather " + o.buffer);
        open_elements(v);
        line(v.name + "[ks_i] = " + gather_element(o, a, v.dtype) + ";");
        close_elements();
        return;
      }
      case OpKind::Load:
        line("// load " + o.buffer);
        if (staged_.count(o.result))
          read_staged(o, v);
        else
          region(o, false);
        return;
      default:
        internal_error << "CUDA codegen: unexpected op";
    }
  }

  std::vector<Value> values_;
  std::map<int, const TileOp*> aranges_;  // arange result -> its operation
  std::map<std::string, Value> registers_;
  struct OpenElements {
    int depth;                   // braces open_elements opened
    std::vector<int64_t> shape;  // of the value whose elements it walks
    bool chunks;                 // a walk over chunks (ks_e the first element of each)
  };
  std::vector<OpenElements> open_;                  // the element walks open, innermost last
  std::map<int, TailLimit> tail_limits_;            // tail mask result -> its limit
  int instances_;                                   // per CTA (instances_per_cta_for)
  int threads_;                                     // per instance (threads_for, or a warp)
  bool has_dot_ = false;                            // the kernel computes a dot
  std::map<std::vector<int64_t>, int64_t> widest_;  // by tile shape (widest_chunks)
  bool planned_;                                // the staged loads are issued (or none are to be)
  std::map<int, Staged> staged_;                // load result -> its slot
  std::set<const tile::TileStmt*> prefetched_;  // loops whose first tiles the kernel start issues
  std::map<const tile::TileStmt*, std::string> stream_vars_;  // pipelined loop -> its variable
  // (loop, the owner of a row kept) -> the variable holding how many iterations read the row
  std::map<std::pair<const tile::TileStmt*, int>, std::string> keep_;
  int groups_ = 0;
  int64_t scratch_ = 0;  // shared memory below this holds the staged slots
};

// A sum over one axis of elementwise terms of two broadcast tiles that each lack an axis the
// other has, with two or more axes left: a matrix product that translation did not make a dot
// (its rows or columns span more than one axis, such as the heads of a group and a strip of
// queries), or a distance between rows and columns (sum[d]((q - k)^2)), computed element by
// element. Why not on the tensor cores, or empty when the kernel has none.
std::string elementwise_matrix_product(const tile::Kernel& k) {
  std::map<int, const tile::TileOp*> defs;
  tile::for_each_op(k.body, [&](const tile::TileOp& o) { defs[o.result] = &o; });
  auto def = [&](int id) -> const tile::TileOp* {
    auto it = defs.find(id);
    return it == defs.end() ? nullptr : it->second;
  };
  // The axes of a product's operand that its broadcast adds, or none when it is no broadcast.
  auto added_axes = [&](int id) {
    std::set<int> added;
    const tile::TileOp* b = def(id);
    if (!b || b->kind != tile::OpKind::Broadcast) return added;
    for (size_t a = 0; a < b->type.shape.size(); ++a)
      if (std::find(b->dims.begin(), b->dims.end(), static_cast<int>(a)) == b->dims.end())
        added.insert(static_cast<int>(a));
    return added;
  };
  // The axes each broadcast among the operands of the elementwise terms under `id` adds.
  std::function<void(int, std::vector<std::set<int>>&)> broadcast_leaves =
      [&](int id, std::vector<std::set<int>>& out) {
        const tile::TileOp* d = def(id);
        if (d && d->kind == tile::OpKind::Map && !d->is_call) {
          for (int a : d->args) broadcast_leaves(a, out);
          return;
        }
        if (std::set<int> added = added_axes(id); !added.empty()) out.push_back(added);
      };
  std::string why;
  tile::for_each_op(k.body, [&](const tile::TileOp& o) {
    if (!why.empty() || o.kind != tile::OpKind::Reduce || o.reducer != ir::Reducer::Sum ||
        o.type.shape.size() < 2)
      return;
    std::vector<std::set<int>> leaves;
    broadcast_leaves(o.args[0], leaves);
    for (size_t i = 0; i < leaves.size() && why.empty(); ++i)
      for (size_t j = i + 1; j < leaves.size() && why.empty(); ++j) {
        const std::set<int>&a = leaves[i], &b = leaves[j];
        if (a.count(o.axis) || b.count(o.axis) ||
            std::any_of(a.begin(), a.end(), [&](int x) { return b.count(x) > 0; }))
          continue;
        why = "the sum `" + tile::to_string(o) +
              "` combines tiles whose rows and columns span different axes (a matrix product, "
              "or a distance between rows and columns), computed element by element";
      }
  });
  return why;
}

}  // namespace

CudaSource generate_cuda_source(const tile::TileProgram& program, const CudaTarget& target) {
  CudaSource out;
  const std::set<std::string> touched = tile::buffers_in_memory(program);
  for (const ir::Buffer& b : program.source.buffers)
    out.buffers.push_back(tile::is_register(program, b.name) ? BufferSlot::Register
                          : b.role == ir::BufferRole::Intermediate && !touched.count(b.name)
                              ? BufferSlot::Unused
                              : BufferSlot::Memory);
  std::string code = program_preamble(program, target);
  for (const tile::Kernel& k : program.kernels) {
    KernelLaunch launch;
    launch.name = ident("ks", k.name);
    for (const tile::GridAxis& g : k.grid) launch.grid.push_back(g.extent);
    std::string text;
    const size_t sites_before = out.sites.size();
    const KernelLaunch unwritten = launch;
    std::string too_large;  // why the tensor-core kernel was not kept
    if (std::unique_ptr<KernelWriter> fragments =
            fragment_writer(program, k, target, out.sites, launch)) {
      launch.tensor_cores = true;
      text = fragments->write(k, launch);
      // Tiles that need more shared memory than a CTA of this architecture has (a group of 128
      // query rows of 512 latent dimensions) cannot launch: the element-cyclic writer runs
      // them, and says why.
      if (launch.dynamic_shared_bytes > target.max_shared_bytes()) {
        too_large = "its tensor-core tiles need " + std::to_string(launch.dynamic_shared_bytes) +
                    " bytes of shared memory, more than the " +
                    std::to_string(target.max_shared_bytes()) + " a CTA has on this architecture";
        out.sites.resize(sites_before);
        launch = unwritten;
      }
    }
    if (!launch.tensor_cores) {
      // Staged loads take shared memory next to the kernel's scratch space: without them when
      // both do not fit in what every supported architecture gives a CTA.
      size_t sites = out.sites.size();
      KernelLaunch first = launch;
      text = CyclicWriter(program, k, out.sites, true).write(k, launch);
      if (launch.dynamic_shared_bytes > kMaxSharedBytes) {
        out.sites.resize(sites);
        launch = first;
        text = CyclicWriter(program, k, out.sites, false).write(k, launch);
      }
      // A kernel that asks for more shared memory than a CTA has would fail at its launch.
      if (launch.dynamic_shared_bytes > target.max_shared_bytes())
        throw UserError(
            "kernel '" + k.name + "' needs " + std::to_string(launch.dynamic_shared_bytes) +
            " bytes of shared memory, more than the " + std::to_string(target.max_shared_bytes()) +
            " a CTA has on " + target.arch() +
            ": its tiles are too large; give a smaller --row-tile "
            "or --reduce-tile");
    }
    if (!too_large.empty()) launch.not_tensor_cores = too_large;
    if (launch.not_tensor_cores.empty()) launch.not_tensor_cores = elementwise_matrix_product(k);
    code += text + "\n";
    out.launches.push_back(launch);
  }
  out.code = code;
  return out;
}

}  // namespace kintsugi::cuda
