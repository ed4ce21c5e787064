// \file Nvrtc.cpp
// compile_cuda: option list, cache key, disk cache, the NVRTC calls, and the check that the ptxas
// report covers every entry function.
//
// Invariant established: see Nvrtc.h. Built without the CUDA toolkit (KINTSUGI_HAVE_NVRTC
// undefined), the three functions that call NVRTC raise a RuntimeArgError that says how to get
// it; everything else is the same code in both builds.
#include "target/cuda/Nvrtc.h"

#ifdef KINTSUGI_HAVE_NVRTC
#include <nvrtc.h>
#endif

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <optional>
#include <utility>

#include "support/DiskCache.h"
#include "support/Hash.h"
#include "support/Subprocess.h"
#include "target/cuda/CudaTarget.h"
#include "target/cuda/DeviceHeaders.h"

namespace kintsugi::cuda {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kCacheFormat = "kintsugi-cuda-module 1";

// What one NVRTC compile returned.
struct NvrtcOutput {
  bool ok = false;
  std::string status;  // nvrtcGetErrorString of the compile's result
  std::string log, ptx, cubin;
};

#ifdef KINTSUGI_HAVE_NVRTC

void check(nvrtcResult result, const char* call) {
  if (result != NVRTC_SUCCESS)
    internal_error << "CUDA back end: " << call << " failed: " << nvrtcGetErrorString(result);
}

std::pair<int, int> library_version() {
  static const std::pair<int, int> version = [] {
    int major = 0, minor = 0;
    check(nvrtcVersion(&major, &minor), "nvrtcVersion");
    return std::pair<int, int>{major, minor};
  }();
  return version;
}

std::vector<int> supported_archs() {
  static const std::vector<int> archs = [] {
    int n = 0;
    check(nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
    std::vector<int> list(static_cast<size_t>(n));
    check(nvrtcGetSupportedArchs(list.data()), "nvrtcGetSupportedArchs");
    return list;
  }();
  return archs;
}

NvrtcOutput run_nvrtc(const std::string& source, const std::string& name,
                      const std::vector<std::string>& options) {
  std::vector<const char*> header_names, header_sources;
  for (const DeviceHeader& h : device_headers()) {
    // The embedded table is made of string literals, so both views end in a NUL.
    internal_assert(h.name.data()[h.name.size()] == '\0' &&
                    h.contents.data()[h.contents.size()] == '\0')
        << h.name;
    header_names.push_back(h.name.data());
    header_sources.push_back(h.contents.data());
  }
  nvrtcProgram program = nullptr;
  check(nvrtcCreateProgram(&program, source.c_str(), name.c_str(),
                           static_cast<int>(header_names.size()), header_sources.data(),
                           header_names.data()),
        "nvrtcCreateProgram");
  struct Destroy {
    nvrtcProgram program;
    ~Destroy() { nvrtcDestroyProgram(&program); }
  } destroy{program};
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  nvrtcResult result = nvrtcCompileProgram(program, static_cast<int>(argv.size()), argv.data());
  NvrtcOutput out;
  out.status = nvrtcGetErrorString(result);
  // Log and PTX sizes count a terminating NUL, which the strings do not keep.
  auto text = [&](auto size_fn, auto get_fn, const char* size_call, const char* get_call) {
    size_t n = 0;
    check(size_fn(program, &n), size_call);
    std::string s(n, '\0');
    check(get_fn(program, s.data()), get_call);
    while (!s.empty() && s.back() == '\0') s.pop_back();
    return s;
  };
  out.log = text(nvrtcGetProgramLogSize, nvrtcGetProgramLog, "nvrtcGetProgramLogSize",
                 "nvrtcGetProgramLog");
  if (result != NVRTC_SUCCESS) return out;
  out.ptx = text(nvrtcGetPTXSize, nvrtcGetPTX, "nvrtcGetPTXSize", "nvrtcGetPTX");
  size_t cubin_size = 0;
  check(nvrtcGetCUBINSize(program, &cubin_size), "nvrtcGetCUBINSize");
  out.cubin.resize(cubin_size);
  check(nvrtcGetCUBIN(program, out.cubin.data()), "nvrtcGetCUBIN");
  out.ok = true;
  return out;
}

#else

[[noreturn]] void missing_nvrtc() {
  throw RuntimeArgError(
      "the CUDA toolkit (NVRTC) was not found at build time; install nvidia-cuda-toolkit or CUDA "
      "13, then reconfigure and rebuild Kintsugi");
}

std::pair<int, int> library_version() {
  missing_nvrtc();
}

std::vector<int> supported_archs() {
  missing_nvrtc();
}

NvrtcOutput run_nvrtc(const std::string&, const std::string&, const std::vector<std::string>&) {
  missing_nvrtc();
}

#endif

// Rejects anything but sm_<N>, sm_<N>a or sm_<N>f with N supported by this NVRTC.
void check_arch(const std::string& arch) {
  std::vector<int> supported = supported_archs();
  bool ok = true;
  int number = 0;
  try {
    number = CudaTarget::parse(arch).sm;
  } catch (const UserError&) {
    ok = false;  // not sm_<N>[a|f]: refused below with the architectures there are
  }
  if (ok) ok = std::find(supported.begin(), supported.end(), number) != supported.end();
  if (ok) return;
  std::string list;
  for (int a : supported) list += (list.empty() ? "sm_" : ", sm_") + std::to_string(a);
  arg_error << "unsupported CUDA architecture '" << arch << "': NVRTC " << nvrtc_version()
            << " compiles for " << list
            << "; add the suffix 'a' for architecture-specific instructions (sm_90a for wgmma "
               "and setmaxnreg on H100/H200)";
}

// Strings packed as "<size>\n<bytes>" each: the cache payload (the PTX, the cubin and the log)
// and what the NVRTC child process sends back.
std::string pack(std::initializer_list<const std::string*> fields) {
  std::string out;
  for (const std::string* field : fields) out += std::to_string(field->size()) + "\n" + *field;
  return out;
}

bool unpack(std::string_view bytes, std::initializer_list<std::string*> fields) {
  for (std::string* field : fields) {
    size_t size = 0;
    size_t eol = bytes.find('\n');
    if (eol == std::string_view::npos) return false;
    auto [end, ec] = std::from_chars(bytes.data(), bytes.data() + eol, size);
    if (ec != std::errc() || end != bytes.data() + eol || size > bytes.size() - eol - 1)
      return false;
    field->assign(bytes.substr(eol + 1, size));
    bytes.remove_prefix(eol + 1 + size);
  }
  return bytes.empty();
}

std::string serialize(const CompiledModule& m) {
  return pack({&m.ptx, &m.cubin, &m.log});
}

bool deserialize(std::string_view bytes, CompiledModule* m) {
  return unpack(bytes, {&m->ptx, &m->cubin, &m->log});
}

// Runs NVRTC in a child process under the compile time limit (a library call cannot be
// interrupted in this process). The parent never calls NVRTC's compiler itself, so no thread of
// it can hold NVRTC's locks when another forks; check_arch's queries are answered once, before
// the first fork (static initialisation), and never again.
NvrtcOutput run_nvrtc_bounded(const std::string& source, const std::string& name,
                              const std::vector<std::string>& options) {
  const double timeout = subprocess::compile_timeout();
  std::string bytes;
  subprocess::ChildResult r = subprocess::run_in_child(
      [&](int fd) {
        std::string ok = "0", status, log, ptx, cubin;
        try {
          NvrtcOutput out = run_nvrtc(source, name, options);
          ok = out.ok ? "1" : "0";
          status = std::move(out.status);
          log = std::move(out.log);
          ptx = std::move(out.ptx);
          cubin = std::move(out.cubin);
        } catch (const std::exception& e) {
          ok = "E";
          status = e.what();
        }
        subprocess::write_all(fd, pack({&ok, &status, &log, &ptx, &cubin}));
      },
      &bytes, timeout);
  if (r.timed_out)
    arg_error << "CUDA back end: NVRTC exceeded the time limit of " << timeout << " s on '" << name
              << "' (a very large program?); set KINTSUGI_COMPILE_TIMEOUT=SECONDS to raise the "
                 "limit (0: no limit)";
  std::string ok;
  NvrtcOutput out;
  if (r.status != 0 || !unpack(bytes, {&ok, &out.status, &out.log, &out.ptx, &out.cubin}))
    internal_error << "CUDA back end: the NVRTC process for '" << name
                   << (r.status < 0 ? "' could not start" : "' ended without a result")
                   << " (exit status " << r.status << ")";
  if (ok == "E") internal_error << "CUDA back end: in the NVRTC process: " << out.status;
  out.ok = ok == "1";
  return out;
}

// The number of entry functions the PTX defines (".entry" directives).
size_t count_entries(std::string_view ptx) {
  size_t n = 0;
  while (!ptx.empty()) {
    size_t eol = ptx.find('\n');
    std::string_view line = ptx.substr(0, eol);
    ptx.remove_prefix(eol == std::string_view::npos ? ptx.size() : eol + 1);
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos || line.substr(first, 2) == "//") continue;
    if (line.find(".entry ") != std::string_view::npos) ++n;
  }
  return n;
}

}  // namespace

