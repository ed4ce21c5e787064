// \file Driver.cpp
// The pipeline, written once (see Driver.h).
#include "driver/Driver.h"

#include <filesystem>
#include <functional>
#include <mutex>
#include <sstream>

#include "ir/Printer.h"
#include "ir/Visit.h"
#include "schedule/Analysis.h"
#include "schedule/AutoSchedule.h"
#include "schedule/ReductionChains.h"
#include "schedule/Schedule.h"
#include "support/DiskCache.h"
#include "support/Error.h"
#include "support/Hash.h"
#include "support/Version.h"
#include "target/cpu/CpuBackend.h"
#include "target/cuda/CudaBackend.h"
#include "target/cuda/Driver.h"
#include "te/Lower.h"
#include "te/Program.h"
#include "tile/Passes.h"
#include "tile/Translate.h"

namespace kintsugi::driver {

Target Target::parse(const std::string& name, const std::string& arch) {
  Target t;
  if (name == "cuda")
    t.kind = Kind::Cuda;
  else if (name != "cpu")
    arg_error << "unknown target '" << name << "'; use cpu or cuda";
  if (t.kind == Kind::Cpu && !arch.empty())
    arg_error << "--arch " << arch << " applies to --target cuda only; leave it out";
  t.arch = arch;
  if (!arch.empty()) cuda::CudaTarget::parse(arch);  // a malformed name fails here, not later
  return t;
}

std::string Target::cuda_arch() const {
  if (!arch.empty()) return arch;
  return cuda::driver_available() ? cuda::device().arch() : "sm_90a";
}

const char* requirement_name(Requirement r) {
  switch (r) {
    case Requirement::Fused:
      return "fused";
    case Requirement::Tile:
      return "tile";
    case Requirement::TensorCore:
      return "tensor-core";
  }
  return "?";
}

std::set<Requirement> parse_requirements(const std::vector<std::string>& names,
                                         const std::string& who) {
  std::set<Requirement> out;
  for (const std::string& n : names) {
    bool known = false;
    for (Requirement r : {Requirement::Fused, Requirement::Tile, Requirement::TensorCore})
      if (n == requirement_name(r)) {
        out.insert(r);
        known = true;
      }
    if (!known)
      arg_error << who << ": unknown requirement '" << n << "'; use fused, tile or tensor-core";
  }
  return out;
}

void check_requirements(const std::vector<Shortfall>& shortfalls,
                        const std::set<Requirement>& require, const std::string& who) {
  for (Requirement r : require) {
    std::vector<std::string> broken;
    for (const Shortfall& f : shortfalls)
      if (f.requirement == r) broken.push_back(f.text);
    if (broken.empty()) continue;
    std::ostringstream m;
    m << who << " " << requirement_name(r) << " does not hold: " << broken[0];
    for (size_t k = 1; k < broken.size(); ++k) m << "; and " << broken[k];
    throw UserError(m.str());
  }
}

nlohmann::json fusion_json(const std::vector<FusedReduction>& fusion) {
  nlohmann::json out = nlohmann::json::array();
  for (const FusedReduction& f : fusion)
    out.push_back(
        {{"reduction", f.name}, {"axis", f.axis}, {"reads", f.producers}, {"update", f.update}});
  return out;
}

nlohmann::json kernels_json(const std::vector<KernelPath>& kernels) {
  nlohmann::json out = nlohmann::json::array();
  for (const KernelPath& k : kernels) {
    nlohmann::json j = {{"name", k.name}, {"path", k.path}};
    if (!k.reason.empty()) j["reason"] = k.reason;
    out.push_back(j);
  }
  return out;
}

ir::LoopProgram load_file(const std::string& path) {
  te::Program p = te::parse_file(path);
  te::check(p);
  return te::lower(p);
}

namespace {

// The tile sizes a trace was built with: the fused axis is split first, by a tile or by a chunk
// of tiles (split-K with chunks walked by the rolling update).
ValidationOptions validation_options(const ir::LoopProgram& program, const nlohmann::json& trace,
                                     const schedule::AutoScheduleOptions& auto_options,
                                     const ScheduleOptions& o) {
  ValidationOptions v;
  v.sizes = o.sizes;
  v.params = o.params;
  v.axis_tile = auto_options.tile;
  v.row_tile = auto_options.row_tile > 0 ? auto_options.row_tile : 1;
  for (const nlohmann::json& e : trace)
    if (e.at("primitive") == "split" && e.at("factor").is_number_integer()) {
      const int64_t factor = e.at("factor").get<int64_t>();
      // A row reduction scheduled in strips splits by a multiple of strip_tile, which no chunk
      // of tiles reaches (tile x max_chunk_tiles is less): validate at the strips' tiles.
      if (auto_options.strip_rows > 0 && factor % auto_options.strip_tile == 0 &&
          auto_options.tile * auto_options.max_chunk_tiles < auto_options.strip_tile) {
        v.axis_tile = auto_options.strip_tile;
        v.row_tile = auto_options.strip_rows;
      }
      v.chunk_tiles = std::max<int64_t>(1, factor / v.axis_tile);
      // The split block's variable on the split loop is the fused axis; its innermost other
      // spatial variable, the rows.
      try {
        const ir::StmtNode& b =
            *schedule::find_block(program.body, e.at("block").get<std::string>(), "validate")
                 .back();
        const std::string loop = e.at("loop").get<std::string>();
        for (const ir::IterVar& iv : b.iters) {
          // Sizes only: an extent that is a param (W in f32[W, N]) keeps its value.
          if (iv.extent->op != ir::Op::Var || iv.extent->var_kind != ir::VarKind::Dim) continue;
          if (iv.binding->op == ir::Op::Var && iv.binding->name == loop)
            v.axis_dim = iv.extent->name;
          else if (iv.kind == ir::IterKind::Spatial)
            v.row_dim = iv.extent->name;
        }
      } catch (const UserError&) {
      }
      break;
    }
  return v;
}

// The first primitive of `trace` after which the program no longer validates, by bisection over
// trace prefixes (every prefix is replayed on the original); -1 when no prefix fails alone.
int first_failing_primitive(const ir::LoopProgram& program, const nlohmann::json& trace,
                            const ValidationOptions& v) {
  auto fails = [&](size_t n) {
    nlohmann::json prefix = nlohmann::json::array();
    for (size_t k = 0; k < n; ++k) prefix.push_back(trace[k]);
    try {
      return !validate_schedule(program, schedule::replay(program, prefix).program(), v).ok;
    } catch (const UserError&) {
      return true;
    }
  };
  size_t lo = 0, hi = trace.size();  // the prefix of lo primitives passes, of hi fails
  if (!fails(hi)) return -1;
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    (fails(mid) ? hi : lo) = mid;
  }
  return static_cast<int>(hi) - 1;
}

// Whether the scheduler left reduction `name` unfused on purpose, in a chain whose axis the tiles
// of another chain compute whole (the chain names it, or its part, `<name>.part`, where the
// scheduler re-based it onto a join's reduction: rebase_join).
bool computed_whole(const std::vector<std::string>& notes, const std::string& name) {
  return std::any_of(notes.begin(), notes.end(), [&](const std::string& n) {
    if (n.rfind(schedule::kChainComputedWhole, 0) != 0) return false;
    const std::string names = n.substr(0, n.find(" is not fused"));
    return names.find("'" + name + "'") != std::string::npos ||
           names.find("'" + name + ".part'") != std::string::npos;
  });
}

// Every reduction of `program` with its chain and the update `trace` gave it; the reductions that
// read another one's running values and were left unfused are shortfalls (the scheduler's note
// that abandoned fusion gives the reason, or the chain it fused instead). A reduction re-based
// onto one part of a join (rebase_join) is fused when its part's block is.
std::vector<FusedReduction> fusion_of(const ir::LoopProgram& program, const nlohmann::json& trace,
                                      const std::vector<std::string>& notes,
                                      std::vector<Shortfall>* shortfalls) {
  std::vector<FusedReduction> out;
  std::vector<std::string> unfused;
  std::string fused_axes;
  std::map<std::string, std::string> part_of;  // a re-based block -> the block of its part
  for (const nlohmann::json& e : trace)
    if (e.at("primitive") == "rebase_join")
      for (size_t k = 0; k < e.at("blocks").size(); ++k)
        part_of[e.at("blocks")[k].get<std::string>()] = e.at("parts")[k].get<std::string>();
  // Reductions whose several axes the schedule merged into one are chains along the merged axis.
  schedule::Schedule merged(program);
  for (const nlohmann::json& e : trace)
    if (e.at("primitive") == "merge_reduce_axes") try {
        merged.merge_reduce_axes(e.at("block").get<std::string>());
      } catch (const schedule::ScheduleError&) {
        // merged in the scheduled program's normal form only: reported as it is
      }
  for (const schedule::ReductionChain& c : schedule::find_reduction_chains(merged.program())) {
    FusedReduction f;
    f.name = c.target;
    f.axis = c.axis;
    f.producers = c.producers;
    const std::string block = part_of.count(c.target) ? part_of.at(c.target) : c.target;
    for (const nlohmann::json& e : trace) {
      if (e.value("block", std::string()) != block) continue;
      if (e.at("primitive") == "split_k_update") f.update = "split-k";
      if (e.at("primitive") == "rolling_update" && f.update == "none") f.update = "rolling";
    }
    if (f.update != "none" &&
        fused_axes.find("'" + ir::to_string(c.extent) + "'") == std::string::npos)
      fused_axes += (fused_axes.empty() ? "'" : ", '") + ir::to_string(c.extent) + "'";
    if (f.update == "none" && !c.producers.empty() && !computed_whole(notes, c.target))
      unfused.push_back(c.target);
    out.push_back(f);
  }
  for (const schedule::SeveralAxisChain& c : schedule::several_axis_chains(merged.program()))
    if (!computed_whole(notes, c.target)) unfused.push_back(c.target);
  if (unfused.empty()) return out;
  std::string which = "reduction" + std::string(unfused.size() > 1 ? "s" : "");
  for (size_t k = 0; k < unfused.size(); ++k)
    which += std::string(k ? ", '" : " '") + unfused[k] + "'";
  for (const std::string& n : notes)
    if (n.rfind(schedule::kFusionAbandoned, 0) == 0) {
      shortfalls->push_back(
          {Requirement::Fused,
           n + " (" + which + (unfused.size() > 1 ? " run" : " runs") + " unfused)"});
      return out;
    }
  shortfalls->push_back(
      {Requirement::Fused,
       which + " read" + (unfused.size() > 1 ? "" : "s") +
           " the running value of an earlier reduction and " + (unfused.size() > 1 ? "are" : "is") +
           " not fused: " +
           (fused_axes.empty()
                ? std::string("the auto-scheduler fused nothing")
                : "the auto-scheduler fused the reductions along " + fused_axes + " only")});
  return out;
}

std::string describe_primitive(const nlohmann::json& entry) {
  std::string out = "'" + entry.value("primitive", std::string("?")) + "'";
  if (entry.contains("block") && entry.at("block").is_string())
    out += " of block '" + entry.at("block").get<std::string>() + "'";
  return out;
}

// Validation results by program, schedule, sizes and params: kept for the process, and on disk
// next to the kernels (disk_cache: only the user's own, checked entries are trusted) for
// schedules that passed, so that a kernel compiled again in a new process is not validated again.
// The commit is part of the entry's format line: another build validates anew.
std::mutex validated_mu;
std::map<std::string, ValidationReport>& validated() {
  static std::map<std::string, ValidationReport> m;
  return m;
}

// The validation `run` computes, cached under `key` (what it depends on, in full).
ValidationReport cached_validation(const std::string& key,
                                   const std::function<ValidationReport()>& run) {
  {
    std::lock_guard<std::mutex> lock(validated_mu);
    if (auto it = validated().find(key); it != validated().end()) return it->second;
  }
  const std::string format = std::string("kintsugi validation 3 ") + kCommit;
  const std::string name = hex64(fnv1a(key)) + hex64(fnv1a(key, fnv1a(format)));
  std::optional<std::string> dir = disk_cache::resolve_dir("", "schedule validation");
  std::filesystem::path entry, meta;
  if (dir) {
    entry = std::filesystem::path(*dir) / ("validated-" + name + ".txt");
    meta = std::filesystem::path(*dir) / ("validated-" + name + ".meta");
    // A pass from an earlier process, with its instances (seconds 0: nothing ran now).
    if (std::optional<std::string> text = disk_cache::load_entry(entry, meta, format, name)) {
      nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
      if (j.is_object() && j.value("ok", false) && j.contains("shrunk") && j.contains("few_rows") &&
          j.contains("row_tiles")) {
        ValidationReport r;
        r.ran = true;
        r.shrunk = j.at("shrunk").get<runtime::SizeMap>();
        r.few_rows = j.at("few_rows").get<runtime::SizeMap>();
        r.row_tiles = j.at("row_tiles").get<runtime::SizeMap>();
        if (j.contains("params")) r.params = j.at("params").get<runtime::ParamMap>();
        return r;
      }
    }
  }
  ValidationReport r = run();
  if (dir && r.ran && r.ok) {
    nlohmann::json j = {{"ok", true},
                        {"shrunk", r.shrunk},
                        {"few_rows", r.few_rows},
                        {"row_tiles", r.row_tiles},
                        {"params", r.params}};
    disk_cache::store_entry(entry, meta, format, name, j.dump());
  }
  std::lock_guard<std::mutex> lock(validated_mu);
  validated()[key] = r;
  return r;
}

std::string sizes_key(const runtime::SizeMap& sizes, const runtime::ParamMap& params) {
  std::string key;
  for (const auto& [d, n] : sizes) key += d + "=" + std::to_string(n) + ",";
  for (const auto& [q, x] : params) key += q + "=" + std::to_string(x) + ",";
  return key;
}

ValidationReport validate_cached(const ir::LoopProgram& program, const schedule::Schedule& s,
                                 const ValidationOptions& v) {
  std::string key = "schedule\n" + ir::to_string(program) + "\n" + s.trace().dump() + "\n" +
                    sizes_key(v.sizes, v.params);
  return cached_validation(key, [&] { return validate_schedule(program, s.program(), v); });
}

// The tile program of `s` at `sizes`, translated and run through the first `passes` tile passes.
tile::TileProgram tiles_through(const Scheduled& s, const runtime::SizeMap& sizes, size_t passes) {
  tile::TileProgram tp = tile::translate(s.program, sizes, s.dynamic, s.tile_budget, s.params);
  tp.dot_multiple = s.dot_multiple;
  for (size_t k = 0; k < passes; ++k) {
    tile::passes()[k].run(tp);
    tile::verify(tp);
  }
  tile::prove_int32_divisions(tp);
  return tp;
}

ValidationReport validate_tiles_cached(const Scheduled& s, size_t passes) {
  std::string key = "tiles " + std::to_string(passes) + "\n" + ir::to_string(s.program) + "\n" +
                    sizes_key(s.validation->row_tiles, s.params) + "\n" +
                    sizes_key(s.validation->few_rows, {});
  return cached_validation(key, [&] {
    return validate_tiles(
        s.program, [&](const runtime::SizeMap& at) { return tiles_through(s, at, passes); },
        *s.validation, s.params);
  });
}

// The tile program of `s` at `sizes`: translated, optimised by the tile passes, and checked by
// execution against the scheduled program when the schedule was (validate_tiles). When the
// optimised program fails, the passes are replayed one at a time and the program before the
// first that breaks the result is used (with a warning naming it); when the translation itself
// fails, there is no tile program (`not_tile` says why).
struct Tiles {
  std::shared_ptr<const tile::TileProgram> program;
  std::string not_tile;
  std::vector<std::string> warnings;
  std::optional<ValidationReport> validation;  // of `program`, when it ran
};

Tiles make_tiles(const Scheduled& s, const runtime::SizeMap& sizes) {
  Tiles out;
  const size_t all = tile::passes().size();
  tile::TileProgram optimized;
  try {
    optimized = tiles_through(s, sizes, all);
  } catch (const tile::NotTileForm& e) {
    out.not_tile = e.what();
    return out;
  }
  if (!s.validation || !s.validation->ran) {
    out.program = std::make_shared<tile::TileProgram>(std::move(optimized));
    return out;
  }
  ValidationReport report = validate_tiles_cached(s, all);
  out.validation = report;
  if (report.ok) {
    if (!report.ran)
      out.warnings.push_back("the tile program was not validated: " + report.failure);
    out.program = std::make_shared<tile::TileProgram>(std::move(optimized));
    return out;
  }
  // The first pass after which the program no longer agrees; the program before it is used.
  size_t good = 0;
  while (good < all && validate_tiles_cached(s, good + 1).ok) ++good;
  if (good == 0 && !validate_tiles_cached(s, 0).ok) {
    out.not_tile = "the translated tile program does not agree with the scheduled program (" +
                   validate_tiles_cached(s, 0).failure + ")";
    return out;
  }
  out.warnings.push_back(std::string("tile pass ") + std::to_string(good + 1) + " '" +
                         tile::passes()[good].name +
                         "' was rejected by validation: it changes the result (" + report.failure +
                         "); the passes from it on are not run");
  out.program = std::make_shared<tile::TileProgram>(tiles_through(s, sizes, good));
  return out;
}

// On CUDA a tile is registers and shared memory: a nest outside the fused chains is tiled to at
// most as many elements as a CTA holds of a row kept whole (16384 elements of f16).
constexpr int64_t kCudaTileElements = 16384;
// The tensor cores multiply in steps of 16 along K and (in pairs of 8-column blocks) along N.
constexpr int64_t kCudaDotMultiple = 16;

}  // namespace

