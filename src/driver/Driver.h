// \file Driver.h
// The pipeline, written once. Every front end (the CLI, the Python module, the C++ API, the
// tests) goes through these stages, in this order:
//
//   load_file         .te source -> parse -> check -> lower      (te::Program -> ir::LoopProgram)
//   schedule_program  auto-scheduler (or none) -> translation validation -> the first schedule
//                     that passes, falling back from split-K to rolling update to unscheduled
//                     with a warning that names the primitive that broke the program
//   build_kernel      scheduled loop program -> tile program (when it is in tile form) -> the
//                     target's code -> a kernel (CPU shared object, or CUDA module)
//
// Invariant established: no front end runs a schedule that did not pass validation against the
// original program (unless validation was turned off for a trusted record), and every fallback to
// a slower schedule or code path is reported as a warning with its reason.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "driver/ValidateSchedule.h"
#include "ir/Stmt.h"
#include "runtime/Tensor.h"

namespace kintsugi::cpu {
class CpuKernel;
}
namespace kintsugi::cuda {
class CudaKernel;
}
namespace kintsugi::tile {
struct TileProgram;
}

namespace kintsugi::driver {

// What a kernel is compiled for.
struct Target {
  enum class Kind { Cpu, Cuda };
  Kind kind = Kind::Cpu;
  std::string arch;  // CUDA: "sm_80" or "sm_90a"; empty on the CPU (the host)

  // "cpu" or "cuda"; any other name is a user error that lists the two.
  static Target parse(const std::string& name, const std::string& arch = "");
  std::string name() const { return kind == Kind::Cuda ? "cuda" : "cpu"; }
};

struct ScheduleOptions {
  Target target;
  std::string schedule = "auto";  // "auto" or "none"
  runtime::SizeMap sizes;         // the sizes the schedule and tile extents are chosen for
  runtime::ParamMap params;       // param values (the program's own where absent)
  int64_t chunk_tiles = 0;        // split-K: key tiles a chunk walks; 0 chooses
  bool validate = true;           // false only for a trusted, already validated record
};

struct Scheduled {
  ir::LoopProgram program;        // what the back ends compile
  std::string schedule = "auto";  // what was asked for: "auto" or "none"
  nlohmann::json trace = nlohmann::json::array();
  std::vector<std::string> primitives;         // names of the primitives applied, in order
  std::vector<std::string> notes;              // why the auto-scheduler did (not do) something
  std::vector<std::string> warnings;           // a schedule rejected, a slower path taken
  std::optional<ValidationReport> validation;  // of the schedule in `program`
};

// Parses, checks and lowers a .te file.
ir::LoopProgram load_file(const std::string& path);

// Schedules `program` as `o` asks, validates the result and falls back when validation fails.
Scheduled schedule_program(const ir::LoopProgram& program, const ScheduleOptions& o);

struct Built {
  std::string form;  // "tile" or "loop": the IR the code was generated from
  std::shared_ptr<cpu::CpuKernel> cpu;
  std::shared_ptr<cuda::CudaKernel> gpu;
  bool from_cache = false;
  double compile_seconds = 0.0;
};

// The tile program of `s` at `sizes`; a user error naming the reason when it is not in tile form
// (`who` starts the message, e.g. "--target cuda").
tile::TileProgram to_tiles(const Scheduled& s, const runtime::SizeMap& sizes,
                           const std::string& who);

// Compiles `s` for `target` at `sizes`. On the CPU an auto-scheduled program in tile form runs as
// tiles, the rest as scalar loop code (a note in `notes` says why); the GPU runs tile programs
// only.
Built build_kernel(const Scheduled& s, const Target& target, const runtime::SizeMap& sizes,
                   std::vector<std::string>* notes);

}  // namespace kintsugi::driver