bool nvrtc_available() {
#ifdef KINTSUGI_HAVE_NVRTC
  return true;
#else
  return false;
#endif
}

std::string nvrtc_version() {
  auto [major, minor] = library_version();
  return std::to_string(major) + "." + std::to_string(minor);
}

CompiledModule compile_cuda(const std::string& source, const std::string& name,
                            const std::string& arch, const NvrtcOptions& options) {
  auto start = std::chrono::steady_clock::now();
  check_arch(arch);
  // --no-cache: where libcuda is loadable, NVRTC 13 otherwise serves repeated compiles from the
  // driver's compute cache (~/.nv/ComputeCache) without running ptxas, and the log then lacks the
  // resource report. Kintsugi's own cache keeps the log with the cubin.
  std::vector<std::string> flags = {"-std=c++17", "--gpu-architecture=" + arch, "--minimal",
                                    "--no-cache", "--ptxas-options=-v"};
  if (options.fast_math) flags.push_back("--use_fast_math");
  if (options.line_info) flags.push_back("-lineinfo");
  flags.insert(flags.end(), options.extra.begin(), options.extra.end());

  CompiledModule m;
  m.name = name;
  m.arch = arch;
  std::vector<std::string> key_parts = {name, arch};
  key_parts.insert(key_parts.end(), flags.begin(), flags.end());
  key_parts.push_back(nvrtc_version());
  key_parts.push_back(KINTSUGI_CUDA_TOOLKIT_VERSION);
  key_parts.push_back(hex64(device_headers_hash()));
  key_parts.push_back(source);
  uint64_t h = fnv1a(kCacheFormat);
  for (const std::string& part : key_parts) h = fnv1a("", 1, fnv1a(part, h));
  m.cache_key = hex64(h);

  fs::path payload, meta;
  std::optional<std::string> cache_dir;
  if (options.use_cache) cache_dir = disk_cache::resolve_dir(options.cache_dir, "CUDA back end");
  if (cache_dir) {
    fs::path dir = *cache_dir;
    payload = dir / (m.cache_key + ".cumodule");
    meta = dir / (m.cache_key + ".cumodule.meta");
    if (auto bytes = disk_cache::load_entry(payload, meta, kCacheFormat, m.cache_key)) {
      m.from_cache = deserialize(*bytes, &m);
      if (!m.from_cache) disk_cache::remove_entry(payload, meta);
    }
  }
  if (!m.from_cache) {
    NvrtcOutput out = run_nvrtc_bounded(source, name, flags);
    if (!out.ok)
      throw CudaCompileError("NVRTC could not compile '" + name + "' for " + arch + " (" +
                                 out.status + "):\n" + out.log,
                             out.log);
    m.ptx = std::move(out.ptx);
    m.cubin = std::move(out.cubin);
    m.log = std::move(out.log);
    // A failed store only costs a recompile next time: load_entry never trusts a partial entry.
    if (cache_dir) disk_cache::store_entry(payload, meta, kCacheFormat, m.cache_key, serialize(m));
  }
  m.resources = parse_ptxas_log(m.log);
  size_t entries = 0;
  for (const FunctionResources& f : m.resources.functions)
    if (f.entry && f.registers >= 0) ++entries;
  internal_assert(entries == count_entries(m.ptx))
      << "the ptxas report of '" << name << "' for " << arch << " describes " << entries
      << " entry functions, the PTX defines " << count_entries(m.ptx) << "; log:\n"
      << m.log;
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

}  // namespace kintsugi::cuda
