// \file main.cpp
// The `kintsugi` command line: check, lower, run, tune (DESIGN.md section 4).
// Exit codes: 0 success; 1 user error (bad source, bad arguments, failed verification);
// 2 internal error.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "driver/Driver.h"
#include "ir/Printer.h"
#include "runtime/Runner.h"
#include "schedule/ReductionChains.h"
#include "target/cpu/CpuBackend.h"
#include "target/cuda/CudaBackend.h"
#include "target/cuda/Nvrtc.h"
#include "te/Lower.h"
#include "te/Program.h"
#include "tile/Translate.h"

using namespace kintsugi;

namespace {

// Splits `NAME=VALUE,...` (the --shape and --param syntax) into pairs; a malformed entry or a
// name given twice is a user error naming the option.
std::vector<std::pair<std::string, std::string>> parse_assignments(const std::string& text,
                                                                   const std::string& option,
                                                                   const std::string& example) {
  std::vector<std::pair<std::string, std::string>> out;
  std::stringstream ss(text);
  std::string item;
  while (!text.empty() && std::getline(ss, item, ',')) {
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      arg_error << option << " entry '" << item << "' is not of the form NAME=VALUE (e.g. "
                << option << " " << example << ")";
    std::string name = item.substr(0, eq);
    for (const auto& [n, v] : out)
      if (n == name) arg_error << option << " gives '" << name << "' twice";
    out.push_back({name, item.substr(eq + 1)});
  }
  return out;
}

// The whole of `text` as a decimal integer, if it is one.
std::optional<long long> parse_integer(const std::string& text) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (...) {
    return std::nullopt;
  }
  if (used != text.size()) return std::nullopt;
  return v;
}

// --shape: positive integer sizes.
runtime::SizeMap parse_shape_arg(const std::string& text) {
  runtime::SizeMap out;
  for (const auto& [name, value] : parse_assignments(text, "--shape", "S=1024,T=1024")) {
    std::optional<long long> parsed = parse_integer(value);
    if (!parsed)
      arg_error << "--shape " << name << "=" << value << ": the value must be an integer";
    long long v = *parsed;
    if (v <= 0) arg_error << "--shape " << name << "=" << value << ": sizes must be positive";
    out[name] = v;
  }
  return out;
}

// --param: numeric param values.
runtime::ParamMap parse_param_arg(const std::string& text) {
  runtime::ParamMap out;
  for (const auto& [name, value] : parse_assignments(text, "--param", "W=16")) {
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(value, &used);
    } catch (...) {
      used = 0;
    }
    if (used != value.size())
      arg_error << "--param " << name << "=" << value << ": the value must be a number";
    out[name] = v;
  }
  return out;
}

uint64_t parse_seed(const std::string& text) {
  size_t used = 0;
  unsigned long long v = 0;
  bool ok = !text.empty() && text[0] != '-';
  try {
    if (ok) v = std::stoull(text, &used);
  } catch (...) {
    ok = false;
  }
  if (!ok || used != text.size())
    arg_error << "--seed '" << text << "' must be a non-negative integer";
  return v;
}

// --chunk-tiles: "auto" (0: the auto-scheduler chooses) or a positive count.
int64_t parse_chunk_tiles(const std::string& text) {
  if (text == "auto") return 0;
  std::optional<long long> v = parse_integer(text);
  if (!v || *v < 1)
    arg_error << "--chunk-tiles takes auto or a positive count, not '" << text << "'";
  return *v;
}

// --row-tile, --reduce-tile: "auto" (0: the target's) or a positive multiple of 16.
int64_t parse_tile(const std::string& option, const std::string& text) {
  if (text == "auto") return 0;
  std::optional<long long> v = parse_integer(text);
  if (!v || *v < 16 || *v % 16 != 0)
    arg_error << option << " takes auto or a positive multiple of 16, not '" << text << "'";
  return *v;
}

// --whole-row-bytes: "auto" (-1: the target's) or a byte count (0: every row streamed).
int64_t parse_whole_row_bytes(const std::string& text) {
  if (text == "auto") return -1;
  std::optional<long long> v = parse_integer(text);
  if (!v || *v < 0)
    arg_error << "--whole-row-bytes takes auto or a byte count (0 streams every row), not '" << text
              << "'";
  return *v;
}

