// \file KernelWriter.h
// What the two CUDA kernel emitters share (CudaCodegen.cpp: the element-cyclic layout that is
// correct for every tile kernel; FragmentCodegen.cpp: the tensor-core layout): the spelling of
// types, literals and scalar expressions, the kernel prologue (sizes, params, buffer pointers and
// extents, the grid instance decoded from blockIdx.x, zeroed registers), region addressing of
// loads and stores, and the error sites.
//
// Invariant established: every kernel of one program reads its arguments from the same KsArgs
// layout (CudaBackend.h), and every failed squeezed index or integer division records its site in
// the program's one site table instead of touching memory.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "target/CSpelling.h"
#include "target/cuda/CudaBackend.h"

namespace kintsugi::cuda {

const char* ctype(DType t);      // the C type a tile element of dtype t is computed in
std::string storage(DType t);    // the C type of a buffer element in memory
int64_t element_bytes(DType t);  // bytes of ctype(t)
std::string ident(const std::string& prefix, const std::string& name);  // a C identifier
std::string float_lit(double v);
std::string round_to(const std::string& code, DType t);  // float code rounded to what t holds
// Code of dtype `from` converted to dtype `to` as the reference interpreter's cast does: floats
// rounded to what `to` holds; i8 and i32 truncated toward zero and saturated, NaN to 0.
std::string cast_to(const std::string& code, DType from, DType to);
// `acc` combined with `x` by a reducer, in dtype t.
std::string combine(ir::Reducer r, DType t, const std::string& acc, const std::string& x);

// Whether every element of o's value is exactly a number of the 16-bit float type `half` (F16 or
// BF16; then an f32 dot of such values equals a tensor-core dot of that type with f32
// accumulation) or of I8 (then an integer dot of such values equals the int8 tensor cores' exact
// i32 sums, below 2^31), given which of its operands are.
bool holds_values_of(DType half, const tile::TileOp& o,
                     const std::function<bool(int)>& exact_operand);

// The generated file's preamble: device headers, KsArgs, the error and integer-division helpers.
std::string program_preamble(const tile::TileProgram& p, const CudaTarget& target);

class KernelWriter {
 public:
  KernelWriter(const tile::TileProgram& p, std::vector<std::string>& sites)
      : p_(p), sites_(sites) {}
  virtual ~KernelWriter() = default;

  // The kernel's code; sets launch.threads and launch.dynamic_shared_bytes.
  std::string write(const tile::Kernel& k, KernelLaunch& launch);

 protected:
  virtual int threads() const = 0;              // per grid instance
  virtual int min_blocks() const { return 1; }  // CTAs an SM is meant to hold at once
  // Bytes the dynamic shared memory's start is aligned to.
  virtual int smem_alignment() const { return 128; }
  // Grid instances a CTA runs side by side. Above one, an instance is threads() lanes of a warp
  // (8, 16 or 32): ks_tid is its lane, the instance is blockIdx.x times this plus ks_instance,
  // ks_smem_g its slice of shared memory, ks_lanes the member mask of its lanes (on part of a
  // warp), and an instance past the last one exits at once. Such a body synchronises its lanes
  // only (__syncwarp), never the CTA.
  virtual int instances_per_cta() const { return 1; }
  virtual void declare_register(const tile::Register& r) = 0;
  virtual void body(const tile::TileBody& b) = 0;

  // Whether a serial loop's bounds depend on grid variable `var` (a causal key loop grows with the
  // query tile): such instances differ in work.
  static bool work_grows_along(const tile::Kernel& k, const std::string& var);

  void line(const std::string& s);
  std::string tmp() { return "ks_t" + std::to_string(tmp_++); }
  int site(const std::string& text);

  // A scalar expression over grid and loop variables, dims and params.
  std::string scalar(const ir::Expr& e);
  std::string call(ir::MathFn fn, const std::vector<std::string>& a, bool fl);
  std::string spell(ir::Op op, const std::vector<std::string>& a, bool fl);

  // Opens `{ for (v = min; v < min + extent; ++v) {`, the for preceded by `pragma` if given;
  // returns the loop variable's identifier (the bounds are in `*lo`, `*hi`). close_loop closes
  // both braces.
  std::string open_loop(const tile::TileStmt& s, std::string* lo = nullptr,
                        std::string* hi = nullptr, const std::string& pragma = "");
  void close_loop();

