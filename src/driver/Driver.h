// \file Driver.h
// The pipeline, written once. Every front end (the CLI, the Python module, the C++ API, the
// tests) goes through these stages, in this order:
//
//   load_file         .te source -> parse -> check -> lower      (te::Program -> ir::LoopProgram)
//   schedule_program  auto-scheduler (or none) -> translation validation -> the first schedule
//                     that passes, falling back from split-K to rolling update to unscheduled
//                     with a warning that names the primitive that broke the program; what was
//                     fused (FusedReduction)
//   build_kernel      scheduled loop program -> tile program (when it is in tile form) ->
//                     the tile passes -> translation validation of the tile program against
//                     the scheduled one (a pass that breaks it is dropped, with a warning) ->
//                     the target's code -> a kernel (CPU shared object, or CUDA module); the
//                     code path each kernel took (KernelPath)
//   (code_paths       the same paths without compiling: `kintsugi lower`, no GPU needed)
//
// Invariant established: no front end runs a schedule that did not pass validation against the
// original program (unless validation was turned off for a trusted record), and every fallback to
// a slower schedule or code path is reported as a warning with its reason. The fallbacks that
// `--require` names (Requirement) are Shortfalls as well as warnings: a requirement that one
// breaks is a user error naming the requirement, the primitive or kernel, and the reason.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "driver/ValidateSchedule.h"
#include "ir/Stmt.h"
#include "runtime/Tensor.h"
#include "target/cuda/CudaTarget.h"

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

  // "cpu" or "cuda"; any other name is a user error that lists the two, and so is an `arch` for
  // the CPU or one that is not sm_<N>[a|f].
  static Target parse(const std::string& name, const std::string& arch = "");
  std::string name() const { return kind == Kind::Cuda ? "cuda" : "cpu"; }
  // CUDA: the architecture code is generated and compiled for: `arch` when given, else this
  // machine's GPU's, else (no GPU: printing code, reporting code paths) sm_90a, the H100/H200's.
  std::string cuda_arch() const;
  cuda::CudaTarget cuda_target() const { return cuda::CudaTarget::parse(cuda_arch()); }
};

// What `--require` (Python: require=[...]) can insist on: the program fuses as far as the
// scheduler finds it can (no "fusion abandoned", no reduction chain left unfused, no schedule
// rejected by validation down to the unscheduled program); the code comes from tile IR, not
// scalar loop code; every kernel with a dot runs on the tensor cores, not on the element-cyclic
// writer.
enum class Requirement : uint8_t { Fused, Tile, TensorCore };
const char* requirement_name(Requirement r);  // "fused", "tile", "tensor-core"
// Parses names ("fused", "tile", "tensor-core"); `who` ("--require") starts the user error for an
// unknown one.
std::set<Requirement> parse_requirements(const std::vector<std::string>& names,
                                         const std::string& who);

// A place where the compiler did less than the program allows: the requirement it breaks and the
// warning's text (which names the primitive or kernel and the reason).
struct Shortfall {
  Requirement requirement;
  std::string text;
};

// One reduction of the program with its chain (schedule/ReductionChains.h) and the update that
// fused it: "rolling", "split-k" or "none".
struct FusedReduction {
  std::string name;
  std::string axis;
  std::vector<std::string> producers;  // the reductions whose running values it reads
  std::string update = "none";
};

// The code path of one kernel (named as in the tile IR): "tile" or "scalar" on the CPU;
// "tensor-core" or "element-cyclic" on CUDA. `reason`: why not tiles, or why a kernel with a dot
// of f16 or bf16 values is not on the tensor cores (a dot of f32 values stays in f32, as written).
struct KernelPath {
  std::string name;
  std::string path;
  std::string reason;
};

struct ScheduleOptions {
  Target target;
  std::string schedule = "auto";  // "auto" or "none"
  runtime::SizeMap sizes;         // the sizes the schedule and tile extents are chosen for
  runtime::ParamMap params;       // param values (the program's own where absent)
  int64_t chunk_tiles = 0;        // split-K: key tiles a chunk walks; 0 chooses
  // The rolling update's rows a tile and the tile of the reduced axis (keys, in attention);
  // 0 takes the target's (AutoScheduleOptions::row_tile, tile).
  int64_t row_tile = 0, reduce_tile = 0;
  // Row reductions whose row has at most this many bytes run unfused, the row one tile
  // (AutoScheduleOptions::whole_row_bytes); -1 takes the target's, 0 fuses them all.
  int64_t whole_row_bytes = -1;
  bool validate = true;           // false only for a trusted, already validated record
  std::set<Requirement> require;  // shortfalls that are errors (`who` names the option)
  std::string require_who = "--require";
  // Sizes that vary from run to run (the Python module's dynamic=): the tile program assumes
  // nothing of their values at `sizes` (tile::translate).
  std::set<std::string> dynamic;
};

