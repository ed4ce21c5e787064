// \file Emulator.cpp
// EmulatedModule and EmulatedCudaKernel (Emulator.h): the emulable translation unit, its host
// compile, the launches.
#include "Emulator.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>

#include "encode_tensor_map.h"
#include "kemu_runtime.h"
#include "support/DiskCache.h"
#include "support/Error.h"
#include "support/Hash.h"
#include "target/cpu/CpuPrelude.h"

namespace kintsugi::emu {

namespace fs = std::filesystem;

namespace {

// The generated source as the emulator compiles it: the dynamic shared memory declared as the
// current CTA's (whose shared addresses start at 0, aligned to any boundary).
std::string emulable(const std::string& code) {
  const std::regex shared(R"(extern __shared__ __align__\(\d+\) unsigned char ks_smem\[\];)");
  std::istringstream in(code);
  std::ostringstream out;
  std::string line;
  while (std::getline(in, line)) {
    line = std::regex_replace(line, shared, "unsigned char* ks_smem = ::kemu::dynamic_smem();");
    internal_assert(line.find("__shared__") == std::string::npos ||
                    line.find("extern") == std::string::npos)
        << "the emulator binds only ks_smem as dynamic shared memory: " << line;
    out << line << "\n";
  }
  return out.str();
}

void run_command(const std::string& cmd) {
  std::array<char, 4096> buf;
  std::string output;
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  internal_assert(pipe != nullptr) << "cannot run " << cmd;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) output.append(buf.data(), n);
  int status = pclose(pipe);
  internal_assert(status == 0) << cmd << " failed:\n" << output.substr(0, 4000);
}

// Host memory of a buffer: 64-byte aligned, every byte `fill`.
struct HostBuffer {
  HostBuffer(size_t bytes, unsigned char fill)
      : size((bytes + 63) / 64 * 64),
        data(static_cast<unsigned char*>(std::aligned_alloc(64, size)), &std::free) {
    std::memset(data.get(), fill, size);
  }
  size_t size;
  std::unique_ptr<unsigned char, decltype(&std::free)> data;
};

struct LaunchContext {
  void (*kernel)(cuda::KsArgs, int*);
  cuda::KsArgs* args;
  int* err;
};

void run_thread(void* c) {
  auto* l = static_cast<LaunchContext*>(c);
  l->kernel(*l->args, l->err);
}

// What the compiled emulation of a unit depends on besides the unit's text: the compile command
// and every emulated device header (tests/emu, with the library's plain C++ ones under
// src/target/cuda/device), hashed once a process.
uint64_t emulated_headers_hash(const std::string& command) {
  static const uint64_t headers = [] {
    std::vector<fs::path> files;
    for (const char* dir : {KINTSUGI_EMU_DIR, KINTSUGI_SOURCE_DIR "/src/target/cuda/device"})
      for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file() && (e.path().extension() == ".h" || e.path().extension() == ".cuh"))
          files.push_back(e.path());
    std::sort(files.begin(), files.end());
    uint64_t h = kFnv1aOffset;
    for (const fs::path& f : files) {
      std::string text;
      internal_assert(disk_cache::read_file(f, &text)) << "cannot read " << f.string();
      h = fnv1a(text, fnv1a(f.string(), h));
    }
    return h;
  }();
  return fnv1a(command, headers);
}

}  // namespace

EmulatedModule::EmulatedModule(const std::string& cuda_source) {
  std::ostringstream unit;
  unit << "#include <math.h>\n#include <stdint.h>\n#include <string.h>\nnamespace {\n"
       << cpu::kHalfConversions << "}  // namespace\n#include \"kintsugi_emu.h\"\n"
       << emulable(cuda_source);
  // The device headers: the emulated ones (tests/emu/include), which include the library's own
  // where those are plain C++ (found under src/target/cuda).
  // (No _FORTIFY_SOURCE: its checked longjmp may refuse a jump to another fiber's stack.)
  const std::string command =
      "c++ -std=c++17 -O1 -w -fPIC -shared -U_FORTIFY_SOURCE -I " KINTSUGI_EMU_DIR
      " -I " KINTSUGI_EMU_DIR "/include -I " KINTSUGI_SOURCE_DIR "/src/target/cuda";
  // The host compile takes most of an emulated test's time, and the tests compile the same units
  // many times over (sizes are symbolic; the eager-copy pass repeats the main one): a compiled
  // unit is kept in the build's emulator cache under the hash of all it depends on.
  const std::string key = hex64(fnv1a(unit.str(), emulated_headers_hash(command)));
  const fs::path cache = KINTSUGI_EMU_CACHE_DIR, so = cache / ("emu-" + key + ".so"),
                 meta = cache / ("emu-" + key + ".meta");
  const char* format = "kintsugi emulated kernels 1";
  internal_assert(disk_cache::check_dir(cache, true).empty())
      << "the emulator cache " << cache.string() << ": " << disk_cache::check_dir(cache, true);
  if (!disk_cache::load_entry(so, meta, format, key)) {
    char tmpl[] = "/tmp/kintsugi-emu-XXXXXX";
    internal_assert(mkdtemp(tmpl) != nullptr) << "cannot make a directory under /tmp";
    fs::path dir = tmpl, cpp = dir / "kernels.cpp", built = dir / "kernels.so";
    std::ofstream(cpp) << unit.str();
    run_command(command + " -o " + built.string() + " " + cpp.string());
    std::string payload;
    internal_assert(disk_cache::read_file(built, &payload)) << "cannot read " << built.string();
    fs::remove_all(dir);
    internal_assert(disk_cache::store_entry(so, meta, format, key, payload))
        << "cannot store the emulated kernels in " << cache.string();
  }
  library_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string why = library_ ? "" : dlerror();
  internal_assert(library_ != nullptr) << "dlopen of the emulated kernels failed: " << why;
}