Scheduled schedule_program(const ir::LoopProgram& program, const ScheduleOptions& o) {
  if (o.schedule != "auto" && o.schedule != "none")
    arg_error << "unknown --schedule '" << o.schedule << "'; use auto or none";
  Scheduled out;
  out.program = program;
  out.schedule = o.schedule;
  out.require = o.require;
  out.require_who = o.require_who;
  out.dynamic = o.dynamic;
  if (o.target.kind == Target::Kind::Cuda) {
    out.tile_budget = kCudaTileElements;
    out.dot_multiple = kCudaDotMultiple;
  }
  if (o.schedule == "none") {
    for (Requirement r : {Requirement::Fused, Requirement::Tile})
      if (o.require.count(r))
        arg_error << o.require_who << " " << requirement_name(r)
                  << " does not hold with schedule 'none' (the unscheduled program runs as "
                     "scalar loop code); use the auto schedule";
    return out;
  }
  schedule::AutoScheduleOptions auto_options = schedule::target_schedule_options(o.target.name());
  if (o.target.kind == Target::Kind::Cuda && o.target.cuda_target().warpgroup_mma()) {
    // wgmma (sm_90a): rolling tiles of 64 rows (a warpgroup; two or three CTAs an SM overlap
    // one's softmax with another's products) by 128 keys (twice the work a synchronisation).
    // Measured on the H200 at S = T = 16384, D = 128 (docs/perf.md): global attention 345 TFLOP/s
    // in 128 x 64 tiles, 418 in 64 x 64, 414 in 128 x 128, 521 in 64 x 128.
    auto_options.row_tile = 64;
    auto_options.rolling_tile = 128;
  }
  auto_options.sizes = o.sizes;
  auto_options.params = o.params;
  auto_options.chunk_tiles = o.chunk_tiles;
  if (o.row_tile > 0) auto_options.row_tile = o.row_tile;
  if (o.reduce_tile > 0)  // the tile given is kept, whatever it keeps live
    auto_options.tile = o.reduce_tile, auto_options.rolling_tile = 0,
    auto_options.live_tile_elements = 0;
  if (o.whole_row_bytes >= 0) auto_options.whole_row_bytes = o.whole_row_bytes;
  // The schedules to try, best first: as chosen; rolling update instead of split-K.
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::vector<std::string> notes;
    schedule::Schedule s = schedule::auto_schedule(program, auto_options, &notes);
    bool split_k = false;
    for (const std::string& n : s.primitive_names()) split_k |= n == "split_k_update";
    ValidationOptions v = validation_options(program, s.trace(), auto_options, o);
    std::optional<ValidationReport> report;
    if (o.validate && !s.trace().empty()) {
      report = validate_cached(program, s, v);
      if (report->ran && !report->ok) {
        int bad = first_failing_primitive(program, s.trace(), v);
        std::string who = bad >= 0 ? "primitive " + std::to_string(bad + 1) + " " +
                                         describe_primitive(s.trace()[bad])
                                   : std::string("the schedule");
        std::string next = split_k && attempt == 0 ? "the rolling update instead of split-K"
                                                   : "the unscheduled program";
        std::string text = "the auto-schedule was rejected by validation: " + who +
                           " changes the result (" + report->failure + "); using " + next;
        out.warnings.push_back(text);
        if (split_k && attempt == 0) {
          auto_options.split_k_below_rows = auto_options.split_k_below_instances = 0;
          continue;
        }
        out.shortfalls.push_back({Requirement::Fused, text});
        out.validation = report;
        check_requirements(out.shortfalls, o.require, o.require_who);
        return out;
      }
      if (!report->ran)
        out.warnings.push_back("the schedule was not validated: " + report->failure);
    }
    out.program = s.program();
    out.params = o.params;
    out.trace = s.trace();
    out.primitives = s.primitive_names();
    out.notes = notes;
    out.validation = report;
    std::vector<Shortfall> unfused;
    out.fusion = fusion_of(program, out.trace, notes, &unfused);
    for (const Shortfall& f : unfused) {
      out.warnings.push_back(f.text);
      out.shortfalls.push_back(f);
    }
    check_requirements(out.shortfalls, o.require, o.require_who);
    return out;
  }
  return out;
}

