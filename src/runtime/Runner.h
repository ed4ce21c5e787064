// \file Runner.h
// The end-to-end driver behind `kintsugi run`: binds sizes, draws seeded random inputs, compiles
// and runs the program on a target, verifies it against the exact reference interpreter (on a
// sample of rows when the instance is too large for it and its rows are independent), and
// times it. Shared by the CLI and the C++ API so that both report the same numbers.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "driver/Driver.h"
#include "ir/Stmt.h"
#include "runtime/Tensor.h"

namespace kintsugi::runtime {

struct RunOptions {
  std::string target = "cpu";  // "cpu" or "cuda"
  std::string arch;            // CUDA: the architecture; empty: the GPU's own
  std::string schedule = "auto";
  SizeMap shape;    // overrides of the sizes written in the source
  ParamMap params;  // overrides of the param values written in the source
  uint64_t seed = 0;
  bool verify = false;
  bool bench = false;
  // Write inputs, outputs and manifest.json here (--save-io). An existing directory must be empty
  // unless save_io_force (--force); files are written atomically and symbolic links in the
  // directory are replaced, never followed.
  std::string save_io_dir;
  bool save_io_force = false;
  std::string
      inputs_dir;  // read inputs from NAME.npy files here instead of drawing them (--inputs)
  // Verify against float64 NAME.npy arrays in this directory instead of the interpreter (needs
  // inputs_dir: the reference must come from the same inputs). Implies verification.
  std::string reference_dir;
  int64_t chunk_tiles = 0;  // split-K: key tiles a chunk walks with the rolling update; 0: chosen
  int64_t row_tile = 0,
          reduce_tile = 0;  // schedule tiles (driver::ScheduleOptions); 0: the target's
  // Row reductions whose row has at most this many bytes are computed whole (driver's option);
  // -1: the target's, 0: every row streamed.
  int64_t whole_row_bytes = -1;
  bool validate = true;  // validate the schedule against the program (driver/ValidateSchedule.h)
  // Code paths that must be taken (--require): a warning of one of these kinds is an error.
  std::set<driver::Requirement> require;
  // Sizes the kernel is generated for every value of (--dynamic): scheduled at
  // driver::kDynamicScheduleSize, run at `shape`.
  std::set<std::string> dynamic;
  int bench_min_runs = 10;
  double bench_min_seconds = 0.5;
};

struct OutputCheck {
  std::string name;
  DType dtype;
  double max_rel_err = 0.0;  // max |out - ref| / max |ref| over finite reference values
  double max_abs_err = 0.0;
  double tolerance = 0.0;
  bool special_values_match = true;  // NaN / Inf positions agree
  bool ok = false;
};

struct RunReport {
  std::string program;
  std::string target;
  std::string arch;
  SizeMap shape;
  std::vector<std::string> schedule;        // names of the primitives applied, in order
  std::vector<std::string> schedule_notes;  // why the auto-scheduler did (not do) something
  std::vector<std::string> warnings;  // a schedule rejected by validation, a slower path taken
  std::vector<driver::FusedReduction> fusion;  // every reduction and the update that fused it
  std::vector<driver::KernelPath> kernels;     // the code path of every kernel
  double validation_seconds = 0.0;  // the schedule's and the tile program's validation (0 when
                                    // cached or off)
  std::string form;                 // the code the kernel was generated from: "tile" or "loop"
  std::optional<bool> verified;     // null without --verify
  double max_rel_err = 0.0;
  // Set when the instance was verified on a sample of its rows (RowSample.h): the size sampled
  // along, and how many of its rows were checked.
  std::string sampled_size;
  int64_t sampled_rows = 0;
  std::vector<OutputCheck> checks;
  std::optional<double> time_ms;  // median, with --bench
  int bench_runs = 0;
  bool from_cache = false;
  double compile_seconds = 0.0;
};

// Resolves the size of every dim: `overrides` first, then the sizes in the source; validates
// that each is positive and that every dim has one.
SizeMap bind_sizes(const ir::LoopProgram& program, const SizeMap& overrides);

// Every param's value: the program's own, replaced by `overrides` (--param). Throws
// RuntimeArgError for a name that is not a param, or a value its type cannot hold.
ParamMap bind_params(const ir::LoopProgram& program, const ParamMap& overrides);
// Seeded random inputs: floats ~ N(0, 1) rounded to the dtype; integers uniform in a small range,
// except an index tensor (an integer input read as an index of another buffer, a lookup such as
// X[r, TGT[r]], directly or through a clamp such as max(TGT[r], 0)): uniform over the indices
// valid for every dimension it indexes. An input of 2^22 elements or more is drawn in parallel
// from a counter-based stream (the same values whatever the machine's thread count), smaller ones
// from one sequential generator.
// `params`: the values of params that shapes use (the program's own where absent).
std::map<std::string, Tensor> random_inputs(const ir::LoopProgram& program, const SizeMap& sizes,
                                            uint64_t seed, const ParamMap& params = {});
// The verification tolerance of an output (depends on the lowest float precision the program
// computes or stores in, and on the output type).
double tolerance_for(const ir::LoopProgram& program, DType output);
// Compares a computed output with the exact reference. `nonfinite_inputs`: some input holds NaN
// or an infinity, and a NaN of the reference may be any value (docs/language.md, Semantics). At
// the output type's overflow boundary (the reference and the output both within the tolerance of
// its largest finite value, with the same sign), its largest value and infinity agree.
OutputCheck compare_output(const std::string& name, const Tensor& out,
                           const std::vector<double>& ref, double tolerance,
                           bool nonfinite_inputs = false);
// Whether any float input holds NaN or an infinity.
bool has_nonfinite(const std::map<std::string, Tensor>& inputs);

// Reads every input of the program from `dir`/NAME.npy, binding the sizes that appear as plain
// dims in input shapes (they must agree with each other and with `overrides`); shapes over
// params take their values from `params` (every param of the program).
std::map<std::string, Tensor> read_inputs(const ir::LoopProgram& program, const std::string& dir,
                                          SizeMap& sizes, const SizeMap& overrides,
                                          const ParamMap& params);

RunReport run_program(const ir::LoopProgram& program, const RunOptions& options);

}  // namespace kintsugi::runtime