EmulatedModule::~EmulatedModule() {
  if (library_) dlclose(library_);
}

void EmulatedModule::launch(const std::string& kernel, cuda::KsArgs& args, int* err, unsigned grid,
                            unsigned threads, unsigned dynamic_shared_bytes) const {
  void* entry = dlsym(library_, kernel.c_str());
  internal_assert(entry != nullptr) << "no kernel " << kernel << " in the emulated source";
  LaunchContext c{reinterpret_cast<void (*)(cuda::KsArgs, int*)>(entry), &args, err};
  if (const char* e = kemu::launch(run_thread, &c, grid, threads, dynamic_shared_bytes))
    internal_error << "emulated kernel " << kernel << ": " << e;
}

EmulatedCudaKernel::EmulatedCudaKernel(const tile::TileProgram& program,
                                       const cuda::CudaTarget& target)
    : program_(program),
      source_(cuda::generate_cuda_source(program, target)),
      module_(source_.code) {}

void EmulatedCudaKernel::run(const std::vector<runtime::Tensor*>& args,
                             const runtime::SizeMap& sizes, const runtime::ParamMap& params) {
  cuda::LaunchPlan l = cuda::plan_launch(program_, source_, sizes, params, args.size(), proven_);
  for (size_t i = 0; i < args.size(); ++i)
    cuda::check_operand(program_, l, i, args[i]->dtype, args[i]->shape);
  std::vector<int64_t> blocks = cuda::grid_blocks(source_, sizes, params);
  std::vector<HostBuffer> storage;  // operands, then intermediates: outputs and scratch poisoned
  storage.reserve(args.size() + l.intermediates.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const cuda::LaunchPlan::Slot& o = l.operands[i];
    bool input = o.buffer->role == ir::BufferRole::Input;
    HostBuffer& b = storage.emplace_back(o.bytes, input ? 0 : 0xff);
    if (input) std::memcpy(b.data.get(), args[i]->ptr(), args[i]->data.size());
    l.args.bufs[o.index] = reinterpret_cast<uintptr_t>(b.data.get());
  }
  for (const cuda::LaunchPlan::Slot& s : l.intermediates)
    l.args.bufs[s.index] =
        reinterpret_cast<uintptr_t>(storage.emplace_back(s.bytes, 0xff).data.get());
  int err = 0;
  for (size_t k = 0; k < source_.launches.size(); ++k) {
    const cuda::KernelLaunch& kl = source_.launches[k];
    if (blocks[k] <= 0) continue;
    cuda::KsArgs args = l.args;
    const std::vector<cuda::TensorMapSpec> specs = cuda::tensor_map_specs(program_, l, kl);
    for (size_t m = 0; m < specs.size(); ++m)
      if (specs[m].address != 0) args.maps[m] = emulated_tensor_map(specs[m]);
    module_.launch(kl.name, args, &err, static_cast<unsigned>(blocks[k]),
                   static_cast<unsigned>(kl.threads),
                   static_cast<unsigned>(kl.dynamic_shared_bytes));
  }
  cuda::throw_failed_check(program_, source_, err);
  for (size_t i = 0; i < args.size(); ++i)
    if (l.operands[i].buffer->role == ir::BufferRole::Output)
      std::memcpy(args[i]->ptr(), storage[i].data.get(), args[i]->data.size());
}

}  // namespace kintsugi::emu