tile::TileProgram to_tiles(const Scheduled& s, const runtime::SizeMap& sizes,
                           const std::string& who) {
  Tiles t = make_tiles(s, sizes);
  if (!t.program)
    arg_error << who << ": program '" << s.program.name << "' is not in tile form: " << t.not_tile;
  return *t.program;
}

CodePaths code_paths(const Scheduled& s, const Target& target, const runtime::SizeMap& sizes) {
  CodePaths c;
  if (s.schedule == "auto") {
    Tiles t = make_tiles(s, sizes);
    c.tiles = t.program;
    c.not_tile = t.not_tile;
    c.warnings = t.warnings;
    c.tile_validation = t.validation;
    if (c.tiles) c.form = "tile";
  }
  if (c.tiles && target.kind == Target::Kind::Cuda) {
    std::vector<cuda::KernelLaunch> launches =
        cuda::generate_cuda_source(*c.tiles, target.cuda_target()).launches;
    for (size_t k = 0; k < launches.size(); ++k) {
      const cuda::KernelLaunch& l = launches[k];
      const std::string& name = c.tiles->kernels[k].name;
      c.kernels.push_back(
          {name, l.tensor_cores ? "tensor-core" : "element-cyclic", l.not_tensor_cores});
      if (!l.not_warpgroup_mma.empty())
        c.warnings.push_back("kernel '" + name +
                             "' runs its dots as mma.sync, not as wgmma: " + l.not_warpgroup_mma);
      if (l.not_tensor_cores.empty()) continue;
      std::string text = "kernel '" + name +
                         "' runs its dot on the element-cyclic writer, not the tensor cores: " +
                         l.not_tensor_cores;
      c.warnings.push_back(text);
      c.shortfalls.push_back({Requirement::TensorCore, text});
    }
  } else if (c.tiles) {
    for (const tile::Kernel& k : c.tiles->kernels) c.kernels.push_back({k.name, "tile", ""});
  } else {
    // The CUDA target has no scalar path: build_kernel refuses the program (to_tiles).
    c.form = "loop";
    c.kernels.push_back({s.program.name, "scalar", c.not_tile});
    if (s.schedule == "auto") {
      std::string text = (target.kind == Target::Kind::Cuda
                              ? "no CUDA code (the CUDA target compiles tile programs only): "
                              : "scalar loop code: ") +
                         std::string("program '") + s.program.name +
                         "' is not in tile form: " + c.not_tile;
      c.warnings.push_back(text);
      c.shortfalls.push_back({Requirement::Tile, text});
    }
  }
  check_requirements(c.shortfalls, s.require, s.require_who);
  return c;
}