// --require: a comma-separated list of fused, tile, tensor-core.
std::set<driver::Requirement> parse_require_arg(const std::string& text) {
  std::vector<std::string> names;
  std::stringstream ss(text);
  std::string item;
  while (!text.empty() && std::getline(ss, item, ',')) names.push_back(item);
  return driver::parse_requirements(names, "--require");
}

void print_warnings(const std::vector<std::string>& warnings) {
  for (const std::string& w : warnings) std::cerr << "warning: " << w << "\n";
}

// What `kintsugi lower` schedules with.
struct LowerOptions {
  std::string schedule, target, arch;
  runtime::SizeMap sizes;    // what the auto-scheduler decides with (split-K or rolling update,
                             // tile extents)
  runtime::ParamMap params;  // param values (the program's own where absent): a param extent is a
                             // tile extent at its value
  int64_t chunk_tiles = 0;   // split-K chunks of that many key tiles (0: chosen)
  int64_t row_tile = 0, reduce_tile = 0;  // schedule tiles (0: the target's)
  int64_t whole_row_bytes = -1;  // rows up to this many bytes computed whole (-1: the target's)
  bool validate = true;
  std::set<driver::Requirement> require;
};

// The program after the requested schedule (validated, see driver/Driver.h), with the trace and
// the auto-scheduler's notes; its warnings go to stderr.
driver::Scheduled apply_schedule(const ir::LoopProgram& lp, const LowerOptions& l) {
  driver::ScheduleOptions o;
  o.target = driver::Target::parse(l.target, l.arch);
  o.schedule = l.schedule;
  o.sizes = l.sizes;
  o.params = l.params;
  o.chunk_tiles = l.chunk_tiles;
  o.row_tile = l.row_tile;
  o.reduce_tile = l.reduce_tile;
  o.whole_row_bytes = l.whole_row_bytes;
  o.validate = l.validate;
  o.require = l.require;
  driver::Scheduled s = driver::schedule_program(lp, o);
  print_warnings(s.warnings);
  return s;
}

int cmd_check(const std::string& file) {
  te::Program p = te::parse_file(file);
  te::check(p);
  std::cout << file << ": ok (" << p.inputs.size() << " input" << (p.inputs.size() == 1 ? "" : "s")
            << ", " << p.defs.size() << " definition" << (p.defs.size() == 1 ? "" : "s") << ")\n";
  return 0;
}

