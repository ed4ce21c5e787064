// \file Kernel.h
// The compiled-kernel object behind `kintsugi.compile` (no Python types here: Module.cpp converts
// DLPack tensors to ArgViews and back).
//
// A Kernel holds one lowered program and compiles it per size binding: schedule (auto or none),
// loop-to-tile translation (the scalar loop path when the program has no tile form), CPU code
// generation and the host compiler (whose disk cache makes a binding seen before cheap). A call
// binds every dim from the shapes of its tensors, checks dtypes, ranks and shapes against the
// program's declarations, and runs the variant compiled for exactly those sizes, compiling it
// first if needed.
//
// Invariant: the CPU kernel only ever runs on tensors whose dtype and shape match the buffers of
// the program it was compiled from, at the sizes it was compiled for; every mismatch is a
// RuntimeArgError that names the tensor, what it expected and what it got.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ir/Stmt.h"
#include "runtime/Tensor.h"
#include "target/cpu/CpuBackend.h"

namespace kintsugi::python {

// A caller's tensor, contiguous row-major, as the binding sees it.
struct ArgView {
  DType dtype = DType::Unknown;  // Unknown: not a Kintsugi storage type (see dtype_name)
  std::string dtype_name;        // the producer's dtype: float16, bfloat16, float64, int64, ...
  std::vector<int64_t> shape;
  void* data = nullptr;                      // first element
  std::shared_ptr<runtime::Tensor> storage;  // set for Kintsugi's own tensors (used in place)
};

struct KernelOptions {
  std::string target = "cpu";
  std::string schedule = "auto";  // "auto" or "none"
  runtime::SizeMap shape;         // size hints (kintsugi.compile(shape=...))
  runtime::ParamMap params;       // param overrides
  std::string name;               // program name for source text (default "program")
};

// One compiled variant: the program scheduled and compiled for one size binding.
struct Variant {
  runtime::SizeMap sizes;
  ir::LoopProgram scheduled;
  std::shared_ptr<cpu::CpuKernel> kernel;
  std::vector<std::string> schedule;  // primitive names, in order
  std::vector<std::string> notes;     // the auto-scheduler's notes, and why not tile form
  std::string form;                   // "tile" or "loop"
};

// DLPack/NumPy spelling of a Kintsugi storage type: f16 -> float16, bf16 -> bfloat16, ...
std::string array_dtype_name(DType t);

class Kernel {
 public:
  // `text` is .te source (`is_source`) or the path of a .te file. Parses, checks, lowers and
  // validates the options; compiles right away when `shape` binds every dim (otherwise the first
  // call's tensors bind the sizes).
  Kernel(const std::string& text, bool is_source, KernelOptions options);

  // The rule of kintsugi.compile for a string: source text when it contains a newline or does
  // not end in ".te", else a path.
  static bool is_source_text(const std::string& text);

  // Runs on `inputs` (in the program's input order). With `outs` null the outputs are allocated
  // and returned; otherwise the results are written into `outs` (one per output, in order) and
  // nothing is returned. Thread-safe; compiles when the sizes are new.
  std::vector<std::shared_ptr<runtime::Tensor>> run(const std::vector<ArgView>& inputs,
                                                    const std::vector<ArgView>* outs);

  // The sizes a call with these tensors binds (checks dtypes, ranks, consistency and shapes).
  runtime::SizeMap bind(const std::vector<ArgView>& inputs, const std::vector<ArgView>* outs) const;

  // The variant of the last call, or (before any call) the one for the size hints: `shape`, then
  // the source's `sizes` line; compiles it if needed.
  std::shared_ptr<const Variant> current();
  // The variant for `sizes`, compiled on first use.
  std::shared_ptr<const Variant> variant(const runtime::SizeMap& sizes);

  const ir::LoopProgram& program() const { return program_; }
  const KernelOptions& options() const { return options_; }
  const runtime::ParamMap& params() const { return params_; }  // every param, with overrides
  std::vector<runtime::SizeMap> compiled_sizes() const;        // every binding compiled so far
  // "softmax(X: f32[M, N]) -> Y: f32[M, N]"
  std::string signature() const;

 private:
  std::shared_ptr<const Variant> compile_variant(const runtime::SizeMap& sizes) const;

  ir::LoopProgram program_;
  KernelOptions options_;
  runtime::ParamMap params_;

  mutable std::mutex mu_;  // guards variants_ and last_
  std::map<runtime::SizeMap, std::shared_ptr<const Variant>> variants_;
  std::shared_ptr<const Variant> last_;
  std::mutex compile_mu_;  // one compile at a time per kernel
};

}  // namespace kintsugi::python