struct Scheduled {
  ir::LoopProgram program;        // what the back ends compile
  std::string schedule = "auto";  // what was asked for: "auto" or "none"
  nlohmann::json trace = nlohmann::json::array();
  std::vector<std::string> primitives;         // names of the primitives applied, in order
  std::vector<std::string> notes;              // why the auto-scheduler did (not do) something
  std::vector<std::string> warnings;           // a schedule rejected, a slower path taken
  std::vector<Shortfall> shortfalls;           // of those, the ones `require` can name
  std::vector<FusedReduction> fusion;          // every reduction and its update
  std::optional<ValidationReport> validation;  // of the schedule in `program`
  runtime::ParamMap params;                    // as in the options (validation runs with them)
  std::set<Requirement> require;               // as in the options: build_kernel checks them
  std::string require_who = "--require";
  std::set<std::string> dynamic;  // as in the options: to_tiles keeps them general
  int64_t tile_budget = 0;        // the target's (tile::translate; 0: the translator's own)
  int64_t dot_multiple = 1;       // the target's dots' K and N (tile::pad_dot_extents; 1: any)
};

// Parses, checks and lowers a .te file.
ir::LoopProgram load_file(const std::string& path);

// Schedules `program` as `o` asks, validates the result and falls back when validation fails.
Scheduled schedule_program(const ir::LoopProgram& program, const ScheduleOptions& o);

// The code paths of the kernels a target compiles `s` into, and the shortfalls among them.
struct CodePaths {
  std::string form;      // "tile" or "loop": the IR the code is generated from
  std::string not_tile;  // why the program is not in tile form ("" in tile form)
  std::shared_ptr<const tile::TileProgram> tiles;   // the tile program (form "tile")
  std::optional<ValidationReport> tile_validation;  // of `tiles` against the scheduled program
  std::vector<KernelPath> kernels;
  std::vector<std::string> warnings;
  std::vector<Shortfall> shortfalls;
};

// Generates the code for `target` (CUDA source, no NVRTC; CPU: the tile translation) and says
// which path each kernel takes; throws the user error of a requirement of `s` that does not hold.
CodePaths code_paths(const Scheduled& s, const Target& target, const runtime::SizeMap& sizes);

// Throws a user error when one of `shortfalls` breaks a requirement in `require`: it names the
// requirement (as `who` spells the option) and every shortfall of that kind.
void check_requirements(const std::vector<Shortfall>& shortfalls,
                        const std::set<Requirement>& require, const std::string& who);

// The report of `--json`: {"fusion": [...], "kernels": [...]}.
nlohmann::json fusion_json(const std::vector<FusedReduction>& fusion);
nlohmann::json kernels_json(const std::vector<KernelPath>& kernels);

struct Built {
  std::string form;  // "tile" or "loop": the IR the code was generated from
  std::vector<KernelPath> kernels;
  std::vector<std::string> warnings;  // a slower code path taken (CodePaths)
  std::vector<Shortfall> shortfalls;
  std::optional<ValidationReport> tile_validation;  // as in CodePaths
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
// tiles, the rest as scalar loop code (a warning says why); the GPU runs tile programs only.
// Throws the user error of a requirement of `s` that does not hold, before compiling, and of a
// dynamic size of `s` that the tile program is specialised to (a tile extent).
Built build_kernel(const Scheduled& s, const Target& target, const runtime::SizeMap& sizes);

// The value a dynamic size (ScheduleOptions::dynamic) is scheduled at: the length of the
// benchmark decode, so that split-K chunks and combine tiles suit long sequences.
inline constexpr int64_t kDynamicScheduleSize = 32768;
// `sizes` with every size of `dynamic` at kDynamicScheduleSize.
runtime::SizeMap schedule_sizes(const runtime::SizeMap& sizes,
                                const std::set<std::string>& dynamic);

}  // namespace kintsugi::driver