int cmd_lower(const std::string& file, const std::string& print, LowerOptions l,
              const runtime::SizeMap& shape) {
  te::Program p = te::parse_file(file);
  te::check(p);
  if (l.schedule != "auto" && l.schedule != "none")
    arg_error << "unknown --schedule '" << l.schedule << "'; use auto or none";
  const std::vector<std::string> prints = {"te",    "loop", "scheduled", "repairs",
                                           "trace", "tile", "source",    "ptx"};
  if (std::find(prints.begin(), prints.end(), print) == prints.end())
    arg_error << "unknown --print '" << print
              << "'; use te, loop, scheduled, repairs, trace, tile, source or ptx";
  if ((print == "source" || print == "ptx") && l.target != "cuda" &&
      (print == "ptx" || l.target != "cpu"))
    arg_error << "--print " << print << ": unknown target '" << l.target << "'; use "
              << (print == "ptx" ? "cuda" : "cpu or cuda");
  const driver::Target target = driver::Target::parse(l.target, l.arch);
  ir::LoopProgram lp = te::lower(p);
  l.sizes = runtime::bind_sizes(lp, shape);
  l.params = runtime::bind_params(lp, l.params);
  // The scheduled program, and the code path of every kernel (generated, not compiled) when the
  // printed form or --require needs it: their warnings go to stderr.
  std::optional<driver::Scheduled> s;
  std::optional<driver::CodePaths> paths;
  const bool scheduled = print != "te" && print != "loop" && print != "repairs";
  if (scheduled || !l.require.empty()) s = apply_schedule(lp, l);
  if (s && (print != "scheduled" || !l.require.empty())) {
    paths = driver::code_paths(*s, target, l.sizes);
    print_warnings(paths->warnings);
  }
  if (print == "te") {
    std::cout << te::to_string(p);
  } else if (print == "loop") {
    std::cout << ir::to_string(lp);
  } else if (print == "repairs") {
    std::cout << schedule::format_reduction_chains(lp, schedule::find_reduction_chains(lp));
  } else if (print == "scheduled") {
    std::cout << ir::to_string(s->program);
    for (const std::string& n : s->notes) std::cout << "# " << n << "\n";
  } else if (print == "trace") {
    nlohmann::json j;
    j["schedule"] = l.schedule;
    j["primitives"] = s->trace;
    j["notes"] = s->notes;
    std::vector<std::string> warnings = s->warnings;
    if (paths) warnings.insert(warnings.end(), paths->warnings.begin(), paths->warnings.end());
    j["warnings"] = warnings;
    j["fusion"] = driver::fusion_json(s->fusion);
    j["form"] = paths ? nlohmann::json(paths->form) : nlohmann::json(nullptr);
    j["kernels"] = paths ? driver::kernels_json(paths->kernels) : nlohmann::json(nullptr);
    if (s->validation)
      j["validation"] = {{"ran", s->validation->ran},
                         {"ok", s->validation->ok},
                         {"seconds", s->validation->seconds},
                         {"sizes", s->validation->shrunk},
                         {"params", s->validation->params}};
    if (paths && paths->tile_validation)
      j["tile_validation"] = {{"ran", paths->tile_validation->ran},
                              {"ok", paths->tile_validation->ok},
                              {"seconds", paths->tile_validation->seconds},
                              {"sizes", paths->tile_validation->shrunk},
                              {"params", paths->tile_validation->params}};
    std::cout << j.dump(2) << "\n";
  } else if (print == "source" && l.target == "cpu") {
    // The source that runs: from the tile IR when the program reached it, else the loop code.
    std::cout << (paths->tiles ? cpu::generate_tile_source(*paths->tiles)
                               : cpu::generate_source(s->program));
  } else if (print == "source" || print == "ptx") {
    std::string code =
        cuda::generate_cuda_source(
            paths->tiles ? *paths->tiles : driver::to_tiles(*s, l.sizes, "--target cuda"),
            target.cuda_target())
            .code;
    if (print == "source")
      std::cout << code;
    else {
      // ptxas' resources of every kernel first, as PTX comments (registers, spills).
      cuda::CompiledModule m = cuda::compile_cuda(code, lp.name, target.cuda_arch());
      for (const cuda::FunctionResources& f : m.resources.functions)
        if (f.entry)
          std::cout << "// ptxas: " << f.name << ": " << f.registers << " registers, "
                    << f.spill_store_bytes << " bytes spill stores, " << f.spill_load_bytes
                    << " bytes spill loads\n";
      std::cout << m.ptx;
    }
  } else if (print == "tile") {
    std::cout << tile::to_string(paths->tiles ? *paths->tiles
                                              : driver::to_tiles(*s, l.sizes, "--print tile"));
  }
  return 0;
}