runtime::SizeMap schedule_sizes(const runtime::SizeMap& sizes,
                                const std::set<std::string>& dynamic) {
  runtime::SizeMap out = sizes;
  for (const std::string& d : dynamic) out[d] = kDynamicScheduleSize;
  return out;
}

Built build_kernel(const Scheduled& s, const Target& target, const runtime::SizeMap& sizes) {
  std::string why;
  if (target.kind == Target::Kind::Cuda && !cuda::driver_available(&why))
    arg_error << "--target cuda: no usable GPU here: " << why;
  if (target.kind == Target::Kind::Cuda && s.schedule != "auto")
    arg_error << "--target cuda runs scheduled programs only; use --schedule auto";
  CodePaths c = code_paths(s, target, sizes);
  Built b;
  b.form = c.form;
  b.kernels = c.kernels;
  b.warnings = c.warnings;
  b.shortfalls = c.shortfalls;
  b.tile_validation = c.tile_validation;
  if (c.tiles)
    for (const auto& [text, sp] : c.tiles->specialised) {  // the dynamic sizes stay general
      for (const std::string& d : s.dynamic)
        if (ir::uses_var(sp.extent, d))
          arg_error << "size '" << d << "' of " << s.program.name
                    << " cannot be dynamic: its generated code is specialised to " << text << " = "
                    << sp.value
                    << " (a tile extent); leave it out of the dynamic sizes (each value then "
                       "compiles its own kernel)";
    }
  if (target.kind == Target::Kind::Cuda) {
    if (!c.tiles) to_tiles(s, sizes, "--target cuda");  // throws: not in tile form
    b.gpu = std::make_shared<cuda::CudaKernel>(*c.tiles, target.cuda_arch());
    b.from_cache = b.gpu->from_cache();
    b.compile_seconds = b.gpu->compile_seconds();
  } else {
    b.cpu = c.tiles ? cpu::compile(*c.tiles) : cpu::compile(s.program);
    b.cpu->prove_ranges(sizes, s.params);
    b.from_cache = b.cpu->from_cache();
    b.compile_seconds = b.cpu->compile_seconds();
  }
  return b;
}

}  // namespace kintsugi::driver
