// \file CpuJit.cpp
// Host-compiler JIT for the CPU back end: disk cache, compiler invocation, dlopen, and the
// argument checks of CpuKernel::run.
//
// Invariant established: a shared object is dlopen'ed only if it was just built by us (in a
// private mkdtemp directory) or it is a trusted entry of a checked cache directory whose size and
// FNV-1a content hash match its meta file (disk_cache::load_entry); every cache write is atomic
// (unique temp name, then rename); the host compiler never runs longer than its time limit; each
// load goes through a fresh hard link so that a rebuilt object is never confused with a stale one
// still mapped in this process; run() calls the entry point only with tensors whose count, dtypes
// and shapes match the program.
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include "ir/IndexBounds.h"
#include "ir/Limits.h"
#include "ir/Printer.h"
#include "support/DiskCache.h"
#include "support/Hash.h"
#include "support/Subprocess.h"
#include "target/cpu/CpuBackend.h"

namespace kintsugi::cpu {

namespace fs = std::filesystem;
using disk_cache::unique_tag;

namespace {

constexpr std::string_view kCacheFormat = "kintsugi-cpu-cache 1";

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

using subprocess::compile_timeout;

// Runs a shell command in its own process group with TMPDIR=`tmpdir` (unless empty), collects
// its combined output, and kills the whole group if it runs longer than `timeout` seconds (0: no
// limit).
subprocess::ChildResult run_command(const std::string& cmd, std::string* output, double timeout,
                                    const std::string& tmpdir) {
  std::string script = cmd;
  if (!tmpdir.empty()) script = "TMPDIR=" + shell_quote(tmpdir) + "; export TMPDIR; " + cmd;
  return subprocess::run_in_child(
      [&](int fd) {
        // Only async-signal-safe calls between fork and exec.
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
        _exit(127);
      },
      output, timeout);
}

// $TMPDIR as set (for a message), or /tmp.
std::string temp_dir_name() {
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

// A private build directory (mkdtemp: mode 0700) for a compiler's output and temporary files,
// removed with everything in it when the build is done.
struct BuildDir {
  fs::path path;
  BuildDir() = default;
  BuildDir(const BuildDir&) = delete;
  BuildDir& operator=(const BuildDir&) = delete;
  ~BuildDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
  // Makes the directory under `base`; false (and errno set) if it cannot.
  bool make(const fs::path& base) {
    std::string templ = (base / "kintsugi-build-XXXXXX").string();
    if (!mkdtemp(templ.data())) return false;
    path = templ;
    return true;
  }
};

// What -march=native depends on: the CPU model and feature flags (a cache directory shared
// between machines must not hand an object built for one CPU to another).
std::string cpu_identity() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(in, line) && (model.empty() || flags.empty())) {
    if (model.empty() && line.rfind("model name", 0) == 0) model = line;
    if (flags.empty() && (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0))
      flags = line;
  }
  return model + "\n" + flags;
}

struct Toolchain {
  std::string version;             // first line of `cxx --version`
  std::vector<std::string> flags;  // working default flags
  std::string key;                 // of its cache entry (see below)
};

// The probe's result in the kernel cache: one flag a line. Keyed by the compiler's command, its
// whole `--version` output and the CPU, so that an upgraded compiler or another machine probes
// again.
constexpr std::string_view kToolchainFormat = "kintsugi-cpu-toolchain-v2";

struct ToolchainEntry {
  fs::path payload, meta;
};
ToolchainEntry toolchain_entry(const std::string& cache_dir, const std::string& key) {
  return {fs::path(cache_dir) / ("toolchain-" + key + ".txt"),
          fs::path(cache_dir) / ("toolchain-" + key + ".meta")};
}

// Whether -march=native and -fopenmp work with `cxx`: the flags of the first candidate set that
// builds a small OpenMP program (about a second).
std::vector<std::string> probe_flags(const std::string& cxx, const std::string& scratch_dir) {
  const double timeout = compile_timeout();
  const std::vector<std::string> base = {"-std=c++17",      "-O3",     "-ffp-contract=off",
                                         "-fno-math-errno", "-fwrapv", "-fPIC",
                                         "-shared",         "-w"};
  fs::path src = fs::path(scratch_dir) / ("probe-" + unique_tag() + ".cpp");
  fs::path obj = fs::path(scratch_dir) / ("probe-" + unique_tag() + ".so");
  {
    std::ofstream o(src);
    o << "#include <math.h>\nextern \"C\" float probe(float* x, int n) {\n  float s = 0;\n"
         "#pragma omp parallel for reduction(+ : s)\n  for (int i = 0; i < n; ++i) s += "
         "expf(x[i]);\n  return s;\n}\n";
  }
  const std::vector<std::vector<std::string>> candidates = {
      {"-march=native", "-mprefer-vector-width=512", "-fopenmp"},
      {"-march=native", "-fopenmp"},
      {"-fopenmp"},
      {"-march=native"},
      {}};
  std::optional<std::vector<std::string>> found;
  std::string last;
  for (const auto& extra : candidates) {
    std::vector<std::string> flags = base;
    flags.insert(flags.end(), extra.begin(), extra.end());
    std::string cmd = cxx;
    for (const std::string& f : flags) cmd += " " + shell_quote(f);
    cmd += " " + shell_quote(src.string()) + " -o " + shell_quote(obj.string());
    subprocess::ChildResult r = run_command(cmd, &last, timeout, scratch_dir);
    if (r.timed_out)
      arg_error << "CPU back end: the host compiler '" << cxx << "' exceeded the time limit of "
                << timeout << " s on a small test program (set KINTSUGI_COMPILE_TIMEOUT=SECONDS "
                << "to raise the limit, 0 for none)";
    if (r.status == 0) {
      found = flags;
      break;
    }
  }
  std::error_code ec;
  fs::remove(src, ec);
  fs::remove(obj, ec);
  if (!found)
    internal_error << "CPU back end: the host compiler '" << cxx
                   << "' cannot build a shared object: " << last;
  return *found;
}

// The compiler's version and working flags, found once per process: from the cache entry in
// `cache_dir` when there is one (a later process with the same compiler on the same CPU runs only
// `--version`), else by probe_flags, and then kept there.
const Toolchain& toolchain(const std::string& cxx, const std::string& scratch_dir,
                           const std::optional<std::string>& cache_dir) {
  static std::mutex mu;
  static std::map<std::string, Toolchain> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(cxx);
  if (it == cache.end()) {
    Toolchain tc;
    std::string out;
    int rc = run_command(cxx + " --version", &out, compile_timeout(), scratch_dir).status;
    if (rc != 0)
      internal_error << "CPU back end: cannot run the host compiler '" << cxx << "': " << out;
    tc.version = out.substr(0, out.find('\n'));
    tc.key = hex64(fnv1a(cxx + "\n" + out + "\n" + cpu_identity()));
    if (cache_dir) {
      ToolchainEntry e = toolchain_entry(*cache_dir, tc.key);
      if (std::optional<std::string> text =
              disk_cache::load_entry(e.payload, e.meta, kToolchainFormat, tc.key)) {
        std::istringstream lines(*text);
        for (std::string f; std::getline(lines, f);) tc.flags.push_back(f);
      }
    }
    if (tc.flags.empty()) tc.flags = probe_flags(cxx, scratch_dir);
    if (std::find(tc.flags.begin(), tc.flags.end(), "-march=native") != tc.flags.end())
      tc.version += " cpu:" + hex64(fnv1a(cpu_identity()));
    it = cache.emplace(cxx, std::move(tc)).first;
  }
  const Toolchain& tc = it->second;
  if (cache_dir) {
    ToolchainEntry e = toolchain_entry(*cache_dir, tc.key);
    std::error_code ec;
    if (!fs::exists(e.meta, ec)) {
      std::string text;
      for (const std::string& f : tc.flags) text += f + "\n";
      disk_cache::store_entry(e.payload, e.meta, kToolchainFormat, tc.key, text);
    }
  }
  return tc;
}

// dlopen through a fresh hard link (or copy), so that the dynamic loader never hands back a
// stale object loaded earlier from the same path. Returns null and sets *error on failure.
void* load_library(const fs::path& so, std::string* error) {
  fs::path link = so;
  link += ".load-" + unique_tag() + ".so";
  std::error_code ec;
  fs::create_hard_link(so, link, ec);
  if (ec) {
    ec.clear();
    fs::copy_file(so, link, ec);
    if (ec) {
      *error = "cannot link or copy " + so.string() + ": " + ec.message();
      return nullptr;
    }
  }
  void* h = dlopen(link.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) *error = dlerror();
  if (h) {
    // The OpenMP runtime that the kernel pulled in keeps idle worker threads; unloading it with
    // the last kernel would pull the code from under them. Pin it (a no-op if not loaded).
    for (const char* rt : {"libgomp.so.1", "libomp.so", "libomp.so.5", "libiomp5.so"})
      if (void* omp = dlopen(rt, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE)) dlclose(omp);
  }
  fs::remove(link, ec);
  return h;
}

// --- Host-side evaluation of shape expressions (Int expressions over dims and params). ---
int64_t floor_div(int64_t a, int64_t b) {
  if (b == -1) return static_cast<int64_t>(0ull - static_cast<uint64_t>(a));
  int64_t q = a / b, r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}
int64_t floor_mod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

int64_t eval_shape(const ir::Expr& e, const std::map<std::string, int64_t>& dims,
                   const std::map<std::string, double>& params) {
  using ir::Op;
  auto arg = [&](size_t i) { return eval_shape(e->args[i], dims, params); };
  switch (e->op) {
    case Op::IntImm:
    case Op::BoolImm:
      return e->int_value;
    case Op::FloatImm:
      return static_cast<int64_t>(round_to_dtype(e->float_value, DType::Int));
    case Op::Var: {
      if (auto it = dims.find(e->name); it != dims.end()) return it->second;
      if (auto it = params.find(e->name); it != params.end())
        return static_cast<int64_t>(round_to_dtype(it->second, DType::Int));
      internal_error << "CPU back end: shape expression " << ir::to_string(e)
                     << " uses an unknown variable " << e->name;
      return 0;
    }
    case Op::Neg:
      return static_cast<int64_t>(0ull - static_cast<uint64_t>(arg(0)));
    case Op::Not:
      return !arg(0);
    case Op::Add:
      return static_cast<int64_t>(static_cast<uint64_t>(arg(0)) + static_cast<uint64_t>(arg(1)));
    case Op::Sub:
      return static_cast<int64_t>(static_cast<uint64_t>(arg(0)) - static_cast<uint64_t>(arg(1)));
    case Op::Mul:
      return static_cast<int64_t>(static_cast<uint64_t>(arg(0)) * static_cast<uint64_t>(arg(1)));
    case Op::Div:
    case Op::Mod: {
      int64_t a = arg(0), b = arg(1);
      if (b == 0) arg_error << "division by zero in " << ir::to_string(e);
      return e->op == Op::Div ? floor_div(a, b) : floor_mod(a, b);
    }
    case Op::Lt:
      return arg(0) < arg(1);
    case Op::Le:
      return arg(0) <= arg(1);
    case Op::Gt:
      return arg(0) > arg(1);
    case Op::Ge:
      return arg(0) >= arg(1);
    case Op::Eq:
      return arg(0) == arg(1);
    case Op::Ne:
      return arg(0) != arg(1);
    case Op::And:
      return arg(0) && arg(1);
    case Op::Or:
      return arg(0) || arg(1);
    case Op::Min:
      return std::min(arg(0), arg(1));
    case Op::Max:
      return std::max(arg(0), arg(1));
    case Op::Cast:
      return static_cast<int64_t>(round_to_dtype(static_cast<double>(arg(0)), e->type));
    case Op::Select:
      return arg(0) ? arg(1) : arg(2);
    default:
      break;
  }
  internal_error << "CPU back end: unsupported shape expression " << ir::to_string(e);
  return 0;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

CpuKernel::~CpuKernel() {
  if (handle_) dlclose(handle_);
}

void CpuKernel::run(const std::vector<runtime::Tensor*>& args, const runtime::SizeMap& sizes,
                    const runtime::ParamMap& params) const {
  std::vector<runtime::TensorRef> refs;
  for (runtime::Tensor* t : args) refs.push_back(t ? runtime::TensorRef(*t) : runtime::TensorRef());
  run_in_place(refs, sizes, params);
}

CpuKernel::Bound CpuKernel::bind(const runtime::SizeMap& sizes,
                                 const runtime::ParamMap& params) const {
  const ir::LoopProgram& p = program_;
  Bound b;
  for (const std::string& d : p.dims) {
    int64_t v = 0;
    if (auto it = sizes.find(d); it != sizes.end())
      v = it->second;
    else if (auto h = p.size_hints.find(d); h != p.size_hints.end())
      v = h->second;
    else
      arg_error << "kernel " << p.name << ": no value for size " << d;
    if (v < 0) arg_error << "kernel " << p.name << ": size " << d << " = " << v << " is negative";
    b.dims[d] = v;
    b.size_vec.push_back(v);
  }
  for (const ir::Param& prm : p.params) {
    double v = prm.value;
    if (auto it = params.find(prm.name); it != params.end()) v = it->second;
    // A fractional value for an integer param truncates, as in the reference; a value outside
    // the type's range is refused rather than clamped.
    if (std::string why = ir::param_value_problem(prm.dtype, is_int(prm.dtype) ? std::trunc(v) : v);
        !why.empty())
      arg_error << "kernel " << p.name << ": param " << prm.name << " = " << ir::param_value_text(v)
                << ": " << why;
    v = round_to_dtype(v, prm.dtype);
    b.params[prm.name] = v;
    b.param_vec.push_back(v);
  }
  tile::check_specialised(specialised_, p.name, b.dims, b.params);
  tile::check_divisible(divisible_, p.name, b.dims, b.params);
  tile::check_bounded(bounded_, p.name, b.dims, b.params);
  proven_.check(p, b.dims, b.params, p.name);
  return b;
}

void CpuKernel::prove_ranges(const runtime::SizeMap& sizes, const runtime::ParamMap& params) const {
  try {
    bind(sizes, params);
  } catch (const RuntimeArgError&) {
    // A call at these values fails the same way, then.
  }
}

void CpuKernel::run_in_place(const std::vector<runtime::TensorRef>& args,
                             const runtime::SizeMap& sizes, const runtime::ParamMap& params) const {
  const ir::LoopProgram& p = program_;
  std::vector<const ir::Buffer*> io;
  for (const ir::Buffer& b : p.buffers)
    if (b.role != ir::BufferRole::Intermediate) io.push_back(&b);
  if (args.size() != io.size()) {
    std::string names;
    for (const ir::Buffer* b : io)
      names += (names.empty() ? "" : ", ") +
               std::string(b->role == ir::BufferRole::Input ? "input " : "output ") + b->name;
    arg_error << "kernel " << p.name << " expects " << io.size() << " tensors (" << names
              << "), got " << args.size();
  }
  const Bound bound = bind(sizes, params);
  const std::map<std::string, int64_t>& dims = bound.dims;
  const std::map<std::string, double>& pvals = bound.params;
  const std::vector<int64_t>& size_vec = bound.size_vec;
  const std::vector<double>& param_vec = bound.param_vec;
  std::vector<void*> ptrs;
  for (size_t i = 0; i < io.size(); ++i) {
    const ir::Buffer& b = *io[i];
    const runtime::TensorRef* t = &args[i];
    const char* role = b.role == ir::BufferRole::Input ? "input" : "output";
    if (t->dtype == DType::Unknown && !t->data) t = nullptr;
    if (!t) arg_error << "kernel " << p.name << ": " << role << " tensor " << b.name << " is null";
    if (t->dtype != b.dtype)
      arg_error << "kernel " << p.name << ": " << role << " tensor " << b.name << " has dtype "
                << dtype_name(t->dtype) << ", expected " << dtype_name(b.dtype);
    std::vector<int64_t> want;
    for (const ir::Expr& e : b.shape) want.push_back(eval_shape(e, dims, pvals));
    if (t->shape != want) {
      std::string sym;
      for (const ir::Expr& e : b.shape) sym += (sym.empty() ? "" : ", ") + ir::to_string(e);
      arg_error << "kernel " << p.name << ": " << role << " tensor " << b.name << " has shape "
                << shape_text(t->shape) << ", expected [" << sym << "] = " << shape_text(want);
    }
    int64_t n = runtime::checked_bytes(want, dtype_bytes(b.dtype),
                                       std::string(role) + " tensor " + b.name) /
                dtype_bytes(b.dtype);
    if (t->bytes != static_cast<size_t>(n) * dtype_bytes(b.dtype))
      arg_error << "kernel " << p.name << ": " << role << " tensor " << b.name << " holds "
                << t->bytes << " bytes, expected " << n * dtype_bytes(b.dtype);
    for (size_t j = 0; j < i; ++j)
      if (n > 0 && args[j].data == t->data)
        arg_error << "kernel " << p.name << ": tensors " << io[j]->name << " and " << b.name
                  << " share storage";
    ptrs.push_back(t->data);
  }
  char err[1024] = {0};
  int rc = entry_(ptrs.data(), size_vec.data(), param_vec.data(), err, sizeof(err));
  if (rc != 0) arg_error << "kernel " << p.name << ": " << err;
}

std::shared_ptr<CpuKernel> compile(const ir::LoopProgram& program, const CompileOptions& options) {
  return compile_source(program, generate_source(program), {}, {}, {}, options);
}

std::shared_ptr<CpuKernel> compile(const tile::TileProgram& program,
                                   const CompileOptions& options) {
  return compile_source(program.source, generate_tile_source(program), program.specialised,
                        program.divisible, program.bounded, options);
}

std::shared_ptr<CpuKernel> compile_source(const ir::LoopProgram& program, std::string source,
                                          std::map<std::string, tile::Specialisation> specialised,
                                          std::map<std::string, tile::Divisibility> divisible,
                                          std::map<std::string, tile::PartBound> bounded,
                                          const CompileOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<CpuKernel> k(new CpuKernel());
  k->program_ = program;
  k->specialised_ = std::move(specialised);
  k->divisible_ = std::move(divisible);
  k->bounded_ = std::move(bounded);
  k->source_ = std::move(source);
  std::optional<std::string> cache = disk_cache::resolve_dir(options.cache_dir, "CPU back end");
  // The build (the compiler's output and its temporary files) happens in a private directory:
  // inside the cache, so that the object is renamed into it, else in the temporary directory.
  BuildDir build;
  if (!(cache && build.make(*cache))) {
    std::error_code ec;
    fs::path tmp = fs::temp_directory_path(ec);
    if (ec || !build.make(tmp))
      arg_error << "CPU back end: cannot create a directory to compile in"
                << (cache ? ", neither in the kernel cache '" + *cache + "' nor in" : ":")
                << " the temporary directory '" << (ec ? temp_dir_name() : tmp.string())
                << "'; set TMPDIR (or KINTSUGI_CACHE_DIR) to a writable directory";
  }
  const bool cached = cache && build.path.parent_path() == fs::path(*cache);
  const std::string build_dir = build.path.string();
  const Toolchain& tc = toolchain(options.cxx, build_dir, cache);
  std::vector<std::string> flags = tc.flags;
  flags.insert(flags.end(), options.extra_flags.begin(), options.extra_flags.end());
  std::string flag_text;
  for (const std::string& f : flags) flag_text += " " + shell_quote(f);
  uint64_t h = fnv1a(k->source_);
  h = fnv1a("\n" + flag_text + "\n" + tc.version + "\n" + options.cxx, h);
  k->key_ = hex64(h);
  fs::path dir = cached ? fs::path(*cache) : build.path;
  fs::path so = dir / (k->key_ + ".so"), meta = dir / (k->key_ + ".meta");
  if (cached) {
    k->cache_dir_ = *cache;
    k->library_path_ = so.string();
  }

  std::string error;
  if (cached && disk_cache::load_entry(so, meta, kCacheFormat, k->key_)) {
    k->handle_ = load_library(so, &error);
    if (k->handle_) {
      k->from_cache_ = true;
    } else {
      if (options.verbose)
        std::cerr << "kintsugi: cache entry " << so.string() << " does not load; rebuilding\n";
      disk_cache::remove_entry(so, meta);
    }
  }
  if (!k->handle_) {
    // The source goes to a fixed name (atomically; every writer writes the same text) so that
    // concurrent builds of one key produce identical objects; in the cache, it stays for reading.
    fs::path src = dir / (k->key_ + ".cpp");
    fs::path tmp_so = build.path / (k->key_ + ".so");
    if (!disk_cache::write_atomic(src, k->source_))
      internal_error << "CPU back end: cannot write " << src.string();
    std::string cmd = options.cxx + flag_text + " " + shell_quote(src.string()) + " -o " +
                      shell_quote(tmp_so.string());
    if (options.verbose) std::cerr << "kintsugi: " << cmd << "\n";
    std::string output;
    auto c0 = std::chrono::steady_clock::now();
    const double timeout = compile_timeout();
    subprocess::ChildResult rc = run_command(cmd, &output, timeout, build_dir);
    if (rc.timed_out)
      arg_error << "CPU back end: the host compiler exceeded the time limit of " << timeout
                << " s on the generated source of '" << program.name
                << "' (a very large program?); set KINTSUGI_COMPILE_TIMEOUT=SECONDS to raise the "
                   "limit (0: no limit)";
    if (rc.status != 0)
      internal_error << "CPU back end: the host compiler failed on the generated source "
                     << src.string() << " (exit " << rc.status << "):\n"
                     << output;
    if (options.verbose)
      std::cerr << "kintsugi: compiled in "
                << std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count()
                << " s\n";
    fs::path load_from = tmp_so;
    if (cached) {
      // Stored as a file that only we can write: the compiler's umask may leave it writable by
      // the group, and load_entry would then not trust it.
      std::string bytes;
      std::error_code ec;
      if (chmod(tmp_so.c_str(), 0755) == 0 && disk_cache::read_file(tmp_so, &bytes)) {
        fs::rename(tmp_so, so, ec);
        if (!ec) {
          load_from = so;
          if (!disk_cache::write_atomic(meta, disk_cache::meta_text(kCacheFormat, k->key_, bytes)))
            disk_cache::remove_entry(so, meta);  // a payload without meta is never trusted
        }
      }
    }
    k->handle_ = load_library(load_from, &error);
    if (!k->handle_) internal_error << "CPU back end: dlopen failed: " << error;
  }
  k->entry_ = reinterpret_cast<CpuKernel::EntryFn>(dlsym(k->handle_, "kintsugi_entry"));
  if (!k->entry_) internal_error << "CPU back end: " << so.string() << " has no kintsugi_entry";
  // The team of threads is started now, not by the first call (docs/perf.md: the first call of a
  // process paid 1.0-1.5 ms for creating it, against a 0.15 ms median).
  if (auto start = reinterpret_cast<int (*)()>(dlsym(k->handle_, "kintsugi_start_threads")))
    start();
  k->compile_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return k;
}

}  // namespace kintsugi::cpu