int cmd_run(const std::string& file, const runtime::RunOptions& o, bool json) {
  ir::LoopProgram lp = driver::load_file(file);
  runtime::RunReport r = runtime::run_program(lp, o);
  for (const std::string& w : r.warnings) std::cerr << "warning: " << w << "\n";
  if (json) {
    nlohmann::json j;
    j["program"] = r.program;
    j["verified"] = r.verified ? nlohmann::json(*r.verified) : nlohmann::json(nullptr);
    j["max_rel_err"] = r.verified ? nlohmann::json(r.max_rel_err) : nlohmann::json(nullptr);
    j["verified_rows"] = r.sampled_rows ? nlohmann::json{{"size", r.sampled_size},
                                                         {"rows", r.sampled_rows},
                                                         {"of", r.shape.at(r.sampled_size)}}
                                        : nlohmann::json(nullptr);
    j["time_ms"] = r.time_ms ? nlohmann::json(*r.time_ms) : nlohmann::json(nullptr);
    j["target"] = r.target;
    j["arch"] = r.arch;
    j["shape"] = r.shape;
    j["schedule"] = r.schedule;
    j["schedule_notes"] = r.schedule_notes;
    j["warnings"] = r.warnings;
    j["fusion"] = driver::fusion_json(r.fusion);
    j["kernels"] = driver::kernels_json(r.kernels);
    j["validation_seconds"] = r.validation_seconds;
    j["form"] = r.form;
    j["seed"] = o.seed;
    j["from_cache"] = r.from_cache;
    j["compile_seconds"] = r.compile_seconds;
    nlohmann::json outs = nlohmann::json::array();
    for (const auto& c : r.checks)
      outs.push_back({{"name", c.name},
                      {"dtype", dtype_name(c.dtype)},
                      {"max_rel_err", c.max_rel_err},
                      {"max_abs_err", c.max_abs_err},
                      {"tolerance", c.tolerance},
                      {"special_values_match", c.special_values_match},
                      {"ok", c.ok}});
    j["outputs"] = outs;
    std::cout << j.dump() << "\n";
  } else {
    std::cout << r.program << " on " << r.target << " (";
    bool first = true;
    for (const auto& [k, v] : r.shape) {
      std::cout << (first ? "" : ", ") << k << "=" << v;
      first = false;
    }
    std::cout << ")" << (r.from_cache ? ", compiled (cache hit)" : ", compiled in ")
              << (r.from_cache ? "" : std::to_string(r.compile_seconds).substr(0, 4) + " s")
              << "\n";
    std::cout << "  schedule: ";
    if (r.schedule.empty()) std::cout << "none";
    for (size_t k = 0; k < r.schedule.size(); ++k) std::cout << (k ? ", " : "") << r.schedule[k];
    std::cout << "\n  code: from the " << r.form << " IR\n";
    for (const auto& n : r.schedule_notes) std::cout << "  note: " << n << "\n";
    for (const auto& c : r.checks)
      std::cout << "  " << c.name << " (" << dtype_name(c.dtype) << "): max rel err "
                << c.max_rel_err << " (tolerance " << c.tolerance << ")"
                << (c.special_values_match ? "" : ", NaN/Inf positions differ")
                << (c.ok ? "  ok" : "  FAILED") << "\n";
    std::string sampled;
    if (r.sampled_rows)
      sampled = " on " + std::to_string(r.sampled_rows) + " of the " +
                std::to_string(r.shape.at(r.sampled_size)) + " rows along " + r.sampled_size +
                " (sampled: the program computes each row from its own rows)";
    if (r.verified)
      std::cout << (*r.verified
                        ? (o.reference_dir.empty()
                               ? "verified against the exact reference" + sampled + "\n"
                               : "verified against the reference in " + o.reference_dir + "\n")
                        : std::string("VERIFICATION FAILED\n"));
    if (r.time_ms)
      std::cout << "time: " << *r.time_ms << " ms (median of " << r.bench_runs << " runs)\n";
  }
  return r.verified.value_or(true) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Kintsugi: a fusion compiler for chained reductions"};
  app.require_subcommand(1);
  std::string file, print = "loop", schedule = "auto", target = "cpu", arch, shape, seed = "0";
  std::string save_io, inputs_dir, reference_dir, param_arg, require, dynamic;
  bool verify = false, bench = false, json = false, force = false, no_validate = false;
  std::string chunk_tiles = "auto", whole_row_bytes = "auto", row_tile = "auto",
              reduce_tile = "auto";
  const char* row_tile_help = "auto|N: rows a tile of the rolling update (a multiple of 16)";
  const char* reduce_tile_help =
      "auto|N: the tile of the reduced axis, keys in attention (a multiple of 16)";
  const char* whole_row_help =
      "auto|N: a row reduction whose row has at most N bytes is computed whole, one row a tile, "
      "rather than streamed with its fused update (0 streams every row)";

  auto* check = app.add_subcommand("check", "parse and type-check a .te file");
  check->add_option("file", file, ".te source")->required();

  auto* lower = app.add_subcommand("lower", "lower a .te file and print an intermediate form");
  lower->add_option("file", file, ".te source")->required();
  lower->add_option("--print", print, "te|loop|scheduled|repairs|trace|tile|source|ptx");
  lower->add_option("--schedule", schedule, "auto|none");
  lower->add_option("--target", target, "cpu|cuda");
  lower->add_option("--arch", arch, "sm_80|sm_90a");
  lower->add_option("--shape", shape, "N=V,... sizes the schedule and tile extents are chosen for");
  lower->add_option("--param", param_arg, "NAME=V,... param overrides");
  lower->add_option("--chunk-tiles", chunk_tiles,
                    "auto|N: key tiles a split-K chunk walks with the rolling update");
  lower->add_option("--whole-row-bytes", whole_row_bytes, whole_row_help);
  lower->add_option("--row-tile", row_tile, row_tile_help);
  lower->add_option("--reduce-tile", reduce_tile, reduce_tile_help);
  lower->add_flag("--no-validate", no_validate,
                  "use the schedule without validating it against the program (trusted only)");
  lower->add_option("--require", require,
                    "fused,tile,tensor-core: a fallback of these kinds is an error, not a warning");

  auto* run = app.add_subcommand("run", "compile and run a .te file on random inputs");
  run->add_option("file", file, ".te source")->required();
  run->add_option("--shape", shape, "N=V,... size overrides");
  run->add_option("--target", target, "cpu|cuda");
  run->add_option("--arch", arch,
                  "CUDA architecture (sm_80: mma.sync, sm_90a: wgmma); default: the GPU's");
  run->add_option("--schedule", schedule, "auto|none");
  run->add_option("--seed", seed, "random input seed");
  run->add_option("--chunk-tiles", chunk_tiles,
                  "auto|N: key tiles a split-K chunk walks with the rolling update");
  run->add_option("--whole-row-bytes", whole_row_bytes, whole_row_help);
  run->add_option("--row-tile", row_tile, row_tile_help);
  run->add_option("--reduce-tile", reduce_tile, reduce_tile_help);
  run->add_flag("--no-validate", no_validate,
                "use the schedule without validating it against the program (trusted only)");
  run->add_option("--require", require,
                  "fused,tile,tensor-core: a fallback of these kinds is an error, not a warning");
  run->add_option("--dynamic", dynamic,
                  "N,...: sizes the kernel is generated for every value of (scheduled as if "
                  "32768, run at --shape)");
  run->add_flag("--verify", verify, "compare with the exact fp64 reference interpreter");
  run->add_flag("--bench", bench, "time the kernel (median; implies --verify)");
  run->add_flag("--json", json, "print one JSON object");
  run->add_option("--param", param_arg, "NAME=V,... param overrides");
  run->add_option("--save-io", save_io,
                  "write inputs, outputs (.npy) and manifest.json into this directory (new or "
                  "empty, unless --force)");
  run->add_flag("--force", force,
                "with --save-io: write into a non-empty directory, replacing its files of the "
                "same names");
  run->add_option("--inputs", inputs_dir, "read inputs from NAME.npy files in this directory");
  run->add_option("--reference", reference_dir,
                  "verify against float64 NAME.npy outputs in this directory (with --inputs)");

  auto* tune = app.add_subcommand("tune", "autotune tile sizes (not available yet: exits with 1)");
  tune->add_option("file", file, ".te source")->required();
  tune->add_option("--shape", shape, "N=V,... size overrides");
  tune->add_option("--target", target, "cuda");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 1;
  }
  try {
    if (*check) return cmd_check(file);
    if (*lower) {
      LowerOptions l;
      l.schedule = schedule;
      l.target = target;
      l.arch = arch;
      l.chunk_tiles = parse_chunk_tiles(chunk_tiles);
      l.row_tile = parse_tile("--row-tile", row_tile);
      l.reduce_tile = parse_tile("--reduce-tile", reduce_tile);
      l.whole_row_bytes = parse_whole_row_bytes(whole_row_bytes);
      l.validate = !no_validate;
      l.require = parse_require_arg(require);
      l.params = parse_param_arg(param_arg);
      return cmd_lower(file, print, l, parse_shape_arg(shape));
    }
    if (*run) {
      runtime::RunOptions o;
      o.shape = parse_shape_arg(shape);
      o.seed = parse_seed(seed);
      o.target = target;
      o.arch = arch;
      o.schedule = schedule;
      o.verify = verify;
      o.bench = bench;
      o.save_io_dir = save_io;
      o.save_io_force = force;
      if (force && save_io.empty()) arg_error << "--force applies to --save-io only";
      o.inputs_dir = inputs_dir;
      o.reference_dir = reference_dir;
      o.params = parse_param_arg(param_arg);
      o.chunk_tiles = parse_chunk_tiles(chunk_tiles);
      o.row_tile = parse_tile("--row-tile", row_tile);
      o.reduce_tile = parse_tile("--reduce-tile", reduce_tile);
      o.whole_row_bytes = parse_whole_row_bytes(whole_row_bytes);
      o.validate = !no_validate;
      o.require = parse_require_arg(require);
      for (size_t start = 0; start < dynamic.size();) {
        size_t comma = std::min(dynamic.find(',', start), dynamic.size());
        if (comma > start) o.dynamic.insert(dynamic.substr(start, comma - start));
        start = comma + 1;
      }
      return cmd_run(file, o, json);
    }
    if (*tune)
      arg_error << "kintsugi tune: not available yet (there is no autotuner; `kintsugi run "
                   "--bench` times the kernel that the auto-scheduler chooses)";
  } catch (const CompileError& e) {
    std::cerr << e.what() << "\n";
    return 1;
  } catch (const UserError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const InternalError& e) {
    std::cerr << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