  // Region addressing of a load or store: open_region emits the starts and the check of the
  // squeezed indices; element() gives the linear offset and the in-buffer condition of the
  // element at tile multi-index `ix`.
  struct Region {
    const tile::TileOp* op = nullptr;
    std::vector<std::string> starts;
    std::string ok;         // every squeezed index in range
    bool interior = false;  // the whole tile lies inside the buffer (tested by the caller)
  };
  Region open_region(const tile::TileOp& o);
  // What open_region checks of `o`: its buffer and the spelling of its squeezed starts.
  std::string squeezed_check(const tile::TileOp& o);
  void element(const Region& r, const std::vector<std::string>& ix, std::string* offset,
               std::string* inside) const;
  DType buffer_dtype(const std::string& name) const;
  // Whether the innermost tile axis of load or store `o` spans its buffer's innermost dimension
  // in aligned runs of `width` elements: from a start that is a multiple of `width`, in a
  // dimension whose extent (a constant, a specialised size, or a size divisible by a power of two,
  // TileProgram::divisible) is a multiple of `width` too. Then every run of `width` tile elements
  // along that axis that starts at a multiple of `width` is `width` consecutive, `width`-aligned
  // buffer elements, all inside the buffer or none (a bounds check of its first element decides
  // for the run).
  bool innermost_chunks(const tile::TileOp& o, int64_t width) const;
  std::string load_value(const std::string& buffer, const std::string& raw, DType to) const;
  // One element of gather `o` whose operands' values are `args` (the indices, then the mask if
  // any): emits the index checks (an index outside the buffer where the mask holds records the
  // buffer's error site) and returns the element's value, 0 where it is not read. With
  // `unchecked`, the element is read whatever the mask, where its indices lie inside the buffer,
  // and no check is emitted: *unchecked names the condition that they do ("" when provably
  // always), for the caller to check where the mask holds.
  std::string gather_element(const tile::TileOp& o, const std::vector<std::string>& args, DType to,
                             std::string* unchecked = nullptr);
  std::string store_value(const std::string& buffer, const std::string& v) const;

  const tile::TileProgram& p_;
  std::vector<std::string>& sites_;
  std::ostringstream body_;
  int indent_ = 0;
  int tmp_ = 0;
  int64_t smem_bytes_ = 0;
  std::string exp_function_ = "expf";    // how e^x is spelled (ks_exp: the approximate unit)
  std::string tanh_function_ = "tanhf";  // and tanh (ks_tanh)
  std::map<std::string, std::string> buffer_ids_;
  std::map<std::string, std::vector<std::string>> buffer_extents_;
  // Region starts computed once in front of a loop whose body opens them (by their spelling):
  // open_region names the variable instead of spelling the start again.
  std::map<std::string, std::string> invariant_starts_;
  // Squeezed checks (squeezed_check) already made in front of the loop being written, for every
  // iteration: the prologue of a pipelined loop checks each streamed tile's squeezed starts that
  // do not move with the loop, and runs whenever the loop does. Inside that loop, a region with
  // the same check computes its condition (its copies are still masked by it) but records no
  // error again. (Such a report in the loop kept 64-bit extents and the error pointer live in
  // every iteration: ptxas spilled the prefill kernels at head size 128.)
  std::set<std::string> checked_before_loop_;
  // The shared memory of the instance: the CTA's, or its slice (instances_per_cta).
  std::string smem_ = "ks_smem";
  // Names of values that hold an integer literal: a division by one is by a compile-time constant.
  std::set<std::string> literal_names_;
  // Names that hold a size or a param for the whole launch (d_N, p_C, and the values of Full ops
  // that are one of them): a division by one is checked once, at the kernel's start, and divides
  // without a test of its own (so that the C++ compiler may hoist and share it).
  std::map<std::string, std::string> launch_constants_;  // name -> the size or param it holds
  void note_full(const std::string& name, const ir::Expr& scalar);

 private:
  const target::CHelpers& helpers();
  std::unique_ptr<target::CHelpers> helpers_;
  // The launch constants divided by, each with the error site its zero reports.
  std::map<std::string, int> checked_divisors_;
};

}  // namespace kintsugi::cuda
